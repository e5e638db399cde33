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
    the pace: ``seconds_per_chunk`` (one worker) and ``seconds_left`` (all workers together, at
    the rate of the last chunks).

    Args:
        root: The store's folder.
        claim_timeout: Seconds without a heartbeat after which a claim is stale.
        full: Compare every chunk's checksum (a read of each), not only its size.

    Returns:
        A dict with ``model``, ``n_points``, ``n_chunks``, ``done``, ``failed`` (id -> error),
            ``damaged`` (id -> reason), ``claimed``, ``stale``, ``pending``, ``workers`` (label -> host, pid, computed, claimed,
            last_seen_seconds_ago, and ``slurm``: job_id, array_job_id, array_task_id,
            restart_count where the worker ran under SLURM), ``diverged`` (the points' values), ``version``,
            ``seconds_per_chunk`` and ``seconds_left``.

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
    rate = _recent_rate([e["time"] for e in _computed(log)])
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
        "seconds_per_chunk": seconds_per_chunk(root, log),
        "seconds_left": round(len(left) / rate, 1) if rate and left else (0.0 if not left else None),
    }


def _worker(host, pid) -> dict:
    return {"host": host, "pid": pid, "computed": [], "claimed": [], "last_seen_seconds_ago": None}


def _recent_rate(times: list[float], n: int = 20) -> float | None:
    """Chunks per second over the last ``n`` chunks finished, all workers together."""
    ts = sorted(times)[-n:]
    return (len(ts) - 1) / (ts[-1] - ts[0]) if len(ts) >= 2 and ts[-1] > ts[0] else None


def _is_computed(event: dict) -> bool:
    return event.get("event", "computed") == "computed"  # logs before worker events had no "event"


def _computed(log: list[dict]) -> list[dict]:
    return [e for e in log if _is_computed(e)]


def seconds_per_chunk(root: str, log: list[dict] | None = None) -> float | None:
    """Mean time between consecutive chunks of one process, from the log (``None`` if unknown;
    ``log``: the log already read).

    Args:
        root: The store's folder.
        log: The log already read; ``None`` reads it.

    Returns:
        Seconds per chunk, or ``None`` if no process computed two chunks.
    """
    by_proc: dict[tuple, list[float]] = {}
    for e in _computed(read_log(root) if log is None else log):
        by_proc.setdefault((e.get("host"), e["pid"]), []).append(e["time"])
    gaps = [b - a for ts in by_proc.values() for a, b in zip(ts, ts[1:])]
    return float(np.mean(gaps)) if gaps else None
