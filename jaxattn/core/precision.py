"""float64 for the theory, and a word where it is slow.

The theory's entry points run in float64 by themselves (:func:`float64`, a local
``jax.enable_x64``), whatever the caller's setting. On a CPU, and on data-centre GPUs (A100, H100,
...), float64 costs about twice float32. On most other GPUs (T4, L4, A10, RTX and other consumer
cards: Colab's usual T4 runs float64 at 1/32 of its float32 rate) it is 16-64 times slower, and a
TPU has no native float64 at all (emulated, far slower). There the first float64 call warns once,
naming the device, the cost and the way out.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from typing import Any

import jax
import jax.numpy as jnp

# GPUs whose float64 runs at half (or a third of) the float32 rate
FAST_FLOAT64_GPUS = (
    "A100",
    "A800",
    "H100",
    "H800",
    "H200",
    "GH200",
    "B100",
    "B200",
    "GB200",
    "V100",
    "P100",
    "A30",
    "MI100",
    "MI200",
    "MI210",
    "MI250",
    "MI300",
)


class Float64Warning(UserWarning):
    """The theory's float64 runs on a device where float64 is slow."""


_WARNED: set[str] = set()


def slow_float64(device=None) -> bool:
    """Whether float64 is slow on ``device`` (default: JAX's first device): a TPU, or a GPU not in
    :data:`FAST_FLOAT64_GPUS` (by its ``device_kind``).

    Args:
        device (jax.Device | None): The device; ``None`` means ``jax.devices()[0]``.

    Returns:
        ``True`` on a TPU or a GPU whose ``device_kind`` matches none of
            :data:`FAST_FLOAT64_GPUS`; ``False`` otherwise (CPUs included).
    """
    device = device or jax.devices()[0]
    if device.platform == "tpu":
        return True
    if device.platform in ("gpu", "cuda", "rocm"):
        kind = device.device_kind.upper()
        return not any(k in kind for k in FAST_FLOAT64_GPUS)
    return False


def warn_if_slow(device=None) -> None:
    """Warn once per device kind if float64 is slow there (:class:`Float64Warning`).

    Args:
        device (jax.Device | None): The device; ``None`` means ``jax.devices()[0]``.
    """
    device = device or jax.devices()[0]
    if not slow_float64(device) or device.device_kind in _WARNED:
        return
    _WARNED.add(device.device_kind)
    cost = (
        "a TPU has no native float64 (it is emulated, tens of times slower)"
        if device.platform == "tpu"
        else "float64 runs at 1/16 to 1/64 of the float32 rate on this GPU"
    )
    warnings.warn(
        f"jaxattn's theory runs in float64 on {device.device_kind} ({device.platform}): {cost}. "
        "Run the theory on the CPU (JAX_PLATFORMS=cpu, or `with jax.default_device(jax.devices('cpu')[0]):`), "
        "where a grid of ODEs or actions takes seconds, and keep the accelerator for the simulations; "
        'or use precision="float32" (SLMODEConfig, CopyTheoryConfig), whose accuracy docs/theory states.',
        Float64Warning,
        stacklevel=3,
    )


@contextlib.contextmanager
def float64(device=None) -> Iterator[None]:
    """A float64 block for the theory: ``jax.enable_x64(True)``, with the slow-device warning.

    Args:
        device (jax.Device | None): The device checked by :func:`warn_if_slow`; ``None`` means
            ``jax.devices()[0]``.

    Yields:
        Nothing (``None``); the body of the ``with`` block runs with float64 enabled.
    """
    warn_if_slow(device)
    with jax.enable_x64(True):
        yield


def as_float64(tree: Any) -> Any:
    """Every floating leaf of ``tree`` as a float64 array (other leaves unchanged); call it inside
    :func:`float64`, so that an entry point computes in float64 from a float32 caller's inputs.

    Args:
        tree: a pytree of arrays and scalars.

    Returns:
        The same pytree with float64 floating leaves.
    """

    def cast(x):
        x = jnp.asarray(x)
        return x.astype(jnp.float64) if jnp.issubdtype(x.dtype, jnp.floating) else x

    return jax.tree_util.tree_map(cast, tree)
