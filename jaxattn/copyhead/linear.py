"""Linear attention's minima and second-order onsets (Spec B, section 3; ``docs/theory/copy_head.md``).

``S(a_1, a_G)`` is minimised in 2-D (grid start, damped Newton; :func:`linear_minimum`). At
``A = 0`` its Hessian is ``H(P) = K0 + P K1 - P^2 K2`` exactly (prior, Occam and data terms), so
the onsets are the positive roots of ``det H(P) = 0``: the generalised eigenproblem
``[[0, I], [K0, K1]] z = P [[I, 0], [0, K2]] z`` (:func:`linear_onsets`). The crossover from
pooling to copying is where the minimum's copying part outgrows its uniform part
(:func:`linear_crossover`). The softmax counterpart is :mod:`jaxattn.copyhead.softmax`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, cast

import jax
import jax.numpy as jnp
import numpy as np
import numpy.typing as npt
import scipy.linalg
from jax.typing import ArrayLike
from jaxtyping import Array, Float

from jaxattn.copyhead import action, network
from jaxattn.core import precision


class LinearMinimum(NamedTuple):
    """Global minimum of the linear-attention action ``S(a_1, a_G)`` (:func:`linear_minimum`;
    Spec B, section 3, "Minima"), with ``a_G >= 0`` (gauge).

    Attributes:
        a1: uniform-pooling strength ``a_1``, shape (*b).
        aG: copy strength ``a_G``, shape (*b).
        S: action at the minimum, shape (*b).
    """

    a1: Float[Array, "*b"]
    aG: Float[Array, "*b"]
    S: Float[Array, "*b"]


def linear_minimum(P: Float[Array, ""], h: action.CopyHyper, n_grid: int = 41, n_newton: int = 25) -> LinearMinimum:
    """Global minimum of ``S(a_1, a_G)`` over ``a_1 in [-1, 1.5]``, ``a_G in [0, 1.5]`` (the sign
    of ``A`` is a gauge, ``(G, W) -> (-G, -W)``): best grid point, then damped Newton (Hessian
    shifted to be positive definite, best of a ladder of step fractions). Spec B, section 3,
    "Minima"; ``S`` is (B.3b) on the linear ansatz ``A = a_1 11^T/L + a_G S``.

    Args:
        P: number of training sequences, scalar.
        h: hyper-parameters.
        n_grid: grid points per axis of the starting grid.
        n_newton: damped Newton steps.

    Returns:
        Named tuple :class:`LinearMinimum` of scalars ``(a1, aG, S)``.
    """
    dt = jnp.result_type(P, float)
    a1g = jnp.linspace(-1.0, 1.5, n_grid, dtype=dt)
    aGg = jnp.linspace(0.0, 1.5, n_grid, dtype=dt)
    f = lambda z: action.linear_action(z[0], z[1], P, h)  # noqa: E731
    Y = jax.vmap(lambda a: jax.vmap(lambda b: action.linear_action(a, b, P, h))(aGg))(a1g)
    i, j = jnp.unravel_index(jnp.argmin(Y), Y.shape)
    z0 = jnp.stack([a1g[i], aGg[j]])
    fracs = 2.0 ** -jnp.arange(12, dtype=dt)
    grad, hess = jax.grad(f), jax.hessian(f)

    def body(_, z):
        g, H = grad(z), hess(z)
        lam = jnp.linalg.eigvalsh(H)
        H = H + jnp.maximum(0.0, 1e-9 * jnp.abs(lam[-1]) - lam[0]) * jnp.eye(2, dtype=dt)
        step = jnp.linalg.solve(H, g)
        cand = z[None, :] - fracs[:, None] * step[None, :]
        vals = jax.vmap(f)(cand)
        k = jnp.argmin(vals)
        return jnp.where(vals[k] < f(z), cand[k], z)

    z = jax.lax.fori_loop(0, n_newton, body, z0)
    sgn = jnp.where(z[1] < 0, -1.0, 1.0)
    return LinearMinimum(sgn * z[0], sgn * z[1], f(z))


@jax.jit
def linear_hessian_coefficients(
    h: action.CopyHyper,
) -> tuple[Float[Array, "2 2"], Float[Array, "2 2"], Float[Array, "2 2"]]:
    """``(K0, K1, K2)`` with ``Hess S(a_1, a_G)|_0 = K0 + P K1 - P^2 K2`` (exact: at ``A = 0`` the
    prior is ``P``-independent, the Occam term linear and the data term quadratic in ``P``).

    Args:
        h: hyper-parameters.

    Returns:
        ``(K0, K1, K2)``, each of shape (2, 2) in ``(a_1, a_G)``.
    """
    hess = jax.hessian(lambda z, P: action.linear_action(z[0], z[1], P, h))
    Hs = [hess(jnp.zeros(2, h.L.dtype), jnp.asarray(P, h.L.dtype)) for P in (0.0, 1.0, 2.0)]
    K0 = Hs[0]
    K2 = -(Hs[2] - 2 * Hs[1] + Hs[0]) / 2
    K1 = Hs[1] - K0 + K2
    return K0, K1, K2


class LinearOnsets(NamedTuple):
    """``P_onset`` (first root of ``det H(P)``) with its direction ``(a_1, a_G)`` and kind
    (``"pooling"``/``"copying"``), ``P_second`` the next root, ``P_copy`` / ``P_pool`` where the
    pure ``a_G`` / ``a_1`` curvature vanishes (``P_copy`` is the spec's closed form), ``P_c_closed``
    (Spec B, section 3, "Minima" and "Closed forms").

    Attributes:
        P_onset: first positive root of ``det H(P)``.
        direction: ``(a_1, a_G)`` of the onset's null vector (max-norm 1, ``a_G > 0`` or else ``a_1 > 0``).
        kind: ``"pooling"`` or ``"copying"`` (:func:`kind_of` of ``direction``).
        P_second: next root of ``det H(P)`` (NaN if none).
        P_copy: first positive root of the ``a_G a_G`` curvature (NaN if none).
        P_pool: first positive root of the ``a_1 a_1`` curvature (NaN if none).
        P_c_closed: the closed form ``P_c = (V^2/(2 beta)) [1 + sqrt(1 + 4 L^3/(sigma_G^2 omega V^3))]``.
    """

    P_onset: float
    direction: tuple
    kind: str
    P_second: float
    P_copy: float
    P_pool: float
    P_c_closed: float


def _first_positive_root(k0, k1, k2):
    """Smallest ``P > 0`` with ``k0 + P k1 - P^2 k2 = 0``."""
    r = np.roots([-k2, k1, k0])
    r = np.real(r[(np.abs(np.imag(r)) < 1e-9 * (1 + np.abs(r))) & (np.real(r) > 0)])
    return float(r.min()) if r.size else float("nan")


def kind_of(a1: float, aG: float, L: float) -> str:
    """``A = (a_1 + a_G) 11^T/L + a_G (S - 11^T/L)``: pooling when the uniform part is larger in
    Frobenius norm (``|a_1 + a_G|`` against ``|a_G| sqrt(L - 1)``), copying otherwise.

    Args:
        a1: uniform-pooling strength ``a_1`` (scalar).
        aG: copy strength ``a_G`` (scalar).
        L: sequence length.

    Returns:
        ``"pooling"`` or ``"copying"``.
    """
    return "pooling" if abs(a1 + aG) > abs(aG) * np.sqrt(L - 1) else "copying"


def linear_onsets(arch: network.CopyArch, N: float = 1.0) -> LinearOnsets:
    """Second-order onsets of linear attention from the Hessian at ``A = 0``: the generalised
    eigenproblem ``[[0, I], [K0, K1]] z = P [[I, 0], [0, K2]] z`` (``z = (v, P v)``). Spec B,
    section 3: the onset is where the Hessian at ``A = 0`` first gets a negative direction.

    Args:
        arch: the network (linear attention).
        N: inverse temperature.

    Returns:
        Named tuple :class:`LinearOnsets`: the onset, its direction and kind, the second root, the pure
            ``a_G`` / ``a_1`` roots and the closed-form ``P_c``.
    """
    with precision.float64():
        h = action.hyper(arch, N)
        K0, K1, K2 = (np.asarray(k) for k in linear_hessian_coefficients(h))
    Z, I2 = np.zeros((2, 2)), np.eye(2)
    # scipy's stubs return a union over the keyword flags: this is (w complex, vr real or complex)
    w, vr = cast(
        tuple[npt.NDArray[np.complexfloating], npt.NDArray[np.inexact]],
        scipy.linalg.eig(np.block([[Z, I2], [K0, K1]]), np.block([[I2, Z], [Z, K2]])),
    )
    ok = np.isfinite(w) & (np.abs(w.imag) < 1e-9 * (1 + np.abs(w))) & (w.real > 0)
    order = np.argsort(w.real[ok])
    roots, vecs = w.real[ok][order], vr[:2, ok][:, order].real
    v = vecs[:, 0] / np.max(np.abs(vecs[:, 0]))
    v = v * np.sign(v[1] if abs(v[1]) > 1e-12 else v[0])
    L, V = arch.L, arch.V
    Pc = V**2 / (2 * arch.beta) * (1 + np.sqrt(1 + 4 * L**3 / (arch.sigma_G2 * arch.omega * V**3)))
    return LinearOnsets(
        float(roots[0]),
        (float(v[0]), float(v[1])),
        kind_of(v[0], v[1], L),
        float(roots[1]) if roots.size > 1 else float("nan"),
        _first_positive_root(K0[1, 1], K1[1, 1], K2[1, 1]),
        _first_positive_root(K0[0, 0], K1[0, 0], K2[0, 0]),
        float(Pc),
    )


def linear_scan(Ps: Float[Array, " nP"], h: action.CopyHyper) -> LinearMinimum:
    """:func:`linear_minimum` at every ``P`` of a grid (vmapped).

    Args:
        Ps: numbers of training sequences, shape (nP,).
        h: hyper-parameters.

    Returns:
        Named tuple :class:`LinearMinimum` with fields of shape (nP,).
    """
    return jax.vmap(lambda P: linear_minimum(P, h))(Ps)


linear_scan_jit = jax.jit(linear_scan)


def linear_crossover(
    Ps: ArrayLike | Sequence[float], a1: ArrayLike | Sequence[float], aG: ArrayLike | Sequence[float], L: float
) -> float:
    """First ``P`` of the grid (geometric interpolation) where the minimum turns from pooling to
    copying (:func:`kind_of`: ``|a_G| sqrt(L-1) >= |a_1 + a_G|``) with ``A != 0``; NaN if never.
    Spec B, section 3: the smooth crossover from pooling to copying.

    Args:
        Ps: increasing grid of ``P``, shape (nP,).
        a1: ``a_1`` of the minimum at each ``P``, shape (nP,).
        aG: ``a_G`` of the minimum at each ``P``, shape (nP,).
        L: sequence length.

    Returns:
        The crossover ``P`` (a grid point, or interpolated between two), NaN if never copying.
    """
    Ps, a1, aG = (np.asarray(v, float) for v in (Ps, a1, aG))
    on = np.abs(a1) + np.abs(aG) > 1e-6
    d = np.abs(aG) * np.sqrt(L - 1) - np.abs(a1 + aG)  # > 0: copying
    cop = on & (d >= 0)
    if not cop.any():
        return float("nan")
    k = int(np.argmax(cop))
    if k == 0 or not on[k - 1]:
        return float(Ps[k])  # copying from the moment A leaves 0
    t = d[k - 1] / (d[k - 1] - d[k])
    return float(np.exp(np.log(Ps[k - 1]) + t * (np.log(Ps[k]) - np.log(Ps[k - 1]))))
