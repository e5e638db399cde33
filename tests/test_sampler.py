"""Statistics of the single-location sampler and the priors (Spec A, section 1)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxattn.slm import priors
from jaxattn.slm import task as slm

D, L, F, N = 400, 5, 3, 4000


@pytest.fixture(scope="module")
def samples():
    S = slm.latent_directions(jax.random.key(1), D, F)
    prior = priors.flipped_spike([2.0, 1.0, 0.5], mean=[0.5, 0.0, -1.0])
    keys = jax.random.split(jax.random.key(2), N)
    out = jax.vmap(lambda k: slm.sample(k, S, prior, L))(keys)
    return S, out


def test_directions_orthogonal_with_norm_D():
    S = slm.latent_directions(jax.random.key(0), 300, 4)
    np.testing.assert_allclose(S @ S.T, 300 * np.eye(4), atol=2e-3 * 300)


def test_relevant_token_projection_has_mean_theta_and_unit_variance(samples):
    S, s = samples
    x_eps = s.X[jnp.arange(N), s.eps]
    proj = x_eps @ S.T / np.sqrt(D)
    resid = np.asarray(proj - s.theta)
    # 4 sigma for the mean (se = 1/sqrt(N)), 5% for the variance (se ~ sqrt(2/N) = 2.2%)
    assert np.all(np.abs(resid.mean(0)) < 4 / np.sqrt(N))
    np.testing.assert_allclose(resid.var(0), 1.0, atol=0.07)


def test_noise_tokens_carry_no_signal(samples):
    S, s = samples
    mask = np.arange(L)[None, :] != np.asarray(s.eps)[:, None]
    proj = np.asarray(jnp.einsum("nld,fd->nlf", s.X, S) / np.sqrt(D))[mask]
    assert np.all(np.abs(proj.mean(0)) < 4 / np.sqrt(len(proj)))
    np.testing.assert_allclose(proj.var(0), 1.0, atol=0.05)


def test_location_uniform(samples):
    _, s = samples
    counts = np.bincount(np.asarray(s.eps), minlength=L)
    expected = N / L
    assert np.all(np.abs(counts - expected) < 4 * np.sqrt(expected))


def test_padding_L_does_not_change_real_tokens():
    S = slm.latent_directions(jax.random.key(0), 50, 2)
    p = priors.onehot(2, 4.0)
    a = slm.sample(jax.random.key(5), S, p, 3)
    b = slm.sample(jax.random.key(5), S, p, 3, L_max=7)
    np.testing.assert_array_equal(a.X, b.X[:3])
    assert int(a.eps) == int(b.eps)


@pytest.mark.parametrize(
    "prior",
    [
        priors.discrete([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]], [0.2, 0.5, 0.3]),
        priors.flipped_spike([1.5, 0.5], mean=[0.3, -0.2]),
        priors.gaussian([0.5, -1.0], [[2.0, 0.6], [0.6, 1.0]]),
    ],
    ids=["discrete", "flipped", "gaussian"],
)
def test_prior_moments_and_log_z(prior):
    th = np.asarray(prior.sample(jax.random.key(0), (100_000,)), float)
    np.testing.assert_allclose(th.mean(0), prior.mean(), atol=0.03)
    np.testing.assert_allclose(np.cov(th.T), prior.cov(), atol=0.05)
    # log Z(c) = log E exp(theta.c - |theta|^2/2), checked against the Monte Carlo average
    c = np.array([0.7, -0.4])
    mc = np.log(np.mean(np.exp(th @ c - 0.5 * (th**2).sum(1))))
    np.testing.assert_allclose(float(prior.log_z(jnp.asarray(c))), mc, atol=0.02)
