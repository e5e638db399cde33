"""The search for ``P*`` on sampled profiles: scans over ``P`` with one window count (one
compile), the basins' log-odds and where they cross zero, refined by secant steps; linear
attention's moving minimum; and the same summaries from a sweep's draws.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np
import xarray as xr

from jaxattn.copyhead import action, linear, network
from jaxattn.copyhead._config import REWEIGHT_SPAN, CopyLandscapeConfig
from jaxattn.copyhead.landscape._experiment import COPY_LANDSCAPE
from jaxattn.copyhead.landscape._profiles import (
    SampledProfile,
    basin_log_ratio,
    inverse_temperature,
    ladder_spread,
    profile_of,
    reweighted_log_ratio,
    reweighted_profile,
    sampled_minimum,
    sampled_profile,
)
from jaxattn.copyhead.landscape._windows import default_range, place_windows
from jaxattn.copyhead.profile import theory_barrier, theory_slope
from jaxattn.core import checks, precision, umbrella


@dataclass(frozen=True)
class SoftmaxScan:
    """A scan of sampled profiles over ``P`` at one ``N`` (softmax attention), and ``P*`` from it
    (:func:`landscape`, :func:`landscape_of_dataset`). Numbers that do not exist are ``NaN``.

    Attributes:
        N: inverse temperature.
        P: the sampled ``P``, increasing.
        p_star_theory: the reduced action's ``P*``.
        a_barrier: the previous-token weight dividing the basins (the reduced action's barrier).
        p_star_sampled: where the basins' log-odds cross zero (:func:`curve_crossing` on the
            reweighted curve of the ``P`` nearest it, or :func:`crossing` between sampled ``P``).
        p_star_sampled_err: its standard error.
        log_ratio: per ``P``, ``ln(p_copy / p_uniform)``; ``log_ratio_err`` its errors.
        log_ratio_err: see ``log_ratio``.
        barrier: per ``P``, the profile's largest barrier in ``kT``; ``barrier_err`` its errors.
        barrier_err: see ``barrier``.
        first_order: per ``P``, whether that barrier clears two errors
            (:func:`jaxattn.core.umbrella.two_basins`).
        log_ratio_slope: the log-odds' slope in ``P`` at the crossing (:func:`curve_slope`, or
            between the bracketing ``P``), per sequence; ``log_ratio_slope_err`` its error.
        log_ratio_slope_err: see ``log_ratio_slope``.
        jump_a: the jump of the posterior mean of ``a`` across the crossing
            (:func:`basin_jump`); ``jump_a_err`` its error.
        jump_a_err: see ``jump_a``.
        P_nearest_p_star: the integer ``P`` nearest ``P*`` whose profile (reweighted there, with
            reweighting) gives the barrier and the jump at ``P*``.
        first_order_sampled: whether that profile's barrier clears two errors.
        barrier_at_p_star: that barrier in ``kT``; ``barrier_at_p_star_err`` its error.
        barrier_at_p_star_err: see ``barrier_at_p_star``.
        reweighted_P: per sampled ``P``, the ``P + d`` its draws were reweighted to (empty
            without reweighting).
        reweighted_log_ratio: the log-odds there; ``reweighted_log_ratio_err`` their errors.
        reweighted_log_ratio_err: see ``reweighted_log_ratio``.
        profiles: the :class:`SampledProfile` per ``P``.
    """

    N: float
    P: tuple[int, ...]
    p_star_theory: float
    a_barrier: float
    p_star_sampled: float
    p_star_sampled_err: float
    log_ratio: tuple[float, ...]
    log_ratio_err: tuple[float, ...]
    barrier: tuple[float, ...]
    barrier_err: tuple[float, ...]
    first_order: tuple[bool, ...]
    log_ratio_slope: float
    log_ratio_slope_err: float
    jump_a: float
    jump_a_err: float
    P_nearest_p_star: int
    first_order_sampled: bool
    barrier_at_p_star: float
    barrier_at_p_star_err: float
    reweighted_P: tuple[tuple[int, ...], ...]
    reweighted_log_ratio: tuple[tuple[float, ...], ...]
    reweighted_log_ratio_err: tuple[tuple[float, ...], ...]
    profiles: tuple[SampledProfile, ...]

    def curves(self) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Per sampled ``P`` its reweighted curve ``(d, y, dy)`` in shifts ``d`` of ``P``."""
        return [
            (np.asarray(rp, float) - P, np.asarray(y, float), np.asarray(dy, float))
            for P, rp, y, dy in zip(self.P, self.reweighted_P, self.reweighted_log_ratio, self.reweighted_log_ratio_err)
        ]


