"""Single-head positional attention on the copy task: network, loss ``U`` and observables.

Spec B, section 2. Parameters: attention logits ``G`` (``L x L``) and readout ``W`` (``V x V``);
``A = softmax_rows(G)`` or ``A = G / L`` (linear; ``linear_norm="none"`` gives ``A = G``), computed
by :func:`jaxattn.core.attention.attention_weights` with the ``L`` rows of ``G`` as its "heads";
prediction ``f_l = W sum_m A_{l,m} x_m``; loss

    U = (beta / (2L)) sum_{mu, l} |f_l - y_l|^2 + |W|^2 / (2 omega) + |G|^2 / (2 sigma_G^2).

The data term is computed from the co-occurrence counts ``K`` of
:func:`jaxattn.copyhead.task.cooccurrence` (exact, see :func:`data_term`); :func:`predict` is the
per-sequence network, used as the reference.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.typing import DTypeLike
from jaxtyping import Array, Bool, Float, PRNGKeyArray

from jaxattn.copyhead import task
from jaxattn.core import checks, precision
from jaxattn.core.attention import attention_weights

ATTENTIONS = ("softmax", "linear")
LINEAR_NORMS = ("L", "none")


@dataclass(frozen=True)
class CopyArch:
    """The network and its loss (Spec B, section 2): hashable, so it fixes a compiled program.
    The configs of the copy-head experiments extend it (:mod:`jaxattn.copyhead._config`).

    Attributes:
        L: sequence length.
        V: vocabulary size.
        attention: ``"softmax"`` or ``"linear"``.
        linear_norm: linear attention ``A = G / L`` (``"L"``) or ``A = G`` (``"none"``).
        cyclic: cyclic boundary ``y_0 = x_{L-1}``, or position 0 dropped from the loss.
        beta: weight of the data term of ``U``.
        omega: prior variance of ``W``.
        sigma_G2: prior variance of ``G``.
    """

    L: int = field(default=32, metadata={"help": "Sequence length."})
    V: int = field(default=4, metadata={"help": "Vocabulary size."})
    attention: str = field(default="softmax", metadata={"help": "Attention: softmax or linear."})
    linear_norm: str = field(default="L", metadata={"help": "Linear attention A = G / L (L) or A = G (none)."})
    cyclic: bool = field(
        default=True, metadata={"help": "Cyclic boundary y_0 = x_{L-1}, or drop position 0 from the loss."}
    )
    beta: float = field(default=1.0, metadata={"help": "Weight of the data term of U."})
    omega: float = field(default=1.0, metadata={"help": "Prior variance of W."})
    sigma_G2: float = field(default=1.0, metadata={"help": "Prior variance of G."})

    @property
    def arch(self) -> CopyArch:
        """The network's own fields (a config that extends this class, stripped to them)."""
        return CopyArch(*(getattr(self, f.name) for f in dataclasses.fields(CopyArch)))

    def validate(self) -> CopyArch:
        """Check the fields (``L, V >= 2`` integers, known choices, positive priors and ``beta``).

        Returns:
            ``self``, unchanged.

        Raises:
            ValueError: naming the first invalid field.
        """
        checks.integer("L", self.L, 2)
        checks.integer("V", self.V, 2)
        checks.choice("attention", self.attention, ATTENTIONS)
        checks.choice("linear_norm", self.linear_norm, LINEAR_NORMS)
        checks.positive("beta", self.beta)
        checks.positive("omega", self.omega)
        checks.positive("sigma_G2", self.sigma_G2)
        return self


class CopyParams(NamedTuple):
    """The network's parameters: attention logits ``G`` (``L x L``) and readout ``W`` (``V x V``).

    Attributes:
        G: attention logits, shape (L, L).
        W: readout, shape (V, V).
    """

    G: Float[Array, "L L"]
    W: Float[Array, "V V"]


class CopyStats(NamedTuple):
    """A data set reduced to what the loss needs: co-occurrence counts and the sample count.

    Attributes:
        K: co-occurrence counts (:func:`jaxattn.copyhead.task.cooccurrence`), shape (L, L, V, V).
        n: number of (real) samples, scalar.
    """

    K: Float[Array, "L L V V"]
    n: Float[Array, ""]


