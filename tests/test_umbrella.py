"""Umbrella sampling and MBAR (``jaxattn.core.umbrella``): the profile of a one-dimensional double
well against its exact free energy, the windows' checks, and flagged divergent windows."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxattn.core import umbrella

H = 4.0  # barrier height of U(x) = H (x^2 - 1)^2, in units of the reduced potential (N = 1)


def U(x, data):
    return H * (x**2 - 1.0) ** 2


def _exact(edges):
    """``-ln`` of each bin's probability under ``exp(-U)``, by fine quadrature, from its lowest bin."""
    x = np.linspace(edges[0], edges[-1], 200_001)
    p = np.exp(-H * (x**2 - 1.0) ** 2)
    idx = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, len(edges) - 2)
    mass = np.bincount(idx, weights=p, minlength=len(edges) - 1)
    F = -np.log(mass)
    return F - F.min()


def test_double_well_profile_within_its_error(sample_windows):
    """17 windows over [-1.6, 1.6], 4 chains each, SGLD at step 2e-4 (its discretisation bias on
    ``F`` is about ``step * U'' / 2 ~ 0.01`` here). The MBAR profile on 16 bins matches the exact
    binned ``F`` within 3 of its standard errors plus 0.05 at every bin, across the barrier of 4
    (measured: at most 2.0 standard errors)."""
    w = umbrella.windows(-1.6, 1.6, 17)
    start = jnp.asarray(w.centers)
    draws = sample_windows(U, lambda x: x, 1.0, w, start, None, jax.random.key(0), 2e-4,
                              n_chains=4, burn_in=2000, n_draws=400, thin=50)
    assert draws.a.shape == (17, 4, 400) and not bool(draws.diverged.any())
    edges = np.linspace(-1.6, 1.6, 17)
    prof = umbrella.profile(draws, w, edges)
    exact = _exact(edges)
    assert np.all(np.isfinite(prof.F)) and not prof.flagged.any()
    dev = prof.F - exact
    dev -= np.average(dev, weights=1.0 / (prof.dF**2 + 1e-4))  # both are relative to their own lowest bin
    assert np.all(np.abs(dev) < 3 * prof.dF + 0.05), np.round(np.c_[prof.a, prof.F, exact, prof.dF], 3)
    # the barrier is resolved: the top bin is about H above the wells
    assert prof.F[7:9].max() - prof.F.min() > 0.8 * H
    # the sampler really ran in float32 (pymbar's solvers, in NumPy, leave JAX's precision alone)
    assert not jax.config.jax_enable_x64


