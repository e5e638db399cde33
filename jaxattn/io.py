"""Results as labelled datasets: save to netCDF and load again (a file, or a sweep store).

A dataset's dimensions are its grid axes and the observables' own (``time``, ``head``, ...);
its attributes hold the experiment, its configuration (as JSON text) and the package version, so
a file says how to reproduce it.
"""

from __future__ import annotations

import json
import os

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


def config_of(ds: xr.Dataset) -> dict:
    """The configuration a dataset was made with (a dict of JSON values).

    Args:
        ds: A dataset made by jaxattn (its ``config`` attribute holds JSON text).

    Returns:
        The parsed ``ds.attrs["config"]``.
    """
    return json.loads(ds.attrs["config"])
