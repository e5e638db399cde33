"""Sweeps: the sweep file's validation, one compile per sweep, resume and extension, and (slow)
bit-for-bit results across device counts and chunk sizes and after a SIGKILL."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from jaxattn import sweep
from jaxattn.sweep import engine

TINY = """
model = "slm_sgd"
[fixed]
D = 32
t_max = 1.0
n_records = 2
n_test = 20
prior = { family = "onehot", F = 2, nu = 9.0 }
[grid]
seed = { range = [0, 3] }
H = [1, 2]
eta = { logspace = [0.2, 1.0, 2] }
[execution]
block = 2
chunk_size = 4
"""


def _equal(a, b):
    assert set(a.data_vars) == set(b.data_vars)
    for k in a.data_vars:
        np.testing.assert_array_equal(a[k].values, b[k].values, err_msg=k)  # NaN == NaN here


def test_three_mistakes_reported_at_once_with_locations():
    text = """
model = "slm_sgd"
[fixed]
D = "many"
[grid]
eta = { logspace = [0.0, 1.0, 3] }
H = [1, 2]
colour = [1]
"""
    with pytest.raises(sweep.SweepFileError) as exc:
        sweep.parse(text)
    problems = exc.value.problems
    assert len(problems) == 3, problems
    assert any(p.startswith("fixed.D:") for p in problems)
    assert any(p.startswith("grid.eta.logspace:") for p in problems)
    assert any(p.startswith("grid.colour:") for p in problems)


def test_grid_syntax_ranges_zips_and_flat_order():
    s = sweep.parse(TINY.replace("[execution]", "[grid.zip.shape]\nL = [4, 8]\nbatch_size = [1, 2]\n[execution]")
                    .replace("batch_size = [1, 2]", "signal = [1.0, 2.0]"))
    assert [d.name for d in s.dims] == ["seed", "H", "eta", "shape"]
    assert s.shape == (3, 2, 2, 2) and s.n_points == 24
    np.testing.assert_allclose(s.dims[2].values["eta"], [0.2, 1.0])
    pts = s.points()
    assert pts["seed"][:8] == [0] * 8 and pts["L"][:2] == [4, 8] and pts["signal"][:2] == [1.0, 2.0]
    with pytest.raises(sweep.SweepFileError, match="equal lengths"):
        sweep.parse(TINY + "[grid.zip.bad]\nL = [4]\nsignal = [1.0, 2.0]\n".replace("[grid.zip", "\n[grid.zip"))


def test_unknown_model_and_keys():
    with pytest.raises(sweep.SweepFileError) as exc:
        sweep.parse('model = "nope"\nextra = 1\n')
    assert any(p.startswith("model:") for p in exc.value.problems)
    assert any(p.startswith("extra:") for p in exc.value.problems)


def test_one_compile_per_sweep_resume_and_extend(tmp_path):
    s = sweep.parse(TINY)
    out = str(tmp_path / "store")
    before = engine.TRACE_COUNT.get("slm_sgd", 0)
    rep = sweep.run(s, out, max_chunks=1)
    assert rep.computed == (0,) and rep.n_chunks == 3
    st = sweep.status(out)
    assert st["done"] == [0] and st["pending"] == [1, 2]
    with pytest.raises(ValueError, match="not finished"):
        sweep.load(out)
    part = sweep.load(out, complete=False)
    assert int(part["done"].sum()) == 4 and np.isnan(part["error"].where(~part["done"]).values).all()
    rep = sweep.run(s, out)  # resume: the finished chunk is skipped
    assert rep.skipped == (0,) and rep.computed == (1, 2)
    assert sweep.status(out)["seconds_per_chunk"] > 0
    assert engine.TRACE_COUNT["slm_sgd"] - before == 1  # 12 points, 3 chunks, one trace
    ds = sweep.load(out)
    assert dict(ds["error"].sizes) == {"seed": 3, "H": 2, "eta": 2, "time": 3}
    assert np.isnan(ds["M"].sel(H=1).values[..., 1, :]).all()  # the padded head
    assert np.isfinite(ds["error"].values).all() and not ds["diverged"].any()

    # a point's numbers depend on its values only: the same point in a different grid agrees
    alone = sweep.run(sweep.parse(TINY.replace("seed = { range = [0, 3] }", "seed = [2]")),
                      str(tmp_path / "alone"))
    assert alone.n_chunks == 1
    _equal(sweep.load(str(tmp_path / "alone")), ds.sel(seed=[2]))

    bigger = sweep.parse(TINY.replace("H = [1, 2]", "H = [1, 2, 3]"))
    with pytest.raises(sweep.SweepChanged, match="extend"):
        sweep.run(bigger, out)
    with pytest.raises(sweep.SweepChanged, match="fixed"):
        sweep.run(sweep.parse(TINY.replace("D = 32", "D = 40")), out)
    rep = sweep.run(bigger, out, extend=True)
    assert rep.skipped == (0, 1, 2) and len(rep.computed) == 2  # only the 6 new points
    ext = sweep.load(out)
    assert ext.sizes["H"] == 3 and np.isfinite(ext["error"].sel(H=3).values).all()
    st = sweep.status(out)
    assert st["pending"] == [] and st["failed"] == {} and len(st["done"]) == 5


@pytest.mark.slow
def test_diverged_points_listed(tmp_path):
    s = sweep.parse(TINY.replace("eta = { logspace = [0.2, 1.0, 2] }", "eta = [0.2, 1e6]")
                    .replace("seed = { range = [0, 3] }", "seed = [0]").replace("D = 32", "D = 32\nactivation = 'linear'"))
    out = str(tmp_path / "div")
    sweep.run(s, out)
    st = sweep.status(out)
    assert {p["eta"] for p in st["diverged"]} == {1e6}
    assert len(st["diverged"]) == 2  # both H at the huge step, flagged, not hidden
    ds = sweep.load(out)
    assert ds["diverged"].sel(eta=1e6).all() and not ds["diverged"].sel(eta=0.2).any()


_RUNNER = textwrap.dedent("""
    import json, sys, jax
    jax.config.update("jax_num_cpu_devices", 4)
    from jaxattn import sweep
    s = sweep.parse(open(sys.argv[1]).read())
    for out, n_dev, chunk in json.loads(sys.argv[2]):
        sweep.run(s, out, devices=jax.devices()[:n_dev], chunk_size=chunk)
    print("ok")
