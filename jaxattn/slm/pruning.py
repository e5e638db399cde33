"""Greedy head pruning (Spec A, section 5).

From a trained model's order parameters ``(M, Q, b)``, repeatedly remove the head whose removal
raises the population risk ``R(M, Q, b)`` least. A removed head is masked, so each activation
re-normalises exactly what it re-normalises without that head (the ``1/H`` of the mean, the
joint normalisation of Bayes-softmax). The risk is evaluated on a fixed bank of draws
(:mod:`jaxattn.slm.risk`), so every candidate is compared on the same randomness.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float

from jaxattn.core import precision
from jaxattn.slm.risk import Bank, risk


class PruneResult(NamedTuple):
    """``risk[k]``: risk after removing ``k`` heads (``k = 0..H-1``); ``removed[k]``: the head
    removed at step ``k + 1`` (Spec A, section 5).

    Attributes:
        risk: ``R(M, Q, b)`` against the number of heads removed, shape ``(H,)``.
        removed: the indices of the removed heads in order, integers of shape ``(H - 1,)``.
    """

    risk: np.ndarray
    removed: np.ndarray


def prune_greedy(
    M: Float[Array | np.ndarray, "H F"],
    Q: Float[Array | np.ndarray, "H H"],
    b: Float[Array | np.ndarray, " H"],
    bank: Bank,
    activation: str,
    aggregation: str | None = None,
    pos_mask: Bool[Array, " L"] | None = None,
) -> PruneResult:
    """Greedy pruning down to one head (Spec A, section 5); returns the risk against the number of
    heads removed. Runs in float64 whatever the caller's ``jax_enable_x64`` (inputs upcast).

    Args:
        M: overlaps ``M[h, f] = k_h . s_f / D`` of the trained model, shape ``(H, F)``.
        Q: overlaps ``Q[h, h'] = k_h . k_h' / D``, shape ``(H, H)``.
        b: biases, shape ``(H,)``.
        bank: fixed draws (:func:`jaxattn.slm.risk.make_bank`) with ``H`` heads.
        activation: the attention activation's name.
        aggregation: ``"mean"`` or ``"sum"`` over heads (``None``: the activation's default).
        pos_mask: real positions, shape ``(L,)`` (default: all).

    Returns:
        A :class:`PruneResult`: ``risk`` ``(H,)`` and ``removed`` ``(H - 1,)``.

    Raises:
        ValueError: if the bank's number of heads is not ``H``.
    """
    H = M.shape[0]
    if bank.z.shape[2] != H:
        raise ValueError(f"bank has {bank.z.shape[2]} heads, the model has H={H}")

    with precision.float64():  # the theory's precision, whatever the caller's
        M, Q, b, bank = precision.as_float64((M, Q, b, bank))
        return _greedy(M, Q, b, bank, activation, aggregation, pos_mask)


def _greedy(M, Q, b, bank: Bank, activation, aggregation, pos_mask) -> PruneResult:
    H = M.shape[0]

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
