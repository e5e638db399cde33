"""The copy head's phase diagram from sampling: at every ``(L, N)`` the sampled ``P*``, whether
the posterior jumps there (two basins with a barrier the data resolve), the barrier and the jump
of the previous-token weight, beside every theory line (:func:`~jaxattn.copyhead.lines.theory_lines`);
and where, along ``N`` or ``L``, the sampled first-order line ends.

The map is searched in rounds of engine grids: each round proposes a bracket of ``P`` for every
``(L, N)`` still open, the engine samples the whole round as one grid into the store of each
``L`` (a ``copy_landscape`` sweep, extended round by round), and the rows are read back from the
stores by the one function that reads any ``copy_landscape`` sweep (:func:`phase_of_dataset`).
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import xarray as xr

from jaxattn.copyhead import network
from jaxattn.copyhead._config import MAP_CHAINS, MAP_SAMPLER, CopyLandscapeConfig
from jaxattn.copyhead.landscape._experiment import COPY_LANDSCAPE
from jaxattn.copyhead.landscape._profiles import inverse_temperature, window_diagnostics
from jaxattn.copyhead.landscape._search import (
    SoftmaxScan,
    curve_crossing,
    next_center,
    softmax_scan_of_dataset,
)
from jaxattn.copyhead.landscape._windows import default_range, place_windows
from jaxattn.copyhead.lines import LD_SAMPLES, TheoryLines, theory_lines
from jaxattn.core import checks
from jaxattn.io import json_safe


@dataclass(frozen=True)
class PhaseRow:
    """One ``(L, N)`` of the sampled phase diagram.

    Attributes:
        L: sequence length.
        V: vocabulary size.
        N: inverse temperature.
        P: the sampled ``P``, increasing.
        p_star_sampled: where the basins' log-odds cross zero (``None``: no crossing within the
            sampled ``P``' reach).
        p_star_sampled_err: its standard error.
        first_order_sampled: whether the profile at ``P*`` has two basins whose barrier clears
            two standard errors.
        barrier: that barrier in ``kT``, and ``barrier_err`` its error.
        barrier_err: see ``barrier``.
        jump_a: the jump of the posterior mean of the previous-token weight across ``P*``, and
            ``jump_a_err`` its error.
        jump_a_err: see ``jump_a``.
        log_ratio_slope: the log-odds' slope in ``P`` at the crossing, per sequence, and
            ``log_ratio_slope_err`` its error.
        log_ratio_slope_err: see ``log_ratio_slope``.
        max_window_rhat: the worst window's split R-hat over every sampled ``P``.
        min_window_ess: the smallest window's effective sample size over every sampled ``P``.
        theory: every theory line at ``(L, V, N)`` (:class:`~jaxattn.copyhead.lines.TheoryLines`).
    """

    L: int
    V: int
    N: float
    P: tuple[int, ...]
    p_star_sampled: float | None
    p_star_sampled_err: float | None
    first_order_sampled: bool
    barrier: float | None
    barrier_err: float | None
    jump_a: float | None
    jump_a_err: float | None
    log_ratio_slope: float | None
    log_ratio_slope_err: float | None
    max_window_rhat: float
    min_window_ess: float
    theory: TheoryLines


@dataclass(frozen=True)
class CriticalPoint:
    """Where the sampled first-order line ends along ``N`` or ``L`` (:func:`critical_point`).

    Attributes:
        value: the zero of the barrier's margin over two errors, interpolated in ``ln x``.
        bracket: the neighbouring values between which the verdict turns.
    """

    value: float
    bracket: tuple[float, float]


@dataclass(frozen=True)
class Round:
    """One round of the map's search.

    Attributes:
        index: 1, 2, ...
        points: the ``(L, N, P)`` it sampled.
        ladders: the ladders of windows it ran (points times chains).
        seconds: its wall time (``None``: killed before it finished, and not resumed).
    """

    index: int
    points: tuple[tuple[int, float, int], ...]
    ladders: int
    seconds: float | None

    def __str__(self) -> str:
        """The round as one line of progress: its points, ladders and time, and each point's ``P``."""
        by: dict = {}
        for L, N, P in self.points:
            by.setdefault((L, N), []).append(P)
        where = "; ".join(f"L={L} N={N:g}: P={','.join(map(str, Ps))}" for (L, N), Ps in by.items())
        n = len(self.points)
        return f"round {self.index}: {n} point{'s' * (n != 1)}, {self.ladders} ladders in {self.seconds} s ({where})"


