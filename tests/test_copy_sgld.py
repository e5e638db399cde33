"""SGLD on exp(-N U): the kernel against blackjax.sgld, against a NUTS reference (float64), and
divergence flagged (Spec B, section 4)."""

import blackjax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxattn import copyhead as cp
from jaxattn.copyhead import network, task
from jaxattn.copyhead.sampling import nuts_reference
from jaxattn.core.kernels import sgld

SMALL = cp.CopyConfig(L=4, V=2)


def _small_stats(P=16):
    X = task.one_hot(task.tokens(cp.data.data_key(0), P, 4, 2), 2)
    return network.stats(X)


def test_sgld_takes_the_steps_of_blackjax_sgld():
    """Equal step sizes: the kernel is blackjax's Euler step (same noise from the same key)."""
    arch, st = SMALL.arch, _small_stats()
    N, eps = 2.0, 1e-3
    mine = sgld.sgld(lambda p, d: network.loss(p, d, arch), N)
    bj = blackjax.sgld(lambda p, d: jax.grad(lambda q: -N * network.loss(q, d, arch))(p))
    p0 = network.init(jax.random.key(0), arch, 0.5)

    @jax.jit
    def both(key):
        def body(carry, k):
            s, q = carry
            return (mine.step(k, s, st, eps), bj.step(k, q, st, eps)), None

        (s, q), _ = jax.lax.scan(body, (mine.init(p0), bj.init(p0)), jax.random.split(key, 200))
        return s, q

    s, q = both(jax.random.key(1))
    assert not bool(s.diverged)
    for a, b in zip(s.position, q):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_per_block_sgld_matches_blackjax_in_distribution():
    """Different step sizes for G and W (which blackjax cannot take) and independent noise:
    the two samplers agree on the stationary mean and variance of the order parameters."""
    arch, st = SMALL.arch, _small_stats()
    kernel = sgld.sgld(lambda p, d: network.loss(p, d, arch), 1.0)
    bj = blackjax.sgld(lambda p, d: jax.grad(lambda q: -network.loss(q, d, arch))(p))
    obs = lambda p, d: dict(network.order_parameters(p.G, arch), U=network.loss(p, d, arch))  # noqa: E731
    n_chains, burn, n_kept, thin = 128, 1000, 100, 20
    p0 = network.CopyParams(jnp.zeros((4, 4)), jnp.zeros((2, 2)))

    @jax.jit
    def mine(keys):
        eps = network.CopyParams(jnp.float32(0.01), jnp.float32(0.004))
        return jax.vmap(lambda k: sgld.run_chain(kernel, obs, k, kernel.init(p0), st, eps, burn, n_kept, thin)[1])(keys)

    @jax.jit
    def theirs(keys):
        def chain(key):
            def step(q, i):
                q = bj.step(jax.random.fold_in(key, i), q, st, 0.004)
                return q, q
            _, qs = jax.lax.scan(step, p0, jnp.arange(burn + n_kept * thin))
            qs = jax.tree_util.tree_map(lambda x: x[burn + thin - 1::thin], qs)
            return jax.vmap(lambda q: obs(q, st))(qs)
        return jax.vmap(chain)(keys)

    a = jax.device_get(mine(jax.random.split(jax.random.key(2), n_chains)))
    b = jax.device_get(theirs(jax.random.split(jax.random.key(3), n_chains)))
    for k in ("prev_weight", "aG", "U"):
        ma, mb = a[k].mean(1), b[k].mean(1)  # chain means: independent
        se = np.sqrt(ma.var(ddof=1) / n_chains + mb.var(ddof=1) / n_chains)
        assert abs(ma.mean() - mb.mean()) < 4 * se + 0.01 * abs(mb.mean()), (k, ma.mean(), mb.mean(), se)
        va, vb = a[k].var(), b[k].var()
        assert abs(va - vb) < 0.15 * vb, (k, va, vb)


@pytest.mark.slow  # long; CI runs it with the slow checks
def test_sgld_agrees_with_nuts_on_small_case():
    """L = 4, V = 2, P = 16, N = 1. Measured: prev_weight 0.287 +- 0.0015 (NUTS) against
    0.290 +- 0.0036 (SGLD), U 13.32 +- 0.08 against 13.34 +- 0.07."""
    ref = nuts_reference(SMALL, 16, n_warmup=400, n_samples=800, n_chains=4)
    ds = cp.sample(SMALL, cp.SGLDConfig(n_chains=64, n_steps=4000, burn_in=1000, thin=10, step_fraction=0.02),
                   P=[16], start=["uniform"])
    assert int(ds["diverged"].sum()) == 0
    for k in ("prev_weight", "aG", "U"):
        s = cp.posterior_summary(ds, k).sel(P=16, start="uniform")
        se = float(np.hypot(s["se"], ref[f"{k}_se"]))
        # Monte Carlo error plus the O(eps) bias of the Euler discretisation (about 1%)
        assert abs(float(s["mean"]) - ref[f"{k}_mean"]) < 4 * se + 0.01 * abs(ref[f"{k}_mean"]), (k, float(s["mean"]), ref[f"{k}_mean"], se)


@pytest.mark.slow  # about 21 s: the default run stays under 10 minutes
def test_both_starts_and_divergence_is_flagged():
    ok = cp.sample(SMALL, cp.SGLDConfig(n_chains=4, n_steps=200, burn_in=100, thin=10), P=[8, 32])
    assert dict(ok.sizes) == {"P": 2, "start": 2, "chain": 4, "draw": 20}
    assert not bool(ok["diverged"].any()) and np.all(np.isfinite(ok["prev_weight"].values))
    copy_start = cp.experiments._sgld.start_params(SMALL.arch, "copy", SMALL.c_copy)
    assert float(network.order_parameters(copy_start.G, SMALL.arch)["prev_weight"]) > 0.9
    bad = cp.sample(SMALL, cp.SGLDConfig(n_chains=4, n_steps=200, burn_in=100, thin=10, eps_W=50.0), P=[8, 32])
    assert bool(bad["diverged"].all())  # flagged, not a silent NaN
    assert np.all(np.isnan(bad["prev_weight"].values))
    summ = cp.posterior_summary(bad)
    assert int(summ["n_diverged"].sum()) == bad["diverged"].size


def test_nuts_reference_names_a_bad_start():
    with pytest.raises(ValueError, match="start"):
        nuts_reference(SMALL, 16, start="random")  # the starts are named as the SGLD experiment's
