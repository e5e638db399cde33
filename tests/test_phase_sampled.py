"""The copy head's sampled phase diagram: the critical point of a line of rows, bad input named
before any work, a killed run resumed from its rows, and the command's JSON and figure."""

import dataclasses
import json
import math
import os
from types import SimpleNamespace

import numpy as np
import pytest
from click.testing import CliRunner

from jaxattn.cli import main
from jaxattn.copyhead import landscape
from jaxattn.copyhead import profile as landscape_profile
from jaxattn.copyhead.curves import theory_summary
from jaxattn.copyhead.landscape import _phase
from jaxattn.copyhead.lines import TheoryLines
from jaxattn.copyhead.network import CopyArch
from jaxattn.io import json_safe


def _row(first_order, barrier, err):
    return SimpleNamespace(first_order_sampled=first_order, barrier=barrier, barrier_err=err)


def test_critical_point_brackets_the_change_and_interpolates_the_margin_in_ln_x():
    """Margins ``barrier / err - 2`` of -1 and +1 at ``N = 2`` and ``8``: the zero is halfway in
    ``ln N``, at ``sqrt(2 * 8) = 4``; margins -1 and +3 put it a quarter of the way, at
    ``2 * 4 ** 0.25``."""
    rows = [_row(False, 0.0, 0.0), _row(False, 1.0, 1.0), _row(True, 3.0, 1.0), _row(True, 9.0, 1.0)]
    c = landscape.critical_point([1, 2, 8, 20], rows)
    assert c.bracket == (2.0, 8.0) and c.value == pytest.approx(4.0, rel=1e-12)
    rows[2] = _row(True, 5.0, 1.0)
    assert landscape.critical_point([1, 2, 8, 20], rows).value == pytest.approx(2 * 4**0.25, rel=1e-12)
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
        (["--bracket", "0"], "Error: --bracket must be >= 1, got 0"),
        (["--max-rounds", "0"], "Error: --max-rounds must be >= 1, got 0"),
        (["--ld-samples", "-1"], "Error: --ld-samples must be >= 0, got -1"),
        (["--reweight-span", "0"], "Error: --reweight-span must be >= 1 for the map"),
        (["--L-max", "64"], "--L-max: not read with --sampled"),
    ],
)
def test_bad_input_is_named_before_any_work(args, message, tmp_path):
    r = CliRunner().invoke(main, ["copy", "phase-diagram", "--sampled", "--out", str(tmp_path), *args])
    assert r.exit_code == 2 and message in r.output, r.output
    assert not list(tmp_path.iterdir())  # no store, no rounds


def test_sampler_options_need_sampled(tmp_path):
    r = CliRunner().invoke(main, ["copy", "phase-diagram", "--N", "2", "--chains", "3", "--out", str(tmp_path)])
    assert r.exit_code == 2 and "--N, --chains: these options need --sampled" in r.output, r.output


def _planted(Ps, P_star, slope, span, err=0.05):
    """The summary a scan of log-odds ``slope (P - P_star)`` would give at the sampled ``Ps``,
    each with its reweighted curve over ``P +- span``."""
    d = np.arange(-span, span + 1)
    Ps = tuple(sorted(Ps))
    return SimpleNamespace(
        P=Ps,
        log_ratio=[slope * (p - P_star) for p in Ps],
        curves=lambda: [(d, slope * (p + d - P_star), np.full(d.size, err)) for p in Ps],
    )


