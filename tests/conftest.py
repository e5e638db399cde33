import jax
import pytest


@pytest.fixture
def x64():
    """float64 for theory checks, scoped to one test (JAX caches compile per x64 setting)."""
    with jax.enable_x64(True):
        yield