""")


@pytest.mark.slow
def test_bit_for_bit_across_devices_and_chunk_sizes(tmp_path):
    f = tmp_path / "tiny.toml"
    f.write_text(TINY)
    runs = [(str(tmp_path / "d4"), 4, 8), (str(tmp_path / "d1"), 1, 8), (str(tmp_path / "c4"), 4, 2)]
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=4"}
    r = subprocess.run([sys.executable, "-c", _RUNNER, str(f), json.dumps(runs)], env=env,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    ref = sweep.load(runs[1][0])
    for out, _, _ in (runs[0], runs[2]):
        _equal(sweep.load(out), ref)


@pytest.mark.slow
def test_kill_and_resume(tmp_path):
    f = tmp_path / "tiny.toml"
    # 24 points in chunks of 4 (two devices, blocks of 2): 6 chunks
    f.write_text(TINY.replace("t_max = 1.0", "t_max = 4.0").replace("range = [0, 3]", "range = [0, 6]"))
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    cmd = [sys.executable, "-m", "jaxattn", "sweep", "run", str(f), "--no-progress"]
    killed, full = str(tmp_path / "killed"), str(tmp_path / "full")
    subprocess.run(cmd + ["--out", full], env=env, check=True, capture_output=True, timeout=600)

    proc = subprocess.Popen(cmd + ["--out", killed], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    chunks = os.path.join(killed, "chunks")
    deadline = time.time() + 300
    while time.time() < deadline:
        if os.path.isdir(chunks) and len([p for p in os.listdir(chunks) if p.endswith(".nc")]) >= 2:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    survived = {p for p in os.listdir(chunks) if p.endswith(".nc") and not p.startswith(".")}
    assert 2 <= len(survived) < 6, survived  # killed mid-sweep
    open(os.path.join(chunks, ".c000005.nc.tmp-1"), "wb").write(b"half a file")  # a write cut short

    subprocess.run(cmd + ["--out", killed], env=env, check=True, capture_output=True, timeout=600)
    # the rerun computed exactly the chunks the kill left unfinished: none twice, none lost
    events = [json.loads(line) for line in open(os.path.join(killed, "log.jsonl"))]
    rerun_pid = events[-1]["pid"]
    rerun = [e["chunk"] for e in events if e["pid"] == rerun_pid]
    n_chunks = len(json.load(open(os.path.join(killed, "manifest.json")))["chunks"])
    finished_before = {int(p[1:7]) for p in survived}
    assert n_chunks == 6 and len(rerun) == len(set(rerun))
    assert sorted(rerun) == sorted(set(range(n_chunks)) - finished_before)
    _equal(sweep.load(killed), sweep.load(full))
    assert not [p for p in os.listdir(chunks) if ".tmp-" in p]


@pytest.mark.slow  # long; CI runs it with the slow checks
def test_copy_adam_sweep_matches_copy_train(tmp_path):
    from jaxattn import copy as cp

    text = """
model = "copy_adam"
[fixed]
L = 8
V = 4
n_steps = 150
n_test = 100
[grid]
P = [20, 100]
seed = [0, 1]
init = ["random", "copy"]
[execution]
block = 4
"""
    sweep.run(sweep.parse(text), str(tmp_path / "adam"))
    sw = sweep.load(str(tmp_path / "adam"))
    ref = cp.train(cp.CopyConfig(L=8, V=4, n_steps=150, n_test=100), P=[20, 100], seed=[0, 1])
    for v in ("prev_weight", "a1", "aG", "U", "train_error", "test_error"):
        np.testing.assert_allclose(sw[v].values, ref[v].transpose(*sw[v].dims).values, rtol=2e-5, atol=2e-6,
                                   err_msg=v)
    np.testing.assert_array_equal(sw["copy_basin"].values, ref["copy_basin"].transpose(*sw["copy_basin"].dims).values)


@pytest.mark.slow
def test_slm_ode_sweep_matches_direct_integration(tmp_path):
    import jax
    import jax.numpy as jnp

    from jaxattn import priors
    from jaxattn.models.multihead import Arch
    from jaxattn.theory import slm_ode, slm_risk

    text = """
