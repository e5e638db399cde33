"""The copy head's free-energy landscape along the previous-token weight (Spec B, sections 3 and
4; issue 13; ``docs/theory/copy_head.md``, section 6).

Sampled: the posterior of ``G`` with ``W`` integrated out exactly, ``p(G) ~ exp(-S(G))`` with
``S`` the exact finite-data action (B.3a, :func:`jaxattn.copyhead.action.exact_action`),
projected on ``a = (1/n_pos) sum_l A_{l,l-1}`` and sampled across the barrier by umbrella
windows on the ansatz's log-odds ``c = copy_strength(a)``, placed from the reduced action
(:func:`place_windows`), with SGLD and MBAR (:mod:`jaxattn.core.umbrella`):
:func:`sampled_profile`. The basins' probabilities give ``P*`` from sampling (:func:`landscape`).

Theory: the reduced action on the softmax ansatz, ``S(c_G)`` (B.3b), on the same axis
(:func:`theory_profile`); and its Laplace correction by the Gaussian fluctuations of the other
``L^2 - 1`` directions of ``G`` (:func:`fluctuation_entropy`, :func:`p_star_corrected`), which
the reduced action leaves out and the sampled profile integrates over.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from jaxattn.copyhead import action as ca
from jaxattn.copyhead import network as cm
from jaxattn.copyhead import task
from jaxattn.copyhead.experiments import data_key
from jaxattn.core import checks, diagnostics, precision
from jaxattn.core import umbrella as us


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
    """The reduced action ``S(c_G(a))`` (B.3b on the softmax ansatz, float64) relative to its
    lowest value on ``a``: the theory's ``F(a)``.

    Args:
        arch: the network (softmax attention).
        P: number of training sequences.
        N: inverse temperature.
        a: previous-token weights in ``(0, 1)``, shape ``(n,)``.

    Returns:
        ``S(a) - min S``, shape ``(n,)``.
    """
    with precision.float64():
        c = np.asarray(copy_strength(jnp.asarray(a, jnp.float64), arch.L))
    S = theory_action_of_c(arch, P, N, c)
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
        a: bin centres of the previous-token weight, shape ``(B,)``.
        F: ``F(a) = -ln p(a)`` relative to its lowest bin, shape ``(B,)`` (``NaN``: empty bin).
        dF: MBAR's standard error of ``F``, shape ``(B,)``.
        theory: the reduced action ``S(a) - min S`` on the same bins, shape ``(B,)``.
        windows: the umbrella windows on ``c`` (:class:`jaxattn.core.umbrella.Windows`).
        targets: the ``c`` each window was placed to sample, shape ``(K,)``.
        c_mean: each window's sampled mean of ``c``, shape ``(K,)``.
        rhat: each window's split R-hat of ``c`` over its chains, shape ``(K,)``.
        ess: each window's effective sample size of ``c``, shape ``(K,)``.
        flagged: windows left out because a chain diverged, shape ``(K,)``.
        draws: the windows' draws of ``c`` (:class:`jaxattn.core.umbrella.WindowDraws`).
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


def place_windows(
    arch: cm.CopyArch,
    P: float,
    N: float,
    c_range: tuple[float, float],
    max_spacing: float = 0.2,
    spring: float | None = None,
) -> tuple[us.Windows, np.ndarray]:
    """Harmonic windows on ``c`` placed from the reduced action ``S(c)`` so that neighbouring
    windows overlap wherever the posterior is steep or narrow.

    - The spring constant defaults to ``max(4 / max_spacing^2, 2 max(-S''))``: above the
      action's largest negative curvature, so that no window is bistable at the barrier.
    - Targets ``t_k`` run from ``lo`` to ``hi`` with a local spacing of two window widths,
      ``2 / sqrt(kappa + S''(t))``, at most ``max_spacing``.
    - Each centre is moved up the slope, ``c_k = t_k + S'(t_k) / kappa``, so that the window's
      biased minimum sits at its target even where the mean force is large.

    The sampled ``F`` differs from ``S``: the shift's error ``(F' - S') / kappa`` and the widths'
    are checked afterwards on the windows' sampled means and spreads (:func:`sampled_profile`).

    Args:
        arch: the network (softmax attention).
        P: number of training sequences.
        N: inverse temperature.
        c_range: ``(lo, hi)`` of the targets.
        max_spacing: the largest spacing of the targets (``> 0``).
        spring: the spring constant (``> 0``; default as above).

    Returns:
        ``(windows, targets)``.

    Raises:
        ValueError: naming ``c_range``, ``max_spacing`` or ``spring``.
    """
    lo, hi = (float(x) for x in c_range)
    if not (np.isfinite(lo) and np.isfinite(hi) and hi > lo):
        raise ValueError(f"c_range must be (lo, hi) with lo < hi, got {c_range!r}")
    if not (np.isfinite(max_spacing) and max_spacing > 0):
        raise ValueError(f"max_spacing must be positive, got {max_spacing!r}")
    if spring is not None and not (np.isfinite(spring) and spring > 0):
        raise ValueError(f"spring must be a positive spring constant, got {spring!r}")
    fine = np.linspace(lo - 0.5, hi + 0.5, int(400 * (hi - lo + 1)) + 1)
    S = theory_action_of_c(arch, P, N, fine)
    d1 = np.gradient(S, fine)
    d2 = np.gradient(d1, fine)
    inner = (fine >= lo) & (fine <= hi)
    kappa = float(spring) if spring is not None else max(4.0 / max_spacing**2, 2.0 * float(np.max(-d2[inner])))
    width = 1.0 / np.sqrt(np.maximum(kappa + d2, kappa / 4))
    t = [lo]
    while t[-1] < hi:
        t.append(t[-1] + min(max_spacing, 2.0 * float(np.interp(t[-1], fine, width))))
    targets = np.asarray(t[:-1] + [hi]) if t[-1] - hi > 0 else np.asarray(t)
    centers = targets + np.interp(targets, fine, d1) / kappa
    return us.Windows(centers, np.full(targets.size, kappa)), targets


def sampled_profile(
    arch: cm.CopyArch,
    P: int,
    N: float,
    *,
    data_seed: int = 0,
    c_range: tuple[float, float] = (-0.5, 3.0),
    max_spacing: float = 0.2,
    spring: float | None = None,
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
    ``c = copy_strength(a)`` (:func:`place_windows`) with SGLD (all windows and chains in one
    compiled program) and MBAR (:mod:`jaxattn.core.umbrella`); the profile is histogrammed on
    ``a`` on bins evenly spaced between the ``a`` of ``c_range``.

    Args:
        arch: the network (softmax attention).
        P: number of training sequences (``>= 1``).
        N: inverse temperature (``> 0``, finite).
        data_seed: the data set (as in :func:`jaxattn.copyhead.sample`).
        c_range: ``(lo, hi)`` of the windows' targets on ``c``.
        max_spacing: the windows' largest spacing (:func:`place_windows`).
        spring: the windows' spring constant on ``c`` (default: :func:`place_windows`).
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
    if arch.attention != "softmax":
        raise ValueError(f"the sampled landscape is along the softmax ansatz; got attention={arch.attention!r}")
    N = ca.check_N(N)
    if not np.isfinite(N):
        raise ValueError("N must be finite for sampling (N = inf is the MAP point, not a posterior)")
    P = int(ca.check_P([P])[0])
    for name, v, lo in (
        ("n_chains", n_chains, 2),
        ("burn_in", burn_in, 0),
        ("n_draws", n_draws, 8),
        ("thin", thin, 1),
        ("n_bins", n_bins, 1),
    ):
        checks.integer(name, v, lo)  # R-hat needs two chains, and split chains four draws each
    w, targets = place_windows(arch, P, N, c_range, max_spacing, spring)
    potential, order = posterior_target(arch)
    X = task.one_hot(task.tokens(data_key(data_seed), P, arch.L, arch.V), arch.V)
    st = cm.stats(X)
    G0 = jax.vmap(lambda c: ca.softmax_logits(c, arch.L, arch.cyclic))(jnp.asarray(targets, jnp.float32))
    # the bias's curvature in G along the ansatz: kappa |grad_G c|^2, largest over the targets
    g2 = jax.vmap(lambda G: jnp.sum(jax.grad(order)(G) ** 2))(G0)
    eps = step / (N + float(w.spring[0]) * float(jnp.max(g2)))
    draws = us.sample_windows(
        potential,
        order,
        N,
        w,
        G0,
        (st, jnp.float32(N)),
        jax.random.key(seed),
        eps,
        n_chains=n_chains,
        burn_in=burn_in,
        n_draws=n_draws,
        thin=thin,
    )
    c = np.asarray(draws.a, float)
    a_lo, a_hi = prev_weight(np.asarray(c_range, float), arch.L)
    edges = np.linspace(float(a_lo), float(a_hi), n_bins + 1)
    prof = us.profile(draws, w, edges, transform=lambda x: prev_weight(x, arch.L))
    ok = np.asarray(np.isfinite(c).all(axis=2))  # (window, chain): chains that did not diverge
    rhat = np.array([diagnostics.split_rhat(c[k][ok[k]]) if ok[k].sum() >= 2 else np.nan for k in range(len(c))])
    ess = np.array([diagnostics.ess(c[k][ok[k]]) if ok[k].sum() >= 1 else np.nan for k in range(len(c))])
    return SampledProfile(
        prof.a,
        prof.F,
        prof.dF,
        theory_profile(arch, P, N, prof.a),
        w,
        targets,
        np.nanmean(c, axis=(1, 2)),
        rhat,
        ess,
        prof.flagged,
        draws,
    )


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


def landscape(
    arch: cm.CopyArch,
    P: list[int] | None = None,
    N: float = 1.0,
    *,
    max_extend: int = 5,
    progress: bool = False,
    **kw,
) -> dict:
    """Sampled profiles at every ``P`` (:func:`sampled_profile`, one compile for the whole scan),
    each basin's probability across the theory's barrier (:func:`basin_log_ratio`), and ``P*``
    from sampling: where ``ln(p_copy / p_uniform)`` crosses zero (:func:`crossing`), against the
    theory's ``P*`` at the same ``N``. Up to ``max_extend`` more ``P`` are added by secant steps
    on the sampled log-odds: outward until a pair of ``P`` brackets the crossing, then inside the
    bracket until it is narrow (an end's log-odds within 0.5 of zero, or 2% of ``P`` wide).

    Args:
        arch: the network (softmax attention).
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
    from tqdm.auto import tqdm

    arch = arch.validate()
    N = ca.check_N(N)
    p_star, a_bar = theory_barrier(arch, N)
    slope = theory_slope(arch, N, p_star)
    Ps = default_P(p_star, slope) if P is None else sorted({int(p) for p in ca.check_P(list(P))})
    res: dict[int, tuple[SampledProfile, float, float]] = {}
    bar = tqdm(total=len(Ps), desc=f"landscape N={N:g}", disable=not progress)

    def run(p):
        prof = sampled_profile(arch, p, N, **kw)
        res[p] = (prof, *basin_log_ratio(prof, a_bar, arch.L))
        bar.update(1)

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
            bar.total += 1
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
        bar.total += 1
        run(nxt)
    bar.close()
    ks = sorted(res)
    lr, dlr = np.array([res[k][1] for k in ks]), np.array([res[k][2] for k in ks])
    P0, dP0 = crossing(np.asarray(ks, float), lr, dlr)
    return dict(
        N=N,
        P=ks,
        p_star_theory=p_star,
        a_barrier=a_bar,
        p_star_sampled=P0,
        p_star_sampled_err=dP0,
        log_ratio=lr.tolist(),
        log_ratio_err=dlr.tolist(),
        profiles=[res[k][0] for k in ks],
    )


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
