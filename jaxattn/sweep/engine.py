"""Running a sweep: plan chunks, compute each on a mesh of devices, store it as it finishes.

The flat grid is cut into *chunks* of a fixed number of points (sized to a memory budget), each
chunk into *blocks* of ``block`` points. A chunk is placed over a 1-D ``jax.sharding.Mesh`` of
the local devices (``NamedSharding``; each device gets whole blocks), and every device runs one
compiled program on its shard: a loop over its blocks, the model's ``block`` function computing
one block (vmapped inside). That program is compiled without SPMD partitioning and dispatched to
each shard, as ``pmap`` does, so every block is computed by the same code whatever the chunk
size or the number of devices, and the numbers of a point depend on nothing but its values and
its block's: a sweep gives the same bits on one device or four, with any chunk size (for a fixed
``block``). All chunks are padded to the same size, so a sweep traces once per model.

On several hosts (``jax.distributed.initialize()`` called first, e.g. ``--distributed`` on the
command line), process ``i`` of ``n`` takes chunks ``i, i + n, ...`` and computes them on its own
local devices; every process writes its finished chunks to the shared store.
"""

from __future__ import annotations

import glob
import os
import time
import traceback
from dataclasses import dataclass
from functools import lru_cache

import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr
from jax.sharding import NamedSharding, PartitionSpec

from jaxattn.devices import grid_mesh
from jaxattn.sweep import store
from jaxattn.sweep.models import MODELS
from jaxattn.sweep.spec import Sweep

TRACE_COUNT: dict[str, int] = {}


class SweepChanged(RuntimeError):
    """The sweep file differs from the one that made the store."""


@dataclass(frozen=True)
class Report:
    """What a call of :func:`run` did: chunk ids computed, skipped (finished before) and failed
    (with their errors), the chunk size in points, the devices used and the wall time."""

    out: str
    n_chunks: int
    computed: tuple[int, ...]
    skipped: tuple[int, ...]
    failed: dict
    chunk_points: int
    n_devices: int
    wall_seconds: float


