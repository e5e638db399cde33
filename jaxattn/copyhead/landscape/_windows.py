"""Umbrella windows on the copy head's posterior: the target (the exact action with ``W``
integrated out) and its order parameter, and windows placed from the reduced action.

The posterior of ``G`` is ``p(G) ~ exp(-S(G))`` with ``S`` the exact finite-data action (B.3a,
:func:`jaxattn.copyhead.action.exact_action`); the windows act on the ansatz's log-odds
``c = copy_strength(a)`` of the previous-token weight (softmax) or on ``|a_G|`` (linear), and are
placed where the reduced action says the posterior is steep or narrow (:func:`place_windows`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from jaxattn.copyhead import action, network
from jaxattn.copyhead.profile import copy_strength, linear_profile_action, theory_action_of_order
from jaxattn.core import checks, umbrella

C_RANGE = (-0.5, 3.0)
"""The default span of the windows' targets on the copy strength ``c`` (:func:`sampled_profile`):
from below the uniform minimum to beyond the copy minimum at ``L = 32``."""


def default_range(arch: network.CopyArch) -> tuple[float, float]:
    """The default span of the windows' targets: :data:`C_RANGE` on ``c_G`` (softmax); on
    ``|a_G|`` (linear) ``(0, 1)``, from ``A = 0`` to beyond the minimum's ``|a_G|`` (below 0.6 at
    ``L = 4, V = 8``, ``N <= 20``).

    Args:
        arch: the network.

    Returns:
        ``(lo, hi)`` of the targets.
    """
    return C_RANGE if arch.attention == "softmax" else (0.0, 1.0)


def _floor(arch: network.CopyArch) -> float:
    """The lowest value of the windows' coordinate: none for ``c_G``, 0 for ``|a_G|``."""
    return -np.inf if arch.attention == "softmax" else 0.0


def ansatz_logits(arch: network.CopyArch, P: float, N: float, x: np.ndarray) -> Array:
    """The ansatz's ``G`` at each target: ``c S + c_1 11^T`` (softmax), ``g A`` with
    ``A = a_1 11^T / L + |a_G| S`` and ``a_1`` at its minimum (linear): the windows' chains start
    there.

    Args:
        arch: the network.
        P: number of training sequences.
        N: inverse temperature.
        x: the targets on the windows' coordinate, shape ``(K,)``.

    Returns:
        The logits ``G``, float32, shape ``(K, L, L)``.
    """
    xs = jnp.asarray(x, jnp.float32)
    if arch.attention == "softmax":
        return jax.vmap(lambda c: action.softmax_logits(c, arch.L, arch.cyclic))(xs)
    a1 = jnp.asarray(linear_profile_action(arch, P, N, np.asarray(x, float))[1], jnp.float32)
    g = float(action.hyper(arch, N).g)
    return jax.vmap(lambda a, b: g * action.linear_attention_matrix(a, b, arch.L, arch.cyclic))(a1, xs)


MAX_WINDOWS = 4096
"""The most windows :func:`place_windows` places (defaults place about 24)."""


