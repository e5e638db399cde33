"""Sampled free-energy profiles of the copy head: the windows' draws of one ``(P, N)`` turned
into ``F(a)`` by MBAR, their health, the profile's minimum and the basins' log-odds.
"""

from __future__ import annotations

import dataclasses
import json
import warnings
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
import xarray as xr

from jaxattn import engine
from jaxattn.copyhead import action, network
from jaxattn.copyhead._config import CopyLandscapeConfig
from jaxattn.copyhead.landscape._experiment import COPY_LANDSCAPE
from jaxattn.copyhead.landscape._windows import default_range, place_windows
from jaxattn.copyhead.profile import prev_weight, profile_coordinate, theory_profile
from jaxattn.core import checks, diagnostics, umbrella
from jaxattn.core.kernels import exchange
from jaxattn.engine import Grid


class SampledProfile(NamedTuple):
    """The sampled free-energy profile at one ``(P, N)``, and its windows.

    Attributes:
        a: bin centres of the profile's coordinate (the previous-token weight for softmax,
            ``|a_G|`` for linear attention), shape ``(B,)``.
        F: ``F(a) = -ln p(a)`` relative to its lowest bin, shape ``(B,)`` (``NaN``: empty bin).
        dF: MBAR's standard error of ``F``, shape ``(B,)``.
        theory: the reduced action ``S(a) - min S`` on the same bins, shape ``(B,)``.
        windows: the umbrella windows on the windows' coordinate ``x`` (``c_G`` for softmax,
            ``|a_G|`` for linear; :class:`jaxattn.core.umbrella.Windows`).
        targets: the ``x`` each window was placed to sample, shape ``(K,)``.
        c_mean: each window's sampled mean of ``x``, shape ``(K,)``.
        rhat: each window's split R-hat of ``x`` over its chains, shape ``(K,)``.
        ess: each window's effective sample size of ``x``, shape ``(K,)``.
        flagged: windows left out because a chain diverged, shape ``(K,)``.
        draws: the windows' draws of ``x`` (:class:`jaxattn.core.umbrella.WindowDraws`).
        acceptance: per neighbouring pair of windows the fraction of replica swaps accepted,
            over every ladder, shape ``(K - 1,)`` (``NaN`` without exchange).
        passages: replicas' walks from one end of the ladder to the other, summed over ladders
            (:func:`jaxattn.core.kernels.exchange.passages`; 0 without exchange).
        move_acceptance: per window, the fraction of the kernel's moves accepted by the replicas
            that end in it, averaged over ladders, shape ``(K,)`` (1 for SGLD, which accepts
            every move).
        shifts: the shifts ``d`` of ``P`` whose action the draws recorded, shape ``(S,)``
            (empty without ``reweight_span``).
        dS: per draw, ``S_{P+d}(G) - S_P(G)``, shape ``(K, chains, draws, S)`` (``None``
            without ``reweight_span``).
        attrs: the attributes of the run that sampled it (its experiment, config and
            provenance; :func:`jaxattn.engine.dataset_attrs`).
    """

    a: np.ndarray
    F: np.ndarray
    dF: np.ndarray
    theory: np.ndarray
    windows: umbrella.Windows
    targets: np.ndarray
    c_mean: np.ndarray
    rhat: np.ndarray
    ess: np.ndarray
    flagged: np.ndarray
    draws: umbrella.WindowDraws
    acceptance: np.ndarray
    passages: int
    move_acceptance: np.ndarray
    shifts: np.ndarray
    dS: np.ndarray | None
    attrs: dict | None = None


