"""The finite-D order-parameter SDE (``jaxattn.slm.sde``): its per-sample increment covariance
against the increments of real online-SGD steps, its coordinates, its D -> inf limit (the ODE),
and its escape-time distribution against online SGD's (slow)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxprs import equations

from jaxattn import slm
from jaxattn.core.attention import prefix_mask
from jaxattn.slm import network, ode, priors, sde, sgd, task
from jaxattn.slm.network import Arch
from jaxattn.slm.risk import make_bank


def test_flatten_round_trip():
    k = jax.random.split(jax.random.key(0), 3)
    A = jax.random.normal(k[1], (3, 3))
    y = ode.OrderParams(jax.random.normal(k[0], (3, 2)), A + A.T, jax.random.normal(k[2], (3,)))
    v = sde.flatten(y)
    assert v.shape == (sde.n_coordinates(3, 2),) == (3 * 2 + 6 + 3,)
    back = sde.unflatten(v, 3, 2)
    for a, b in zip(back, y):
        np.testing.assert_array_equal(a, b)


def test_psd_sqrt_clips_negative_eigenvalues():
    V = np.linalg.qr(np.random.default_rng(0).normal(size=(4, 4)))[0]
    S = (V * np.array([4.0, 1.0, 0.0, -1e-3])) @ V.T
    with jax.enable_x64(True):
        R = np.asarray(sde.psd_sqrt(jnp.asarray(S)))
    np.testing.assert_allclose(R, R.T, atol=1e-12)
    np.testing.assert_allclose(R @ R, (V * np.array([4.0, 1.0, 0.0, 0.0])) @ V.T, atol=1e-6)


@pytest.mark.slow  # 20 s each: 16000 SGD steps at D = 4000
@pytest.mark.parametrize("activation", ["bayes_softmax", "softmax1"])
def test_increment_covariance_matches_sgd_steps(activation):
    """``Sigma(y)`` against the empirical covariance of ``D (y' - y)`` over 16000 independent
    single SGD steps from one state at ``D = 4000`` (the real update: ``sgd.update``).

    Independent numbers: the sampling error of a covariance over N steps is about ``sqrt(2 / N)``
    = 1.1% relative, the bank's (20000 draws) about 1%, and the finite-D terms the SDE drops are
    ``O(1/sqrt(D))`` = 1.6% relative; measured 3.0% (Bayes-softmax) and 2.6% (softmax-1); the test allows 6% on the Frobenius norm."""
    with jax.enable_x64(True):
        D, H, L, F, eta, N = 4000, 2, 4, 2, 0.7, 16000
        prior = priors.onehot(F, 4.0)
        dirs = task.latent_directions(jax.random.key(1), D, F, jnp.float64)
        # a state on the way to specialisation: head 0 partly on s_0, head 1 weakly on s_1
        M = jnp.array([[0.8, 0.1], [0.2, 0.5]])
        Q = M @ M.T + jnp.array([[0.6, 0.1], [0.1, 0.9]])
        keys = network.keys_from_order_parameters(jax.random.key(2), M, Q, dirs)
        params = network.MultiHead(keys, jnp.array([0.3, -0.2]))
        cfg = sgd.SGDConfig(D, H, L, Arch(activation))
        rp = sgd.RunParams(jax.random.key(0), jax.random.key(0), jnp.asarray(eta), jnp.asarray(1.0), jnp.asarray(H),
                           jnp.asarray(L))
        state = sgd.SGDState(params, jnp.zeros((), jnp.int32), jnp.zeros((), bool))
        y0 = sde.flatten(ode.OrderParams(*network.order_parameters(params, dirs), params.bias))

        @jax.jit
        def increments(k):
            def one(kk):
                d = task.draw(kk, prior, L, D, jnp.float64)
                new = sgd.update(cfg, dirs, state, rp, jax.tree_util.tree_map(lambda x: x[None], d))
                p = new.params
                return D * (sde.flatten(ode.OrderParams(*network.order_parameters(p, dirs), p.bias)) - y0)

            return jax.vmap(one)(jax.random.split(k, 1000))

        xi = np.concatenate([np.asarray(increments(jax.random.fold_in(jax.random.key(3), i))) for i in range(N // 1000)])
        emp = np.cov(xi, rowvar=False)
        bank = make_bank(prior, L, H, n=20000, key=jax.random.key(4), dtype=jnp.float64)
        u = sde.direction_draws(jax.random.key(5), bank, F)
        y = sde.unflatten(y0, H, F)
        args = ode.ODEArgs(jnp.asarray(eta), jnp.asarray(1.0), jnp.asarray(1.0), prefix_mask(H, H), prefix_mask(L, L))
        Sigma = np.asarray(sde.increment_covariance(y, args, bank, u, Arch(activation)))
    rel = np.linalg.norm(Sigma - emp) / np.linalg.norm(emp)
    assert rel < 0.06, (rel, np.round(Sigma, 3), np.round(emp, 3))
    # the bias coordinates carry the increments' variance too (softmax-1 and Bayes-softmax use b)
    assert np.all(np.diag(emp)[-H:] > 0.0)


@pytest.mark.slow  # 20 s: 400 Euler-Maruyama steps against Dopri5
def test_sde_tends_to_the_ode_as_D_grows():
    """At ``D = 10^12`` the noise is ``1e-6`` of its ``D = 1`` size: the SDE is Euler's method on the
    ODE, which the adaptive Dopri5 solution matches to ``O(dt)`` (``dt = 0.005``: 3e-5 here)."""
    H, L, F = 2, 4, 2
    with jax.enable_x64(True):
        bank = make_bank(priors.onehot(F, 4.0), L, H, n=500, dtype=jnp.float64)
        u = sde.direction_draws(jax.random.key(1), bank, F)
        y0 = jax.tree_util.tree_map(lambda x: x[0], ode.random_initial_conditions(jax.random.key(2), H, F, D=200))
        args = ode.ODEArgs(jnp.asarray(0.5), jnp.asarray(1.0), jnp.asarray(1.0), prefix_mask(H, H), prefix_mask(L, L))
        arch = Arch("bayes_softmax")
        y_ode, ok_ode = ode.advance(y0, args, bank, 0.0, 2.0, arch, 1e-8, 1e-10, 10000, None)
        y_sde, ok_sde = sde.advance(y0, args, bank, u, jax.random.key(3), 0.0, 2.0, 2.0, 10**12, 0.005, arch, 500)
    assert bool(ok_ode) and bool(ok_sde)
    dev = max(float(jnp.abs(a - b).max()) for a, b in zip(y_sde, y_ode))
    moved = float(jnp.abs(y_ode.M - y0.M).max())
    assert moved > 0.05 and dev < 1e-4, (moved, dev)  # measured: moved 0.088, dev 3.1e-5


def test_an_interval_holds_no_host_callback_and_fails_by_nan_outside_its_path():
    """One interval of the SDE, traced at traced ends (as the engine steps it): no host callback,
    so its program can be exported and kept in JAX's persistent cache; equinox's error mode is
    back to what it was after the trace. An interval past the Brownian path's end, where diffrax's
    check fails, gives ``NaN`` and ``ok = False`` instead of raising."""
    import equinox._errors as errors

    H, L, F = 2, 4, 2
    bank = make_bank(priors.onehot(F, 4.0), L, H, n=64)
    u = sde.direction_draws(jax.random.key(1), bank, F)
    y0 = jax.tree_util.tree_map(lambda x: x[0], ode.random_initial_conditions(jax.random.key(2), H, F, D=200))
    args = ode.ODEArgs(jnp.asarray(0.5), jnp.asarray(1.0), jnp.asarray(1.0), prefix_mask(H, H), prefix_mask(L, L))

    def interval(t0, t1):
        return sde.advance(y0, args, bank, u, jax.random.key(3), t0, t1, 1.0, 100, 0.1, Arch("softmax1"), 20)

    before = errors.EQX_ON_ERROR
    traced = jax.make_jaxpr(interval)(0.0, 0.5)
    assert [e.primitive.name for e in equations(traced) if "callback" in e.primitive.name] == []
    assert errors.EQX_ON_ERROR == before
    y, ok = jax.jit(interval)(0.5, 1.0)
    assert bool(ok) and all(bool(jnp.isfinite(x).all()) for x in y)
    y, ok = jax.jit(interval)(0.5, 1.5)  # the path ends at 1.0
    assert not bool(ok) and all(bool(jnp.isnan(x).all()) for x in y)


@pytest.mark.slow
@pytest.mark.long  # about a minute on 2 cores (94 s on a slow day)
def test_sde_escape_times_match_online_sgd():
    """The escape time from the unspecialised saddle (``compare.escape_time``) over 24 seeds at
    ``D = 500`` (Bayes-softmax, ``H = 2``, one-hot ``F = 2``, ``nu = 9``, ``B = 4`` at ``eta = 4``):
    the SDE's mean and standard deviation against online SGD's, within 2.5 combined standard errors
    (normal approximation: ``sd / sqrt(n)`` for the mean, ``sd / sqrt(2 (n - 1))`` for the sd).
    Measured: SGD 23.9 +- 7.6, SDE 22.8 +- 5.5 (``dt = 0.1``, 1000-draw bank)."""
    from jaxattn.slm.compare import escape_time

    n = 24
    base = dict(D=500, prior=priors.onehot(2, 9.0), batch_size=4, times=tuple(np.arange(0, 60.01, 0.5)), n_test=8)
    grid = dict(seed=list(range(n)), H=2, L=4, eta=4.0)
    p = slm.train(slm.SLMConfig(**base), **grid)
    s = slm.integrate(slm.SLMSDEConfig(**base, n_bank=1000, dt=0.1), **grid)
    e_sgd = escape_time(p["M"].values.reshape(n, -1, 2, 2), p["time"].values)
    e_sde = escape_time(s["M"].values.reshape(n, -1, 2, 2), s["time"].values)
    assert np.isfinite(e_sde).all() and np.isfinite(e_sgd).sum() >= n - 1
    a, b = e_sgd[np.isfinite(e_sgd)], e_sde
    se_mean = np.hypot(a.std(ddof=1) / np.sqrt(a.size), b.std(ddof=1) / np.sqrt(b.size))
    se_sd = np.hypot(a.std(ddof=1) / np.sqrt(2 * (a.size - 1)), b.std(ddof=1) / np.sqrt(2 * (b.size - 1)))
    assert abs(a.mean() - b.mean()) < 2.5 * se_mean, (a.mean(), b.mean(), se_mean)
    assert abs(a.std(ddof=1) - b.std(ddof=1)) < 2.5 * se_sd, (a.std(ddof=1), b.std(ddof=1), se_sd)
