"""Results as labelled datasets: save to netCDF and load again.

A dataset's dimensions are its grid axes and ``time``; its attributes hold the configuration
(as JSON text) and the package version, so a file says how to reproduce it.
"""

from __future__ import annotations

import json
import os

import xarray as xr

ENGINE = "netcdf4"


def save(ds: xr.Dataset, path: str | os.PathLike) -> str:
    """Write ``ds`` to a netCDF file (``netcdf4`` engine); returns the path."""
    path = os.fspath(path)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    ds.to_netcdf(path, engine=ENGINE)
    return path


def load(path: str | os.PathLike) -> xr.Dataset:
    """Read a dataset written by :func:`save` fully into memory; a folder is read as a sweep
    store (:func:`jaxattn.sweep.load`: one dataset over the whole grid)."""
    if os.path.isdir(path):
        from jaxattn.sweep.store import load as load_store

        return load_store(os.fspath(path))
    with xr.open_dataset(os.fspath(path), engine=ENGINE) as ds:
        return ds.load()


def config_of(ds: xr.Dataset) -> dict:
    """The configuration a dataset was made with."""
    return json.loads(ds.attrs["config"])
