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
