"""Adapters to other libraries (optional extras): :mod:`jaxattn.contrib.flax_nnx` (``pip install jaxattn[flax]``)."""
