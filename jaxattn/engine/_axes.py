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
    stream of its grid point's other values.

    Attributes:
        name: The axis (and keyword) name.
        kind: ``"int"``, ``"float"`` or ``"str"``.
        default: The value used when the axis is not swept.
        check: Validates and normalises one value (raises ``ValueError`` naming the axis).
        shared: Grid points differing only in shared axes see the same data stream.
        help: One line of help text for the command line.
        options: The allowed values of a ``"str"`` (choice) axis; empty otherwise.
    """

    name: str
    kind: str
    default: Any
    check: Callable[[Any], Any]
    shared: bool = False
    help: str = ""
    options: tuple[str, ...] = ()

    def validate(self, values) -> tuple:
        """A scalar or a list of values, checked, normalised and free of repeats.

        Args:
            values: One value, or a list, tuple, range or 1-d array of values.

        Returns:
            The values after ``check``, as a tuple.

        Raises:
            ValueError: If there are no values, a value fails ``check``, or values repeat.
        """
        vals = list(values) if isinstance(values, (list, tuple, range, np.ndarray)) else [values]
        if not vals:
            raise ValueError(f"{self.name} must be a non-empty list of values, got {checks.plain(values)}")
        out = tuple(self.check(v) for v in vals)
        if len(set(out)) != len(out):
            raise ValueError(f"{self.name} has repeated values: {list(out)}")
        return out


def int_axis(name: str, default: int, minimum: int, *, shared: bool = False, help: str = "") -> Axis:
    """An integer axis ``>= minimum``.

    Args:
        name: The axis name.
        default: Its default value.
        minimum: The smallest allowed value.
        shared: Whether the axis shares its grid point's data stream.
        help: One line of help text.

    Returns:
        An ``Axis`` of kind ``"int"``.
    """
    return Axis(name, "int", default, lambda v: checks.integer(name, v, minimum), shared, help)


def float_axis(name: str, default: float, *, allow_zero: bool = False, shared: bool = False, help: str = "") -> Axis:
    """A positive (or non-negative) real axis.

    Args:
        name: The axis name.
        default: Its default value (converted to ``float``).
        allow_zero: Accept ``0`` (a non-negative rather than positive axis).
        shared: Whether the axis shares its grid point's data stream.
        help: One line of help text.

    Returns:
        An ``Axis`` of kind ``"float"``.
    """
    return Axis(name, "float", float(default), lambda v: checks.positive(name, v, allow_zero=allow_zero), shared, help)


def choice_axis(name: str, default: str, options: tuple[str, ...], *, shared: bool = False, help: str = "") -> Axis:
    """An axis over named choices (hyphens read as underscores).

    Args:
        name: The axis name.
        default: Its default choice.
        options: The allowed choices.
        shared: Whether the axis shares its grid point's data stream.
        help: One line of help text.

    Returns:
        An ``Axis`` of kind ``"str"`` with ``options`` set.
    """
    return Axis(name, "str", default, lambda v: checks.choice(name, v, options), shared, help, tuple(options))


@dataclass(frozen=True)
class Dim:
    """One dimension of a grid: a plain axis (one variable) or a zipped group (several).

    Attributes:
        name: The axis name, or the zipped group's name.
        values: Each variable's values along the dimension (tuples of equal length).
    """

    name: str
    values: dict[str, tuple]  # variable -> its values along the dimension (equal lengths)

    @property
    def size(self) -> int:
        return len(next(iter(self.values.values())))


@dataclass(frozen=True)
class Grid:
    """The outer product of its dimensions, flattened with the first dimension outermost.

    Attributes:
        dims: The dimensions, outermost first.
    """

    dims: tuple[Dim, ...]

    @classmethod
    def from_values(cls, axes: dict[str, Axis], values: dict[str, Any]) -> Grid:
        """A grid with one plain dimension per entry of ``values`` (in that order), each checked
        by its axis.

        Args:
            axes: The experiment's axes by name.
            values: Axis name -> a value or a list of values.

        Returns:
            The ``Grid``.

        Raises:
            ValueError: If a name is not an axis or its values fail :meth:`Axis.validate`.
        """
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
        """Every grid point as a tuple of its variables' values (flat order).

        Returns:
            One tuple per point (``n_points`` of them, ordered as :attr:`variables`); ``[()]``
                for a grid without dimensions.
        """
        if not self.dims:
            return [()]
        idx = np.indices(self.shape).reshape(len(self.dims), -1).T
        return [tuple(v[i] for d, i in zip(self.dims, row) for v in d.values.values()) for row in idx]

    def to_json(self) -> list:
        """The grid as JSON-ready data.

        Returns:
            ``[[dim name, {variable: [values]}], ...]``, one entry per dimension.
        """
        return [[d.name, {k: list(v) for k, v in d.values.items()}] for d in self.dims]


def parse_values(path: str, spec, problems: list[str], unique: bool = True) -> tuple | None:
    """The values of one axis in a sweep file: a list, a scalar, or a table
    ``range``/``linspace``/``logspace`` (``integer = true`` rounds).

    Args:
        path: Where the values are in the file (used in the messages), e.g. ``"grid.L"``.
        spec: The TOML value: a list, a scalar or a one-entry range table.
        problems: Messages about invalid values are appended here.
        unique: Report repeated values in a list as a problem.

    Returns:
        The values as a tuple, or ``None`` (with a message in ``problems``) if invalid.
    """
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
        sub = f"{path}.{checks.toml_key(kind)}"
        if not isinstance(args, list) or not all(isinstance(a, (int, float)) and not isinstance(a, bool) for a in args):
            problems.append(f"{sub}: expected a list of numbers, got {checks.plain(args)}")
            return None
        if kind == "range":
            if not 1 <= len(args) <= 3 or not all(isinstance(a, int) for a in args):
                problems.append(
                    f"{sub}: expected [stop], [start, stop] or [start, stop, step] integers, got {checks.plain(args)}"
                )
                return None
            vals = tuple(range(*args))
        else:
            if len(args) != 3 or not isinstance(args[2], int) or args[2] < 1:
                problems.append(
                    f"{sub}: expected [start, stop, count] with an integer count >= 1, got {checks.plain(args)}"
                )
                return None
            if kind == "logspace" and (args[0] <= 0 or args[1] <= 0):
                problems.append(f"{sub}: start and stop must be > 0, got {checks.plain(args)}")
                return None
            fn = np.geomspace if kind == "logspace" else np.linspace
            vals = tuple(float(x) for x in fn(args[0], args[1], args[2]))
            if integer:  # rounded, repeated values dropped
                vals = tuple(dict.fromkeys(int(round(x)) for x in vals))
        if not vals:
            problems.append(f"{sub}: gives no values ({checks.plain(args)})")
            return None
        return vals
    if isinstance(spec, (int, float, str, bool)):
        return (spec,)
    problems.append(f"{path}: expected a list, a scalar or a range table, got {type(spec).__name__}")
    return None


def parse_dims(grid: dict, problems: list[str]) -> list[Dim]:
    """A sweep file's ``[grid]`` table as dimensions (values not yet checked by their axes).

    Args:
        grid: The ``[grid]`` table: axis name -> values, and optionally ``zip`` -> group tables.
        problems: Messages about invalid entries are appended here (those entries are skipped).

    Returns:
        The valid dimensions, in table order.
    """
    dims: list[Dim] = []
    for name, spec in grid.items():
        if name == "zip":
            if not isinstance(spec, dict):
                problems.append("grid.zip: expected tables of zipped axes ([grid.zip.NAME])")
                continue
            for group, axes in spec.items():
                path = f"grid.zip.{checks.toml_key(group)}"
                if not isinstance(axes, dict) or not axes:
                    problems.append(f"{path}: expected a table of axes, each a list of values")
                    continue
                parsed = {
                    k: parse_values(f"{path}.{checks.toml_key(k)}", v, problems, unique=False) for k, v in axes.items()
                }
                vals = {k: v for k, v in parsed.items() if v is not None}
                if len(vals) != len(parsed):
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
            vals = parse_values(f"grid.{checks.toml_key(name)}", spec, problems)
            if vals is not None:
                dims.append(Dim(name, {name: vals}))
    return dims


def check_dims(dims: list[Dim], axes: dict[str, Axis], problems: list[str], where=None) -> list[Dim]:
    """Each variable's values checked (and normalised) by its axis; ``where(dim, var)`` gives the
    path used in the messages.

    Args:
        dims: The dimensions to check.
        axes: The experiment's axes by name.
        problems: Messages about unknown axes and invalid values are appended here.
        where: ``where(dim, var)`` -> the path named in a message; ``None`` uses the variable name.

    Returns:
        The dimensions whose variables all pass, with normalised values.
    """
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
