"""Placing a grid on the available devices.

A grid's leading axis (its blocks of data streams) is split over a 1-D ``Mesh`` of local devices
(:func:`grid_mesh`); the engine (:mod:`jaxattn.engine`) runs one program per device on its share.
On a CPU, XLA executes the small per-run products of online SGD on one thread per program, so one
*host device per core* (:func:`use_cpu_cores`) runs a grid about 1.5x faster on two cores than a
single device does (see ``benchmarks/README.md``). On GPUs and TPUs the real devices are used.
"""

from __future__ import annotations

import os

import jax
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from jaxtyping import PyTree


def use_cpu_cores(n: int | None = None) -> bool:
    """Ask XLA for ``n`` CPU host devices (default: one per core). Call it before JAX starts its
    backends (before the first computation); returns whether it took effect. The command line
    calls it; the Python API leaves the choice to the user.

    Args:
        n: The number of CPU devices; ``None`` (or 0) means ``os.cpu_count()``.

    Returns:
        ``True`` if ``jax_num_cpu_devices`` was set; ``False`` if the backends had already started
            or ``XLA_FLAGS`` already sets ``xla_force_host_platform_device_count``.
    """
    n = n or os.cpu_count() or 1
    if backends_started():
        return False  # too late to change the devices (e.g. called inside a Python session)
    if "xla_force_host_platform_device_count" in os.environ.get("XLA_FLAGS", ""):
        return False  # the user chose already
    jax.config.update("jax_num_cpu_devices", n)
    return True


def lowering_platform(device=None) -> str:
    """The platform JAX lowers programs for on ``device``: ``"cpu"``, ``"cuda"``, ``"rocm"`` or
    ``"tpu"``. A GPU's ``device.platform`` says ``"gpu"`` for both CUDA and ROCm; an exported
    program names the concrete one, and refuses to run under the alias.

    Args:
        device (jax.Device | None): The device; ``None`` means ``jax.devices()[0]``.

    Returns:
        The concrete platform name.
    """
    device = jax.devices()[0] if device is None else device
    platform = device.platform
    if platform != "gpu":
        return platform
    version = str(getattr(device.client, "platform_version", "")).lower()
    return "rocm" if "rocm" in version or "hip" in version else "cuda"


def backends_started() -> bool:
    """Whether JAX has started its backends (after which the device count is fixed).

    Returns:
        ``True`` once the backends are initialised, and also when JAX's private API to ask has
            moved; ``False`` before.
    """
    try:
        from jax._src import xla_bridge

        return bool(xla_bridge.backends_are_initialized())
    except (ImportError, AttributeError):  # a private API: if it moves, assume the worst
        return True


def grid_mesh(n_streams: int, devices=None) -> Mesh:
    """A 1-D mesh ``("grid",)`` over as many devices as evenly divide ``n_streams``.

    Args:
        n_streams: The length of the grid's leading (stream) axis.
        devices (Sequence[jax.Device] | None): The devices to use (default:
            ``jax.local_devices()``).

    Returns:
        A ``jax.sharding.Mesh`` with axis ``"grid"`` over the first ``d`` devices, ``d`` the
            largest count not above ``len(devices)`` that divides ``n_streams``.
    """
    devices = list(jax.local_devices() if devices is None else devices)
    d = max(k for k in range(1, len(devices) + 1) if n_streams % k == 0)
    return Mesh(devices[:d], ("grid",))


def shard_streams(tree: PyTree, devices=None) -> PyTree:
    """Place a pytree whose leaves share a leading stream axis on :func:`grid_mesh`.

    Args:
        tree: A pytree of arrays, each of shape ``(n_streams, ...)``.
        devices (Sequence[jax.Device] | None): The devices to use (default:
            ``jax.local_devices()``).

    Returns:
        The same pytree, its leaves sharded along the leading axis over the mesh.
    """
    n = jax.tree_util.tree_leaves(tree)[0].shape[0]
    sharding = NamedSharding(grid_mesh(n, devices), PartitionSpec("grid"))
    return jax.device_put(tree, sharding)
