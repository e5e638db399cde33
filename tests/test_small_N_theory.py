"""The theories of the copy head's small-``N`` posterior beyond the Laplace correction
(``jaxattn.copyhead.fluctuations``). The variational Gaussian along the copy strength: the prior
in closed form without data, the Gibbs-Bogoliubov bound against the exact marginal at ``L = 2``
(where the integral over ``G`` is three-dimensional). The large deviations of the rows: the
profile along the previous-token weight against the prior's draws, reweighted by the action,
at ``L = 8``. One compile each, and errors."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxattn.copyhead import action, fluctuations, network


@pytest.mark.parametrize("N", [1.0, 20.0])
def test_without_data_the_profile_is_the_prior(N):
    """With ``P -> 0`` the posterior is the prior ``N(0, sigma^2/N)``, which the family holds:
    ``F(c) - F(0) = N n_pos (L-1) c^2 / (2 L sigma^2)`` (the prior along the ansatz) and the fitted
    widths are the prior's."""
    arch = network.CopyArch(L=8, V=4)
    c = np.array([-0.5, 0.0, 1.0, 2.5])
    F, theta = fluctuations.variational_profile(arch, 1e-9, N, c, n_samples=16)
    np.testing.assert_allclose(F - F[1], N * 8 * 7 * c**2 / (2 * 8), rtol=1e-7, atol=1e-6)
    np.testing.assert_allclose(theta[:, :2], 0.5 * np.log(1 / N), atol=1e-4)
    assert np.all(np.abs(theta[:, 2]) < 1e-4) and np.all(np.exp(theta[:, 3]) < 1e-2 / np.sqrt(N))


def test_the_bound_holds_and_is_tight_against_the_exact_marginal_at_L2():
    """At ``L = 2`` (cyclic: two rows, the hyperplane off the tangent three-dimensional)
    ``-ln p(c)`` is an integral under the prior, ``N |G_0|^2 / (2 sigma^2) - (d/2) ln(2 pi sigma^2
    / N) - ln E_prior[e^{-Phi}]`` (``Phi`` the data part of B.3b), computed with 10^6 prior draws.
    The variational ``F_q(c) = E_q[S] - H(q)`` is an upper bound on it at every ``c`` (Gibbs-
    Bogoliubov), up to the Monte Carlo error of both (measured: within 0.0023 below it),
    and here it is tight: within 0.005 at every ``c`` (at ``P = 6`` the posterior is nearly
    Gaussian)."""
    arch = network.CopyArch(L=2, V=4)
    P, N, d = 6.0, 1.0, 3
    c = np.linspace(-1.0, 3.0, 9)
    F, _ = fluctuations.variational_profile(arch, P, N, c, n_samples=4096)
    F = F - d / 2 * np.log(2 * np.pi * np.e)  # F_q = E_q[S] - H(q), H(q) = (1/2) ln det' + (d/2) ln(2 pi e)
    with jax.enable_x64(True):
        h = action.hyper(arch, N, jnp.float64)
        t = jnp.array([[0.0, 1.0], [1.0, 0.0]]) - 0.5  # the ansatz's direction (S - 11^T/L)
        t = t / jnp.linalg.norm(t)
        x = jax.random.normal(jax.random.PRNGKey(1), (1_000_000, 2, 2), jnp.float64)
        x = x - jnp.einsum("mij,ij->m", x, t)[:, None, None] * t  # the prior on the hyperplane

        def exact(ci):
            G = ci * (jnp.array([[0.0, 1.0], [1.0, 0.0]]) - 0.5) + x
            A = jax.nn.softmax(G, axis=-1)
            st = action.ActionStats(A[:, 0, 1] + A[:, 1, 0], jnp.sum(A**2, axis=(1, 2)), 2.0, 2.0)
            phi = action.reduced_action(st, jnp.zeros(x.shape[0]), P, h)
            lnE = jax.scipy.special.logsumexp(-phi) - jnp.log(x.shape[0])
            # |G_0|^2 = n_pos c^2 (L - 1) / L = c^2 here, sigma^2 = 1
            return N * ci**2 / 2 - d / 2 * jnp.log(2 * jnp.pi / N) - lnE

        F_exact = np.array([float(exact(ci)) for ci in c])
    slack = F - F_exact
    assert slack.min() > -0.005, slack
    assert slack.max() < 0.005, slack