model = "slm_ode"
[fixed]
D = 100
t_max = 4.0
n_records = 3
n_bank = 400
[grid]
seed = [3]
eta = [0.5, 2.0]
noise = [0, 1]
[execution]
block = 2
"""
    sweep.run(sweep.parse(text), str(tmp_path / "ode"))
    ds = sweep.load(str(tmp_path / "ode"))
    assert not ds["diverged"].any()
    with jax.enable_x64(True):
        y0 = jax.tree_util.tree_map(lambda x: x[0], slm_ode.random_initial_conditions(jax.random.key(3), 2, 2, 100))
        bank = slm_risk.make_bank(priors.onehot(2, 9.0), 4, 2, n=400, key=jax.random.key(0), dtype=jnp.float64)
        args = slm_ode.ODEArgs(jnp.asarray([2.0]), jnp.asarray([1.0]), jnp.asarray([1.0]), jnp.ones((1, 2), bool),
                               jnp.ones((1, 4), bool))
        y0 = jax.tree_util.tree_map(lambda x: x[None], y0)
        sol = slm_ode.integrate_grid(y0, args, bank, jnp.asarray(ds["time"].values), Arch("bayes_softmax"))
    np.testing.assert_allclose(ds["M"].sel(seed=3, eta=2.0, noise=1).values, np.asarray(sol.M[0]), rtol=1e-9)
    np.testing.assert_allclose(ds["risk"].sel(seed=3, eta=2.0, noise=1).values, np.asarray(sol.risk[0]), rtol=1e-9)
    # the noise term matters at large eta (the gradient-flow limit at small eta is tested in test_slm_ode)
    q = ds["Q"].sel(seed=3, eta=2.0).isel(time=-1)
    assert float(np.abs(q.sel(noise=1) - q.sel(noise=0)).max()) > 1e-3


@pytest.mark.slow
def test_copy_sgld_sweep_chains_do_not_depend_on_the_grid(tmp_path):
    text = """
model = "copy_sgld"
[fixed]
L = 8
V = 4
N = 20.0
n_steps = 100
burn_in = 100
thin = 10
n_test = 100
[grid]
P = [50, 200]
start = ["uniform", "copy"]
chain = { range = [0, 2] }
[execution]
block = 2
"""
    sweep.run(sweep.parse(text), str(tmp_path / "a"))
    ds = sweep.load(str(tmp_path / "a"))
    assert dict(ds["prev_weight"].sizes) == {"P": 2, "start": 2, "chain": 2, "draw": 10}
    assert np.isfinite(ds["prev_weight"].values).all() and not ds["diverged"].any()
    sweep.run(sweep.parse(text.replace("P = [50, 200]", "P = [200]").replace("block = 2", "block = 2\nchunk_size = 2")),
              str(tmp_path / "b"))
    _equal(sweep.load(str(tmp_path / "b")), ds.sel(P=[200]))


def test_example_sweep_files_are_valid():
    import glob

    files = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "..", "examples", "*.toml")))
    models = {sweep.load_file(f).model for f in files}
    assert models == {"slm_sgd", "slm_ode", "copy_adam", "copy_sgld", "copy_theory"}


def test_cli_reports_all_problems(tmp_path):
    from click.testing import CliRunner

    from jaxattn.cli import main

    f = tmp_path / "bad.toml"
    f.write_text('model = "copy_adam"\n[fixed]\nV = 1\n[grid]\ninit = ["random", "sideways"]\n')
    r = CliRunner().invoke(main, ["sweep", "run", str(f)])
    assert r.exit_code == 2
    assert "grid.init: init must be one of" in r.output and "fixed: V must be" in r.output


@pytest.mark.parametrize("attention", ["softmax", "linear"])
def test_copy_theory_sweep_matches_the_theory_curves(tmp_path, attention):
    from jaxattn.models import copy as cm
    from jaxattn.theory import copy_phase as cph

    text = f"""
model = "copy_theory"
[fixed]
attention = "{attention}"
[grid]
L = [8, 32]
P = {{ logspace = [50, 2000, 6] }}
[execution]
block = 4
"""
    sweep.run(sweep.parse(text), str(tmp_path / "th"))
    ds = sweep.load(str(tmp_path / "th"))
    curves = cph.softmax_curves if attention == "softmax" else cph.linear_curves
    for L in (8, 32):
        ref = curves(cm.CopyArch(L, 4, attention), ds.P.values)
        for v in ("prev_weight", "test_error", "S"):
            np.testing.assert_allclose(ds[v].sel(L=L).values, ref[v], rtol=1e-8, atol=1e-10, err_msg=f"{v} L={L}")
