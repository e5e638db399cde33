"""The on-disk store of a sweep: a folder of finished chunks plus the plan that made them.

::

    PATH/sweep.toml          the sweep file as run (the latest, after an extension)
    PATH/manifest.json       identity, package version, block shape and the plan: chunk id ->
                             the points it holds (their values)
    PATH/chunks/c000012.nc   one netCDF file per finished chunk (dimension ``point``)
    PATH/chunks/c000012.sum  its size and SHA-256, written before the chunk is renamed into place
    PATH/chunks/damaged/     chunks found damaged, set aside (and then recomputed)
    PATH/chunks/c000013.failed.json   the error of a chunk that raised
    PATH/claims/c000014.json who is computing chunk 14 (host, process, worker, heartbeat):
                             :mod:`jaxattn.engine._claims`
    PATH/log.jsonl           one line per worker start and per chunk computed (host, process,
                             worker, time, and the chunk's compute time in seconds)
    PATH/plots/error.png     the figures of ``jaxattn sweep plot`` (by default)

A chunk file is written under a temporary name (host, process and a random part: no two writers
collide, on one host or several) and renamed into place (``os.replace`` is atomic), so a run
killed at any moment leaves finished chunks whole and unfinished ones absent. The manifest is
replaced the same way. :func:`load_store` assembles the finished chunks into one
``xarray.Dataset`` over the grid, by the points' values.

Damage after the fact (a disk that fails, a copy cut short, an edit by hand) is caught by the
checksums: :func:`damaged` names each chunk whose size (cheap, a ``stat``) or SHA-256 (a read)
differs from what was recorded; :func:`~jaxattn.engine.status` and :func:`load_store` check them all, a sweep run
sets the damaged ones aside and recomputes them. A manifest that cannot be read is a
:class:`DamagedStore` error naming the file (``sweep run --repair`` rebuilds it).
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import time
import warnings

import numpy as np
import xarray as xr

from jaxattn.core.checks import unwritable
from jaxattn.engine._files import HOST, atomic_write, pid_alive
from jaxattn.engine._sweepfile import read_sweep

ENGINE = "netcdf4"
STALE_TMP_SECONDS = 24 * 3600  # a temporary file this old is a write that died, wherever it ran


MANIFEST_KEYS = ("identity", "experiment", "block", "group", "groups", "variables", "grid", "chunks")
STORE_ENTRIES = ("chunks", "claims", "sweep.toml", "manifest.json", "log.jsonl", "submitit", "plots")
"""The entries a store's folder may hold (and temporary files): a folder with others is not a store."""
FIGURE_EXTENSIONS = tuple(".png .pdf .svg .svgz .jpg .jpeg .eps .ps .tif .tiff .webp .gif .avif .pgf".split())
"""Figures that ``sweep plot`` wrote into a store's own folder before plots went to ``plots/``:
a store (a folder with ``chunks/`` or ``sweep.toml``) may hold them beside its entries."""


class IncompleteStore(UserWarning):
    """A store loaded with ``complete=False`` whose grid has points not finished (pending,
    failed or damaged chunks); the message says how many."""


class NotAStore(FileNotFoundError):
    """A folder that holds no sweep store (no ``manifest.json``)."""


class DamagedStore(ValueError):
    """A store whose manifest or chunks are damaged; the message names the file and the way out."""


def write_json(path: str, obj, indent: int | None = None) -> None:
    """Write ``obj`` as JSON to ``path``, atomically (flushed to disk before the rename).

    Args:
        path: The file.
        obj: A JSON-serialisable object.
        indent: As ``json.dump``'s (one line by default).
    """

    def w(tmp):
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=indent)
            f.flush()
            os.fsync(f.fileno())

    atomic_write(path, w)


def write_text(path: str, text: str) -> None:
    """Write ``text`` to ``path``, atomically.

    Args:
        path: The file.
        text: Its content.
    """

    def w(tmp):
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)

    atomic_write(path, w)


