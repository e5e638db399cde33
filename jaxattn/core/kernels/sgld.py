"""Unadjusted Langevin (SGLD with full-batch gradients) as an ``(init, step)`` kernel.

Target ``p(theta) ~ exp(-N U(theta))`` (Spec B, sections 2 and 4). One step, per parameter block
``b`` with its own step size ``eps_b``:

    theta_b <- theta_b - eps_b N dU/dtheta_b + sqrt(2 eps_b) xi_b,     xi ~ N(0, I),

which is the Euler step of ``blackjax.sgld`` (``step_size`` times the log-density gradient plus
``sqrt(2 step_size)`` noise), generalised to a step size per block; the noise is drawn in the same
way (one normal vector over the raveled position), so with equal step sizes the two kernels take
the same steps from the same key.

A chain whose position or gradient becomes non-finite is frozen at its last finite position and
flagged ``diverged`` (a step size too large for the curvature; :mod:`jaxattn.core.divergence`):
never a silent NaN.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree
from jax.typing import ArrayLike
from jaxtyping import Array, Bool, Int, PRNGKeyArray

from jaxattn.core.divergence import all_finite, guard


class SGLDState(NamedTuple):
    """The state of one SGLD chain, as returned by ``init`` and ``step`` of :class:`SGLD`.

    Attributes:
        position: The chain's position ``theta`` (a pytree, as given to ``init``).
        step: Number of steps taken, int32 scalar ``()``.
        diverged: Boolean scalar ``()``: a step gave a non-finite position (sticky; the chain is
            then frozen).
    """

    position: Any
    step: Int[Array, ""]
    diverged: Bool[Array, ""]


class SGLD(NamedTuple):
    """An ``(init, step)`` pair in the manner of ``blackjax.SamplingAlgorithm``:
    ``step(key, state, data, step_size)`` with ``step_size`` a pytree of per-block scalars
    matching the position (or one scalar).

    Attributes:
        init: ``init(position) -> SGLDState``.
        step: ``step(key, state, data, step_size) -> SGLDState``: one Langevin step.
    """

    init: Callable[[Any], SGLDState]
    step: Callable[[PRNGKeyArray, SGLDState, Any, Any], SGLDState]


def sgld(potential_fn: Callable[[Any, Any], Array], N: float | Array = 1.0) -> SGLD:
    """The unadjusted Langevin kernel for ``exp(-N potential_fn(position, data))``.

    Args:
        potential_fn: ``U(position, data)``, a float scalar ``()``.
        N: The factor ``N`` of the target ``exp(-N U)`` (a float or a scalar array).

    Returns:
        An :class:`SGLD` ``(init, step)`` pair over :class:`SGLDState`.
    """

    def init(position) -> SGLDState:
        return SGLDState(position, jnp.zeros((), jnp.int32), jnp.zeros((), bool))

    def step(key, state: SGLDState, data, step_size) -> SGLDState:
        grads = jax.grad(potential_fn)(state.position, data)
        flat, unravel = ravel_pytree(state.position)
        noise = unravel(jax.random.normal(key, flat.shape, flat.dtype))
        eps = _broadcast(step_size, state.position)
        new = jax.tree_util.tree_map(
            lambda p, g, n, e: p - e * N * g + jnp.sqrt(2.0 * e) * n, state.position, grads, noise, eps
        )
        new, diverged = guard(state.diverged, all_finite(new), new, state.position)
        return SGLDState(new, state.step + 1, diverged)

    return SGLD(init, step)


def _broadcast(step_size, position):
    """Per-block step sizes: a pytree like ``position`` as it is, one scalar for every block."""
    if jax.tree_util.tree_structure(step_size) == jax.tree_util.tree_structure(position):
        return step_size
    return jax.tree_util.tree_map(lambda _: step_size, position)


def advance(kernel: SGLD, key: PRNGKeyArray, state: SGLDState, data: Any, step_size: Any, n: ArrayLike) -> SGLDState:
    """``n`` steps of one chain (``n`` may be traced); step ``m`` uses ``fold_in(key, m)`` of the
    chain's step counter, so a chain does not depend on how its steps are cut into calls.

    Args:
        kernel: The kernel, from :func:`sgld`.
        key: The chain's PRNG key.
        state: The chain's state.
        data: The data passed to every step.
        step_size: Per-block step sizes (a pytree like the position) or one scalar.
        n: Number of steps (an int or a traced integer scalar).

    Returns:
        The :class:`SGLDState` after ``n`` steps.
    """
    return jax.lax.fori_loop(0, n, lambda _, s: kernel.step(jax.random.fold_in(key, s.step), s, data, step_size), state)


def run_segment(
    kernel: SGLD,
    observe_fn: Callable,
    key: PRNGKeyArray,
    state: SGLDState,
    data: Any,
    step_size: Any,
    n_advance: ArrayLike,
    n_draws: ArrayLike,
    thin: int,
    first: ArrayLike,
    draws: Any,
) -> tuple[SGLDState, Any]:
    """One segment of a chain run in segments (as the engine steps it): ``n_advance`` steps,
    then ``n_draws`` draws of ``observe_fn(position, data)`` every ``thin`` steps, written at
    ``first + j`` of the buffers ``draws`` (``NaN`` once diverged). Cut anywhere, the segments
    give the chain of :func:`run_chain` (the steps' keys follow the step counter).

    Args:
        kernel: The kernel, from :func:`sgld`.
        observe_fn: ``observe_fn(position, data)``, a pytree like ``draws`` without its draw axis.
        key: The chain's PRNG key.
        state: The chain's state.
        data: The data passed to every step and to ``observe_fn``.
        step_size: Per-block step sizes (a pytree like the position) or one scalar.
        n_advance: Steps before the segment's first draw (may be traced).
        n_draws: Draws the segment takes (may be traced).
        thin: Steps between draws.
        first: Index of the segment's first draw in the buffers (may be traced).
        draws: The buffers, leaves with a leading draw axis.

    Returns:
        ``(state, draws)``: the state after the segment and the buffers with its draws written.
    """
    state = advance(kernel, key, state, data, step_size, n_advance)

    def draw(j, carry):
        st, buf = carry
        st = advance(kernel, key, st, data, step_size, thin)
        obs = jax.tree_util.tree_map(lambda x: jnp.where(st.diverged, jnp.nan, x), observe_fn(st.position, data))
        return st, jax.tree_util.tree_map(lambda b, x: b.at[first + j].set(x), buf, obs)

    return jax.lax.fori_loop(0, n_draws, draw, (state, draws))


class Schedule(NamedTuple):
    """A chain run in segments (:func:`run_segment`, one per call of an experiment's ``step``):
    burn-in segments first, then segments of draws.

    Attributes:
        advance: Per segment, the steps before its draws (non-zero for burn-in segments only).
        first: Per segment, the index of its first draw.
        n_draws: Per segment, the draws it takes (``thin`` steps each).
    """

    advance: tuple[int, ...]
    first: tuple[int, ...]
    n_draws: tuple[int, ...]

    def steps(self, thin: int) -> np.ndarray:
        """The steps of each segment, ``advance + n_draws thin``.

        Args:
            thin: Steps between draws.

        Returns:
            One count per segment.
        """
        return np.asarray(self.advance) + np.asarray(self.n_draws) * thin


def schedule(burn_in: tuple[int, ...], draws: tuple[int, ...]) -> Schedule:
    """The :class:`Schedule` of burn-in segments of ``burn_in`` steps each, then segments of
    ``draws`` draws each, the draws written one after the other.

    Args:
        burn_in: Steps of each burn-in segment (may be empty).
        draws: Draws of each draw segment.

    Returns:
        The schedule, one entry per segment in each field.
    """
    first = np.concatenate([[0], np.cumsum(draws)[:-1]]).astype(int) if draws else np.zeros(0, int)
    nb = len(burn_in)
    return Schedule(
        tuple(burn_in) + (0,) * len(draws),
        (0,) * nb + tuple(int(f) for f in first),
        (0,) * nb + tuple(draws),
    )


def run_chain(
    kernel: SGLD,
    observe_fn: Callable,
    key: PRNGKeyArray,
    state: SGLDState,
    data: Any,
    step_size: Any,
    burn_in: ArrayLike,
    n_kept: int,
    thin: int,
) -> tuple[SGLDState, Any]:
    """``burn_in`` steps, then ``n_kept`` draws of ``observe_fn(position, data)`` every ``thin``
    steps (:func:`advance` between draws). Not jitted itself: wrap it (vmapped over chains) in
    the caller's ``jax.jit``. Returns the final state and the draws (leading axis ``n_kept``),
    ``NaN`` once diverged.

    Args:
        kernel: The kernel, from :func:`sgld`.
        observe_fn: ``observe_fn(position, data)``, a pytree of arrays to record.
        key: The chain's PRNG key.
        state: The chain's initial state.
        data: The data passed to every step and to ``observe_fn``.
        step_size: Per-block step sizes (a pytree like the position) or one scalar.
        burn_in: Number of steps before the first draw (may be traced).
        n_kept: Number of draws.
        thin: Number of steps between draws (the first draw comes ``thin`` steps after burn-in).

    Returns:
        ``(state, draws)``: the final :class:`SGLDState`, and the pytree of ``observe_fn``'s
            outputs, each leaf of shape ``(n_kept, ...)``.
    """
    state = advance(kernel, key, state, data, step_size, burn_in)

    def draw(st, _):
        st = advance(kernel, key, st, data, step_size, thin)
        obs = observe_fn(st.position, data)
        obs = jax.tree_util.tree_map(lambda x: jnp.where(st.diverged, jnp.nan, x), obs)
        return st, obs

    return jax.lax.scan(draw, state, None, length=n_kept)
