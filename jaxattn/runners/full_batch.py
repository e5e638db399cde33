"""Full-batch optax training as an ``(init, step)`` pair over explicit state.

Generic in the model: ``loss_fn(params, data) -> scalar``. The learning rate is a per-run value
held in the optimiser state (``optax.inject_hyperparams``), so a grid of learning rates, seeds and
data sets is one ``vmap`` of the same step. It decays by a cosine factor from ``lr`` to
``lr * final_lr_fraction`` over ``n_steps`` (so that Adam settles into its minimum and the final
gradient norm measures convergence instead of Adam's step-size floor).

A run whose loss or gradient becomes non-finite is frozen at its last finite parameters and
flagged ``diverged``; the rest of a vmapped grid goes on.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Bool, Float, Int


class FullBatchState(NamedTuple):
    params: Any
    opt_state: Any
    step: Int[Array, ""]
    loss: Float[Array, ""]
    grad_norm: Float[Array, ""]
    diverged: Bool[Array, ""]


class FullBatch(NamedTuple):
    """An ``(init, step)`` pair in the manner of optax / blackjax."""

    init: Callable[[Any, Float[Array, ""]], FullBatchState]
    step: Callable[[FullBatchState, Any], FullBatchState]


def cosine_factor(step, n_steps: int, final_fraction: float):
    """``final + (1 - final) (1 + cos(pi t / n)) / 2``, held at ``final`` after ``n_steps``."""
    t = jnp.minimum(step, n_steps) / max(n_steps, 1)
    return final_fraction + (1.0 - final_fraction) * 0.5 * (1.0 + jnp.cos(jnp.pi * t))


def full_batch(
    loss_fn: Callable[[Any, Any], Float[Array, ""]],
    optimizer: Callable[..., optax.GradientTransformation] = optax.adam,
    *,
    n_steps: int = 1000,
    final_lr_fraction: float = 0.01,
) -> FullBatch:
    """The ``(init, step)`` pair of one full-batch run of ``optimizer`` (an optax constructor
    taking ``learning_rate``) on ``loss_fn``."""
    opt = optax.inject_hyperparams(optimizer)(learning_rate=1.0)

    def init(params, lr) -> FullBatchState:
        opt_state = opt.init(params)
        opt_state.hyperparams["learning_rate"] = jnp.asarray(lr, jnp.float32)
        z = jnp.zeros((), jnp.float32)
        return FullBatchState(params, opt_state, jnp.zeros((), jnp.int32), z + jnp.inf, z + jnp.inf,
                              jnp.zeros((), bool))

    def step(state: FullBatchState, data) -> FullBatchState:
        value, grads = jax.value_and_grad(loss_fn)(state.params, data)
        gnorm = optax.tree.norm(grads)
        ok = jnp.isfinite(value) & jnp.isfinite(gnorm) & ~state.diverged
        # the base rate lives in the state; the schedule factor is applied to the update, so
        # the stored hyper-parameter stays the run's own value
        updates, opt_state = opt.update(grads, state.opt_state, state.params)
        f = cosine_factor(state.step, n_steps, final_lr_fraction)
        params = jax.tree_util.tree_map(
            lambda p, u: jnp.where(ok, p + f * u, p), state.params, updates)
        opt_state = jax.tree_util.tree_map(lambda new, old: jnp.where(ok, new, old), opt_state, state.opt_state)
        return FullBatchState(
            params, opt_state, state.step + 1,
            jnp.where(ok, value, state.loss), jnp.where(ok, gnorm, state.grad_norm), state.diverged | ~ok)

    return FullBatch(init, step)


@partial(jax.jit, static_argnums=(0,))
def run(fb: FullBatch, state: FullBatchState, data, n_steps) -> FullBatchState:
    """``n_steps`` steps of one run (``n_steps`` traced: one compile for every length)."""
    return jax.lax.fori_loop(0, n_steps, lambda _, s: fb.step(s, data), state)