def _planted_map(tmp_path, monkeypatch, start, **kw):
    """The map at ``L = 32``, ``N = 1`` and 20 on planted log-odds ``0.2 (P - 340)`` (each
    sampled ``P``'s curve over ``P +- 12`` exact, errors 0.05), its theory ``P*`` at ``start``:
    the map, the rounds its ``on_round`` saw and the ``P`` sampled at each ``N``."""
    sampled: dict[float, list[int]] = {1.0: [], 20.0: []}
    truth = {1.0: 340.0, 20.0: 340.0}

    def fake_sample(self, proposals):
        rnd = _phase.Round(len(self.rounds) + 1, tuple((L, N, P) for L, pts in proposals.items() for N, P in pts), 0, 0.0)
        self.rounds.append(rnd)
        for L, pts in proposals.items():
            for N, P in pts:
                sampled[N].append(P)
                self.points[L].append((N, P))
        return rnd

    def fake_read(self):
        return {(32, N): (_planted(Ps, truth[N], 0.2, 12) if Ps else None) for N, Ps in sampled.items()}

    lines = TheoryLines(330.0, True, 0.09, 330.0, 1.0, 0.2, None, start, 0.1, 256)
    monkeypatch.setattr(_phase, "theory_lines", lambda arch, N, **kw: lines)
    monkeypatch.setattr(_phase._Search, "sample", fake_sample)
    monkeypatch.setattr(_phase._Search, "read", fake_read)
    monkeypatch.setattr(_phase, "_row", lambda arch, N, s, t: SimpleNamespace(L=arch.L, V=arch.V, N=N, first_order_sampled=True, barrier=1.0, barrier_err=0.1))
    seen = []
    m = landscape.sampled_phase_diagram([32], [1, 20], out=str(tmp_path), on_round=seen.append, **kw)
    return m, seen, sampled


@pytest.mark.parametrize(
    ("start", "rounds"),
    [
        (340.0, 1),  # the crossing inside the first bracket's curves: 340 +- (6 + 12)
        (357.0, 1),
        (300.0, 2),  # outside them: the nearest curve's own slope lands on the crossing
        (420.0, 2),
        (200.0, 3),  # 150 below: the step is held to a quarter of P (53), then lands
    ],
)
def test_the_round_count_of_a_map_with_planted_log_odds(tmp_path, monkeypatch, start, rounds):
    """The search in rounds on planted log-odds, started from a theory ``P*`` at ``start``
    (:func:`_planted_map`): a bracket of 2 ``P``, 12 apart, whose curves cover ``start +- 18``
    closes the point in one round when the crossing is inside; outside, the next round is
    centred where the nearest curve's slope puts the crossing, which on straight log-odds is
    the crossing itself; beyond a quarter of ``P`` the step is cut there first. Two ``N`` open
    at once share each round's grid."""
    m, seen, sampled = _planted_map(tmp_path, monkeypatch, start, bracket=2)
    assert len(m.rounds) == rounds == len(seen), m.rounds
    assert m.rounds[0].points == tuple((32, N, P) for N in (1.0, 20.0) for P in (round(start - 6), round(start + 6)))
    for Ps in sampled.values():  # closed: some sampled P's curve covers the crossing
        assert min(abs(p - 340) for p in Ps) <= 12, Ps
        assert all(abs(b - a) <= 0.25 * a + 13 for a, b in zip(Ps[::2], Ps[2::2])), Ps


@pytest.mark.parametrize(("start", "rounds", "second"), [(340.0, 1, None), (352.0, 1, None), (357.0, 2, 340), (300.0, 2, 340)])
def test_the_default_map_samples_one_P_a_point_at_the_theory_then_at_the_crossing(tmp_path, monkeypatch, start, rounds, second):
    """The default bracket of one ``P``: the first round samples the theory's ``P*`` alone, which
    closes the point where the crossing is within the reweighted span (12) of it; else the second
    round samples where that ``P``'s curve crosses (340 on the planted straight log-odds)."""
    m, seen, sampled = _planted_map(tmp_path, monkeypatch, start)
    assert len(m.rounds) == rounds == len(seen), m.rounds
    assert m.rounds[0].points == ((32, 1.0, round(start)), (32, 20.0, round(start)))
    if second is not None:
        assert m.rounds[1].points == ((32, 1.0, second), (32, 20.0, second))


