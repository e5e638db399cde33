"""Sweeps: declarative grids over any model, one compile per sweep, sharded, chunked, resumable.

``sweep.parse`` / ``sweep.load_file`` read a sweep file (:mod:`jaxattn.sweep.spec`),
``sweep.run`` computes it chunk by chunk into a store (:mod:`jaxattn.sweep.engine`), and
``sweep.load`` / ``sweep.status`` read the store back (:mod:`jaxattn.sweep.store`).
"""

from jaxattn.sweep.models import MODELS, Model
from jaxattn.sweep.engine import Report, SweepChanged, run
from jaxattn.sweep.spec import Sweep, SweepFileError, load_file, parse
from jaxattn.sweep.store import load, status

__all__ = ["MODELS", "Model", "Report", "Sweep", "SweepChanged", "SweepFileError", "load", "load_file",
           "parse", "run", "status"]
