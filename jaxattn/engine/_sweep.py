"""Running a sweep file into a resumable store: the engine's run, chunk by chunk, to disk.

:func:`run_sweep` plans the sweep's chunks once (whole streams each, :func:`~jaxattn.engine._compute.
chunk_streams`), writes the plan to ``manifest.json`` unless a store is already there (the first
process to get there writes it; the others check their sweep against it), and then claims and
computes chunks that are not finished, each through :func:`~jaxattn.engine._compute.compute_chunk`
exactly as an in-memory run computes it, writing each as it finishes. Any number of workers, on
one host or many, share a store through the claims (:mod:`jaxattn.engine._claims`), with no
coordinator. A rerun skips finished chunks and retries failed ones; a grid with new values extends
the plan (``extend=True``).
"""

from __future__ import annotations

import os
import time
import traceback
from dataclasses import dataclass

import jax

from jaxattn.core.checks import plain
from jaxattn.engine import _claims as claims
from jaxattn.engine import provenance, store
from jaxattn.engine._compute import ProgressBar, chunk_shape, chunk_streams, compute_chunk, dataset_attrs
from jaxattn.engine._files import HOST, create_exclusive
from jaxattn.engine._plan import Plan, make_plan
from jaxattn.engine._sweepfile import Sweep


class SweepChanged(RuntimeError):
    """The sweep file differs from the one that made the store."""


class ChunksFailed(RuntimeError):
    """Chunks of the store at ``out`` failed (``failed``: chunk id -> ``"Type: message"``); the
    message names the first, in one line, and how to list and retry them."""

    def __init__(self, out: str, failed: dict) -> None:
        cid, err = next(iter(failed.items()))
        n, them = len(failed), "them" if len(failed) > 1 else "it"
        first = err.splitlines()[0] if err.strip() else "no message"
        super().__init__(
            f"{n} chunk{'s' if n > 1 else ''} of {out} failed (chunk {cid}: {first}); "
            f"`jaxattn sweep status {out}` lists {them}, a rerun retries {them}"
        )
        self.out, self.failed = out, dict(failed)


@dataclass(frozen=True)
class Report:
    """What a call of :func:`run_sweep` did: chunk ids computed, skipped (finished before) and
    failed (with their errors), the largest chunk in points, the devices used and the wall time.

    Attributes:
        out: The store's folder.
        n_chunks: The number of chunks in the plan.
        computed: Ids of the chunks this call computed.
        skipped: Ids of the chunks finished before this call.
        failed: Chunk id -> error (``"Type: message"``) of the chunks that failed in this call.
        chunk_points: The largest chunk's number of points.
        n_devices: The number of devices used.
        wall_seconds: The wall time of the call.
    """

    out: str
    n_chunks: int
    computed: tuple[int, ...]
    skipped: tuple[int, ...]
    failed: dict
    chunk_points: int
    n_devices: int
    wall_seconds: float


def sweep_plan(sweep: Sweep, out: str | None = None, memory_budget: int | None = None) -> Plan:
    """The engine's plan of a sweep (its experiment, config, grid, fixed axes and block shape).

    A sweep file without ``block`` takes the block of the store at ``out`` where there is one:
    the default block may depend on the grid (:meth:`Experiment.default_block`), and an extended
    grid or another worker must compute with the block the store was made with.

    Args:
        sweep: The parsed sweep file.
        out: The store's folder, if any.
        memory_budget: Bytes, in place of the sweep file's ``memory_budget``; ``None`` keeps
            the file's.

    Returns:
        The ``Plan`` (see :func:`~jaxattn.engine.make_plan`).
    """
    block = sweep.block
    if block is None and out is not None:
        try:
            man = store.read_manifest(out)
        except store.DamagedStore:
            man = None  # rebuilt from the sweep file (--repair), with the sweep's own block
        block = None if man is None else int(man["block"])
    return make_plan(
        sweep.experiment,
        sweep.config,
        sweep.grid,
        fixed=sweep.fixed_axes,
        block=block,
        group=sweep.group,
        memory_budget=memory_budget or sweep.memory_budget,
    )