@dataclass(frozen=True)
class LinearScan:
    """A scan of sampled profiles over ``P`` at one ``N`` (linear attention, along ``|a_G|``):
    the sampled minimum against the reduced action's (:func:`linear_landscape`).

    Attributes:
        N: inverse temperature.
        P: the sampled ``P``, increasing.
        p_onset_theory: the reduced action's second-order onset.
        a_min_sampled: per ``P``, ``|a_G|`` at the sampled profile's minimum
            (:func:`sampled_minimum`).
        a_min_theory: per ``P``, the reduced action's.
        bin_width: the sampled profiles' bin width.
        profiles: the :class:`SampledProfile` per ``P``.
    """

    N: float
    P: tuple[int, ...]
    p_onset_theory: float
    a_min_sampled: tuple[float, ...]
    a_min_theory: tuple[float, ...]
    bin_width: float
    profiles: tuple[SampledProfile, ...]


def scan_record(scan: SoftmaxScan | LinearScan) -> dict:
    """A scan's fields but its profiles, as JSON values (:func:`jaxattn.io.json_safe`).

    Args:
        scan: A one-point scan (:func:`softmax_scan` or the linear one).

    Returns:
        Field name -> JSON value (tuples as lists, non-finite numbers as ``None``).
    """
    from jaxattn.io import json_safe

    return json_safe({f.name: getattr(scan, f.name) for f in dataclasses.fields(scan) if f.name != "profiles"})


def crossing(P: np.ndarray, y: np.ndarray, dy: np.ndarray) -> tuple[float, float]:
    """Where ``y(P)`` crosses zero: the straight line through the two grid points that bracket the
    first sign change, and the standard error of ``P0`` from their errors (delta method).

    Args:
        P: increasing grid, shape ``(n,)``.
        y: values (e.g. :func:`basin_log_ratio`), shape ``(n,)``.
        dy: their standard errors, shape ``(n,)``.

    Returns:
        ``(P0, error)``; ``(nan, nan)`` without a sign change.
    """
    P, y, dy = (np.asarray(v, float) for v in (P, y, dy))
    ok = np.isfinite(y) & np.isfinite(dy)
    P, y, dy = P[ok], y[ok], np.maximum(dy[ok], 1e-12)
    change = np.flatnonzero(np.sign(y[:-1]) != np.sign(y[1:]))
    if change.size == 0:
        return float("nan"), float("nan")
    i = int(change[0])
    sel = slice(i, i + 2)
    x, z, w = P[sel], y[sel], 1.0 / dy[sel] ** 2
    A = np.stack([np.ones_like(x), x], axis=1)
    cov = np.linalg.inv(A.T @ (w[:, None] * A))
    b0, b1 = cov @ (A.T @ (w * z))
    P0 = -b0 / b1
    grad = np.array([-1.0 / b1, b0 / b1**2])
    return float(P0), float(np.sqrt(grad @ cov @ grad))


