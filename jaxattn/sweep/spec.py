"""Sweep files: a declarative grid over one model, parsed and validated before anything runs.

A sweep file is TOML::

    model = "slm_sgd"                 # a name in jaxattn.sweep.models.MODELS

    [fixed]                           # the model's parameters that do not vary
    D = 200
    prior = { family = "onehot", F = 2, nu = 9.0 }

    [grid]                            # one dimension per axis, outer product in file order
    seed = { range = [0, 8] }         # 0, 1, ..., 7
    H = [1, 2, 4]
    eta = { logspace = [0.1, 1.0, 4] }   # 4 values, geometric from 0.1 to 1
    P = { logspace = [50, 2000, 12], integer = true }   # rounded to integers
    signal = { linspace = [0.5, 2.0, 4] }

    [grid.zip.shape]                  # zipped axes: one dimension "shape" walking both together
    L = [4, 8]
    batch = [1, 2]

    [execution]                       # optional
    block = 16                        # points computed together (vmapped) by one program
    chunk_size = 64                   # points per stored chunk (default: from memory_budget)
    memory_budget = "2GB"

Every mistake is collected and reported at once, each with its path in the file
(``grid.eta.logspace: ...``), as a :class:`SweepFileError`.
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

TOP_KEYS = ("model", "fixed", "grid", "execution")
EXECUTION_KEYS = {"block": int, "chunk_size": int, "memory_budget": (str, int)}
_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30}


class SweepFileError(ValueError):
    """Every problem found in a sweep file, each as ``path: message``."""

    def __init__(self, problems: list[str], source: str = "sweep file"):
        self.problems = list(problems)
        super().__init__(f"{source}: {len(problems)} problem(s)\n" + "\n".join(f"  {p}" for p in problems))


@dataclass(frozen=True)
class Dim:
    """One dimension of the grid: a plain axis (one variable) or a zipped group (several)."""

    name: str
    values: dict[str, tuple]  # variable -> its values along the dimension (equal lengths)

    @property
    def size(self) -> int:
        return len(next(iter(self.values.values())))


@dataclass(frozen=True)
class Sweep:
    """A validated sweep: the model, its fixed parameters, the grid dimensions and the
    execution options. ``text`` is the file as written (stored with the results)."""

    model: str
    fixed: dict[str, Any]
    dims: tuple[Dim, ...]
    block: int = 16
    chunk_size: int | None = None
    memory_budget: int = 2 * 10**9
    text: str = field(default="", compare=False)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(d.size for d in self.dims)

    @property
    def n_points(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def variables(self) -> list[str]:
        return [v for d in self.dims for v in d.values]

    def points(self, indices=None) -> dict[str, list]:
        """The grid's points (outer product of the dimensions, the first outermost) as columns,
        one list per variable; ``indices`` selects flat positions."""
        idx = np.arange(self.n_points) if indices is None else np.asarray(indices, np.int64)
        multi = np.unravel_index(idx, self.shape) if self.dims else ()
        cols = {}
        for d, pos in zip(self.dims, multi):
            for var, vals in d.values.items():
                cols[var] = [vals[i] for i in pos.tolist()]
        return cols

    def keys(self) -> list[tuple]:
        """A hashable identity of every point (its values), in flat order."""
        cols = self.points()
        return list(zip(*[cols[v] for v in self.variables])) if cols else [()] * self.n_points

    def identity(self) -> str:
        """A hash of what determines the numbers (model, fixed parameters, block): two sweeps
        with equal identities may share stored chunks."""
        blob = json.dumps({"model": self.model, "fixed": self.fixed, "block": self.block}, sort_keys=True,
                          default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def grid_json(self) -> str:
        return json.dumps([{"name": d.name, "values": {k: list(v) for k, v in d.values.items()}}
                           for d in self.dims])


def parse_size(value) -> int:
    """``"2GB"``, ``"512MiB"`` or a number of bytes."""
    if isinstance(value, bool):
        raise ValueError(f"expected a size like '2GB', got {value!r}")
    if isinstance(value, int):
        n = value
    else:
        m = re.fullmatch(r"\s*([0-9.]+)\s*([a-zA-Z]*)\s*", str(value))
        if not m or m.group(2).lower() not in _UNITS:
            raise ValueError(f"expected a size like '2GB' or '512MiB', got {value!r}")
        n = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    if n <= 0:
        raise ValueError(f"must be positive, got {value!r}")
    return n


def _axis_values(path: str, spec, problems: list[str], unique: bool = True) -> tuple | None:
    """The values of one axis: a list, a scalar, or a table ``range``/``linspace``/``logspace``."""
    if isinstance(spec, list):
        if not spec:
            problems.append(f"{path}: empty list of values")
            return None
        if unique and len({json.dumps(v) for v in spec}) != len(spec):
            problems.append(f"{path}: repeated values {spec}")
            return None
        return tuple(spec)
    if isinstance(spec, dict):
        spec = dict(spec)
        integer = spec.pop("integer", False)
        if len(spec) != 1 or next(iter(spec)) not in ("range", "linspace", "logspace") or \
                not isinstance(integer, bool):
            problems.append(f"{path}: a table axis must be exactly one of range, linspace, logspace (and "
                            f"optionally integer = true); got {sorted(spec)}")
            return None
        kind, args = next(iter(spec.items()))
        sub = f"{path}.{kind}"
        if not isinstance(args, list) or not all(isinstance(a, (int, float)) and not isinstance(a, bool)
                                                 for a in args):
            problems.append(f"{sub}: expected a list of numbers, got {args!r}")
            return None
        if kind == "range":
            if not 1 <= len(args) <= 3 or not all(isinstance(a, int) for a in args):
                problems.append(f"{sub}: expected [stop], [start, stop] or [start, stop, step] integers, "
                                f"got {args!r}")
                return None
            vals = tuple(range(*args))
        else:
            if len(args) != 3 or not isinstance(args[2], int) or args[2] < 1:
                problems.append(f"{sub}: expected [start, stop, count] with an integer count >= 1, got {args!r}")
                return None
            if kind == "logspace" and (args[0] <= 0 or args[1] <= 0):
                problems.append(f"{sub}: start and stop must be > 0, got {args!r}")
                return None
            fn = np.geomspace if kind == "logspace" else np.linspace
            vals = tuple(float(x) for x in fn(args[0], args[1], args[2]))
            if integer:  # rounded, repeated values dropped
                vals = tuple(dict.fromkeys(int(round(x)) for x in vals))
        if not vals:
            problems.append(f"{sub}: gives no values ({args!r})")
            return None
        return vals
    if isinstance(spec, (int, float, str, bool)):
        return (spec,)
    problems.append(f"{path}: expected a list, a scalar or a range table, got {type(spec).__name__}")
    return None


def _grid_dims(grid: dict, problems: list[str]) -> list[Dim]:
    dims: list[Dim] = []
    for name, spec in grid.items():
        if name == "zip":
            if not isinstance(spec, dict):
                problems.append("grid.zip: expected tables of zipped axes ([grid.zip.NAME])")
                continue
            for group, axes in spec.items():
                path = f"grid.zip.{group}"
                if not isinstance(axes, dict) or not axes:
                    problems.append(f"{path}: expected a table of axes, each a list of values")
                    continue
                vals = {k: _axis_values(f"{path}.{k}", v, problems, unique=False) for k, v in axes.items()}
                if any(v is None for v in vals.values()):
                    continue
                lengths = {k: len(v) for k, v in vals.items()}
                if len(set(lengths.values())) != 1:
                    problems.append(f"{path}: zipped axes must have equal lengths, got {lengths}")
                    continue
                rows = list(zip(*vals.values()))
                if len(set(rows)) != len(rows):
                    problems.append(f"{path}: repeated combinations of values")
                    continue
                dims.append(Dim(group, vals))
        else:
            vals = _axis_values(f"grid.{name}", spec, problems)
            if vals is not None:
                dims.append(Dim(name, {name: vals}))
    return dims


def parse(text: str, source: str = "sweep file") -> Sweep:
    """Parse and validate a sweep file's text; raises :class:`SweepFileError` listing every
    problem found (TOML syntax errors are reported alone: nothing else can be read then)."""
    from jaxattn.sweep.models import MODELS

    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise SweepFileError([f"TOML syntax: {err}"], source) from None
    problems: list[str] = []
    for key in doc:
        if key not in TOP_KEYS:
            problems.append(f"{key}: unknown key (expected one of {', '.join(TOP_KEYS)})")
    model_name = doc.get("model")
    model = None
    if model_name is None:
        problems.append(f"model: missing (one of {', '.join(MODELS)})")
    elif model_name not in MODELS:
        problems.append(f"model: unknown model {model_name!r} (one of {', '.join(MODELS)})")
    else:
        model = MODELS[model_name]
    fixed = doc.get("fixed", {})
    grid = doc.get("grid", {})
    execution = doc.get("execution", {})
    for name, tbl in (("fixed", fixed), ("grid", grid), ("execution", execution)):
        if not isinstance(tbl, dict):
            problems.append(f"{name}: expected a table, got {type(tbl).__name__}")
    fixed = fixed if isinstance(fixed, dict) else {}
    grid = grid if isinstance(grid, dict) else {}
    execution = execution if isinstance(execution, dict) else {}
    dims = _grid_dims(grid, problems)

    names = [v for d in dims for v in d.values]
    for v in {v for v in names if names.count(v) > 1}:
        problems.append(f"grid: variable {v!r} appears in more than one dimension")
    dim_names = [d.name for d in dims]
    for n in {n for n in dim_names if dim_names.count(n) > 1}:
        problems.append(f"grid.zip.{n}: dimension name used twice")
    for v in set(names) & set(fixed):
        problems.append(f"fixed.{v}: also a grid axis (give it in one place)")

    opts = {}
    for key, value in execution.items():
        if key not in EXECUTION_KEYS:
            problems.append(f"execution.{key}: unknown key (expected one of {', '.join(EXECUTION_KEYS)})")
        elif key == "memory_budget":
            try:
                opts[key] = parse_size(value)
            except ValueError as err:
                problems.append(f"execution.memory_budget: {err}")
        elif not isinstance(value, int) or isinstance(value, bool) or value < 1:
            problems.append(f"execution.{key}: expected an integer >= 1, got {value!r}")
        else:
            opts[key] = value

    if model is not None:
        problems.extend(model.validate(fixed, {v: vals for d in dims for v, vals in d.values.items()}))
    if problems:
        raise SweepFileError(problems, source)
    return Sweep(model_name, fixed, tuple(dims), text=text, **opts)


def load_file(path) -> Sweep:
    """Read and validate a sweep file."""
    with open(path, encoding="utf-8") as f:
        return parse(f.read(), source=str(path))


__all__ = ["Dim", "Sweep", "SweepFileError", "load_file", "parse", "parse_size"]
