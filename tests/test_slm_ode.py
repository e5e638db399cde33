"""The order-parameter ODEs against online SGD, gradient flow and direct minimisation of R."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxattn import engine, slm
from jaxattn.slm import network, ode, priors
from jaxattn.slm import risk as slm_risk
from jaxattn.slm.bayes import bayes_risk
from jaxattn.slm.network import Arch

TIMES = (0.0, 0.5, 1.0, 2.0, 3.0, 4.0)  # the first (unspecialised) phase at eta = 0.5, nu = 4


def ode_config(prior, activation, times, n_bank, D=100, **kw):
    return slm.SLMODEConfig(D=D, prior=prior, activation=activation, times=tuple(times), n_bank=n_bank, **kw)


def point(ds):
    """The arrays of a grid whose only dimensions of size > 1 are seed and noise."""
    return ds.isel(H=0, L=0, eta=0, signal=0)


@pytest.mark.slow  # about 30 s each on 2 cores; .ci/run runs the slow tests too
@pytest.mark.parametrize("activation", ["softmax", "bayes_softmax"])
def test_ode_tracks_online_sgd_in_the_first_phase(activation):
    prior, D, seeds, n_test = priors.onehot(2, 4.0), 2000, 8, 4000
    grid = dict(seed=range(seeds), H=2, L=4, eta=0.5)
    ds = slm.train(slm.SLMConfig(D=D, prior=prior, activation=activation, times=TIMES, n_test=n_test), **grid)
    p = point(ds)
    # each seed's ODE starts from that run's own initial (M, Q, b)
    sol = point(slm.integrate(ode_config(prior, activation, TIMES, 4000, D=D), **grid)).isel(noise=0)
    assert not sol["diverged"].any()
    sim = {"M": p["M"].values, "Q": np.diagonal(p["Q"].values, axis1=-2, axis2=-1), "error": p["error"].values}
    th = {"M": sol["M"].values, "Q": np.diagonal(sol["Q"].values, axis1=-2, axis2=-1), "error": sol["risk"].values}
    for k in sim:
        d = sim[k] - th[k]  # per-seed deviation of the simulation from its own ODE
        mean_dev = np.abs(d.mean(axis=0)).max()
        # Tolerance: online SGD at finite D fluctuates around the ODE by O(eta / sqrt(D)) per
        # run; the seed average leaves a spread of std(d) / sqrt(seeds). Allow 4 of those plus
        # an O(1/D)-and-bank bias of 0.01 (0.02 for the error: the test set of 4000 samples,
        # shared by all seeds, has a standard error near 0.008 at error ~ 0.8).
        spread = d.std(axis=0).max() / np.sqrt(seeds)
        tol = 4 * spread + (0.02 if k == "error" else 0.01)
        assert mean_dev < tol, (k, mean_dev, tol)
    # and the ODE is not trivially close: M moved by much more than the tolerance
    assert np.abs(th["M"][:, -1] - th["M"][:, 0]).max() > 0.1


def test_noise_term_matters_at_large_eta_only():
    prior = priors.onehot(2, 4.0)
    y0 = ode.random_initial_conditions(jax.random.key(0), 2, 2, D=100, n=1)
    # one grid: eta * t = 2 is t = 1 at eta = 2 and t = 40 at eta = 0.05
    sol = slm.integrate(ode_config(prior, "softmax1", (0.0, 1.0, 40.0), 2000), start=y0, seed=0, H=2, L=4,
                        eta=[0.05, 2.0], noise=[1.0, 0.0]).isel(seed=0, H=0, L=0, signal=0)
    assert not sol["diverged"].any()
    dev = {}
    for eta, t in ((0.05, 40.0), (2.0, 1.0)):
        q = sol["Q"].sel(eta=eta, time=t)
        dev[eta] = float(np.abs(q.sel(noise=1.0) - q.sel(noise=0.0)).max())
    # the noise term is O(eta^2) against an O(eta) drift: at eta*t fixed its effect scales like eta
    assert dev[0.05] < 0.01 and dev[2.0] > 0.1 and dev[2.0] > 10 * dev[0.05], dev


@pytest.mark.slow  # long; CI runs it with the slow checks
def test_gradient_flow_fixed_point_matches_direct_minimisation(x64):
    prior = priors.onehot(2, 9.0)
    bank = slm_risk.make_bank(prior, 4, 2, n=1500)  # the bank the ODE's config draws (mc, bank_seed 0)
    y0 = ode.random_initial_conditions(jax.random.key(3), 2, 2, D=50, n=1)
    sol = point(slm.integrate(ode_config(prior, "bayes_softmax", (0.0, 1000.0, 3000.0), 1500, D=50, bank_method="mc"),
                              start=y0,
                              seed=0, H=2, L=4, eta=1.0, noise=0.0)).isel(seed=0, noise=0)
    assert not sol["diverged"].any()
    M_ode, r_ode = sol["M"].values[-1], float(sol["risk"][-1])
    # the ODE has stopped moving ...
    assert abs(float(sol["risk"][-2]) - r_ode) < 1e-3

    # ... at a minimum of R found directly (L-BFGS on (M, A, b) with Q = M M^T + A A^T)
    found = jax.jit(lambda M, Q, b: slm_risk.minimise_risk(M, Q, b, bank, "bayes_softmax", n_steps=200))(
        y0.M[0], y0.Q[0], y0.b[0])
    r_min = float(found.risk)
    assert abs(r_ode - r_min) < 2e-3, (r_ode, r_min)
    order = lambda M: np.sort(np.abs(np.asarray(M)).ravel())  # noqa: E731 (heads may be permuted)
    np.testing.assert_allclose(order(M_ode), order(found.M), atol=0.05)
    # and for Bayes-softmax with H = F this minimum is the Bayes-optimal oracle (Spec A, sec. 4)
    M_or, _, _ = network.oracle_order_parameters(prior)
    # (to the bank's Monte Carlo accuracy: 1500 draws move the minimum by about 0.1)
    np.testing.assert_allclose(order(M_ode), order(M_or), atol=0.2)
    assert abs(r_ode - bayes_risk(prior, 4, n=200_000).risk) < 0.01


@pytest.mark.slow  # several compiles: 10 to 40 s on 2 cores, beyond the default run's share (README)
def test_given_starts_compile_once_and_start_where_given(monkeypatch):
    import equinox as eqx

    counted = eqx.debug.assert_max_traces(ode.advance, max_traces=1)
    monkeypatch.setattr(ode, "advance", counted)
    engine.clear_caches()
    cfg = ode_config(priors.flipped_spike([2.0, 1.0]), "softmax", (0.0, 1.0, 2.0), 500, D=200)  # shapes no other test uses
    y0 = ode.random_initial_conditions(jax.random.key(1), 3, 2, D=200, n=4)
    grid = dict(seed=range(4), H=[2, 3], L=[3, 5], eta=[0.2, 1.0], signal=[0.5, 1.5])
    big = slm.integrate(cfg, start=y0, **grid)
    # other starts and other values of the axes: the same program
    other = slm.integrate(cfg, start=ode.random_initial_conditions(jax.random.key(2), 3, 2, D=200, n=4),
                          **{**grid, "eta": [0.3, 0.7]})
    assert eqx.debug.get_num_traces(counted) == 1
    assert not big["diverged"].any() and not other["diverged"].any()
    # each point starts from its seed's start (its first H heads; a padded head is missing)
    at0 = big.isel(time=0, L=1, eta=1, signal=0, noise=0)
    for s in range(4):
        np.testing.assert_array_equal(at0["M"].sel(seed=s, H=3).values, np.asarray(y0.M[s]))
        np.testing.assert_array_equal(at0["M"].sel(seed=s, H=2).values[:2], np.asarray(y0.M[s, :2]))
        assert np.isnan(at0["M"].sel(seed=s, H=2).values[2]).all()
    assert np.nanmax(np.abs(big["M"].isel(time=-1).values - big["M"].isel(time=0).values)) > 0.01  # it moved


@pytest.mark.slow  # several compiles: 10 to 40 s on 2 cores, beyond the default run's share (README)
def test_given_start_of_the_sgd_run_gives_the_paired_integration():
    """Seed ``s`` started from the ODE's own start of seed ``s`` integrates to the same bits."""
    cfg = ode_config(priors.onehot(2, 4.0), "bayes_softmax", (0.0, 0.5, 1.5), 300)
    paired = point(slm.integrate(cfg, seed=[0, 1], H=2, L=4)).isel(noise=0)
    start = ode.OrderParams(*(paired[k].values[:, 0] for k in ("M", "Q", "b")))
    given = point(slm.integrate(cfg, start=start, seed=[0, 1], H=2, L=4)).isel(noise=0)
    for k in ("M", "Q", "b", "risk"):
        np.testing.assert_array_equal(given[k].values, paired[k].values)