def test_the_bracket_of_a_round():
    assert _phase.bracket_of(340.4, 12, 2, set()) == [334, 346]
    assert _phase.bracket_of(340.0, 12, 3, {340}) == [328, 352]
    assert _phase.bracket_of(5.0, 12, 2, set()) == [13]  # none below span + 1


SHORT = dict(burn_in=100, n_draws=10, thin=5, reweight_span=4, n_chains=2, large_deviation_samples=0)


@pytest.mark.slow  # a whole command: 10 to 40 s on 2 cores, beyond the default run's share (README)
def test_a_map_killed_mid_round_resumes_to_the_same_rows_which_the_store_route_reads_too(tmp_path, monkeypatch):
    """``L = 8``, ``N = 1`` and 20, from a planted start 25% above the corrected ``P*`` so that
    the search takes more than one round. Killed in round 2 while its chunk computes, the map
    resumes from its store (the round's points were planned there) and gives the rows of an
    uninterrupted map, with the same rounds; ``copy phase-diagram --sampled --store`` reads
    the same rows from the same store. Short chains: this checks the route, not the numbers."""
    from jaxattn import engine
    from jaxattn.copyhead import lines

    real_lines = lines.theory_lines

    def displaced(arch, N, **kw):
        t = real_lines(arch, N, **kw)
        return dataclasses.replace(t, p_star_corrected=1.25 * t.p_star_corrected)

    monkeypatch.setattr(_phase, "theory_lines", displaced)
    whole = landscape.sampled_phase_diagram([8], [1, 20], out=str(tmp_path / "whole"), **SHORT)
    assert len(whole.rounds) >= 2
    assert landscape.PhaseMap.from_json(json.loads(json.dumps(json_safe(whole)))) == whole  # JSON and back

    real_run = engine.run_sweep
    calls = []

    def killed(sweep, out, **kw):
        calls.append(out)
        if len(calls) == 2:  # round 2 planned into the store, then killed while its chunk computes
            real_run(sweep, out, max_chunks=0, **kw)
            raise KeyboardInterrupt
        return real_run(sweep, out, **kw)

    monkeypatch.setattr(engine, "run_sweep", killed)
    killed_out = str(tmp_path / "killed")
    with pytest.raises(KeyboardInterrupt):
        landscape.sampled_phase_diagram([8], [1, 20], out=killed_out, **SHORT)
    st = engine.status(os.path.join(killed_out, "L8"))
    assert st["pending"] and len(st["done"]) < st["n_chunks"], st  # killed mid-round
    monkeypatch.setattr(engine, "run_sweep", real_run)
    resumed = landscape.sampled_phase_diagram([8], [1, 20], out=killed_out, **SHORT)
    assert json_safe(resumed.rows) == json_safe(whole.rows)
    assert [r.points for r in resumed.rounds] == [r.points for r in whole.rounds]
    with pytest.raises(ValueError, match="other settings"):
        landscape.sampled_phase_diagram([8], [1, 20], out=killed_out, **{**SHORT, "burn_in": 200})

    monkeypatch.setattr(lines, "theory_lines", displaced)
    cli = CliRunner().invoke(
        main,
        ["copy", "phase-diagram", "--sampled", "--store", os.path.join(killed_out, "L8"), "--ld-samples", "0",
         "--out", str(tmp_path / "figs"), "--json"],
    )
    assert cli.exit_code == 0, cli.output
    assert json.loads(cli.stdout.strip().splitlines()[-1])["rows"] == json_safe(whole.rows)


