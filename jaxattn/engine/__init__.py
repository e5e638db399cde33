"""The one grid engine; it knows no model.

A model declares an :class:`Experiment` (config type, axes, an ``(init, step)`` pair over a
block of grid points, output layout); :func:`run` computes it over a :class:`Grid` in memory,
:func:`run_sweep` chunk by chunk into a resumable store from a sweep file (:func:`parse`,
:func:`load_file`); :func:`load_store` and :func:`status` read a store back. See
``docs/architecture.md``.

Its public modules: :mod:`~jaxattn.engine.config` (a config dataclass from sweep files, the
command line and JSON), :mod:`~jaxattn.engine.store` (a store's files, manifest and log),
:mod:`~jaxattn.engine.provenance` (what produced a result), :mod:`~jaxattn.engine.cache`
(programs kept across processes) and :mod:`~jaxattn.engine.launch` (workers as a submitit job
array; it needs the ``cluster`` extra). The ``_``-prefixed modules are internal.
"""

from jaxattn.engine import cache, config, provenance, store
from jaxattn.engine._axes import Axis, Dim, Grid, choice_axis, float_axis, int_axis
from jaxattn.engine._compute import clear_caches, program_text, run
from jaxattn.engine._experiment import Experiment, Layout, OneShot, over_groups, segments, stream_values
from jaxattn.engine._plan import GridError, Plan, default_block, default_memory_budget, make_plan
from jaxattn.engine._registry import get, names, register
from jaxattn.engine._status import status
from jaxattn.engine._sweep import ChunksFailed, Report, SweepChanged, run_sweep, sweep_plan
from jaxattn.engine._sweepfile import Sweep, SweepFileError, dumps, load_file, parse, parse_size
from jaxattn.engine.store import DamagedStore, NotAStore, load_store

__all__ = [
    "Axis",
    "ChunksFailed",
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
    "config",
    "default_block",
    "default_memory_budget",
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
    "program_text",
    "provenance",
    "register",
    "run",
    "run_sweep",
    "segments",
    "status",
    "store",
    "stream_values",
    "sweep_plan",
]
