"""The copy head's sampled phase diagram: the critical point of a line of rows, bad input named
before any work, a killed run resumed from its rows, and the command's JSON and figure."""

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

from jaxattn.cli import main
from jaxattn.copyhead import landscape
from jaxattn.copyhead import profile as landscape_profile
from jaxattn.copyhead.curves import theory_summary
from jaxattn.copyhead.landscape import _phase
from jaxattn.copyhead.network import CopyArch


def _row(first_order, barrier, err):
    return {"first_order_sampled": first_order, "barrier": barrier, "barrier_err": err}


def test_critical_point_brackets_the_change_and_interpolates_the_margin_in_ln_x():
    """Margins ``barrier / err - 2`` of -1 and +1 at ``N = 2`` and ``8``: the zero is halfway in
    ``ln N``, at ``sqrt(2 * 8) = 4``; margins -1 and +3 put it a quarter of the way, at
    ``2 * 4 ** 0.25``."""
    rows = [_row(False, 0.0, 0.0), _row(False, 1.0, 1.0), _row(True, 3.0, 1.0), _row(True, 9.0, 1.0)]
    c = landscape.critical_point([1, 2, 8, 20], rows)
    assert c["bracket"] == [2.0, 8.0] and c["value"] == pytest.approx(4.0, rel=1e-12)
    rows[2] = _row(True, 5.0, 1.0)
    assert landscape.critical_point([1, 2, 8, 20], rows)["value"] == pytest.approx(2 * 4**0.25, rel=1e-12)
    # all on one side, a change the wrong way, or two changes: not bracketed
    assert landscape.critical_point([1, 2], [_row(True, 9, 1), _row(True, 9, 1)]) is None
    assert landscape.critical_point([1, 2], [_row(True, 9, 1), _row(False, 0, 1)]) is None
    flip = [_row(False, 0, 1), _row(True, 9, 1), _row(False, 0, 1), _row(True, 9, 1)]
    assert landscape.critical_point([1, 2, 3, 4], flip) is None
    with pytest.raises(ValueError, match="increasing"):
        landscape.critical_point([2, 1], rows[:2])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--L", "1,12"], "L must be a list of integers >= 2, got [1, 12]"),
        (["--N", "0"], "N must be > 0"),
        (["--V", "1"], "Error: --V must be >= 2, got 1"),
        (["--swap-every", "0"], "Error: --swap-every must be >= 1, got 0"),
        (["--chains", "1"], "Error: --chains must be >= 2, got 1"),
        (["--L-max", "64"], "--L-max: not read with --sampled"),
    ],
)
def test_bad_input_is_named_before_any_work(args, message, tmp_path):
    r = CliRunner().invoke(main, ["copy", "phase-diagram", "--sampled", "--out", str(tmp_path), *args])
    assert r.exit_code == 2 and message in r.output, r.output
    assert not (tmp_path / "rows").exists()


def test_sampler_options_need_sampled(tmp_path):
    r = CliRunner().invoke(main, ["copy", "phase-diagram", "--N", "2", "--chains", "3", "--out", str(tmp_path)])
    assert r.exit_code == 2 and "--N, --chains: these options need --sampled" in r.output, r.output