@pytest.mark.slow  # a whole command: 10 to 40 s on 2 cores, beyond the default run's share (README)
def test_cli_json_and_figure(tmp_path):
    """One short map at the map's defaults but the chains' length (150 HMC steps a window: this
    checks the paths and the theory's lines, not the sampled numbers, which the slow landscape
    tests check at full length): one ``P`` at the best theory's ``P*``, four ladders."""
    short = ["--burn-in", "100", "--n-draws", "10", "--thin", "5", "--reweight-span", "8", "--ld-samples", "32"]
    args = ["copy", "phase-diagram", "--sampled", "--L", "8", "--N", "20", *short, "--out", str(tmp_path)]
    r = CliRunner().invoke(main, [*args, "--no-progress", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout.strip().splitlines()[-1])
    row = out["rows"][0]
    assert len(out["rows"]) == 1 and set(row) == {f.name for f in dataclasses.fields(landscape.PhaseRow)}
    assert row["L"] == 8 and row["V"] == 4 and row["N"] == 20.0
    s = theory_summary(CopyArch(8, 4), 20.0)
    t = row["theory"]
    assert t["p_star_reduced"] == pytest.approx(s["p_star"], rel=1e-12) and t["first_order_reduced"] is False
    assert t["large_deviation_samples"] == 32 and t["p_star_large_deviation_err"] > 0
    start = t["p_star_large_deviation"]  # the first round's bracket: the best theory's P*
    assert out["rounds"][0]["points"] == [[8, 20.0, round(start)]]
    assert out["rounds"][0]["ladders"] == 4 and out["rounds"][0]["seconds"] > 0
    assert row["P"] == sorted({p for rnd in out["rounds"] for _, _, p in rnd["points"]})
    assert math.isfinite(row["p_star_sampled"]) and row["p_star_sampled_err"] > 0
    assert out["critical_N_sampled"] == {} and out["critical_L_sampled"] == {}
    assert out["figure"] == str(tmp_path / "copy_phase_sampled.png") and (tmp_path / "copy_phase_sampled.png").stat().st_size > 0
    assert "round 1: 1 point, 4 ladders in " in r.stderr and "L=8 N=20: P* " in r.stderr
    assert set(os.listdir(tmp_path)) == {"L8", "rounds.json", "copy_phase_sampled.png"}


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
@pytest.mark.long
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


@pytest.mark.slow  # about 40 s on 2 cores (100 s on a slow day)
@pytest.mark.long
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
    assert [(row.L, row.N, row.P) for row in r.rows] == [(8, 2.0, (60,)), (8, 20.0, (47,))]
    assert set(r.critical_N_sampled) == {"8"}
    assert r.rows[1].p_star_sampled is not None  # N = 20: the curve around 47 crosses (46.3 sampled at length)
    for row in r.rows:
        api = landscape.landscape(arch, [row.P[0]], row.N, n_windows=32, c_range=(-0.5, 3.0), max_extend=0,
                                  **short)
        for mine, theirs in (("p_star_sampled", "p_star_sampled"), ("barrier", "barrier_at_p_star"),
                             ("log_ratio_slope", "log_ratio_slope")):
            value = getattr(row, mine)
            mine_value = np.nan if value is None else value  # a row says None where there is no number
            np.testing.assert_allclose(mine_value, getattr(api, theirs), rtol=1e-12, err_msg=mine)  # NaN equals NaN
        assert row.theory.p_star_reduced == pytest.approx(theory_summary(arch, row.N)["p_star"], rel=1e-12)
    cli = CliRunner().invoke(main, ["copy", "phase-diagram", "--sampled", "--store", out, "--out",
                                    str(tmp_path / "figs"), "--json"])
    assert cli.exit_code == 0, cli.output
    assert json.loads(cli.stdout.strip().splitlines()[-1])["rows"] == json_safe(r.rows)
    bad = CliRunner().invoke(main, ["copy", "phase-diagram", "--sampled", "--store", out, "--N", "5"])
    assert bad.exit_code == 2 and "--N: not read with --store" in bad.output, bad.output
    with pytest.raises(ValueError, match="two datasets hold the same"):
        landscape.phase_of_dataset([engine.load_store(out)] * 2)
    with pytest.raises(ValueError, match="not a copy_landscape dataset"):
        landscape.phase_of_dataset(engine.load_store(out).assign_attrs(experiment="copy_sgld"))
