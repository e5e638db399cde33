"""The Gaussian fluctuations of ``G`` around the softmax ansatz: the Laplace correction of the
reduced action along ``c_G``, and the ``P*`` it gives (``docs/theory/copy_head.md``, section 6).

The reduced action keeps ``G`` on the ansatz ``c S + c_1 11^T``; the posterior integrates over
the other ``L^2 - 1`` directions too. Their Gaussian integral, ``(1/2) ln det' H``
(:func:`fluctuation_entropy`), added to the reduced action, gives the corrected gap between the
basins (:func:`corrected_gap`) and its zero, the corrected ``P*`` (:func:`p_star_corrected`).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxattn.copyhead import action, network
from jaxattn.copyhead.profile import copy_strength, theory_action_of_c, theory_barrier
from jaxattn.core import precision


def fluctuation_entropy(arch: network.CopyArch, P: float, N: float, c: float) -> float:
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
def _projected_hessian_spectrum(arch: network.CopyArch):
    """The eigenvalues of the reduced action's Hessian in ``G`` projected off the ansatz's
    tangent (the tangent itself given eigenvalue 1), jitted once per architecture."""
    L = arch.L

    def spectrum(c, P, N):
        G0 = action.softmax_logits(c, L, arch.cyclic).ravel()
        H = jax.hessian(lambda g: action.reduced_action_of_G(g.reshape(L, L), P, arch, N))(G0)
        d = jax.jacfwd(lambda x: action.softmax_logits(x, L, arch.cyclic).ravel())(c)
        d = d / jnp.linalg.norm(d)
        proj = jnp.eye(L * L, dtype=c.dtype) - jnp.outer(d, d)
        return jnp.linalg.eigvalsh(proj @ H @ proj + jnp.outer(d, d))

    return jax.jit(spectrum)


def corrected_gap(arch: network.CopyArch, P: float, N: float, c_barrier: float) -> tuple[float, float]:
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


def p_star_corrected(arch: network.CopyArch, N: float, bracket: tuple[float, float]) -> float:
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


def p_star_corrected_near(
    arch: network.CopyArch, N: float, P0: float, step: float = 0.02, max_factor: float = 2.0
) -> float | None:
    """The Gaussian-corrected ``P*`` nearest ``P0``: the corrected gap (:func:`corrected_gap`) is
    evaluated at ``P0`` and at ``P`` growing (gap positive: the uniform basin still lower) or
    shrinking (negative) by ``step`` relative steps, until it changes sign; Brent's method then
    solves inside that bracket (:func:`p_star_corrected`).

    Args:
        arch: the network (softmax attention).
        N: inverse temperature.
        P0: where to start (the reduced action's ``P*``, or a sampled one).
        step: the relative step of the scan.
        max_factor: the scan stops at ``P0 * max_factor`` upward or ``P0 / max_factor`` downward.

    Returns:
        The corrected ``P*``, or ``None`` where the correction does not exist on the way: a
            Hessian eigenvalue that is not positive makes the gap ``NaN`` before it changes sign
            (at ``N = 1``, ``L = 32``, ``V = 4``, above ``P ~ 540``), or no sign change within
            ``max_factor``.
    """
    c_bar = float(copy_strength(np.asarray(theory_barrier(arch, N)[1]), arch.L))
    Ps, gaps = [float(P0)], [corrected_gap(arch, P0, N, c_bar)[1]]
    if not np.isfinite(gaps[0]):
        return None
    up = gaps[0] > 0
    while np.isfinite(gaps[-1]) and (gaps[-1] > 0) == up and gaps[-1] != 0:
        nxt = Ps[-1] * (1 + step) if up else Ps[-1] / (1 + step)
        if not P0 / max_factor <= nxt <= P0 * max_factor:
            return None
        Ps.append(nxt)
        gaps.append(corrected_gap(arch, nxt, N, c_bar)[1])
    if not np.isfinite(gaps[-1]):
        return None
    if gaps[-1] == 0:
        return Ps[-1]
    lo, hi = sorted(Ps[-2:])
    try:  # the correction needs a positive Hessian at both minima inside the bracket too
        return p_star_corrected(arch, N, (lo, hi))
    except ValueError:
        return None