def _resolved(d, y, dy) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The points of a reweighted curve that the draws resolve: finite, with a finite error, and
    not at the clip of :func:`reweighted_log_ratio` (a target that puts all its weight in one basin
    is no longer seen by the draws)."""
    d, y, dy = (np.asarray(v, float) for v in (d, y, dy))
    ok = np.isfinite(y) & np.isfinite(dy) & (np.abs(y) < 30.0)
    return d[ok], y[ok], dy[ok]


def curve_crossing(P: int, d: np.ndarray, y: np.ndarray, dy: np.ndarray) -> tuple[float, float]:
    """Where one ``P``'s reweighted log-odds (:func:`reweighted_log_ratio`, at ``P + d``) cross
    zero: the straight line between the two shifts that bracket the first sign change, with the
    standard error of the log-odds there over the line's slope (the points share their draws,
    so the slope is far better known than either point).

    Args:
        P: the sampled ``P``.
        d: increasing shifts, shape ``(S,)``.
        y: the log-odds at ``P + d``, shape ``(S,)``.
        dy: their standard errors, shape ``(S,)``.

    Returns:
        ``(P0, error)``; ``(nan, nan)`` without a sign change.
    """
    d, y, dy = _resolved(d, y, dy)
    change = np.flatnonzero(np.sign(y[:-1]) != np.sign(y[1:]))
    if change.size == 0:
        return float("nan"), float("nan")
    i = int(change[0])
    slope = (y[i + 1] - y[i]) / (d[i + 1] - d[i])
    x0 = d[i] - y[i] / slope
    return float(P + x0), float(np.interp(x0, d, dy) / abs(slope))


def curve_slope(
    x0: float, d: np.ndarray, y: np.ndarray, dy: np.ndarray, half_width: float = 3.0
) -> tuple[float, float]:
    """The slope of one ``P``'s reweighted log-odds at ``d = x0``: a straight-line fit over the
    resolved points within ``half_width`` of it, with the fit's standard error from its residuals
    (the points share their draws, so their own errors, mostly common, say little of the slope's).

    Args:
        x0: where (in shifts of the sampled ``P``).
        d: shifts, shape ``(S,)``.
        y: log-odds at ``P + d``, shape ``(S,)``.
        dy: their errors, shape ``(S,)``.
        half_width: the fit's half-width in sequences.

    Returns:
        ``(slope, error)`` per sequence; ``(nan, nan)`` with fewer than three points.
    """
    d, y, _ = _resolved(d, y, dy)
    near = np.abs(d - x0) <= half_width
    if near.sum() < 3:
        return float("nan"), float("nan")
    coef, cov = np.polyfit(d[near], y[near], 1, cov=True)
    return float(coef[0]), float(np.sqrt(cov[0, 0]))


def _bracket_slope(P: np.ndarray, y: np.ndarray, dy: np.ndarray) -> tuple[float, float]:
    """The log-odds' slope between the two ``P`` that bracket their first sign change, with its
    error from theirs; ``(nan, nan)`` without one."""
    ok = np.isfinite(y) & np.isfinite(dy)
    P, y, dy = P[ok], y[ok], dy[ok]
    change = np.flatnonzero(np.sign(y[:-1]) != np.sign(y[1:]))
    if change.size == 0:
        return float("nan"), float("nan")
    i = int(change[0])
    return float((y[i + 1] - y[i]) / (P[i + 1] - P[i])), float(np.hypot(dy[i], dy[i + 1]) / (P[i + 1] - P[i]))


def basin_jump(a: np.ndarray, F: np.ndarray, dF: np.ndarray, basins: umbrella.Basins) -> tuple[float, float]:
    """The jump of the posterior mean of ``a`` across ``P*``: with two basins, the mean of ``a``
    right of the barrier's top minus that left of it, each under ``p(a) ~ exp(-F(a))`` on the
    profile's bins, with an error from the bins' errors (taken independent); 0 where the profile
    has one basin. As a critical point is approached the basins merge, and the jump goes to zero
    with the barrier.

    Args:
        a: bin centres, shape ``(B,)``.
        F: the profile, shape ``(B,)`` (``NaN``: empty bin).
        dF: its errors, shape ``(B,)``.
        basins: the profile's :func:`jaxattn.core.umbrella.two_basins`.

    Returns:
        ``(jump, error)``.
    """
    if not basins.barrier > 0:
        return 0.0, 0.0
    a, F, dF = (np.asarray(x, float) for x in (a, F, dF))
    ok = np.isfinite(F) & np.isfinite(dF)
    means, var = [], 0.0
    for side in (a[ok] < basins.a_top, a[ok] > basins.a_top):
        x, f, df = a[ok][side], F[ok][side], dF[ok][side]
        w = np.exp(-(f - f.min()))
        m = float(np.sum(w * x) / np.sum(w))
        means.append(m)
        var += float(np.sum((w * (x - m) / np.sum(w)) ** 2 * df**2))  # d m / d F_i = -w_i (x_i - m) / sum w
    return means[1] - means[0], float(np.sqrt(var))


def default_P(p_star: float, slope: float) -> list[int]:
    """A grid of ``P`` around ``p_star`` whose spacing changes the theory's log-odds by about 3:
    ``p_star + k delta`` for ``k = -1 .. 3`` with ``delta = 3 / slope`` (at least 1), rounded to
    distinct integers. Where the reduced action has one minimum (a crossover: the slope is 0),
    ``delta = p_star / 20``.

    Args:
        p_star: the theory's ``P*``.
        slope: :func:`theory_slope`.

    Returns:
        Increasing integers (at least 1).
    """
    delta = max(3.0 / abs(slope) if slope and np.isfinite(slope) else p_star / 20, 1.0)
    return sorted({max(1, int(round(p_star + k * delta))) for k in (-1, 0, 1, 2, 3)})


def next_center(
    Ps: Sequence[int], log_ratio: Sequence[float], curves: Sequence[tuple | None], span: int, slope: float
) -> float | None:
    """Where the basins' log-odds most likely cross zero, from scans whose reweighted curves do
    not (yet) cross it: once two sampled ``P`` bracket the crossing, the secant between the
    bracketing pair, kept off its ends (a curve far from zero is flat and extrapolates too far);
    before that, from the sampled point nearest zero, along its curve's own slope (least squares
    over the curve; ``slope`` where that is not positive) to where it would cross, a step of at
    most a quarter of ``P`` (or the curve's own width).

    Args:
        Ps: the sampled ``P``, increasing.
        log_ratio: their log-odds.
        curves: per ``P`` its reweighted curve ``(d, y, dy)`` (:func:`reweighted_log_ratio`), or
            ``None``.
        span: the reweighting span (the curves' half-width).
        slope: the theory's log-odds per sequence (:func:`theory_slope`).

    Returns:
        The next ``P`` to sample around (not rounded), or ``None`` where the curves give no
            direction.
    """
    ks, lr = list(Ps), np.asarray(log_ratio, float)
    change = np.flatnonzero(np.sign(lr[:-1]) != np.sign(lr[1:]))
    if change.size and np.all(np.isfinite(lr)):
        i = int(change[0])
        # on saturated log-odds the secant alone would creep in from one end
        t = float(np.clip(-lr[i] / (lr[i + 1] - lr[i]), 0.1, 0.9))
        if ks[i + 1] - ks[i] < 2:
            return None
        return float(min(max(int(round(ks[i] + t * (ks[i + 1] - ks[i]))), ks[i] + 1), ks[i + 1] - 1))
    usable = [(p, *_resolved(*cv)) for p, cv in zip(ks, curves) if cv is not None]
    usable = [u for u in usable if u[1].size >= 2]
    if not usable:
        return None
    p0, d, y, _ = min(usable, key=lambda c: np.min(np.abs(c[2])))
    k = int(np.argmin(np.abs(y)))
    s = float(np.polyfit(d, y, 1)[0])
    s = s if s > 0 else slope
    # a flat curve (a crossover's slope is 0) steps as far as it may, towards zero
    step = d[k] - y[k] / s if s > 0 else -np.sign(y[k]) * np.inf
    reach = max(0.25 * p0, 2 * span + 1)
    return p0 + float(np.clip(step, -reach, reach))


def _check_sampler(arch: network.CopyArch, N: float, kw: dict) -> None:
    """The sampler's settings checked before any work (the theory's ``P*`` included), as
    :func:`sampled_profile` will check them."""
    fields = {f.name for f in dataclasses.fields(CopyLandscapeConfig)} - {"n_windows", "c_lo", "c_hi"}
    arch_fields = {f.name: getattr(arch, f.name) for f in dataclasses.fields(network.CopyArch)}
    CopyLandscapeConfig(**arch_fields, **{k: v for k, v in kw.items() if k in fields}).validate()
    COPY_LANDSCAPE.axis["N"].check(N)
    if "n_chains" in kw:
        checks.integer("n_chains", kw["n_chains"], 2)


def _scan(arch: network.CopyArch, N: float, Ps: list[int], progress: bool, kw: dict):
    """``(profile_at, bar)``: :func:`sampled_profile` at any ``P`` of a scan, with one window
    count for the whole scan (one shape, one compile), and the scan's progress bar."""
    from tqdm.auto import tqdm

    kw = dict(kw)
    fixed = kw.pop("n_windows", None)
    c_range = kw.get("c_range") or default_range(arch)
    placing = {k: kw[k] for k in ("max_spacing", "spring") if kw.get(k) is not None}
    bar = tqdm(total=len(Ps), desc=f"landscape N={N:g}", disable=not progress)

    def needed(p):
        return place_windows(arch, p, N, c_range, **placing)[1].size

    # the most any P of the grid needs, rounded up to a multiple of 8 so that the P added later
    # (between or just beyond the grid's) almost always fit; one that does not raises the count,
    # at the cost of one more compile
    n_win = fixed if fixed is not None else -(-max(needed(p) for p in Ps) // 8) * 8

    def profile_at(p):
        nonlocal n_win
        if fixed is None:
            n_win = max(n_win, -(-needed(p) // 8) * 8)
        if p not in Ps:
            bar.total += 1
        prof = sampled_profile(arch, p, N, n_windows=n_win, **kw)
        bar.update(1)
        return prof

    return profile_at, bar


def linear_landscape(
    arch: network.CopyArch, P: list[int] | None = None, N: float = 1.0, *, progress: bool = False, **kw
) -> LinearScan:
    """Linear attention: sampled profiles along ``|a_G|`` at every ``P`` (:func:`sampled_profile`,
    one compile for the scan), and the sampled minimum (:func:`sampled_minimum`) against the
    reduced action's (:func:`jaxattn.copyhead.linear.linear_minimum`): one minimum that leaves
    ``a_G = 0`` at the second-order onset and moves continuously.

    Args:
        arch: the network (linear attention).
        P: numbers of training sequences (default: 0.5, 1, 2 and 4 times the theory's onset).
        N: inverse temperature.
        progress: show a progress bar over ``P``.
        **kw: passed to :func:`sampled_profile`.

    Returns:
        :class:`LinearScan`.
    """
    arch = arch.validate()
    N = action.check_N(N)
    kw = {k: v for k, v in kw.items() if k != "reweight_span"}  # no P* to find: nothing to reweight
    _check_sampler(arch, N, kw)
    onset = linear.linear_onsets(arch, N).P_onset
    Ps = (
        sorted({max(1, int(round(f * onset))) for f in (0.5, 1.0, 2.0, 4.0)})
        if P is None
        else sorted({int(p) for p in action.check_P(list(P))})
    )
    profile_at, bar = _scan(arch, N, Ps, progress, kw)
    profiles = [profile_at(p) for p in Ps]
    bar.close()
    return _linear_summary(arch, N, Ps, profiles)


def _linear_summary(arch: network.CopyArch, N: float, Ps: list[int], profiles: list[SampledProfile]) -> LinearScan:
    """:func:`linear_landscape`'s scan from its profiles."""
    with precision.float64():
        theory = linear.linear_scan_jit(jnp.asarray(Ps, jnp.float64), action.hyper(arch, N))
    return LinearScan(
        N=float(N),
        P=tuple(int(p) for p in Ps),
        p_onset_theory=float(linear.linear_onsets(arch, N).P_onset),
        a_min_sampled=tuple(sampled_minimum(p) for p in profiles),
        a_min_theory=tuple(np.abs(np.asarray(theory.aG)).tolist()),
        bin_width=float(profiles[0].a[1] - profiles[0].a[0]),
        profiles=tuple(profiles),
    )


def _log_odds(prof: SampledProfile, a_bar: float, L: int) -> tuple[float, float, tuple | None]:
    """A profile's basin log-odds and error at its own ``P``, and its reweighted curve (``None``
    without recorded shifts): with a curve, the log-odds are its point at ``d = 0`` (one MBAR
    solve for both). The error is the larger of MBAR's and the spread between ladders
    (:func:`ladder_spread`), point by point."""
    # the pooled draws before the ladders': the pool's MBAR solution is still remembered
    # (:func:`jaxattn.core.umbrella.profile` solved it) when each ladder adds its own
    if prof.dS is None:
        d, y, dy = np.zeros(1, int), *(np.array([v]) for v in basin_log_ratio(prof, a_bar, L))
    else:
        d, y, dy = reweighted_log_ratio(prof, a_bar, L)
    dy = np.maximum(dy, ladder_spread(prof, a_bar, L) if prof.draws.a.shape[1] > 1 else 0.0)
    at = d == 0
    return float(y[at][0]), float(dy[at][0]), None if prof.dS is None else (d, y, dy)


def _softmax_summary(
    arch: network.CopyArch,
    N: float,
    Ps: list[int],
    profiles: list[SampledProfile],
    lr: np.ndarray,
    dlr: np.ndarray,
    curves: list,
    p_star: float,
    a_bar: float,
) -> SoftmaxScan:
    """:func:`landscape`'s scan from its profiles, their basins' log-odds and, where the draws
    recorded shifts of ``P``, their reweighted curves (``None`` elsewhere), beside the theory's
    ``P*`` and divider."""
    P0, dP0 = crossing(np.asarray(Ps, float), lr, dlr)
    # with reweighting, the crossing of the curve of the P nearest it (the shortest reweighting)
    found = [(abs(c0 - P), c0, e) for P, cv in zip(Ps, curves) if cv is not None for c0, e in [curve_crossing(P, *cv)]]
    found = [f for f in found if np.isfinite(f[1])]
    basins = [umbrella.two_basins(p.a, p.F, p.dF) for p in profiles]
    # the scanned P nearest the sampled P* (nearest the smallest log-odds without a crossing)
    at = int(np.argmin(np.abs(np.asarray(Ps, float) - P0))) if np.isfinite(P0) else int(np.argmin(np.abs(lr)))
    near, at_star = Ps[at], basins[at]
    star_a, star_F, star_dF = profiles[at].a, profiles[at].F, profiles[at].dF
    slope = _bracket_slope(np.asarray(Ps, float), lr, dlr)
    if found:  # the crossing of a reweighted curve: the profile there, reweighted to the nearest P
        _, P0, dP0 = min(found)
        at = int(np.argmin(np.abs(np.asarray(Ps, float) - P0)))
        d = int(np.clip(round(P0 - Ps[at]), profiles[at].shifts.min(), profiles[at].shifts.max()))
        star = reweighted_profile(profiles[at], arch, d)
        near, at_star = Ps[at] + d, umbrella.two_basins(star.a, star.F, star.dF)
        star_a, star_F, star_dF = star.a, star.F, star.dF
        cv = curves[at]
        assert cv is not None
        slope = curve_slope(P0 - Ps[at], *cv)
    jump, jump_err = basin_jump(star_a, star_F, star_dF, at_star)
    return SoftmaxScan(
        N=float(N),
        P=tuple(int(p) for p in Ps),
        p_star_theory=float(p_star),
        a_barrier=float(a_bar),
        p_star_sampled=float(P0),
        p_star_sampled_err=float(dP0),
        log_ratio=tuple(float(x) for x in lr),
        log_ratio_err=tuple(float(x) for x in dlr),
        barrier=tuple(float(b.barrier) for b in basins),
        barrier_err=tuple(float(b.barrier_err) for b in basins),
        first_order=tuple(bool(b.first_order) for b in basins),
        log_ratio_slope=float(slope[0]),
        log_ratio_slope_err=float(slope[1]),
        jump_a=float(jump),
        jump_a_err=float(jump_err),
        P_nearest_p_star=int(near),
        first_order_sampled=bool(at_star.first_order),
        barrier_at_p_star=float(at_star.barrier),
        barrier_at_p_star_err=float(at_star.barrier_err),
        reweighted_P=tuple(tuple((P + cv[0]).tolist()) for P, cv in zip(Ps, curves) if cv is not None),
        reweighted_log_ratio=tuple(tuple(cv[1].tolist()) for cv in curves if cv is not None),
        reweighted_log_ratio_err=tuple(tuple(cv[2].tolist()) for cv in curves if cv is not None),
        profiles=tuple(profiles),
    )


def landscape(
    arch: network.CopyArch,
    P: list[int] | None = None,
    N: float = 1.0,
    *,
    max_extend: int = 5,
    progress: bool = False,
    **kw,
) -> SoftmaxScan | LinearScan:
    """Sampled profiles at every ``P`` (:func:`sampled_profile`, with one window count, hence one
    compile, for the whole scan), each basin's probability across the theory's barrier
    (:func:`basin_log_ratio`), and ``P*`` from sampling: where ``ln(p_copy / p_uniform)`` crosses
    zero (:func:`crossing`), against the theory's ``P*`` at the same ``N``.

    Each sampled ``P``'s draws are reweighted to ``P + d`` for ``|d| <= reweight_span`` (default
    :data:`~jaxattn.copyhead._config.REWEIGHT_SPAN`; :func:`reweighted_log_ratio`): the scan starts at the theory's ``P*``
    alone, and while no curve crosses zero, adds the ``P`` where the curve nearest zero, followed
    along its own slope, would cross (a step of at most a quarter of ``P``), or, once two sampled
    ``P`` bracket the crossing, the secant between them (kept off the bracket's ends; up to
    ``max_extend`` more). With ``reweight_span=0`` the scan
    starts from :func:`default_P` and adds ``P`` by secant steps on the sampled log-odds: outward
    until a pair of ``P`` brackets the crossing, then inside the bracket until it is narrow (an
    end's log-odds within 0.5 of zero, or 2% of ``P`` wide). Linear attention has no jump: its
    scan is :func:`linear_landscape`, which this calls (``max_extend`` and ``reweight_span``
    unused).

    Args:
        arch: the network.
        P: numbers of training sequences (default: as above).
        N: inverse temperature.
        max_extend: the most ``P`` added to find the crossing.
        progress: show a progress bar over ``P``.
        **kw: passed to :func:`sampled_profile` (with ``reweight_span`` default
            :data:`~jaxattn.copyhead._config.REWEIGHT_SPAN`).

    Returns:
        :class:`SoftmaxScan` (:class:`LinearScan` for linear attention). With
            ``reweight_span``, each ``P``'s draws also give the log-odds at ``P + d``, the scan
            stops as soon as one of these curves crosses zero, and ``P*`` is that crossing
            (:func:`curve_crossing`, on the curve of the ``P`` nearest it); the barrier and the
            jump are then those of the profile reweighted to the integer ``P`` nearest ``P*``
            (:func:`reweighted_profile`).
    """
    arch = arch.validate()
    N = action.check_N(N)
    if arch.attention != "softmax":
        return linear_landscape(arch, P, N, progress=progress, **kw)
    _check_sampler(arch, N, kw)
    p_star, a_bar = theory_barrier(arch, N)
    slope = theory_slope(arch, N, p_star)
    kw = {"reweight_span": REWEIGHT_SPAN, **kw}
    span = kw["reweight_span"]
    if P is not None:
        Ps = sorted({int(p) for p in action.check_P(list(P))})
    else:  # one P's curve spans 2 span + 1 sequences; without it, a grid around the theory
        Ps = [max(int(round(p_star)), span + 1)] if span else default_P(p_star, slope)
    res: dict[int, tuple[SampledProfile, float, float]] = {}
    curves: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    profile_at, bar = _scan(arch, N, Ps, progress, kw)

    def run(p):
        prof = profile_at(p)
        y, dy, cv = _log_odds(prof, a_bar, arch.L)
        res[p] = (prof, y, dy)
        if cv is not None:
            curves[p] = cv

    def curve_step() -> int | None:
        """The next ``P`` from the reweighted curves (:func:`next_center`), ``None`` where it is
        already sampled."""
        ks = sorted(res)
        center = next_center(ks, [res[k][1] for k in ks], [curves.get(k) for k in ks], span, slope)
        if center is None:
            return None
        nxt = max(span + 1, int(round(center)))
        return None if nxt in res else nxt

    for p in Ps:
        run(p)
    for _ in range(max_extend):
        if any(np.isfinite(curve_crossing(0, *cv)[0]) for cv in curves.values()):
            break
        if curves:
            nxt = curve_step()
            if nxt is None:
                break
            run(nxt)
            continue
        ks = sorted(res)
        lr = np.array([res[k][1] for k in ks])
        if not np.all(np.isfinite(lr)):
            break
        change = np.flatnonzero(np.sign(lr[:-1]) != np.sign(lr[1:]))
        if change.size:
            # bracketed: refine by the secant inside the bracket until it is narrow (an end within
            # 0.5 of zero, or 2% of P wide), where the log-odds are straight
            i = int(change[0])
            if min(abs(lr[i]), abs(lr[i + 1])) < 0.5 or ks[i + 1] - ks[i] <= max(1, 0.02 * ks[i]):
                break
            nxt = int(round(ks[i] - lr[i] * (ks[i + 1] - ks[i]) / (lr[i + 1] - lr[i])))
            nxt = min(max(nxt, ks[i] + 1), ks[i + 1] - 1)
            run(nxt)
            continue
        # one sign everywhere: the log-odds grow with P, so step up from the largest P (all
        # negative) or down from the smallest (all positive), by the secant of the two nearest
        up = lr[-1] < 0
        i, j = (-1, -2) if up else (0, 1)
        s = (lr[i] - lr[j]) / (ks[i] - ks[j]) if len(ks) > 1 else slope
        s = s if s > 0 else slope
        step = max(1, int(np.ceil(1.2 * abs(lr[i]) / s)))
        nxt = ks[i] + step if up else max(1, ks[i] - step)
        if nxt in res:
            break
        run(nxt)
    bar.close()
    ks = sorted(res)
    lr, dlr = np.array([res[k][1] for k in ks]), np.array([res[k][2] for k in ks])
    return _softmax_summary(arch, N, ks, [res[k][0] for k in ks], lr, dlr, [curves.get(k) for k in ks], p_star, a_bar)


def landscape_of_dataset(ds: xr.Dataset, n_bins: int = 40) -> SoftmaxScan | LinearScan:
    """:func:`landscape`'s summary from a ``copy_landscape`` sweep (or any run of
    :class:`CopyLandscape`) of one data set: the profile of every ``P`` (:func:`profile_of`);
    for softmax the basins' log-odds across the theory's barrier and the sampled ``P*``, against
    the theory's; for linear attention the sampled minimum against the theory's.

    Args:
        ds: the dataset, dimensions ``P``, ``window``, ``chain``, ``draw`` (and ``data_seed`` and
            ``N`` of length one, if dimensions); every window of each ``P`` (``0`` to
            ``n_windows - 1``).
        n_bins: bins of the profiles.

    Returns:
        :class:`SoftmaxScan` or :class:`LinearScan`, as :func:`landscape` gives them, of only
            the ``P`` of the dataset.

    Raises:
        ValueError: if the dataset is not the experiment's, holds several data sets or ``N``, or
            lacks a window.
    """
    arch, N, Ps, profiles = _dataset_profiles(ds, n_bins)
    if arch.attention != "softmax":
        return _linear_summary(arch, N, Ps, profiles)
    return softmax_scan(arch, N, Ps, profiles, theory_barrier(arch, N))


def _dataset_profiles(ds: xr.Dataset, n_bins: int) -> tuple[network.CopyArch, float, list[int], list[SampledProfile]]:
    """The network, ``N``, the ``P`` and their profiles of a ``copy_landscape`` dataset of one
    data set and one ``N`` (:func:`landscape_of_dataset`'s checks)."""
    from jaxattn.engine import config as cfgs

    if ds.attrs.get("experiment") != COPY_LANDSCAPE.name:
        raise ValueError(f"not a copy_landscape dataset (experiment={ds.attrs.get('experiment')!r})")
    config = cfgs.from_json(CopyLandscapeConfig, ds.attrs["config"])
    for dim in ("data_seed", "N"):
        if dim in ds.dims:
            if ds.sizes[dim] != 1:
                raise ValueError(f"{dim}: one at a time, select one of {ds[dim].values.tolist()}")
            ds = ds.isel({dim: 0})
    if ds.sizes["window"] != config.n_windows:
        raise ValueError(f"window: the dataset has {ds.sizes['window']} of the n_windows={config.n_windows} windows")
    Ps = [int(p) for p in ds["P"].values]
    return config.arch, inverse_temperature(ds), Ps, [profile_of(ds.sel(P=P), config, P, n_bins) for P in Ps]


def softmax_scan_of_dataset(ds: xr.Dataset, n_bins: int, divider: tuple[float, float]) -> SoftmaxScan:
    """:func:`landscape_of_dataset` of softmax attention, with the basins divided where the caller
    says: ``divider = (P*, a_barrier)`` of the theory (the map's
    :func:`jaxattn.copyhead.lines.theory_lines`), so the scan asks no theory of its own.

    Args:
        ds: One ``(L, V, N)`` of a ``copy_landscape`` store, over its ``P``.
        n_bins: Histogram bins of each profile.
        divider: ``(P*, a_barrier)`` that the basins are split at.

    Returns:
        The scan's summary over the data set's ``P``.

    Raises:
        ValueError: The data set is not of softmax attention.
    """
    arch, N, Ps, profiles = _dataset_profiles(ds, n_bins)
    if arch.attention != "softmax":
        raise ValueError(f"attention: the basins are softmax attention's, got {arch.attention!r}")
    return softmax_scan(arch, N, Ps, profiles, divider)


def softmax_scan(
    arch: network.CopyArch, N: float, Ps: list[int], profiles: list[SampledProfile], divider: tuple[float, float]
) -> SoftmaxScan:
    """The scan of softmax profiles at ``Ps``: each one's basin log-odds across
    ``divider = (P*, a_barrier)``, and the summary of :func:`landscape`.

    Args:
        arch: The network the profiles were sampled for.
        N: The inverse temperature.
        Ps: The training-set sizes, increasing.
        profiles: One sampled profile per ``P``.
        divider: ``(P*, a_barrier)`` that the basins are split at.

    Returns:
        The scan's summary: the crossing of the log-odds, barrier, jump and their errors.
    """
    p_star, a_bar = divider
    lr, dlr, curves = zip(*(_log_odds(p, a_bar, arch.L) for p in profiles))
    return _softmax_summary(arch, N, Ps, profiles, np.array(lr), np.array(dlr), list(curves), p_star, a_bar)
