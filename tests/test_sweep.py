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
    rep = sweep.run(s, out)  # resume: the finished chunk is skipped
    assert rep.skipped == (0,) and rep.computed == (1, 2)
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
