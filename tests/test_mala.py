"""The Metropolis-adjusted kernels (``jaxattn.core.kernels.mala``: MALA and HMC): exact
stationary moments on a Gaussian target at a step where SGLD's are visibly off by its closed-form
bias, the cached density refreshed for new data, and a non-finite start flagged."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxattn.core.kernels import mala, sgld

SD = jnp.array([0.5, 1.0, 2.0])  # a Gaussian target N(0, diag(SD^2)) on three coordinates
STEP = 0.2  # h lambda = 0.8 on the narrowest coordinate


def U(x, data):
    return 0.5 * jnp.sum((x / SD) ** 2)


def _variances(kernel_step, init, n_chains=4000, burn_in=200, n_draws=100, thin=5):
    """Per coordinate, the variance of the draws of ``n_chains`` chains from 0, and its standard
    error from the spread of per-chain variances (chains are independent)."""

    @jax.jit
    def run(key):
        def chain(k):
            st = init(jnp.zeros(3))

            def body(i, s):
                return kernel_step(jax.random.fold_in(k, i), s, None, STEP)

            st = jax.lax.fori_loop(0, burn_in, body, st)

            def draw(s, j):
                s = jax.lax.fori_loop(0, thin, lambda i, t: body(burn_in + j * thin + i, t), s)
                return s, s.position

            return jax.lax.scan(draw, st, jnp.arange(n_draws))

        return jax.vmap(chain)(jax.random.split(key, n_chains))

    final, x = run(jax.random.key(0))
    per_chain = np.asarray(jnp.mean(x**2, axis=1))  # the mean is 0 exactly
    return per_chain.mean(0), per_chain.std(0) / np.sqrt(n_chains), final


def test_mala_is_exact_on_a_gaussian_where_sgld_is_biased():
    """SGLD's Euler chain on ``N(0, 1 / lambda)`` at step ``h`` has the stationary variance
    ``1 / (lambda (1 - h lambda / 2))``: 1.67x the target's on the narrowest coordinate at
    ``h = 0.2``. MALA at the same step gives the target's variances within 4 standard errors on
    every coordinate, and SGLD gives its closed form within 4 (and misses the target's by over 20)."""
    k = mala.mala(U)
    var, se, final = _variances(k.step, lambda x: k.init(x, None))
    want = np.asarray(SD**2)
    assert np.all(np.abs(var - want) < 4 * se), (var, want, se)
    rate = float(jnp.mean(final.accepted / final.step))
    assert 0.5 < rate < 1.0, rate  # the step is not so small that acceptance hides a wrong test
    s = sgld.sgld(U)
    var_s, se_s, _ = _variances(s.step, s.init)
    lam = 1 / want
    biased = 1 / (lam * (1 - STEP * lam / 2))
    assert np.all(np.abs(var_s - biased) < 4 * se_s), (var_s, biased, se_s)
    assert abs(var_s[0] - want[0]) > 20 * se_s[0]


def test_hmc_is_exact_on_the_same_gaussian():
    """HMC (four jittered leapfrog steps of ``sqrt(2 h)`` a proposal) on the same target at the
    same step: the target's variances within 4 standard errors on every coordinate, with an
    acceptance that shows the trajectories are long enough to be rejected sometimes."""
    k = mala.hmc(U, n_leapfrog=4)
    var, se, final = _variances(k.step, lambda x: k.init(x, None), burn_in=50, n_draws=100, thin=2)
    want = np.asarray(SD**2)
    assert np.all(np.abs(var - want) < 4 * se), (var, want, se)
    rate = float(jnp.mean(final.accepted / final.step))
    assert 0.3 < rate < 0.99, rate


def test_hmc_names_its_bad_leapfrog_count():
    with pytest.raises(ValueError, match="n_leapfrog"):
        mala.hmc(U, n_leapfrog=0)


def test_refresh_takes_the_new_data_and_a_non_finite_start_is_flagged():
    k = mala.mala(lambda x, d: 0.5 * jnp.sum((x - d) ** 2))
    st = k.init(jnp.ones(2), jnp.zeros(2))
    np.testing.assert_allclose(float(st.logdensity), -1.0)
    st = k.refresh(st, jnp.ones(2))
    assert float(st.logdensity) == 0.0 and np.all(np.asarray(st.logdensity_grad) == 0)
    bad = k.init(jnp.array([jnp.nan, 0.0]), jnp.zeros(2))
    assert bool(bad.diverged)
    after = k.step(jax.random.key(0), bad, jnp.zeros(2), 0.1)
    assert bool(after.diverged) and int(after.accepted) == 0
