"""The one grid engine; it knows no model.

A model declares an :class:`Experiment` (config type, axes, an ``(init, step)`` pair over a
block of grid points, output layout); :func:`run` computes it over a :class:`Grid` in memory,
:func:`run_sweep` chunk by chunk into a resumable store from a sweep file (:func:`parse`,
:func:`load_file`); :func:`load_store` and :func:`status` read a store back. See
``docs/architecture.md``.
"""

from jaxattn.engine import cache
from jaxattn.engine.axes import Axis, Dim, Grid, choice_axis, float_axis, int_axis
from jaxattn.engine.compute import clear_caches, run
from jaxattn.engine.experiment import Experiment, Layout, OneShot, over_groups, segments, stream_values
from jaxattn.engine.plan import GridError, Plan, make_plan
from jaxattn.engine.registry import get, names, register
from jaxattn.engine.store import DamagedStore, NotAStore, load_store, status
from jaxattn.engine.sweep import Report, SweepChanged, run_sweep, sweep_plan
from jaxattn.engine.sweepfile import Sweep, SweepFileError, dumps, load_file, parse, parse_size

__all__ = [
    "Axis",
    "DamagedStore",
    "Dim",
    "Experiment",
    "Grid",
    "GridError",
    "Layout",
    "NotAStore",
    "OneShot",
    "Plan",
    "Report",
    "Sweep",
    "SweepChanged",
    "SweepFileError",
    "cache",
    "choice_axis",
    "clear_caches",
    "dumps",
    "float_axis",
    "get",
    "int_axis",
    "load_store",
    "load_file",
    "make_plan",
    "names",
    "over_groups",
    "parse",
    "parse_size",
    "register",
    "run",
    "run_sweep",
    "segments",
    "status",
    "stream_values",
    "sweep_plan",
]
