"""Grid axes: what an experiment's axes are, and the grid of values a run walks.

An :class:`Axis` is declared once by an experiment: its name, its kind, a default, a check for one
value (a ``ValueError`` naming the axis) and whether it is *shared*: grid points that differ only
in shared axes see the same data stream (common random numbers). A :class:`Grid` is a tuple of
:class:`Dim`: a plain dimension walks one axis, a zipped one walks several together; the grid is
their outer product, flattened in dimension order (the first outermost). The same grid comes
from Python keywords (:meth:`Grid.from_values`), command-line lists and a sweep file's ``[grid]``
table (:func:`parse_dims`: lists, scalars, ``range``, ``linspace``, ``logspace``, zips).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from jaxattn.core import checks


@dataclass(frozen=True)
class Axis:
    """One axis of an experiment. ``kind`` is ``"int"``, ``"float"`` or ``"str"``; ``check``
    validates and normalises one value; ``shared`` marks a hyper-parameter that shares the data
    stream of its grid point's other values."""

    name: str
    kind: str
    default: Any
    check: Callable[[Any], Any]
    shared: bool = False
    help: str = ""
    options: tuple[str, ...] = ()

    def validate(self, values) -> tuple:
        """A scalar or a list of values, checked, normalised and free of repeats."""
        vals = list(values) if isinstance(values, (list, tuple, range, np.ndarray)) else [values]
        if not vals:
            raise ValueError(f"{self.name} must be a non-empty list of values, got {values!r}")
        out = tuple(self.check(v) for v in vals)
        if len(set(out)) != len(out):
            raise ValueError(f"{self.name} has repeated values: {list(out)}")
        return out


def int_axis(name: str, default: int, minimum: int, *, shared: bool = False, help: str = "") -> Axis:
    """An integer axis ``>= minimum``."""
    return Axis(name, "int", default, lambda v: checks.integer(name, v, minimum), shared, help)


def float_axis(name: str, default: float, *, allow_zero: bool = False, shared: bool = False, help: str = "") -> Axis:
    """A positive (or non-negative) real axis."""
    return Axis(name, "float", float(default), lambda v: checks.positive(name, v, allow_zero=allow_zero), shared, help)


def choice_axis(name: str, default: str, options: tuple[str, ...], *, shared: bool = False, help: str = "") -> Axis:
    """An axis over named choices (hyphens read as underscores)."""
    return Axis(name, "str", default, lambda v: checks.choice(name, v, options), shared, help, tuple(options))


@dataclass(frozen=True)
class Dim:
    """One dimension of a grid: a plain axis (one variable) or a zipped group (several)."""

    name: str
    values: dict[str, tuple]  # variable -> its values along the dimension (equal lengths)

    @property
    def size(self) -> int:
        return len(next(iter(self.values.values())))


@dataclass(frozen=True)
class Grid:
    """The outer product of its dimensions, flattened with the first dimension outermost."""

    dims: tuple[Dim, ...]

    @classmethod
    def from_values(cls, axes: dict[str, Axis], values: dict[str, Any]) -> Grid:
        """A grid with one plain dimension per entry of ``values`` (in that order), each checked
        by its axis."""
        dims = []
        for name, v in values.items():
            if name not in axes:
                raise ValueError(f"{name} is not an axis (axes: {', '.join(axes)})")
            dims.append(Dim(name, {name: axes[name].validate(v)}))
        return cls(tuple(dims))

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(d.size for d in self.dims)

    @property
    def n_points(self) -> int:
        return int(np.prod(self.shape)) if self.dims else 1

    @property
    def variables(self) -> list[str]:
        return [v for d in self.dims for v in d.values]

    def points(self) -> list[tuple]:
        """Every grid point as a tuple of its variables' values (flat order)."""
        if not self.dims:
            return [()]
        idx = np.indices(self.shape).reshape(len(self.dims), -1).T
        return [tuple(v[i] for d, i in zip(self.dims, row) for v in d.values.values()) for row in idx]

    def to_json(self) -> list:
        return [[d.name, {k: list(v) for k, v in d.values.items()}] for d in self.dims]


def parse_values(path: str, spec, problems: list[str], unique: bool = True) -> tuple | None:
    """The values of one axis in a sweep file: a list, a scalar, or a table
    ``range``/``linspace``/``logspace`` (``integer = true`` rounds)."""
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
        if len(spec) != 1 or next(iter(spec)) not in ("range", "linspace", "logspace") or not isinstance(integer, bool):
            problems.append(
                f"{path}: a table axis must be exactly one of range, linspace, logspace (and "
                f"optionally integer = true); got {sorted(spec)}"
            )
            return None
        kind, args = next(iter(spec.items()))
        sub = f"{path}.{kind}"
        if not isinstance(args, list) or not all(isinstance(a, (int, float)) and not isinstance(a, bool) for a in args):
            problems.append(f"{sub}: expected a list of numbers, got {args!r}")
            return None
        if kind == "range":
            if not 1 <= len(args) <= 3 or not all(isinstance(a, int) for a in args):
                problems.append(f"{sub}: expected [stop], [start, stop] or [start, stop, step] integers, got {args!r}")
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


def parse_dims(grid: dict, problems: list[str]) -> list[Dim]:
    """A sweep file's ``[grid]`` table as dimensions (values not yet checked by their axes)."""
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
                vals = {k: parse_values(f"{path}.{k}", v, problems, unique=False) for k, v in axes.items()}
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
            vals = parse_values(f"grid.{name}", spec, problems)
            if vals is not None:
                dims.append(Dim(name, {name: vals}))
    return dims


def check_dims(dims: list[Dim], axes: dict[str, Axis], problems: list[str], where=None) -> list[Dim]:
    """Each variable's values checked (and normalised) by its axis; ``where(dim, var)`` gives the
    path used in the messages."""
    out = []
    for d in dims:
        vals = {}
        for var, values in d.values.items():
            path = where(d, var) if where else var
            if var not in axes:
                problems.append(f"{path}: not an axis of this model (axes: {', '.join(axes)})")
                continue
            try:
                vals[var] = tuple(axes[var].check(v) for v in values)
            except (ValueError, TypeError) as err:
                problems.append(f"{path}: {err}" if path != var else str(err))
        if len(vals) == len(d.values):
            out.append(Dim(d.name, vals))
    return out