def test_failed_solve_is_reported_per_point_not_raised():
    y0 = ode.random_initial_conditions(jax.random.key(2), 2, 2, D=100, n=2)
    y0 = y0._replace(M=y0.M.at[1, 0, 0].set(jnp.nan))  # a broken start
    # (a vmapped solve runs until its slowest point stops: keep max_steps small for the broken one)
    cfg = ode_config(priors.onehot(2, 4.0), "softmax", (0.0, 5.0037), 200, max_steps=300)
    sol = point(slm.integrate(cfg, start=y0, seed=[0, 1], H=2, L=4)).isel(noise=0)
    # no SGD run to pair with: the times as given, not rounded to SGD's steps at D = 100 (5.0)
    assert list(sol["time"].values) == [0.0, 5.0037]
    assert list(sol["diverged"].values) == [False, True]
    assert np.all(np.isfinite(sol["M"].values[0]))  # the good point is untouched


def test_given_starts_are_checked():
    cfg = ode_config(priors.onehot(2, 4.0), "softmax", (0.0, 1.0), 100)
    y0 = ode.random_initial_conditions(jax.random.key(0), 2, 2, D=100, n=2)
    with pytest.raises(ValueError, match="seed must index the 2 starts"):
        slm.integrate(cfg, start=y0, seed=[0, 2])
    with pytest.raises(ValueError, match="H must be at most the start's 2 heads"):
        slm.integrate(cfg, start=y0, seed=0, H=3)
    with pytest.raises(ValueError, match="start has F = 2 directions, the prior has F = 3"):
        slm.integrate(ode_config(priors.onehot(3, 4.0), "softmax", (0.0, 1.0), 100), start=y0, seed=0)
    with pytest.raises(ValueError, match="start must hold M"):
        slm.integrate(cfg, start=ode.OrderParams(y0.M[0], y0.Q, y0.b), seed=0)
    with pytest.raises(ValueError, match="start is for the ODEs"):
        slm.integrate(slm.SLMSDEConfig(), start=y0, seed=0)