@dataclass(frozen=True)
class PhaseMap:
    """The sampled phase diagram.

    Attributes:
        V: vocabulary size.
        rows: one per ``(L, N)``, ordered by ``L`` then ``N``.
        critical_N_sampled: per ``L`` (as text), where the line ends along ``N`` (``None``: not
            bracketed); empty with one ``N``.
        critical_L_sampled: per ``N`` (as text), where it ends along ``L``; empty with one ``L``.
        rounds: the search's rounds (empty for a map read from sweeps).

    :func:`jaxattn.io.json_safe` turns it into JSON, and :meth:`from_json` back.
    """

    V: int
    rows: tuple[PhaseRow, ...]
    critical_N_sampled: dict[str, CriticalPoint | None]
    critical_L_sampled: dict[str, CriticalPoint | None]
    rounds: tuple[Round, ...] = ()

    @classmethod
    def from_json(cls, d: dict) -> PhaseMap:
        """The map from its JSON (:func:`jaxattn.io.json_safe` of it).

        Args:
            d: the JSON object.

        Returns:
            The map.
        """

        def crit(c):
            return None if c is None else CriticalPoint(float(c["value"]), tuple(c["bracket"]))

        def row(r):
            return PhaseRow(**{**r, "P": tuple(r["P"]), "theory": TheoryLines(**r["theory"])})

        return cls(
            int(d["V"]),
            tuple(row(r) for r in d["rows"]),
            {k: crit(c) for k, c in d["critical_N_sampled"].items()},
            {k: crit(c) for k, c in d["critical_L_sampled"].items()},
            _rounds(d.get("rounds", [])),
        )


def _rounds(rounds: list[dict]) -> tuple[Round, ...]:
    return tuple(Round(r["index"], tuple(tuple(p) for p in r["points"]), r["ladders"], r["seconds"]) for r in rounds)


def _row(arch: network.CopyArch, N: float, r: SoftmaxScan, theory: TheoryLines) -> PhaseRow:
    """A row from the scan of :func:`landscape_of_dataset` and the theory's lines."""
    health = window_diagnostics(list(r.profiles))  # over every sampled P: the worst window
    return PhaseRow(
        L=arch.L,
        V=arch.V,
        N=float(N),
        P=r.P,
        p_star_sampled=checks.finite_or_none(r.p_star_sampled),
        p_star_sampled_err=checks.finite_or_none(r.p_star_sampled_err),
        first_order_sampled=r.first_order_sampled,
        barrier=checks.finite_or_none(r.barrier_at_p_star),
        barrier_err=checks.finite_or_none(r.barrier_at_p_star_err),
        jump_a=checks.finite_or_none(r.jump_a),
        jump_a_err=checks.finite_or_none(r.jump_a_err),
        log_ratio_slope=checks.finite_or_none(r.log_ratio_slope),
        log_ratio_slope_err=checks.finite_or_none(r.log_ratio_slope_err),
        max_window_rhat=max(health["max_window_rhat"]),
        min_window_ess=min(health["min_window_ess"]),
        theory=theory,
    )


