"""Divergence as a value inside jit: a run whose step produced a non-finite number is frozen at
its last finite state and flagged, and the rest of a vmapped grid goes on.

Every runner (online SGD, full-batch optax, SGLD) takes its step, asks :func:`all_finite` of
what it computed, and keeps the new state through :func:`freeze`; the flag is sticky.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, PyTree


def all_finite(*trees: PyTree) -> Bool[Array, ""]:
    """Whether every leaf of every tree is finite (a scalar boolean).

    Args:
        *trees: Pytrees of arrays.

    Returns:
        A boolean scalar ``()``: true if every element of every leaf is finite (and when there
            are no leaves).
    """
    leaves = [jnp.all(jnp.isfinite(x)) for t in trees for x in jax.tree_util.tree_leaves(t)]
    return jnp.all(jnp.stack(leaves)) if leaves else jnp.asarray(True)


def freeze(ok: Bool[Array, ""], new: PyTree, old: PyTree) -> PyTree:
    """``new`` where ``ok``, else ``old``, leaf by leaf (the state a diverged run keeps).

    Args:
        ok: Boolean scalar ``()``.
        new: A pytree of arrays.
        old: A pytree of the same structure and shapes.

    Returns:
        The pytree ``jnp.where(ok, new, old)`` leaf by leaf.
    """
    return jax.tree_util.tree_map(lambda a, b: jnp.where(ok, a, b), new, old)


def guard(diverged: Bool[Array, ""], ok: Bool[Array, ""], new: PyTree, old: PyTree) -> tuple[PyTree, Bool[Array, ""]]:
    """One guarded step: keep ``new`` only if the run has not diverged and this step is ``ok``;
    returns the state to keep and the updated (sticky) divergence flag.

    Args:
        diverged: Boolean scalar ``()``: whether the run had diverged before this step.
        ok: Boolean scalar ``()``: whether this step's results are finite.
        new: The state after this step (a pytree).
        old: The state before it (same structure).

    Returns:
        ``(state, diverged)``: ``new`` if ``ok`` and not ``diverged``, else ``old``; and the flag
            ``diverged | ~ok``, a boolean scalar ``()``.
    """
    keep = ok & ~diverged
    return freeze(keep, new, old), diverged | ~ok
