"""The effective action of the attention matrix on the copy task (Spec B, section 3).

The readout ``W`` enters the loss ``U`` quadratically, so it integrates out exactly
(``docs/theory/copy_head.md``, section 1). With ``kappa = beta / L``, ``C = Phi Phi^T`` and
``B = Phi Y^T`` (``Phi`` the attended inputs of all loss positions),

    S(G) = N [ |G|^2 / (2 sigma_G^2) + (kappa/2) |Y|^2 - (kappa^2/2) tr(B^T (I/omega + kappa C)^{-1} B) ]
           + (V/2) ln det(I + kappa omega C)                                            (B.3a)

is ``-ln`` of the marginal posterior of ``G`` for one data set (:func:`exact_action`). Averaging
``C`` and ``B`` over i.i.d. one-hot tokens leaves four scalars of ``A`` (:func:`attention_stats`),
``s = sum_l A_{l,l-1}``, ``q = |A|_F^2``, ``u = 1^T A 1``, ``n = |A 1|^2`` (sums over the loss rows):

    S = N [ |G|^2/(2 sigma_G^2) + kappa P n_pos / 2
            - (kappa^2 P^2 / 2) ((V-1)(s/V)^2 / (1/omega + kappa P q/V) + (u/V)^2 / (1/omega + kappa P n/V)) ]
        + (V/2) [ (V-1) ln(1 + kappa omega P q/V) + ln(1 + kappa omega P n/V) ]         (B.3b)

(:func:`reduced_action`). On the order-parameter ansatz it becomes a function of one number for
softmax (``G = c_G S + c_1 11^T`` with the gauge ``c_1 = -c_G/L`` fixed by the prior,
:func:`softmax_action`) and of two for linear attention (``A = a_1 11^T/L + a_G S``,
:func:`linear_action`).

Temperature: ``N`` multiplies the prior and the data terms, not the Occam term ``ln det`` (it
comes from the Gaussian integral over ``W``, whose width scales as ``1/sqrt(N)``). ``N = inf``
gives ``S/N``, i.e. ``min_W U``: the MAP objective that Adam minimises.

Every function here follows the dtype of its inputs; the theory is meant to run in float64
(wrap calls in ``with jax.enable_x64(True):`` and pass float64 arrays, as the public helpers of
:mod:`jaxattn.copyhead.softmax` do).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax.numpy as jnp
import numpy as np
from jax.typing import DTypeLike
from jaxtyping import Array, Float

from jaxattn.copyhead import network, task
from jaxattn.core import checks, precision
from jaxattn.core.checks import plain


class CopyHyper(NamedTuple):
    """Hyper-parameters as numbers (traceable, so grids over ``L``, ``V``, ``N`` vmap).

    ``L`` and ``V`` may be non-integer inside the reduced theory (the critical point is located
    in real ``L``). ``n_pos`` is the number of loss positions (``L`` cyclic, ``L - 1`` not),
    ``g`` the factor in ``G = g A`` of linear attention (``L`` or 1), ``N`` may be ``inf``.

    Attributes:
        L: sequence length, scalar.
        V: vocabulary size, scalar.
        beta: weight of the data term, scalar.
        omega: prior variance of ``W``, scalar.
        sigma_G2: prior variance of ``G``, scalar.
        N: inverse temperature (``inf`` allowed), scalar.
        n_pos: number of loss positions, scalar.
        g: factor in ``G = g A`` of linear attention, scalar.
    """

    L: Float[Array, ""]
    V: Float[Array, ""]
    beta: Float[Array, ""]
    omega: Float[Array, ""]
    sigma_G2: Float[Array, ""]
    N: Float[Array, ""]
    n_pos: Float[Array, ""]
    g: Float[Array, ""]


def hyper(arch: network.CopyArch, N: float = 1.0, dtype: DTypeLike | None = None) -> CopyHyper:
    """:class:`CopyHyper` of a :class:`~jaxattn.copyhead.network.CopyArch` at inverse temperature ``N``.

    Args:
        arch: the network (validated here).
        N: inverse temperature (``inf`` allowed; checked by :func:`check_N`).
        dtype: dtype of the numbers; default ``jnp.result_type(float)``.

    Returns:
        Named tuple :class:`CopyHyper` of scalar arrays of ``dtype``.
    """
    arch.validate()
    N = check_N(N)
    g = float(arch.L) if (arch.attention == "linear" and arch.linear_norm == "L") else 1.0
    vals = (arch.L, arch.V, arch.beta, arch.omega, arch.sigma_G2, N, network.n_loss_positions(arch), g)
    dtype = dtype or jnp.result_type(float)
    return CopyHyper(*(jnp.asarray(v, dtype) for v in vals))


class ActionStats(NamedTuple):
    """The four data-averaged statistics of ``A`` (sums over the loss rows), Spec B (B.3b).

    Attributes:
        s: ``sum_l A_{l,l-1}``, shape (*b).
        q: ``|A|_F^2``, shape (*b).
        u: ``1^T A 1``, shape (*b).
        n: ``|A 1|^2``, shape (*b).
    """

    s: Float[Array, "*b"]  # sum_l A_{l,l-1}
    q: Float[Array, "*b"]  # |A|_F^2
    u: Float[Array, "*b"]  # 1^T A 1
    n: Float[Array, "*b"]  # |A 1|^2


def _weights(N):
    """``(scale, occam)``: ``(N, 1)`` for finite ``N``, ``(1, 0)`` for ``N = inf`` (``S / N``)."""
    inf = jnp.isinf(N)
    return jnp.where(inf, 1.0, N), jnp.where(inf, 0.0, 1.0)


def attention_stats(A: Float[Array, "L L"], cyclic: bool = True) -> ActionStats:
    """``(s, q, u, n)`` of one attention matrix over its loss rows (all rows, or all but 0);
    Spec B, section 3.

    Args:
        A: attention matrix, shape (L, L).
        cyclic: cyclic boundary (all rows are loss rows) or not (row 0 is dropped).

    Returns:
        Named tuple :class:`ActionStats` of scalars.
    """
    L = A.shape[0]
    Am = A * task.loss_positions(L, cyclic)[:, None].astype(A.dtype)
    rows = jnp.sum(Am, axis=1)
    return ActionStats(
        jnp.sum(Am * task.shift_matrix(L, cyclic, A.dtype)), jnp.sum(Am**2), jnp.sum(rows), jnp.sum(rows**2)
    )


@precision.matmul("highest", unless_set=True)
def exact_action(
    G: Float[Array, "L L"], st: network.CopyStats, arch: network.CopyArch, N: float = 1.0
) -> Float[Array, ""]:
    """``S(G)`` of (B.3a) for the data set ``st`` (``-ln`` of the marginal posterior of ``G`` up to a
    constant): Cholesky of ``M = I/omega + kappa C``, ``tr(B^T M^{-1} B) = |chol(M)^{-1} B|^2`` and
    ``ln det(I + kappa omega C) = V ln omega + ln det M``. Jit- and grad-able in ``G``.

    Args:
        G: attention logits, shape (L, L).
        st: the data set (:class:`~jaxattn.copyhead.network.CopyStats`).
        arch: the network.
        N: inverse temperature (``inf``: ``S / N``, without the Occam term).

    Returns:
        The action ``S(G)``, scalar.
    """
    A = network.attention(G, arch)
    C, B = network.moments(A, st.K.astype(A.dtype), arch)
    V = arch.V
    kappa = arch.beta / arch.L
    M = jnp.eye(V, dtype=A.dtype) / arch.omega + kappa * C
    chol = jnp.linalg.cholesky(M)
    Z = jnp.linalg.solve(chol, B)  # chol Z = B (triangular; V is small)
    Y2 = st.n.astype(A.dtype) * network.n_loss_positions(arch)
    energy = jnp.sum(G**2) / (2 * arch.sigma_G2) + kappa / 2 * Y2 - kappa**2 / 2 * jnp.sum(Z**2)
    logdet = V * jnp.log(arch.omega) + 2.0 * jnp.sum(jnp.log(jnp.diagonal(chol)))
    scale, occam = _weights(jnp.asarray(N, A.dtype))
    return scale * energy + occam * V / 2 * logdet


def reduced_action(st: ActionStats, G2: Float[Array, "*b"], P: Float[Array, "*b"], h: CopyHyper) -> Float[Array, "*b"]:
    """(B.3b): the data-averaged action from ``(s, q, u, n)``, the prior norm ``G2 = |G|^2`` and
    the number of sequences ``P`` (broadcasts over all three).

    Args:
        st: statistics ``(s, q, u, n)`` of ``A``, shape (*b) each.
        G2: prior norm ``|G|^2``, shape (*b).
        P: number of training sequences, shape (*b).
        h: hyper-parameters.

    Returns:
        The action ``S``, shape (*b) (the broadcast shape).
    """
    s, q, u, n = st
    V, om = h.V, h.omega
    kP = h.beta / h.L * P
    d_perp = 1.0 / om + kP * q / V
    d_one = 1.0 / om + kP * n / V
    energy = (
        G2 / (2 * h.sigma_G2) + kP * h.n_pos / 2 - kP**2 / 2 * ((V - 1) * (s / V) ** 2 / d_perp + (u / V) ** 2 / d_one)
    )
    occam = V / 2 * ((V - 1) * jnp.log1p(kP * om * q / V) + jnp.log1p(kP * om * n / V))
    scale, w = _weights(h.N)
    return scale * energy + w * occam


def reduced_action_of_G(
    G: Float[Array, "L L"], P: Float[Array, ""], arch: network.CopyArch, N: float = 1.0
) -> Float[Array, ""]:
    """(B.3b) evaluated at an arbitrary logit matrix ``G`` (its attention's statistics, ``|G|^2``).

    Args:
        G: attention logits, shape (L, L).
        P: number of training sequences, scalar.
        arch: the network.
        N: inverse temperature (may be traced).

    Returns:
        The reduced action, scalar.
    """
    st = attention_stats(network.attention(G, arch), arch.cyclic)
    h = hyper(arch, 1.0, G.dtype)._replace(N=jnp.asarray(N, G.dtype))  # N may be traced
    return reduced_action(st, jnp.sum(G**2), P, h)


# --- the order-parameter ansatz ------------------------------------------------------------------


def prev_weight_softmax(c: Float[Array, "*b"], L: float | Array) -> Float[Array, "*b"]:
    """``a = e^c / (e^c + L - 1)``: the weight on the previous token at copy strength ``c``
    (Spec B, section 3, "Order parameters").

    Args:
        c: copy strength ``c_G``, shape (*b).
        L: sequence length (number or scalar array).

    Returns:
        The previous-token weight ``a``, shape (*b).
    """
    return 1.0 / (1.0 + (L - 1) * jnp.exp(-c))


def softmax_stats(c: Float[Array, "*b"], h: CopyHyper) -> tuple[ActionStats, Float[Array, "*b"]]:
    """Statistics and ``|G|^2`` of ``G = c (S - 11^T / L)`` on the loss rows: every row is a
    softmax of a one-hot logit vector, ``A_{l,l-1} = a``, the others ``(1-a)/(L-1)``; rows sum to
    1 (``u = n = n_pos``); the row-mean gauge ``c_1 = -c/L`` minimises the prior,
    ``|G|^2 = n_pos c^2 (L-1)/L`` (``c^2 (L-1)`` when cyclic). Spec B, section 3,
    "Order parameters".

    Args:
        c: copy strength ``c_G``, shape (*b).
        h: hyper-parameters.

    Returns:
        ``(stats, G2)``: :class:`ActionStats` and ``|G|^2``, each of shape (*b).
    """
    a = prev_weight_softmax(c, h.L)
    npos = h.n_pos
    st = ActionStats(npos * a, npos * (a**2 + (1 - a) ** 2 / (h.L - 1)), npos + 0 * c, npos + 0 * c)
    return st, npos * c**2 * (h.L - 1) / h.L


def softmax_action(c: Float[Array, "*b"], P: Float[Array, "*b"], h: CopyHyper) -> Float[Array, "*b"]:
    """``S(c_G)``: (B.3b) on the softmax ansatz (:func:`softmax_stats`).

    Args:
        c: copy strength ``c_G``, shape (*b).
        P: number of training sequences, shape (*b).
        h: hyper-parameters.

    Returns:
        The action, shape (*b) (the broadcast shape).
    """
    st, G2 = softmax_stats(c, h)
    return reduced_action(st, G2, P, h)


def softmax_logits(c: Float[Array, ""], L: int, cyclic: bool = True) -> Float[Array, "L L"]:
    """``G = c S - (c / L) 11^T`` on the loss rows (zero on a non-loss row 0): the softmax
    ansatz of Spec B, section 3, "Order parameters".

    Args:
        c: copy strength ``c_G``, scalar.
        L: sequence length.
        cyclic: cyclic boundary, or row 0 is not a loss row.

    Returns:
        The logits ``G``, shape (L, L).
    """
    S = task.shift_matrix(L, cyclic, jnp.result_type(c))
    mask = task.loss_positions(L, cyclic)[:, None]
    return jnp.where(mask, c * (S - 1.0 / L), 0.0)


def linear_stats(
    a1: Float[Array, "*b"], aG: Float[Array, "*b"], h: CopyHyper
) -> tuple[ActionStats, Float[Array, "*b"]]:
    """Statistics and ``|G|^2 = g^2 q`` of ``A = a_1 11^T / L + a_G S`` on the loss rows (each row:
    ``a_1 / L`` everywhere plus ``a_G`` on the previous position). Spec B, section 3,
    "Order parameters".

    Args:
        a1: uniform-pooling strength ``a_1``, shape (*b).
        aG: copy strength ``a_G``, shape (*b).
        h: hyper-parameters.

    Returns:
        ``(stats, G2)``: :class:`ActionStats` and ``|G|^2``, each of shape (*b).
    """
    npos, L = h.n_pos, h.L
    r = a1 + aG
    q = npos * (a1**2 / L + 2 * a1 * aG / L + aG**2)
    st = ActionStats(npos * (a1 / L + aG), q, npos * r, npos * r**2)
    return st, h.g**2 * q


def linear_action(
    a1: Float[Array, "*b"], aG: Float[Array, "*b"], P: Float[Array, "*b"], h: CopyHyper
) -> Float[Array, "*b"]:
    """``S(a_1, a_G)``: (B.3b) on the linear ansatz (:func:`linear_stats`).

    Args:
        a1: uniform-pooling strength ``a_1``, shape (*b).
        aG: copy strength ``a_G``, shape (*b).
        P: number of training sequences, shape (*b).
        h: hyper-parameters.

    Returns:
        The action, shape (*b) (the broadcast shape).
    """
    st, G2 = linear_stats(a1, aG, h)
    return reduced_action(st, G2, P, h)


def linear_attention_matrix(a1: float | Array, aG: float | Array, L: int, cyclic: bool = True) -> Float[Array, "L L"]:
    """``A = a_1 11^T / L + a_G S`` on the loss rows (zero on a non-loss row 0): the linear
    ansatz of Spec B, section 3, "Order parameters".

    Args:
        a1: uniform-pooling strength ``a_1``, scalar.
        aG: copy strength ``a_G``, scalar.
        L: sequence length.
        cyclic: cyclic boundary, or row 0 is not a loss row.

    Returns:
        The attention matrix ``A``, shape (L, L).
    """
    dt = jnp.result_type(a1, aG, float)
    A = a1 / L + aG * task.shift_matrix(L, cyclic, dt)
    return jnp.where(task.loss_positions(L, cyclic)[:, None], A, 0.0)


def test_error(st: ActionStats, P: Float[Array, "*b"], h: CopyHyper) -> Float[Array, "*b"]:
    """Test error ``E|f_l - y_l|^2`` per loss position of the posterior-mean predictor.

    The posterior mean of ``W`` given ``A`` (the MAP ``W`` too) in the data-averaged theory is
    ``w_perp (I - 11^T/V) + w_1 11^T/V`` with ``w_perp = kappa P (s/V) / (1/omega + kappa P q/V)``
    and ``w_1 = kappa P (u/V) / (1/omega + kappa P n/V)``; on fresh data
    ``E sum_l phi phi^T = q (I - 11^T/V)/V + n 11^T/V^2`` and ``E sum_l phi y^T = s (I - 11^T/V)/V
    + u 11^T/V^2``, so

        n_pos err = ((V-1)/V)(w_perp^2 q - 2 w_perp s) + (w_1^2 n - 2 w_1 u)/V + n_pos.

    The ``O(V / (P L))`` excess from estimating ``W`` on a finite sample is left out (Spec B,
    section 3, "Predicted test error").

    Args:
        st: statistics ``(s, q, u, n)`` of ``A``, shape (*b) each.
        P: number of training sequences, shape (*b).
        h: hyper-parameters.

    Returns:
        The test error per loss position, shape (*b) (the broadcast shape).
    """
    s, q, u, n = st
    V = h.V
    kP = h.beta / h.L * P
    wp = kP * (s / V) / (1.0 / h.omega + kP * q / V)
    w1 = kP * (u / V) / (1.0 / h.omega + kP * n / V)
    return ((V - 1) / V * (wp**2 * q - 2 * wp * s) + (w1**2 * n - 2 * w1 * u) / V + h.n_pos) / h.n_pos


def check_N(N: Any) -> float:
    """``N`` as a float (``inf`` allowed), ``ValueError`` naming it otherwise.

    Args:
        N: inverse temperature, anything ``float`` accepts.

    Returns:
        ``float(N)``, positive (``inf`` allowed).

    Raises:
        ValueError: if ``N`` is not a number, not positive, or NaN.
    """
    try:
        x = float(N)
    except (TypeError, ValueError) as err:
        raise ValueError(f"N must be a number > 0 (inf allowed), got {plain(N)}") from err
    if not (x > 0) or np.isnan(x):
        raise ValueError(f"N must be > 0 (inf allowed), got {plain(N)}")
    return x


def check_P(P: Any) -> np.ndarray:
    """``P`` as a non-empty 1-D array of positive numbers.

    Args:
        P: a positive number or a 1-D sequence of them.

    Returns:
        Float array of ``P``, shape (nP,).

    Raises:
        ValueError: if ``P`` is empty, not 1-D, or has an entry that is not a positive number.
    """
    return np.asarray(checks.positive_list("P", P), float)