def test_random_initial_conditions_have_the_finite_D_law(x64):
    D, sigma0 = 400, 0.7
    y = ode.random_initial_conditions(jax.random.key(0), 2, 3, D=D, sigma0=sigma0, n=4000)
    np.testing.assert_allclose(np.std(np.asarray(y.M)), sigma0 / np.sqrt(D), rtol=0.03)
    np.testing.assert_allclose(np.mean(np.asarray(y.Q)[:, 0, 0]), sigma0**2, rtol=0.01)
    np.testing.assert_allclose(np.std(np.asarray(y.Q)[:, 0, 1]), sigma0**2 / np.sqrt(D), rtol=0.05)


@pytest.mark.slow  # about 2 to 3 minutes each on 2 cores
@pytest.mark.long
@pytest.mark.parametrize(
    ("activation", "batch", "eta", "bias_lr"),
    # softmax-1 runs at bias_lr = 4 alone: it tracks the ODE through specialisation with the
    # bias step four times the default, which bias_lr = 1 would repeat with smaller moves
    [("softmax", 1, 1.0, 1.0), ("softmax1", 1, 1.0, 4.0), ("bayes_softmax", 1, 1.0, 1.0),
     ("bayes_softmax", 4, 4.0, 1.0)],
)
def test_ode_tracks_online_sgd_through_specialisation(activation, batch, eta, bias_lr):
    """Online SGD against the ODE from each seed's own start, heads matched per seed
    (``slm.compare``), up to ``t = 200``: ``M``, ``diag Q``, the biases ``b`` (softmax-1 and
    Bayes-softmax move them; the bias step is ``bias_lr eta / D``, also at ``bias_lr = 4``) and
    the error. A mini-batch of ``B = 4`` at ``eta = 4`` follows the ODE at ``eta / B = 1``
    (``docs/theory/single_location.md``, section 5).

    The ODE's bank is scrambled Sobol (4096 points): with the 2000-draw Monte Carlo bank the
    bank's own error set the gaps (measured at ``t = 200``: softmax's ``diag Q`` 0.16 off, and
    softmax-1's escape from the saddle late, 0.24 on ``M``), with the Sobol bank they fall to the
    seeds' sampling error (0.05 and 0.02; section 4 of the theory docs).

    Tolerance, at every recorded time: 4 standard errors of the seed mean of the per-seed
    deviation (through the escape the seeds' escape times differ, so this is wide there and narrow
    before and after), plus ``0.01 + 0.01 |ODE|``: the absolute part for the ``O(1/sqrt(D))``
    terms at ``D = 500`` and for the 2000-sample test set shared by the seeds (the error), the
    relative part for the bank's error, which moves softmax's slowly growing ``diag Q`` (4.6 at
    ``t = 200``) by up to 0.04 (measured over banks of 4096 to 16384 points)."""
    from jaxattn.slm import compare as sc

    seeds = 8
    config = slm.SLMODEConfig(D=500, t_max=200.0, n_records=20, prior=priors.onehot(2, 9.0), n_bank=4096,
                              bank_method="sobol", activation=activation, batch_size=batch, n_test=2000,
                              bias_lr=bias_lr)
    c = sc.compare(config, seeds=seeds, H=2, L=4, eta=eta)
    p, th = c.simulation, c.theory
    assert not bool(th["diverged"].any()) and not bool(p["diverged"].any())
    sim = {"M": p["M"].values, "Q": np.diagonal(p["Q"].values, axis1=-2, axis2=-1), "error": p["error"].values}
    ode_ = {"M": th["M"].values, "Q": np.diagonal(th["Q"].values, axis1=-2, axis2=-1), "error": th["risk"].values}
    if activation != "softmax":  # softmax ignores b: it stays 0 in both
        sim["b"], ode_["b"] = p["b"].values, th["b"].values
    for k in sim:
        d = sim[k] - ode_[k]  # (seed, time, ...)
        mean_dev = np.abs(d.mean(axis=0))
        tol = 4 * d.std(axis=0, ddof=1) / np.sqrt(seeds) + 0.01 + 0.01 * np.abs(ode_[k].mean(axis=0))
        bad = mean_dev > tol
        assert not bad.any(), (k, np.argwhere(bad)[:3], mean_dev[bad][:3], tol[bad][:3])
    assert np.abs(ode_["M"][:, -1] - ode_["M"][:, 0]).max() > 1.0  # the heads did specialise
    if "b" in sim:
        # and the biases moved, well past the absolute allowance of 0.01 (Bayes-softmax's least: 0.049)
        assert np.abs(ode_["b"][:, -1]).max() > 0.03


