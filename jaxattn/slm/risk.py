"""Population risk of the single-location model in its order parameters (Spec A, section 3).

As ``D -> inf``, given ``theta`` and the location ``eps``, the head scores ``chi[., l]`` are
independent over positions and Gaussian with mean ``M theta 1[l = eps]`` and covariance ``Q``;
with ``w_l = sum_h sigma[h, l]`` the risk is

    R(M, Q, b) = E[(1 - w_eps)^2 + sum_{l != eps} w_l^2].

There is no closed form for softmax-type activations. :func:`make_bank` fixes the randomness once
(common random numbers), so :func:`risk` is a smooth, deterministic, differentiable function of
``(M, Q, b)``: Monte Carlo draws of the scores, or a Gauss-Hermite product rule when ``H * L`` is
tiny. The latent is integrated exactly for discrete and flipped-spike priors (their support is
enumerated) and by Monte Carlo (or Gauss-Hermite) for Gaussian priors. By permutation symmetry of
the positions the location is fixed at ``eps = 0`` (position 0 is always a real position).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import NamedTuple, cast

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.typing import DTypeLike
from jaxtyping import Array, Bool, Float, PRNGKeyArray

from jaxattn.core import precision
from jaxattn.core.attention import attention_weights, position_weights
from jaxattn.core.checks import plain
from jaxattn.slm import priors


class Bank(NamedTuple):
    """Fixed draws: standard-normal scores ``z[n, L, H]`` paired with latents ``theta[n, F]``
    and weights ``weight[n]`` summing to one (the expectations of Spec A, section 3).

    Attributes:
        z: standard-normal score draws (or quadrature nodes), shape ``(n, L, H)``.
        theta: the latent paired with each draw, shape ``(n, F)``.
        weight: the weight of each draw, shape ``(n,)``, summing to one.
    """

    z: Float[Array, "n L H"]
    theta: Float[Array, "n F"]
    weight: Float[Array, " n"]


def theta_nodes(
    prior: priors.Prior, key: PRNGKeyArray, n: int, order: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights integrating ``P_theta``: the support (discrete), the ``2^F`` sign
    combinations (flipped spike), or ``n`` draws / a Gauss-Hermite rule of ``order`` (Gaussian).

    Args:
        prior: the latent prior ``P_theta``.
        key: PRNG key of the draws (Gaussian prior without ``order``).
        n: number of draws (Gaussian prior without ``order``).
        order: Gauss-Hermite points per direction (Gaussian prior only; ``None``: draws).

    Returns:
        ``(nodes, weights)``: NumPy arrays of shapes ``(K, F)`` and ``(K,)``, weights summing to one.

    Raises:
        ValueError: for a flipped-spike prior with ``F > 12``.
    """
    if isinstance(prior, priors.Discrete):
        return np.asarray(prior.support, float), np.asarray(prior.weights, float)
    if isinstance(prior, priors.FlippedSpike):
        F = prior.F
        if F > 12:
            raise ValueError(f"flipped-spike prior with F={F} > 12: too many sign combinations")
        signs = np.array(list(itertools.product([1.0, -1.0], repeat=F)))
        return np.asarray(prior.mean_) + signs * np.asarray(prior.amplitude), np.full(2**F, 0.5**F)
    if order is not None:
        x, w = _hermite(order, prior.F)
        return np.asarray(prior.mean_) + x @ np.asarray(prior.factor).T, w
    th = np.asarray(prior.sample(key, (n,)), float)
    return th, np.full(n, 1.0 / n)


def _hermite(order: int, dim: int):
    """Gauss-Hermite product rule for ``E f(z)``, ``z ~ N(0, I_dim)``."""
    x, w = np.polynomial.hermite_e.hermegauss(order)
    w = w / w.sum()
    nodes = np.array(list(itertools.product(x, repeat=dim))).reshape(-1, dim)
    weights = np.prod(np.array(list(itertools.product(w, repeat=dim))).reshape(-1, dim), axis=1)
    return nodes, weights