def place_windows(
    arch: network.CopyArch,
    P: float,
    N: float,
    c_range: tuple[float, float],
    max_spacing: float = 0.2,
    spring: float | None = None,
    n_windows: int | None = None,
) -> tuple[umbrella.Windows, np.ndarray]:
    """Harmonic windows on the coordinate ``x`` (``c_G`` for softmax, ``|a_G|`` for linear attention)
    placed from the reduced action ``S(x)`` (:func:`theory_action_of_order`) so that neighbouring
    windows overlap wherever the posterior is steep or narrow.

    - The spring constant defaults to ``max(4 / max_spacing^2, 2 max(-S''))``: above the
      action's largest negative curvature, so that no window is bistable at the barrier.
    - Targets ``t_k`` run from ``lo`` to ``hi`` with a local spacing of two window widths,
      ``2 / sqrt(kappa + S''(t))``, at most ``max_spacing``.
    - Each centre is moved up the slope, ``c_k = t_k + S'(t_k) / kappa``, so that the window's
      biased minimum sits at its target even where the mean force is large.
    - With ``n_windows``, targets are added at the middle of the widest gaps (in window widths)
      until there are ``n_windows``: a scan over ``P`` then keeps one shape, hence one compile.

    The sampled ``F`` differs from ``S``: the shift's error ``(F' - S') / kappa`` and the widths'
    are checked afterwards on the windows' sampled means and spreads (:func:`sampled_profile`).

    Args:
        arch: the network.
        P: number of training sequences.
        N: inverse temperature.
        c_range: ``(lo, hi)`` of the targets.
        max_spacing: the largest spacing of the targets (``> 0``).
        spring: the spring constant (``> 0``; default as above).
        n_windows: the number of windows (default: as many as the spacing needs); fewer than
            the spacing needs is an error.

    Returns:
        ``(windows, targets)``.

    Raises:
        ValueError: naming ``c_range``, ``max_spacing``, ``spring`` or ``n_windows``.
    """
    lo, hi = (float(x) for x in c_range)
    if not (np.isfinite(lo) and np.isfinite(hi) and hi > lo):
        raise ValueError(f"c_range must be (lo, hi) with lo < hi, got {checks.plain(c_range)}")
    if lo < _floor(arch):
        raise ValueError(f"c_range must start at |a_G| >= 0 for linear attention, got {checks.plain(c_range)}")
    if not (np.isfinite(max_spacing) and max_spacing > 0):
        raise ValueError(f"max_spacing must be positive, got {checks.plain(max_spacing)}")
    if max_spacing > hi - lo:
        raise ValueError(f"max_spacing must be at most the range's width {hi - lo:g}, got {checks.plain(max_spacing)}")
    if (hi - lo) / max_spacing > MAX_WINDOWS:
        raise ValueError(
            f"max_spacing {checks.plain(max_spacing)} needs more than {MAX_WINDOWS} windows on c_range "
            f"{checks.plain(c_range)} (raise it)"
        )
    if spring is not None and not (np.isfinite(spring) and spring > 0):
        raise ValueError(f"spring must be a positive spring constant, got {checks.plain(spring)}")
    # one-sided at the coordinate's floor: |a_G|'s profile has a cusp at 0
    fine = np.linspace(max(lo - 0.5, _floor(arch)), hi + 0.5, int(400 * (hi - lo + 1)) + 1)
    S = theory_action_of_order(arch, P, N, fine)
    d1 = np.gradient(S, fine)
    d2 = np.gradient(d1, fine)
    inner = (fine >= lo) & (fine <= hi)
    kappa = float(spring) if spring is not None else max(4.0 / max_spacing**2, 2.0 * float(np.max(-d2[inner])))
    width = 1.0 / np.sqrt(np.maximum(kappa + d2, kappa / 4))
    t = [lo]
    while t[-1] < hi:
        if len(t) > MAX_WINDOWS:  # a posterior this narrow would need windows without end
            raise ValueError(
                f"N={N:g}, P={P:g}: the windows' spacing needs more than {MAX_WINDOWS} windows on "
                f"c_range {checks.plain(c_range)} (the posterior is too narrow for umbrella sampling: "
                "lower N, or narrow the range)"
            )
        t.append(t[-1] + min(max_spacing, 2.0 * float(np.interp(t[-1], fine, width))))
    targets = np.asarray(t[:-1] + [hi]) if t[-1] - hi > 0 else np.asarray(t)
    if n_windows is not None:
        n_windows = checks.integer("n_windows", n_windows, 2)
        if n_windows < targets.size:
            raise ValueError(
                f"n_windows={n_windows} is fewer than the {targets.size} windows the spacing needs at "
                f"P={P:g}, N={N:g} (raise n_windows or max_spacing)"
            )
        while targets.size < n_windows:
            mid = 0.5 * (targets[1:] + targets[:-1])
            i = int(np.argmax(np.diff(targets) / np.interp(mid, fine, width)))
            targets = np.insert(targets, i + 1, mid[i])
    centers = targets + np.interp(targets, fine, d1) / kappa
    return umbrella.Windows(centers, np.full(targets.size, kappa)), targets


@functools.cache
def posterior_target(arch: network.CopyArch) -> tuple[Callable[[Array, Any], Array], Callable[[Array], Array]]:
    """``(potential, order)`` of the marginal posterior of ``G`` for one architecture: stable
    function objects, so that the umbrella program compiles once per architecture and shape.

    Args:
        arch: the network.

    Returns:
        ``potential(G, (stats, N)) = S(G) / N`` (B.3a: ``exp(-N potential)`` is the marginal of
            ``exp(-N U)`` over ``W``), and ``order(G) = c(a(G))``, the ansatz's log-odds of the
            previous-token weight (:func:`copy_strength`), on which the windows act.
    """

    def potential(G, data):
        st, N = data
        return action.exact_action(G, st, arch, N) / N

    def order(G):
        if arch.attention == "linear":  # gauge-invariant: G -> -G (with W -> -W) flips a_G
            return jnp.abs(network.order_parameters(G, arch)["aG"])
        return copy_strength(network.order_parameters(G, arch)["prev_weight"], arch.L)

    return potential, order
