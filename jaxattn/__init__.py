"""jaxattn: simulate the theory of attention in JAX."""

__version__ = "0.1.0"