def test_one_compile_across_P_N_and_c():
    """The objective reads ``c``, ``P``, ``N`` and the key as inputs: one trace per architecture
    and number of draws."""
    arch = network.CopyArch(L=4, V=4)
    fluctuations._variational_objective.cache_clear()
    for P, N in ((10.0, 1.0), (20.0, 5.0)):
        fluctuations.variational_profile(arch, P, N, [0.0, 1.0], n_samples=8)
    assert fluctuations._variational_objective(arch, 8)._cache_size() == 1


@pytest.mark.parametrize(
    "kw, name",
    [
        (dict(P=0.0), "P"),
        (dict(N=float("inf")), "N"),
        (dict(N=-1.0), "N"),
        (dict(c=[0.0, float("nan")]), "c"),
        (dict(n_samples=0), "n_samples"),
        (dict(arch=network.CopyArch(L=4, V=4, attention="linear")), "attention"),
    ],
)
def test_bad_input_names_the_parameter(kw, name):
    args = dict(arch=network.CopyArch(L=4, V=4), P=10.0, N=1.0, c=[0.0]) | kw
    with pytest.raises(ValueError, match=name):
        fluctuations.variational_profile(**args)


@pytest.fixture(scope="module")
def prior_rows():
    """2 * 10^6 draws of ``G`` from the prior at ``L = 8``, ``N = 1``: the rows' mean previous-token
    weight and the sums ``(s, q)`` of each draw."""
    out = []
    with jax.enable_x64(True):
        for k in range(4):
            A = jax.nn.softmax(jax.random.normal(jax.random.PRNGKey(k), (500_000, 8, 8), jnp.float64), axis=-1)
            out.append((np.asarray(A[..., 0].sum(-1)), np.asarray(jnp.sum(A**2, axis=(1, 2)))))
    return np.concatenate([o[0] for o in out]), np.concatenate([o[1] for o in out])


@pytest.mark.parametrize("P", [1e-9, 20.0])
def test_large_deviation_profile_is_the_posterior_of_the_rows_mean(prior_rows, P):
    """``L = 8``, ``N = 1``: the exact ``-ln p(a)`` of the reduced action's posterior is a histogram
    of the prior's draws of ``a = s / 8`` weighted by ``e^{-Phi(s, q)}`` (``Phi`` the action less
    the prior). Without data (``P -> 0``) and with ``P = 20``, the large-deviation profile equals it
    up to a constant, in every bin holding 5,000 draws or more (``a`` from about 0.04 to 0.28,
    the profile rising by about 3 over it), within three of the histogram's standard errors plus 0.01:
    Cramer's saddle point with its first correction, at ``n = 8`` rows. (With random draws for the
    other logits instead of Sobol points the profile leaned by 0.3 over this range.)"""
    arch = network.CopyArch(L=8, V=4)
    s, q = prior_rows
    with jax.enable_x64(True):
        h = action.hyper(arch, 1.0, jnp.float64)
        phi = np.asarray(action.reduced_action(action.ActionStats(jnp.asarray(s), jnp.asarray(q), 8.0, 8.0), 0.0, P, h))
    edges = np.linspace(0.03, 0.35, 33)
    w = np.exp(-(phi - phi.min()))
    mass, _ = np.histogram(s / 8, edges, weights=w)
    mass2, _ = np.histogram(s / 8, edges, weights=w**2)
    count, _ = np.histogram(s / 8, edges)
    keep = count >= 5_000
    F_hist = -np.log(mass[keep] / np.diff(edges)[keep])
    err = np.sqrt(mass2[keep]) / mass[keep]
    # the profile averaged over each bin as the histogram is (8 points a bin): where it is steep a
    # bin's mean density is not its centre's
    sub = (edges[:-1, None] + np.diff(edges)[:, None] * (np.arange(8) + 0.5) / 8)[keep]
    F_sub = fluctuations.large_deviation_profile(arch, P, 1.0, sub.ravel()).reshape(sub.shape)
    F = -np.log(np.mean(np.exp(-(F_sub - F_sub.min())), axis=1)) + F_sub.min()
    d = F - F_hist
    d -= np.average(d, weights=err**-2)
    assert F_hist.max() - F_hist.min() > 2.5
    assert np.all(np.abs(d) < 3 * err + 0.01), np.c_[d, err]