def test_a_killed_run_resumes_from_its_rows(tmp_path, monkeypatch):
    """Each row is written as it finishes; a second call computes only the rows missing, and a
    row of other sampler settings is refused, not reused."""
    calls = []

    def fake_point(arch, N, **kw):
        calls.append((arch.L, N))
        if len(calls) == 3 and N == 20.0:
            raise KeyboardInterrupt  # killed during the third point
        return {"L": arch.L, "N": N, "first_order_sampled": N > 3, "barrier": 4.0 * N, "barrier_err": 1.0}

    monkeypatch.setattr(_phase, "phase_point", fake_point)
    out = str(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        landscape.sampled_phase_diagram([32], [1, 2, 20], out=out, burn_in=100)
    assert calls == [(32, 1.0), (32, 2.0), (32, 20.0)]
    r = landscape.sampled_phase_diagram([32], [1, 2, 20], out=out, burn_in=100)
    assert calls[3:] == [(32, 20.0)] and [x["N"] for x in r["rows"]] == [1.0, 2.0, 20.0]
    # margins 2 - 2 = 0 at N = 2 (no jump) and 80 - 2 at N = 20: the zero at N = 2
    assert r["critical_N_sampled"]["32"] == {"value": pytest.approx(2.0), "bracket": [2.0, 20.0]}
    with pytest.raises(ValueError, match="other settings"):
        landscape.sampled_phase_diagram([32], [1], out=out, burn_in=200)
    assert len(calls) == 4


def test_cli_json_and_figure(tmp_path):
    """One short point (200 SGLD steps a window: this checks the paths and the theory columns,
    not the sampled numbers, which the slow landscape tests check at full length)."""
    short = ["--burn-in", "100", "--n-draws", "10", "--thin", "5", "--reweight-span", "8"]
    args = ["copy", "phase-diagram", "--sampled", "--L", "8", "--N", "20", *short, "--out", str(tmp_path)]
    r = CliRunner().invoke(main, [*args, "--no-progress", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout.strip().splitlines()[-1])
    (row,) = out["rows"]
    assert set(row) == set(_phase.ROW_KEYS)
    assert row["L"] == 8 and row["V"] == 4 and row["N"] == 20.0
    s = theory_summary(CopyArch(8, 4), 20.0)
    assert row["p_star_reduced"] == pytest.approx(s["p_star"], rel=1e-12) and row["first_order_reduced"] is False
    assert row["P"] == [round(s["p_star"])]
    assert math.isfinite(row["p_star_sampled"]) and row["p_star_sampled_err"] > 0
    assert out["critical_N_sampled"] == {} and out["critical_L_sampled"] == {}
    assert out["figure"] == str(tmp_path / "copy_phase_sampled.png") and (tmp_path / "copy_phase_sampled.png").stat().st_size > 0
    assert "L=8 N=20: P* " in r.stderr


def _ladders(shifts, n_windows=10, n_draws=200, seed=0):
    """Exact draws of harmonic windows on a standard normal target in ``c``: window ``k``
    samples ``N(kappa c_k / (1 + kappa), 1 / (1 + kappa))``; ladder ``j``'s draws are moved by
    ``shifts[j]`` in every window, as a slow mode that holds a whole ladder off would."""
    from types import SimpleNamespace

    from jaxattn.core import umbrella

    rng = np.random.default_rng(seed)
    w = umbrella.windows(-2.0, 2.0, n_windows)
    kappa = w.spring[:, None, None]
    mean = kappa * w.centers[:, None, None] / (1 + kappa) + np.asarray(shifts, float)[None, :, None]
    a = mean + rng.standard_normal((n_windows, len(shifts), n_draws)) / np.sqrt(1 + kappa)
    draws = umbrella.WindowDraws(a, np.zeros((n_windows, len(shifts)), bool))
    return SimpleNamespace(draws=draws, windows=w, dS=None), umbrella


def test_ladder_spread_matches_mbar_on_independent_ladders_and_sees_a_slow_mode():
    """The basins ``c > 0`` and ``c < 0`` of a standard normal: log-odds 0. Eight independent
    ladders: the spread between them estimates the same error as MBAR's (their ratio is
    ``sqrt(chi2_7 / 7)``-distributed, inside [0.37, 1.59] with 99% probability). Eight ladders
    held alternately at ``+-0.3``: MBAR's error, which takes the draws as independent, stays
    the same, and the spread is several times larger."""
    L = 32
    a_bar = float(landscape_profile.prev_weight(0.0, L))
    prof, umbrella = _ladders([0.0] * 8)
    p, dp = umbrella.probability(prof.draws, prof.windows, lambda c: c > 0)
    mbar_err = dp / (p * (1 - p))
    assert abs(np.log(p / (1 - p))) < 4 * mbar_err
    spread = float(landscape.ladder_spread(prof, a_bar, L)[0])
    assert 0.37 < spread / mbar_err < 1.59, (spread, mbar_err)
    stuck, _ = _ladders([0.3, -0.3] * 4)
    p, dp = umbrella.probability(stuck.draws, stuck.windows, lambda c: c > 0)
    stuck_spread = float(landscape.ladder_spread(stuck, a_bar, L)[0])
    assert stuck_spread > 3 * dp / (p * (1 - p)), (stuck_spread, dp / (p * (1 - p)))
    with pytest.raises(ValueError, match="at least 2 ladders"):
        landscape.ladder_spread(_ladders([0.0])[0], a_bar, L)


@pytest.mark.slow  # about a minute on 2 cores
def test_umbrella_basins_agree_with_nuts_where_nuts_crosses_freely():
    """An independent check of the whole umbrella pipeline (windows, exchange, MBAR, the basins'
    split): at ``L = 8, V = 4, N = 1, P = 79`` (the sampled crossover, no barrier) NUTS
    on the joint posterior of ``(G, W)`` crosses between the basins freely, and its fraction of
    draws with ``a > a_bar`` must equal the umbrella windows' MBAR probability of that basin on
    the marginal of ``G`` (``W`` integrated out exactly), within four combined standard errors
    (NUTS's from the indicator's effective sample size, the windows' the larger of MBAR's and the
    spread between ladders), with SGLD in the windows and with HMC (the settings of
    ``benchmarks/copy_landscape_speed.py``). Measured: 0.406 (SGLD) and 0.417 (HMC) against
    0.486 (NUTS), combined errors 0.054 and 0.031."""
    from jaxattn.copyhead._config import CopyData
    from jaxattn.copyhead.sampling import nuts_reference
    from jaxattn.core import diagnostics, umbrella

    arch, P, N = CopyArch(8, 4), 79, 1.0
    a_bar = landscape_profile.theory_barrier(arch, N)[1]
    ref = nuts_reference(CopyData(L=8, V=4), P, N=N, n_warmup=500, n_samples=1000, n_chains=4)
    inside = (ref["prev_weight"] > a_bar).astype(float)
    assert 0.15 < inside.mean() < 0.85 and ref["prev_weight_rhat"] < 1.02  # both basins, mixed
    nuts_se = inside.std() / np.sqrt(diagnostics.ess(inside))
    hmc = dict(kernel="hmc", n_leapfrog=4, step=0.04, burn_in=100, thin=3, swap_every=2)
    for kw in ({}, hmc):
        prof = landscape.sampled_profile(arch, P, N, n_chains=4, **kw)
        p, dp = umbrella.probability(prof.draws, prof.windows, lambda c: landscape_profile.prev_weight(c, 8) > a_bar)
        spread = float(landscape.ladder_spread(prof, a_bar, 8)[0]) * p * (1 - p)  # log-odds -> probability
        se = float(np.hypot(nuts_se, max(dp, spread)))
        assert abs(p - inside.mean()) < 4 * se, (kw, p, inside.mean(), se)


@pytest.mark.parametrize(("P0", "width"), [(850, 60), (360, 3)])
def test_the_search_steps_a_quarter_at_most_and_refines_inside_a_bracket(monkeypatch, P0, width):
    """Log-odds ``5 tanh((P - P0) / width)`` (the search starts at the reduced action's ``P*``,
    342). Far below a distant crossing (850) the curve is flat, and its slope would step millions
    of sequences past it: a step goes at most a quarter of ``P``. Past a steep crossing (360) the
    step overshoots, and then the secant between the bracketing ``P`` steps back inside. Either
    way the search stops once a reweighted curve (``+-12`` around a sampled ``P``) covers the
    crossing, within the default ``max_extend`` of 5."""
    from jaxattn.copyhead.landscape import _search

    def y(P):
        return 5 * np.tanh((np.asarray(P, float) - P0) / width)

    class Bar:
        def close(self):
            pass

    def fake_log_odds(p, a_bar, L):
        d = np.arange(-12, 13)
        return float(y(p)), 0.1, (d, y(p + d), np.full(d.size, 0.1))

    seen = {}
    monkeypatch.setattr(_search, "_scan", lambda arch, N, Ps, progress, kw: ((lambda p: p), Bar()))
    monkeypatch.setattr(_search, "_log_odds", fake_log_odds)
    monkeypatch.setattr(_search, "_softmax_summary", lambda arch, N, ks, *rest: seen.setdefault("P", ks))
    _search.landscape(CopyArch(32, 4), None, 1.0)
    order = seen["P"]
    assert 342 in order and len(order) <= 6
    assert min(abs(p - P0) for p in order) <= 12, order  # a sampled P's curve covers the crossing
    assert all(abs(b - a) <= 0.25 * a + 1 for a, b in zip(order, order[1:])), order


@pytest.mark.slow  # about 40 s on 2 cores
def test_the_phase_diagram_as_a_sweep_over_zipped_N_and_P(tmp_path):
    """The map as one sweep of ``copy_landscape``: ``N`` zipped with ``P`` (each ``N`` sampled
    near its own ``P*``), read back by ``phase_of_dataset`` and by the command's ``--store``.
    Each row's sampled numbers equal those of ``landscape`` at that ``(N, P)`` through the Python
    API (the engine's contract: the same bits alone and inside a grid, through a sweep or the
    API); short chains, so this checks the route, not the sampled values."""
    from jaxattn import engine
    from jaxattn.copyhead._config import CopyLandscapeConfig

    short = dict(burn_in=100, n_draws=10, thin=5, reweight_span=8)
    arch = CopyArch(8, 4)
    config = CopyLandscapeConfig(L=8, V=4, n_windows=32, c_lo=-0.5, c_hi=3.0, **short)
    grid = engine.Grid((engine.Dim("chain", {"chain": (0, 1)}), engine.Dim("point", {"N": (2.0, 20.0), "P": (60, 47)})))
    text = engine.dumps("copy_landscape", config, grid)
    assert "[grid.zip.point]" in text
    out = str(tmp_path / "store")
    assert not engine.run_sweep(engine.parse(text), out).failed
    r = landscape.phase_of_dataset(engine.load_store(out))
    assert [(row["L"], row["N"], row["P"]) for row in r["rows"]] == [(8, 2.0, [60]), (8, 20.0, [47])]
    assert all(set(row) == set(_phase.ROW_KEYS) for row in r["rows"]) and set(r["critical_N_sampled"]) == {"8"}
    assert r["rows"][1]["p_star_sampled"] is not None  # N = 20: the curve around 47 crosses (46.3 sampled at length)
    for row in r["rows"]:
        api = landscape.landscape(arch, [row["P"][0]], row["N"], n_windows=32, c_range=(-0.5, 3.0), max_extend=0,
                                  **short)
        for mine, theirs in (("p_star_sampled", "p_star_sampled"), ("barrier", "barrier_at_p_star"),
                             ("log_ratio_slope", "log_ratio_slope")):
            mine_value = np.nan if row[mine] is None else row[mine]  # a row says None where there is no number
            np.testing.assert_allclose(mine_value, api[theirs], rtol=1e-12, err_msg=mine)  # NaN equals NaN
        assert row["p_star_reduced"] == pytest.approx(theory_summary(arch, row["N"])["p_star"], rel=1e-12)
    cli = CliRunner().invoke(main, ["copy", "phase-diagram", "--sampled", "--store", out, "--out",
                                    str(tmp_path / "figs"), "--json"])
    assert cli.exit_code == 0, cli.output
    def timeless(rows):
        return [{k: v for k, v in row.items() if k != "seconds"} for row in rows]

    assert timeless(json.loads(cli.stdout.strip().splitlines()[-1])["rows"]) == timeless(json.loads(json.dumps(r["rows"])))
    bad = CliRunner().invoke(main, ["copy", "phase-diagram", "--sampled", "--store", out, "--N", "5"])
    assert bad.exit_code == 2 and "--N: not read with --store" in bad.output, bad.output
    with pytest.raises(ValueError, match="two datasets hold the same"):
        landscape.phase_of_dataset([engine.load_store(out)] * 2)
    with pytest.raises(ValueError, match="not a copy_landscape dataset"):
        landscape.phase_of_dataset(engine.load_store(out).assign_attrs(experiment="copy_sgld"))
