"""The multi-head attention network of the single-location model (Spec A, sections 2-3).

Each head has one key ``k_h`` in ``R^D`` and a scalar bias ``b_h``; scores are
``chi[h, l] = k_h . x_l / sqrt(D)`` and the prediction is ``y_hat = sum_{h,l} sigma[h,l] x_l``
(no value matrix, no output projection). Everything acts on one example; batch with ``vmap``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.typing import DTypeLike
from jaxtyping import Array, Bool, Float, PRNGKeyArray

from jaxattn.core import precision
from jaxattn.core.attention import attention_weights, position_weights
from jaxattn.slm.priors import Discrete


class MultiHead(NamedTuple):
    """Parameters of the multi-head network (Spec A, section 2): keys ``(H, D)`` and biases ``(H,)``.

    Attributes:
        keys: one key ``k_h`` per head, shape ``(H, D)``.
        bias: the scalar biases ``b_h``, shape ``(H,)``.
    """

    keys: Float[Array, "H D"]
    bias: Float[Array, " H"]


class Arch(NamedTuple):
    """The static part of a model: activation name, head aggregation (``None``: its default).

    Attributes:
        activation: ``"softmax"``, ``"softmax1"``, ``"bayes_softmax"``, ``"linear"`` or a
            registered name (:func:`jaxattn.core.attention.attention_weights`).
        aggregation: ``"mean"`` or ``"sum"`` over heads; ``None`` for the activation's default.
    """

    activation: str = "bayes_softmax"
    aggregation: str | None = None


def init(key: PRNGKeyArray, H: int, D: int, sigma0: float = 1.0, dtype: DTypeLike = jnp.float32) -> MultiHead:
    """``k_h ~ N(0, sigma0^2 I_D)``, ``b_h = 0`` (Spec A, section 2). Head ``h`` uses its own key
    ``fold_in(key, h)``, so padding ``H`` to a larger maximum leaves the real heads unchanged.

    Args:
        key: PRNG key of the initial keys.
        H: number of heads.
        D: embedding dimension.
        sigma0: standard deviation of the initial keys' entries.
        dtype: floating dtype of the parameters.

    Returns:
        A :class:`MultiHead` with ``keys`` ``(H, D)`` and zero ``bias`` ``(H,)``.
    """
    keys = jax.vmap(lambda h: jax.random.normal(jax.random.fold_in(key, h), (D,), dtype))(jnp.arange(H))
    return MultiHead(sigma0 * keys, jnp.zeros(H, dtype))


@precision.matmul("highest", unless_set=True)
def scores(params: MultiHead, X: Float[Array, "L D"]) -> Float[Array, "H L"]:
    """``chi[h, l] = k_h . x_l / sqrt(D)`` (Spec A, section 2).

    Args:
        params: the network, ``keys`` of shape ``(H, D)``.
        X: the tokens of one sample, shape ``(L, D)``.

    Returns:
        The scores ``chi``, shape ``(H, L)``.
    """
    D = X.shape[-1]
    return params.keys @ X.T / jnp.sqrt(jnp.asarray(D, X.dtype))


def weights(
    params: MultiHead,
    X: Float[Array, "L D"],
    arch: Arch,
    head_mask: Bool[Array, " H"] | None = None,
    pos_mask: Bool[Array, " L"] | None = None,
) -> Float[Array, " L"]:
    """Prediction weights ``w[l] = sum_h sigma[h, l]`` (Spec A, section 2).

    Args:
        params: the network, ``keys`` ``(H, D)`` and ``bias`` ``(H,)``.
        X: the tokens of one sample, shape ``(L, D)``.
        arch: activation and head aggregation.
        head_mask: real heads, shape ``(H,)`` (default: all).
        pos_mask: real positions, shape ``(L,)`` (default: all).

    Returns:
        ``w``, shape ``(L,)``; zero on masked positions.
    """
    sigma = attention_weights(
        scores(params, X),
        params.bias,
        arch.activation,
        head_mask=head_mask,
        pos_mask=pos_mask,
        aggregation=arch.aggregation,
    )
    return position_weights(sigma)


@precision.matmul("highest", unless_set=True)
def predict(
    params: MultiHead,
    X: Float[Array, "L D"],
    arch: Arch,
    head_mask: Bool[Array, " H"] | None = None,
    pos_mask: Bool[Array, " L"] | None = None,
) -> Float[Array, " D"]:
    """``y_hat = sum_l w[l] x_l`` (Spec A, section 2).

    Args:
        params: the network (:class:`MultiHead`), ``keys`` ``(H, D)``, ``bias`` ``(H,)``.
        X: the tokens of one sample, shape ``(L, D)``.
        arch: activation and head aggregation (:class:`Arch`).
        head_mask: real heads, shape ``(H,)`` (default: all).
        pos_mask: real positions, shape ``(L,)`` (default: all).

    Returns:
        The prediction ``y_hat``, shape ``(D,)``.
    """
    return weights(params, X, arch, head_mask, pos_mask) @ X


@precision.matmul("highest", unless_set=True)
def error(
    params: MultiHead,
    X: Float[Array, "L D"],
    y: Float[Array, " D"],
    arch: Arch,
    head_mask: Bool[Array, " H"] | None = None,
    pos_mask: Bool[Array, " L"] | None = None,
) -> Float[Array, ""]:
    """The per-sample test error ``|y - y_hat|^2 / D`` (Spec A, section 1); SGD minimises half of it.

    Args:
        params: the network (:class:`MultiHead`), ``keys`` ``(H, D)``, ``bias`` ``(H,)``.
        X: the tokens of one sample, shape ``(L, D)``.
        y: the target, shape ``(D,)`` (``X[eps]``).
        arch: activation and head aggregation (:class:`Arch`).
        head_mask: real heads, shape ``(H,)`` (default: all).
        pos_mask: real positions, shape ``(L,)`` (default: all).

    Returns:
        The error, a scalar.
    """
    r = y - predict(params, X, arch, head_mask, pos_mask)
    return jnp.sum(r * r) / X.shape[-1]


@precision.matmul("highest", unless_set=True)
def order_parameters(params: MultiHead, directions: Float[Array, "F D"]) -> tuple[Array, Array]:
    """``M[h, f] = k_h . s_f / D`` and ``Q[h, h'] = k_h . k_h' / D`` (Spec A, section 3).

    Args:
        params: the network, ``keys`` of shape ``(H, D)``.
        directions: the latent directions ``s_f``, shape ``(F, D)``.

    Returns:
        ``(M, Q)``: overlaps ``M`` of shape ``(H, F)`` and ``Q`` of shape ``(H, H)``.
    """
    D = params.keys.shape[-1]
    return params.keys @ directions.T / D, params.keys @ params.keys.T / D


@precision.matmul("highest", unless_set=True)
def keys_from_order_parameters(
    key: PRNGKeyArray, M: Float[Array, "H F"], Q: Float[Array, "H H"], directions: Float[Array, "F D"]
) -> Float[Array, "H D"]:
    """Keys with the given overlaps: ``k_h = sum_f M[h,f] s_f + sqrt(D) sum_j C[h,j] v_j`` with
    ``v_j`` orthonormal and orthogonal to every ``s_f``, ``C C^T = Q - M M^T`` (which must be
    positive semi-definite). ``M`` and ``Q`` are then exact at this ``D`` (Spec A, section 3).

    Args:
        key: PRNG key of the directions ``v_j`` outside the signal.
        M: overlaps ``M[h, f] = k_h . s_f / D``, shape ``(H, F)``.
        Q: overlaps ``Q[h, h'] = k_h . k_h' / D``, shape ``(H, H)``.
        directions: the latent directions ``s_f``, shape ``(F, D)``.

    Returns:
        The keys ``k_h`` as rows, shape ``(H, D)``.

    Raises:
        ValueError: if ``D < F + H``.
    """
    F, D = directions.shape
    H = M.shape[0]
    if D < F + H:
        raise ValueError(f"D must be >= F + H = {F + H} to place the keys, got D={D}")
    resid = Q - M @ M.T
    evals, evecs = jnp.linalg.eigh(0.5 * (resid + resid.T))
    C = evecs * jnp.sqrt(jnp.clip(evals, 0.0))
    # Orthonormal v_j orthogonal to the s_f: QR of [s_1..s_F, random] keeps the first F columns
    # spanning the directions, the next H columns are orthogonal to them.
    rand = jax.random.normal(key, (D, H), directions.dtype)
    q, _ = jnp.linalg.qr(jnp.concatenate([directions.T, rand], axis=1))
    v = q[:, F : F + H].T
    return M @ directions + jnp.sqrt(jnp.asarray(D, directions.dtype)) * C @ v


@precision.matmul("highest", unless_set=True)
def oracle_bayes_softmax(prior: Discrete, directions: Float[Array, "F D"]) -> MultiHead:
    """The Bayes-optimal Bayes-softmax network of a discrete prior (Spec A, section 4): one head
    per support point, ``k_h = sum_f theta^(h)_f s_f``, ``b_h = log pi_h - |theta^(h)|^2 / 2``.
    Its prediction equals the Bayes estimator ``sum_l p_l x_l`` exactly.

    Args:
        prior: a discrete prior with support ``(K, F)`` and weights ``(K,)``.
        directions: the latent directions ``s_f``, shape ``(F, D)``.

    Returns:
        A :class:`MultiHead` with ``H = K`` heads: ``keys`` ``(K, D)``, ``bias`` ``(K,)``.
    """
    support = prior.support.astype(directions.dtype)
    bias = jnp.log(prior.weights) - 0.5 * jnp.sum(support**2, axis=1)
    return MultiHead(support @ directions, bias.astype(directions.dtype))


@precision.matmul("highest", unless_set=True)
def oracle_order_parameters(prior: Discrete) -> tuple[Array, Array, Array]:
    """``(M, Q, b)`` of :func:`oracle_bayes_softmax`: ``M = support``, ``Q = M M^T``,
    ``b = log pi - |theta^(h)|^2 / 2`` (Spec A, section 4).

    Args:
        prior: a discrete prior with support ``(K, F)`` and weights ``(K,)``.

    Returns:
        ``(M, Q, b)`` with ``M`` ``(K, F)``, ``Q`` ``(K, K)`` and ``b`` ``(K,)``.
    """
    M = prior.support
    return M, M @ M.T, jnp.log(prior.weights) - 0.5 * jnp.sum(M**2, axis=1)
