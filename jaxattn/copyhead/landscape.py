"""The copy head's free-energy landscape along the previous-token weight (Spec B, sections 3 and
4; issue 13): the theory's side.

The sampled side (in progress, issue 13) is the posterior of ``G`` with ``W`` integrated out
exactly, ``p(G) ~ exp(-S(G))`` with ``S`` the exact finite-data action (B.3a,
:func:`jaxattn.copyhead.action.exact_action`), projected on ``a = (1/n_pos) sum_l A_{l,l-1}``
and sampled across the barrier by umbrella windows on ``a`` and MBAR (:mod:`jaxattn.core.umbrella`).

Theory: the reduced action on the softmax ansatz, ``S(c_G)`` (B.3b), on the same axis through
``a = e^c / (e^c + L - 1)`` (:func:`theory_profile`). The reduced action keeps ``G`` on the ansatz.
The sampled profile integrates over the other ``L^2 - 1`` directions of ``G`` as well, and at
``N = 1`` their entropy is of the same order as the action's differences.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from jaxattn.copyhead import action as ca
from jaxattn.copyhead import network as cm
from jaxattn.core import precision


def copy_strength(a: Float[Array, "*b"] | np.ndarray, L: int) -> Float[Array, "*b"]:
    """The ansatz's ``c_G`` at previous-token weight ``a``: the inverse of
    ``a = e^c / (e^c + L - 1)`` (:func:`jaxattn.copyhead.action.prev_weight_softmax`).

    Args:
        a: previous-token weights in ``(0, 1)``, shape (*b).
        L: sequence length.

    Returns:
        ``c_G = ln(a (L - 1) / (1 - a))``, shape (*b).
    """
    a = jnp.asarray(a)
    return jnp.log(a * (L - 1) / (1 - a))


def theory_profile(arch: cm.CopyArch, P: float, N: float, a: np.ndarray) -> np.ndarray:
    """The reduced action ``S(c_G(a))`` (B.3b on the softmax ansatz, float64) relative to its
    lowest value on ``a``: the theory's ``F(a)``.

    Args:
        arch: the network (softmax attention).
        P: number of training sequences.
        N: inverse temperature.
        a: previous-token weights in ``(0, 1)``, shape ``(n,)``.

    Returns:
        ``S(a) - min S``, shape ``(n,)``.
    """
    with precision.float64():
        h = ca.hyper(arch, N)
        S = np.asarray(ca.softmax_action(copy_strength(jnp.asarray(a, jnp.float64), arch.L), jnp.float64(P), h))
    return S - S.min()
