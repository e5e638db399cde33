"""PRNG keys from values, for a whole grid at once.

A grid point's random numbers come from its own values, never from its place in the grid: its
keys are ``fold_in(... fold_in(key(seed), d_1) ..., d_k)`` of integers it carries (a seed, a
stream's tag, an index, the float32 bits of a hyper-parameter). :func:`derive` computes the keys
of every point in one compiled, vectorised program, so a grid's fixed cost does not grow with
its number of points (one dispatch, one compile per shape), and each key has the bits that the
same calls of :func:`jax.random.key` and :func:`jax.random.fold_in` give one point at a time.

:func:`unroll_threefry` lowers JAX's generator on a CPU as it is lowered on GPUs: the same bits,
and faster for the small arrays of a grid's step.
"""

from __future__ import annotations

import functools
import importlib

import jax
import numpy as np
from jaxtyping import ArrayLike, PRNGKeyArray, UInt32

_U32 = 1 << 32


def float_bits(x: ArrayLike) -> UInt32[np.ndarray, ...]:
    """The float32 bits of ``x`` as unsigned integers (a real hyper-parameter as a key's datum).

    Args:
        x: Real numbers, any shape.

    Returns:
        Their float32 representations' bits, ``uint32``, the shape of ``x``.
    """
    return np.asarray(x, np.float32).view(np.uint32)


def derive(seed: ArrayLike, *data: ArrayLike) -> PRNGKeyArray:
    """``fold_in(... fold_in(key(seed), data[0]) ..., data[-1])`` for every element of the
    broadcast of ``seed`` and ``data``, in one jitted program.

    Args:
        seed: Non-negative integer seeds, any shape (below ``2**31`` unless float64 is on, as
            for :func:`jax.random.key`, which takes 32-bit seeds then).
        *data: Non-negative integers below ``2**32`` folded in, in order, each broadcast
            against ``seed``.

    Returns:
        Typed PRNG keys of the broadcast shape.

    Raises:
        ValueError: If a seed or datum is not an integer or is out of range.
    """
    seed = _integers("seed", seed, 1 << (63 if jax.config.jax_enable_x64 else 31))  # pyright: ignore[reportAttributeAccessIssue]
    cols = [_integers(f"key datum {i}", d, _U32) for i, d in enumerate(data)]
    shape = np.broadcast_shapes(seed.shape, *(c.shape for c in cols))
    flat = np.broadcast_to(seed, shape).reshape(-1)
    table = np.zeros((flat.shape[0], len(cols)), np.uint32)
    for j, c in enumerate(cols):
        table[:, j] = np.broadcast_to(c, shape).reshape(-1)
    return _derive(flat, table, shape)


def _integers(name: str, x: ArrayLike, end: int) -> np.ndarray:
    a = np.asarray(x)
    if a.dtype.kind not in "iub" and not (a.dtype == object and all(isinstance(v, int) for v in a.reshape(-1))):
        raise ValueError(f"{name} must be integers, got {a.dtype}")
    if a.size and (int(a.min()) < 0 or int(a.max()) >= end):
        raise ValueError(f"{name} must be integers in [0, {end}), got values in [{int(a.min())}, {int(a.max())}]")
    return a.astype(np.int64)


@functools.partial(jax.jit, static_argnums=2)
def _derive(seed, table, shape):
    def one(s, row):
        k = jax.random.key(s)
        for j in range(row.shape[0]):
            k = jax.random.fold_in(k, row[j])
        return k

    return jax.vmap(one)(seed, table).reshape(shape)


_CHOICE: list[bool] = []  # the lowering a caller chose, if any


def unroll_threefry(unrolled: bool = True) -> bool:
    """Lower the threefry-2x32 hash of :mod:`jax.random` on CPUs with its 20 rounds unrolled,
    as JAX lowers it on GPUs, instead of as a loop over 5 groups of 4 rounds.

    The loop saves compile time, but each of its trips copies the hash's state: for the small
    arrays one step of a grid draws (a key per stream, a block of tokens) those copies and trips
    cost more than the hashing. Unrolled, the same operations run in the same order, so every
    number drawn has the same bits; on 2 CPU cores online SGD runs 1.5x faster at ``D = 100``
    and 1.06x to 1.15x at ``D = 1000``, with no longer compile (``benchmarks/README.md``). The engine applies
    it before tracing its first program (:func:`default_threefry`) unless this was called
    before; it holds for every later lowering in the process.

    Args:
        unrolled: ``True`` for the unrolled lowering, ``False`` for JAX's own loop.

    Returns:
        Whether the lowering was set: ``False`` where this version of JAX keeps the hash's
            lowering elsewhere (then JAX's own stays, as fast as without jaxattn).
    """
    _CHOICE[:] = [unrolled]
    for name in ("jax._src.random.threefry2x32", "jax._src.prng"):  # jax >= 0.9, and before
        try:
            mod = importlib.import_module(name)
            rule = mod._threefry2x32_lowering_rule if unrolled else mod._threefry2x32_cpu_lowering_rule
            primitive = mod.threefry2x32_p
        except (ImportError, AttributeError):
            continue
        from jax.interpreters import mlir

        mlir.register_lowering(primitive, rule, platform="cpu", inline=not unrolled)
        return True
    return False


def default_threefry() -> None:
    """The unrolled lowering of :func:`unroll_threefry`, unless a lowering was chosen already."""
    if not _CHOICE:
        unroll_threefry()
