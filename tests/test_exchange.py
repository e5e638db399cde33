"""Replica exchange between umbrella windows (``jaxattn.core.kernels.exchange``): the swap's
acceptance against a hand computation and against its closed form on Gaussian windows, each
window's target kept exactly by the swaps, the double well's profile with exchange within its
error, and the replicas' walk."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import erfc

from jaxattn.core import umbrella
from jaxattn.core.kernels import exchange, sgld


def test_exchange_delta_by_hand():
    """Windows at 0 and 1 with springs 2 and 4, chains at 0.5 and 0.25:
    ``u_0(0.25) + u_1(0.5) - u_0(0.5) - u_1(0.25) = 0.0625 + 0.5 - 0.25 - 1.125``."""
    d = umbrella.exchange_delta(jnp.array([0.5, 0.25]), jnp.array([0.0, 1.0]), jnp.array([2.0, 4.0]))
    np.testing.assert_allclose(np.asarray(d), [-0.8125], rtol=1e-6)


def _exact_ladders(key, centers, kappa, n):
    """``n`` ladders whose window ``k`` holds an exact draw of its target ``N(a_k, 1 / kappa)``
    (umbrella windows on a flat potential)."""
    x = centers + jax.random.normal(key, (n, centers.size)) / np.sqrt(kappa)
    return jax.vmap(lambda xs: exchange.ladder(sgld.SGLDState(xs, jnp.zeros_like(xs, jnp.int32), xs != xs)))(x)


def test_swaps_of_exact_gaussian_windows_accept_at_the_closed_form_and_keep_each_target():
    """Windows ``d`` apart with spring ``kappa`` on a flat potential: ``delta = kappa d (x_2 - x_1)``
    with ``x_2 - x_1 ~ N(d, 2 / kappa)``, so ``delta ~ N(m, 2 m)``, ``m = kappa d^2``, and the mean
    acceptance is ``E min(1, e^-delta) = erfc(sqrt(m) / 2)`` (0.4795 at ``m = 1``). Over 40,000
    ladders the rate of every pair is within 4 of its binomial standard errors of that, and after
    two rounds (even and odd pairs) each window still holds ``N(a_k, 1 / kappa)``: its mean and
    variance within 4 standard errors (accepting every swap would move the means by ``d``)."""
    K, d, kappa, n = 6, 0.2, 25.0, 40_000
    centers = jnp.arange(K, dtype=jnp.float32) * d
    spring = jnp.full(K, kappa, jnp.float32)
    ld = _exact_ladders(jax.random.key(0), centers, kappa, n)

    @jax.jit
    def rounds(ld, key):
        def one(ld, k, parity):
            delta = umbrella.exchange_delta(ld.chains.position, centers, spring)
            return exchange.swap(k, ld, delta, parity, jnp.zeros(K, bool))

        keys = jax.random.split(key, (2, n))
        ld = jax.vmap(lambda lad, k: one(lad, k, 0))(ld, keys[0])
        return jax.vmap(lambda lad, k: one(lad, k, 1))(ld, keys[1])

    out = rounds(ld, jax.random.key(1))
    tried, acc = np.asarray(out.attempted).sum(0), np.asarray(out.accepted).sum(0)
    assert tried.tolist() == [n] * (K - 1)  # each pair once: even pairs, then odd ones
    rate, want = acc / tried, erfc(np.sqrt(kappa * d**2) / 2)
    se = np.sqrt(want * (1 - want) / n)
    assert np.all(np.abs(rate - want) < 4 * se), (rate, want)
    x = np.asarray(out.chains.position)
    sd = 1 / np.sqrt(kappa)
    assert np.all(np.abs(x.mean(0) - np.asarray(centers)) < 4 * sd / np.sqrt(n)), x.mean(0)
    assert np.all(np.abs(x.var(0) / sd**2 - 1) < 4 * np.sqrt(2 / n)), x.var(0) / sd**2
    # the labels follow the positions, and a blocked window takes part in no swap
    r = np.asarray(out.replica)
    assert np.all(np.sort(r, axis=1) == np.arange(K)) and (r != np.arange(K)).any()
    blocked = jax.vmap(
        lambda lad, k: exchange.swap(k, lad, jnp.full(K - 1, -jnp.inf), 0, jnp.arange(K) == 2)
    )(ld, jax.random.split(jax.random.key(2), n))
    assert np.asarray(blocked.attempted).sum(0).tolist() == [n, 0, 0, 0, n]


H = 4.0  # barrier of U(x) = H (x^2 - 1)^2 in units of the reduced potential (N = 1), as in test_umbrella


def _exact(edges):
    x = np.linspace(edges[0], edges[-1], 200_001)
    idx = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, len(edges) - 2)
    F = -np.log(np.bincount(idx, weights=np.exp(-H * (x**2 - 1.0) ** 2), minlength=len(edges) - 1))
    return F - F.min()


KERNEL = sgld.sgld(umbrella.biased_potential(lambda x, _: H * (x**2 - 1.0) ** 2, lambda x: x, 1.0), 1.0)


def _ladder_fns(w, key, i, step):
    """Ladder ``i`` of SGLD on the double well in the windows ``w``: ``(start, segment)`` with
    ``segment(ladder, buffers, t0, n_advance, n_draws, thin, first, swap_every)`` one
    :func:`exchange.run_segment`; window ``k`` keyed ``fold_in(fold_in(key, k), i)``, the swaps
    ``fold_in(fold_in(key, K), i)``."""
    centers, spring = jnp.asarray(w.centers, jnp.float32), jnp.asarray(w.spring, jnp.float32)
    K = centers.size
    keys = jax.vmap(lambda k: jax.random.fold_in(jax.random.fold_in(key, k), i))(jnp.arange(K))

    def step_fn(ch):
        ks = jax.vmap(jax.random.fold_in)(keys, ch.step)
        return jax.vmap(KERNEL.step, in_axes=(0, 0, (None, 0, 0), None))(ks, ch, (None, centers, spring), step)

    def delta(ch):
        return umbrella.exchange_delta(ch.position, centers, spring), ch.diverged

    def segment(ld, buf, t0, n_advance, n_draws, thin, first, swap_every):
        swap_key = jax.random.fold_in(jax.random.fold_in(key, K), i)
        return exchange.run_segment(step_fn, lambda ch: {"c": ch.position}, delta, swap_key, ld, t0, n_advance,
                                    n_draws, thin, first, buf, swap_every)

    return exchange.ladder(jax.vmap(KERNEL.init)(centers)), segment


def _buffers(K, n_draws):
    return {"c": jnp.zeros((K, n_draws)), "replica": jnp.zeros((K, n_draws), jnp.int32)}


def _ladders(w, n_ladders, burn_in, n_draws, thin, swap_every, step):
    """SGLD on the double well in every window, ``n_ladders`` ladders with exchange: draws
    ``(K, ladder, draw)``, replicas ``(ladder, K, draw)`` and the final ladders."""
    K = len(w.centers)

    @jax.jit
    def run(key):
        def one(i):
            ld, segment = _ladder_fns(w, key, i, step)
            return segment(ld, _buffers(K, n_draws), 0, burn_in, n_draws, thin, 0, swap_every)

        return jax.vmap(one)(jnp.arange(n_ladders))

    ld, draws = run(jax.random.key(0))
    return np.moveaxis(np.asarray(draws["c"]), 0, 1), np.asarray(draws["replica"]), ld


def test_double_well_profile_with_exchange_within_its_error():
    """17 windows over [-1.6, 1.6] in 2 ladders, swaps every 10 steps, SGLD at step 2e-4 (bias on
    ``F`` about 0.01): the MBAR profile matches the exact binned ``F`` within 3 standard errors
    plus 0.05 at every bin, every neighbouring pair accepts at least a quarter of its swaps
    (measured 0.31 at the barrier's top to 0.71 in the wells, against the closed form's 0.48 on a
    flat potential), and the replicas walk the ladder end to end."""
    w = umbrella.windows(-1.6, 1.6, 17)
    a, replica, ld = _ladders(w, n_ladders=2, burn_in=2000, n_draws=400, thin=50, swap_every=10, step=2e-4)
    draws = umbrella.WindowDraws(jnp.asarray(a), jnp.asarray(np.asarray(ld.chains.diverged).T))
    edges = np.linspace(-1.6, 1.6, 17)
    prof = umbrella.profile(draws, w, edges)
    dev = prof.F - _exact(edges)
    dev -= np.average(dev, weights=1.0 / (prof.dF**2 + 1e-4))
    assert np.all(np.abs(dev) < 3 * prof.dF + 0.05), np.round(np.c_[prof.a, prof.F, _exact(edges), prof.dF], 3)
    acc = np.asarray(ld.accepted).sum(0) / np.asarray(ld.attempted).sum(0)
    assert acc.min() > 0.25, acc
    assert sum(exchange.passages(r) for r in replica) >= 2


def test_swap_rounds_follow_the_step_count_not_the_segments():
    """The same run cut into segments or in one piece gives the same draws and swaps, and
    without exchange no swap is attempted."""
    w = umbrella.windows(-1.0, 1.0, 5)
    one = _ladders(w, 1, 30, 8, 5, 3, 1e-3)
    start, segment = _ladder_fns(w, jax.random.key(0), 0, 1e-3)
    ld, buf = segment(start, _buffers(5, 8), 0, 17, 0, 5, 0, 3)
    ld, buf = segment(ld, buf, 17, 13, 3, 5, 0, 3)
    ld, buf = segment(ld, buf, 45, 0, 5, 5, 3, 3)
    np.testing.assert_allclose(np.asarray(buf["c"]), one[0][:, 0], rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(buf["replica"]), one[1][0])
    assert int(ld.attempted.sum()) == int(one[2].attempted.sum()) > 0
    off = segment(start, buf, 0, 30, 8, 5, 0, None)[0]
    assert int(off.attempted.sum()) == 0 and np.asarray(off.replica).tolist() == list(range(5))


@pytest.mark.parametrize(
    ("replica", "want"),
    [
        (np.array([[0, 1, 1, 0], [1, 0, 0, 1]]), 4),  # K = 2: both replicas go up and back
        (np.array([[0, 0, 0], [1, 1, 1], [2, 2, 2]]), 0),  # nobody moves
        (np.array([[0, 1, 1, 2], [1, 0, 2, 1], [2, 2, 0, 0]]), 2),  # 0 reaches the top; 2 the bottom
    ],
)
def test_passages_count_end_to_end_walks(replica, want):
    assert exchange.passages(replica) == want