def read_json(path: str):
    """Read a JSON file.

    Args:
        path: The file.

    Returns:
        The decoded object.
    """
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def remove_stale_tmp(root: str) -> list[str]:
    """Remove the temporary files of writes that died: those of this host whose process is gone,
    and any older than :data:`STALE_TMP_SECONDS`. A write in flight elsewhere is left alone.

    Args:
        root: The store's folder (searched recursively).

    Returns:
        The paths removed.
    """
    removed = []
    now = time.time()
    for p in glob.glob(os.path.join(root, "**", ".*.tmp-*"), recursive=True):
        tag = p.rsplit(".tmp-", 1)[1]
        host, _, rest = tag.rpartition("-")[0].rpartition("-")
        try:
            pid = int(rest)
        except ValueError:
            pid = -1
        try:
            old = now - os.path.getmtime(p) > STALE_TMP_SECONDS
        except FileNotFoundError:
            continue
        if old or (host == HOST and pid > 0 and not pid_alive(pid)) or pid < 0:
            try:
                os.remove(p)
                removed.append(p)
            except FileNotFoundError:
                pass
    return removed


def chunk_path(root: str, cid: int, failed: bool = False) -> str:
    """The file of a finished (or failed) chunk.

    Args:
        root: The store's folder.
        cid: The chunk's id.
        failed: The failure file rather than the netCDF file.

    Returns:
        ``root/chunks/cNNNNNN.nc``, or ``root/chunks/cNNNNNN.failed.json`` with ``failed``.
    """
    return os.path.join(root, "chunks", f"c{cid:06d}" + (".failed.json" if failed else ".nc"))


def sum_path(root: str, cid: int) -> str:
    """The file of a chunk's size and checksum, ``root/chunks/cNNNNNN.sum``.

    Args:
        root: The store's folder.
        cid: The chunk's id.

    Returns:
        The path.
    """
    return os.path.join(root, "chunks", f"c{cid:06d}.sum")


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_chunk(root: str, cid: int, ds: xr.Dataset) -> str:
    """Write a finished chunk atomically, its size and SHA-256 first (so a chunk in place always
    has its checksum), and remove its failure file, if any.

    Args:
        root: The store's folder.
        cid: The chunk's id.
        ds: The chunk's Dataset (from :func:`chunk_dataset`).

    Returns:
        The chunk file's path.
    """
    path = chunk_path(root, cid)

    def write(tmp):
        ds.to_netcdf(tmp, engine=ENGINE)
        write_json(sum_path(root, cid), {"bytes": os.path.getsize(tmp), "sha256": _sha256(tmp)})

    atomic_write(path, write)
    failed = chunk_path(root, cid, failed=True)
    if os.path.exists(failed):
        os.remove(failed)
    return path


def write_failure(root: str, cid: int, error: str) -> None:
    """Record that a chunk raised (its error, the time, host and process).

    Args:
        root: The store's folder.
        cid: The chunk's id.
        error: The error's text.
    """
    write_json(
        chunk_path(root, cid, failed=True),
        {"chunk": cid, "error": error, "time": time.time(), "host": HOST, "pid": os.getpid()},
    )


def log_event(root: str, **event) -> None:
    """Append one line to the store's ``log.jsonl`` (with the time, host and process).

    Args:
        root: The store's folder.
        **event: The event's fields (e.g. ``event``, ``worker``, ``chunk``).
    """
    line = json.dumps({"time": time.time(), "host": HOST, "pid": os.getpid(), **event}) + "\n"
    with open(os.path.join(root, "log.jsonl"), "a", encoding="utf-8") as f:
        f.write(line)


def read_log(root: str) -> list[dict]:
    """The store's log (lines cut by a kill are skipped).

    Args:
        root: The store's folder.

    Returns:
        One dict per event, in file order (``[]`` if there is no log).
    """
    path = os.path.join(root, "log.jsonl")
    if not os.path.exists(path):
        return []
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:  # a line cut by a kill
                continue
    return out


def read_manifest(root: str) -> dict | None:
    """The store's manifest.

    Args:
        root: The store's folder.

    Returns:
        The decoded ``manifest.json``, or ``None`` if there is none.

    Raises:
        DamagedStore: If the manifest is not valid JSON or lacks a field.
    """
    path = os.path.join(root, "manifest.json")
    if not os.path.exists(path):
        return None
    try:
        man = read_json(path)
        missing = [k for k in MANIFEST_KEYS if k not in man] if isinstance(man, dict) else ["all"]
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        why = f"not valid JSON ({err})"
    else:
        if not missing:
            return man
        why = f"fields missing: {', '.join(missing)}"
    raise DamagedStore(
        f"{path} is damaged: {why}; rebuild it from the sweep file and the chunks with "
        f"`jaxattn sweep run FILE --out {root} --repair`"
    )