@pytest.mark.parametrize("sign", [1.0, -1.0])
@pytest.mark.parametrize("root", [120.0, 400.0, 1000.0])
def test_the_P_search_finds_a_rising_zero_from_either_side(root, sign):
    """The secant-then-Brent search of both theories' ``P*`` on synthetic log-odds rising through a
    known zero, from below and above it (``P0`` at 0.5 or 2 times the root), with a slope that
    flattens far from it; and ``None`` when the curve never crosses."""
    calls = []

    def log_odds(P):
        calls.append(P)
        return np.tanh(3 * (P - root) / root)

    P0 = root * (0.5 if sign > 0 else 2.0)
    assert fluctuations._zero_in_P(log_odds, P0, xtol=1e-6) == pytest.approx(root, rel=1e-6)
    assert len(calls) < 40 and len(set(calls)) == len(calls)  # no P asked twice (Brent's ends are known)
    assert fluctuations._zero_in_P(lambda P: 1.0 + P / 1000, 300.0, xtol=1e-6) is None


def test_log_odds_that_do_not_depend_on_P_end_the_search_and_its_scrambles_at_once(monkeypatch):
    """Log-odds flat in ``P`` (a prior with no data term) have no zero: the search stops after
    its second ``P``, not after 20 steps, and the large-deviation ``P*`` searches no scramble after
    the first one without a zero (the mean has none either way)."""
    calls = []

    def flat(arch, P, N, a_barrier, n_samples, seed):
        calls.append((seed, P))
        return -0.14 + 1e-15 * P

    monkeypatch.setattr(fluctuations, "theory_barrier", lambda arch, N: (300.0, 0.5))
    monkeypatch.setattr(fluctuations, "large_deviation_log_odds", flat)
    r = fluctuations.p_star_large_deviation(network.CopyArch(L=8, V=4), 1.0, n_scrambles=4)
    assert r.p_star is None and not r.converged and np.isnan(r.scrambles).all() and len(r.scrambles) == 1
    assert calls == [(0, 300.0), (0, 330.0)]


@pytest.mark.parametrize("offset", [0.3, -0.3, 3.0, -3.0])
def test_a_warm_P_search_brackets_the_zero_in_its_first_step(offset):
    """Started near the zero with a small first step (a later scramble or doubling of the
    large-deviation ``P*``, from the last one's zero): the first step goes towards the zero, and a
    secant that closes in from one side steps at least ``xtol``, so the zero is bracketed and
    solved in 5 evaluations at most."""
    calls = []

    def log_odds(P):
        calls.append(P)
        return np.tanh(3 * (P - 400) / 400)

    found = fluctuations._zero_in_P(log_odds, 400 + offset, xtol=0.02, first=1e-3)
    assert found == pytest.approx(400, abs=0.02) and len(calls) <= 5, calls
    assert np.sign(calls[1] - calls[0]) == -np.sign(offset)


def test_the_P_search_steps_towards_the_zero_when_the_first_secant_misleads():
    """Positive log-odds whose first secant falls (noise at the start): the next step still goes
    down, towards the zero (a secant step would go up, away from it)."""
    calls = []

    def log_odds(P):
        calls.append(P)
        return (P - 400) / 400 + 0.5 * np.exp(-(((P - 800) / 40) ** 2))

    assert fluctuations._zero_in_P(log_odds, 800.0, xtol=1e-6) == pytest.approx(400, rel=1e-6)
    assert calls[2] < calls[0]


def test_large_deviation_compiles_once_and_names_bad_input():
    """One trace of the profile's program across ``P`` and ``N``; bad ``a`` and ``n_samples``
    named."""
    arch = network.CopyArch(L=4, V=4)
    fluctuations._large_deviation_program.cache_clear()
    a = np.linspace(0.2, 0.6, 8)
    for P, N in ((10.0, 1.0), (20.0, 5.0)):
        assert np.all(np.isfinite(fluctuations.large_deviation_profile(arch, P, N, a, n_samples=64)))
    assert fluctuations._large_deviation_program(arch, 64)[1]._cache_size() == 1
    for bad in ([0.3, 0.2], [0.0, 0.5], [0.5, 1.0], []):
        with pytest.raises(ValueError, match="a must be"):
            fluctuations.large_deviation_profile(arch, 10.0, 1.0, bad)
    with pytest.raises(ValueError, match="n_samples"):
        fluctuations.large_deviation_profile(arch, 10.0, 1.0, a, n_samples=0)
    with pytest.raises(ValueError, match="L must be >= 3"):
        fluctuations.large_deviation_profile(network.CopyArch(L=2, V=4), 10.0, 1.0, a)
    with pytest.raises(ValueError, match="attention must be 'softmax' for the large-deviation profile"):
        fluctuations.large_deviation_profile(network.CopyArch(L=4, V=4, attention="linear"), 10.0, 1.0, a)