def sampled_profile(
    arch: network.CopyArch,
    P: int,
    N: float,
    *,
    data_seed: int = 0,
    c_range: tuple[float, float] | None = None,
    max_spacing: float = 0.2,
    spring: float | None = None,
    n_windows: int | None = None,
    n_bins: int = 40,
    n_chains: int = 2,
    burn_in: int = 1000,
    n_draws: int = 200,
    thin: int = 10,
    step: float = 0.05,
    kernel: str = "sgld",
    n_leapfrog: int = 4,
    exchange: bool = True,
    swap_every: int = 10,
    reweight_span: int = 0,
    seed: int = 0,
    matmul_precision: str = "highest",
) -> SampledProfile:
    """``F(a)`` of the posterior of ``G`` with ``W`` integrated out exactly,
    ``p(G) ~ exp(-S(G))`` (B.3a on the ``P`` sequences of ``data_seed``), by umbrella sampling on
    ``x`` (:func:`place_windows`) with SGLD and replica exchange between neighbouring windows
    (every ladder of windows in one compiled program) and MBAR (:mod:`jaxattn.core.umbrella`); the profile is histogrammed on ``a`` on bins evenly
    spaced between the ``a`` of ``c_range``.

    - softmax: ``a`` is the previous-token weight and ``x = c = copy_strength(a)``;
    - linear: ``a = x = |a_G|``, with ``a_G`` the least-squares copy strength of ``A``
      (:func:`jaxattn.copyhead.network.order_parameters`). The posterior is even in ``a_G``
      (the gauge ``(G, W) -> (-G, -W)``), so ``|a_G|`` loses nothing.

    Args:
        arch: the network.
        P: number of training sequences (``>= 1``).
        N: inverse temperature (``> 0``, finite).
        data_seed: the data set (as in :func:`jaxattn.copyhead.sample`).
        c_range: ``(lo, hi)`` of the windows' targets on ``x`` (default :func:`default_range`).
        max_spacing: the windows' largest spacing (:func:`place_windows`).
        spring: the windows' spring constant on ``x`` (default: :func:`place_windows`).
        n_windows: the number of windows (default: as many as the spacing needs,
            :func:`place_windows`).
        n_bins: bins of ``a``.
        n_chains: ladders of windows (independent chains per window).
        burn_in: kernel steps before the first draw.
        n_draws: draws per chain.
        thin: kernel steps between draws.
        step: the Langevin step size times ``N`` plus the bias's curvature (the step is
            ``eps = step / (N + kappa |grad c|^2)``, SGLD stable for ``step`` below about 0.1;
            HMC's leapfrog step is ``sqrt(2 eps)``).
        kernel: the windows' sampler, ``"sgld"``, ``"mala"`` or ``"hmc"`` (the last two
            Metropolis-adjusted: no step-size bias).
        n_leapfrog: HMC's leapfrog steps per step.
        exchange: replica exchange between neighbouring windows (off: independent windows).
        swap_every: kernel steps between rounds of exchange.
        reweight_span: record the action at ``P + d`` for ``|d| <= reweight_span`` at every draw
            (:func:`reweighted_log_ratio`; 0: none).
        seed: seed of the chains.
        matmul_precision: the precision of the samplers' matrix products
            (:data:`~jaxattn.core.precision.MATMUL_PRECISIONS`).

    Returns:
        :class:`SampledProfile`.

    Raises:
        ValueError: naming ``N``, ``P``, ``n_chains``, ``burn_in``, ``n_draws``, ``thin``, ``n_bins``,
            ``matmul_precision``, the windows or the spring constant.
    """
    arch = arch.validate()
    N = COPY_LANDSCAPE.axis["N"].check(N)
    P = int(action.check_P([P])[0])
    for name, v, lo in (("n_chains", n_chains, 2), ("n_bins", n_bins, 1)):
        checks.integer(name, v, lo)  # R-hat needs two chains
    lo_hi = default_range(arch) if c_range is None else c_range
    if n_windows is None:
        n_windows = place_windows(arch, P, N, lo_hi, max_spacing, spring)[1].size
    config = CopyLandscapeConfig(
        **{f.name: getattr(arch, f.name) for f in dataclasses.fields(network.CopyArch)},
        n_windows=int(n_windows),
        c_lo=float(lo_hi[0]),
        c_hi=float(lo_hi[1]),
        max_spacing=max_spacing,
        spring=spring,
        burn_in=burn_in,
        n_draws=n_draws,
        thin=thin,
        step=step,
        kernel=kernel,
        n_leapfrog=n_leapfrog,
        exchange=exchange,
        swap_every=swap_every,
        reweight_span=reweight_span,
        chain_seed=seed,
        matmul_precision=matmul_precision,
    ).validate()
    grid = Grid.from_values(COPY_LANDSCAPE.axis, dict(P=[P], chain=range(n_chains)))
    ds = engine.run(COPY_LANDSCAPE, config, grid, fixed={"data_seed": data_seed, "N": N})
    return profile_of(ds.isel(P=0), config, P, n_bins)


