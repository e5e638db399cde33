"""The copy head's free-energy landscape along the previous-token weight (Spec B, sections 3 and
4; issue 13; ``docs/theory/copy_head.md``, section 6).

Sampled: the posterior of ``G`` with ``W`` integrated out exactly, ``p(G) ~ exp(-S(G))`` with
``S`` the exact finite-data action (B.3a, :func:`jaxattn.copyhead.action.exact_action`),
projected on ``a = (1/n_pos) sum_l A_{l,l-1}`` and sampled across the barrier by umbrella
windows on the ansatz's log-odds ``c = copy_strength(a)``, placed from the reduced action
(:func:`place_windows`), with SGLD on the engine (the ``copy_landscape`` experiment,
:class:`CopyLandscape`: one chain per ``(P, data_seed, window, chain)``, so a sweep runs it too)
and MBAR (:mod:`jaxattn.core.umbrella`): :func:`sampled_profile`, :func:`profile_of`. The
basins' probabilities give ``P*`` from sampling (:func:`landscape`, or
:func:`landscape_of_dataset` on a sweep's draws).

Theory: the reduced action on the softmax ansatz, ``S(c_G)`` (B.3b), on the same axis
(:func:`theory_profile`); and its Laplace correction by the Gaussian fluctuations of the other
``L^2 - 1`` directions of ``G`` (:func:`fluctuation_entropy`, :func:`p_star_corrected`), which
the reduced action leaves out and the sampled profile integrates over.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr
from jaxtyping import Array, Float

from jaxattn import engine
from jaxattn.copyhead import action as ca
from jaxattn.copyhead import network as cm
from jaxattn.copyhead.config import CopyLandscapeConfig
from jaxattn.copyhead.experiments import data_key, member_stats, segments, stream_data
from jaxattn.core import checks, diagnostics, precision
from jaxattn.core import umbrella as us
from jaxattn.core.kernels import sgld as sg
from jaxattn.engine import Experiment, Grid, Layout, int_axis, over_groups, stream_values

C_RANGE = (-0.5, 3.0)
"""The default span of the windows' targets on the copy strength ``c`` (:func:`sampled_profile`):
from below the uniform minimum to beyond the copy minimum at ``L = 32``."""


def copy_strength(a: Float[Array, "*b"] | np.ndarray, L: int) -> Float[Array, "*b"]:
    """The ansatz's ``c_G`` at previous-token weight ``a``: the inverse of
    ``a = e^c / (e^c + L - 1)`` (:func:`jaxattn.copyhead.action.prev_weight_softmax`).

    Args:
        a: previous-token weights in ``(0, 1)``, shape (*b).
        L: sequence length.

    Returns:
        ``c_G = ln(a (L - 1) / (1 - a))``, shape (*b).
    """
    a = jnp.asarray(a)
    return jnp.log(a * (L - 1) / (1 - a))


def theory_profile(arch: cm.CopyArch, P: float, N: float, a: np.ndarray) -> np.ndarray:
    """The reduced action relative to its lowest value on ``a``, the theory's ``F(a)`` (float64):
    ``S(c_G(a))`` along the previous-token weight (softmax), ``min_{a_1} S(a_1, a)`` along
    ``a = |a_G|`` (linear, :func:`linear_profile_action`).

    Args:
        arch: the network.
        P: number of training sequences.
        N: inverse temperature.
        a: previous-token weights in ``(0, 1)`` (softmax) or ``|a_G|`` (linear), shape ``(n,)``.

    Returns:
        ``S(a) - min S``, shape ``(n,)``.
    """
    if arch.attention == "softmax":
        with precision.float64():
            x = np.asarray(copy_strength(jnp.asarray(a, jnp.float64), arch.L))
    else:
        x = np.asarray(a, float)
    S = theory_action_of_order(arch, P, N, x)
    return S - S.min()


# --- the sampled side ----------------------------------------------------------------------------


@functools.cache
def posterior_target(arch: cm.CopyArch) -> tuple[Callable[[Array, Any], Array], Callable[[Array], Array]]:
    """``(potential, order)`` of the marginal posterior of ``G`` for one architecture: stable
    function objects, so that the umbrella program compiles once per architecture and shape.

    Args:
        arch: the network.

    Returns:
        ``potential(G, (stats, N)) = S(G) / N`` (B.3a: ``exp(-N potential)`` is the marginal of
            ``exp(-N U)`` over ``W``), and ``order(G) = c(a(G))``, the ansatz's log-odds of the
            previous-token weight (:func:`copy_strength`), on which the windows act.
    """

    def potential(G, data):
        st, N = data
        return ca.exact_action(G, st, arch, N) / N

    def order(G):
        if arch.attention == "linear":  # gauge-invariant: G -> -G (with W -> -W) flips a_G
            return jnp.abs(cm.order_parameters(G, arch)["aG"])
        return copy_strength(cm.order_parameters(G, arch)["prev_weight"], arch.L)

    return potential, order


def prev_weight(c: np.ndarray, L: int) -> np.ndarray:
    """``a = e^c / (e^c + L - 1)``, the inverse of :func:`copy_strength`, on NumPy arrays.

    Args:
        c: copy strengths, any shape.
        L: sequence length.

    Returns:
        The previous-token weights, the shape of ``c``.
    """
    c = np.asarray(c, float)
    return 1.0 / (1.0 + (L - 1) * np.exp(-c))


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
    """

    a: np.ndarray
    F: np.ndarray
    dF: np.ndarray
    theory: np.ndarray
    windows: us.Windows
    targets: np.ndarray
    c_mean: np.ndarray
    rhat: np.ndarray
    ess: np.ndarray
    flagged: np.ndarray
    draws: us.WindowDraws


