"""Attention activations shared by every model in jaxattn.

An activation maps the scores ``chi[h, l]`` of ``H`` heads over ``L`` positions (and a per-head
bias ``b[h]``) to attention weights ``sigma[h, l]``. It acts on one example; batch with
``jax.vmap``. Spec A, section 2:

- ``softmax``: ``exp(chi[h,l]) / sum_l' exp(chi[h,l'])`` per head (the bias cancels);
  heads averaged by default, so rows sum to ``1/H``.
- ``softmax1``: ``exp(chi[h,l] + b[h]) / (1 + sum_l' exp(chi[h,l'] + b[h]))``: each head can
  switch itself off; heads summed by default.
- ``bayes_softmax``: ``exp(chi[h,l] + b[h]) / sum_{h',l'} exp(chi[h',l'] + b[h'])``: one
  normalisation over heads and positions together; summed by default (the weights sum to 1).
- ``linear``: ``chi[h,l] / L`` per head, heads averaged by default (``chi / (H L)``).

``ACTIVATIONS`` is the tuple of the built-in activation names; ``DEFAULT_AGGREGATION`` maps each
to its head aggregation.

The head aggregation (``"mean"`` divides by the number of active heads, ``"sum"`` does not) is an
option for every activation, so other readings of the paper can be tested.

Masks: ``head_mask[h]`` and ``pos_mask[l]`` mark real heads and positions. A masked entry gets a
weight of exactly zero and no gradient, and the normalisations (and the ``H``, ``L`` of the mean
and of the linear activation) count only unmasked entries, so a model padded to larger ``H`` or
``L`` computes exactly what the unpadded model computes. This is what lets grids over ``H`` and
``L`` run as one compiled computation.

New activations: :func:`register_activation` (see ``docs/extend.md``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike
from jaxtyping import Array, Bool, Float

Activation = Literal["softmax", "softmax1", "bayes_softmax", "linear"]
Aggregation = Literal["mean", "sum"]

ACTIVATIONS: tuple[str, ...] = ("softmax", "softmax1", "bayes_softmax", "linear")
DEFAULT_AGGREGATION: dict[str, str] = {
    "softmax": "mean",
    "softmax1": "sum",
    "bayes_softmax": "sum",
    "linear": "mean",
}


# Activations added with register_activation: name -> (function, default aggregation).
_REGISTERED: dict[str, tuple] = {}


def register_activation(name: str, fn: Callable[..., Array], aggregation: str = "mean") -> None:
    """Add an activation under ``name``, usable everywhere a built-in one is (by name).

    ``fn(scores, bias, valid)`` gets the scores ``chi`` ``(H, L)``, the biases ``b`` ``(H,)`` and
    the boolean mask ``valid`` ``(H, L)`` of real (head, position) pairs, and returns the weights
    ``sigma`` ``(H, L)`` before head aggregation. Masked entries are set to exactly zero
    afterwards, but ``fn`` must keep them finite (and their gradients finite), e.g. by
    ``jnp.where(valid, scores, 0.0)`` before any ``exp``. ``aggregation`` is the default head
    aggregation (``"mean"`` or ``"sum"``). Built-in names cannot be replaced; registering a name
    again replaces the earlier function (already-compiled functions keep the old one).

    Args:
        name: The new activation's name (not one of ``ACTIVATIONS``).
        fn: ``fn(scores, bias, valid) -> sigma``, all ``(H, L)`` but ``bias`` ``(H,)``.
        aggregation: Its default head aggregation, ``"mean"`` or ``"sum"``.

    Raises:
        ValueError: If ``name`` is built in or ``aggregation`` is neither ``"mean"`` nor ``"sum"``.
        TypeError: If ``fn`` is not callable.
    """
    if name in ACTIVATIONS:
        raise ValueError(f"{name!r} is a built-in activation and cannot be replaced")
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {fn!r}")
    if aggregation not in ("mean", "sum"):
        raise ValueError(f"aggregation must be 'mean' or 'sum', got {aggregation!r}")
    _REGISTERED[name] = (fn, aggregation)


ENTRY_POINT_GROUP = "jaxattn.activations"
_PLUGINS = {"loaded": False}


def load_plugins() -> None:
    """Register the activations of other installed packages, once: each entry point of the group
    ``jaxattn.activations`` names a function ``fn(scores, bias, valid)`` as for
    :func:`register_activation`; its attribute ``aggregation`` (default ``"mean"``) is its
    default head aggregation. An activation registered in Python under the same name wins."""
    if _PLUGINS["loaded"]:
        return
    _PLUGINS["loaded"] = True
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in ACTIVATIONS or ep.name in _REGISTERED:
            continue
        fn = ep.load()
        register_activation(ep.name, fn, getattr(fn, "aggregation", "mean"))


def registered_activations() -> dict[str, tuple]:
    """The activations added with :func:`register_activation` or by plugins: name -> (function,
    aggregation).

    Returns:
        A copy of the registry: ``{name: (fn, aggregation)}`` (built-in activations not included).
    """
    load_plugins()
    return dict(_REGISTERED)


def available_activations() -> tuple[str, ...]:
    """The built-in activations (``ACTIVATIONS``) followed by the registered ones (plugins
    included).

    Returns:
        The tuple of activation names.
    """
    load_plugins()
    return ACTIVATIONS + tuple(_REGISTERED)


def activation_name(activation: str) -> str:
    """The activation's canonical name (hyphens read as underscores: ``bayes-softmax``); a
    ``ValueError`` naming the known activations for an unknown one.

    Args:
        activation: An activation name, built in or registered.

    Returns:
        The name as listed by :func:`available_activations`.
    """
    from jaxattn.core.checks import choice

    return choice("activation", activation, available_activations())


def check_activation(activation: str, aggregation: str | None = None) -> str:
    """Validate an activation name and aggregation; return the aggregation to use.

    Args:
        activation: An activation name, built in or registered (hyphens read as underscores).
        aggregation: ``"mean"``, ``"sum"``, or ``None`` for the activation's default
            (``DEFAULT_AGGREGATION``, or the one given at registration).

    Returns:
        The head aggregation, ``"mean"`` or ``"sum"``.
    """
    activation = activation_name(activation)
    if aggregation is None:
        if activation in registered_activations():
            return _REGISTERED[activation][1]
        return DEFAULT_AGGREGATION[activation]
    if aggregation not in ("mean", "sum"):
        raise ValueError(f"aggregation must be 'mean' or 'sum', got {aggregation!r}")
    return aggregation


def _stable_exp(z: Array, valid: Array, axis) -> tuple[Array, Array]:
    """``exp(z - m)`` on valid entries (exactly 0 elsewhere) and the shift ``m`` (max over axis).

    The double ``where`` keeps masked entries out of every arithmetic operation, so neither their
    values nor their gradients can be inf or NaN, even for scores of +-1e4 or fully masked rows.
    """
    z_safe = jnp.where(valid, z, 0.0)
    m = jnp.max(jnp.where(valid, z_safe, -jnp.inf), axis=axis, keepdims=True)
    m = jax.lax.stop_gradient(jnp.where(jnp.isfinite(m), m, 0.0))
    return jnp.where(valid, jnp.exp(z_safe - m), 0.0), m


def _safe_div(num: Array, den: Array) -> Array:
    ok = den > 0
    return jnp.where(ok, num / jnp.where(ok, den, 1.0), 0.0)


def attention_weights(
    scores: Float[Array, "H L"],
    bias: Float[Array, " H"] | None,
    activation: str,
    *,
    head_mask: Bool[Array, " H"] | None = None,
    pos_mask: Bool[Array, " L"] | None = None,
    aggregation: str | None = None,
) -> Float[Array, "H L"]:
    """Attention weights ``sigma[h, l]`` of one example (Spec A, section 2).

    Args:
        scores: ``chi[h, l]``, shape ``(H, L)``.
        bias: per-head bias ``b[h]`` (ignored by ``softmax`` and ``linear``); ``None`` means 0.
        activation: ``"softmax"``, ``"softmax1"``, ``"bayes_softmax"``, ``"linear"`` or a name
            added with :func:`register_activation`.
        head_mask: boolean mask of real heads ``(H,)`` (default: all real).
        pos_mask: boolean mask of real positions ``(L,)`` (default: all real).
        aggregation: ``"mean"`` or ``"sum"`` over heads; default per activation
            (``DEFAULT_AGGREGATION``).

    Returns:
        ``sigma`` of shape ``(H, L)``; the prediction weight of position ``l`` is
            ``w[l] = sum_h sigma[h, l]``.
    """
    activation = activation_name(activation)
    aggregation = check_activation(activation, aggregation)
    H, L = scores.shape
    head_mask = jnp.ones(H, bool) if head_mask is None else head_mask
    pos_mask = jnp.ones(L, bool) if pos_mask is None else pos_mask
    bias = jnp.zeros(H, scores.dtype) if bias is None else bias
    valid = head_mask[:, None] & pos_mask[None, :]
    n_heads = jnp.sum(head_mask)

    if activation == "softmax":
        e, _ = _stable_exp(scores, valid, axis=1)
        sigma = _safe_div(e, jnp.sum(e, axis=1, keepdims=True))
    elif activation == "softmax1":
        z = scores + bias[:, None]
        e, m = _stable_exp(z, valid, axis=1)
        # The "1" in the denominator is a logit-0 entry: include it in the max for stability.
        m1 = jnp.maximum(m, 0.0)
        e = e * jnp.exp(m - m1)
        sigma = e / (jnp.exp(-m1) + jnp.sum(e, axis=1, keepdims=True))
    elif activation == "bayes_softmax":
        z = scores + bias[:, None]
        e, _ = _stable_exp(z, valid, axis=(0, 1))
        sigma = _safe_div(e, jnp.sum(e))
    elif activation in _REGISTERED:
        fn = _REGISTERED[activation][0]
        sigma = jnp.where(valid, fn(scores, bias, valid), 0.0)
    else:  # linear
        n_pos = jnp.maximum(jnp.sum(pos_mask), 1)
        sigma = jnp.where(valid, scores, 0.0) / n_pos

    if aggregation == "mean":
        sigma = sigma / jnp.maximum(n_heads, 1)
    return sigma


def position_weights(sigma: Float[Array, "H L"]) -> Float[Array, " L"]:
    """``w[l] = sum_h sigma[h, l]``: the weight of token ``l`` in the prediction.

    Args:
        sigma: Attention weights ``(H, L)``, as from :func:`attention_weights`.

    Returns:
        ``w`` of shape ``(L,)``.
    """
    return jnp.sum(sigma, axis=0)


def prefix_mask(n: ArrayLike, n_max: int) -> Bool[Array, " n_max"]:
    """Mask of the first ``n`` of ``n_max`` slots: the real heads or positions of a padded model.

    Args:
        n: The number of real slots (an int or a traced integer scalar).
        n_max: The padded size.

    Returns:
        Boolean mask of shape ``(n_max,)``, true at indices ``< n``.
    """
    return jnp.arange(n_max) < n