def _by_N(ds: xr.Dataset) -> list[tuple[float, xr.Dataset]]:
    """A ``copy_landscape`` dataset split by ``N``, each part with ``P`` as its dimension: ``N``
    fixed, a dimension of its own, or zipped with ``P`` in one dimension."""
    if "N" not in ds.coords:
        return [(inverse_temperature(ds), ds)]
    if "N" in ds.dims:
        return [(float(n), ds.sel(N=n)) for n in ds["N"].values]
    dim = ds["N"].dims[0]
    if ds["P"].dims != (dim,):
        raise ValueError(f"N and P: zip them in one dimension, or make each its own (N is zipped in {dim!r})")
    Ns, Ps = np.asarray(ds["N"].values, float), np.asarray(ds["P"].values)
    parts = []
    for n in np.unique(Ns):
        idx = np.flatnonzero(Ns == n)
        parts.append((float(n), ds.isel({dim: idx[np.argsort(Ps[idx], kind="stable")]}).swap_dims({dim: "P"})))
    return parts


def _arch_of(ds: xr.Dataset) -> network.CopyArch:
    from jaxattn.engine import config as cfgs

    if ds.attrs.get("experiment") != COPY_LANDSCAPE.name:
        raise ValueError(f"not a copy_landscape dataset (experiment={ds.attrs.get('experiment')!r})")
    arch = cfgs.from_json(CopyLandscapeConfig, ds.attrs["config"]).arch
    if arch.attention != "softmax":
        raise ValueError(f"attention: the phase diagram is softmax attention's, got {arch.attention!r}")
    return arch


def phase_of_dataset(
    datasets: xr.Dataset | Sequence[xr.Dataset],
    n_bins: int = 40,
    *,
    large_deviation_samples: int = LD_SAMPLES,
    theory: Mapping[tuple[int, float], TheoryLines] | None = None,
) -> PhaseMap:
    """The sampled phase diagram from ``copy_landscape`` runs, one per ``L`` (a sweep's store
    read by :func:`jaxattn.engine.load_store`, or :func:`jaxattn.engine.run`'s dataset), each
    over ``N`` and ``P`` (``N`` a grid dimension, or zipped with ``P`` to sample each ``N`` near
    its own ``P*``): a row per ``(L, N)`` from :func:`landscape_of_dataset` on that ``N``'s ``P``
    and the theory's lines (:func:`~jaxattn.copyhead.lines.theory_lines`), and the critical points
    along ``N`` and ``L`` (:func:`critical_point`). :func:`sampled_phase_diagram` reads its
    stores with it, so a map and a sweep of the same points give the same rows.

    Args:
        datasets: one dataset, or one per ``L`` (softmax attention, one ``V``, one data set each).
        n_bins: bins of the profiles.
        large_deviation_samples: points per scramble of the theory's large-deviation ``P*`` (0:
            left out).
        theory: the theory's lines by ``(L, N)`` where already computed.

    Returns:
        :class:`PhaseMap` (no rounds).

    Raises:
        ValueError: if a dataset is not ``copy_landscape``'s, not softmax attention, of another
            ``V``, or holds two datasets of one ``L``.
    """
    datasets = [datasets] if isinstance(datasets, xr.Dataset) else list(datasets)
    if not datasets:
        raise ValueError("datasets: give at least one copy_landscape dataset")
    rows = []
    for ds in datasets:
        arch = _arch_of(ds)
        for N, part in _by_N(ds):
            lines = (theory or {}).get((arch.L, N)) or theory_lines(
                arch, N, large_deviation_samples=large_deviation_samples
            )
            rows.append(_row(arch, N, _scan(part, n_bins, lines), lines))
    return _phase_map(rows)


def _scan(part: xr.Dataset, n_bins: int, theory: TheoryLines) -> SoftmaxScan:
    """One ``(L, N)``'s scan, divided where the theory divides the basins."""
    if theory.p_star_reduced is None or theory.a_barrier is None:
        raise ValueError("the reduced action has no transition here: no basins to divide")
    return softmax_scan_of_dataset(part, n_bins, (theory.p_star_reduced, theory.a_barrier))