def theory_action_of_c(arch: cm.CopyArch, P: float, N: float, c: np.ndarray) -> np.ndarray:
    """The reduced action ``S(c_G)`` (B.3b on the softmax ansatz, float64), not shifted.

    Args:
        arch: the network (softmax attention).
        P: number of training sequences.
        N: inverse temperature.
        c: copy strengths, shape ``(n,)``.

    Returns:
        ``S(c)``, shape ``(n,)``.
    """
    with precision.float64():
        return np.asarray(ca.softmax_action(jnp.asarray(c, jnp.float64), jnp.float64(P), ca.hyper(arch, N)))


def linear_profile_action(arch: cm.CopyArch, P: float, N: float, aG: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The reduced action on the linear ansatz along ``|a_G|``,
    ``S(|a_G|) = min_{a_1} S(a_1, |a_G|)`` (B.3b, :func:`jaxattn.copyhead.action.linear_action`;
    float64): the best of a grid of ``a_1 in [-1, 1.5]``, then Newton steps kept only where they
    lower ``S``. The gauge ``S(a_1, a_G) = S(-a_1, -a_G)`` makes the profile even in ``a_G``; at
    ``a_G = 0`` it has a cusp wherever the pooling minimum ``a_1 != 0`` takes both signs there,
    which is why the windows act on ``|a_G|`` (:func:`posterior_target`).

    Args:
        arch: the network (linear attention).
        P: number of training sequences.
        N: inverse temperature.
        aG: copy strengths, shape ``(n,)``.

    Returns:
        ``(S, a_1)`` at each ``|a_G|``, shape ``(n,)`` each.
    """
    with precision.float64():
        S, a1 = _linear_profile(jnp.abs(jnp.asarray(aG, jnp.float64)), jnp.float64(P), ca.hyper(arch, N))
        return np.asarray(S), np.asarray(a1)


@jax.jit
def _linear_profile(aG, P, h):
    grid = jnp.linspace(-1.0, 1.5, 251, dtype=aG.dtype)

    def one(x):
        f = lambda a1: ca.linear_action(a1, x, P, h)  # noqa: E731
        d1, d2 = jax.grad(f), jax.grad(jax.grad(f))

        def newton(_, a):
            nxt = a - d1(a) / jnp.where(d2(a) > 0, d2(a), jnp.inf)
            return jnp.where(f(nxt) < f(a), nxt, a)

        a1 = jax.lax.fori_loop(0, 20, newton, grid[jnp.argmin(jax.vmap(f)(grid))])
        return f(a1), a1

    return jax.vmap(one)(aG)


def theory_action_of_order(arch: cm.CopyArch, P: float, N: float, x: np.ndarray) -> np.ndarray:
    """The reduced action along the windows' coordinate ``x`` (not shifted): ``S(c_G)`` on the
    softmax ansatz (:func:`theory_action_of_c`), ``min_{a_1} S(a_1, |a_G|)`` on the linear one
    (:func:`linear_profile_action`).

    Args:
        arch: the network.
        P: number of training sequences.
        N: inverse temperature.
        x: ``c_G`` (softmax) or ``|a_G|`` (linear), shape ``(n,)``.

    Returns:
        ``S(x)``, shape ``(n,)``.
    """
    if arch.attention == "softmax":
        return theory_action_of_c(arch, P, N, x)
    return linear_profile_action(arch, P, N, x)[0]


def profile_coordinate(arch: cm.CopyArch, x: np.ndarray) -> np.ndarray:
    """The profile's coordinate from the windows': the previous-token weight ``a = prev_weight(c)``
    (softmax), ``|a_G|`` itself (linear).

    Args:
        arch: the network.
        x: ``c_G`` or ``|a_G|``, any shape.

    Returns:
        ``a`` or ``|a_G|``, the shape of ``x``.
    """
    return prev_weight(x, arch.L) if arch.attention == "softmax" else np.asarray(x, float)


def default_range(arch: cm.CopyArch) -> tuple[float, float]:
    """The default span of the windows' targets: :data:`C_RANGE` on ``c_G`` (softmax); on
    ``|a_G|`` (linear) ``(0, 1)``, from ``A = 0`` to beyond the minimum's ``|a_G|`` (below 0.6 at
    ``L = 4, V = 8``, ``N <= 20``).

    Args:
        arch: the network.

    Returns:
        ``(lo, hi)`` of the targets.
    """
    return C_RANGE if arch.attention == "softmax" else (0.0, 1.0)


def _floor(arch: cm.CopyArch) -> float:
    """The lowest value of the windows' coordinate: none for ``c_G``, 0 for ``|a_G|``."""
    return -np.inf if arch.attention == "softmax" else 0.0


def _ansatz_logits(arch: cm.CopyArch, P: float, N: float, x: np.ndarray) -> Array:
    """The ansatz's ``G`` at each target: ``c S + c_1 11^T`` (softmax), ``g A`` with
    ``A = a_1 11^T / L + |a_G| S`` and ``a_1`` at its minimum (linear); float32, shape ``(K, L, L)``."""
    xs = jnp.asarray(x, jnp.float32)
    if arch.attention == "softmax":
        return jax.vmap(lambda c: ca.softmax_logits(c, arch.L, arch.cyclic))(xs)
    a1 = jnp.asarray(linear_profile_action(arch, P, N, np.asarray(x, float))[1], jnp.float32)
    g = float(ca.hyper(arch, N).g)
    return jax.vmap(lambda a, b: g * ca.linear_attention_matrix(a, b, arch.L, arch.cyclic))(a1, xs)


