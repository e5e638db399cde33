"""Bayes-optimal error of the single-location model (Spec A, sections 4 and 6)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxattn import slm
from jaxattn.slm import network, priors, task
from jaxattn.slm import risk as slm_risk
from jaxattn.slm.bayes import bayes_estimator, bayes_risk


@pytest.mark.parametrize("nu, expected", [(1, 0.642), (4, 0.343), (9, 0.103), (16, 0.018)])
def test_bayes_risk_onehot_calibration(x64, nu, expected):
    r = bayes_risk(priors.onehot(2, nu), 4, n=400_000)
    assert abs(r.risk - expected) < 0.005
    assert r.se_p_eps < 0.001  # the tolerance is not eaten by Monte Carlo noise


@pytest.mark.parametrize(
    "prior",
    [
        priors.onehot(3, 4.0),
        priors.discrete([[2.0, 0.0], [0.0, -1.0], [1.0, 1.0]], [0.5, 0.25, 0.25]),
        priors.flipped_spike([2.0, 1.0], mean=[0.5, 0.0]),
        priors.gaussian([1.0, 0.0], [[3.0, 0.5], [0.5, 1.0]]),
    ],
    ids=["onehot3", "discrete", "flipped", "gaussian"],
)
def test_nishimori_identity(x64, prior):
    r = bayes_risk(prior, 5, n=200_000)
    # E[p_eps] = E[sum_l p_l^2]; 4 standard errors of the two estimates
    assert abs(r.p_eps - r.sum_p2) < 4 * (r.se_p_eps + r.se_sum_p2)
    assert 0 < r.risk < 1


def test_oracle_bayes_softmax_is_the_bayes_estimator():
    S = task.latent_directions(jax.random.key(0), 300, 2)
    prior = priors.discrete([[3.0, 0.0], [0.0, 2.0], [-1.0, -1.0]], [0.5, 0.3, 0.2])
    oracle = network.oracle_bayes_softmax(prior, S)
    for i in range(5):
        s = task.sample(jax.random.key(i), S, prior, 6)
        np.testing.assert_allclose(
            network.predict(oracle, s.X, network.Arch("bayes_softmax")), bayes_estimator(s.X, S, prior),
            rtol=1e-4, atol=1e-5,
        )


@pytest.mark.slow  # long; CI runs it with the slow checks
def test_oracle_reaches_bayes_risk_in_theory_and_simulation(x64):
    prior = priors.onehot(2, 9.0)
    br = bayes_risk(prior, 4, n=400_000)
    M, Q, b = network.oracle_order_parameters(prior)
    bank = slm_risk.make_bank(prior, 4, 2, n=100_000)
    r_theory = float(slm_risk.risk(M, Q, b, bank, "bayes_softmax"))
    assert abs(r_theory - br.risk) < 0.005

    # simulation at D = 1000 (float32): the oracle network's measured test error
    S = task.latent_directions(jax.random.key(0), 1000, 2, dtype=jnp.float32)
    p32 = priors.astype(prior, jnp.float32)
    oracle = network.oracle_bayes_softmax(p32, S)
    mean, se = slm.task.measure_error(lambda X: network.predict(oracle, X, network.Arch("bayes_softmax")), S, p32, 4, n=20_000)
    assert abs(mean - br.risk) < 4 * se + 0.005