def inverse_temperature(ds: xr.Dataset) -> float:
    """The ``N`` of a ``copy_landscape`` dataset at one ``N``: its coordinate where ``N`` is a
    grid variable, else the fixed value the run recorded.

    Args:
        ds: the experiment's dataset (or a selection of it).

    Returns:
        ``N``.

    Raises:
        ValueError: if the dataset holds several ``N``.
    """
    if "N" in ds.coords:
        Ns = np.unique(np.asarray(ds["N"].values, float))
        if Ns.size != 1:
            raise ValueError(f"N: one inverse temperature at a time, the dataset has {Ns.tolist()}")
        return float(Ns[0])
    return float(json.loads(ds.attrs["fixed_axes"])["N"])


def profile_of(ds: xr.Dataset, config: CopyLandscapeConfig, P: int, n_bins: int = 40) -> SampledProfile:
    """The sampled profile of one ``(P, N, data set)`` from the windows' draws of the
    ``copy_landscape`` experiment (:class:`CopyLandscape`: a sweep's, or :func:`sampled_profile`'s):
    MBAR on the independent draws (:func:`jaxattn.core.umbrella.profile`), histogrammed on ``a``
    between the ``a`` of the targets' span, with each window's split R-hat and ESS.

    Args:
        ds: the experiment's dataset at one ``P``, ``N`` and data set: ``c`` and ``replica``
            ``(chain, window, draw)``, ``diverged``, ``center``, ``spring`` and ``target``
            ``(chain, window)``, ``move_acceptance`` ``(chain, window)``, ``accepted`` and
            ``attempted`` ``(chain, pair)``.
        config: the experiment's config.
        P: the number of sequences (for the theory's line).
        n_bins: bins of ``a``.

    Returns:
        :class:`SampledProfile`.
    """
    arch = config.arch
    ds = ds.transpose("window", "chain", "draw", "pair", ...)
    c = np.asarray(ds["c"].values, float)
    w = umbrella.Windows(np.asarray(ds["center"].values[:, 0], float), np.asarray(ds["spring"].values[:, 0], float))
    targets = np.asarray(ds["target"].values[:, 0], float)
    tried = ds["attempted"].values.sum(axis=0)
    acceptance = np.where(tried > 0, ds["accepted"].values.sum(axis=0) / np.maximum(tried, 1), np.nan)
    replica = np.asarray(ds["replica"].transpose("chain", "window", "draw").values)
    walks = sum(exchange.passages(r) for r in replica) if config.exchange else 0
    cut = np.flatnonzero(acceptance == 0)
    if cut.size:
        warnings.warn(
            f"P={P}: replica exchange never swapped between windows {', '.join(f'{i}-{i + 1}' for i in cut)}: "
            "the ladder is cut there (window_diagnostics lists them; add windows or lower the spring)",
            stacklevel=2,
        )
    draws = umbrella.WindowDraws(jnp.asarray(c), jnp.asarray(ds["diverged"].values))
    lo_hi = config.c_range or default_range(arch)
    a_lo, a_hi = profile_coordinate(arch, np.asarray(lo_hi, float))
    edges = np.linspace(float(a_lo), float(a_hi), n_bins + 1)
    prof = umbrella.profile(draws, w, edges, transform=lambda x: profile_coordinate(arch, x))
    ok = np.asarray(np.isfinite(c).all(axis=2))  # (window, chain): chains that did not diverge
    rhat = np.array([diagnostics.split_rhat(c[k][ok[k]]) if ok[k].sum() >= 2 else np.nan for k in range(len(c))])
    ess = np.array([diagnostics.ess(c[k][ok[k]]) if ok[k].sum() >= 1 else np.nan for k in range(len(c))])
    return SampledProfile(
        prof.a,
        prof.F,
        prof.dF,
        theory_profile(arch, P, inverse_temperature(ds), prof.a),
        w,
        targets,
        np.nanmean(c, axis=(1, 2)),
        rhat,
        ess,
        prof.flagged,
        draws,
        acceptance,
        int(walks),
        np.asarray(ds["move_acceptance"].values, float).mean(axis=1),
        np.asarray(ds["shift"].values) if "dS" in ds else np.zeros(0, int),
        np.asarray(ds["dS"].transpose("window", "chain", "draw", "shift").values, float) if "dS" in ds else None,
        dict(ds.attrs),
    )


