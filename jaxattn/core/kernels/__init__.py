"""Generic ``(init, step)`` kernels over explicit state, in the manner of optax and blackjax:
full-batch training with any optax optimiser (:mod:`~jaxattn.core.kernels.full_batch`) and
unadjusted Langevin with per-block step sizes (:mod:`~jaxattn.core.kernels.sgld`)."""
