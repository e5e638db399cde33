"""Full-batch optax training as an ``(init, step)`` pair over explicit state.

Generic in the model: ``loss_fn(params, data) -> scalar``. The learning rate is a per-run value
held in the optimiser state (``optax.inject_hyperparams``), so a grid of learning rates, seeds and
data sets is one ``vmap`` of the same step. It decays by ``optax.cosine_decay_schedule`` from
``lr`` to ``lr * final_lr_fraction`` over ``n_steps`` (so that Adam settles into its minimum and
the final gradient norm measures convergence instead of Adam's step-size floor).

A run whose loss or gradient becomes non-finite is frozen at its last finite parameters and
flagged ``diverged`` (:mod:`jaxattn.core.divergence`); the rest of a vmapped grid goes on.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple, cast

import jax
import jax.numpy as jnp
import optax
from jax.typing import ArrayLike
from jaxtyping import Array, Bool, Float, Int

from jaxattn.core.divergence import guard


class FullBatchState(NamedTuple):
    """The state of one full-batch run, as returned by ``init`` and ``step`` of :class:`FullBatch`.

    Attributes:
        params: The model's parameters (a pytree, as given to ``init``).
        opt_state: The optax state (``optax.InjectStatefulHyperparamsState``), holding the run's
            own learning rate in ``hyperparams["learning_rate"]``.
        step: Number of steps taken, int32 scalar ``()``.
        loss: ``loss_fn`` at the parameters before the last step, float scalar ``()`` (``inf``
            before the first step).
        grad_norm: Global norm of the gradient at that point, float scalar ``()`` (``inf`` before
            the first step).
        diverged: Boolean scalar ``()``: a step gave a non-finite loss or gradient (sticky; the
            run is then frozen).
    """

    params: Any
    opt_state: Any
    step: Int[Array, ""]
    loss: Float[Array, ""]
    grad_norm: Float[Array, ""]
    diverged: Bool[Array, ""]


class FullBatch(NamedTuple):
    """An ``(init, step)`` pair in the manner of optax / blackjax.

    Attributes:
        init: ``init(params, lr) -> FullBatchState``, ``lr`` the run's learning rate (a scalar).
        step: ``step(state, data) -> FullBatchState``: one optimiser step on ``loss_fn(params,
            data)``.
    """

    init: Callable[[Any, Float[Array, ""]], FullBatchState]
    step: Callable[[FullBatchState, Any], FullBatchState]


def full_batch(
    loss_fn: Callable[[Any, Any], Float[Array, ""]],
    optimizer: Callable[..., optax.GradientTransformation] = optax.adam,
    *,
    n_steps: int = 1000,
    final_lr_fraction: float = 0.01,
) -> FullBatch:
    """The ``(init, step)`` pair of one full-batch run of ``optimizer`` (an optax constructor
    taking ``learning_rate``) on ``loss_fn``.

    Args:
        loss_fn: ``loss_fn(params, data)``, a float scalar ``()``.
        optimizer: An optax constructor taking ``learning_rate`` (default ``optax.adam``).
        n_steps: Length of the cosine decay of the learning rate (at least 1 is used).
        final_lr_fraction: The rate from step ``n_steps`` on, as a fraction of the run's ``lr``.

    Returns:
        A :class:`FullBatch` ``(init, step)`` pair over :class:`FullBatchState`.
    """
    opt = optax.inject_hyperparams(optimizer)(learning_rate=1.0)
    # the factor multiplying each run's own rate: 1 at step 0, final_lr_fraction from n_steps on
    factor = optax.cosine_decay_schedule(1.0, max(n_steps, 1), alpha=final_lr_fraction)

    def init(params, lr) -> FullBatchState:
        opt_state = cast(optax.InjectStatefulHyperparamsState, opt.init(params))
        opt_state.hyperparams["learning_rate"] = jnp.asarray(lr, jnp.float32)
        z = jnp.zeros((), jnp.float32)
        return FullBatchState(
            params, opt_state, jnp.zeros((), jnp.int32), z + jnp.inf, z + jnp.inf, jnp.zeros((), bool)
        )

    def step(state: FullBatchState, data) -> FullBatchState:
        value, grads = jax.value_and_grad(loss_fn)(state.params, data)
        gnorm = optax.tree.norm(grads)
        # the base rate lives in the state; the schedule factor is applied to the update, so
        # the stored hyper-parameter stays the run's own value
        updates, opt_state = opt.update(grads, state.opt_state, state.params)
        f = factor(state.step)
        params = jax.tree_util.tree_map(lambda p, u: p + f * u, state.params, updates)
        (params, opt_state, value, gnorm), diverged = guard(
            state.diverged,
            jnp.isfinite(value) & jnp.isfinite(gnorm),
            (params, opt_state, value, gnorm),
            (state.params, state.opt_state, state.loss, state.grad_norm),
        )
        return FullBatchState(params, opt_state, state.step + 1, value, gnorm, diverged)

    return FullBatch(init, step)


@partial(jax.jit, static_argnums=(0,))
def run(fb: FullBatch, state: FullBatchState, data: Any, n_steps: ArrayLike) -> FullBatchState:
    """``n_steps`` steps of one run (``n_steps`` traced: one compile for every length).

    Args:
        fb: The kernel, from :func:`full_batch` (static: hashed for the compile cache).
        state: The run's state.
        data: The data passed to every ``step``.
        n_steps: Number of steps (an int or a traced integer scalar).

    Returns:
        The :class:`FullBatchState` after ``n_steps`` steps.
    """
    return jax.lax.fori_loop(0, n_steps, lambda _, s: fb.step(s, data), state)
