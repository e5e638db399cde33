"""Sweeps: the sweep file's validation, resume and extension, status, and the sweep models
against their direct computations (the engine's contract, bits and SIGKILL are in test_engine)."""

import os

import numpy as np
import pytest

from jaxattn import engine

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
    with pytest.raises(engine.SweepFileError) as exc:
        engine.parse(text)
    problems = exc.value.problems
    assert len(problems) == 3, problems
    assert any(p.startswith("fixed.D:") for p in problems)
    assert any(p.startswith("grid.eta.logspace:") for p in problems)
    assert any(p.startswith("grid.colour:") for p in problems)


def test_grid_syntax_ranges_zips_and_flat_order():
    s = engine.parse(TINY.replace("[execution]", "[grid.zip.shape]\nL = [4, 8]\nbatch_size = [1, 2]\n[execution]")
                    .replace("batch_size = [1, 2]", "signal = [1.0, 2.0]"))
    assert [d.name for d in s.dims] == ["seed", "H", "eta", "shape"]
    assert s.shape == (3, 2, 2, 2) and s.n_points == 24
    np.testing.assert_allclose(s.dims[2].values["eta"], [0.2, 1.0])
    pts = s.points()
    assert pts["seed"][:8] == [0] * 8 and pts["L"][:2] == [4, 8] and pts["signal"][:2] == [1.0, 2.0]
    with pytest.raises(engine.SweepFileError, match="equal lengths"):
        engine.parse(TINY + "[grid.zip.bad]\nL = [4]\nsignal = [1.0, 2.0]\n".replace("[grid.zip", "\n[grid.zip"))


def test_unknown_model_and_keys():
    with pytest.raises(engine.SweepFileError) as exc:
        engine.parse('model = "nope"\nextra = 1\n')
    assert any(p.startswith("model:") for p in exc.value.problems)
    assert any(p.startswith("extra:") for p in exc.value.problems)


@pytest.mark.slow  # about 27 s: the default run stays under 10 minutes
def test_one_compile_per_sweep_resume_and_extend(tmp_path):
    s = engine.parse(TINY)
    out = str(tmp_path / "store")
    rep = engine.run_sweep(s, out, max_chunks=1)
    assert rep.computed == (0,) and rep.n_chunks == 3
    st = engine.status(out)
    assert st["done"] == [0] and st["pending"] == [1, 2]
    with pytest.raises(ValueError, match="not finished"):
        engine.load_store(out)
    part = engine.load_store(out, complete=False)
    assert int(part["done"].sum()) == 4 and np.isnan(part["error"].where(~part["done"]).values).all()
    rep = engine.run_sweep(s, out)  # resume: the finished chunk is skipped
    assert rep.skipped == (0,) and rep.computed == (1, 2)
    assert engine.status(out)["seconds_per_chunk"] > 0
    ds = engine.load_store(out)
    assert dict(ds["error"].sizes) == {"seed": 3, "H": 2, "eta": 2, "time": 3}
    assert np.isnan(ds["M"].sel(H=1).values[..., 1, :]).all()  # the padded head
    assert np.isfinite(ds["error"].values).all() and not ds["diverged"].any()

    # a point's numbers depend on its values only: the same point in a different grid agrees
    alone = engine.run_sweep(engine.parse(TINY.replace("seed = { range = [0, 3] }", "seed = [2]")),
                      str(tmp_path / "alone"))
    assert alone.n_chunks == 1
    _equal(engine.load_store(str(tmp_path / "alone")), ds.sel(seed=[2]))

    bigger = engine.parse(TINY.replace("H = [1, 2]", "H = [1, 2, 3]"))
    with pytest.raises(engine.SweepChanged, match="extend"):
        engine.run_sweep(bigger, out)
    with pytest.raises(engine.SweepChanged, match="fixed"):
        engine.run_sweep(engine.parse(TINY.replace("D = 32", "D = 40")), out)
    rep = engine.run_sweep(bigger, out, extend=True)
    assert rep.skipped == (0, 1, 2) and len(rep.computed) == 2  # only the 6 new points
    ext = engine.load_store(out)
    assert ext.sizes["H"] == 3 and np.isfinite(ext["error"].sel(H=3).values).all()
    st = engine.status(out)
    assert st["pending"] == [] and st["failed"] == {} and len(st["done"]) == 5


