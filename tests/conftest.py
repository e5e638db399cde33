import os

import xla_cache

xla_cache.share()
# the project's own program cache stays off (tests/test_cache.py checks it in subprocesses)
os.environ.setdefault("JAXATTN_NO_CACHE", "1")

import jax  # noqa: E402
import pytest  # noqa: E402

# in case JAX was imported before this file (by a plugin): its variables were read then
jax.config.update("jax_compilation_cache_dir", os.environ["JAX_COMPILATION_CACHE_DIR"])
jax.config.update("jax_persistent_cache_min_compile_time_secs", float(os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"]))


def pytest_collection_modifyitems(config, items):
    """The checks marked ``long`` first (in their order), then the rest: a worker that starts one
    of them last would run it alone while the other cores wait. xdist hands each worker a
    contiguous share of this order and lets an idle one take the others' last tests."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)


def pytest_unconfigure(config):
    xla_cache.remove()


@pytest.fixture
def x64():
    """float64 for theory checks, scoped to one test (JAX caches compile per x64 setting)."""
    with jax.enable_x64(True):
        yield


def _sample_windows(potential_fn, order_fn, N, w, start, data, key, step_size, *, n_chains=4, burn_in=1000,
                    n_draws=500, thin=10):
    """SGLD in every umbrella window (the core's biased potential and kernel), all windows and
    chains in one jitted program: the sampler of the umbrella tests, on targets no experiment has."""
    import jax.numpy as jnp

    from jaxattn.core import umbrella
    from jaxattn.core.kernels import sgld

    kernel = sgld.sgld(umbrella.biased_potential(potential_fn, order_fn, N), N)

    @jax.jit
    def run(start, centers, spring):
        def window(k, x0, c, kap):
            def chain(ci):
                ck = jax.random.fold_in(jax.random.fold_in(key, k), ci)
                st, draws = sgld.run_chain(kernel, lambda th, _: order_fn(th), ck, kernel.init(x0), (data, c, kap),
                                           step_size, burn_in, n_draws, thin)
                return draws, st.diverged

            return jax.vmap(chain)(jnp.arange(n_chains))

        return jax.vmap(window)(jnp.arange(centers.shape[0]), start, centers, spring)

    a, diverged = run(start, jnp.asarray(w.centers, jnp.float32), jnp.asarray(w.spring, jnp.float32))
    return umbrella.WindowDraws(a, diverged)


@pytest.fixture
def sample_windows():
    """:func:`_sample_windows`: umbrella windows on any potential, for the umbrella tests."""
    return _sample_windows
