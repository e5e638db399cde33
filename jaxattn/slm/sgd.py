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

from jaxattn.core import precision
from jaxattn.core.attention import attention_weights, position_weights, prefix_mask
from jaxattn.core.divergence import guard
from jaxattn.slm import network
from jaxattn.slm import task as slm
from jaxattn.slm.priors import Prior


class SGDConfig(NamedTuple):
    """Static configuration (shapes and choices that fix the compiled program).

    Attributes:
        D: embedding dimension.
        H_max: number of heads the parameters are padded to.
        L_max: sequence length the tokens are padded to.
        arch: activation and head aggregation.
        batch_size: samples per SGD step (the gradient is their mean).
        sigma0: initial keys ``k_h ~ N(0, sigma0^2 I_D)``.
        bias_lr: the bias step is ``bias_lr * eta / D``.
    """

    D: int
    H_max: int
    L_max: int
    arch: network.Arch = network.Arch()
    batch_size: int = 1
    sigma0: float = 1.0
    bias_lr: float = 1.0


class RunParams(NamedTuple):
    """Per-run values: a grid is these with a leading batch axis.

    Attributes:
        init_key: PRNG key of the initial keys.
        data_key: PRNG key of the data stream (step ``n`` draws from ``fold_in(data_key, n)``).
        eta: learning rate, a scalar.
        signal: scale of the latent, ``theta -> signal * theta``, a scalar.
        H: number of real heads (``<= H_max``), an integer scalar.
        L: sequence length (``<= L_max``), an integer scalar.
    """

    init_key: PRNGKeyArray
    data_key: PRNGKeyArray
    eta: Float[Array, ""]
    signal: Float[Array, ""]
    H: Int[Array, ""]
    L: Int[Array, ""]


class SGDState(NamedTuple):
    """The state of one run: its parameters (keys ``(H, D)``, biases ``(H,)``), the number of SGD
    steps taken (scalar) and whether it diverged (a diverged run is frozen at its last finite state).

    Attributes:
        params: the network: ``keys`` ``(H_max, D)``, ``bias`` ``(H_max,)``.
        step: number of SGD steps taken, an integer scalar.
        diverged: whether the run diverged, a boolean scalar.
    """

    params: network.MultiHead
    step: Int[Array, ""]
    diverged: Bool[Array, ""]


class OnlineSGD(NamedTuple):
    """An ``(init, step)`` pair in the manner of optax / blackjax.

    Attributes:
        init: maps a run's :class:`RunParams` to its initial :class:`SGDState`.
        step: one SGD step ``(state, run params) -> state``, drawing its own mini-batch.
    """

    init: Callable[[RunParams], SGDState]
    step: Callable[[SGDState, RunParams], SGDState]


def init(cfg: SGDConfig, rp: RunParams) -> SGDState:
    """The initial state of one run (Spec A, section 2): ``H_max`` keys ``k_h ~ N(0, sigma0^2 I_D)``
    drawn from ``rp.init_key``, ``b_h = 0``, no steps taken, not diverged.

    Args:
        cfg: the static configuration.
        rp: the run's values (only ``init_key`` is used).

    Returns:
        An :class:`SGDState`: ``params`` with ``keys`` ``(H_max, D)`` and ``bias`` ``(H_max,)``,
            ``step = 0``, ``diverged = False``.
    """
    params = network.init(rp.init_key, cfg.H_max, cfg.D, cfg.sigma0)
    return SGDState(params, jnp.zeros((), jnp.int32), jnp.zeros((), bool))


def draw_batch(cfg: SGDConfig, prior: Prior, data_key: PRNGKeyArray, step: Int[Array, ""]) -> slm.Draw:
    """The random numbers of one step: a :class:`~jaxattn.slm.task.Draw` with a leading batch
    axis, drawn from ``fold_in(data_key, step)``.

    Args:
        cfg: the static configuration (``L_max``, ``D``, ``batch_size``).
        prior: the latent prior ``P_theta``.
        data_key: PRNG key of the run's data stream.
        step: the step counter, an integer scalar.

    Returns:
        A :class:`~jaxattn.slm.task.Draw` with ``noise`` ``(B, L_max, D)``, ``u`` ``(B,)`` and
            ``theta`` ``(B, F)``, ``B = batch_size``.
    """
    k = jax.random.fold_in(data_key, step)
    return jax.vmap(lambda i: slm.draw(jax.random.fold_in(k, i), prior, cfg.L_max, cfg.D))(jnp.arange(cfg.batch_size))


