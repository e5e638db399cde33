"""The Metropolis-adjusted kernels, MALA (``blackjax.mala``) and HMC (``blackjax.hmc``), as
``(init, step, refresh)`` kernels over explicit state, beside :mod:`jaxattn.core.kernels.sgld`.

Target ``p(theta) ~ exp(-N U(theta, data))``. A MALA step proposes SGLD's Euler step

    theta' = theta - eps N dU/dtheta + sqrt(2 eps) xi,     xi ~ N(0, I),

and accepts it with the Metropolis-Hastings probability of that asymmetric proposal, so the chain
leaves the target exactly invariant at any step size (SGLD's stationary law is off by
``O(eps)``); a larger ``eps`` costs acceptance, not accuracy. The state caches ``ln p`` and its
gradient at the position, which depend on ``data``: a chain whose data change (a replica moved
to another umbrella window) is brought up to date by ``refresh``. A proposal with a non-finite
density is rejected; a chain that starts non-finite is flagged ``diverged`` and frozen.

HMC (:func:`hmc`) makes ``n_leapfrog`` leapfrog steps of size ``h = sqrt(2 eps)`` per proposal
(with unit mass, one leapfrog step of that size is MALA's proposal, so ``eps`` means the same
for both), the step jittered by a uniform factor in ``[0.8, 1.2]`` per proposal (the usual guard
against a fixed trajectory that returns near its start along some direction); a proposal costs
``n_leapfrog`` gradients and moves ballistically, ``n_leapfrog h`` in time, where Langevin steps
diffuse. It caches and refreshes the same state as MALA.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import blackjax
import jax
import jax.numpy as jnp
from blackjax.mcmc.hmc import HMCState as _HMCInner
from blackjax.mcmc.mala import MALAState as _Inner
from jax.flatten_util import ravel_pytree
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

from jaxattn.core import checks
from jaxattn.core.divergence import all_finite, guard


class MALAState(NamedTuple):
    """The state of one MALA or HMC chain.

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
        return _logdensity(potential_fn, N, data)

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
        return _advanced(state, new, info.is_accepted)

    return MALA(init, step, refresh)


def hmc(potential_fn: Callable[[Any, Any], Array], N: float | Array = 1.0, n_leapfrog: int = 4) -> MALA:
    """The HMC kernel for ``exp(-N potential_fn(position, data))`` with unit mass
    (``blackjax.hmc``'s transition, with this package's step counter, divergence flag and
    acceptance count): a proposal is ``n_leapfrog`` leapfrog steps of size
    ``sqrt(2 step_size) u``, ``u`` uniform in ``[0.8, 1.2]`` per proposal, accepted by
    Metropolis-Hastings, so the target is exact at any step size.

    Args:
        potential_fn: ``U(position, data)``, a float scalar ``()``.
        N: The factor ``N`` of the target ``exp(-N U)``.
        n_leapfrog: Leapfrog steps per proposal (``>= 1``; 1 is MALA's proposal).

    Returns:
        A :class:`MALA` ``(init, step, refresh)`` whose step takes ``n_leapfrog`` gradients.

    Raises:
        ValueError: naming ``n_leapfrog``.
    """
    checks.integer("n_leapfrog", n_leapfrog, 1)
    transition = blackjax.hmc.build_kernel()
    base = mala(potential_fn, N)

    def step(key, state: MALAState, data, step_size) -> MALAState:
        k_move, k_jitter = jax.random.split(key)
        h = jnp.sqrt(2.0 * step_size) * jax.random.uniform(k_jitter, (), minval=0.8, maxval=1.2)
        inner = _HMCInner(state.position, state.logdensity, state.logdensity_grad)  # pyright: ignore[reportArgumentType]
        unit_mass = jnp.ones_like(ravel_pytree(state.position)[0])
        new, info = transition(k_move, inner, _logdensity(potential_fn, N, data), h, unit_mass, n_leapfrog)
        return _advanced(state, new, info.is_accepted)

    return MALA(base.init, step, base.refresh)


def _logdensity(potential_fn, N, data) -> Callable:
    """``x -> -N U(x, data)``, the log-density blackjax's transitions take."""
    return lambda x: -N * potential_fn(x, data)


def _advanced(state: MALAState, new, is_accepted) -> MALAState:
    """The state after one Metropolis-adjusted transition to blackjax's ``new`` (position,
    density, gradient): a non-finite move is refused and flags the chain (:func:`guard`)."""
    moved = (new.position, new.logdensity, new.logdensity_grad)
    (x, lp, g), diverged = guard(
        state.diverged, all_finite(moved), moved, (state.position, state.logdensity, state.logdensity_grad)
    )
    took = is_accepted & ~diverged
    return MALAState(x, lp, g, state.step + 1, diverged, state.accepted + took.astype(jnp.int32))
