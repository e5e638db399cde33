"""Copy task (Spec B, sections 1-2): data, the network's loss, exact fits and validation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxattn import copyhead as cp
from jaxattn.copyhead import network, task


def _data(n, L, V, seed=0):
    return task.one_hot(task.tokens(jax.random.key(seed), n, L, V), V)


def test_targets_are_shifted_inputs():
    X = _data(20, 6, 3)
    Y = task.targets(X)
    for l in range(6):
        np.testing.assert_array_equal(Y[:, l], X[:, (l - 1) % 6])
    np.testing.assert_array_equal(task.shift_matrix(6) @ X[0], Y[0])
    assert not bool(task.loss_positions(6, cyclic=False)[0])
    # sequence i does not depend on how many are drawn: padding P keeps the real samples
    np.testing.assert_array_equal(task.tokens(jax.random.key(3), 7, 5, 4), task.tokens(jax.random.key(3), 30, 5, 4)[:7])


def test_token_frequencies_uniform():
    V, n, L = 5, 4000, 8
    t = np.asarray(task.tokens(jax.random.key(1), n, L, V)).ravel()
    counts = np.bincount(t, minlength=V)
    chi2 = np.sum((counts - t.size / V) ** 2 / (t.size / V))
    assert chi2 < 18.5  # chi^2 with 4 dof: p = 0.001
    # pairs (l-1, l) independent: the joint frequencies factorise too
    pairs = np.asarray(task.tokens(jax.random.key(1), n, L, V))
    joint = np.bincount(pairs[:, :-1].ravel() * V + pairs[:, 1:].ravel(), minlength=V * V)
    e = joint.sum() / V**2
    assert np.sum((joint - e) ** 2 / e) < 60  # chi^2 with 24 dof: p ~ 1e-4


@pytest.mark.parametrize("attention", ["softmax", "linear"])
@pytest.mark.parametrize("cyclic", [True, False])
def test_loss_from_counts_matches_per_sequence_network(attention, cyclic):
    arch = network.CopyArch(L=5, V=3, attention=attention, cyclic=cyclic, beta=1.7, omega=0.6, sigma_G2=2.0)
    X = _data(40, 5, 3)
    mask = jnp.arange(40) < 33
    p = network.init(jax.random.key(2), arch, sigma0=1.0)
    st = network.stats(X, mask)
    Y, pos = task.targets(X), task.loss_positions(5, cyclic)

    def direct(p):
        F = jax.vmap(lambda x: network.predict(p, x, arch))(X)
        data = jnp.sum(((F - Y) ** 2).sum(-1) * pos * mask[:, None])
        return arch.beta / (2 * arch.L) * data + jnp.sum(p.W**2) / (2 * arch.omega) + jnp.sum(p.G**2) / (2 * arch.sigma_G2)

    np.testing.assert_allclose(network.loss(p, st, arch), direct(p), rtol=1e-5)
    g1, g2 = jax.grad(network.loss)(p, st, arch), jax.grad(direct)(p)
    for a, b in zip(g1, g2):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_linear_copy_attention_fits_exactly():
    L, V = 8, 4
    arch = network.CopyArch(L=L, V=V, attention="linear")
    S = task.shift_matrix(L)
    G = L * S  # A = G / L = S
    np.testing.assert_allclose(network.attention(G, arch), S)
    st = network.stats(_data(300, L, V))
    W = network.optimal_readout(network.attention(G, arch), st, arch, omega=jnp.inf)
    np.testing.assert_allclose(W, jnp.eye(V), atol=1e-5)
    p = network.CopyParams(G, W)
    assert float(network.error(p, st, arch)) < 1e-5
    X = _data(5, L, V, seed=9)
    np.testing.assert_allclose(jax.vmap(lambda x: network.predict(p, x, arch))(X), task.targets(X), atol=1e-5)
    o = network.order_parameters(G, arch)
    np.testing.assert_allclose([o["prev_weight"], o["a1"], o["aG"]], [1.0, 0.0, 1.0], atol=1e-6)


def test_uniform_attention_explains_one_over_L():
    """A = 11^T/L pools the mean token; the best readout explains 1/L of the target variance
    around its mean (1 - 1/V per position), so the error is (1 - 1/V)(1 - 1/L)."""
    L, V, n = 8, 4, 20000
    arch = network.CopyArch(L=L, V=V, attention="softmax")
    G = jnp.zeros((L, L))
    o = network.order_parameters(G, arch)
    np.testing.assert_allclose([o["prev_weight"], o["a1"], o["aG"]], [1 / L, 1.0, 0.0], atol=1e-6)
    st = network.stats(_data(n, L, V))
    W = network.optimal_readout(network.attention(G, arch), st, arch, omega=jnp.inf)
    err = float(network.error(network.CopyParams(G, W), st, arch))
    explained = 1.0 - err / (1.0 - 1.0 / V)
    # sampling error of the fitted fraction ~ sqrt(V^2 / (n L)) / (1 - 1/V) ~ 0.005 here
    assert abs(explained - 1.0 / L) < 0.02, explained


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(V=1), "V"), (dict(L=1), "L"), (dict(sigma_G2=0.0), "sigma_G2"), (dict(omega=-1.0), "omega"),
        (dict(beta=0.0), "beta"), (dict(attention="relu"), "attention"), (dict(linear_norm="x"), "linear_norm"),
        (dict(lr=0.0), "lr"), (dict(n_steps=0), "n_steps"), (dict(n_test=0), "n_test"),
        (dict(L=2.5), "L"),
    ],
)
def test_invalid_config_names_parameter(kwargs, name):
    with pytest.raises(ValueError, match=name):
        cp.train(cp.CopyConfig(**kwargs), P=[10], seed=[0])


@pytest.mark.parametrize(
    "kwargs, name",
    [(dict(P=[0]), "P"), (dict(P=[10, 10]), "P"), (dict(seed=[-1]), "seed"), (dict(init=["warm"]), "init"),
     (dict(P=[]), "P")],
)
def test_invalid_grid_names_parameter(kwargs, name):
    with pytest.raises(ValueError, match=name):
        cp.train(cp.CopyConfig(L=4, V=2), **{"P": [10], "seed": [0], **kwargs})


@pytest.mark.parametrize(
    "kwargs, name",
    [(dict(N=0.0), "N"), (dict(N=-1.0), "N"), (dict(eps_G=0.0), "eps_G"), (dict(eps_W=-1e-3), "eps_W"),
     (dict(thin=0), "thin"), (dict(n_chains=0), "n_chains"), (dict(burn_in=-1), "burn_in"),
     (dict(step_fraction=0.0), "step_fraction")],
)
def test_invalid_sampler_names_parameter(kwargs, name):
    with pytest.raises(ValueError, match=name):
        cp.sample(cp.CopyConfig(L=4, V=2), cp.SGLDConfig(**kwargs), P=[10])
