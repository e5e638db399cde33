import os

import jax
import pytest

# the tests run without the persistent caches (tests/test_cache.py checks them in subprocesses)
os.environ.setdefault("JAXATTN_NO_CACHE", "1")


@pytest.fixture
def x64():
    """float64 for theory checks, scoped to one test (JAX caches compile per x64 setting)."""
    with jax.enable_x64(True):
        yield


def pytest_collection_modifyitems(config, items):
    # the notebooks (nbmake, 2.5 minutes on 2 cores) run with the slow checks, which CI runs:
    # the default run stays under 10 minutes
    for item in items:
        if item.nodeid.endswith(".ipynb") or ".ipynb::" in item.nodeid:
            item.add_marker(pytest.mark.slow)
