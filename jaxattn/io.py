"""Results as labelled datasets: save to netCDF and load again (a file, or a sweep store).

A dataset's dimensions are its grid axes and the observables' own (``time``, ``head``, ...);
its attributes hold the experiment, its configuration (as JSON text) and the package version, so
a file says how to reproduce it.
"""

from __future__ import annotations

import json
import os
from typing import Any

import xarray as xr

ENGINE = "netcdf4"


def save(ds: xr.Dataset, path: str | os.PathLike) -> str:
    """Write ``ds`` to a netCDF file (``netcdf4`` engine); returns the path.

    Args:
        ds: The dataset to write.
        path: The file to write (its folder is created if missing).

    Returns:
        ``path`` as a ``str``.
    """
    path = os.fspath(path)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    ds.to_netcdf(path, engine=ENGINE)
    return path


def load(path: str | os.PathLike) -> xr.Dataset:
    """Read a dataset written by :func:`save` fully into memory; a folder is read as a sweep
    store (:func:`jaxattn.engine.load_store`: one dataset over the whole grid).

    Args:
        path: A netCDF file written by :func:`save`, or a sweep store's folder.

    Returns:
        The dataset, loaded into memory.

    Raises:
        FileNotFoundError: If ``path`` does not exist.
        ValueError: If the file is not a readable netCDF dataset (cut short, say).
        jaxattn.engine.NotAStore: If ``path`` is a folder but not a sweep store.
        jaxattn.engine.DamagedStore: If the store's manifest or a chunk is damaged.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        from jaxattn.engine import load_store

        return load_store(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such file: {path!r}")
    try:
        with xr.open_dataset(path, engine=ENGINE) as ds:
            return ds.load()
    except OSError as err:  # a truncated or foreign file: netCDF's own message names no file
        raise ValueError(f"{path} is not a readable netCDF dataset ({err})") from None


def result_dataset(
    record: dict,
    *,
    experiment: str,
    config: dict,
    arrays: dict | None = None,
    attrs: dict | None = None,
    x64: bool | None = None,
    matmul_precision: str | None = None,
) -> xr.Dataset:
    """A command's result as a dataset that :func:`save` writes and ``jaxattn info`` reads: the
    record's numbers and flags as 0-d variables, ``arrays`` as given, the whole record as
    the JSON attribute ``result``, the experiment, its config (JSON) and the provenance.

    Args:
        record: The result (JSON values).
        experiment: What computed it (the ``experiment`` attribute).
        config: What it was computed with (JSON values; the ``config`` attribute).
        arrays: Further variables, ``name -> (dims, values)`` or a DataArray.
        attrs: Attributes that replace the config and provenance (an engine run's own, where
            the result was computed from one); ``experiment`` is always the one given.
        x64: The precision it ran at, for the provenance (:func:`jaxattn.engine.provenance.collect`).
        matmul_precision: The precision of its matrix products, likewise.

    Returns:
        The dataset.
    """
    import numpy as np

    from jaxattn.engine import provenance

    def number(v):
        return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)

    scalars = {k: float(v) for k, v in record.items() if number(v)}
    flags = {k: int(v) for k, v in record.items() if isinstance(v, (bool, np.bool_))}
    ds = xr.Dataset({**scalars, **flags, **(arrays or {})})
    ds.attrs = {
        "config": json.dumps(config),
        "provenance": provenance.as_attr(x64, matmul_precision),
        **(attrs or {}),
        "experiment": experiment,
    }
    return with_result(ds, record)


def with_result(ds: xr.Dataset, record: dict) -> xr.Dataset:
    """``ds`` with ``record`` (a command's result, JSON values) as its attribute ``result``
    (:func:`result_of` reads it back).

    Args:
        ds: A dataset (an engine run's, with its provenance).
        record: The result.

    Returns:
        A copy of ``ds`` with the attribute set.
    """
    return ds.assign_attrs(result=json.dumps(json_safe(record)))


def json_safe(v) -> Any:
    """``v`` as strict JSON values, at any depth: dataclasses as dicts of their fields, NumPy
    arrays and numbers as Python's, tuples as lists, and non-finite floats as ``None`` (``null``:
    "no value" to every reader).

    Args:
        v: A result (dataclasses, dicts, lists, numbers, NumPy values, strings).

    Returns:
        The same structure, each value one that ``json.dumps`` writes as strict JSON.
    """
    import dataclasses
    import math

    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {f.name: json_safe(getattr(v, f.name)) for f in dataclasses.fields(v)}
    if isinstance(v, dict):
        return {str(k): json_safe(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [json_safe(x) for x in v]
    tolist = getattr(v, "tolist", None)
    if callable(tolist):
        return json_safe(tolist())
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def result_of(ds: xr.Dataset) -> dict:
    """The record a command saved with its dataset (:func:`result_dataset`; ``{}`` if none).

    Args:
        ds: A dataset saved by a command's ``--out``.

    Returns:
        The parsed ``ds.attrs["result"]``.
    """
    return json.loads(ds.attrs["result"]) if "result" in ds.attrs else {}


def config_of(ds: xr.Dataset) -> dict:
    """The configuration a dataset was made with (a dict of JSON values).

    Args:
        ds: A dataset made by jaxattn (its ``config`` attribute holds JSON text).

    Returns:
        The parsed ``ds.attrs["config"]``.
    """
    return json.loads(ds.attrs["config"])
