"""The package version (one place; ``jaxattn.__version__`` re-exports it)."""

__version__ = "0.2.0"
