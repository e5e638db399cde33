"""The Metropolis-adjusted Langevin algorithm (MALA, ``blackjax.mala``) as an ``(init, step)``
kernel over explicit state, beside :mod:`jaxattn.core.kernels.sgld`.

Target ``p(theta) ~ exp(-N U(theta, data))``. A step proposes SGLD's Euler step

    theta' = theta - eps N dU/dtheta + sqrt(2 eps) xi,     xi ~ N(0, I),

and accepts it with the Metropolis-Hastings probability of that asymmetric proposal, so the chain
leaves the target exactly invariant at any step size (SGLD's stationary law is off by
``O(eps)``); a larger ``eps`` costs acceptance, not accuracy. The state caches ``ln p`` and its
gradient at the position, which depend on ``data``: a chain whose data change (a replica moved
to another umbrella window) is brought up to date by ``refresh``. A proposal with a non-finite
density is rejected; a chain that starts non-finite is flagged ``diverged`` and frozen.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import blackjax
import jax.numpy as jnp
from blackjax.mcmc.mala import MALAState as _Inner
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

from jaxattn.core.divergence import all_finite, guard


class MALAState(NamedTuple):
    """The state of one MALA chain.

    Attributes:
        position: The chain's position ``theta`` (a pytree).
        logdensity: ``-N U(theta, data)`` at the position, float scalar ``()``.
        logdensity_grad: Its gradient, a pytree like the position.
        step: Number of steps taken, int32 scalar ``()``.
        diverged: Boolean scalar ``()``: the chain's start was not finite (sticky).
        accepted: Proposals accepted so far, int32 scalar ``()``.
    """

    position: Any
    logdensity: Float[Array, ""]
    logdensity_grad: Any
    step: Int[Array, ""]
    diverged: Bool[Array, ""]
    accepted: Int[Array, ""]


class MALA(NamedTuple):
    """An ``(init, step)`` pair, with ``refresh`` for a change of data.

    Attributes:
        init: ``init(position, data) -> MALAState``.
        step: ``step(key, state, data, step_size) -> MALAState``: one proposal, accepted or not.
        refresh: ``refresh(state, data) -> MALAState``: the cached density for new data.
    """

    init: Callable[[Any, Any], MALAState]
    step: Callable[[PRNGKeyArray, MALAState, Any, Any], MALAState]
    refresh: Callable[[MALAState, Any], MALAState]


def mala(potential_fn: Callable[[Any, Any], Array], N: float | Array = 1.0) -> MALA:
    """The MALA kernel for ``exp(-N potential_fn(position, data))`` (``blackjax.mala``'s
    transition, with the step counter, divergence flag and acceptance count of this package's
    kernels).

    Args:
        potential_fn: ``U(position, data)``, a float scalar ``()``.
        N: The factor ``N`` of the target ``exp(-N U)``.

    Returns:
        A :class:`MALA` ``(init, step, refresh)``.
    """
    transition = blackjax.mala.build_kernel()

    def logdensity(data):
        return lambda x: -N * potential_fn(x, data)

    def refresh(state: MALAState, data) -> MALAState:
        inner = blackjax.mala.init(state.position, logdensity(data))
        return state._replace(logdensity=inner.logdensity, logdensity_grad=inner.logdensity_grad)

    def init(position, data) -> MALAState:
        inner = blackjax.mala.init(position, logdensity(data))
        ok = all_finite((position, inner.logdensity, inner.logdensity_grad))
        zero = jnp.zeros((), jnp.int32)
        return MALAState(position, inner.logdensity, inner.logdensity_grad, zero, ~ok, zero)

    def step(key, state: MALAState, data, step_size) -> MALAState:
        inner = _Inner(state.position, state.logdensity, state.logdensity_grad)  # pyright: ignore[reportArgumentType]
        new, info = transition(key, inner, logdensity(data), step_size)
        moved = (new.position, new.logdensity, new.logdensity_grad)
        (x, lp, g), diverged = guard(
            state.diverged, all_finite(moved), moved, (state.position, state.logdensity, state.logdensity_grad)
        )
        took = info.is_accepted & ~diverged
        return MALAState(x, lp, g, state.step + 1, diverged, state.accepted + took.astype(jnp.int32))

    return MALA(init, step, refresh)