def stats(X: Float[Array, "n L V"], sample_mask: Bool[Array, " n"] | None = None) -> CopyStats:
    """:class:`CopyStats` of the real (unmasked) samples of ``X``.

    Args:
        X: one-hot sequences, shape (n, L, V).
        sample_mask: which samples are real, shape (n,); ``None``: all of them.

    Returns:
        Named tuple :class:`CopyStats` with the counts ``K`` and the number of real samples ``n``.
    """
    n = X.shape[0] if sample_mask is None else jnp.sum(sample_mask)
    return CopyStats(task.cooccurrence(X, sample_mask), jnp.asarray(n, X.dtype))


def attention(G: Float[Array, "L L"], arch: CopyArch) -> Float[Array, "L L"]:
    """``A = softmax_rows(G)`` or ``G / L`` (Spec B, section 2); each row of ``G`` is one "head"
    of the shared activation, summed aggregation so that nothing rescales the rows.
    ``linear_norm="none"`` gives ``A = G``.

    Args:
        G: attention logits, shape (L, L).
        arch: the network.

    Returns:
        The attention matrix ``A``, shape (L, L).
    """
    if arch.attention == "linear" and arch.linear_norm == "none":
        return G
    return attention_weights(G, None, arch.attention, aggregation="sum")


@precision.matmul("highest", unless_set=True)
def predict(params: CopyParams, X: Float[Array, "L V"], arch: CopyArch) -> Float[Array, "L V"]:
    """``f_l = W sum_m A_{l,m} x_m`` for one sequence (Spec B, section 2).

    Args:
        params: the parameters ``(G, W)``.
        X: one-hot sequence, shape (L, V).
        arch: the network.

    Returns:
        The predictions ``f``, shape (L, V).
    """
    return attention(params.G, arch) @ X @ params.W.T


@precision.matmul("highest", unless_set=True)
def moments(
    A: Float[Array, "L L"], K: Float[Array, "L L V V"], arch: CopyArch
) -> tuple[Float[Array, "V V"], Float[Array, "V V"]]:
    """``C = sum Phi^T Phi`` and ``B = sum Phi^T Y`` over the loss positions, from ``K``:
    ``C = sum_{m,m'} (A^T A)_{m m'} K[m, m']``, ``B = sum_{m,m'} (A^T S)_{m m'} K[m, m']``.

    ``(A^T S)_{m, m'} = A_{m'+1, m}`` (``S`` a shift), so ``B = sum_{l,m} A_{l,m} K[m, l-1]``: one
    contraction of ``A`` with the shifted counts (a data constant: under ``vmap`` over chains or
    seeds that share ``K`` it is computed once), instead of an ``L^3`` product with ``S``.

    Args:
        A: attention matrix, shape (L, L).
        K: co-occurrence counts, shape (L, L, V, V).
        arch: the network.

    Returns:
        ``(C, B)``, each of shape (V, V).
    """
    L = arch.L
    Am = A * task.loss_positions(L, arch.cyclic)[:, None].astype(A.dtype)
    KC = K.reshape(L * L, -1)
    KB = jnp.roll(jnp.swapaxes(K, 0, 1), 1, axis=0).reshape(L * L, -1)  # KB[l, m] = K[m, l-1]
    C = ((Am.T @ Am).reshape(L * L) @ KC).reshape(arch.V, arch.V)
    B = (Am.reshape(L * L) @ KB).reshape(arch.V, arch.V)
    return C, B


def n_loss_positions(arch: CopyArch) -> int:
    """Number of positions that enter the loss: ``L`` when cyclic, ``L - 1`` otherwise.

    Args:
        arch: the network.

    Returns:
        ``n_pos``.
    """
    return arch.L if arch.cyclic else arch.L - 1


@precision.matmul("highest", unless_set=True)
def data_term(params: CopyParams, st: CopyStats, arch: CopyArch) -> Float[Array, ""]:
    """``sum_{mu, l} |f_l - y_l|^2 = tr(W C W^T) - 2 tr(W B) + |Y|^2`` (exact for one-hot data),
    summed over the samples and loss positions.

    Args:
        params: the parameters ``(G, W)``.
        st: the data set.
        arch: the network.

    Returns:
        The summed squared error, scalar.
    """
    A = attention(params.G, arch)
    C, B = moments(A, st.K, arch)
    W = params.W
    return jnp.sum((W @ C) * W) - 2.0 * jnp.sum(W * B.T) + st.n * n_loss_positions(arch)


