"""Replica exchange between neighbouring members of a ladder of chains (Hamiltonian replica
exchange; on umbrella windows, REUS), run in lockstep inside one compiled program.

``K`` chains sample ``K`` targets ``p_k(theta) ~ exp(-u_k(theta))`` that differ by a cheap term
(an umbrella bias). Every ``swap_every`` steps the pairs ``(i, i + 1)`` of one parity (even pairs
at even attempts, odd pairs at odd ones: the deterministic even-odd scheme, whose replicas travel
the ladder in ``O(K)`` attempts, not the ``O(K^2)`` of random pairs) exchange positions with
probability ``min(1, exp(-delta_i))``,

    delta_i = u_i(theta_{i+1}) + u_{i+1}(theta_i) - u_i(theta_i) - u_{i+1}(theta_{i+1}),

the Metropolis acceptance of the swap under the product ``prod_k p_k``, which therefore leaves
each window's target exactly as it was. Only the terms in which the targets differ enter
``delta`` (for umbrella windows, the biases: :func:`jaxattn.core.umbrella.exchange_delta`).

The ladder records, per pair, the swaps attempted and accepted, and per window the replica (by
the window it started in) that occupies it, so that each replica's walk through the windows can
be followed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray


class Ladder(NamedTuple):
    """``K`` chains in lockstep with replica exchange between neighbours.

    Attributes:
        chains: The kernel states, every leaf with a leading window axis ``K``; they travel
            with their replica, so what a state caches of its window's target is brought up to
            date after a swap (``refresh_fn`` of :func:`run_segment`; SGLD's state caches
            nothing).
        replica: The replica in each window, by the window it started in, shape ``(K,)``.
        accepted: Swaps accepted per neighbouring pair ``(i, i + 1)``, shape ``(K - 1,)``.
        attempted: Swaps attempted per pair, shape ``(K - 1,)``.
    """

    chains: Any
    replica: Int[Array, " K"]
    accepted: Int[Array, " K1"]
    attempted: Int[Array, " K1"]


def ladder(chains: Any) -> Ladder:
    """A ladder of chains with no swap attempted yet, replica ``k`` in window ``k``.

    Args:
        chains: The kernel states, leaves with a leading window axis ``K >= 2``.

    Returns:
        The :class:`Ladder`.
    """
    K = jax.tree_util.tree_leaves(chains)[0].shape[0]
    return Ladder(chains, jnp.arange(K, dtype=jnp.int32), jnp.zeros(K - 1, jnp.int32), jnp.zeros(K - 1, jnp.int32))


def swap(
    key: PRNGKeyArray, state: Ladder, delta: Float[Array, " K1"], parity: ArrayLike, blocked: Bool[Array, " K"]
) -> Ladder:
    """One round of swap attempts between the pairs ``(i, i + 1)`` with ``i % 2 == parity``, each
    accepted with probability ``min(1, exp(-delta_i))`` (a ``NaN`` ``delta`` is rejected).

    Args:
        key: The round's PRNG key.
        state: The ladder.
        delta: Per pair, the change of the summed reduced potentials if the pair swaps.
        parity: 0 for the even pairs, 1 for the odd ones.
        blocked: Windows that take no part (e.g. a diverged chain), shape ``(K,)``.

    Returns:
        The ladder after the round: positions and replica labels of the accepted pairs exchanged,
            the counters advanced.
    """
    K1 = delta.shape[0]
    i = jnp.arange(K1)
    tried = (i % 2 == parity) & ~blocked[:-1] & ~blocked[1:]
    u = jax.random.uniform(key, (K1,), delta.dtype)
    acc = tried & (jnp.log(u) < -delta)  # NaN compares false: rejected
    # the pairs of one parity are disjoint: window k takes from k + 1 or from k - 1, or keeps its own
    up = jnp.concatenate([acc, jnp.zeros(1, bool)])
    down = jnp.concatenate([jnp.zeros(1, bool), acc])
    k = jnp.arange(K1 + 1)
    src = jnp.where(up, k + 1, jnp.where(down, k - 1, k))
    chains = jax.tree_util.tree_map(lambda x: x[src], state.chains)
    return Ladder(
        chains,
        state.replica[src],
        state.accepted + acc.astype(jnp.int32),
        state.attempted + tried.astype(jnp.int32),
    )


def run_segment(
    step_fn: Callable[[Any], Any],
    observe_fn: Callable[[Any], Any],
    delta_fn: Callable[[Any], tuple[Float[Array, " K1"], Bool[Array, " K"]]],
    swap_key: PRNGKeyArray,
    state: Ladder,
    t0: ArrayLike,
    n_advance: ArrayLike,
    n_draws: ArrayLike,
    thin: int,
    first: ArrayLike,
    draws: Any,
    swap_every: int | None,
    refresh_fn: Callable[[Any], Any] | None = None,
) -> tuple[Ladder, Any]:
    """One segment of a ladder run in segments (as the engine steps it): ``n_advance`` steps, then
    ``n_draws`` draws every ``thin`` steps, written at ``first + j`` of the buffers; after ladder
    step ``t`` (counted from 1 over the whole run) with ``t % swap_every == 0``, one round of swaps
    (:func:`swap`) of parity ``(t // swap_every) % 2``, keyed ``fold_in(swap_key, t)``. Cut
    anywhere, the segments give the same run.

    Args:
        step_fn: One step of every window, ``chains -> chains`` (leading axis ``K``).
        observe_fn: ``chains -> obs``, leaves ``(K, ...)``, recorded at every draw (with the
            replica in each window under ``"replica"``).
        delta_fn: ``chains -> (delta, blocked)`` for :func:`swap`.
        swap_key: The PRNG key of the swaps.
        state: The ladder.
        t0: Ladder steps before this segment (the same for every ladder of a program, so that
            the swap's condition is not batched).
        n_advance: Steps before the segment's first draw.
        n_draws: Draws the segment takes.
        thin: Steps between draws.
        first: Index of the segment's first draw in the buffers.
        draws: The buffers: leaves ``(K, n_draws, ...)``, including ``"replica"``.
        swap_every: Steps between swap rounds; ``None``: no exchange (independent windows).
        refresh_fn: ``chains -> chains`` after a swap round, for a kernel whose state caches
            something of its window's target (MALA's density: ``MALA.refresh``).

    Returns:
        ``(state, draws)`` after the segment.
    """

    def one(t, st: Ladder) -> Ladder:
        st = st._replace(chains=step_fn(st.chains))
        if swap_every is None:
            return st
        t = t + 1

        def attempt(s: Ladder) -> Ladder:
            delta, blocked = delta_fn(s.chains)
            s = swap(jax.random.fold_in(swap_key, t), s, delta, (t // swap_every) % 2, blocked)
            return s if refresh_fn is None else s._replace(chains=refresh_fn(s.chains))

        return jax.lax.cond(t % swap_every == 0, attempt, lambda s: s, st)

    def advance(t, st, n):
        return jax.lax.fori_loop(0, n, lambda i, s: one(t + i, s), st)

    state = advance(t0, state, n_advance)

    def draw(j, carry):
        st, buf = carry
        st = advance(t0 + n_advance + j * thin, st, thin)
        obs = dict(observe_fn(st.chains), replica=st.replica)
        return st, jax.tree_util.tree_map(lambda b, x: b.at[:, first + j].set(x), buf, obs)

    return jax.lax.fori_loop(0, n_draws, draw, (state, draws))


def passages(replica: Int[np.ndarray, "K T"]) -> int:
    """The replicas' end-to-end walks through a ladder: how many times a replica reaches one end
    window having last been at the other (a round trip is two), summed over replicas.

    Args:
        replica: the replica in each window at each recorded draw, shape ``(K, T)``
            (:class:`Ladder`'s ``replica``, recorded by :func:`run_segment`).

    Returns:
        The number of passages.
    """
    replica = np.asarray(replica)
    K = replica.shape[0]
    count = 0
    for r in range(K):
        where = np.argmax(replica == r, axis=0)  # the window of replica r at each draw
        ends = where[(where == 0) | (where == K - 1)]
        if ends.size:
            count += int(np.count_nonzero(ends[1:] != ends[:-1]))
    return count
