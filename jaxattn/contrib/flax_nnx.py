"""The project's attention activations in ``flax.nnx`` models (optional extra: ``pip install jaxattn[flax]``).

:class:`MultiHeadAttention` is a drop-in multi-head attention layer (same parameter layout as
``flax.nnx.MultiHeadAttention``: ``query``/``key``/``value`` kernels ``(in, H, head_dim)``, ``out``
kernel ``(H, head_dim, out)``) whose attention weights come from
:func:`jaxattn.core.attention.attention_weights`, so any of the project's activations (``softmax``,
``softmax1``, ``bayes_softmax``, ``linear``, or one added with
:func:`jaxattn.core.attention.register_activation`) can be put into a flax transformer. Each head also
has a learned logit bias ``b[h]`` (used by ``softmax1`` and ``bayes_softmax``, Spec A section 2).

For query position ``i`` the scores are ``chi[h, l] = q_h(i) . k_h(l) / sqrt(head_dim)``, the
weights ``sigma[h, l] = attention_weights(chi, b, activation, pos_mask=mask[i])`` (with
``bayes_softmax`` one normalisation over heads and key positions together), and head ``h``
outputs ``sum_l sigma[h, l] v_h(l)``; the heads are concatenated and projected by ``out``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx
from jax.typing import DTypeLike

from jaxattn.core.attention import attention_weights, check_activation

__all__ = ["MultiHeadAttention", "dot_product_attention"]


def dot_product_attention(
    query: jax.Array,
    key: jax.Array,
    value: jax.Array,
    head_bias: jax.Array | None = None,
    *,
    activation: str = "softmax",
    aggregation: str | None = None,
    mask: jax.Array | None = None,
) -> jax.Array:
    """Multi-head dot-product attention with a jaxattn activation.

    Args:
        query: ``(..., Lq, H, d)``.
        key: ``(..., Lk, H, d)``.
        value: ``(..., Lk, H, dv)``.
        head_bias: per-head logit bias ``(H,)`` (``None``: 0).
        activation: as in :func:`jaxattn.core.attention.attention_weights`.
        aggregation: as in :func:`jaxattn.core.attention.attention_weights`.
        mask: boolean, broadcastable to ``(..., Lq, Lk)`` (True: the query may attend to the key),
            e.g. ``flax.nnx.make_causal_mask``'s ``(..., 1, Lq, Lk)`` with its head axis squeezed.

    Returns:
        ``(..., Lq, H, dv)``: ``out[i, h] = sum_l sigma_i[h, l] value[l, h]``.
    """
    *batch, Lq, H, d = query.shape
    Lk = key.shape[-3]
    scores = jnp.einsum("...qhd,...khd->...qhk", query, key) / jnp.sqrt(jnp.asarray(d, query.dtype))
    bias = jnp.zeros(H, scores.dtype) if head_bias is None else head_bias.astype(scores.dtype)
    if mask is None:
        mask = jnp.ones((Lq, Lk), bool)
    mask = jnp.broadcast_to(mask, (*batch, Lq, Lk))

    def one(chi, pos_mask):  # chi (H, Lk), pos_mask (Lk,)
        return attention_weights(chi, bias, activation, pos_mask=pos_mask, aggregation=aggregation)

    flat_scores = scores.reshape(-1, H, Lk)
    sigma = jax.vmap(one)(flat_scores, mask.reshape(-1, Lk)).reshape(scores.shape)
    return jnp.einsum("...qhk,...khd->...qhd", sigma, value)


class MultiHeadAttention(nnx.Module):
    """Multi-head attention whose activation is any of jaxattn's (see the module docstring).

    Args:
        num_heads: ``H``.
        in_features: input width (queries; keys and values too unless ``in_kv_features``).
        qkv_features: ``H * head_dim`` (default ``in_features``).
        out_features: output width (default ``in_features``).
        activation: ``"softmax"``, ``"softmax1"``, ``"bayes_softmax"``, ``"linear"`` or a
            registered name.
        aggregation: ``"mean"`` or ``"sum"`` over heads (default: the activation's own); with
            ``"mean"`` every head's weights are divided by ``H``.
        in_kv_features: input width of keys and values (default ``in_features``).
        use_bias: biases in the four projections (the per-head logit bias is always there).
        param_dtype: dtype of the parameters (default ``float32``).
        rngs: ``flax.nnx.Rngs`` for the initialisation.

    Attributes:
        activation: the activation name, as given.
        aggregation: the head aggregation used, ``"mean"`` or ``"sum"``.
        num_heads: ``H``.
        head_dim: ``qkv_features // H``.
        query: ``nnx.LinearGeneral``, kernel ``(in_features, H, head_dim)``.
        key: ``nnx.LinearGeneral``, kernel ``(in_kv_features, H, head_dim)``.
        value: ``nnx.LinearGeneral``, kernel ``(in_kv_features, H, head_dim)``.
        out: ``nnx.LinearGeneral``, kernel ``(H, head_dim, out_features)``.
        head_bias: ``nnx.Param``, the per-head logit bias ``b[h]`` ``(H,)``, initialised to 0.

    Call: ``layer(inputs_q, inputs_kv=None, mask=None)`` with ``inputs_q`` of shape
    ``(..., Lq, in_features)`` returns ``(..., Lq, out_features)``; ``mask`` is boolean,
    broadcastable to ``(..., Lq, Lk)`` (``causal=True`` adds a causal mask).
    """

    def __init__(
        self,
        num_heads: int,
        in_features: int,
        qkv_features: int | None = None,
        out_features: int | None = None,
        *,
        activation: str = "softmax",
        aggregation: str | None = None,
        in_kv_features: int | None = None,
        use_bias: bool = True,
        param_dtype: DTypeLike = jnp.float32,
        rngs: nnx.Rngs,
    ):
        self.aggregation = check_activation(activation, aggregation)
        self.activation = activation
        self.num_heads = num_heads
        qkv_features = in_features if qkv_features is None else qkv_features
        out_features = in_features if out_features is None else out_features
        in_kv_features = in_features if in_kv_features is None else in_kv_features
        if qkv_features % num_heads:
            raise ValueError(f"qkv_features ({qkv_features}) must be divisible by num_heads ({num_heads})")
        self.head_dim = qkv_features // num_heads

        def proj(n_in):
            return nnx.LinearGeneral(
                n_in, (num_heads, self.head_dim), use_bias=use_bias, param_dtype=param_dtype, rngs=rngs
            )

        self.query = proj(in_features)
        self.key = proj(in_kv_features)
        self.value = proj(in_kv_features)
        self.out = nnx.LinearGeneral(
            (num_heads, self.head_dim),
            out_features,
            axis=(-2, -1),
            use_bias=use_bias,
            param_dtype=param_dtype,
            rngs=rngs,
        )
        self.head_bias = nnx.Param(jnp.zeros(num_heads, param_dtype))

    def __call__(
        self,
        inputs_q: jax.Array,
        inputs_kv: jax.Array | None = None,
        *,
        mask: jax.Array | None = None,
        causal: bool = False,
    ) -> jax.Array:
        """Attend from ``inputs_q`` to ``inputs_kv``.

        Args:
            inputs_q: queries' input ``(..., Lq, in_features)``.
            inputs_kv: keys' and values' input ``(..., Lk, in_kv_features)`` (default
                ``inputs_q``).
            mask: boolean, broadcastable to ``(..., Lq, Lk)`` (True: the query may attend).
            causal: also mask key positions after the query's (``tril`` of ``(Lq, Lk)``).

        Returns:
            ``(..., Lq, out_features)``.
        """
        inputs_kv = inputs_q if inputs_kv is None else inputs_kv
        q, k, v = self.query(inputs_q), self.key(inputs_kv), self.value(inputs_kv)
        if causal:
            Lq, Lk = inputs_q.shape[-2], inputs_kv.shape[-2]
            tri = jnp.tril(jnp.ones((Lq, Lk), bool))
            mask = tri if mask is None else jnp.logical_and(mask, tri)
        x = dot_product_attention(
            q, k, v, self.head_bias[...], activation=self.activation, aggregation=self.aggregation, mask=mask
        )
        return self.out(x)