def place_windows(
    arch: cm.CopyArch,
    P: float,
    N: float,
    c_range: tuple[float, float],
    max_spacing: float = 0.2,
    spring: float | None = None,
    n_windows: int | None = None,
) -> tuple[us.Windows, np.ndarray]:
    """Harmonic windows on the coordinate ``x`` (``c_G`` for softmax, ``|a_G|`` for linear attention)
    placed from the reduced action ``S(x)`` (:func:`theory_action_of_order`) so that neighbouring
    windows overlap wherever the posterior is steep or narrow.

    - The spring constant defaults to ``max(4 / max_spacing^2, 2 max(-S''))``: above the
      action's largest negative curvature, so that no window is bistable at the barrier.
    - Targets ``t_k`` run from ``lo`` to ``hi`` with a local spacing of two window widths,
      ``2 / sqrt(kappa + S''(t))``, at most ``max_spacing``.
    - Each centre is moved up the slope, ``c_k = t_k + S'(t_k) / kappa``, so that the window's
      biased minimum sits at its target even where the mean force is large.
    - With ``n_windows``, targets are added at the middle of the widest gaps (in window widths)
      until there are ``n_windows``: a scan over ``P`` then keeps one shape, hence one compile.

    The sampled ``F`` differs from ``S``: the shift's error ``(F' - S') / kappa`` and the widths'
    are checked afterwards on the windows' sampled means and spreads (:func:`sampled_profile`).

    Args:
        arch: the network.
        P: number of training sequences.
        N: inverse temperature.
        c_range: ``(lo, hi)`` of the targets.
        max_spacing: the largest spacing of the targets (``> 0``).
        spring: the spring constant (``> 0``; default as above).
        n_windows: the number of windows (default: as many as the spacing needs); fewer than
            the spacing needs is an error.

    Returns:
        ``(windows, targets)``.

    Raises:
        ValueError: naming ``c_range``, ``max_spacing``, ``spring`` or ``n_windows``.
    """
    lo, hi = (float(x) for x in c_range)
    if not (np.isfinite(lo) and np.isfinite(hi) and hi > lo):
        raise ValueError(f"c_range must be (lo, hi) with lo < hi, got {c_range!r}")
    if lo < _floor(arch):
        raise ValueError(f"c_range must start at |a_G| >= 0 for linear attention, got {c_range!r}")
    if not (np.isfinite(max_spacing) and max_spacing > 0):
        raise ValueError(f"max_spacing must be positive, got {max_spacing!r}")
    if spring is not None and not (np.isfinite(spring) and spring > 0):
        raise ValueError(f"spring must be a positive spring constant, got {spring!r}")
    # one-sided at the coordinate's floor: |a_G|'s profile has a cusp at 0
    fine = np.linspace(max(lo - 0.5, _floor(arch)), hi + 0.5, int(400 * (hi - lo + 1)) + 1)
    S = theory_action_of_order(arch, P, N, fine)
    d1 = np.gradient(S, fine)
    d2 = np.gradient(d1, fine)
    inner = (fine >= lo) & (fine <= hi)
    kappa = float(spring) if spring is not None else max(4.0 / max_spacing**2, 2.0 * float(np.max(-d2[inner])))
    width = 1.0 / np.sqrt(np.maximum(kappa + d2, kappa / 4))
    t = [lo]
    while t[-1] < hi:
        t.append(t[-1] + min(max_spacing, 2.0 * float(np.interp(t[-1], fine, width))))
    targets = np.asarray(t[:-1] + [hi]) if t[-1] - hi > 0 else np.asarray(t)
    if n_windows is not None:
        n_windows = checks.integer("n_windows", n_windows, 2)
        if n_windows < targets.size:
            raise ValueError(
                f"n_windows={n_windows} is fewer than the {targets.size} windows the spacing needs at "
                f"P={P:g}, N={N:g} (raise n_windows or max_spacing)"
            )
        while targets.size < n_windows:
            mid = 0.5 * (targets[1:] + targets[:-1])
            i = int(np.argmax(np.diff(targets) / np.interp(mid, fine, width)))
            targets = np.insert(targets, i + 1, mid[i])
    centers = targets + np.interp(targets, fine, d1) / kappa
    return us.Windows(centers, np.full(targets.size, kappa)), targets