def test_the_bias_step_scales_the_bias_flow_alone(x64):
    """``bias_lr = k`` (SGD's bias step ``k eta / D``) multiplies ``db/dt`` by ``k`` and leaves
    ``dM/dt`` and ``dQ/dt`` as they are (the bias's squared step is ``O(1/D^2)``: no noise term),
    exactly, at a random state of softmax-1; a negative ``bias_lr`` is refused by name. (That the
    engine passes the config's ``bias_lr`` to the ODE is checked against SGD at ``bias_lr = 4``,
    in :func:`test_ode_tracks_online_sgd_through_specialisation`.)"""
    prior = priors.onehot(2, 4.0)
    bank = slm_risk.make_bank(prior, 4, 2, n=500, dtype=jnp.float64)
    k = jax.random.split(jax.random.key(3), 2)
    M = 0.3 * jax.random.normal(k[0], (2, 2), jnp.float64)
    Q = M @ M.T + 0.5 * jnp.eye(2)
    y = ode.OrderParams(M, Q, jnp.array([0.2, -0.1]))
    base = ode.ODEArgs(jnp.float64(0.7), jnp.float64(1.0), jnp.float64(1.0), jnp.ones(2, bool), jnp.ones(4, bool))
    rhs = jax.jit(lambda y, a: ode.rhs(y, a, bank, Arch("softmax1")))
    one, three = (rhs(y, a) for a in (base, base._replace(bias_lr=jnp.float64(3.0))))
    np.testing.assert_array_equal(three.M, one.M)
    np.testing.assert_array_equal(three.Q, one.Q)
    np.testing.assert_allclose(three.b, 3.0 * one.b, rtol=1e-14)
    assert np.abs(np.asarray(one.b)).min() > 1e-3  # the biases do move at this state
    with pytest.raises(ValueError, match="bias_lr"):
        slm.SLMODEConfig(bias_lr=-1.0).validate()