def profiles_dataset(profiles: list[SampledProfile], P: list[int]) -> xr.Dataset:
    """Sampled profiles over ``P`` as one dataset, with the attributes of the run that sampled
    the last (its experiment, config and provenance): ``a``, ``F``, ``dF`` and ``theory``
    ``(P, bin)``; the windows' ``target``, ``c_mean``, ``rhat``, ``ess`` and ``flagged``
    ``(P, window)``; the swap ``acceptance`` ``(P, pair)``; ``passages`` ``(P,)``. Profiles
    with fewer windows or bins than the most are padded with NaN.

    Args:
        profiles: the sampled profiles (the ``profiles`` of :func:`landscape`).
        P: their numbers of sequences.

    Returns:
        The dataset.
    """

    def stack(name: str, dim: str) -> tuple[tuple[str, str], np.ndarray]:
        rows = [np.asarray(getattr(p, name), float) for p in profiles]
        out = np.full((len(rows), max(r.size for r in rows)), np.nan)
        for i, r in enumerate(rows):
            out[i, : r.size] = r
        return ("P", dim), out

    return xr.Dataset(
        {
            **{k: stack(k, "bin") for k in ("a", "F", "dF", "theory")},
            "target": stack("targets", "window"),
            **{k: stack(k, "window") for k in ("c_mean", "rhat", "ess", "flagged")},
            "acceptance": stack("acceptance", "pair"),
            "passages": ("P", np.asarray([p.passages for p in profiles])),
        },
        coords={"P": list(P)},
        attrs=dict(profiles[-1].attrs or {}),
    )


def window_diagnostics(profiles: list[SampledProfile]) -> dict[str, list]:
    """Per profile, the windows' count and health: how many, how many left out (a diverged chain),
    the largest split R-hat and the smallest effective sample size of ``c``, the lowest fraction of
    the kernel's moves accepted in a window (1 for SGLD; a Metropolis-adjusted kernel whose step is
    too large for the target accepts few, and its window mixes slowly); with replica
    exchange, the lowest swap acceptance of a neighbouring pair, the pairs that never swapped (a
    ladder cut in two there: each side's replicas stay on it), and the replicas' end-to-end
    passages.

    Args:
        profiles: sampled profiles (e.g. the ``profiles`` of :func:`landscape`).

    Returns:
        JSON-ready lists keyed ``n_windows``, ``n_flagged_windows``, ``max_window_rhat``,
            ``min_window_ess``, ``min_move_acceptance``, ``min_swap_acceptance`` (``None`` without
            exchange),
            ``pairs_never_swapped`` (the pairs' indices) and ``passages``, one entry per profile.
    """
    return dict(
        n_windows=[len(p.targets) for p in profiles],
        n_flagged_windows=[int(p.flagged.sum()) for p in profiles],
        max_window_rhat=[float(np.nanmax(p.rhat)) for p in profiles],
        min_window_ess=[float(np.nanmin(p.ess)) for p in profiles],
        min_move_acceptance=[float(np.min(p.move_acceptance)) for p in profiles],
        min_swap_acceptance=[
            float(np.nanmin(p.acceptance)) if np.isfinite(p.acceptance).any() else None for p in profiles
        ],
        pairs_never_swapped=[np.flatnonzero(p.acceptance == 0).tolist() for p in profiles],
        passages=[p.passages for p in profiles],
    )


def sampled_minimum(prof: SampledProfile) -> float:
    """The sampled profile's lowest point: the vertex of the parabola through the lowest bin and
    its two neighbours (the lowest bin's centre at an end of the range).

    Args:
        prof: a sampled profile.

    Returns:
        ``a`` at the minimum of ``F``.
    """
    F = np.where(np.isfinite(prof.F), prof.F, np.inf)
    i = int(np.argmin(F))
    if i == 0 or i == F.size - 1 or not np.all(np.isfinite(F[i - 1 : i + 2])):
        return float(prof.a[i])
    fm, f0, fp = F[i - 1 : i + 2]
    h = prof.a[1] - prof.a[0]
    return float(prof.a[i] + 0.5 * h * (fm - fp) / (fm - 2 * f0 + fp))


def basin_log_ratio(prof: SampledProfile, a_barrier: float, L: int) -> tuple[float, float]:
    """``ln(p_copy / p_uniform)``: the posterior's probabilities of ``a > a_barrier`` and
    ``a < a_barrier``, each its whole basin, by MBAR from the windows' draws, with the standard
    error (propagated from MBAR's error of ``p_copy``).

    Args:
        prof: a sampled profile.
        a_barrier: the dividing point between the basins.
        L: sequence length.

    Returns:
        ``(log_ratio, error)``.
    """
    p, dp = umbrella.probability(prof.draws, prof.windows, lambda c: prev_weight(c, L) > a_barrier)
    y, dy = _log_odds(np.asarray(p, float), np.asarray(dp, float))
    return float(y), float(dy)