def _phase_map(rows: list[PhaseRow], rounds: Sequence[Round] = ()) -> PhaseMap:
    Vs = {r.V for r in rows}
    if len(Vs) != 1:
        raise ValueError(f"V: one vocabulary at a time, the datasets have {sorted(Vs)}")
    if len({(r.L, r.N) for r in rows}) != len(rows):
        raise ValueError("L: two datasets hold the same (L, N); give one dataset per L")
    rows = sorted(rows, key=lambda r: (r.L, r.N))
    return PhaseMap(Vs.pop(), tuple(rows), *_critical_points(rows), rounds=tuple(rounds))


def critical_point(x: Sequence[float], rows: Sequence[PhaseRow]) -> CriticalPoint | None:
    """Where the sampled first-order line ends along ``x`` (``N`` or ``L``, increasing): the pair
    of neighbouring values where ``first_order_sampled`` turns from false to true, and inside it
    the zero of the criterion's margin ``z = barrier / barrier_err - 2`` interpolated linearly in
    ``ln x`` (``z`` is the number of standard errors by which the barrier clears the two the
    criterion asks, so it changes sign between the two rows).

    Args:
        x: the values, increasing, one per row.
        rows: the rows (:class:`PhaseRow`, or any with ``first_order_sampled``, ``barrier`` and
            ``barrier_err``).

    Returns:
        :class:`CriticalPoint`, or ``None`` where the rows do not bracket one end: all on one
            side, or more than one change (the line is then not resolved by these values).
    """
    x = [float(v) for v in x]
    if any(b <= a for a, b in zip(x, x[1:])):
        raise ValueError(f"the values must be increasing, got {x}")
    flags = [bool(r.first_order_sampled) for r in rows]
    changes = [i for i in range(len(flags) - 1) if flags[i] != flags[i + 1]]
    if len(changes) != 1 or flags[changes[0]]:
        return None
    i = changes[0]

    def margin(r):
        return (r.barrier or 0.0) / r.barrier_err - 2.0 if r.barrier_err else -2.0

    z0, z1 = margin(rows[i]), margin(rows[i + 1])
    lo, hi = x[i], x[i + 1]
    t = min(max(-z0 / (z1 - z0), 0.0), 1.0) if z1 != z0 else 0.5
    return CriticalPoint(math.exp(math.log(lo) + t * (math.log(hi) - math.log(lo))), (lo, hi))


def _critical_points(rows: list[PhaseRow]) -> tuple[dict, dict]:
    """``critical_N_sampled`` per ``L`` and ``critical_L_sampled`` per ``N`` of a set of rows
    (:func:`critical_point` along each line; empty where only one value of the other exists)."""
    Ls, Ns = sorted({r.L for r in rows}), sorted({r.N for r in rows})

    def line(rs, x):
        rs = sorted(rs, key=lambda r: getattr(r, x))
        return critical_point([getattr(r, x) for r in rs], rs) if len(rs) > 1 else None

    along_N = {str(L): line([r for r in rows if r.L == L], "N") for L in Ls} if len(Ns) > 1 else {}
    along_L = {f"{N:g}": line([r for r in rows if r.N == N], "L") for N in Ns} if len(Ls) > 1 else {}
    return along_N, along_L


# --- the search in rounds -----------------------------------------------------------------------


def bracket_of(center: float, span: int, width: int, taken: set[int]) -> list[int]:
    """The ``P`` of one round around ``center``: ``width`` of them, ``span`` apart, so that their
    reweighted curves (each ``P +- span``) join into one of ``(width + 1) span`` sequences around
    it; ``P`` already sampled are left out, and none is below ``span + 1``.

    Args:
        center: where the crossing is expected.
        span: the reweighting span.
        width: how many ``P``.
        taken: the ``P`` sampled before.

    Returns:
        Increasing integers (empty where every one is taken).
    """
    Ps = {max(span + 1, int(round(center + span * (j - (width - 1) / 2)))) for j in range(width)}
    return sorted(Ps - taken)


