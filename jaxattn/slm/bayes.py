"""Bayes-optimal inference in the single-location model (Spec A, section 4).

Given the projections ``chi*_l = x_l . s / sqrt(D)`` of every token on the latent directions, the
posterior over the location is ``p_l = Z(chi*_l) / sum_l' Z(chi*_l')`` with
``Z(c) = E_theta exp(theta . c - |theta|^2 / 2)`` (the prior's :meth:`log_z`). The Bayes
estimator of ``y = x_eps`` is ``sum_l p_l x_l`` and, as ``D -> inf``, its error is
``1 - E[p_eps]``; the Nishimori identity ``E[p_eps] = E[sum_l p_l^2]`` makes
``1 - 2 E[p_eps] + E[sum_l p_l^2]`` an equal second estimate.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, PRNGKeyArray

from jaxattn.core import checks, precision
from jaxattn.core.attention import attention_weights
from jaxattn.slm import priors


@precision.matmul("highest", unless_set=True)
def posterior(
    chi_star: Float[Array, "L F"], prior: priors.Prior, pos_mask: Bool[Array, " L"] | None = None
) -> Float[Array, " L"]:
    """``p_l = Z(chi*_l) / sum_l' Z(chi*_l')``, the posterior probability that token ``l`` is the
    relevant one (Spec A, section 4).

    Args:
        chi_star: the projections ``chi*[l, f] = x_l . s_f / sqrt(D)``, shape ``(L, F)``.
        prior: the latent prior ``P_theta`` (its ``log_z`` is ``log Z``).
        pos_mask: real positions, shape ``(L,)`` (default: all); masked ones get ``p_l = 0``.

    Returns:
        ``p``, shape ``(L,)``, summing to one over the real positions.
    """
    log_z = jax.vmap(prior.log_z)(chi_star)
    # A softmax over positions of log Z: one "head" of the shared attention activation.
    return attention_weights(log_z[None, :], None, "softmax", pos_mask=pos_mask, aggregation="sum")[0]


@precision.matmul("highest", unless_set=True)
def bayes_estimator(
    X: Float[Array, "L D"],
    directions: Float[Array, "F D"],
    prior: priors.Prior,
    pos_mask: Bool[Array, " L"] | None = None,
) -> Float[Array, " D"]:
    """The Bayes estimator ``sum_l p_l x_l`` of ``y = x_eps``, with ``chi*_l = x_l . s / sqrt(D)``
    (Spec A, section 4).

    Args:
        X: the tokens of one sample, shape ``(L, D)``.
        directions: the latent directions ``s_f``, shape ``(F, D)``.
        prior: the latent prior ``P_theta``.
        pos_mask: real positions, shape ``(L,)`` (default: all).

    Returns:
        The estimate, shape ``(D,)``.
    """
    D = X.shape[-1]
    chi_star = X @ directions.T / jnp.sqrt(jnp.asarray(D, X.dtype))
    return posterior(chi_star, prior, pos_mask) @ X


class BayesRisk(NamedTuple):
    """``risk = 1 - E[p_eps]``, the Nishimori twin ``1 - 2E[p_eps] + E[sum p^2]`` and the
    Monte Carlo standard errors of ``E[p_eps]`` and ``E[sum p^2]`` (Spec A, section 4).

    Attributes:
        risk: the Bayes risk ``1 - E[p_eps]``.
        risk_nishimori: its Nishimori twin ``1 - 2 E[p_eps] + E[sum_l p_l^2]``.
        p_eps: the Monte Carlo estimate of ``E[p_eps]``.
        sum_p2: the Monte Carlo estimate of ``E[sum_l p_l^2]``.
        se_p_eps: standard error of ``p_eps``.
        se_sum_p2: standard error of ``sum_p2``.
    """

    risk: float
    risk_nishimori: float
    p_eps: float
    sum_p2: float
    se_p_eps: float
    se_sum_p2: float


def bayes_risk(
    prior: priors.Prior, L: int, *, n: int = 200_000, key: PRNGKeyArray | None = None, chunk: int = 50_000
) -> BayesRisk:
    """The Bayes risk ``1 - E[p_eps]`` (Spec A, section 4) by Monte Carlo over ``(theta, chi*)``, in
    float64 whatever the caller's x64 setting (:func:`jaxattn.core.precision.float64`).
    Discrete priors are stratified over their support (each point in proportion to its weight).

    Args:
        prior: the latent prior ``P_theta``.
        L: sequence length (``>= 2``).
        n: number of Monte Carlo samples, rounded up to a multiple of ``chunk``.
        key: PRNG key of the draws (default ``jax.random.key(0)``).
        chunk: samples per compiled pass.

    Returns:
        A :class:`BayesRisk` with the risk, its Nishimori twin and their Monte Carlo errors.
    """
    L = checks.integer("L", L, 2)
    n = checks.integer("n", n, 2)
    with precision.float64():
        return _bayes_risk(prior, L, n, key, chunk)


def _bayes_risk(prior, L, n, key, chunk) -> BayesRisk:
    key = jax.random.key(0) if key is None else key
    dtype = jnp.result_type(float)
    prior = priors.astype(prior, dtype)
    F = prior.F

    # the prior is an argument, not a closed-over constant: XLA would otherwise fold the
    # stratified draw (a repeat to ``chunk`` rows) at compile time, for seconds
    @jax.jit
    def stats(k, prior):
        k_t, k_z = jax.random.split(k)
        theta = _stratified_theta(prior, k_t, chunk)
        z = jax.random.normal(k_z, (chunk, L, F), dtype)
        chi = z.at[:, 0, :].add(theta)  # eps = 0 by symmetry
        p = jax.vmap(lambda c: posterior(c, prior))(chi)
        a, s = p[:, 0], jnp.sum(p * p, axis=1)
        return jnp.stack([a.mean(), s.mean(), (a * a).mean(), (s * s).mean()])

    n_chunks = max(1, -(-n // chunk))
    m = jnp.mean(jnp.stack([stats(jax.random.fold_in(key, i), prior) for i in range(n_chunks)]), axis=0)
    m = [float(x) for x in m]
    N = n_chunks * chunk
    se_a = ((m[2] - m[0] ** 2) / N) ** 0.5
    se_s = ((m[3] - m[1] ** 2) / N) ** 0.5
    return BayesRisk(1 - m[0], 1 - 2 * m[0] + m[1], m[0], m[1], se_a, se_s)


def _stratified_theta(prior, key, n):
    """``n`` draws of theta; for a discrete prior, support point ``k`` appears in proportion to its
    weight up to rounding, the rest drawn at random (lower variance than plain sampling)."""
    if isinstance(prior, priors.Discrete):
        K = prior.support.shape[0]
        counts = jnp.floor(prior.weights * n).astype(jnp.int32)
        idx = jnp.repeat(jnp.arange(K), counts, total_repeat_length=n)
        filled = jnp.arange(n) < jnp.sum(counts)
        rand = jax.random.categorical(key, jnp.log(prior.weights), shape=(n,))
        return prior.support[jnp.where(filled, idx, rand)]
    return prior.sample(key, (n,))
