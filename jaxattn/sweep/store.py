"""The on-disk store of a sweep: a folder of finished chunks plus the plan that made them.

::

    PATH/sweep.toml          the sweep file as run (the latest, after an extension)
    PATH/manifest.json       identity, package version, block size and the plan: chunk id ->
                             the points it holds (their values)
    PATH/chunks/c000012.nc   one netCDF file per finished chunk (dimension ``point``)
    PATH/chunks/c000013.failed.json   the error of a chunk that raised
    PATH/log.jsonl           one line per chunk computed (process, time)

A chunk file is written under a temporary name and renamed into place (``os.replace`` is atomic),
so a run killed at any moment leaves finished chunks whole and unfinished ones absent. The
manifest is replaced the same way. :func:`load` assembles the finished chunks into one
``xarray.Dataset`` over the grid, by the points' values.
"""

from __future__ import annotations

import glob
import json
import os
import time

import numpy as np
import xarray as xr

from jaxattn.sweep.spec import Sweep, parse

ENGINE = "netcdf4"


def _atomic_write(path: str, write) -> None:
    tmp = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.tmp-{os.getpid()}")
    write(tmp)
    os.replace(tmp, path)


def write_json(path: str, obj) -> None:
    def w(tmp):
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(obj, f)
            f.flush()
            os.fsync(f.fileno())

    _atomic_write(path, w)


def chunk_path(root: str, cid: int, failed: bool = False) -> str:
    return os.path.join(root, "chunks", f"c{cid:06d}" + (".failed.json" if failed else ".nc"))


def write_chunk(root: str, cid: int, ds: xr.Dataset) -> str:
    path = chunk_path(root, cid)
    _atomic_write(path, lambda tmp: ds.to_netcdf(tmp, engine=ENGINE))
    failed = chunk_path(root, cid, failed=True)
    if os.path.exists(failed):
        os.remove(failed)
    return path


def write_failure(root: str, cid: int, error: str) -> None:
    write_json(chunk_path(root, cid, failed=True), {"chunk": cid, "error": error, "time": time.time()})


def log_event(root: str, **event) -> None:
    with open(os.path.join(root, "log.jsonl"), "a", encoding="utf-8") as f:
        f.write(json.dumps({"time": time.time(), "pid": os.getpid(), **event}) + "\n")


def read_manifest(root: str) -> dict | None:
    path = os.path.join(root, "manifest.json")
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def read_sweep(root: str) -> Sweep:
    with open(os.path.join(root, "sweep.toml"), encoding="utf-8") as f:
        return parse(f.read(), source=os.path.join(root, "sweep.toml"))


def finished(root: str) -> set[int]:
    return {int(os.path.basename(p)[1:7]) for p in glob.glob(os.path.join(root, "chunks", "c??????.nc"))}


def failures(root: str) -> dict[int, str]:
    out = {}
    for p in glob.glob(os.path.join(root, "chunks", "c??????.failed.json")):
        with open(p, encoding="utf-8") as f:
            out[int(os.path.basename(p)[1:7])] = json.load(f)["error"]
    return out


def status(root: str) -> dict:
    """Done, pending and failed chunks of a store, and the grid points that diverged."""
    man = read_manifest(root)
    if man is None:
        raise FileNotFoundError(f"no sweep store at {root!r} (no manifest.json)")
    ids = [c["id"] for c in man["chunks"]]
    done = finished(root)
    failed = failures(root)
    diverged = []
    for cid in sorted(done):
        with xr.open_dataset(chunk_path(root, cid), engine=ENGINE) as ds:
            if "diverged" in ds:
                bad = np.asarray(ds["diverged"].values, bool).reshape(ds.sizes["point"], -1).any(axis=1)
                for i in np.flatnonzero(bad):
                    diverged.append({v: ds[v].values[i].item() for v in man["variables"]})
    pending = sorted(set(ids) - done - set(failed))
    return {
        "model": man["model"], "n_points": sum(len(c["points"]) for c in man["chunks"]),
        "n_chunks": len(ids), "done": sorted(done & set(ids)),
        "failed": {k: v for k, v in sorted(failed.items()) if k not in done},
        "pending": pending, "diverged": diverged, "version": man.get("version"),
        "seconds_per_chunk": _seconds_per_chunk(root),
    }


def _seconds_per_chunk(root: str) -> float | None:
    """Mean time between consecutive chunks of one process, from the log (``None`` if unknown);
    the pending chunks times this is the time left."""
    path = os.path.join(root, "log.jsonl")
    if not os.path.exists(path):
        return None
    by_pid: dict[int, list[float]] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                e = json.loads(line)
            except json.JSONDecodeError:  # a line cut by a kill
                continue
            by_pid.setdefault(e["pid"], []).append(e["time"])
    gaps = [b - a for ts in by_pid.values() for a, b in zip(ts, ts[1:])]
    return float(np.mean(gaps)) if gaps else None


def load(root: str, *, complete: bool = True) -> xr.Dataset:
    """The finished chunks of a store as one Dataset over the sweep's grid: one dimension per
    grid dimension (a zipped group is one dimension with a coordinate per variable), then the
    observables' own dimensions. With ``complete`` (default), unfinished points are an error;
    otherwise they are ``NaN`` and ``done`` marks the finished points."""
    sweep = read_sweep(root)
    man = read_manifest(root)
    paths = sorted(glob.glob(os.path.join(root, "chunks", "c??????.nc")))
    if not paths:
        raise FileNotFoundError(f"no finished chunks in {root!r}")
    parts = []
    for p in paths:
        with xr.open_dataset(p, engine=ENGINE) as ds:
            parts.append(ds.load())
    # chunks of an extended sweep may have larger padded axes (``head`` after adding an ``H``):
    # an outer join fills the smaller ones with NaN, as padding is everywhere else
    flat = xr.concat(parts, dim="point", data_vars="all", coords="different", compat="equals",
                     combine_attrs="drop_conflicts", join="outer")
    index = {k: i for i, k in enumerate(sweep.keys())}
    pos = np.array([index.get(tuple(flat[v].values[i].item() for v in sweep.variables), -1)
                    for i in range(flat.sizes["point"])], np.int64)
    if np.any(pos < 0):
        raise ValueError(f"{root!r} holds points outside its sweep file's grid")
    done = np.zeros(sweep.n_points, bool)
    done[pos] = True
    if complete and not done.all():
        raise ValueError(f"{root!r}: {int((~done).sum())} of {sweep.n_points} points not finished "
                         "(run the sweep again to finish it, or load(..., complete=False))")

    dim_names = [d.name for d in sweep.dims]
    data = {}
    for name, var in flat.data_vars.items():
        if name in sweep.variables:
            continue
        rest = var.shape[1:]
        fill = False if var.dtype == bool else np.nan
        arr = np.full((sweep.n_points,) + rest, fill, dtype=var.dtype if var.dtype == bool else np.float64)
        arr[pos] = var.values
        data[name] = (dim_names + list(var.dims[1:]), arr.reshape(sweep.shape + rest), var.attrs)
    coords = {}
    for d in sweep.dims:
        for v, vals in d.values.items():
            coords[v] = (d.name, list(vals))
    for c in flat.coords:
        if c not in sweep.variables and "point" not in flat[c].dims:
            coords[c] = flat[c].values
    out = xr.Dataset(data, coords=coords)
    if not complete:
        out["done"] = (dim_names, done.reshape(sweep.shape))
    out.attrs = {**parts[0].attrs, "sweep": sweep.text, "jaxattn_version": man.get("version", "")}
    out.attrs.pop("chunk", None)
    return out