@pytest.mark.slow  # about 30 s on 2 cores (two compiles)
def test_padded_grid_point_equals_its_unpadded_integration():
    """A point padded into a grid of larger ``H`` and ``L`` integrates to its unpadded solution
    within 1e-9, with either bank: the bank of smaller ``(L, H)`` is the larger bank's prefix
    (Sobol: each entry a coordinate of its own, scrambled on its own), the initial keys are drawn
    per head, and the step-size controller's norm counts only real heads. Softmax-1, so that the
    bias dynamics is compared too."""
    for method in ("sobol", "mc"):
        _padded_equals_alone(slm.SLMODEConfig(activation="softmax1", D=500, t_max=4.0, n_records=4, n_bank=512,
                                              bank_method=method))


def _padded_equals_alone(cfg):
    inside = slm.integrate(cfg, seed=[0], H=[2, 3], L=[3, 5], eta=[0.5]).sel(H=2, L=3)
    alone = slm.integrate(cfg, seed=0, H=2, L=3, eta=0.5)
    assert bool(np.isnan(inside["M"].isel(head=2)).all())  # the padded head is reported missing
    for v, sel in (("M", dict(head=[0, 1])), ("Q", dict(head=[0, 1], head_=[0, 1])), ("b", dict(head=[0, 1])),
                   ("risk", {})):
        a, b = alone[v].isel(sel).values.squeeze(), inside[v].isel(sel).values.squeeze()
        assert np.all(np.isfinite(a)) and a.shape == b.shape
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-9, err_msg=v)


@pytest.mark.slow  # four ODE solves at H = 4, L = 6 and a 2^15-point reference, ~45 s
@pytest.mark.long
def test_the_default_sobol_bank_beats_monte_carlo_at_the_same_cost():
    """The default bank against Monte Carlo at equal cost (1024 points), on the ODE through the
    onset of specialisation (Bayes-softmax, ``H = 4``, ``F = 2``, ``L = 6``, ``nu = 7``,
    ``D = 1500``'s start), each against a 2^15-point Sobol reference: measured, Sobol's largest
    error on ``M`` is 0.048 to 0.059 over three bank seeds, Monte Carlo's 0.11 to 1.16.
    (``slm compare``'s gap to online SGD shows the same at 8 seeds, 0.18 with Sobol 4096 against
    0.34 with Monte Carlo 4096, but with a seed standard error of 0.13 to 0.18 it cannot be a
    test; the bank's error is measured here, where it enters.)"""
    base = dict(D=1500, prior=priors.onehot(2, 7.0), activation="bayes_softmax", t_max=60.0, n_records=12)
    grid = dict(seed=[0], H=4, L=6, eta=1.0)

    def M(method, n, seed):
        cfg = slm.SLMODEConfig(**base, n_bank=n, bank_method=method, bank_seed=seed)
        return slm.integrate(cfg, **grid)["M"].values.squeeze()

    assert slm.SLMODEConfig().bank_method == "sobol"
    ref = M("sobol", 2**15, 99)
    err = {m: [float(np.nanmax(np.abs(M(m, 1024, s) - ref))) for s in range(2)] for m in ("sobol", "mc")}
    assert max(err["sobol"]) < 0.07, err
    assert max(err["sobol"]) < min(err["mc"]), err