@precision.matmul("highest", unless_set=True)
def loss(
    params: network.MultiHead,
    sample: slm.Sample,
    arch: network.Arch,
    head_mask: Bool[Array, " H"] | None,
    pos_mask: Bool[Array, " L"] | None,
) -> Float[Array, ""]:
    """The SGD loss ``|y - y_hat|^2 / (2D)`` of one sample, ``y = x_eps`` (the reference that
    :func:`loss_and_score_grads` computes faster).

    Args:
        params: the network (:class:`~jaxattn.slm.network.MultiHead`).
        sample: one sample, ``X`` of shape ``(L, D)``.
        arch: activation and head aggregation.
        head_mask: real heads, shape ``(H,)`` (``None``: all).
        pos_mask: real positions, shape ``(L,)`` (``None``: all).

    Returns:
        The loss, a scalar.
    """
    y = sample.X[sample.eps]
    return 0.5 * network.error(params, sample.X, y, arch, head_mask, pos_mask)


@precision.matmul("highest", unless_set=True)
def loss_and_score_grads(
    params: network.MultiHead,
    X: Float[Array, "L D"],
    eps: Int[Array, ""],
    arch: network.Arch,
    head_mask: Bool[Array, " H"] | None,
    pos_mask: Bool[Array, " L"] | None,
) -> tuple[Float[Array, ""], Float[Array, "H L"], Float[Array, " H"]]:
    """Loss and its exact gradients with respect to the scores ``chi`` and the biases, from the
    Gram matrix ``G = X X^T / D``.

    With ``r = x_eps - sum_l w_l x_l``: ``|r|^2 / D = G[eps,eps] - 2 w.G[:,eps] + w.G.w`` and
    ``d loss / d w_l = (G w)_l - G[l, eps]``. Autodiff of :func:`loss` computes the same numbers
    but passes over the ``L x D`` tokens several more times; here the tokens are read by two
    products (``chi`` and ``G``, then the key gradient ``g_chi X``), which is what lets online SGD
    run near the rate of merely drawing the tokens.

    Args:
        params: the network: ``keys`` ``(H, D)``, ``bias`` ``(H,)``.
        X: the tokens of one sample, shape ``(L, D)``.
        eps: the location of the relevant token, an integer scalar.
        arch: activation and head aggregation.
        head_mask: real heads, shape ``(H,)`` (``None``: all).
        pos_mask: real positions, shape ``(L,)`` (``None``: all).

    Returns:
        ``(value, g_chi, g_b)``: the loss ``|r|^2 / (2D)`` (a scalar), its gradient with
            respect to the scores ``(H, L)`` and with respect to the biases ``(H,)``.
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


@precision.matmul("highest", unless_set=True)
def update(
    cfg: SGDConfig, directions: Float[Array, "F D"], state: SGDState, rp: RunParams, batch: slm.Draw
) -> SGDState:
    """One SGD step of one run on the given random numbers (mean gradient over the batch): keys
    move by ``-eta`` times the gradient, biases by ``-bias_lr * eta / D`` times it (Spec A,
    section 2).

    Args:
        cfg: the static configuration.
        directions: the latent directions ``s_f``, shape ``(F, D)``.
        state: the run's state before the step.
        rp: the run's values (``eta``, ``signal``, ``H``, ``L``).
        batch: the step's random numbers (:func:`draw_batch`), a leading batch axis ``(B,)``.

    Returns:
        The :class:`SGDState` after the step (frozen at the old parameters, ``diverged`` set,
            if the loss or a gradient is non-finite).
    """
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
    params = network.MultiHead(
        state.params.keys - rp.eta * g_keys,
        state.params.bias - (cfg.bias_lr * rp.eta / (D * B)) * jnp.sum(g_b, axis=0),
    )
    params, diverged = guard(state.diverged, ok, params, state.params)
    return SGDState(params, state.step + 1, diverged)


def online_sgd(cfg: SGDConfig, directions: Float[Array, "F D"], prior: Prior) -> OnlineSGD:
    """The ``(init, step)`` pair of one run; ``step`` draws its own mini-batch.

    Args:
        cfg: the static configuration.
        directions: the latent directions ``s_f``, shape ``(F, D)``.
        prior: the latent prior ``P_theta``.

    Returns:
        An :class:`OnlineSGD` with ``init(rp)`` and ``step(state, rp)``.
    """

    def step(state: SGDState, rp: RunParams) -> SGDState:
        return update(cfg, directions, state, rp, draw_batch(cfg, prior, rp.data_key, state.step))

    return OnlineSGD(partial(init, cfg), step)
