"""The reduced action along the previous-token weight: the theory's side of the free-energy
landscape (``docs/theory/copy_head.md``, section 6).

On the softmax ansatz the reduced action (B.3b) is a function of the copy strength ``c_G``, and
``a = e^c / (e^c + L - 1)`` is the previous-token weight (:func:`copy_strength`,
:func:`prev_weight`); on the linear ansatz it is minimised over the pooling weight ``a_1`` at each
``|a_G|`` (:func:`linear_profile_action`). :func:`theory_profile` is ``F(a)`` of the theory, the
line the sampled profile (:mod:`jaxattn.copyhead.landscape`) is compared with;
:func:`theory_barrier` and :func:`theory_slope` place the basins' dividing point and the slope
of their log-odds at the theory's ``P*``, and :func:`reduced_lines` gives these with the barrier
in one call. All in float64.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from jaxattn.copyhead import action, network
from jaxattn.copyhead.softmax import softmax_minima_over_P, transition_of
from jaxattn.core import precision, umbrella


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


def weight_logits(L: int, n: int) -> np.ndarray:
    """``n`` logits ``ln(a / (1 - a))`` of the previous-token weight, evenly spaced from
    ``a = 0.2 / L`` (below the uniform basin's ``1 / L``) to ``a = 0.99``: the grid on which the
    theories' profiles are compared and their basins weighed.

    Args:
        L: sequence length.
        n: number of points.

    Returns:
        The logits, increasing, shape ``(n,)``.
    """
    return np.linspace(np.log(0.2 / (L - 0.2)), np.log(99.0), n)


def theory_profile(arch: network.CopyArch, P: float, N: float, a: np.ndarray) -> np.ndarray:
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


def theory_action_of_c(arch: network.CopyArch, P: float, N: float, c: np.ndarray) -> np.ndarray:
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
        return np.asarray(action.softmax_action(jnp.asarray(c, jnp.float64), jnp.float64(P), action.hyper(arch, N)))


def linear_profile_action(arch: network.CopyArch, P: float, N: float, aG: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
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
        S, a1 = _linear_profile(jnp.abs(jnp.asarray(aG, jnp.float64)), jnp.float64(P), action.hyper(arch, N))
        return np.asarray(S), np.asarray(a1)


@jax.jit
def _linear_profile(aG, P, h):
    grid = jnp.linspace(-1.0, 1.5, 251, dtype=aG.dtype)

    def one(x):
        f = lambda a1: action.linear_action(a1, x, P, h)  # noqa: E731
        d1, d2 = jax.grad(f), jax.grad(jax.grad(f))

        def newton(_, a):
            nxt = a - d1(a) / jnp.where(d2(a) > 0, d2(a), jnp.inf)
            return jnp.where(f(nxt) < f(a), nxt, a)

        a1 = jax.lax.fori_loop(0, 20, newton, grid[jnp.argmin(jax.vmap(f)(grid))])
        return f(a1), a1

    return jax.vmap(one)(aG)


def theory_action_of_order(arch: network.CopyArch, P: float, N: float, x: np.ndarray) -> np.ndarray:
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


def profile_coordinate(arch: network.CopyArch, x: np.ndarray) -> np.ndarray:
    """The profile's coordinate from the windows': the previous-token weight ``a = prev_weight(c)``
    (softmax), ``|a_G|`` itself (linear).

    Args:
        arch: the network.
        x: ``c_G`` or ``|a_G|``, any shape.

    Returns:
        ``a`` or ``|a_G|``, the shape of ``x``.
    """
    return prev_weight(x, arch.L) if arch.attention == "softmax" else np.asarray(x, float)


@functools.cache
def theory_barrier(arch: network.CopyArch, N: float) -> tuple[float, float]:
    """The theory's ``P*`` at ``N`` and the previous-token weight of the action's barrier there
    (the maximum of ``S(c)`` between its two minima): the dividing point of the basins.

    Args:
        arch: the network (softmax attention).
        N: inverse temperature.

    Returns:
        ``(P_star, a_barrier)``.

    Raises:
        ValueError: If the reduced action has no transition there (``P* = inf``: a prior variance
            ``sigma_G2`` too small for the data to move it, say).
    """
    with precision.float64():
        tr = transition_of(action.hyper(arch, N))
    if not (np.isfinite(tr.c_below) and np.isfinite(tr.P_star)):
        raise ValueError(
            f"the reduced action has no copy transition at N = {N:g} for {arch} (P* = {float(tr.P_star)}): no "
            "basins to divide"
        )
    P_star, lo, hi = float(tr.P_star), float(tr.c_below), float(tr.c_above)
    c = np.linspace(lo, hi, 2001)
    return P_star, float(prev_weight(c[np.argmax(theory_action_of_c(arch, P_star, N, c))], arch.L))


def theory_slope(arch: network.CopyArch, N: float, P_star: float) -> float:
    """``d(S_uniform - S_copy)/dP`` at ``P_star``: how fast the theory's log-odds of the copy
    basin grow with ``P`` (from the two minima of the reduced action, float64).

    Args:
        arch: the network (softmax attention).
        N: inverse temperature.
        P_star: the theory's ``P*``.

    Returns:
        The slope per sequence (positive).
    """

    dP = max(1e-3 * P_star, 0.01)
    with precision.float64():
        m = softmax_minima_over_P(jnp.array([P_star + dP, P_star - dP], jnp.float64), action.hyper(arch, N))
    gap = np.asarray(m.S_lo - m.S_hi)
    return float((gap[0] - gap[1]) / (2 * dP))


@dataclass(frozen=True)
class ReducedLines:
    """The reduced action's lines at one ``(arch, N)`` of softmax attention.

    Attributes:
        p_star: its ``P*`` (:func:`theory_barrier`).
        a_barrier: the previous-token weight of its barrier at ``p_star``: the basins' divider.
        barrier_at_star: the barrier at ``p_star`` in ``kT`` (0: one minimum, no jump).
        P: where ``barrier`` is evaluated.
        barrier: the barrier at ``P`` in ``kT``.
        slope: ``d(S_uniform - S_copy)/dP`` at ``p_star`` (:func:`theory_slope`).
    """

    p_star: float
    a_barrier: float
    barrier_at_star: float
    P: float
    barrier: float
    slope: float


def reduced_lines(arch: network.CopyArch, N: float, P: float | None = None) -> ReducedLines | None:
    """The reduced action's ``P*``, its basins' divider, its barrier (the
    :func:`~jaxattn.core.umbrella.two_basins` barrier of :func:`theory_profile` on 400 weights
    from below the uniform basin, ``a = 0.2 / L``, to 0.99, even in their logit) at ``P*`` and
    at ``P``, and the slope of its log-odds at ``P*``.

    Args:
        arch: the network (softmax attention).
        N: inverse temperature.
        P: where the barrier is evaluated besides ``P*`` (default: ``P*``).

    Returns:
        :class:`ReducedLines`, or ``None`` where the reduced action has no transition.
    """
    try:
        p_star, a_bar = theory_barrier(arch, N)
    except ValueError:
        return None
    a = 1 / (1 + np.exp(-weight_logits(arch.L, 400)))

    def barrier(P):
        S = theory_profile(arch, P, N, a)
        return float(umbrella.two_basins(a, S, np.zeros_like(S)).barrier)

    at_star = barrier(p_star)
    at = p_star if P is None else float(P)
    return ReducedLines(
        p_star=float(p_star),
        a_barrier=float(a_bar),
        barrier_at_star=at_star,
        P=at,
        barrier=at_star if P is None else barrier(at),
        slope=theory_slope(arch, N, p_star),
    )
