"""Greedy head pruning (Spec A, section 5)."""

import jax.numpy as jnp
import numpy as np
import pytest

from jaxattn import slm
from jaxattn.core.attention import ACTIVATIONS
from jaxattn.slm import priors
from jaxattn.slm import risk as slm_risk
from jaxattn.slm.pruning import prune_greedy

PRIOR = priors.onehot(2, 9.0)


@pytest.fixture(scope="module")
def bayes_softmax_H4():
    config = slm.SLMConfig(D=200, prior=PRIOR, t_max=200.0, n_records=3, n_test=256)
    ds = slm.train(config, seed=[0, 1], H=4, L=4, eta=1.0)
    return ds.isel(H=0, L=0, eta=0, signal=0, time=-1)


def test_pruning_bayes_softmax_H4_F2(x64, bayes_softmax_H4):
    bank = slm_risk.make_bank(PRIOR, 4, 4, n=20_000)
    for s in range(2):
        p = bayes_softmax_H4.isel(seed=s)
        M, Q, b = p["M"].values, p["Q"].values, p["b"].values
        r = prune_greedy(M, Q, b, bank, "bayes_softmax")
        assert r.risk.shape == (4,) and sorted(set(r.removed)) == sorted(r.removed)
        # removing H - F = 2 heads costs little ...
        assert r.risk[2] - r.risk[0] < 0.02, r.risk
        # ... the two survivors are each the only head aligned with its direction ...
        alive = sorted(set(range(4)) - set(r.removed[:2]))
        top = np.argmax(np.abs(M[alive]), axis=1)
        assert sorted(top) == [0, 1] and np.all(np.abs(M[alive, top]) > 2.0)
        # ... and removing either of them costs a lot
        for h in alive:
            mask = np.isin(np.arange(4), [a for a in alive if a != h])
            cost = float(slm_risk.risk(M, Q, b, bank, "bayes_softmax", head_mask=jnp.asarray(mask))) - r.risk[2]
            assert cost > 0.2, (h, cost)


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_pruning_curve_for_every_activation(x64, activation):
    rng = np.random.default_rng(0)
    M = rng.normal(0, 1.5, (3, 2))
    Q = M @ M.T + 0.3 * np.eye(3)
    b = rng.normal(0, 0.5, 3)
    bank = slm_risk.make_bank(PRIOR, 4, 3, n=5_000)
    r = prune_greedy(M, Q, b, bank, activation)
    full = float(slm_risk.risk(M, Q, b, bank, activation))
    np.testing.assert_allclose(r.risk[0], full, rtol=1e-10)
    # each step is the best single removal: no other remaining head does better
    alive = np.ones(3, bool)
    alive[r.removed[0]] = False
    others = [h for h in range(3) if h != r.removed[0]]
    for h in others:
        m = np.ones(3, bool)
        m[h] = False
        assert float(slm_risk.risk(M, Q, b, bank, activation, head_mask=jnp.asarray(m))) >= r.risk[1] - 1e-12
    assert np.all(np.isfinite(r.risk))