@precision.matmul("highest", unless_set=True)
def loss(params: CopyParams, st: CopyStats, arch: CopyArch) -> Float[Array, ""]:
    """``U`` of Spec B, section 2 (data term plus the Gaussian priors of ``W`` and ``G``).

    Args:
        params: the parameters ``(G, W)``.
        st: the data set.
        arch: the network.

    Returns:
        The loss ``U``, scalar.
    """
    prior = jnp.sum(params.W**2) / (2 * arch.omega) + jnp.sum(params.G**2) / (2 * arch.sigma_G2)
    return arch.beta / (2 * arch.L) * data_term(params, st, arch) + prior


@precision.matmul("highest", unless_set=True)
def error(params: CopyParams, st: CopyStats, arch: CopyArch) -> Float[Array, ""]:
    """Mean squared error ``|f_l - y_l|^2`` per sample and loss position.

    Args:
        params: the parameters ``(G, W)``.
        st: the data set.
        arch: the network.

    Returns:
        The mean squared error, scalar.
    """
    sq = jnp.maximum(data_term(params, st, arch), 0.0)  # a difference of sums: clip the rounding
    return sq / (jnp.maximum(st.n, 1.0) * n_loss_positions(arch))


@precision.matmul("highest", unless_set=True)
def optimal_readout(
    A: Float[Array, "L L"], st: CopyStats, arch: CopyArch, omega: float | None = None
) -> Float[Array, "V V"]:
    """The ``W`` minimising ``U`` at fixed ``A``: ``W = B^T (C + L / (beta omega) I)^{-1}``
    (``omega=jnp.inf`` gives least squares).

    Args:
        A: attention matrix, shape (L, L).
        st: the data set.
        arch: the network.
        omega: prior variance of ``W``; ``None``: ``arch.omega``.

    Returns:
        The readout ``W``, shape (V, V).
    """
    omega = arch.omega if omega is None else omega
    C, B = moments(A, st.K, arch)
    ridge = arch.L / (arch.beta * omega)
    return jnp.linalg.solve((C + ridge * jnp.eye(arch.V, dtype=C.dtype)).T, B).T


def order_parameters(G: Float[Array, "L L"], arch: CopyArch) -> dict[str, Float[Array, ""]]:
    """Previous-token weight ``(1/n_pos) sum_l A_{l,l-1}`` over the loss positions and the least
    squares ``(a_1, a_G)`` of ``A`` on ``(11^T / L, S)`` (Spec B, section 4).

    Args:
        G: attention logits, shape (L, L).
        arch: the network.

    Returns:
        Scalars keyed ``prev_weight``, ``a1`` and ``aG``.
    """
    L = arch.L
    A = attention(G, arch)
    S = task.shift_matrix(L, arch.cyclic, A.dtype)
    s = jnp.sum(A * S)
    ns = n_loss_positions(arch)
    # normal equations of min |A - a1 J/L - aG S|^2: <J/L,J/L> = 1, <J/L,S> = ns/L, <S,S> = ns
    g11, g12, g22 = 1.0, ns / L, float(ns)
    r1, r2 = jnp.sum(A) / L, s
    det = g11 * g22 - g12 * g12
    a1 = (g22 * r1 - g12 * r2) / det
    aG = (g11 * r2 - g12 * r1) / det
    return dict(prev_weight=s / ns, a1=a1, aG=aG)


def init(
    key: PRNGKeyArray,
    arch: CopyArch,
    sigma0: float | Array = 0.1,
    copy_strength: float | Array = 0.0,
    is_copy: bool | Array = False,
    dtype: DTypeLike = jnp.float32,
) -> CopyParams:
    """Random ``G_0 ~ N(0, sigma0^2)`` or copy-biased ``G_0 = c S`` (``is_copy``); in both
    ``W_0 ~ N(0, 1/V)``. The choice is a traced value, so both kinds run in one vmapped grid.

    Args:
        key: PRNG key.
        arch: the network.
        sigma0: standard deviation of the random ``G_0``.
        copy_strength: ``c`` of the copy-biased ``G_0 = c S``.
        is_copy: copy-biased (true) or random (false) ``G_0``.
        dtype: dtype of the parameters.

    Returns:
        Named tuple :class:`CopyParams` ``(G_0, W_0)``, shapes (L, L) and (V, V).
    """
    kG, kW = jax.random.split(key)
    G_rand = sigma0 * jax.random.normal(kG, (arch.L, arch.L), dtype)
    G_copy = copy_strength * task.shift_matrix(arch.L, arch.cyclic, dtype)
    G = jnp.where(is_copy, G_copy, G_rand)
    W = jax.random.normal(kW, (arch.V, arch.V), dtype) / jnp.sqrt(arch.V)
    return CopyParams(G, W)