def chunk_points(sweep: Sweep, bytes_per_point: int, n_devices: int, chunk_size: int | None = None,
                 memory_budget: int | None = None) -> int:
    """Points per chunk: ``chunk_size`` if given, else as many as the memory budget holds; a
    multiple of ``block * n_devices`` (every device gets whole blocks), at most the grid."""
    unit = sweep.block * n_devices
    if chunk_size is None:
        chunk_size = sweep.chunk_size
    if chunk_size is None:
        budget = memory_budget or sweep.memory_budget
        chunk_size = max(1, budget // max(1, 4 * bytes_per_point))  # 4x: workspace and copies
    n = -(-min(chunk_size, sweep.n_points) // unit) * unit
    return max(unit, n)


@lru_cache(maxsize=None)
def _runner(model_name: str, static):
    """The per-device program: a loop over the blocks of this device's share of a chunk."""
    model = MODELS[model_name]

    @jax.jit
    def local(shared, params, n_local):
        TRACE_COUNT[model_name] = TRACE_COUNT.get(model_name, 0) + 1
        # A loop whose trip count is a runtime value: XLA cannot unroll or inline it (it would
        # for one block), so every block runs the very same code whatever the share's size.
        tree = jax.tree_util
        one = lambda p: model.block(static, shared, p)  # noqa: E731
        shapes = jax.eval_shape(one, tree.tree_map(lambda x: x[0], params))
        n = tree.tree_leaves(params)[0].shape[0]
        buf = tree.tree_map(lambda s: jnp.zeros((n,) + s.shape, s.dtype), shapes)

        def body(i, buf):
            r = one(tree.tree_map(lambda x: x[i], params))
            return tree.tree_map(lambda b, v: jax.lax.dynamic_update_index_in_dim(b, v, i, 0), buf, r)

        return jax.lax.fori_loop(0, n_local, body, buf)

    return local


def _run_sharded(local, shared: dict, params, sharding: NamedSharding):
    """Run ``local`` on every device's shard of ``params`` (placed by ``sharding``) and return
    the outputs as arrays with the same sharding.

    The per-device program is traced once, compiled (per device) without SPMD partitioning, and sent to each
    device's shard (asynchronously, so the devices run concurrently), the way ``pmap`` does it.
    XLA compiles a partitioned CPU program with other fusions than an unpartitioned one, and the
    two differ in the last bit; one unpartitioned program is what makes a sweep's numbers the
    same on one device as on four."""
    tree = jax.tree_util
    params = jax.device_put(params, sharding)
    leaves, treedef = tree.tree_flatten(params)
    outs = []
    for k, shard0 in enumerate(leaves[0].addressable_shards):
        dev = shard0.device
        local_params = treedef.unflatten([x.addressable_shards[k].data for x in leaves])
        n_local = jax.device_put(jnp.int32(shard0.data.shape[0]), dev)
        outs.append(local(shared[dev], local_params, n_local))
    n_total = leaves[0].shape[0]
    return tree.tree_map(
        lambda *xs: jax.make_array_from_single_device_arrays((n_total,) + xs[0].shape[1:], sharding, list(xs)),
        *outs)


def _plan(sweep: Sweep, out: str, n_per_chunk: int, extend: bool) -> dict:
    """The manifest: a new plan, the stored one, or the stored one extended by the new points."""
    from jaxattn import __version__

    man = store.read_manifest(out)
    keys = sweep.keys()
    if man is None:
        chunks = [{"id": i, "points": [list(k) for k in keys[s:s + n_per_chunk]]}
                  for i, s in enumerate(range(0, len(keys), n_per_chunk))]
        man = {"identity": sweep.identity(), "model": sweep.model, "version": __version__,
               "block": sweep.block, "chunk_points": n_per_chunk, "variables": sweep.variables,
               "grid": sweep.grid_json(), "chunks": chunks}
    else:
        if man["identity"] != sweep.identity() or man["variables"] != sweep.variables:
            raise SweepChanged(
                f"{out!r} was made by a sweep with other fixed parameters, model, block or grid variables; "
                "use another --out (only a grid's values can be extended)")
        if man["grid"] != sweep.grid_json():
            if not extend:
                raise SweepChanged(f"the grid differs from the one {out!r} was made with; pass --extend "
                                   "(extend=True) to add the new points, or use another --out")
            planned = {tuple(p) for c in man["chunks"] for p in c["points"]}
            new = set(keys)
            if not planned <= new:
                raise SweepChanged("--extend can only add values to the grid; points of the stored sweep "
                                   f"are missing from the new grid ({len(planned - new)} of them)")
            todo = [k for k in keys if k not in planned]
            start = max(c["id"] for c in man["chunks"]) + 1
            n_per_chunk = man["chunk_points"]
            man["chunks"] += [{"id": start + i, "points": [list(k) for k in todo[s:s + n_per_chunk]]}
                              for i, s in enumerate(range(0, len(todo), n_per_chunk))]
            man["grid"] = sweep.grid_json()
    os.makedirs(os.path.join(out, "chunks"), exist_ok=True)
    for tmp in glob.glob(os.path.join(out, "chunks", ".*.tmp-*")):
        os.remove(tmp)  # a write cut short by a kill (finished chunks are renamed into place)
    with open(os.path.join(out, "sweep.toml"), "w", encoding="utf-8") as f:
        f.write(sweep.text)
    store.write_json(os.path.join(out, "manifest.json"), man)
    return man


def _columns(sweep: Sweep, points: list[list], n: int) -> dict[str, list]:
    """The points as columns, padded to ``n`` by repeating the last (its results are dropped)."""
    padded = points + [points[-1]] * (n - len(points))
    return {v: [p[i] for p in padded] for i, v in enumerate(sweep.variables)}


def _chunk_dataset(sweep: Sweep, layout, cid: int, points, out: dict) -> xr.Dataset:
    n = len(points)
    data = {}
    for k, v in out.items():
        v = np.asarray(v)
        v = v.reshape((-1,) + v.shape[2:])[:n]
        data[k] = (("point",) + layout.dims[k], v)
    for i, var in enumerate(sweep.variables):
        data[var] = ("point", np.asarray([p[i] for p in points]))
    return xr.Dataset(data, coords=layout.coords, attrs={"chunk": cid, "model": sweep.model})


def run(sweep: Sweep, out: str, *, devices=None, chunk_size: int | None = None,
        memory_budget: int | None = None, extend: bool = False, progress: bool = False,
        max_chunks: int | None = None) -> Report:
    """Run (or resume) ``sweep`` into the store at ``out``; finished chunks are skipped, failed
    ones retried. ``max_chunks`` stops after computing that many (for tests and dry runs)."""
    with jax.enable_x64(MODELS[sweep.model].x64):
        return _run(sweep, out, devices, chunk_size, memory_budget, extend, progress, max_chunks)


def _run(sweep, out, devices, chunk_size, memory_budget, extend, progress, max_chunks) -> Report:
    from tqdm.auto import tqdm

    model = MODELS[sweep.model]
    devices = list(jax.local_devices() if devices is None else devices)
    axes = {v: vals for d in sweep.dims for v, vals in d.values.items()}
    static, shared = model.setup(sweep.fixed, axes)
    man = store.read_manifest(out)
    n_per_chunk = man["chunk_points"] if man else chunk_points(
        sweep, model.bytes_per_point(static), len(devices), chunk_size, memory_budget)
    man = _plan(sweep, out, n_per_chunk, extend)
    n_per_chunk = man["chunk_points"]
    n_blocks = n_per_chunk // sweep.block
    mesh = grid_mesh(n_blocks, devices)
    sharding = NamedSharding(mesh, PartitionSpec("grid"))
    runner = _runner(sweep.model, static)
    layout = model.layout(static)
    shared = {d: jax.device_put(shared, d) for d in mesh.devices.flat}

    done = store.finished(out)
    mine = [c for c in man["chunks"] if c["id"] % jax.process_count() == jax.process_index()]
    todo = [c for c in mine if c["id"] not in done]
    skipped = tuple(c["id"] for c in mine if c["id"] in done)
    computed, failed = [], {}
    t0 = time.perf_counter()
    with tqdm(total=len(mine), initial=len(skipped), disable=not progress, desc=f"sweep {sweep.model}",
              unit="chunk") as bar:
        for c in todo[:max_chunks]:
            try:
                params = model.params(static, _columns(sweep, c["points"], n_per_chunk))
                params = jax.tree_util.tree_map(lambda x: x.reshape((n_blocks, sweep.block) + x.shape[1:]), params)
                res = jax.device_get(_run_sharded(runner, shared, params, sharding))
                store.write_chunk(out, c["id"], _chunk_dataset(sweep, layout, c["id"], c["points"], res))
                store.log_event(out, event="computed", chunk=c["id"], process=jax.process_index())
                computed.append(c["id"])
            except Exception as err:  # a failed chunk is recorded and the sweep goes on
                failed[c["id"]] = f"{type(err).__name__}: {err}"
                store.write_failure(out, c["id"], failed[c["id"]] + "\n" + traceback.format_exc())
            bar.update(1)
    return Report(out, len(man["chunks"]), tuple(computed), skipped, failed, n_per_chunk, mesh.size,
                  time.perf_counter() - t0)
