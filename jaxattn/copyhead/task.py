"""The shift-by-one copy task (Spec B, section 1).

``P`` sequences of ``L`` i.i.d. tokens ``t_l ~ Unif{0..V-1}``, one-hot ``x_l = e_{t_l}``; the
target at position ``l`` is the previous token ``y_l = x_{l-1}``, with the cyclic boundary
``y_0 = x_{L-1}`` by default (**(choice)**; ``cyclic=False`` drops position 0 from the loss).

Sequence ``i`` of a data set is drawn from ``fold_in(key, i)``: a data set of ``P`` sequences is
the first ``P`` of any larger one drawn from the same key, so a grid over ``P`` padded to its
largest value (with per-sample masks) trains on exactly the sequences of the unpadded runs.

Because the tokens are one-hot and the network is linear in them, the loss of any attention
matrix needs the data only through the token co-occurrence counts
``K[m, m', v, v'] = sum_mu x^mu_{m,v} x^mu_{m',v'}`` (:func:`cooccurrence`); every full-batch
step then costs ``O(L^3 + L^2 V^2)`` instead of ``O(P L^2 V)``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.typing import DTypeLike
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

from jaxattn.core import precision


def tokens(key: PRNGKeyArray, n: int, L: int, V: int) -> Int[Array, "n L"]:
    """``n`` sequences of ``L`` uniform tokens; sequence ``i`` comes from ``fold_in(key, i)``.

    Tokens are 32 random bits modulo ``V``: non-uniform by at most ``V / 2^32`` (below any
    sampling error here), and about half the compile time of ``jax.random.randint``.

    Args:
        key: PRNG key of the data set.
        n: number of sequences.
        L: sequence length.
        V: vocabulary size.

    Returns:
        Integer tokens in ``0..V-1``, shape (n, L).
    """

    def one(i):
        return (jax.random.bits(jax.random.fold_in(key, i), (L,), jnp.uint32) % V).astype(jnp.int32)

    return jax.vmap(one)(jnp.arange(n))


def one_hot(t: Int[Array, "... L"], V: int, dtype: DTypeLike = jnp.float32) -> Float[Array, "... L V"]:
    """One-hot embedding ``x_l = e_{t_l}`` (Spec B, section 1).

    Args:
        t: integer tokens, shape (..., L).
        V: vocabulary size.
        dtype: dtype of the embedding.

    Returns:
        One-hot vectors, shape (..., L, V).
    """
    return jax.nn.one_hot(t, V, dtype=dtype)


def targets(X: Float[Array, "... L V"]) -> Float[Array, "... L V"]:
    """``y_l = x_{l-1}`` with ``y_0 = x_{L-1}`` (the cyclic boundary; under ``cyclic=False``
    position 0 is removed from the loss by :func:`loss_positions`, not here). Spec B, section 1.

    Args:
        X: one-hot sequences, shape (..., L, V).

    Returns:
        The targets ``Y``, shape (..., L, V).
    """
    return jnp.roll(X, 1, axis=-2)


def loss_positions(L: int, cyclic: bool = True) -> Bool[Array, " L"]:
    """Positions that enter the loss: all of them, or all but 0 when not cyclic.

    Args:
        L: sequence length.
        cyclic: cyclic boundary (every position) or not (position 0 dropped).

    Returns:
        Boolean mask of the loss positions, shape (L,).
    """
    return jnp.arange(L) >= (0 if cyclic else 1)


def shift_matrix(L: int, cyclic: bool = True, dtype: DTypeLike = jnp.float32) -> Float[Array, "L L"]:
    """``S_{l, l-1} = 1`` (``S_{0, L-1} = 1`` only when cyclic): ``S @ X`` is the target.

    Args:
        L: sequence length.
        cyclic: include the wrap-around entry ``S_{0, L-1}``.
        dtype: dtype of the matrix.

    Returns:
        The shift matrix ``S``, shape (L, L).
    """
    S = jnp.roll(jnp.eye(L, dtype=dtype), -1, axis=1)
    return S if cyclic else S.at[0, L - 1].set(0.0)


@precision.matmul("highest", unless_set=True)
def cooccurrence(X: Float[Array, "n L V"], sample_mask: Bool[Array, " n"] | None = None) -> Float[Array, "L L V V"]:
    """``K[m, m', v, v'] = sum_mu mask_mu x^mu_{m,v} x^mu_{m',v'}`` over the real samples.

    Counts are integers, exact in float32 up to 2^24, so the sum does not depend on the padding.

    Args:
        X: one-hot sequences, shape (n, L, V).
        sample_mask: which samples are real, shape (n,); ``None``: all of them.

    Returns:
        The counts ``K``, shape (L, L, V, V).
    """
    n, L, V = X.shape
    Xm = X if sample_mask is None else X * sample_mask[:, None, None].astype(X.dtype)
    K = Xm.reshape(n, L * V).T @ X.reshape(n, L * V)
    return K.reshape(L, V, L, V).transpose(0, 2, 1, 3)
