"""Greedy head pruning (Spec A, section 5).

From a trained model's order parameters ``(M, Q, b)``, repeatedly remove the head whose removal
raises the population risk ``R(M, Q, b)`` least. A removed head is masked, so each activation
re-normalises exactly what it re-normalises without that head (the ``1/H`` of the mean, the
joint normalisation of Bayes-softmax). The risk is evaluated on a fixed bank of draws
(:mod:`jaxattn.theory.slm_risk`), so every candidate is compared on the same randomness.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from jaxattn.slm.risk import Bank, risk


class PruneResult(NamedTuple):
    """``risk[k]``: risk after removing ``k`` heads (``k = 0..H-1``); ``removed[k]``: the head
    removed at step ``k + 1``."""

    risk: np.ndarray
    removed: np.ndarray


def prune_greedy(
    M: Float[Array, "H F"],
    Q: Float[Array, "H H"],
    b: Float[Array, " H"],
    bank: Bank,
    activation: str,
    aggregation: str | None = None,
    pos_mask=None,
) -> PruneResult:
    """Greedy pruning down to one head; returns the risk against the number of heads removed."""
    H = M.shape[0]
    if bank.z.shape[2] != H:
        raise ValueError(f"bank has {bank.z.shape[2]} heads, the model has H={H}")

    @jax.jit
    def risks(masks):  # risk of each candidate mask, all on the same bank
        return jax.vmap(lambda m: risk(M, Q, b, bank, activation, aggregation, m, pos_mask))(masks)

    alive = np.ones(H, bool)
    curve = [float(risks(jnp.asarray(alive[None]))[0])]
    removed = []
    for _ in range(H - 1):
        # Always H candidate masks (one shape, one compile); dead heads are not candidates.
        masks = np.repeat(alive[None], H, axis=0) & ~np.eye(H, dtype=bool)
        r = np.where(alive, np.asarray(risks(jnp.asarray(masks))), np.inf)
        best = int(np.argmin(r))
        alive[best] = False
        removed.append(best)
        curve.append(float(r[best]))
    return PruneResult(np.asarray(curve), np.asarray(removed))