def next_round(summary: SoftmaxScan | None, theory: TheoryLines, span: int, width: int) -> list[int]:
    """The ``P`` the next round samples at one ``(L, N)``: none where a reweighted curve of the
    sampled ``P`` already crosses zero (closed); before any sample, a bracket around the theory's
    best ``P*`` (:attr:`~jaxattn.copyhead.lines.TheoryLines.best`); after, a bracket around
    :func:`~jaxattn.copyhead.landscape._search.next_center` of the scans so far.

    Args:
        summary: :func:`landscape_of_dataset`'s scan of the ``P`` sampled so far (``None``:
            none yet).
        theory: the theory's lines at ``(L, N)``.
        span: the reweighting span.
        width: ``P`` per bracket.

    Returns:
        The new ``P`` (:func:`bracket_of`); empty where the point is closed or the scans give no
            direction.
    """
    if summary is None:
        if theory.best is None:
            raise ValueError("no theory P* to start from (the reduced action has no transition)")
        return bracket_of(theory.best, span, width, set())
    curves = summary.curves()
    if any(np.isfinite(curve_crossing(0, *cv)[0]) for cv in curves):
        return []
    center = next_center(summary.P, summary.log_ratio, curves, span, theory.slope or 0.0)
    return [] if center is None else bracket_of(center, span, width, set(summary.P))


def _sweep(config: CopyLandscapeConfig, points: list[tuple[float, int]], n_chains: int, data_seed: int):
    """The sweep of one ``L`` at the points so far: ``chain`` x ``N`` zipped with ``P``."""
    from jaxattn import engine

    Ns, Ps = zip(*points)
    grid = engine.Grid(
        (
            engine.Dim("chain", {"chain": tuple(range(n_chains))}),
            engine.Dim("point", {"N": tuple(float(n) for n in Ns), "P": tuple(int(p) for p in Ps)}),
        )
    )
    text = engine.dumps(COPY_LANDSCAPE.name, config, grid, fixed={"data_seed": data_seed})
    return engine.parse(text, f"the map's sweep of L = {config.L}")