@pytest.mark.slow
def test_diverged_points_listed(tmp_path):
    s = engine.parse(TINY.replace("eta = { logspace = [0.2, 1.0, 2] }", "eta = [0.2, 1e6]")
                    .replace("seed = { range = [0, 3] }", "seed = [0]").replace("D = 32", "D = 32\nactivation = 'linear'"))
    out = str(tmp_path / "div")
    engine.run_sweep(s, out)
    st = engine.status(out)
    assert {p["eta"] for p in st["diverged"]} == {1e6}
    assert len(st["diverged"]) == 2  # both H at the huge step, flagged, not hidden
    ds = engine.load_store(out)
    assert ds["diverged"].sel(eta=1e6).all() and not ds["diverged"].sel(eta=0.2).any()


@pytest.mark.slow
def test_slm_ode_sweep_starts_each_seed_from_its_sgd_run(tmp_path):
    """The ODE sweep starts each seed from its online-SGD run's initial order parameters: it
    integrates what the ODEs integrate from the start that ``slm.train`` records for that seed."""
    from jaxattn import slm
    from jaxattn.slm import ode as slm_ode

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
"""
    engine.run_sweep(engine.parse(text), str(tmp_path / "ode"))
    ds = engine.load_store(str(tmp_path / "ode"))
    assert not ds["diverged"].any()
    sgd = slm.train(slm.SLMConfig(D=100, times=(0.0,), n_test=16), seed=3).isel(seed=0, H=0, L=0, eta=0, signal=0)
    start = slm_ode.OrderParams(*(sgd[k].values[:1] for k in ("M", "Q", "b")))  # seed 3's, as start 0
    cfg = slm.SLMODEConfig(D=100, t_max=4.0, n_records=3, n_bank=400)
    sol = slm.integrate(cfg, start=start, seed=0, eta=2.0, noise=1.0).isel(seed=0, H=0, L=0, eta=0, signal=0, noise=0)
    # the starts agree to float32 rounding (SGD records M and Q in float32), the solutions to the
    # solver's tolerance
    np.testing.assert_allclose(ds["M"].sel(seed=3, eta=2.0, noise=1).values, sol["M"].values, rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(ds["risk"].sel(seed=3, eta=2.0, noise=1).values, sol["risk"].values, rtol=2e-5)
    # the noise term matters at large eta (the gradient-flow limit at small eta is tested in test_slm_ode)
    q = ds["Q"].sel(seed=3, eta=2.0).isel(time=-1)
    assert float(np.abs(q.sel(noise=1) - q.sel(noise=0)).max()) > 1e-3


def test_example_sweep_files_are_valid():
    import glob

    files = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "..", "examples", "*.toml")))
    models = {engine.load_file(f).model for f in files}
    assert models == {"slm_sgd", "slm_ode", "copy_adam", "copy_sgld", "copy_theory", "copy_landscape"}


def test_cli_reports_all_problems(tmp_path):
    from click.testing import CliRunner

    from jaxattn.cli import main

    f = tmp_path / "bad.toml"
    f.write_text('model = "copy_adam"\n[fixed]\nV = 1\n[grid]\ninit = ["random", "sideways"]\n')
    r = CliRunner().invoke(main, ["sweep", "run", str(f)])
    assert r.exit_code == 2
    assert "grid.init: init must be one of" in r.output and "fixed.V: V must be" in r.output


@pytest.mark.parametrize("attention", ["softmax", "linear"])
def test_copy_theory_sweep_matches_the_theory_curves(tmp_path, attention):
    from jaxattn.copyhead import curves, network

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
    engine.run_sweep(engine.parse(text), str(tmp_path / "th"))
    ds = engine.load_store(str(tmp_path / "th"))
    theory = curves.softmax_curves if attention == "softmax" else curves.linear_curves
    for L in (8, 32):
        ref = theory(network.CopyArch(L, 4, attention), ds.P.values)
        for v in ("prev_weight", "test_error", "S"):
            np.testing.assert_allclose(ds[v].sel(L=L).values, ref[v], rtol=1e-8, atol=1e-10, err_msg=f"{v} L={L}")