def reweighted_log_ratio(prof: SampledProfile, a_barrier: float, L: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`basin_log_ratio` at every ``P + d`` whose action the draws recorded
    (``reweight_span``): the same draws reweighted by ``exp(-(S_{P+d} - S_P))`` with MBAR, so that
    one ``P``'s windows give the log-odds' curve around it, each point with its standard error.

    Args:
        prof: a sampled profile with ``dS``.
        a_barrier: the dividing point between the basins.
        L: sequence length.

    Returns:
        ``(d, log_ratio, error)``, each of shape ``(S,)``.

    Raises:
        ValueError: if the profile recorded no shifts.
    """
    if prof.dS is None:
        raise ValueError("the profile has no reweighting: sample it with reweight_span > 0")
    p, dp = umbrella.probability(prof.draws, prof.windows, lambda c: prev_weight(c, L) > a_barrier, prof.dS)
    return np.asarray(prof.shifts), *_log_odds(np.asarray(p, float), np.asarray(dp, float))


def ladder_spread(prof: SampledProfile, a_barrier: float, L: int) -> np.ndarray:
    """The standard error of the basin log-odds from the scatter between independent ladders:
    each ladder's own MBAR log-odds (at every recorded shift of ``P``, or at ``P`` alone), their
    standard deviation over the square root of the number of ladders.

    MBAR's analytical error counts the draws it keeps as independent, so it does not see a mode
    of ``G`` that moves slowly across the window's coordinate but not along it; independent
    ladders do. Measured at ``L = 32, V = 4`` at the default run length
    (``scripts/copy_landscape_seed_scatter.py``): the log-odds scatter between seeds 1.7x
    (``N = 20``, ``P = 340``) and 1.9x (``N = 1``, ``P = 610``) MBAR's error.

    Args:
        prof: a sampled profile with at least two ladders (chains).
        a_barrier: the dividing point between the basins.
        L: sequence length.

    Returns:
        The standard errors, shape ``(S,)`` with recorded shifts, else ``(1,)``.
    """
    C = prof.draws.a.shape[1]
    if C < 2:
        raise ValueError(f"the spread between ladders needs at least 2 ladders, got {C}")
    ys = []
    for c in range(C):
        one = umbrella.WindowDraws(prof.draws.a[:, c : c + 1], prof.draws.diverged[:, c : c + 1])
        shift = None if prof.dS is None else prof.dS[:, c : c + 1]
        pc, dpc = umbrella.probability(one, prof.windows, lambda x: prev_weight(x, L) > a_barrier, shift)
        ys.append(np.atleast_1d(_log_odds(np.asarray(pc, float), np.asarray(dpc, float))[0]))
    return np.std(np.stack(ys), axis=0, ddof=1) / np.sqrt(C)


def _log_odds(p: np.ndarray, dp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``ln(p / (1 - p))`` and its error ``dp / (p (1 - p))``, ``p`` clipped into ``(0, 1)`` (a
    basin the draws never reach has a large finite log-odds, not an infinite one)."""
    p = np.clip(p, 1e-300, 1 - 1e-16)
    return np.log(p) - np.log1p(-p), dp / (p * (1 - p))


def reweighted_profile(prof: SampledProfile, arch: network.CopyArch, d: int) -> umbrella.Profile:
    """The profile at ``P + d`` from the draws at ``P`` (``reweight_span >= |d|``), by MBAR with
    the recorded ``S_{P+d} - S_P`` as the target's shift, on the profile's own bins.

    Args:
        prof: a sampled profile with ``dS``.
        arch: the network (the profile's coordinate).
        d: the shift of ``P``, one of ``prof.shifts``.

    Returns:
        :class:`jaxattn.core.umbrella.Profile` of the posterior at ``P + d``.

    Raises:
        ValueError: if the profile recorded no shift ``d``.
    """
    if prof.dS is None or d not in prof.shifts:
        raise ValueError(f"d must be one of the recorded shifts {checks.plain(prof.shifts)}, got {checks.plain(d)}")
    h = prof.a[1] - prof.a[0]
    edges = np.concatenate([prof.a - h / 2, [prof.a[-1] + h / 2]])
    j = int(np.flatnonzero(prof.shifts == d)[0])
    return umbrella.profile(
        prof.draws, prof.windows, edges, transform=lambda x: profile_coordinate(arch, x), shift=prof.dS[..., j]
    )
