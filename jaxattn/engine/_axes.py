"""Grid axes: what an experiment's axes are, and the grid of values a run walks.

An :class:`Axis` is declared once by an experiment: its name, its kind, a default, a check for one
value (a ``ValueError`` naming the axis) and whether it is *shared*: grid points that differ only
in shared axes see the same data stream (common random numbers). A :class:`Grid` is a tuple of
:class:`Dim`: a plain dimension walks one axis, a zipped one walks several together; the grid is
their outer product, flattened in dimension order (the first outermost). The same grid comes
from Python keywords (:meth:`Grid.from_values`), command-line lists and a sweep file's ``[grid]``
table (:func:`parse_dims`: lists, scalars, ``range``, ``linspace``, ``logspace``, zips).

A grid is sized before it is built (:func:`check_grid_size`): its number of points comes from
the sizes of its dimensions (a ``range``'s length, a ``linspace``'s count), never from a list
of its values, and a grid whose plan would not fit in host memory is refused in one line.
``HOST_BYTES_PER_POINT`` bytes per point plus ``HOST_BYTES_PER_VARIABLE`` per grid variable is
the rule's estimate of a plan's host memory; ``MIN_PLAN_BUDGET`` bytes is what a plan may
always take, whatever the memory budget.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping
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


def int_axis(
    name: str,
    default: int,
    minimum: int,
    *,
    maximum: int = checks.INT32_MAX,
    shared: bool = False,
    help: str = "",
) -> Axis:
    """An integer axis from ``minimum`` to ``maximum``. The default maximum is what the kernels
    hold: their counters, shapes and key seeds are ``int32`` (:func:`jaxattn.core.keys.derive`
    takes seeds below ``2**31``), so a larger value is refused by name, not met as an overflow
    inside a compiled program.

    Args:
        name: The axis name.
        default: Its default value.
        minimum: The smallest allowed value.
        maximum: The largest allowed value.
        shared: Whether the axis shares its grid point's data stream.
        help: One line of help text.

    Returns:
        An ``Axis`` of kind ``"int"``.
    """
    return Axis(name, "int", default, lambda v: checks.integer(name, v, minimum, maximum), shared, help)


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
    def from_values(cls, axes: dict[str, Axis], values: dict[str, Any], memory_budget: int | None = None) -> Grid:
        """A grid with one plain dimension per entry of ``values`` (in that order), each checked
        by its axis. The grid is sized from the values' lengths first (a ``range`` is not
        listed): one past ``memory_budget`` or the host memory is refused
        (:func:`check_grid_size`) before any value is built.

        Args:
            axes: The experiment's axes by name.
            values: Axis name -> a value or a list of values.
            memory_budget: Bytes the grid's plan may take; ``None`` means the host memory
                available (:func:`~jaxattn.engine.make_plan` applies the run's budget).

        Returns:
            The ``Grid``.

        Raises:
            ValueError: If a name is not an axis, the grid is too large, or its values fail
                :meth:`Axis.validate`.
        """
        for name in values:
            if name not in axes:
                raise ValueError(f"{name} is not an axis (axes: {', '.join(axes)})")
        sizes = {name: _length(v) for name, v in values.items()}
        check_grid_size(sizes, memory_budget)
        return cls(tuple(Dim(name, {name: axes[name].validate(v)}) for name, v in values.items()))

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


def _length(values) -> int:
    """How many values :meth:`Axis.validate` makes of ``values``, without making them."""
    if isinstance(values, (list, tuple, range)) or (isinstance(values, np.ndarray) and values.ndim):
        return len(values)
    return 1


HOST_BYTES_PER_POINT = 512
HOST_BYTES_PER_VARIABLE = 64
MIN_PLAN_BUDGET = 256 * 10**6


def plan_bytes(n_points: int, n_variables: int) -> int:
    """The host memory a plan of a grid takes, by the rule of :func:`check_grid_size`.

    Args:
        n_points: The grid's points.
        n_variables: Its variables (a zipped dimension has several).

    Returns:
        ``n_points * (HOST_BYTES_PER_POINT + HOST_BYTES_PER_VARIABLE * n_variables)`` bytes.
    """
    return n_points * (HOST_BYTES_PER_POINT + HOST_BYTES_PER_VARIABLE * n_variables)


def available_memory() -> int | None:
    """The host memory available now: ``MemAvailable`` of ``/proc/meminfo`` (else the free
    pages), and no more than a cgroup's limit leaves (a container's ``memory.max``).

    Returns:
        Bytes, or ``None`` where the system does not say.
    """
    free = None
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    free = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    if free is None:
        try:
            free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            pass
    try:
        with open("/sys/fs/cgroup/memory.max", encoding="ascii") as f:
            limit = f.read().strip()
        with open("/sys/fs/cgroup/memory.current", encoding="ascii") as f:
            used = int(f.read().strip())
        if limit != "max":
            left = max(0, int(limit) - used)
            free = left if free is None else min(free, left)
    except (OSError, ValueError):
        pass
    return free


def size_text(n: int) -> str:
    """A number of bytes as a person reads it: ``"2 GB"``, ``"576 GB"``, ``"1.41 TB"``.

    Args:
        n: Bytes.

    Returns:
        Three significant digits and a decimal unit.
    """
    if n >= 10**21:  # past a float's reach for the larger ones: the power of ten
        return f"10^{len(str(int(n))) - 1} B"
    x, unit = float(n), "B"
    for unit in ("B", "kB", "MB", "GB", "TB", "PB", "EB"):
        if x < 1000 or unit == "EB":
            break
        x /= 1000
    return f"{x:.3g} {unit}"


def check_grid_size(
    sizes: Mapping[str, int],
    memory_budget: int | None = None,
    *,
    n_variables: int | None = None,
    where: str = "grid",
) -> int:
    """Refuse a grid whose plan would not fit in host memory, from the sizes of its dimensions
    alone (no list of points or values is built: call it before building them).

    The rule: planning a grid holds, for each point, its values as a tuple, its entry in the
    chunks of the plan (the manifest's lists and their JSON) and its place in the tables that
    cut the plan into streams and chunks: ``HOST_BYTES_PER_POINT`` (512) bytes a point plus
    ``HOST_BYTES_PER_VARIABLE`` (64) per grid variable (measured: 450 bytes a point at two
    variables, peak, parsing and planning a sweep and writing its manifest). That must fit in
    the memory budget (``memory_budget``: a sweep file's ``execution.memory_budget``, the
    command line's ``--memory-budget``, the Python API's ``memory_budget=``; a budget below
    ``MIN_PLAN_BUDGET``, 256 MB, counts as 256 MB, since it is set to cut small chunks, not
    small grids) and in the host memory available now (:func:`available_memory`). The device
    memory of each chunk is the budget's other use, cut chunk by chunk.

    Args:
        sizes: Each dimension's name -> its number of values (a zipped dimension counts once).
        memory_budget: Bytes the plan may take; ``None`` means the host memory available only.
        n_variables: The grid's variables; ``None`` means one per dimension.
        where: What is sized, the start of the message.

    Returns:
        The number of points.

    Raises:
        ValueError: One line naming the number of points, the memory they need and the budget
            or the host memory they exceed.
    """
    n = math.prod(int(v) for v in sizes.values())
    k = len(sizes) if n_variables is None else n_variables
    need = plan_bytes(n, k)
    budget = None if memory_budget is None else max(int(memory_budget), MIN_PLAN_BUDGET)
    free = available_memory()
    if budget is not None and need > budget:
        over = f"the memory budget of {size_text(budget)} (memory_budget; sweep run --memory-budget)"
    elif free is not None and need > free:
        over = f"the {size_text(free)} of host memory available"
    else:
        return n
    shown = {name: v for name, v in sizes.items() if v != 1} or sizes  # the dimensions that count
    dims = " x ".join(f"{name} {_count_text(v)}" for name, v in shown.items())
    raise ValueError(
        f"{where}: {_count_text(n)} points ({dims}) need about {size_text(need)} of host memory to plan "
        f"({plan_bytes(1, k)} bytes a point), more than {over}; make the grid smaller or split it"
    )


def _count_text(n: int) -> str:
    return str(n) if n < 10**18 else f"10^{len(str(int(n))) - 1}"


def count_values(path: str, spec, problems: list[str], unique: bool = True) -> int | None:
    """How many values one axis of a sweep file asks for, found without building them: a list's
    length, a ``range``'s length (from its ends and step), a ``linspace``'s or ``logspace``'s
    count (with ``integer = true``, the count before rounding, an upper bound).

    Args:
        path: Where the values are in the file (used in the messages), e.g. ``"grid.L"``.
        spec: The TOML value: a list, a scalar or a one-entry range table.
        problems: Messages about invalid values are appended here.
        unique: Report repeated values in a list as a problem.

    Returns:
        The number of values (``>= 1``), or ``None`` (with a message in ``problems``) if invalid.
    """
    if isinstance(spec, list):
        if not spec:
            problems.append(f"{path}: empty list of values")
            return None
        if unique and len({json.dumps(v) for v in spec}) != len(spec):
            problems.append(f"{path}: repeated values {checks.plain(spec)}")
            return None
        return len(spec)
    if isinstance(spec, (int, float, str, bool)):
        return 1
    if not isinstance(spec, dict):
        problems.append(f"{path}: expected a list, a scalar or a range table, got {type(spec).__name__}")
        return None
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
        start, stop, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], 1) if len(args) == 2 else args
        if step == 0:
            problems.append(f"{sub}: the step must not be 0, got {checks.plain(args)}")
            return None
        # the length by integer arithmetic: len(range(...)) overflows past 2**63
        n = max(0, (stop - start + step - (1 if step > 0 else -1)) // step)
    else:
        if len(args) != 3 or not isinstance(args[2], int) or args[2] < 1:
            problems.append(
                f"{sub}: expected [start, stop, count] with an integer count >= 1, got {checks.plain(args)}"
            )
            return None
        if not all(math.isfinite(a) for a in args[:2]):
            problems.append(f"{sub}: start and stop must be finite, got {checks.plain(args)}")
            return None
        if kind == "logspace" and (args[0] <= 0 or args[1] <= 0):
            problems.append(f"{sub}: start and stop must be > 0, got {checks.plain(args)}")
            return None
        n = args[2]
    if n == 0:
        problems.append(f"{sub}: gives no values ({checks.plain(args)})")
        return None
    return n


def _values(spec) -> tuple:
    """The values of one axis of a sweep file that :func:`count_values` has accepted: a list, a
    scalar, or a ``range``/``linspace``/``logspace`` table (``integer = true`` rounds)."""
    if isinstance(spec, list):
        return tuple(spec)
    if not isinstance(spec, dict):
        return (spec,)
    spec = dict(spec)
    integer = spec.pop("integer", False)
    kind, args = next(iter(spec.items()))
    if kind == "range":
        return tuple(range(*args))
    fn = np.geomspace if kind == "logspace" else np.linspace
    vals = tuple(float(x) for x in fn(args[0], args[1], args[2]))
    if integer:  # rounded, repeated values dropped
        vals = tuple(dict.fromkeys(int(round(x)) for x in vals))
    return vals


def parse_dims(grid: dict, problems: list[str], memory_budget: int | None = None) -> list[Dim]:
    """A sweep file's ``[grid]`` table as dimensions (values not yet checked by their axes),
    sized first: a grid past ``memory_budget`` (or the host memory available) is one problem,
    ``grid: N points ...`` (:func:`check_grid_size`), and no value is built.

    Args:
        grid: The ``[grid]`` table: axis name -> values, and optionally ``zip`` -> group tables.
        problems: Messages about invalid entries are appended here (those entries are skipped).
        memory_budget: Bytes the grid's plan may take; ``None`` means the host memory available.

    Returns:
        The valid dimensions, in table order (none if the grid is too large).
    """
    entries: list[tuple[str, dict[str, tuple[str, Any]], bool]] = []  # dim, variable -> (path, spec), zipped
    sizes: dict[str, int] = {}
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
                paths = {k: (f"{path}.{checks.toml_key(k)}", v) for k, v in axes.items()}
                counts = [count_values(p, v, problems, unique=False) for p, v in paths.values()]
                if all(c is not None for c in counts):
                    entries.append((group, paths, True))
                    sizes[str(group)] = max(c or 1 for c in counts)
        else:
            path = f"grid.{checks.toml_key(name)}"
            n = count_values(path, spec, problems)
            if n is not None:
                entries.append((name, {name: (path, spec)}, False))
                sizes[str(name)] = n
    try:
        check_grid_size(sizes, memory_budget, n_variables=sum(len(e[1]) for e in entries))
    except ValueError as err:
        problems.append(str(err))
        return []
    dims: list[Dim] = []
    for name, paths, zipped in entries:
        vals = {k: _values(v) for k, (_, v) in paths.items()}  # each counted, hence valid, above
        if zipped:
            path = f"grid.zip.{checks.toml_key(name)}"
            lengths = {k: len(v) for k, v in vals.items()}
            if len(set(lengths.values())) != 1:
                problems.append(f"{path}: zipped axes must have equal lengths, got {lengths}")
                continue
            rows = list(zip(*vals.values()))
            if len(set(rows)) != len(rows):
                problems.append(f"{path}: repeated combinations of values")
                continue
        dims.append(Dim(name, vals))
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