SOBOL_BITS = 30
SOBOL_MAX_DIM = 21201  # scipy's table of direction numbers (Joe and Kuo)


def sobol_columns(cols: np.ndarray, m: int, seed: int) -> np.ndarray:
    """``2^m`` points of the Sobol sequence's coordinates ``cols``, each scrambled on its own
    (Matousek's linear matrix scramble and a digital shift, drawn from ``(seed, coordinate)``),
    so that a coordinate's points do not depend on which others are drawn: the randomisation
    ``scipy.stats.qmc.Sobol(scramble=True)`` applies, made per coordinate.

    Args:
        cols: Sobol coordinates (dimensions), each ``< SOBOL_MAX_DIM``.
        m: ``log2`` of the number of points.
        seed: The scramble's seed.

    Returns:
        The points in ``(0, 1)``, shape ``(2^m, len(cols))``.

    Raises:
        ValueError: If a coordinate is past the table of direction numbers.
    """
    from scipy.stats import qmc

    cols = np.asarray(cols, np.int64)
    if cols.size and cols.max() >= SOBOL_MAX_DIM:
        raise ValueError(
            f"the Sobol bank needs coordinate {int(cols.max())}, past the {SOBOL_MAX_DIM} of its table "
            "(L + H too large): use bank_method='mc'"
        )
    base = qmc.Sobol(int(cols.max()) + 1 if cols.size else 1, scramble=False, bits=SOBOL_BITS).random_base2(m)
    x = np.round(base[:, cols] * 2.0**SOBOL_BITS).astype(np.int64)
    weights = 1 << (SOBOL_BITS - 1 - np.arange(SOBOL_BITS))  # bit i: the i-th most significant
    bits = ((x[..., None] & weights) > 0).astype(np.float32)  # (n, k, bits)
    out = np.empty(x.shape, float)
    for j, c in enumerate(cols):
        rng = np.random.default_rng([seed, int(c)])
        lower = np.tril(rng.integers(0, 2, (SOBOL_BITS, SOBOL_BITS)), -1) + np.eye(SOBOL_BITS, dtype=np.int64)
        shift = int(rng.integers(0, 2**SOBOL_BITS))
        y = (bits[:, j] @ lower.T.astype(np.float32)).astype(np.int64) % 2  # each bit: itself and the ones above
        out[:, j] = (((y * weights).sum(axis=1) ^ shift) + 0.5) / 2.0**SOBOL_BITS  # the cell's centre: never 0 or 1
    return out


