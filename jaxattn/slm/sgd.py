"""Online SGD on the single-location model as an ``(init, step)`` pair over explicit state.

Every step draws a fresh mini-batch, takes the mean gradient of the per-sample loss
``|y - y_hat|^2 / (2D)`` and moves the keys by ``eta`` and the biases by ``bias_lr * eta / D``
(Spec A, section 2); time is ``t = samples / D``.

The random numbers of step ``n`` come from ``fold_in(data_key, n)``: the data stream is a pure
function of the key and the step counter, so it does not depend on how a run is cut into segments
between recordings, on the grid around it, or on the padding of ``H`` and ``L``.

Grids of runs are the engine's (:mod:`jaxattn.slm.experiments`): the points of one data stream
(common random numbers) draw each batch once (:func:`draw_batch`) and apply it to every member
(:func:`update`). A run whose loss or gradient becomes non-finite is frozen at its last finite
parameters and flagged ``diverged`` (:mod:`jaxattn.core.divergence`); the other points go on.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

from jaxattn.core.attention import attention_weights, position_weights, prefix_mask
from jaxattn.core.divergence import guard
from jaxattn.slm import network as mh
from jaxattn.slm import task as slm
from jaxattn.slm.priors import Prior


class SGDConfig(NamedTuple):
    """Static configuration (shapes and choices that fix the compiled program)."""

    D: int
    H_max: int
    L_max: int
    arch: mh.Arch = mh.Arch()
    batch_size: int = 1
    sigma0: float = 1.0
    bias_lr: float = 1.0


class RunParams(NamedTuple):
    """Per-run values: a grid is these with a leading batch axis."""

    init_key: PRNGKeyArray
    data_key: PRNGKeyArray
    eta: Float[Array, ""]
    signal: Float[Array, ""]
    H: Int[Array, ""]
    L: Int[Array, ""]


class SGDState(NamedTuple):
    """The state of one run: its parameters (keys ``(H, D)``, biases ``(H,)``), the number of SGD
    steps taken (scalar) and whether it diverged (a diverged run is frozen at its last finite state)."""

    params: mh.MultiHead
    step: Int[Array, ""]
    diverged: Bool[Array, ""]


class OnlineSGD(NamedTuple):
    """An ``(init, step)`` pair in the manner of optax / blackjax."""

    init: Callable[[RunParams], SGDState]
    step: Callable[[SGDState, RunParams], SGDState]


def init(cfg: SGDConfig, rp: RunParams) -> SGDState:
    params = mh.init(rp.init_key, cfg.H_max, cfg.D, cfg.sigma0)
    return SGDState(params, jnp.zeros((), jnp.int32), jnp.zeros((), bool))


def draw_batch(cfg: SGDConfig, prior: Prior, data_key: PRNGKeyArray, step: Int[Array, ""]) -> slm.Draw:
    """The random numbers of one step: a :class:`~jaxattn.tasks.single_location.Draw` with a
    leading batch axis."""
    k = jax.random.fold_in(data_key, step)
    return jax.vmap(lambda i: slm.draw(jax.random.fold_in(k, i), prior, cfg.L_max, cfg.D))(jnp.arange(cfg.batch_size))


def loss(params, sample: slm.Sample, arch, head_mask, pos_mask) -> Float[Array, ""]:
    """The SGD loss ``|y - y_hat|^2 / (2D)`` of one sample, ``y = x_eps`` (the reference that
    :func:`loss_and_score_grads` computes faster)."""
    y = sample.X[sample.eps]
    return 0.5 * mh.error(params, sample.X, y, arch, head_mask, pos_mask)


def loss_and_score_grads(params: mh.MultiHead, X, eps, arch, head_mask, pos_mask):
    """Loss and its exact gradients with respect to the scores ``chi`` and the biases, from the
    Gram matrix ``G = X X^T / D``.

    With ``r = x_eps - sum_l w_l x_l``: ``|r|^2 / D = G[eps,eps] - 2 w.G[:,eps] + w.G.w`` and
    ``d loss / d w_l = (G w)_l - G[l, eps]``. Autodiff of :func:`loss` computes the same numbers
    but passes over the ``L x D`` tokens several more times; here the tokens are read by two
    products (``chi`` and ``G``, then the key gradient ``g_chi X``), which is what lets online SGD
    run near the rate of merely drawing the tokens.
    """
    D = X.shape[-1]
    chi = params.keys @ X.T / jnp.sqrt(jnp.asarray(D, X.dtype))

    def w_of(c, b):
        return position_weights(
            attention_weights(
                c, b, arch.activation, head_mask=head_mask, pos_mask=pos_mask, aggregation=arch.aggregation
            )
        )

    w, vjp = jax.vjp(w_of, chi, params.bias)
    r = X[eps] - w @ X
    value = 0.5 * (r @ r) / D
    g_chi, g_b = vjp(-(X @ r) / D)
    return value, g_chi, g_b


def update(
    cfg: SGDConfig, directions: Float[Array, "F D"], state: SGDState, rp: RunParams, batch: slm.Draw
) -> SGDState:
    """One SGD step of one run on the given random numbers (mean gradient over the batch)."""
    hm = prefix_mask(rp.H, cfg.H_max)
    pm = prefix_mask(rp.L, cfg.L_max)
    D = cfg.D
    samples = jax.vmap(lambda d: slm.assemble(d, directions, rp.L, rp.signal))(batch)
    value, g_chi, g_b = jax.vmap(lambda X, e: loss_and_score_grads(state.params, X, e, cfg.arch, hm, pm))(
        samples.X, samples.eps
    )
    B = cfg.batch_size
    g_keys = jnp.einsum("bhl,bld->hd", g_chi, samples.X) / (B * jnp.sqrt(jnp.asarray(D, samples.X.dtype)))
    # Finite scores-gradients and loss imply a finite key gradient (the tokens are finite), so
    # the divergence check costs O(H L), not a pass over the keys.
    ok = jnp.all(jnp.isfinite(value)) & jnp.all(jnp.isfinite(g_chi)) & jnp.all(jnp.isfinite(g_b))
    params = mh.MultiHead(
        state.params.keys - rp.eta * g_keys,
        state.params.bias - (cfg.bias_lr * rp.eta / (D * B)) * jnp.sum(g_b, axis=0),
    )
    params, diverged = guard(state.diverged, ok, params, state.params)
    return SGDState(params, state.step + 1, diverged)


def online_sgd(cfg: SGDConfig, directions: Float[Array, "F D"], prior: Prior) -> OnlineSGD:
    """The ``(init, step)`` pair of one run; ``step`` draws its own mini-batch."""

    def step(state: SGDState, rp: RunParams) -> SGDState:
        return update(cfg, directions, state, rp, draw_batch(cfg, prior, rp.data_key, state.step))

    return OnlineSGD(partial(init, cfg), step)