def sampled_profile(
    arch: cm.CopyArch,
    P: int,
    N: float,
    *,
    data_seed: int = 0,
    c_range: tuple[float, float] | None = None,
    max_spacing: float = 0.2,
    spring: float | None = None,
    n_windows: int | None = None,
    n_bins: int = 40,
    n_chains: int = 4,
    burn_in: int = 1000,
    n_draws: int = 200,
    thin: int = 10,
    step: float = 0.05,
    seed: int = 0,
) -> SampledProfile:
    """``F(a)`` of the posterior of ``G`` with ``W`` integrated out exactly,
    ``p(G) ~ exp(-S(G))`` (B.3a on the ``P`` sequences of ``data_seed``), by umbrella sampling on
    ``x`` (:func:`place_windows`) with SGLD (all windows and chains in one compiled program) and
    MBAR (:mod:`jaxattn.core.umbrella`); the profile is histogrammed on ``a`` on bins evenly
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
        n_chains: chains per window.
        burn_in: SGLD steps before the first draw.
        n_draws: draws per chain.
        thin: SGLD steps between draws.
        step: SGLD step size times ``N`` plus the bias's curvature (the step is
            ``step / (N + kappa |grad c|^2)``, stable for ``step`` below about 0.1).
        seed: seed of the chains.

    Returns:
        :class:`SampledProfile`.

    Raises:
        ValueError: naming ``N``, ``P``, ``n_chains``, ``burn_in``, ``n_draws``, ``thin``, ``n_bins``,
            the windows or the spring constant.
    """
    arch = arch.validate()
    N = ca.check_N(N)
    if not np.isfinite(N):
        raise ValueError("N must be finite for sampling (N = inf is the MAP point, not a posterior)")
    P = int(ca.check_P([P])[0])
    for name, v, lo in (("n_chains", n_chains, 2), ("n_bins", n_bins, 1)):
        checks.integer(name, v, lo)  # R-hat needs two chains
    lo_hi = default_range(arch) if c_range is None else c_range
    if n_windows is None:
        n_windows = place_windows(arch, P, N, lo_hi, max_spacing, spring)[1].size
    config = CopyLandscapeConfig(
        **{f.name: getattr(arch, f.name) for f in dataclasses.fields(cm.CopyArch)},
        N=N,
        n_windows=int(n_windows),
        c_lo=float(lo_hi[0]),
        c_hi=float(lo_hi[1]),
        max_spacing=max_spacing,
        spring=spring,
        burn_in=burn_in,
        n_draws=n_draws,
        thin=thin,
        step=step,
        chain_seed=seed,
    ).validate()
    grid = Grid.from_values(COPY_LANDSCAPE.axis, dict(P=[P], window=range(config.n_windows), chain=range(n_chains)))
    ds = engine.run(COPY_LANDSCAPE, config, grid, fixed={"data_seed": data_seed})
    return profile_of(ds.isel(P=0), config, P, n_bins)


def profile_of(ds: xr.Dataset, config: CopyLandscapeConfig, P: int, n_bins: int = 40) -> SampledProfile:
    """The sampled profile of one ``(P, data set)`` from the windows' draws of the
    ``copy_landscape`` experiment (:class:`CopyLandscape`: a sweep's, or :func:`sampled_profile`'s):
    MBAR on the independent draws (:func:`jaxattn.core.umbrella.profile`), histogrammed on ``a``
    between the ``a`` of the targets' span, with each window's split R-hat and ESS.

    Args:
        ds: the experiment's dataset at one ``P`` and data set: ``c`` ``(window, chain, draw)``,
            ``diverged``, ``center``, ``spring`` and ``target`` ``(window, chain)``.
        config: the experiment's config.
        P: the number of sequences (for the theory's line).
        n_bins: bins of ``a``.

    Returns:
        :class:`SampledProfile`.
    """
    arch = config.arch
    ds = ds.transpose("window", "chain", "draw")
    c = np.asarray(ds["c"].values, float)
    w = us.Windows(np.asarray(ds["center"].values[:, 0], float), np.asarray(ds["spring"].values[:, 0], float))
    targets = np.asarray(ds["target"].values[:, 0], float)
    draws = us.WindowDraws(jnp.asarray(c), jnp.asarray(ds["diverged"].values))
    lo_hi = config.c_range or default_range(arch)
    a_lo, a_hi = profile_coordinate(arch, np.asarray(lo_hi, float))
    edges = np.linspace(float(a_lo), float(a_hi), n_bins + 1)
    prof = us.profile(draws, w, edges, transform=lambda x: profile_coordinate(arch, x))
    ok = np.asarray(np.isfinite(c).all(axis=2))  # (window, chain): chains that did not diverge
    rhat = np.array([diagnostics.split_rhat(c[k][ok[k]]) if ok[k].sum() >= 2 else np.nan for k in range(len(c))])
    ess = np.array([diagnostics.ess(c[k][ok[k]]) if ok[k].sum() >= 1 else np.nan for k in range(len(c))])
    return SampledProfile(
        prof.a,
        prof.F,
        prof.dF,
        theory_profile(arch, P, config.N, prof.a),
        w,
        targets,
        np.nanmean(c, axis=(1, 2)),
        rhat,
        ess,
        prof.flagged,
        draws,
    )


# --- the engine's experiment ---------------------------------------------------------------------


class LandscapeStatic(NamedTuple):
    """The static (hashable) part of a :class:`CopyLandscape` run.

    Attributes:
        config: the experiment's config.
        n_max: sequences per data stream: the grid's largest ``P`` rounded up to a multiple of
            128, so that a scan over nearby ``P`` keeps one shape.
        advance: per segment, steps before its draws (burn-in segments).
        first: per segment, index of its first draw.
        n_draws: per segment, draws it takes (``thin`` steps each).
    """

    config: CopyLandscapeConfig
    n_max: int
    advance: tuple[int, ...]
    first: tuple[int, ...]
    n_draws: tuple[int, ...]


