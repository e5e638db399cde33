"""What every model shares, knowing no model: attention activations and masks
(:mod:`~jaxattn.core.attention`), input checks (:mod:`~jaxattn.core.checks`), devices
(:mod:`~jaxattn.core.devices`), divergence flags (:mod:`~jaxattn.core.divergence`), generic
``(init, step)`` kernels (:mod:`~jaxattn.core.kernels`: full-batch optax, SGLD), sampler
diagnostics (:mod:`~jaxattn.core.diagnostics`), umbrella sampling with MBAR
(:mod:`~jaxattn.core.umbrella`), PRNG keys from values (:mod:`~jaxattn.core.keys`) and precision
(:mod:`~jaxattn.core.precision`)."""
