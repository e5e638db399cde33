"""Plots of single-location results: ``M(t)`` per head and the error against time."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

import numpy as np
import xarray as xr

from jaxattn.plots import plt, save

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


def _runs(ds: xr.Dataset) -> xr.Dataset:
    """Every grid axis but ``seed`` reduced to its first value, for a quick look."""
    sel = {d: 0 for d in ("H", "L", "eta", "signal") if d in ds.dims}
    return ds.isel(sel)


def plot_overlaps(ds: xr.Dataset, ax: Axes | None = None, **sel: Any) -> Axes:
    """``M[h, f](t)`` for every real head and direction (one line per seed; ``sel`` picks a grid
    point, e.g. ``H=4``).

    Args:
        ds: a Dataset of :func:`jaxattn.slm.train` (``M`` with dims ``(..., time, head, direction)``).
        ax: the Axes to draw on (default: a new figure's).
        **sel: coordinates selecting a grid point (``ds.sel(**sel)``); the other grid axes but
            ``seed`` are reduced to their first value.

    Returns:
        The matplotlib ``Axes``.
    """
    d = _runs(ds.sel(sel)) if sel else _runs(ds)
    ax = ax or plt.subplots(figsize=(5, 3.5))[1]
    t = d["time"].values
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for s in range(d.sizes.get("seed", 1)):
        m = d["M"].isel(seed=s).values if "seed" in d.dims else d["M"].values
        for h in range(m.shape[1]):
            if np.all(np.isnan(m[:, h])):
                continue  # a padded head
            for f in range(m.shape[2]):
                ax.plot(
                    t,
                    m[:, h, f],
                    color=colors[f % len(colors)],
                    alpha=0.8,
                    ls=["-", "--", ":", "-."][h % 4],
                    label=f"head {h}, s_{f}" if s == 0 else None,
                )
    ax.set_xscale("symlog", linthresh=max(t[1] if len(t) > 1 else 1.0, 1e-3))
    ax.set_xlim(0, t[-1])
    ax.set_xlabel("t = samples / D")
    ax.set_ylabel("M[h, f]")
    ax.legend(fontsize=7, ncol=2)
    return ax


def plot_error(ds: xr.Dataset, bayes_risk: float | None = None, ax: Axes | None = None, **sel: Any) -> Axes:
    """Test error against time (mean and spread over seeds), with the Bayes risk drawn in.

    Args:
        ds: a Dataset of :func:`jaxattn.slm.train` (``error`` with dims ``(..., time)``).
        bayes_risk: the Bayes risk, drawn as a horizontal line (``None``: not drawn).
        ax: the Axes to draw on (default: a new figure's).
        **sel: coordinates selecting a grid point (``ds.sel(**sel)``); the other grid axes but
            ``seed`` are reduced to their first value.

    Returns:
        The matplotlib ``Axes``.
    """
    d = _runs(ds.sel(sel)) if sel else _runs(ds)
    ax = ax or plt.subplots(figsize=(5, 3.5))[1]
    t = d["time"].values
    e = d["error"].values.reshape(-1, len(t)) if "seed" in d.dims else d["error"].values[None]
    with warnings.catch_warnings():  # times where every run diverged are blank, not an alarm
        warnings.simplefilter("ignore", RuntimeWarning)
        mean, lo, hi = np.nanmean(e, axis=0), np.nanmin(e, axis=0), np.nanmax(e, axis=0)
    ax.plot(t, mean, color="k", label=f"{ds.attrs.get('activation', '')} (mean of {len(e)})")
    if len(e) > 1:
        ax.fill_between(t, lo, hi, color="k", alpha=0.15)
    if bayes_risk is not None:
        ax.axhline(bayes_risk, color="C3", ls="--", label=f"Bayes risk {bayes_risk:.3f}")
    ax.set_xscale("symlog", linthresh=max(t[1] if len(t) > 1 else 1.0, 1e-3))
    ax.set_xlim(0, t[-1])
    ax.set_xlabel("t = samples / D")
    ax.set_ylabel("test error")
    ax.legend(fontsize=8)
    return ax


def training_figure(ds: xr.Dataset, bayes_risk: float | None = None, path: str | None = None) -> Figure:
    """Overlaps and error side by side (:func:`plot_overlaps`, :func:`plot_error`); saved to
    ``path`` if given.

    Args:
        ds: a Dataset of :func:`jaxattn.slm.train`.
        bayes_risk: the Bayes risk drawn in the error panel (``None``: not drawn).
        path: file to save the figure to (and close it); ``None``: only return it.

    Returns:
        The matplotlib ``Figure``.
    """
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.8))
    plot_overlaps(ds, ax=a)
    plot_error(ds, bayes_risk, ax=b)
    fig.tight_layout()
    if path:
        save(fig, path)
    return fig
