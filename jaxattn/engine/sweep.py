"""Running a sweep file into a resumable store: the engine's run, chunk by chunk, to disk.

:func:`run_sweep` plans the sweep's chunks once (whole streams each, :func:`~jaxattn.engine.run.
chunk_streams`), writes the plan to ``manifest.json`` unless a store is already there, and then
computes every chunk that is not finished, each through :func:`~jaxattn.engine.run.compute_chunk`
exactly as an in-memory run computes it, writing each as it finishes. A rerun skips finished
chunks and retries failed ones; a grid with new values extends the plan (``extend=True``).
"""

from __future__ import annotations

import os
import time
import traceback
from dataclasses import dataclass

import jax

from jaxattn.engine import store
from jaxattn.engine.run import Plan, _Bar, chunk_shape, chunk_streams, compute_chunk, dataset_attrs, make_plan
from jaxattn.engine.sweepfile import Sweep


class SweepChanged(RuntimeError):
    """The sweep file differs from the one that made the store."""


@dataclass(frozen=True)
class Report:
    """What a call of :func:`run_sweep` did: chunk ids computed, skipped (finished before) and
    failed (with their errors), the largest chunk in points, the devices used and the wall time."""

    out: str
    n_chunks: int
    computed: tuple[int, ...]
    skipped: tuple[int, ...]
    failed: dict
    chunk_points: int
    n_devices: int
    wall_seconds: float


def sweep_plan(sweep: Sweep) -> Plan:
    """The engine's plan of a sweep (its experiment, config, grid, fixed axes and block shape)."""
    return make_plan(sweep.experiment, sweep.config, sweep.grid, fixed=sweep.fixed_axes, block=sweep.block,
                     group=sweep.group)


def _groups(plan: Plan, chunks: list[list[tuple]]) -> int:
    counts: dict[tuple, int] = {}
    for c in chunks:
        for p in c:
            k = plan.stream_key(p)
            counts[k] = counts.get(k, 0) + 1
    return -(-max(counts.values()) // plan.group)


def _create_exclusive(path: str, text: str) -> bool:
    """Write ``text`` to ``path`` unless it exists (atomic: of writers racing, one wins)."""
    tmp = store.tmp_name(path)
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    try:
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    finally:
        os.remove(tmp)


def open_store(sweep: Sweep, plan: Plan, out: str, n_devices: int, chunk_size: int | None = None,
               memory_budget: int | None = None, extend: bool = False) -> dict:
    """The store's manifest: a new plan (written once), the stored one, or the stored one extended
    by the new points. A sweep whose identity differs from the store's is refused."""
    import json

    from jaxattn.version import __version__

    os.makedirs(os.path.join(out, "chunks"), exist_ok=True)
    store.remove_stale_tmp(out)
    identity = sweep.identity(plan.block, plan.group)
    points = plan.grid.points()
    man = store.read_manifest(out)
    if man is None:
        chunks = chunk_streams(plan, points, n_devices, chunk_size or sweep.chunk_size,
                               memory_budget or sweep.memory_budget)
        man = {"identity": identity, "experiment": sweep.model, "version": __version__, "block": plan.block,
               "group": plan.group, "groups": _groups(plan, chunks), "variables": plan.variables,
               "grid": plan.grid.to_json(), "attrs": dataset_attrs(plan),
               "chunks": [{"id": i, "points": [list(p) for p in c]} for i, c in enumerate(chunks)]}
        if _create_exclusive(os.path.join(out, "sweep.toml"), sweep.text):
            store.write_json(os.path.join(out, "manifest.json"), man)
        else:  # another process created the store first: use its plan
            deadline = time.time() + 60
            while store.read_manifest(out) is None and time.time() < deadline:
                time.sleep(0.1)
            return open_store(sweep, plan, out, n_devices, chunk_size, memory_budget, extend)
        return man
    if man["identity"] != identity or man["variables"] != plan.variables:
        raise SweepChanged(
            f"{out!r} was made by a sweep with other fixed parameters, model, block shape or grid variables; "
            "use another --out (only a grid's values can be extended)")
    if man["grid"] != json.loads(json.dumps(plan.grid.to_json())):
        if not extend:
            raise SweepChanged(f"the grid differs from the one {out!r} was made with; pass --extend "
                               "(extend=True) to add the new points, or use another --out")
        planned = {tuple(p) for c in man["chunks"] for p in c["points"]}
        if not planned <= set(points):
            raise SweepChanged("--extend can only add values to the grid; points of the stored sweep "
                               f"are missing from the new grid ({len(planned - set(points))} of them)")
        todo = [p for p in points if p not in planned]
        chunks = chunk_streams(plan, todo, n_devices, chunk_size or sweep.chunk_size,
                               memory_budget or sweep.memory_budget)
        start = max(c["id"] for c in man["chunks"]) + 1
        groups = max(man["groups"], _groups(plan, chunks))
        man["chunks"] += [{"id": start + i, "points": [list(p) for p in c], "groups": groups}
                          for i, c in enumerate(chunks)]
        man["grid"] = plan.grid.to_json()
        store.write_json(os.path.join(out, "manifest.json"), man)
        store.atomic_write(os.path.join(out, "sweep.toml"),
                           lambda tmp: open(tmp, "w", encoding="utf-8").write(sweep.text))
    return man


def run_sweep(sweep: Sweep, out: str, *, devices=None, chunk_size: int | None = None,
              memory_budget: int | None = None, extend: bool = False, progress: bool = False,
              max_chunks: int | None = None) -> Report:
    """Run (or resume) ``sweep`` into the store at ``out``; finished chunks are skipped, failed
    ones retried. ``max_chunks`` stops after computing that many (for tests and dry runs)."""
    from jaxattn.engine import cache

    cache.enable()  # sweeps remember their programs (unless JAXATTN_NO_CACHE is set)
    plan = sweep_plan(sweep)
    devices = tuple(jax.local_devices() if devices is None else devices)
    man = open_store(sweep, plan, out, len(devices), chunk_size, memory_budget, extend)
    layout = plan.experiment.layout(plan.static)
    # every chunk padded to the largest one's shape: one trace for the whole sweep
    _, n_blocks = chunk_shape(plan, [[tuple(p) for p in c["points"]] for c in man["chunks"]], len(devices))
    done = store.finished(out)
    # several hosts (jax.distributed): process i of n takes chunks i, i + n, ...
    mine = [c for c in man["chunks"] if c["id"] % jax.process_count() == jax.process_index()]
    todo = [c for c in mine if c["id"] not in done][:max_chunks]
    skipped = tuple(c["id"] for c in mine if c["id"] in done)
    computed, failed = [], {}
    t0 = time.perf_counter()
    bar = _Bar(plan, len(todo), progress)
    try:
        for c in todo:
            points = [tuple(p) for p in c["points"]]
            try:
                res = compute_chunk(plan, points, devices, bar, c.get("groups", man["groups"]), n_blocks)
                store.write_chunk(out, c["id"], store.chunk_dataset(plan.variables, layout, c["id"], sweep.model,
                                                                    points, res))
                store.log_event(out, event="computed", chunk=c["id"], process=jax.process_index())
                computed.append(c["id"])
            except Exception as err:  # a failed chunk is recorded and the sweep goes on
                failed[c["id"]] = f"{type(err).__name__}: {err}"
                store.write_failure(out, c["id"], failed[c["id"]] + "\n" + traceback.format_exc())
    finally:
        bar.close()
    return Report(out, len(mine), tuple(computed), skipped, failed, max(len(c["points"]) for c in mine),
                  len(devices), time.perf_counter() - t0)
