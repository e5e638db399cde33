"""Figures shared by every model: matplotlib on the Agg backend (no display needed) and a quick
look at any sweep's dataset."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import xarray as xr  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

__all__ = ["figure_formats", "plt", "save", "sweep_quicklook"]


def figure_formats() -> dict[str, str]:
    """The file formats a figure can be written in (matplotlib's, for the figure's canvas).

    Returns:
        Extension (``png``) -> description.
    """
    return dict(Figure().canvas.get_supported_filetypes())


def save(fig: Figure, path: str) -> str:
    """Write ``fig`` to ``path`` (its folder created if missing; the format from the extension)
    at 120 dpi, and close it.

    Args:
        fig: The figure.
        path: The file to write.

    Returns:
        ``path``.
    """
    import os

    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    try:
        fig.savefig(path, dpi=120)
    finally:
        plt.close(fig)
    return path


def sweep_quicklook(ds: xr.Dataset, var: str, x: str, hue: str | None = None) -> Figure:
    """``var`` against the grid dimension ``x``, one line per value of ``hue``: the last recorded
    time, every other dimension averaged (NaN, e.g. diverged or unfinished points, skipped).

    Args:
        ds: A sweep's dataset.
        var: The variable to plot.
        x: The dimension of ``var`` on the horizontal axis (log-scaled when all positive and
            spanning more than 1.5 decades).
        hue: A dimension of ``var`` drawn as one line per value; ``None`` for a single line.

    Returns:
        The ``matplotlib.figure.Figure``.

    Raises:
        ValueError: If ``var`` is not in ``ds``, or ``x`` or ``hue`` is not a dimension of it.
    """
    if var not in ds:
        raise ValueError(f"var: {var!r} is not in the dataset (have {', '.join(map(str, ds.data_vars))})")
    for name, dim in (("x", x), ("hue", hue)):
        if dim is not None and dim not in ds[var].dims:
            raise ValueError(f"{name}: {dim!r} is not a dimension of {var} (have {', '.join(map(str, ds[var].dims))})")
    da = ds[var].astype(float)
    if "time" in da.dims and "time" not in (x, hue):
        da = da.isel(time=-1)
    da = da.mean([d for d in da.dims if d not in (x, hue)], skipna=True)
    fig, ax = plt.subplots(figsize=(5, 3.5))
    if hue is None:
        ax.plot(da[x].values, da.values, "o-")
    else:
        for v in da[hue].values:
            ax.plot(da[x].values, da.sel({hue: v}).values, "o-", label=f"{hue}={v}")
        ax.legend(fontsize=8)
    ax.set_xlabel(x)
    ax.set_ylabel(var)
    if np.all(np.asarray(da[x].values, float) > 0) and np.ptp(np.log10(np.asarray(da[x].values, float))) > 1.5:
        ax.set_xscale("log")
    fig.tight_layout()
    return fig