def _groups(plan: Plan, chunks: list[list[tuple]]) -> int:
    counts: dict[tuple, int] = {}
    for c in chunks:
        for p in c:
            k = plan.stream_key(p)
            counts[k] = counts.get(k, 0) + 1
    return -(-max(counts.values()) // plan.group)


def open_store(
    sweep: Sweep,
    plan: Plan,
    out: str,
    n_devices: int,
    chunk_size: int | None = None,
    memory_budget: int | None = None,
    extend: bool = False,
    repair: bool = False,
) -> dict:
    """The store's manifest: a new plan (written once), the stored one, or the stored one extended
    by the new points. A sweep whose identity differs from the store's is refused, and so is a
    folder that holds other things than a store.

    Args:
        sweep: The parsed sweep file.
        plan: Its plan (:func:`sweep_plan`).
        out: The store's folder (created if needed).
        n_devices: The number of devices (sizes new chunks).
        chunk_size: Points per new chunk; ``None`` means the sweep file's.
        memory_budget: Bytes per new chunk; ``None`` means the sweep file's.
        extend: Add the points of a grid with new values to the stored plan.
        repair: Rebuild the manifest from ``sweep`` and the chunks first (a damaged or lost
            manifest: :func:`_rebuild_manifest`).

    Returns:
        The manifest (``identity``, ``experiment``, ``version``, ``block``, ``group``,
            ``groups``, ``variables``, ``grid``, ``attrs`` and ``chunks``: id and points of each).

    Raises:
        SweepChanged: If the sweep differs from the store's (the grid, unless ``extend`` and
            the new grid only adds values).
        ValueError: If ``out`` cannot hold a store (a file, not writable, or a folder of other
            things), or ``chunk_size < 1``.
        DamagedStore: If the manifest is damaged (and not ``repair``).
    """
    import json

    why = store.out_problem(out)
    if why is not None:
        raise ValueError(f"out: {why}")
    if chunk_size is not None and chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    for folder in ("chunks", "claims"):
        os.makedirs(os.path.join(out, folder), exist_ok=True)
    # every folder the run writes, probed before a chunk is computed (a chunk computed into a
    # folder that refuses it would be lost)
    why = store.out_problem(out)
    if why is not None:
        raise ValueError(f"out: {why}")
    store.remove_stale_tmp(out)
    identity = sweep.identity(plan.block, plan.group)
    points = plan.grid.points()
    if repair:
        man = _rebuild_manifest(sweep, plan, out, n_devices, chunk_size, memory_budget)
    else:
        man = store.read_manifest(out)
    if man is None:
        chunks = chunk_streams(
            plan, points, n_devices, chunk_size or sweep.chunk_size, memory_budget or sweep.memory_budget
        )
        man = _manifest(sweep, plan, [{"id": i, "points": [list(p) for p in c]} for i, c in enumerate(chunks)])
        lost = store.DamagedStore(
            f"{os.path.join(out, 'manifest.json')} is missing from a store that has chunks; rebuild it "
            f"from the sweep file and the chunks with `jaxattn sweep run FILE --out {out} --repair`"
        )
        if store.finished(out):
            raise lost
        if create_exclusive(os.path.join(out, "sweep.toml"), sweep.text):
            store.write_json(os.path.join(out, "manifest.json"), man)
        else:  # another process created the store first: use its plan
            deadline = time.time() + 60
            while store.read_manifest(out) is None:
                if time.time() > deadline:
                    raise lost
                time.sleep(0.1)
            return open_store(sweep, plan, out, n_devices, chunk_size, memory_budget, extend)
        return man
    if man["identity"] != identity or man["variables"] != plan.variables:
        raise SweepChanged(
            f"{out!r} was made by a sweep with other fixed parameters, model, block shape or grid variables; "
            "use another --out (only a grid's values can be extended)"
        )
    if man["grid"] != json.loads(json.dumps(plan.grid.to_json())):
        if not extend:
            raise SweepChanged(
                f"the grid differs from the one {out!r} was made with; pass --extend "
                "(extend=True) to add the new points, or use another --out"
            )
        planned = {tuple(p) for c in man["chunks"] for p in c["points"]}
        if not planned <= set(points):
            raise SweepChanged(
                "--extend can only add values to the grid; points of the stored sweep "
                f"are missing from the new grid ({len(planned - set(points))} of them)"
            )
        todo = [p for p in points if p not in planned]
        chunks = chunk_streams(
            plan, todo, n_devices, chunk_size or sweep.chunk_size, memory_budget or sweep.memory_budget
        )
        start = max(c["id"] for c in man["chunks"]) + 1
        groups = max(man["groups"], _groups(plan, chunks))
        man["chunks"] += [
            {"id": start + i, "points": [list(p) for p in c], "groups": groups} for i, c in enumerate(chunks)
        ]
        man["grid"] = plan.grid.to_json()
        store.write_json(os.path.join(out, "manifest.json"), man)
        store.write_text(os.path.join(out, "sweep.toml"), sweep.text)
    return man


def _manifest(sweep: Sweep, plan: Plan, chunks: list[dict]) -> dict:
    from jaxattn.version import __version__

    return {
        "identity": sweep.identity(plan.block, plan.group),
        "experiment": sweep.model,
        "version": __version__,
        "block": plan.block,
        "group": plan.group,
        "groups": _groups(plan, [[tuple(p) for p in c["points"]] for c in chunks]),
        "variables": plan.variables,
        "grid": plan.grid.to_json(),
        "attrs": dataset_attrs(plan),
        "chunks": chunks,
    }


def _rebuild_manifest(
    sweep: Sweep, plan: Plan, out: str, n_devices: int, chunk_size: int | None, memory_budget: int | None
) -> dict:
    """A manifest made again from the sweep file and the sound chunks (damaged ones are set
    aside): the plan the sweep would make (with the chunk size of the stored chunks, if the
    given one does not reproduce them), as long as it puts every stored chunk's points under
    its id; otherwise the stored chunks as they are and the rest of the grid cut anew after them.
    A chunk's numbers depend only on its points' values, so either way the store completes to
    the same numbers. Written in place of the old manifest (and ``sweep.toml``)."""
    import xarray as xr

    for cid in store.damaged(out):
        store.set_aside(out, cid)
    points = plan.grid.points()
    grid = set(points)
    stored: dict[int, list[tuple]] = {}
    for cid in sorted(store.finished(out)):
        with xr.open_dataset(store.chunk_path(out, cid), engine=store.ENGINE) as ds:
            if any(v not in ds for v in plan.variables):
                raise store.DamagedStore(
                    f"{store.chunk_path(out, cid)} is not a chunk of this sweep (its variables differ)"
                )
            cols = [ds[v].values.tolist() for v in plan.variables]
        stored[cid] = [tuple(c[i] for c in cols) for i in range(len(cols[0]))]
        if not set(stored[cid]) <= grid:
            raise SweepChanged(f"chunk {cid} holds points outside the sweep file's grid: not the sweep that made {out}")

    def cut(size):
        return chunk_streams(plan, points, n_devices, size, memory_budget or sweep.memory_budget)

    sizes = [chunk_size or sweep.chunk_size] + ([max(len(c) for c in stored.values())] if stored else [])
    for size in sizes:
        chunks = cut(size)
        if all(cid < len(chunks) and chunks[cid] == pts for cid, pts in stored.items()):
            break
    else:
        have = {p for pts in stored.values() for p in pts}
        rest = [p for p in points if p not in have]
        new = chunk_streams(plan, rest, n_devices, sizes[0], memory_budget or sweep.memory_budget) if rest else []
        first = max(stored) + 1
        by_id = {**stored, **{first + i: c for i, c in enumerate(new)}}
        chunks = [by_id.get(i, []) for i in range(max(by_id) + 1)]
    man = _manifest(sweep, plan, [{"id": i, "points": [list(p) for p in c]} for i, c in enumerate(chunks) if c])
    store.write_text(os.path.join(out, "sweep.toml"), sweep.text)
    store.write_json(os.path.join(out, "manifest.json"), man)
    store.log_event(out, event="repaired", chunks=len(man["chunks"]), kept=sorted(stored))
    return man


def _order(ids: list[int], worker: tuple[int, int] | None) -> list[int]:
    """The order a worker tries chunks in: its stripe (``id % N == I``) first, then the rest."""
    if worker is None:
        return list(ids)
    i, n = worker
    return [c for c in ids if c % n == i] + [c for c in ids if c % n != i]


def worker_label(worker: tuple[int, int] | None) -> str:
    """The label a worker's claims and log lines carry.

    Args:
        worker: ``(I, N)``, or ``None`` for a worker outside an array.

    Returns:
        ``"I/N"``, or ``"HOST:PID"`` where ``worker`` is ``None``.
    """
    return f"{worker[0]}/{worker[1]}" if worker is not None else f"{HOST}:{os.getpid()}"


def run_sweep(
    sweep: Sweep,
    out: str,
    *,
    devices=None,
    chunk_size: int | None = None,
    memory_budget: int | None = None,
    extend: bool = False,
    progress: bool = False,
    max_chunks: int | None = None,
    worker: tuple[int, int] | None = None,
    reclaim: bool = False,
    claim_timeout: float = claims.DEFAULT_TIMEOUT,
    poll: float | None = None,
    verify: bool = False,
    repair: bool = False,
) -> Report:
    """Run (or resume, or help with) ``sweep`` into the store at ``out``.

    Any number of processes may run the same sweep into one store at once, on one host or many
    (a shared file system): each claims a chunk (:mod:`jaxattn.engine._claims`), computes it,
    writes it and takes the next, until every chunk is finished; claims of dead workers are
    taken over. ``worker = (I, N)`` only sets which chunks this process tries first (``I``, ``I +
    N``, ...); under ``jax.distributed`` it defaults to ``(process_index, process_count)``,
    process 0 writes the plan before the others read it, and at the end every process but 0
    leaves the distributed service (``jax.distributed.shutdown``) before process 0, which hosts
    it, returns. ``reclaim`` takes over every claim that
    exists when this call starts (after a crash); ``claim_timeout`` is the heartbeat age after
    which a claim of another host is dead. Finished chunks are skipped, chunks that failed before
    this call are retried, ``max_chunks`` stops after computing that many. A finished chunk whose
    size is not the recorded one (or, with ``verify``, whose checksum is not) is set aside and
    computed again; ``repair`` first rebuilds a damaged or lost manifest.

    Args:
        sweep: The parsed sweep file.
        out: The store's folder.
        devices: The devices to compute on; ``None`` means ``jax.local_devices()``.
        chunk_size: Points per chunk of a new plan; ``None`` means the sweep file's.
        memory_budget: Bytes per chunk of a new plan; ``None`` means the sweep file's.
        extend: Add new grid values to an existing store's plan.
        progress: Show a progress bar.
        max_chunks: Stop after computing this many chunks; ``None`` for no limit.
        worker: ``(I, N)``: try chunks ``I, I + N, ...`` first.
        reclaim: Take over every claim that exists when the call starts.
        claim_timeout: Seconds without a heartbeat after which a claim is stale.
        poll: Seconds between looks while live workers hold the rest; ``None`` means
            ``min(1, claim_timeout / 10)``.
        verify: Check every finished chunk's checksum first (a read of each), not only its size.
        repair: Rebuild the manifest from ``sweep`` and the chunks first.

    Returns:
        A ``Report`` of what this call did.

    Raises:
        ValueError: If ``worker`` or ``claim_timeout`` is invalid.
        SweepChanged: If the sweep differs from the store's.
    """
    from jaxattn.engine import cache

    if worker is not None and not (isinstance(worker, tuple) and len(worker) == 2 and 0 <= worker[0] < worker[1]):
        raise ValueError(f"worker must be (I, N) with 0 <= I < N, got {plain(worker)}")
    if claim_timeout <= 0:
        raise ValueError(f"claim_timeout must be > 0 seconds, got {claim_timeout}")
    cache.enable()  # sweeps remember their programs (unless JAXATTN_NO_CACHE is set)
    plan = sweep_plan(sweep, out, memory_budget)
    devices = tuple(jax.local_devices() if devices is None else devices)
    if jax.process_count() > 1:
        worker = worker or (jax.process_index(), jax.process_count())
        man, since = _open_behind_barrier(sweep, plan, out, len(devices), chunk_size, memory_budget, extend, repair)
    else:
        man = open_store(sweep, plan, out, len(devices), chunk_size, memory_budget, extend, repair)
    label = worker_label(worker)
    for cid, why in store.damaged(out, [c["id"] for c in man["chunks"]], full=verify).items():
        if store.set_aside(out, cid):
            store.log_event(out, event="damaged", chunk=cid, reason=why, worker=label)
    layout = plan.experiment.layout(plan.static)
    # every chunk padded to the largest one's shape: one trace for the whole sweep
    _, n_blocks = chunk_shape(plan, [[tuple(p) for p in c["points"]] for c in man["chunks"]], len(devices))
    by_id = {c["id"]: c for c in man["chunks"]}
    order = _order(sorted(by_id), worker)
    t_start = time.time()
    done0 = store.finished(out)
    skipped = tuple(c for c in order if c in done0)
    dead = frozenset(c.token for c in claims.all_claims(out).values()) if reclaim else frozenset()
    interval = min(30.0, claim_timeout / 4)
    poll = poll if poll is not None else min(1.0, claim_timeout / 10)
    store.log_event(
        out,
        event="start",
        worker=label,
        process=jax.process_index(),
        provenance=provenance.collect(plan.x64, plan.matmul_precision),
        **provenance.slurm_ids(),
    )
    computed, failed = [], {}
    t0 = time.perf_counter()
    bar = ProgressBar(plan, len(order) - len(skipped), progress)

    try:
        while max_chunks is None or len(computed) < max_chunks:
            # one listing each of the chunks, the failures and the claims per chunk taken: the
            # loop stays linear in the number of chunks, whatever the number of workers
            done = store.finished(out)
            failed_round = {c for c, t in store.failure_times(out).items() if t >= t_start}  # left for the next run
            todo = [c for c in order if c not in done and c not in failed and c not in failed_round]
            if not todo:
                break
            held = claims.all_claims(out)
            claim = None
            for cid in todo:
                if cid in held:
                    if not claims.is_stale(held[cid], claim_timeout, label, dead):
                        continue
                    claim = claims.take_over(out, held[cid], label)
                else:
                    claim = claims.acquire(out, cid, label)
                if claim is not None:
                    if os.path.exists(store.chunk_path(out, cid)):  # finished while we looked
                        claims.release(out, claim)
                        claim = None
                        continue
                    break
            if claim is None:  # the rest is held by live workers: wait for them, or for their claims to go stale
                time.sleep(poll)
                continue
            cid = claim.chunk
            points = [tuple(p) for p in by_id[cid]["points"]]
            try:
                t_chunk = time.perf_counter()
                with claims.Heartbeat(out, claim, interval):
                    res = compute_chunk(plan, points, devices, bar, by_id[cid].get("groups", man["groups"]), n_blocks)
                    store.write_chunk(
                        out, cid, store.chunk_dataset(plan.variables, layout, cid, sweep.model, points, res)
                    )
                # the chunk's own time (status estimates the time left from these)
                seconds = round(time.perf_counter() - t_chunk, 3)
                store.log_event(
                    out, event="computed", chunk=cid, worker=label, process=jax.process_index(), seconds=seconds
                )
                computed.append(cid)
            except Exception as err:  # a failed chunk is recorded and the sweep goes on
                failed[cid] = f"{type(err).__name__}: {err}"
                store.write_failure(out, cid, failed[cid] + "\n" + traceback.format_exc())
            finally:
                claims.release(out, claim)
    finally:
        bar.close()
    if jax.process_count() > 1:
        _leave_together(out, since, claim_timeout, poll)
    return Report(
        out,
        len(order),
        tuple(computed),
        skipped,
        failed,
        max(len(c["points"]) for c in man["chunks"]),
        len(devices),
        time.perf_counter() - t0,
    )


def _leave_together(out: str, since: float, timeout: float, poll: float) -> None:
    """Under ``jax.distributed``, process 0 hosts the coordination service, and a process that is
    still disconnecting when process 0 exits is killed by JAX. So every other process disconnects
    first (``jax.distributed.shutdown``: after a distributed sweep only process 0 is still in the
    service) and then says it is done, and process 0 waits (through the store, not a collective,
    which a dead process would hang) until the others have said so, or ``timeout`` seconds (a
    process that died says nothing)."""
    me = jax.process_index()
    if me != 0:
        jax.distributed.shutdown()
        store.log_event(out, event="end", process=me)
        return
    store.log_event(out, event="end", process=me)
    deadline = time.time() + timeout
    others = set(range(1, jax.process_count()))
    while time.time() < deadline:
        ended = {e.get("process") for e in store.read_log(out) if e.get("event") == "end" and e["time"] >= since}
        if others <= ended:
            break
        time.sleep(poll)


def _open_behind_barrier(
    sweep, plan, out, n_devices, chunk_size, memory_budget, extend, repair=False
) -> tuple[dict, float]:
    """Under ``jax.distributed``: process 0 opens (or creates) the store, then every process
    passes a barrier and the others open it (and check their sweep against it). Returns the
    manifest and a time before the barrier."""
    from jax.experimental import multihost_utils

    err: Exception | None = None
    since = time.time() - 5.0  # every process's end is later (a margin for the hosts' clocks)
    if jax.process_index() == 0:
        try:
            man = open_store(sweep, plan, out, n_devices, chunk_size, memory_budget, extend, repair)
        except (SweepChanged, ValueError) as e:  # pass the barrier all the same, or the others wait forever
            err = e
    multihost_utils.sync_global_devices("jaxattn-sweep-plan")
    if err is not None:
        raise err
    if jax.process_index() != 0:
        man = open_store(sweep, plan, out, n_devices, chunk_size, memory_budget, False)
    return man, since