def make_bank(
    prior: priors.Prior,
    L: int,
    H: int,
    *,
    n: int = 20000,
    key: PRNGKeyArray | None = None,
    method: str = "mc",
    order: int = 5,
    dtype: DTypeLike | None = None,
) -> Bank:
    """A bank of draws for :func:`risk` (``L``, ``H`` are the padded sizes).

    ``method="mc"``: ``n`` Gaussian score draws (entry ``(l, h)`` from its own key, so that the
    bank of smaller ``(L, H)`` is the prefix of this one's), crossed with the latent's nodes (for a discrete
    prior) or paired with ``n`` latent draws (Gaussian). ``method="sobol"``: the same with the
    draws replaced by ``n`` (rounded up to a power of 2) scrambled Sobol points
    (``scipy.stats.qmc``) mapped through the Gaussian quantile (and, for a Gaussian prior, through
    the prior's factor): a quasi-Monte Carlo rule, whose error falls faster than ``n^-1/2`` on the
    smooth integrands of the risk. ``method="quadrature"``: a Gauss-Hermite rule of ``order``
    points per score dimension, exact for tiny ``H * L`` (at most 8 dimensions).

    Args:
        prior: the latent prior ``P_theta``.
        L: sequence length (padded).
        H: number of heads (padded).
        n: number of score draws (``"mc"``, ``"sobol"``) or of latent draws of a Gaussian prior.
        key: PRNG key of the draws (default ``jax.random.key(0)``).
        method: ``"mc"``, ``"sobol"`` or ``"quadrature"``.
        order: Gauss-Hermite points per dimension (``"quadrature"``).
        dtype: dtype of the bank (default: JAX's default float, float64 under x64).

    Returns:
        A :class:`Bank` with ``z`` ``(N, L, H)``, ``theta`` ``(N, F)``, ``weight`` ``(N,)``, where
            ``N`` is the number of draws times the number of latent nodes (discrete and flipped-spike
            priors) or the number of draws (Gaussian).

    Raises:
        ValueError: on an unknown ``method``, or ``"quadrature"`` with ``H * L > 8``.
    """
    key = jax.random.key(0) if key is None else key
    k_z, k_t = jax.random.split(key)
    if method == "quadrature":
        if H * L > 8:
            raise ValueError(f"method='quadrature' needs H * L <= 8, got H={H}, L={L}; use method='mc'")
        zn, zw = _hermite(order, L * H)
        tn, tw = theta_nodes(prior, k_t, n, order=order)
        z = np.repeat(zn, len(tn), axis=0)
        th = np.tile(tn, (len(zn), 1))
        w = np.outer(zw, tw).ravel()
    elif method == "mc":
        # entry (l, h) from its own key: the bank of a smaller (L, H) is this bank's prefix, so a
        # point padded into a larger grid sees the draws it sees alone
        def entry(pos, h):
            return jax.random.normal(jax.random.fold_in(jax.random.fold_in(k_z, pos), h), (n,))

        zn = jax.vmap(lambda pos: jax.vmap(lambda h: entry(pos, h))(jnp.arange(H)))(jnp.arange(L))  # (L, H, n)
        zn = np.asarray(zn, float).reshape(L * H, n).T
        if isinstance(prior, priors.Gaussian):
            th, w = theta_nodes(prior, k_t, n)
            z = zn
        else:
            tn, tw = theta_nodes(prior, k_t, n)
            z = np.repeat(zn, len(tn), axis=0)
            th = np.tile(tn, (n, 1))
            w = np.outer(np.full(n, 1.0 / n), tw).ravel()
    elif method == "sobol":
        from scipy.stats import norm

        gauss = isinstance(prior, priors.Gaussian)
        F = prior.F if gauss else 0
        seed = int(jax.random.randint(k_z, (), 0, 2**31 - 1))
        # entry (l, h) is the Sobol coordinate F + cantor(l, h), whatever the padded (L, H): the
        # bank of a smaller (L, H) is this bank's prefix, as for "mc"; theta's are the first F
        ls, hs = np.meshgrid(np.arange(L), np.arange(H), indexing="ij")
        cols = np.concatenate([np.arange(F), (F + (ls + hs) * (ls + hs + 1) // 2 + hs).ravel()])
        g = norm.ppf(sobol_columns(cols, max(1, int(np.ceil(np.log2(n)))), seed))
        zn = g[:, F:]
        if gauss:
            z = zn
            th = np.asarray(prior.mean_) + g[:, :F] @ np.asarray(prior.factor).T
            w = np.full(len(z), 1.0 / len(z))
        else:
            tn, tw = theta_nodes(prior, k_t, n)
            z = np.repeat(zn, len(tn), axis=0)
            th = np.tile(tn, (len(zn), 1))
            w = np.outer(np.full(len(zn), 1.0 / len(zn)), tw).ravel()
    else:
        raise ValueError(f"method must be 'mc', 'sobol' or 'quadrature', got {plain(method)}")
    dtype = dtype or jnp.result_type(float)
    return Bank(jnp.asarray(z.reshape(-1, L, H), dtype), jnp.asarray(th, dtype), jnp.asarray(w / w.sum(), dtype))


def _cholesky(Q: Array, head_mask: Array) -> Array:
    """Cholesky factor of ``Q`` restricted to the real heads (identity on padded ones), with a
    tiny jitter so that rank-deficient ``Q`` (e.g. identical heads) stays factorisable."""
    valid = head_mask[:, None] & head_mask[None, :]
    Qm = jnp.where(valid, Q, jnp.eye(Q.shape[0], dtype=Q.dtype))
    scale = jnp.max(jnp.abs(jnp.diag(Qm)))
    jitter = (1e-10 if Q.dtype == jnp.float64 else 1e-5) * (1.0 + scale)
    return jnp.linalg.cholesky(0.5 * (Qm + Qm.T) + jitter * jnp.eye(Q.shape[0], dtype=Q.dtype))


@precision.matmul("highest", unless_set=True)
def bank_scores(
    M: Float[Array, "H F"], Q: Float[Array, "H H"], bank: Bank, head_mask: Bool[Array, " H"] | None = None
) -> Float[Array, "n H L"]:
    """The scores of every draw: ``chi[:, l] = C z_l + M theta 1[l = 0]`` with ``C C^T = Q``, i.e.
    Gaussian with mean ``M theta`` at the relevant position 0 and covariance ``Q`` (Spec A,
    section 3).

    Args:
        M: overlaps ``M[h, f] = k_h . s_f / D``, shape ``(H, F)``.
        Q: overlaps ``Q[h, h'] = k_h . k_h' / D``, shape ``(H, H)``.
        bank: the fixed draws, ``z`` of shape ``(n, L, H)``.
        head_mask: real heads, shape ``(H,)`` (default: all); padded heads get zero scores.

    Returns:
        The scores ``chi``, shape ``(n, H, L)``.
    """
    H = M.shape[0]
    head_mask = jnp.ones(H, bool) if head_mask is None else head_mask
    M = jnp.where(head_mask[:, None], M, 0.0)
    C = _cholesky(Q, head_mask)
    chi = jnp.einsum("hk,nlk->nhl", C, bank.z)
    return chi.at[:, :, 0].add(bank.theta @ M.T)


def draw_loss(
    chi: Float[Array, "H L"],
    b: Float[Array, " H"],
    activation: str,
    aggregation: str | None = None,
    head_mask: Bool[Array, " H"] | None = None,
    pos_mask: Bool[Array, " L"] | None = None,
) -> Float[Array, ""]:
    """``(1 - w_0)^2 + sum_{l>0} w_l^2`` for one draw of the scores (the relevant token at 0;
    Spec A, section 3).

    Args:
        chi: the scores of one draw, shape ``(H, L)``.
        b: biases, shape ``(H,)``.
        activation: the attention activation's name.
        aggregation: ``"mean"`` or ``"sum"`` over heads (``None``: the activation's default).
        head_mask: real heads, shape ``(H,)`` (default: all).
        pos_mask: real positions, shape ``(L,)`` (default: all).

    Returns:
        The loss of the draw, a scalar.
    """
    H, L = chi.shape
    head_mask = jnp.ones(H, bool) if head_mask is None else head_mask
    b = jnp.where(head_mask, b, 0.0)
    w = position_weights(
        attention_weights(chi, b, activation, head_mask=head_mask, pos_mask=pos_mask, aggregation=aggregation)
    )
    return jnp.sum((jnp.zeros(L, w.dtype).at[0].set(1.0) - w) ** 2)


@precision.matmul("highest", unless_set=True)
def risk_terms(
    M: Float[Array, "H F"],
    Q: Float[Array, "H H"],
    b: Float[Array, " H"],
    bank: Bank,
    activation: str,
    aggregation: str | None = None,
    head_mask: Bool[Array, " H"] | None = None,
    pos_mask: Bool[Array, " L"] | None = None,
) -> Float[Array, " n"]:
    """Per-draw losses ``(1 - w_0)^2 + sum_{l>0} w_l^2``; :func:`risk` is their weighted mean.

    Args:
        M: overlaps ``M[h, f] = k_h . s_f / D``, shape ``(H, F)``.
        Q: overlaps ``Q[h, h'] = k_h . k_h' / D``, shape ``(H, H)``.
        b: biases, shape ``(H,)``.
        bank: the fixed draws (:func:`make_bank`), ``n`` of them.
        activation: the attention activation's name.
        aggregation: ``"mean"`` or ``"sum"`` over heads (``None``: the activation's default).
        head_mask: real heads, shape ``(H,)`` (default: all).
        pos_mask: real positions, shape ``(L,)`` (default: all).

    Returns:
        The losses, shape ``(n,)``.
    """
    chi = bank_scores(M, Q, bank, head_mask)
    return jax.vmap(lambda c: draw_loss(c, b, activation, aggregation, head_mask, pos_mask))(chi)


@precision.matmul("highest", unless_set=True)
def risk(
    M: Float[Array, "H F"],
    Q: Float[Array, "H H"],
    b: Float[Array, " H"],
    bank: Bank,
    activation: str,
    aggregation: str | None = None,
    head_mask: Bool[Array, " H"] | None = None,
    pos_mask: Bool[Array, " L"] | None = None,
) -> Float[Array, ""]:
    """``R(M, Q, b)`` (Spec A, section 3) on a fixed bank: deterministic and differentiable.

    Args:
        M: overlaps ``M[h, f] = k_h . s_f / D``, shape ``(H, F)``.
        Q: overlaps ``Q[h, h'] = k_h . k_h' / D``, shape ``(H, H)``.
        b: biases, shape ``(H,)``.
        bank: the fixed draws (:func:`make_bank`).
        activation: the attention activation's name.
        aggregation: ``"mean"`` or ``"sum"`` over heads (``None``: the activation's default).
        head_mask: real heads, shape ``(H,)`` (default: all).
        pos_mask: real positions, shape ``(L,)`` (default: all).

    Returns:
        The risk, a scalar: the bank-weighted mean of :func:`risk_terms`.
    """
    return bank.weight @ risk_terms(M, Q, b, bank, activation, aggregation, head_mask, pos_mask)


@precision.matmul("highest", unless_set=True)
def bank_errors(
    banks: Sequence[Bank],
    reference: Bank,
    activation: str,
    states: Sequence[tuple[Float[Array, "H F"], Float[Array, "H H"], Float[Array, " H"]]] | None = None,
    *,
    n_states: int = 6,
    seed: int = 0,
) -> list[float]:
    """How far each bank's drift is from a reference bank's: the largest entry of
    ``|grad R(bank) - grad R(reference)|`` over ``(M, Q, b)`` and the states (the ODE's
    right-hand side is built from this gradient; theory docs, section 4). A way to size ``n_bank``.
    The reference's gradients are computed once for all the banks.

    Args:
        banks: the banks to measure (:func:`make_bank`), of one ``(L, H)``.
        reference: a larger bank standing for the exact expectation.
        activation: the attention activation's name.
        states: ``(M, Q, b)`` triples at which to compare (``None``: ``n_states`` random ones,
            ``M ~ N(0, 0.8^2)``, ``Q = M M^T + A A^T + 0.1 I`` with ``A ~ N(0, 0.5^2)``,
            ``b ~ N(0, 1)``, from NumPy's generator at ``seed``).
        n_states: number of random states (``states=None``).
        seed: seed of the random states.

    Returns:
        The largest absolute difference of each bank, in the order of ``banks``.
    """
    if states is None:
        H, F = reference.z.shape[2], reference.theta.shape[1]
        rng = np.random.default_rng(seed)
        states = []
        for _ in range(n_states):
            M = jnp.asarray(0.8 * rng.normal(size=(H, F)), reference.z.dtype)
            A = jnp.asarray(0.5 * rng.normal(size=(H, H)), reference.z.dtype)
            states.append(
                (M, M @ M.T + A @ A.T + 0.1 * jnp.eye(H, dtype=M.dtype), jnp.asarray(rng.normal(size=H), M.dtype))
            )

    def flat(bk, s):
        return np.concatenate([np.ravel(x) for x in _risk_grad(*s, bk, activation)])

    exact = [flat(reference, s) for s in states]
    return [max(float(np.abs(flat(bk, s) - g).max()) for s, g in zip(states, exact)) for bk in banks]


_risk_grad = jax.jit(jax.grad(risk, argnums=(0, 1, 2)), static_argnums=(4,))


class RiskMinimum(NamedTuple):
    """The end point of :func:`minimise_risk` and its risk; ``grad_norm`` is the size of the
    gradient there (in the ``(M, A, b)`` coordinates), a convergence check.

    Attributes:
        M: overlaps at the minimum, shape ``(H, F)``.
        Q: ``Q = M M^T + A A^T`` at the minimum, shape ``(H, H)``.
        b: biases at the minimum, shape ``(H,)``.
        risk: ``R(M, Q, b)`` there, a scalar.
        grad_norm: the Euclidean norm of the gradient in ``(M, A, b)``, a scalar.
    """

    M: Float[Array, "H F"]
    Q: Float[Array, "H H"]
    b: Float[Array, " H"]
    risk: Float[Array, ""]
    grad_norm: Float[Array, ""]


@precision.matmul("highest", unless_set=True)
def minimise_risk(
    M0: Float[Array, "H F"],
    Q0: Float[Array, "H H"],
    b0: Float[Array, " H"],
    bank: Bank,
    activation: str,
    aggregation: str | None = None,
    head_mask: Bool[Array, " H"] | None = None,
    pos_mask: Bool[Array, " L"] | None = None,
    n_steps: int = 300,
) -> RiskMinimum:
    """A local minimum of ``R(M, Q, b)`` (Spec A, section 3) reached from ``(M0, Q0, b0)`` by
    L-BFGS (optax).

    Only ``Q >= M M^T`` is realisable by keys (``Q - M M^T`` is the Gram matrix of the keys'
    components outside the signal directions), so the search runs on ``(M, A, b)`` with
    ``Q = M M^T + A A^T``. This is the end point gradient flow (the noise-free ODE) converges to
    from a nearby start, without integrating the slow and sometimes stiff approach to it (a
    softmax-1 head switching itself off sends ``b_h -> -inf``). Jit- and vmap-friendly: vmap it
    over starts or over banks scaled to several signal strengths.

    Args:
        M0: starting overlaps ``M``, shape ``(H, F)``.
        Q0: starting overlaps ``Q``, shape ``(H, H)``.
        b0: starting biases, shape ``(H,)``.
        bank: the fixed draws (:func:`make_bank`).
        activation: the attention activation's name.
        aggregation: ``"mean"`` or ``"sum"`` over heads (``None``: the activation's default).
        head_mask: real heads, shape ``(H,)`` (default: all); padded heads start at zero.
        pos_mask: real positions, shape ``(L,)`` (default: all).
        n_steps: number of L-BFGS iterations.

    Returns:
        A :class:`RiskMinimum` with the end point ``(M, Q, b)``, its risk and gradient norm.
    """
    H = M0.shape[0]
    hm = jnp.ones(H, bool) if head_mask is None else head_mask

    def f(p):
        M, A, b = p
        return risk(M, M @ M.T + A @ A.T, b, bank, activation, aggregation, hm, pos_mask)

    R0 = Q0 - M0 @ M0.T
    A0 = _cholesky(0.5 * (R0 + R0.T), hm) * hm[:, None]
    params = (M0 * hm[:, None], A0, b0 * hm)
    opt = optax.lbfgs()
    value_and_grad = optax.value_and_grad_from_state(f)

    def step(carry, _):
        params, state = carry
        value, grad = value_and_grad(params, state=state)
        updates, state = opt.update(grad, state, params, value=value, grad=grad, value_fn=f)
        return (optax.apply_updates(params, updates), state), None

    (params, _), _ = jax.lax.scan(step, (params, opt.init(params)), length=n_steps)
    M, A, b = cast(tuple[Array, Array, Array], params)
    value, g = jax.value_and_grad(f)(params)
    gn = jnp.sqrt(sum(jnp.sum(x**2) for x in jax.tree_util.tree_leaves(g)))
    return RiskMinimum(M, M @ M.T + A @ A.T, b, value, gn)