def test_basin_masses_split_exactly_at_the_divider():
    """A Gaussian density, whose masses on either side of a divider are known in closed form,
    on a grid whose divider falls inside a cell. Split there, the trapezoid rule errs by its
    Euler-Maclaurin leading term, h^2 / 12 |f'(divider)| on each side (1.0e-4 here); the two
    masses add up to the rule over the whole grid. Leaving out the straddling cell, as before,
    erred by 4.7e-2 on the log-odds."""
    from scipy.integrate import trapezoid
    from scipy.stats import norm

    x = np.linspace(-6.0, 6.0, 201)
    h, b = x[1] - x[0], 0.37
    f = np.exp(-(x**2) / 2)
    below, above = fluctuations.basin_masses(x, f, b)
    exact = np.sqrt(2 * np.pi) * np.array([norm.cdf(b) - norm.cdf(-6.0), norm.cdf(6.0) - norm.cdf(b)])
    lead = h**2 / 12 * b * np.exp(-(b**2) / 2)
    assert abs(below - exact[0]) <= 1.05 * lead and abs(above - exact[1]) <= 1.05 * lead
    assert below + above == pytest.approx(trapezoid(f, x), rel=1e-13)
    assert np.log(above / below) == pytest.approx(np.log(exact[1] / exact[0]), abs=2.2 * lead / exact.min())
    with pytest.raises(ValueError, match=r"^divider must lie inside the grid \(-6, 6\), got 7$"):
        fluctuations.basin_masses(x, f, 7.0)


def test_converged_large_deviation_p_star_names_bad_settings():
    arch = network.CopyArch(L=8, V=4)
    for kw, name in (
        (dict(n_scrambles=1), "n_scrambles"),
        (dict(rtol=0.0), "rtol"),
        (dict(n_samples=64, max_samples=32), "max_samples"),
        (dict(P0=-1.0), "P0"),
    ):
        with pytest.raises(ValueError, match=name):
            fluctuations.p_star_large_deviation(arch, 1.0, **kw)


@pytest.mark.slow
@pytest.mark.long
def test_converged_large_deviation_p_star_agrees_across_scrambles_and_with_the_exact_posterior():
    """At L = 8, N = 1, two independent estimates, at 0.3% and at 0.2% from four other scrambles
    (each converged at 1024 points, about 40 s on 2 cores; the default 0.1% needs 2048, about
    130 s): they agree within 3 combined errors, each error is below its tolerance of P*, and
    both lie within 0.2% (plus 3 errors) of the exact reduced posterior's P*, 79.52 +- 0.02 (an
    independent Hamiltonian Monte Carlo over all of G; the Cramer step is within 0.1-0.2% of it)."""
    arch = network.CopyArch(L=8, V=4)
    a = fluctuations.p_star_large_deviation(arch, 1.0, seed=0, rtol=3e-3)
    b = fluctuations.p_star_large_deviation(arch, 1.0, seed=4, rtol=2e-3)
    for r, rtol in ((a, 3e-3), (b, 2e-3)):
        assert r.converged and r.p_star is not None
        assert r.error < rtol * r.p_star
        assert r.path[-1][:2] == (r.n_samples, r.p_star) and len(r.scrambles) == 4
        assert abs(r.p_star - 79.52) < 2e-3 * 79.52 + 3 * np.hypot(r.error, 0.02)
    assert abs(a.p_star - b.p_star) < 3 * np.hypot(a.error, b.error)


@pytest.mark.parametrize(("nan_above", "expected"), [(np.inf, 350.0), (340.0, None)])
def test_the_corrected_walk_asks_each_P_once_and_stops_at_a_saddle(monkeypatch, nan_above, expected):
    """The Gaussian-corrected ``P*`` on a planted gap ``F_copy - F_uniform = (350 - P) / 10`` from
    ``P0 = 330``: the 2% walk brackets the zero and Brent's method solves it (to 0.05) without
    asking the walk's last two ``P`` again; where the gap is ``NaN`` on the way (a Hessian that
    is not positive), ``None``."""
    calls = []

    def gap(arch, P, N, c_bar):
        calls.append(P)
        return 0.0, (350.0 - P) / 10 if P < nan_above else float("nan")

    monkeypatch.setattr(fluctuations, "corrected_gap", gap)
    found = fluctuations.p_star_corrected_near(network.CopyArch(L=8, V=4), 20.0, 330.0)
    assert (found is None) if expected is None else found == pytest.approx(expected, abs=0.05)
    assert len(set(calls)) == len(calls), calls
