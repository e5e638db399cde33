"""Generic ``(init, step)`` kernels over explicit state, in the manner of optax and blackjax:
full-batch training with any optax optimiser (:mod:`~jaxattn.core.kernels.full_batch`),
unadjusted Langevin with per-block step sizes (:mod:`~jaxattn.core.kernels.sgld`), and replica
exchange between the neighbouring chains of a ladder (:mod:`~jaxattn.core.kernels.exchange`)."""
