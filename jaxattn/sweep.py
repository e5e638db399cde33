"""Sweeps from a TOML file (``docs/sweeps.md``): the engine's sweep functions under their short
names. ``sweep.run(sweep, out)`` is :func:`jaxattn.engine.run_sweep`."""

from jaxattn.engine import (
    Report,
    Sweep,
    SweepChanged,
    SweepFileError,
    load,
    load_file,
    names,
    parse,
    parse_size,
    status,
)
from jaxattn.engine import run_sweep as run

__all__ = [
    "Report",
    "Sweep",
    "SweepChanged",
    "SweepFileError",
    "load",
    "load_file",
    "names",
    "parse",
    "parse_size",
    "run",
    "status",
]