def _windows_needed(config: CopyLandscapeConfig, points: Sequence[tuple[float, int]]) -> int:
    """The most windows the spacing needs at any of ``points`` or half a span beside it (a later
    round's ``P`` moves by about that), rounded up to a multiple of 4."""
    arch, lo_hi, half = config.arch, config.c_range or default_range(config.arch), config.reweight_span // 2
    need = max(
        place_windows(arch, p, N, lo_hi, config.max_spacing, config.spring)[1].size
        for N, P in points
        for p in (max(1, P - half), P, P + half)
    )
    return -(-need // 4) * 4


def _stored(path: str) -> tuple[CopyLandscapeConfig, list[tuple[float, int]], int, int] | None:
    """The config, points, chains and data set of the map's store at ``path`` (``None``: no
    store there yet)."""
    from jaxattn import engine

    if not os.path.exists(os.path.join(path, "sweep.toml")):
        return None
    sweep = engine.load_file(os.path.join(path, "sweep.toml"))
    zips = {d.name: d.values for d in sweep.grid.dims}
    points = list(zip((float(n) for n in zips["point"]["N"]), (int(p) for p in zips["point"]["P"])))
    return sweep.config, points, len(zips["chain"]["chain"]), int(sweep.fixed_axes.get("data_seed", 0))


def _check(Ls, Ns, V, bracket, max_rounds, kw) -> tuple[list[int], list[float], dict[int, CopyLandscapeConfig], dict]:
    """Every setting of :func:`sampled_phase_diagram` checked before any work: the lines, the
    search's own and the sampler's (as the config checks them)."""
    Ls = sorted({int(L) for L in Ls})
    if not Ls or Ls[0] < 2:
        raise ValueError(f"L must be a list of integers >= 2, got {checks.plain(list(Ls))}")
    if int(V) < 2:
        raise ValueError(f"V must be >= 2, got {checks.plain(V)}")
    Ns = sorted({float(COPY_LANDSCAPE.axis["N"].check(N)) for N in Ns})
    if not Ns:
        raise ValueError("N must be a non-empty list")
    checks.integer("bracket", bracket, 1)
    checks.integer("max_rounds", max_rounds, 1)
    kw = dict(kw)
    run = {
        "n_chains": checks.integer("n_chains", kw.pop("n_chains", MAP_CHAINS), 2),
        "data_seed": checks.integer("data_seed", kw.pop("data_seed", 0), 0),
        "fixed_windows": kw.get("n_windows") is not None,
    }
    if kw.get("n_windows") is None:
        kw.pop("n_windows", None)
    if "seed" in kw:
        kw["chain_seed"] = kw.pop("seed")
    c_range = kw.pop("c_range", None)
    if c_range is not None:
        kw["c_lo"], kw["c_hi"] = (float(c) for c in c_range)
    kw = {**MAP_SAMPLER, **kw}
    fields = {f.name for f in dataclasses.fields(CopyLandscapeConfig)}
    unknown = sorted(set(kw) - fields)
    if unknown:
        raise ValueError(f"{', '.join(unknown)}: not a setting of the copy_landscape sampler")
    if kw["reweight_span"] < 1:
        raise ValueError(
            f"reweight_span must be >= 1 for the map (each sampled P's reweighted curve is how a round "
            f"finds P*), got {checks.plain(kw['reweight_span'])}"
        )
    configs = {L: CopyLandscapeConfig(L=L, V=int(V), attention="softmax", **kw).validate() for L in Ls}
    return Ls, Ns, configs, run


def sampled_phase_diagram(
    Ls: Sequence[int],
    Ns: Sequence[float],
    V: int = 4,
    *,
    out: str | None = None,
    bracket: int = 1,
    max_rounds: int = 6,
    n_bins: int = 40,
    large_deviation_samples: int = LD_SAMPLES,
    progress: bool = False,
    on_round: Callable[[Round], None] | None = None,
    **kw,
) -> PhaseMap:
    """The sampled phase diagram over ``Ls x Ns`` at vocabulary ``V`` (softmax attention), in
    rounds of engine grids.

    Each round proposes ``bracket`` values of ``P`` for every ``(L, N)`` still open
    (:func:`next_round`: the first around the theory's best ``P*``, the next where the sampled
    log-odds say the crossing is), and the engine samples the round's points of each ``L`` as one
    grid into that ``L``'s store, ``out/L{L}`` (a ``copy_landscape`` sweep whose grid each round
    extends: ``chain`` times ``N`` zipped with ``P``). A point is closed once a sampled ``P``'s
    reweighted log-odds cross zero. The rows are then read from the stores by
    :func:`phase_of_dataset`, as ``jaxattn copy phase-diagram --sampled --store out/L{L}``
    reads them.

    A killed map resumes from its stores: the unfinished round is finished first (its chunks
    were planned), and the next rounds depend only on the points sampled. Other processes can
    help with a round as with any sweep (``jaxattn sweep run out/L{L}/sweep.toml --out
    out/L{L}``). A store of other settings is refused, naming the setting.

    Args:
        Ls: sequence lengths (each ``>= 2``).
        Ns: inverse temperatures (each ``> 0``, finite).
        V: vocabulary size.
        out: the map's folder (``None``: a temporary one, removed at the end).
        bracket: ``P`` per open point per round.
        max_rounds: the most rounds.
        n_bins: bins of the profiles.
        large_deviation_samples: points per scramble of the theory's large-deviation ``P*``
            (0: left out; the first round then starts at the corrected or reduced ``P*``).
        progress: show the engine's progress bars.
        on_round: called with each :class:`Round` when it is done.
        **kw: the sampler's settings (the fields of
            :class:`~jaxattn.copyhead._config.CopyLandscapeConfig`: ``kernel``, ``burn_in``,
            ``n_draws``, ...; defaults :data:`~jaxattn.copyhead._config.MAP_SAMPLER`, HMC;
            ``n_windows`` (default: the most any ``P`` of the first round, or half a span beside
            it, needs, rounded up to 4); ``c_range`` for ``(c_lo, c_hi)``; ``seed`` for ``chain_seed``),
            ``n_chains`` (ladders per ``P``, default :data:`~jaxattn.copyhead._config.MAP_CHAINS`)
            and ``data_seed`` (default 0).

    Returns:
        :class:`PhaseMap`, with the rounds of this folder (those of earlier calls included).

    Raises:
        ValueError: naming ``L``, ``N``, ``V``, ``bracket``, ``max_rounds`` or a sampler setting
            when a value is out of range, before any work; naming ``n_windows`` when a later
            round needs more windows than the store has.
        RuntimeError: if the engine failed to compute a round's chunks.
    """
    import tempfile

    Ls, Ns, configs, run = _check(Ls, Ns, V, bracket, max_rounds, kw)
    checks.integer("large_deviation_samples", large_deviation_samples, 0)
    if out is None:
        with tempfile.TemporaryDirectory(prefix="jaxattn-map-") as tmp:
            return sampled_phase_diagram(
                Ls,
                Ns,
                V,
                out=tmp,
                bracket=bracket,
                max_rounds=max_rounds,
                n_bins=n_bins,
                large_deviation_samples=large_deviation_samples,
                progress=progress,
                on_round=on_round,
                **kw,
            )
    return _Search(out, Ls, Ns, configs, run, bracket, max_rounds, n_bins, large_deviation_samples, progress).run(
        on_round
    )


class _Search:
    """The state of one map's search: its stores, the theory's lines and the summaries read so
    far (each ``(L, N)``'s kept while its sampled ``P`` do not change)."""

    def __init__(self, out, Ls, Ns, configs, run, width, max_rounds, n_bins, n_ld, progress):
        self.out, self.Ls, self.Ns, self.width, self.max_rounds = out, Ls, Ns, width, max_rounds
        self.n_bins, self.n_ld, self.progress, self.run_kw = n_bins, n_ld, progress, run
        self.fixed_windows = run["fixed_windows"]
        self.configs = dict(configs)
        self.theory: dict[tuple[int, float], TheoryLines] = {}
        self.summaries: dict[tuple[int, float, tuple[int, ...]], SoftmaxScan] = {}
        self.points: dict[int, list[tuple[float, int]]] = {L: [] for L in Ls}
        self.rounds: list[Round] = []

    def store(self, L: int) -> str:
        return os.path.join(self.out, f"L{L}")

    def lines(self, L: int, N: float) -> TheoryLines:
        if (L, N) not in self.theory:
            self.theory[L, N] = theory_lines(self.configs[L].arch, N, large_deviation_samples=self.n_ld)
        return self.theory[L, N]

    def resume(self) -> None:
        """Read the stores and rounds of an earlier call, finishing a round it left unfinished."""
        from jaxattn import engine
        from jaxattn.engine import store

        path = os.path.join(self.out, "rounds.json")
        if os.path.exists(path):
            self.rounds = list(_rounds(store.read_json(path)["rounds"]))
        for L in self.Ls:
            found = _stored(self.store(L))
            if found is None:
                continue
            config, points, n_chains, data_seed = found
            mine = self.configs[L]
            if not self.fixed_windows:
                mine = dataclasses.replace(mine, n_windows=config.n_windows)
            theirs = (config, n_chains, data_seed)
            if theirs != (mine, self.run_kw["n_chains"], self.run_kw["data_seed"]):
                diff = [
                    f.name for f in dataclasses.fields(config) if getattr(config, f.name) != getattr(mine, f.name)
                ] + [k for k, v in (("n_chains", n_chains), ("data_seed", data_seed)) if v != self.run_kw[k]]
                raise ValueError(
                    f"{self.store(L)} was sampled with other settings ({', '.join(diff)} differ): "
                    "use another --out, or remove it"
                )
            self.configs[L], self.points[L] = mine, points
            t0 = time.perf_counter()
            report = engine.run_sweep(engine.load_file(os.path.join(self.store(L), "sweep.toml")), self.store(L))
            self._failed(L, report)
            if report.computed and self.rounds and self.rounds[-1].seconds is None:
                last = self.rounds[-1]
                self.rounds[-1] = dataclasses.replace(last, seconds=round(time.perf_counter() - t0, 1))
        self._save_rounds()

    def _failed(self, L: int, report) -> None:
        from jaxattn import engine

        if report.failed:
            raise engine.ChunksFailed(self.store(L), report.failed)

    def summary(self, L: int, N: float, ds: xr.Dataset | None) -> SoftmaxScan | None:
        Ps = tuple(sorted(p for n, p in self.points[L] if n == N))
        if not Ps:
            return None
        key = (L, N, Ps)
        if key not in self.summaries:
            assert ds is not None
            part = dict(_by_N(ds))[N]
            self.summaries[key] = _scan(part, self.n_bins, self.lines(L, N))
        return self.summaries[key]

    def read(self) -> dict[tuple[int, float], SoftmaxScan | None]:
        from jaxattn import engine

        out = {}
        for L in self.Ls:
            todo = [
                N
                for N in self.Ns
                if (L, N, tuple(sorted(p for n, p in self.points[L] if n == N))) not in self.summaries
            ]
            ds = engine.load_store(self.store(L)) if self.points[L] and todo else None
            for N in self.Ns:
                out[L, N] = self.summary(L, N, ds)
        return out

    def sample(self, proposals: dict[int, list[tuple[float, int]]]) -> Round:
        """One round: each ``L``'s new points added to its store's grid and computed."""
        from jaxattn import engine

        t0 = time.perf_counter()
        new = tuple((L, N, P) for L, pts in proposals.items() for N, P in pts)
        planned = Round(len(self.rounds) + 1, new, len(new) * self.run_kw["n_chains"], None)
        self.rounds.append(planned)
        for L, pts in proposals.items():
            config = self.configs[L]
            need = _windows_needed(config, pts)
            if not self.points[L] and not self.fixed_windows:
                config = self.configs[L] = dataclasses.replace(config, n_windows=need)
            elif need > config.n_windows:
                raise ValueError(
                    f"n_windows={config.n_windows} is fewer than the {need} windows round {planned.index} needs "
                    f"at L={L} (N, P = {pts}): map into another --out with --n-windows {need}"
                )
            self.points[L] = self.points[L] + list(pts)
            sweep = _sweep(config, self.points[L], self.run_kw["n_chains"], self.run_kw["data_seed"])
            self._save_rounds()
            self._failed(L, engine.run_sweep(sweep, self.store(L), extend=True, progress=self.progress))
        done = dataclasses.replace(planned, seconds=round(time.perf_counter() - t0, 1))
        self.rounds[-1] = done
        self._save_rounds()
        return done

    def _save_rounds(self) -> None:
        from jaxattn.engine import store

        os.makedirs(self.out, exist_ok=True)
        store.write_json(os.path.join(self.out, "rounds.json"), {"rounds": json_safe(self.rounds)})

    def run(self, on_round) -> PhaseMap:
        self.resume()
        span = {L: self.configs[L].reweight_span for L in self.Ls}
        while True:
            summaries = self.read()
            proposals: dict[int, list[tuple[float, int]]] = {}
            for (L, N), s in summaries.items():
                Ps = next_round(s, self.lines(L, N), span[L], self.width)
                if Ps:
                    proposals.setdefault(L, []).extend((N, P) for P in Ps)
            if not proposals or len(self.rounds) >= self.max_rounds:
                break
            done = self.sample(proposals)
            if on_round:
                on_round(done)
        rows = [_row(self.configs[L].arch, N, s, self.lines(L, N)) for (L, N), s in summaries.items() if s is not None]
        return _phase_map(rows, self.rounds)
