"""Where a sweep's store stands: its chunks done, failed, claimed, stale, pending and damaged, the
workers that wrote it, and its rate (:func:`status`, ``jaxattn sweep status``)."""

from __future__ import annotations

import time

import numpy as np
import xarray as xr

from jaxattn.engine import _claims as claims
from jaxattn.engine import provenance
from jaxattn.engine.store import (
    ENGINE,
    chunk_path,
    damaged,
    failures,
    finished,
    read_log,
    require_manifest,
)


def status(root: str, claim_timeout: float = claims.DEFAULT_TIMEOUT, full: bool = True) -> dict:
    """A store's chunks, disjointly ``done``, ``failed``, ``claimed`` (by a live worker), ``stale``
    (claimed by a worker judged dead: see :mod:`jaxattn.engine._claims`), ``damaged`` (a finished
    chunk whose checksum or size is not the one recorded: :func:`damaged`) and ``pending`` (the
    rest, damaged ones included);
    each worker's computed chunks, claims and last heartbeat; the grid points that diverged; and
    the time left: ``seconds_per_chunk``, the mean of the chunks' own compute times (recorded
    in the log as each is written; the first chunk of each run, its compile included, counts
    as it will again), and ``seconds_left``, the chunks left at that time each, shared by the
    workers running now (those with a live claim), or by one worker when none runs (after a
    crash the time left is that of the next run, not 0).

    Args:
        root: The store's folder.
        claim_timeout: Seconds without a heartbeat after which a claim is stale.
        full: Compare every chunk's checksum (a read of each), not only its size.

    Returns:
        A dict with ``model``, ``n_points``, ``n_chunks``, ``done``, ``failed`` (id -> error),
            ``damaged`` (id -> reason), ``claimed``, ``stale``, ``pending``, ``workers`` (label -> host, pid, computed, claimed,
            last_seen_seconds_ago, and ``slurm``: job_id, array_job_id, array_task_id,
            restart_count where the worker ran under SLURM), ``diverged`` (the points' values), ``version``,
            ``running`` (the workers with a live claim), ``seconds_per_chunk`` and ``seconds_left``
            (``None`` where no chunk time is known).

    Raises:
        NotAStore: If ``root`` has no manifest.
        DamagedStore: If the manifest is damaged.
    """
    man = require_manifest(root)
    ids = [c["id"] for c in man["chunks"]]
    broken = damaged(root, ids, full)
    done = finished(root) & set(ids) - set(broken)
    failed = {k: v for k, v in sorted(failures(root).items()) if k not in done}
    held = {cid: c for cid, c in claims.all_claims(root).items() if cid not in done}
    now = time.time()
    stale = sorted(cid for cid, c in held.items() if claims.is_stale(c, claim_timeout, now=now))
    claimed = sorted(set(held) - set(stale))
    diverged = []
    for cid in sorted(done):
        with xr.open_dataset(chunk_path(root, cid), engine=ENGINE) as ds:
            if "diverged" in ds:
                bad = np.asarray(ds["diverged"].values, bool).reshape(ds.sizes["point"], -1).any(axis=1)
                for i in np.flatnonzero(bad):
                    diverged.append({v: ds[v].values[i].item() for v in man["variables"]})
    log = read_log(root)
    workers: dict[str, dict] = {}
    for e in log:
        w = workers.setdefault(e.get("worker", f"{e.get('host')}:{e['pid']}"), _worker(e.get("host"), e["pid"]))
        w["host"], w["pid"] = e.get("host"), e["pid"]
        slurm = {k[len("slurm_") :]: e[k] for k in provenance.SLURM_IDS if k in e}
        if slurm:
            w["slurm"] = slurm
        w["last_seen_seconds_ago"] = round(now - e["time"], 1)
        if _is_computed(e):
            w["computed"].append(e["chunk"])
    for cid, c in held.items():
        w = workers.setdefault(c.worker, _worker(c.host, c.pid))
        w["claimed"].append(cid)
        age = round(c.age(now), 1)
        w["last_seen_seconds_ago"] = age if w["last_seen_seconds_ago"] is None else min(age, w["last_seen_seconds_ago"])
    left = [c for c in ids if c not in done and c not in failed]
    running = len({held[cid].worker for cid in claimed})
    per_chunk = seconds_per_chunk(root, log)
    if not left:
        seconds_left = 0.0
    else:
        seconds_left = None if per_chunk is None else round(len(left) * per_chunk / max(1, running), 1)
    return {
        "model": man["experiment"],
        "n_points": sum(len(c["points"]) for c in man["chunks"]),
        "n_chunks": len(ids),
        "done": sorted(done),
        "failed": failed,
        "damaged": broken,
        "claimed": claimed,
        "stale": stale,
        "pending": sorted(set(left) - set(held)),
        "workers": workers,
        "diverged": diverged,
        "version": man.get("version"),
        "running": running,
        "seconds_per_chunk": per_chunk,
        "seconds_left": seconds_left,
    }


def _worker(host, pid) -> dict:
    return {"host": host, "pid": pid, "computed": [], "claimed": [], "last_seen_seconds_ago": None}


def _is_computed(event: dict) -> bool:
    return event.get("event", "computed") == "computed"  # logs before worker events had no "event"


def _computed(log: list[dict]) -> list[dict]:
    return [e for e in log if _is_computed(e)]


def seconds_per_chunk(root: str, log: list[dict] | None = None) -> float | None:
    """The mean compute time of a chunk: the chunks' own times, recorded in the log; for a log
    written before they were, the mean time between consecutive chunks of one process.

    Args:
        root: The store's folder.
        log: The log already read; ``None`` reads it.

    Returns:
        Seconds per chunk, or ``None`` if no chunk time is known.
    """
    events = _computed(read_log(root) if log is None else log)
    own = [float(e["seconds"]) for e in events if isinstance(e.get("seconds"), (int, float))]
    if own:
        return float(np.mean(own))
    by_proc: dict[tuple, list[float]] = {}
    for e in events:
        by_proc.setdefault((e.get("host"), e["pid"]), []).append(e["time"])
    gaps = [b - a for ts in by_proc.values() for a, b in zip(ts, ts[1:])]
    return float(np.mean(gaps)) if gaps else None