def require_manifest(root: str) -> dict:
    """The store's manifest, which must exist.

    Args:
        root: The store's folder.

    Returns:
        The decoded ``manifest.json``.

    Raises:
        NotAStore: If ``root`` holds no manifest (it is not a sweep store).
        DamagedStore: If the manifest is damaged.
    """
    man = read_manifest(root)
    if man is None:
        raise NotAStore(f"{root} is not a sweep store (no manifest.json)")
    return man


def foreign_entries(root: str) -> list[str]:
    """What a folder holds besides a store's own entries (a folder that is not a store, or not
    only one). Figures beside a store's entries are its own (``sweep plot`` wrote them there
    before it wrote to ``plots/``), not other things.

    Args:
        root: A folder (need not exist).

    Returns:
        The names of the other entries, sorted (``[]`` for a missing or empty folder, or a store).
    """
    if not os.path.isdir(root):
        return []
    names = os.listdir(root)
    is_store = "chunks" in names or "sweep.toml" in names
    return sorted(
        n
        for n in names
        if n not in STORE_ENTRIES
        and ".tmp-" not in n
        and not (is_store and os.path.splitext(n)[1].lower() in FIGURE_EXTENSIONS)
    )


def finished(root: str) -> set[int]:
    """The ids of the finished chunks.

    Args:
        root: The store's folder.

    Returns:
        The ids of the chunks with a netCDF file.
    """
    return {int(os.path.basename(p)[1:7]) for p in glob.glob(os.path.join(root, "chunks", "c??????.nc"))}


def damage(root: str, cid: int, full: bool = True) -> str | None:
    """What is wrong with a finished chunk's file, if anything: its size differs from the recorded
    one (cut short), or (``full``) its SHA-256 does. A chunk written before checksums were
    recorded is checked by opening it (``full``).

    Args:
        root: The store's folder.
        cid: The chunk's id (its file exists).
        full: Read the file (the checksum); otherwise only its size is compared.

    Returns:
        ``None`` for a sound chunk, else the reason.
    """
    path = chunk_path(root, cid)
    try:
        size = os.path.getsize(path)
    except FileNotFoundError:
        return None  # set aside by another worker meanwhile: not finished, not damaged
    try:
        rec = read_json(sum_path(root, cid))
        want, digest = int(rec["bytes"]), str(rec["sha256"])
    except FileNotFoundError:
        if not full:
            return None
        try:
            with xr.open_dataset(path, engine=ENGINE) as ds:
                ds.load()
        except Exception as err:  # a file older than checksums that does not open
            return f"unreadable ({type(err).__name__})"
        return None
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError):
        return "its checksum file is damaged"
    if size != want:
        return f"{size} bytes, {want} recorded (cut short or overwritten)"
    if full and _sha256(path) != digest:
        return "checksum mismatch (its content changed after it was written)"
    return None


def damaged(root: str, ids=None, full: bool = True) -> dict[int, str]:
    """The damaged chunks among the finished ones (see :func:`damage`).

    Args:
        root: The store's folder.
        ids: The chunk ids to check; ``None`` for every finished chunk.
        full: Compare checksums (a read of each file), not only sizes.

    Returns:
        Chunk id -> reason, for each damaged chunk, sorted by id.
    """
    ids = finished(root) if ids is None else finished(root) & set(ids)
    out = {cid: damage(root, cid, full) for cid in sorted(ids)}
    return {cid: why for cid, why in out.items() if why is not None}