@functools.lru_cache(maxsize=64)
def _placed(config: CopyLandscapeConfig, P: int) -> tuple[us.Windows, np.ndarray, np.ndarray, float]:
    """``(windows, targets, G0, eps)`` of one ``P``: the windows (:func:`place_windows`, padded to
    ``config.n_windows``), the ansatz's ``G`` at each target, and the SGLD step, ``step`` over
    ``N`` plus the bias's largest curvature along the ansatz, ``kappa |grad_G c|^2``."""
    arch, N = config.arch, config.N
    w, targets = place_windows(
        arch, P, N, config.c_range or default_range(arch), config.max_spacing, config.spring, config.n_windows
    )
    G0 = _ansatz_logits(arch, P, N, targets)
    order = posterior_target(arch)[1]
    g2 = jax.vmap(lambda G: jnp.sum(jax.grad(order)(G) ** 2))(G0)
    return w, targets, np.asarray(G0), config.step / (N + float(w.spring[0]) * float(jnp.max(g2)))


class CopyLandscape(Experiment):
    """One SGLD chain per point on the marginal posterior of ``G`` (``W`` integrated out
    exactly: the exact action B.3a, :func:`posterior_target`) biased by umbrella window
    ``window`` of its ``P`` (:func:`place_windows`): the windows' coordinate at every kept draw,
    the window, and whether the chain diverged. :func:`profile_of` turns a ``P``'s windows into
    ``F(a)`` by MBAR; :func:`sampled_profile` and :func:`landscape` run it, and so does a sweep.

    Attributes:
        name: ``"copy_landscape"``.
        doc: one line describing it.
        config_type: :class:`~jaxattn.copyhead.config.CopyLandscapeConfig`.
        axes: ``P``, ``data_seed``, ``window`` and ``chain``.
        block: default streams per block.
        group: default members per group.
    """

    name = "copy_landscape"
    doc = "copy task, umbrella windows on the posterior of G (jaxattn.copyhead.landscape)"
    config_type = CopyLandscapeConfig
    axes = (
        int_axis("P", 340, 1, shared=True, help="Training sequences."),
        int_axis("data_seed", 0, 0, help="The data set."),
        int_axis("window", 0, 0, shared=True, help="The umbrella window (0 to n_windows - 1)."),
        int_axis("chain", 0, 0, shared=True, help="The chain of a window (its noise)."),
    )
    block = 1  # one data set is the usual case
    group = 32  # members (windows x chains) vectorised together

    def setup(self, c: CopyLandscapeConfig, values):
        if max(values["window"]) >= c.n_windows:
            raise ValueError(f"window must be below n_windows={c.n_windows}, got {max(values['window'])}")
        burn = segments(c.burn_in, 5) if c.burn_in else ()
        draws = segments(c.n_draws)
        first = np.concatenate([[0], np.cumsum(draws)[:-1]]).astype(int)
        static = LandscapeStatic(
            c,
            -(-max(values["P"]) // 128) * 128,
            burn + (0,) * len(draws),
            (0,) * len(burn) + tuple(int(f) for f in first),
            (0,) * len(burn) + draws,
        )
        return static, {}

    def params(self, s: LandscapeStatic, points):
        placed = [_placed(s.config, int(P)) for P in points["P"]]
        k = [int(x) for x in points["window"]]
        base = jax.random.key(s.config.chain_seed)
        return {
            "data_key": jnp.stack([data_key(d) for d in points["data_seed"]]),
            "chain_key": jnp.stack(
                [jax.random.fold_in(jax.random.fold_in(base, w), c) for w, c in zip(k, points["chain"])]
            ),
            "P": jnp.asarray(points["P"], jnp.int32),
            "center": jnp.asarray([p[0].centers[w] for p, w in zip(placed, k)], jnp.float32),
            "spring": jnp.asarray([p[0].spring[w] for p, w in zip(placed, k)], jnp.float32),
            "target": jnp.asarray([p[1][w] for p, w in zip(placed, k)], jnp.float32),
            "G0": jnp.asarray(np.stack([p[2][w] for p, w in zip(placed, k)]), jnp.float32),
            "eps": jnp.asarray([p[3] for p in placed], jnp.float32),
        }

    def _kernel(self, s: LandscapeStatic):
        potential, order = posterior_target(s.config.arch)
        return sg.sgld(us.biased_potential(potential, order, s.config.N), s.config.N), order

    def init(self, s: LandscapeStatic, shared, p, n_groups):
        kernel, _ = self._kernel(s)
        X = stream_data(s.config.arch, stream_values(p["data_key"]), s.n_max)

        def group(q):
            st = member_stats(X, q["P"], s.n_max)
            chains = jax.vmap(jax.vmap(kernel.init))(q["G0"])
            return chains, st, jnp.zeros(q["P"].shape + (s.config.n_draws,), jnp.float32)

        return over_groups(group, n_groups, p)

    def step(self, s: LandscapeStatic, shared, p, state, k, n_groups):
        kernel, order = self._kernel(s)
        adv, first, nd = (jnp.asarray(t)[k] for t in (s.advance, s.first, s.n_draws))
        N = jnp.float32(s.config.N)

        def chain(key, st, stats, center, spring, eps, draws):
            data = ((stats, N), center, spring)
            return sg.run_segment(
                kernel, lambda G, _: order(G), key, st, data, eps, adv, nd, s.config.thin, first, draws
            )

        def group(chains, stats, draws, q):
            chains, draws = jax.vmap(jax.vmap(chain))(
                q["chain_key"], chains, stats, q["center"], q["spring"], q["eps"], draws
            )
            return chains, stats, draws

        return over_groups(group, n_groups, *state, p)

    def finish(self, s, shared, p, state, n_groups):
        chains, _, draws = state
        return {
            "c": draws,
            "diverged": chains.diverged,
            "center": p["center"],
            "spring": p["spring"],
            "target": p["target"],
            "eps": p["eps"],
        }

    def layout(self, s: LandscapeStatic) -> Layout:
        return Layout(
            {"c": ("draw",), "diverged": (), "center": (), "spring": (), "target": (), "eps": ()},
            {"draw": np.arange(s.config.n_draws)},
            {"c": "the windows' coordinate: c_G (softmax) or |a_G| (linear)", "center": "the window's centre"},
        )

    def bytes_per_point(self, s: LandscapeStatic) -> int:
        a = s.config.arch
        return 4 * (s.n_max * a.L * a.V * 2 // 32 + 4 * a.L * a.L + (a.L * a.V) ** 2 + 2 * s.config.n_draws)

    def progress_units(self, s: LandscapeStatic):
        return np.asarray(s.advance) + np.asarray(s.n_draws) * s.config.thin, "step"

    def attrs(self, c: CopyLandscapeConfig, s) -> dict:
        return {"attention": c.attention, "L": c.L, "V": c.V, "N": float(c.N)}


COPY_LANDSCAPE = CopyLandscape()


def window_diagnostics(profiles: list[SampledProfile]) -> dict[str, list]:
    """Per profile, the windows' count and health: how many, how many left out (a diverged chain),
    the largest split R-hat and the smallest effective sample size of ``c``.

    Args:
        profiles: sampled profiles (e.g. the ``profiles`` of :func:`landscape`).

    Returns:
        JSON-ready lists keyed ``n_windows``, ``n_flagged_windows``, ``max_window_rhat``,
            ``min_window_ess``, one entry per profile.
    """
    return dict(
        n_windows=[len(p.targets) for p in profiles],
        n_flagged_windows=[int(p.flagged.sum()) for p in profiles],
        max_window_rhat=[float(np.nanmax(p.rhat)) for p in profiles],
        min_window_ess=[float(np.nanmin(p.ess)) for p in profiles],
    )


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
    p, dp = us.probability(prof.draws, prof.windows, lambda c: prev_weight(c, L) > a_barrier)
    p = float(np.clip(p, 1e-300, 1 - 1e-16))
    return float(np.log(p) - np.log1p(-p)), float(dp / (p * (1 - p)))


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


@functools.cache
def theory_barrier(arch: cm.CopyArch, N: float) -> tuple[float, float]:
    """The theory's ``P*`` at ``N`` and the previous-token weight of the action's barrier there
    (the maximum of ``S(c)`` between its two minima): the dividing point of the basins.

    Args:
        arch: the network (softmax attention).
        N: inverse temperature.

    Returns:
        ``(P_star, a_barrier)``.
    """
    from jaxattn.copyhead.softmax import theory_summary

    s = theory_summary(arch, N)
    P_star, lo, hi = float(s["p_star"]), float(s["c_below"]), float(s["c_above"])
    c = np.linspace(lo, hi, 2001)
    return P_star, float(prev_weight(c[np.argmax(theory_action_of_c(arch, P_star, N, c))], arch.L))


def theory_slope(arch: cm.CopyArch, N: float, P_star: float) -> float:
    """``d(S_uniform - S_copy)/dP`` at ``P_star``: how fast the theory's log-odds of the copy
    basin grow with ``P`` (from the two minima of the reduced action, float64).

    Args:
        arch: the network (softmax attention).
        N: inverse temperature.
        P_star: the theory's ``P*``.

    Returns:
        The slope per sequence (positive).
    """
    from jaxattn.copyhead.softmax import softmax_minima

    def gap(P):
        with precision.float64():
            m = softmax_minima(jnp.float64(P), ca.hyper(arch, N))
            return float(m.S_lo - m.S_hi)

    dP = max(1e-3 * P_star, 0.01)
    return (gap(P_star + dP) - gap(P_star - dP)) / (2 * dP)


def default_P(p_star: float, slope: float) -> list[int]:
    """A grid of ``P`` around ``p_star`` whose spacing changes the theory's log-odds by about 3:
    ``p_star + k delta`` for ``k = -1 .. 3`` with ``delta = 3 / slope`` (at least 1), rounded to
    distinct integers.

    Args:
        p_star: the theory's ``P*``.
        slope: :func:`theory_slope`.

    Returns:
        Increasing integers (at least 1).
    """
    delta = max(3.0 / abs(slope), 1.0)
    return sorted({max(1, int(round(p_star + k * delta))) for k in (-1, 0, 1, 2, 3)})


def _scan(arch: cm.CopyArch, N: float, Ps: list[int], progress: bool, kw: dict):
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


def linear_landscape(
    arch: cm.CopyArch, P: list[int] | None = None, N: float = 1.0, *, progress: bool = False, **kw
) -> dict:
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
        A dict: ``N``, ``P`` (list, increasing), ``p_onset_theory``, ``a_min_sampled`` and
            ``a_min_theory`` per ``P`` (``|a_G|`` at the minimum), ``bin_width`` (of the sampled
            profile), ``profiles``.
    """
    from jaxattn.copyhead import linear as cl

    arch = arch.validate()
    N = ca.check_N(N)
    onset = cl.linear_onsets(arch, N).P_onset
    Ps = (
        sorted({max(1, int(round(f * onset))) for f in (0.5, 1.0, 2.0, 4.0)})
        if P is None
        else sorted({int(p) for p in ca.check_P(list(P))})
    )
    profile_at, bar = _scan(arch, N, Ps, progress, kw)
    profiles = [profile_at(p) for p in Ps]
    bar.close()
    return _linear_summary(arch, N, Ps, profiles)


def _linear_summary(arch: cm.CopyArch, N: float, Ps: list[int], profiles: list[SampledProfile]) -> dict:
    """:func:`linear_landscape`'s dict from its profiles."""
    from jaxattn.copyhead import linear as cl

    with precision.float64():
        theory = cl.linear_scan_jit(jnp.asarray(Ps, jnp.float64), ca.hyper(arch, N))
    return dict(
        N=N,
        P=Ps,
        p_onset_theory=float(cl.linear_onsets(arch, N).P_onset),
        a_min_sampled=[sampled_minimum(p) for p in profiles],
        a_min_theory=np.abs(np.asarray(theory.aG)).tolist(),
        bin_width=float(profiles[0].a[1] - profiles[0].a[0]),
        profiles=profiles,
    )


def _softmax_summary(
    arch: cm.CopyArch, N: float, Ps: list[int], profiles: list[SampledProfile], lr: np.ndarray, dlr: np.ndarray
) -> dict:
    """:func:`landscape`'s dict from its profiles and their basins' log-odds."""
    p_star, a_bar = theory_barrier(arch, N)
    P0, dP0 = crossing(np.asarray(Ps, float), lr, dlr)
    return dict(
        N=N,
        P=Ps,
        p_star_theory=p_star,
        a_barrier=a_bar,
        p_star_sampled=P0,
        p_star_sampled_err=dP0,
        log_ratio=lr.tolist(),
        log_ratio_err=dlr.tolist(),
        profiles=profiles,
    )


def landscape(
    arch: cm.CopyArch,
    P: list[int] | None = None,
    N: float = 1.0,
    *,
    max_extend: int = 5,
    progress: bool = False,
    **kw,
) -> dict:
    """Sampled profiles at every ``P`` (:func:`sampled_profile`, with one window count, hence one
    compile, for the whole scan), each basin's probability across the theory's barrier
    (:func:`basin_log_ratio`), and ``P*`` from sampling: where ``ln(p_copy / p_uniform)`` crosses
    zero (:func:`crossing`), against the theory's ``P*`` at the same ``N``. Up to ``max_extend``
    more ``P`` are added by secant steps on the sampled log-odds: outward until a pair of ``P``
    brackets the crossing, then inside the bracket until it is narrow (an end's log-odds within
    0.5 of zero, or 2% of ``P`` wide). Linear attention has no jump: its scan is
    :func:`linear_landscape`, which this calls (``max_extend`` unused).

    Args:
        arch: the network.
        P: numbers of training sequences (default :func:`default_P` around the theory's ``P*``).
        N: inverse temperature.
        max_extend: the most ``P`` added to bracket the crossing.
        progress: show a progress bar over ``P``.
        **kw: passed to :func:`sampled_profile`.

    Returns:
        A dict: ``N``, ``P`` (list, increasing), ``p_star_theory``, ``a_barrier``,
            ``p_star_sampled`` and ``p_star_sampled_err`` (``nan`` without a sign change),
            ``log_ratio`` and ``log_ratio_err`` per ``P``, ``profiles`` (the
            :class:`SampledProfile` per ``P``).
    """
    arch = arch.validate()
    N = ca.check_N(N)
    if arch.attention != "softmax":
        return linear_landscape(arch, P, N, progress=progress, **kw)
    p_star, a_bar = theory_barrier(arch, N)
    slope = theory_slope(arch, N, p_star)
    Ps = default_P(p_star, slope) if P is None else sorted({int(p) for p in ca.check_P(list(P))})
    res: dict[int, tuple[SampledProfile, float, float]] = {}
    profile_at, bar = _scan(arch, N, Ps, progress, kw)

    def run(p):
        prof = profile_at(p)
        res[p] = (prof, *basin_log_ratio(prof, a_bar, arch.L))

    for p in Ps:
        run(p)
    for _ in range(max_extend):
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
    return _softmax_summary(arch, N, ks, [res[k][0] for k in ks], lr, dlr)


def landscape_of_dataset(ds: xr.Dataset, n_bins: int = 40) -> dict:
    """:func:`landscape`'s summary from a ``copy_landscape`` sweep (or any run of
    :class:`CopyLandscape`) of one data set: the profile of every ``P`` (:func:`profile_of`);
    for softmax the basins' log-odds across the theory's barrier and the sampled ``P*``, against
    the theory's; for linear attention the sampled minimum against the theory's.

    Args:
        ds: the dataset, dimensions ``P``, ``window``, ``chain``, ``draw`` (and ``data_seed`` of
            length one, if a dimension); every window of each ``P`` (``0`` to ``n_windows - 1``).
        n_bins: bins of the profiles.

    Returns:
        The dict of :func:`landscape` (softmax) or :func:`linear_landscape` (linear), without
            the secant refinement: only the ``P`` of the dataset.

    Raises:
        ValueError: if the dataset is not the experiment's, holds several data sets, or lacks a
            window.
    """
    from jaxattn.engine import config as cfgs

    if ds.attrs.get("experiment") != COPY_LANDSCAPE.name:
        raise ValueError(f"not a copy_landscape dataset (experiment={ds.attrs.get('experiment')!r})")
    config = cfgs.from_json(CopyLandscapeConfig, ds.attrs["config"])
    if "data_seed" in ds.dims:
        if ds.sizes["data_seed"] != 1:
            raise ValueError(f"one data set at a time: select a data_seed of {ds['data_seed'].values.tolist()}")
        ds = ds.isel(data_seed=0)
    if ds.sizes["window"] != config.n_windows:
        raise ValueError(f"window: the dataset has {ds.sizes['window']} of the n_windows={config.n_windows} windows")
    arch, N = config.arch, config.N
    Ps = [int(p) for p in ds["P"].values]
    profiles = [profile_of(ds.sel(P=P), config, P, n_bins) for P in Ps]
    if arch.attention != "softmax":
        return _linear_summary(arch, N, Ps, profiles)
    a_bar = theory_barrier(arch, N)[1]
    lr, dlr = (np.array(v) for v in zip(*(basin_log_ratio(p, a_bar, arch.L) for p in profiles)))
    return _softmax_summary(arch, N, Ps, profiles, lr, dlr)


# --- the Gaussian fluctuations around the ansatz ---------------------------------------------------


def fluctuation_entropy(arch: cm.CopyArch, P: float, N: float, c: float) -> float:
    """``(1/2) ln det' H(c)``: the Gaussian integral over the ``L^2 - 1`` directions of ``G``
    orthogonal to the ansatz at ``G = c S + c_1 11^T`` (:func:`jaxattn.copyhead.action.softmax_logits`),
    with ``H`` the Hessian of the reduced action (B.3b evaluated at any ``G``,
    :func:`jaxattn.copyhead.action.reduced_action_of_G`) projected off the ansatz's tangent.
    ``S(c) + fluctuation_entropy(c)`` is the Laplace approximation of ``F(c)`` to the marginal
    posterior along ``c``; the reduced action alone keeps ``G`` on the ansatz (float64).

    Args:
        arch: the network (softmax attention).
        P: number of training sequences.
        N: inverse temperature.
        c: the copy strength.

    Returns:
        ``(1/2) sum ln lambda`` over the projected Hessian's eigenvalues (the tangent's omitted);
            ``NaN`` where one is not positive (the ansatz point is a saddle of the action in
            ``G``, and the Gaussian approximation does not exist).
    """
    with precision.float64():
        ev = np.asarray(_projected_hessian_spectrum(arch)(jnp.float64(c), jnp.float64(P), jnp.float64(N)))
    return float(0.5 * np.sum(np.log(ev))) if ev.min() > 0 else float("nan")


@functools.cache
def _projected_hessian_spectrum(arch: cm.CopyArch):
    """The eigenvalues of the reduced action's Hessian in ``G`` projected off the ansatz's
    tangent (the tangent itself given eigenvalue 1), jitted once per architecture."""
    L = arch.L

    def spectrum(c, P, N):
        G0 = ca.softmax_logits(c, L, arch.cyclic).ravel()
        H = jax.hessian(lambda g: ca.reduced_action_of_G(g.reshape(L, L), P, arch, N))(G0)
        d = jax.jacfwd(lambda x: ca.softmax_logits(x, L, arch.cyclic).ravel())(c)
        d = d / jnp.linalg.norm(d)
        proj = jnp.eye(L * L, dtype=c.dtype) - jnp.outer(d, d)
        return jnp.linalg.eigvalsh(proj @ H @ proj + jnp.outer(d, d))

    return jax.jit(spectrum)


def corrected_gap(arch: cm.CopyArch, P: float, N: float, c_barrier: float) -> tuple[float, float]:
    """``F_copy - F_uniform`` of the reduced action with and without the Gaussian fluctuations
    (:func:`fluctuation_entropy`), at its lowest point on either side of ``c_barrier`` within
    ``c`` in ``[-0.5, 3]``.

    Args:
        arch: the network (softmax attention).
        P: number of training sequences.
        N: inverse temperature.
        c_barrier: the dividing copy strength (the barrier at the theory's ``P*``).

    Returns:
        ``(gap_reduced, gap_corrected)``: negative when the copy basin is the lower.
    """
    c = np.linspace(-0.5, 3.0, 701)
    S = theory_action_of_c(arch, P, N, c)
    iu = int(np.argmin(np.where(c < c_barrier, S, np.inf)))
    ic = int(np.argmin(np.where(c > c_barrier, S, np.inf)))
    gap = float(S[ic] - S[iu])
    return gap, gap + fluctuation_entropy(arch, P, N, c[ic]) - fluctuation_entropy(arch, P, N, c[iu])


def p_star_corrected(arch: cm.CopyArch, N: float, bracket: tuple[float, float]) -> float:
    """The ``P`` at which the Gaussian-corrected gap (:func:`corrected_gap`) vanishes, by Brent's
    method (``scipy.optimize.brentq``) on ``bracket``.

    Args:
        arch: the network (softmax attention).
        N: inverse temperature.
        bracket: ``(P_lo, P_hi)`` with gaps of opposite signs.

    Returns:
        The corrected ``P*``.
    """
    from scipy.optimize import brentq

    c_bar = float(copy_strength(np.asarray(theory_barrier(arch, N)[1]), arch.L))
    root = brentq(lambda P: corrected_gap(arch, P, N, c_bar)[1], *bracket, xtol=0.05)
    return float(root)  # pyright: ignore[reportArgumentType]  (full_output=False: a float)
