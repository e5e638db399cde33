"""float64 for the theory, a word where it is slow, and the precision of matrix products.

The theory's entry points run in float64 by themselves (:func:`float64`, a local
``jax.enable_x64``), whatever the caller's setting. On a CPU, and on data-centre GPUs (A100, H100,
...), float64 costs about twice float32. On most other GPUs (T4, L4, A10, RTX and other consumer
cards: Colab's usual T4 runs float64 at 1/32 of its float32 rate) it is 16-64 times slower, and a
TPU has no native float64 at all (emulated, far slower). There the first float64 call warns once,
naming the device, the cost and the way out.

Matrix products (every ``dot_general``: ``@``, ``einsum``, the products inside ``jnp.linalg``) of
float32 arrays are rounded by the device unless a precision is set: NVIDIA GPUs from Ampere on
multiply in TF32 (a 10-bit mantissa, relative error about ``1e-3``) and TPUs in bfloat16 passes.
:func:`matmul` sets it for a block (``jax.default_matmul_precision``, scoped), and the policy is:

- the theory computes at ``"highest"`` (full float32, or float64) on every device: a
  :func:`float64` block scopes it, and so does every program of a theory experiment;
- a simulation on the engine (online SGD, Adam, the samplers) computes at its config's
  ``matmul_precision`` (:data:`MATMUL_PRECISIONS`, default ``"highest"``);
- the models' own functions (networks, losses, the risk, the ODEs' right-hand side), called
  outside a run, compute at ``"highest"`` unless the caller set a precision (``unless_set``):
  inside a simulation they follow its choice.

On a CPU every precision computes float32 products in full: the choice changes no CPU number.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from typing import Any

import jax
import jax.numpy as jnp

from jaxattn.core import checks

MATMUL_PRECISIONS = ("highest", "high", "default")
"""``MATMUL_PRECISIONS`` are the precisions a run may choose: ``"highest"`` (full float32 on every
device), ``"high"`` (TF32 on NVIDIA GPUs, three bfloat16 passes on a TPU) and ``"default"`` (the
device's own: TF32 on NVIDIA GPUs, one bfloat16 pass on a TPU)."""

MATMUL_PRECISION_HELP = (
    "Precision of float32 matrix products: highest (full float32 on every device), high or default "
    "(TF32 on NVIDIA GPUs, bfloat16 passes on TPUs: faster, about 1e-3 relative). Same numbers on a CPU."
)
"""The help of every config's ``matmul_precision`` field (``--matmul-precision``)."""

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
    """A float64 block for the theory: ``jax.enable_x64(True)``, with the slow-device warning, and
    its float32 products (a float32 input, a float32 mode) at full precision (:func:`matmul`).

    Args:
        device (jax.Device | None): The device checked by :func:`warn_if_slow`; ``None`` means
            ``jax.devices()[0]``.

    Yields:
        Nothing (``None``); the body of the ``with`` block runs with float64 enabled.
    """
    warn_if_slow(device)
    with jax.enable_x64(True), matmul("highest"):
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


def check_matmul(value: Any) -> str:
    """``value`` as one of :data:`MATMUL_PRECISIONS` (the ``matmul_precision`` of a config).

    Args:
        value: The precision's name.

    Returns:
        The matching entry of :data:`MATMUL_PRECISIONS`.

    Raises:
        ValueError: Naming ``matmul_precision`` and the accepted values.
    """
    return checks.choice("matmul_precision", value, MATMUL_PRECISIONS)


def without_default_matmul(settings: dict) -> dict:
    """``settings`` (a config's or a sampler's, as stored) without ``matmul_precision`` where it is
    ``"highest"``, the default: what a store or a kept row made before the setting existed holds,
    so that it still resumes, while a faster mode stays a difference.

    Args:
        settings: A mapping of settings.

    Returns:
        A copy, ``matmul_precision`` dropped where it is ``"highest"``.
    """
    return {k: v for k, v in settings.items() if not (k == "matmul_precision" and v == "highest")}


@contextlib.contextmanager
def matmul(precision: str = "highest", *, unless_set: bool = False) -> Iterator[None]:
    """A block whose matrix products (every ``dot_general`` traced or run in it) compute at
    ``precision``: ``jax.default_matmul_precision(precision)``, scoped. It decorates a function
    too (``@matmul("highest", unless_set=True)``), scoping each call.

    Args:
        precision: One of :data:`MATMUL_PRECISIONS`.
        unless_set: Leave the precision as it is where one is set already (an enclosing block, a
            run's ``matmul_precision``, JAX's ``jax_default_matmul_precision``): the models' own
            functions use it, so that a simulation's choice reaches them and a direct call gets
            ``precision``.

    Yields:
        Nothing (``None``); the body of the ``with`` block runs at the precision.

    Raises:
        ValueError: If ``precision`` is not one of :data:`MATMUL_PRECISIONS`.
    """
    precision = check_matmul(precision)
    set_already = jax.config.jax_default_matmul_precision is not None  # pyright: ignore[reportAttributeAccessIssue]
    if unless_set and set_already:
        yield
        return
    with jax.default_matmul_precision(precision):
        yield