def set_aside(root: str, cid: int) -> str | None:
    """Move a damaged chunk (and its checksum) to ``chunks/damaged/`` so that it is computed
    again; the file is kept for inspection, under the time it was set aside.

    Args:
        root: The store's folder.
        cid: The chunk's id.

    Returns:
        The chunk's new path, or ``None`` if it was gone already (set aside by another worker).
    """
    folder = os.path.join(root, "chunks", "damaged")
    os.makedirs(folder, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S") + f"-{os.getpid()}"
    moved = None
    for src, ext in ((chunk_path(root, cid), ".nc"), (sum_path(root, cid), ".sum")):
        dst = os.path.join(folder, f"c{cid:06d}.{stamp}{ext}")
        try:
            os.replace(src, dst)
            moved = moved or (dst if ext == ".nc" else None)
        except FileNotFoundError:
            continue
    return moved


def failures(root: str) -> dict[int, str]:
    """The failed chunks and their errors.

    Args:
        root: The store's folder.

    Returns:
        Chunk id -> error text, for every readable failure file.
    """
    out = {}
    for p in glob.glob(os.path.join(root, "chunks", "c??????.failed.json")):
        try:
            out[int(os.path.basename(p)[1:7])] = read_json(p)["error"]
        except (json.JSONDecodeError, FileNotFoundError, KeyError):
            continue
    return out


def failure_times(root: str) -> dict[int, float]:
    """When each failed chunk last failed (the modification times of its failure files).

    Args:
        root: The store's folder.

    Returns:
        Chunk id -> seconds since the epoch.
    """
    out = {}
    for p in glob.glob(os.path.join(root, "chunks", "c??????.failed.json")):
        try:
            out[int(os.path.basename(p)[1:7])] = os.path.getmtime(p)
        except FileNotFoundError:
            continue
    return out


def chunk_dataset(
    variables: list[str], layout, cid: int, experiment: str, points: list[tuple], out: dict[str, np.ndarray]
) -> xr.Dataset:
    """One chunk's outputs as a Dataset over ``point`` (the points' values as variables).

    Args:
        variables: The grid's variables (the order of the points' tuples).
        layout: The experiment's :class:`~jaxattn.engine._experiment.Layout`.
        cid: The chunk's id (an attribute).
        experiment: The experiment's name (an attribute).
        points: The chunk's points (tuples over ``variables``).
        out: Observable name -> array ``(len(points), *layout.dims[name])``.

    Returns:
        The ``xarray.Dataset`` over ``point``, with ``chunk`` and ``experiment`` attributes.
    """
    data: dict[str, tuple] = {k: (("point",) + tuple(layout.dims[k]), v) for k, v in out.items()}
    for i, var in enumerate(variables):
        data[var] = ("point", np.asarray([p[i] for p in points]))
    return xr.Dataset(data, coords=layout.coords, attrs={"chunk": cid, "experiment": experiment})


def _damage_message(root: str, bad: dict[int, str]) -> str:
    names = "; ".join(
        f"chunk {cid} ({os.path.relpath(chunk_path(root, cid), root)}): {why}" for cid, why in bad.items()
    )
    return (
        f"{root}: {len(bad)} damaged chunk{'s' if len(bad) > 1 else ''}: {names}; "
        f"`jaxattn sweep run FILE --out {root}` recomputes {'them' if len(bad) > 1 else 'it'}"
    )


def load_store(root: str, *, complete: bool = True) -> xr.Dataset:
    """The finished chunks of a store as one Dataset over the sweep's grid: one dimension per
    grid dimension (a zipped group is one dimension with a coordinate per variable), then the
    observables' own dimensions. With ``complete`` (default), unfinished points are an error;
    otherwise they are ``NaN`` (``False`` for flags), ``done`` marks the finished points, and a
    store with points not finished says how many in an :class:`IncompleteStore` warning.

    Args:
        root: The store's folder.
        complete: Require every point to be finished.

    Returns:
        The ``xarray.Dataset`` over the grid, with the manifest's attributes, the sweep file's
            text (``sweep``) and ``jaxattn_version``; and ``done`` where not ``complete``.

    Raises:
        NotAStore: If ``root`` is not a store (no manifest).
        DamagedStore: If the manifest is damaged, or (with ``complete``) a chunk is; without
            ``complete`` a damaged chunk is a warning and its points are not ``done``.
        FileNotFoundError: If there are no finished chunks.
        ValueError: If chunks hold points outside the grid, or (with ``complete``) points are
            not finished.
    """
    man = require_manifest(root)
    sweep = read_sweep(root)
    bad = damaged(root)
    if bad and complete:
        raise DamagedStore(_damage_message(root, bad))
    if bad:
        warnings.warn(_damage_message(root, bad) + "; their points are left out (done = False)", stacklevel=2)
    paths = [chunk_path(root, cid) for cid in sorted(finished(root) - set(bad))]
    if not paths:
        raise FileNotFoundError(f"no finished chunks in {root}")
    parts: list[xr.Dataset] = []
    for p in paths:
        with xr.open_dataset(p, engine=ENGINE) as ds:
            parts.append(ds.load())
    # chunks of an extended sweep may have larger padded axes (``head`` after adding an ``H``):
    # an outer join fills the smaller ones with NaN, as padding is everywhere else
    flat = xr.concat(
        parts,
        dim="point",
        data_vars="all",
        coords="different",
        compat="equals",
        combine_attrs="drop_conflicts",
        join="outer",
    )
    grid = sweep.grid
    index = {k: i for i, k in enumerate(grid.points())}
    cols = [flat[v].values.tolist() for v in grid.variables]
    pos = np.array([index.get(tuple(c[i] for c in cols), -1) for i in range(flat.sizes["point"])], np.int64)
    if np.any(pos < 0):
        raise ValueError(f"{root!r} holds points outside its sweep file's grid")
    done = np.zeros(grid.n_points, bool)
    done[pos] = True
    if complete and not done.all():
        raise ValueError(
            f"{root!r}: {int((~done).sum())} of {grid.n_points} points not finished "
            "(run the sweep again to finish it, or load_store(..., complete=False))"
        )
    dim_names = [d.name for d in grid.dims]
    data = {}
    for name, var in flat.data_vars.items():
        if name in grid.variables:
            continue
        rest = var.shape[1:]
        if var.dtype == bool:
            arr = np.zeros((grid.n_points,) + rest, bool)
        elif complete and np.issubdtype(var.dtype, np.integer):  # no point missing: no NaN needed
            arr = np.zeros((grid.n_points,) + rest, var.dtype)
        else:
            dtype = var.dtype if np.issubdtype(var.dtype, np.floating) else np.float64
            arr = np.full((grid.n_points,) + rest, np.nan, dtype=dtype)
        arr[pos] = var.values
        data[name] = (dim_names + list(var.dims[1:]), arr.reshape(grid.shape + rest), var.attrs)
    coords: dict = {}
    for d in grid.dims:
        for v, vals in d.values.items():
            coords[v] = (d.name, list(vals))
    for c in flat.coords:
        if c not in grid.variables and "point" not in flat[c].dims:
            coords[c] = flat[c].values
    out = xr.Dataset(data, coords=coords)
    if not complete:
        out["done"] = (dim_names, done.reshape(grid.shape))
        missing = int(grid.n_points - done.sum())
        if missing:
            warnings.warn(
                f"{root}: {missing} of {grid.n_points} points not finished (pending, failed or damaged "
                "chunks): NaN there, done = False",
                IncompleteStore,
                stacklevel=2,
            )
    out.attrs = {**man.get("attrs", {}), "sweep": sweep.text, "jaxattn_version": man.get("version", "")}
    return out


def out_problem(out: str) -> str | None:
    """Why ``out`` cannot hold a store, if it cannot: a path under a file, a folder that cannot
    be created or written, one that holds other things and no store, or a store whose own
    folders (``chunks/``, ``chunks/damaged/``, ``claims/``) or log a run could not write.
    Each is probed by creating and removing a file (:func:`jaxattn.core.checks.unwritable`),
    so a run finds them before it computes a chunk, not after. Leaves nothing behind.

    Args:
        out: The store's folder.

    Returns:
        ``None`` if a store can be made (or is) there, else the reason (one line).
    """
    why = unwritable(out, folder=True)
    if why is not None:
        return why
    for sub in ("chunks", os.path.join("chunks", "damaged"), "claims", "log.jsonl"):
        path = os.path.join(out, sub)
        if os.path.lexists(path):
            why = unwritable(path, folder=sub != "log.jsonl")
            if why is not None:
                return why
    if os.path.isdir(out) and not os.path.exists(os.path.join(out, "manifest.json")):
        other = foreign_entries(out)
        if other:
            shown = ", ".join(other[:3]) + (", ..." if len(other) > 3 else "")
            return f"{out} is not empty and not a sweep store (it holds {shown}); use a new or empty folder"
    return None
