"""The multi-head attention network of the single-location model (Spec A, sections 2-3).

Each head has one key ``k_h`` in ``R^D`` and a scalar bias ``b_h``; scores are
``chi[h, l] = k_h . x_l / sqrt(D)`` and the prediction is ``y_hat = sum_{h,l} sigma[h,l] x_l``
(no value matrix, no output projection). Everything acts on one example; batch with ``vmap``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, PRNGKeyArray

from jaxattn.core.attention import attention_weights, position_weights
from jaxattn.slm.priors import Discrete


class MultiHead(NamedTuple):
    """Parameters: keys ``(H, D)`` and biases ``(H,)``."""

    keys: Float[Array, "H D"]
    bias: Float[Array, " H"]


class Arch(NamedTuple):
    """The static part of a model: activation name, head aggregation (``None``: its default)."""

    activation: str = "bayes_softmax"
    aggregation: str | None = None


def init(key: PRNGKeyArray, H: int, D: int, sigma0: float = 1.0, dtype=jnp.float32) -> MultiHead:
    """``k_h ~ N(0, sigma0^2 I_D)``, ``b_h = 0``. Head ``h`` uses its own key ``fold_in(key, h)``,
    so padding ``H`` to a larger maximum leaves the real heads unchanged."""
    keys = jax.vmap(lambda h: jax.random.normal(jax.random.fold_in(key, h), (D,), dtype))(jnp.arange(H))
    return MultiHead(sigma0 * keys, jnp.zeros(H, dtype))


def scores(params: MultiHead, X: Float[Array, "L D"]) -> Float[Array, "H L"]:
    """``chi[h, l] = k_h . x_l / sqrt(D)``."""
    D = X.shape[-1]
    return params.keys @ X.T / jnp.sqrt(jnp.asarray(D, X.dtype))


def weights(
    params: MultiHead,
    X: Float[Array, "L D"],
    arch: Arch,
    head_mask: Bool[Array, " H"] | None = None,
    pos_mask: Bool[Array, " L"] | None = None,
) -> Float[Array, " L"]:
    """Prediction weights ``w[l] = sum_h sigma[h, l]``."""
    sigma = attention_weights(
        scores(params, X),
        params.bias,
        arch.activation,
        head_mask=head_mask,
        pos_mask=pos_mask,
        aggregation=arch.aggregation,
    )
    return position_weights(sigma)


def predict(params, X, arch, head_mask=None, pos_mask=None) -> Float[Array, " D"]:
    """``y_hat = sum_l w[l] x_l``."""
    return weights(params, X, arch, head_mask, pos_mask) @ X


def error(params, X, y, arch, head_mask=None, pos_mask=None) -> Float[Array, ""]:
    """The per-sample test error ``|y - y_hat|^2 / D`` (Spec A, section 1); SGD minimises half of it."""
    r = y - predict(params, X, arch, head_mask, pos_mask)
    return jnp.sum(r * r) / X.shape[-1]


def order_parameters(params: MultiHead, directions: Float[Array, "F D"]) -> tuple[Array, Array]:
    """``M[h, f] = k_h . s_f / D`` and ``Q[h, h'] = k_h . k_h' / D`` (Spec A, section 3)."""
    D = params.keys.shape[-1]
    return params.keys @ directions.T / D, params.keys @ params.keys.T / D


def keys_from_order_parameters(
    key: PRNGKeyArray, M: Float[Array, "H F"], Q: Float[Array, "H H"], directions: Float[Array, "F D"]
) -> Float[Array, "H D"]:
    """Keys with the given overlaps: ``k_h = sum_f M[h,f] s_f + sqrt(D) sum_j C[h,j] v_j`` with
    ``v_j`` orthonormal and orthogonal to every ``s_f``, ``C C^T = Q - M M^T`` (which must be
    positive semi-definite). ``M`` and ``Q`` are then exact at this ``D``."""
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


def oracle_bayes_softmax(prior: Discrete, directions: Float[Array, "F D"]) -> MultiHead:
    """The Bayes-optimal Bayes-softmax network of a discrete prior (Spec A, section 4): one head
    per support point, ``k_h = sum_f theta^(h)_f s_f``, ``b_h = log pi_h - |theta^(h)|^2 / 2``.
    Its prediction equals the Bayes estimator ``sum_l p_l x_l`` exactly."""
    support = prior.support.astype(directions.dtype)
    bias = jnp.log(prior.weights) - 0.5 * jnp.sum(support**2, axis=1)
    return MultiHead(support @ directions, bias.astype(directions.dtype))


def oracle_order_parameters(prior: Discrete) -> tuple[Array, Array, Array]:
    """``(M, Q, b)`` of :func:`oracle_bayes_softmax`: ``M = support``, ``Q = M M^T``."""
    M = prior.support
    return M, M @ M.T, jnp.log(prior.weights) - 0.5 * jnp.sum(M**2, axis=1)