@pytest.mark.slow  # 4 s
def test_a_diverged_window_is_flagged_not_averaged(sample_windows):
    w = umbrella.windows(-1.6, 1.6, 9)
    start = jnp.asarray(w.centers).at[4].set(jnp.nan)
    draws = sample_windows(U, lambda x: x, 1.0, w, start, None, jax.random.key(1), 1e-3,
                              n_chains=2, burn_in=100, n_draws=50, thin=5)
    assert bool(draws.diverged[4].all()) and not bool(draws.diverged[np.arange(9) != 4].any())
    prof = umbrella.profile(draws, w, np.linspace(-1.6, 1.6, 9))
    assert prof.flagged.tolist() == [k == 4 for k in range(9)] and prof.n_independent[4] == 0


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: umbrella.windows(-1.0, 1.0, 1), "n must be"),
        (lambda: umbrella.windows(1.0, -1.0, 5), "lo < hi"),
        (lambda: umbrella.windows(-1.0, 1.0, 5, spring=0.0), "spring"),
        (lambda: umbrella.check_windows(umbrella.windows(-1.0, 1.0, 5), -2.0, 1.0), "do not cover"),
        (lambda: umbrella.check_windows(umbrella.windows(-1.0, 1.0, 5, spring=400.0), -1.0, 1.0), "bias widths apart"),
    ],
)
def test_bad_input_names_the_parameter(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# --- the first-order criterion on a sampled profile ---------------------------------------------


def test_a_double_well_has_two_basins_and_its_barrier_in_kT():
    from jaxattn.core.umbrella import two_basins

    a = np.linspace(-2.0, 2.0, 81)
    rng = np.random.default_rng(0)
    sigma = 0.05
    F = 3.0 * (a**2 - 1.0) ** 2 + sigma * rng.standard_normal(a.size)
    got = two_basins(a, F - F.min(), np.full(a.size, sigma))
    assert got.first_order
    assert abs(got.barrier - 3.0) < 3 * got.barrier_err + 0.05, got  # 3 kT, to the noise and the bins
    assert got.barrier_err == pytest.approx(np.sqrt(2) * sigma)
    assert abs(got.a_left + 1) <= 0.1 and abs(got.a_right - 1) <= 0.1 and abs(got.a_top) <= 0.1, got


def test_a_single_broad_well_has_no_barrier():
    from jaxattn.core.umbrella import two_basins

    a = np.linspace(-2.0, 2.0, 81)
    rng = np.random.default_rng(1)
    F = 0.5 * a**2 + 0.05 * rng.standard_normal(a.size)
    F[10] = np.nan  # an empty bin is left out
    got = two_basins(a, F, np.full(a.size, 0.05))
    assert not got.first_order, got


def test_a_shrinking_barrier_is_first_order_exactly_while_it_clears_its_error():
    """Landau's ``F_t(a) = a^4 / 4 - t a^2 / 2``: two minima with a barrier ``t^2 / 4`` for
    ``t > 0``, one well for ``t <= 0`` (the critical point). With errors ``sigma`` per bin the
    criterion must say first-order exactly where ``t^2 / 4 > 2 sqrt(2) sigma``, and report a
    barrier that goes to zero with ``t``, not hide it."""
    from jaxattn.core.umbrella import two_basins

    a = np.linspace(-1.5, 1.5, 121)
    sigma = 0.01
    t_star = np.sqrt(4 * 2 * np.sqrt(2) * sigma)  # 0.336
    for t in np.linspace(-0.3, 1.0, 27):
        got = two_basins(a, a**4 / 4 - t * a**2 / 2, np.full(a.size, sigma))
        if t > 0.05:
            assert got.barrier == pytest.approx(t**2 / 4, abs=1e-3), (t, got)
        else:
            assert got.barrier < 1e-3, (t, got)
        if abs(t - t_star) > 0.02:
            assert got.first_order == (t > t_star), (t, got)


def test_the_criterion_names_its_bad_input():
    from jaxattn.core.umbrella import two_basins

    with pytest.raises(ValueError, match="must be 1-d of one length"):
        two_basins(np.arange(3.0), np.zeros(4), np.zeros(3))
    with pytest.raises(ValueError, match="a must be increasing"):
        two_basins(np.array([0.0, 2.0, 1.0]), np.zeros(3), np.zeros(3))
    with pytest.raises(ValueError, match=r"n_sigma must be >= 0, got -1\.0"):
        two_basins(np.arange(3.0), np.zeros(3), np.zeros(3), n_sigma=np.float64(-1.0))


def test_reweighting_to_tilted_targets_matches_quadrature(sample_windows):
    """The double well's windows reweighted to ``exp(-U(x) - lambda x)`` (the shift recorded per
    draw, as the copy head records ``S_{P+d} - S_P``): MBAR's probability of ``x > 0`` under each
    tilt matches the exact one by quadrature within 3 standard errors, from 0.5 without tilt to
    0.02 and 0.98 at ``lambda = +-2``; without ``shift`` the scalar call gives the same number as
    the untilted target."""
    w = umbrella.windows(-1.6, 1.6, 17)
    draws = sample_windows(U, lambda x: x, 1.0, w, jnp.asarray(w.centers), None, jax.random.key(3), 2e-4,
                           n_chains=2, burn_in=1000, n_draws=200, thin=50)
    lam = np.array([-2.0, -0.5, 0.0, 0.5, 2.0])
    shift = np.asarray(draws.a, float)[..., None] * lam
    p, dp = umbrella.probability(draws, w, lambda x: x > 0, shift)
    x = np.linspace(-3, 3, 600_001)
    dens = np.exp(-H * (x**2 - 1.0) ** 2 - lam[:, None] * x)
    exact = (dens * (x > 0)).sum(1) / dens.sum(1)
    assert p.shape == dp.shape == (5,) and np.all(np.abs(p - exact) < 3 * dp), np.c_[p, exact, dp]
    assert exact[0] > 0.97 and exact[-1] < 0.03  # the tilts move the weight across the barrier
    p0, _ = umbrella.probability(draws, w, lambda x: x > 0)
    np.testing.assert_allclose(p0, p[2], rtol=1e-10)


def test_stuck_windows_are_named_when_mbar_cannot_start():
    """Two neighbouring windows whose draws never moved (a chain that accepts no move): BAR finds
    no bound between them, and both MBAR entry points say which windows are stuck, in a
    ``ValueError``, not pymbar's ``BoundsError`` or ``NameError``."""
    w = umbrella.Windows(np.array([0.0, 0.1, 0.2, 0.3]), np.full(4, 545.0))
    rng = np.random.default_rng(0)
    a = np.stack([rng.normal(c, 0.04, (2, 8)) for c in w.centers])
    a[1], a[2] = 0.11, 0.19
    draws = umbrella.WindowDraws(jnp.asarray(a), jnp.zeros((4, 2), bool))
    with pytest.raises(ValueError, match=r"never moved: \[1, 2\]"):
        umbrella.probability(draws, w, lambda x: x > 0.15)
    with pytest.raises(ValueError, match=r"never moved: \[1, 2\]"):
        umbrella.profile(draws, w, np.linspace(-0.1, 0.4, 6))


def test_one_mbar_solve_per_pool_of_draws(sample_windows, monkeypatch):
    """A profile, its reweighted neighbour and its basins' probabilities reweight one pool of
    draws: MBAR is solved for it once (pymbar's ``FES`` built once), and again only for another
    pool (one ladder's draws). The remembered solution gives what a fresh ``pymbar.MBAR`` of
    the same draws gives."""
    w = umbrella.windows(-1.6, 1.6, 9)
    draws = sample_windows(U, lambda x: x, 1.0, w, jnp.asarray(w.centers), None, jax.random.key(5), 2e-4,
                           n_chains=2, burn_in=500, n_draws=100, thin=50)
    pymbar = umbrella._pymbar()
    built = []

    class Counting(pymbar.FES):
        def __init__(self, *a, **k):
            built.append(1)
            super().__init__(*a, **k)

    monkeypatch.setattr(pymbar, "FES", Counting)
    umbrella._SOLVES.clear()
    shift = np.asarray(draws.a, float)[..., None] * np.array([-0.5, 0.5])
    umbrella.profile(draws, w, np.linspace(-1.6, 1.6, 9))
    p, dp = umbrella.probability(draws, w, lambda x: x > 0)
    umbrella.probability(draws, w, lambda x: x > 0, shift)
    umbrella.profile(draws, w, np.linspace(-1.6, 1.6, 9), shift=shift[..., 0])
    assert len(built) == 1
    one = umbrella.WindowDraws(draws.a[:, :1], draws.diverged[:, :1])
    umbrella.probability(one, w, lambda x: x > 0)
    assert len(built) == 2
    a_n, u_kn, N_k, _, _ = umbrella._independent(draws, w)
    fresh = pymbar.MBAR(u_kn, N_k, initialize="BAR").compute_expectations((a_n > 0).astype(float), u_kn=np.zeros((1, a_n.size)))
    np.testing.assert_allclose([p, dp], [np.ravel(fresh["mu"])[0], np.ravel(fresh["sigma"])[0]], rtol=1e-9)


def test_mbar_solves_in_numpy_compiling_nothing_and_jax_stays_importable():
    """pymbar's solvers run in NumPy (:func:`jaxattn.core.umbrella._numpy_solvers`): an MBAR solve
    of a pool of draws compiles no JAX program (with JAX's solvers, five for every new number of
    draws), its free energies are those of two harmonic windows' exact overlap, and the ``jax``
    that pymbar's import was hidden from is the one every other import gets."""
    import sys

    pymbar = umbrella._pymbar()
    assert not pymbar.mbar_solvers.use_jit and sys.modules["jax"] is jax
    compiles = []
    jax.monitoring.register_event_duration_secs_listener(
        lambda e, d, **kw: compiles.append(e) if e == "/jax/core/compile/backend_compile_duration" else None)
    # two windows of draws of a standard normal, one of them biased by kappa (x - 1)^2 / 2: the
    # free energy of the biased state is -ln E[exp(-kappa (x - 1)^2 / 2)] = ln(1 + kappa) / 2 + kappa / (2 (1 + kappa))
    kappa, n = 1.0, 200_000
    rng = np.random.default_rng(0)
    s = 1 / np.sqrt(1 + kappa)
    x = np.concatenate([rng.normal(0.0, 1.0, n), rng.normal(kappa / (1 + kappa), s, n)])
    u_kn = np.stack([np.zeros_like(x), 0.5 * kappa * (x - 1.0) ** 2])
    f = pymbar.MBAR(u_kn, np.array([n, n])).f_k
    exact = 0.5 * np.log(1 + kappa) + kappa / (2 * (1 + kappa))
    assert not compiles, compiles
    assert f[1] - f[0] == pytest.approx(exact, abs=4.5e-3)  # four of MBAR's standard errors here (0.0011)
