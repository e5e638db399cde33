"""Sweep files: a declarative grid over one experiment, parsed and validated before anything runs.

A sweep file is TOML::

    model = "slm_sgd"                 # an experiment registered in jaxattn.engine._registry

    [fixed]                           # the config's fields, and axes held at one value
    D = 200
    prior = { family = "onehot", F = 2, nu = 9.0 }

    [grid]                            # one dimension per axis, outer product in file order
    seed = { range = [0, 8] }         # 0, 1, ..., 7
    H = [1, 2, 4]
    eta = { logspace = [0.1, 1.0, 4] }   # 4 values, geometric from 0.1 to 1
    signal = { linspace = [0.5, 2.0, 4] }

    [grid.zip.shape]                  # zipped axes: one dimension "shape" walking both together
    L = [4, 8]
    batch_size = [1, 2]

    [execution]                       # optional
    block = 4                         # streams per block (the experiment's default if absent)
    group = 2                         # members of a stream computed together
    chunk_size = 64                   # points per stored chunk (default: from memory_budget)
    memory_budget = "2GB"

The ``[fixed]`` fields are those of the experiment's config type (:mod:`jaxattn.engine.config`),
so a sweep file takes exactly what the Python API and the command line take. Every mistake is
collected and reported at once, each with its path in the file (``grid.eta.logspace: ...``,
``fixed.D: ...``), as a :class:`SweepFileError`. The grid is sized from the file before any of
its values is built, and one too large for the memory budget is one of those problems
(``grid: 1000000000 points ...``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tomllib
from dataclasses import dataclass, field
from typing import Any

from jaxattn.core import precision
from jaxattn.core.checks import plain, toml_key
from jaxattn.engine import _registry as registry
from jaxattn.engine import config as cfgs
from jaxattn.engine._axes import Dim, Grid, check_dims, parse_dims
from jaxattn.engine._plan import DEFAULT_MEMORY_BUDGET

TOP_KEYS = ("model", "fixed", "grid", "execution")
EXECUTION_KEYS = ("block", "group", "chunk_size", "memory_budget")
_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30}


class SweepFileError(ValueError):
    """Every problem found in a sweep file, each as ``path: message`` (the dotted key as
    written in the file); the message is ``FILE: path: message`` for one problem, else the
    count and one indented line per problem.

    Args:
        problems: The messages.
        source: The file's name, for the message.

    Attributes:
        problems: The messages.
    """

    def __init__(self, problems: list[str], source: str = "sweep file"):
        self.problems = list(problems)
        if len(problems) == 1:  # one line: the file, the key and what is wrong
            super().__init__(f"{source}: {problems[0]}")
        else:
            super().__init__(f"{source}: {len(problems)} problems\n" + "\n".join(f"  {p}" for p in problems))


@dataclass(frozen=True)
class Sweep:
    """A validated sweep: the experiment, its config, the axes held fixed, the grid dimensions
    and the execution options. ``text`` is the file as written (stored with the results).

    Attributes:
        model: The experiment's registered name.
        fixed: The ``[fixed]`` table as written.
        dims: The grid's dimensions, values checked by their axes.
        config: The validated config.
        fixed_axes: Axes given one value in ``[fixed]`` -> that value (checked).
        block: Streams per block; ``None`` means the store's, or the experiment's default for a new store.
        group: Members per group; ``None`` means the experiment's default.
        chunk_size: Points per chunk; ``None`` sizes chunks from ``memory_budget``.
        memory_budget: Bytes per chunk, and what the grid's plan may take in host memory.
        text: The file as written.
    """

    model: str
    fixed: dict[str, Any]  # the [fixed] table as written
    dims: tuple[Dim, ...]
    config: Any = None
    fixed_axes: dict[str, Any] = field(default_factory=dict)
    block: int | None = None
    group: int | None = None
    chunk_size: int | None = None
    memory_budget: int = DEFAULT_MEMORY_BUDGET
    text: str = field(default="", compare=False)

    @property
    def experiment(self):
        """The registered experiment (:func:`~jaxattn.engine._registry.get`)."""
        return registry.get(self.model)

    @property
    def grid(self) -> Grid:
        """The grid of :attr:`dims`."""
        return Grid(self.dims)

    @property
    def shape(self) -> tuple[int, ...]:
        """The grid's shape, one size per dimension."""
        return self.grid.shape

    @property
    def n_points(self) -> int:
        """The grid's number of points."""
        return self.grid.n_points

    @property
    def variables(self) -> list[str]:
        """The grid's variables, in dimension order."""
        return self.grid.variables

    def points(self) -> dict[str, list]:
        """The grid's points (flat order) as columns, one list per variable.

        Returns:
            Variable -> its value at each point.
        """
        pts = self.grid.points()
        return {v: [p[i] for p in pts] for i, v in enumerate(self.variables)}

    def identity(self, block: int, group: int) -> str:
        """A hash of what determines the numbers (experiment, config, fixed axes, block shape):
        two sweeps with equal identities may share stored chunks.

        Args:
            block: Streams per block.
            group: Members per group.

        Returns:
            16 hex digits.
        """
        blob = json.dumps(
            {
                "model": self.model,
                # stores made before matmul_precision existed hold none: its default is its absence
                "config": precision.without_default_matmul(cfgs.to_json(self.config)),
                "fixed": self.fixed_axes,
                "block": block,
                "group": group,
            },
            sort_keys=True,
            default=str,
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def parse_size(value) -> int:
    """``"2GB"``, ``"512MiB"`` or a number of bytes.

    Args:
        value: An integer number of bytes, or a string: a number and a unit (``B``, ``kB``,
            ``MB``, ``GB``, ``KiB``, ``MiB``, ``GiB``; any case).

    Returns:
        The number of bytes (``> 0``).

    Raises:
        ValueError: If ``value`` is not a positive size.
    """
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(f"expected a size like '2GB' or '512MiB', got {plain(value)}")
    if isinstance(value, int):
        n = value
    else:
        m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([a-zA-Z]*)\s*", value)
        if not m or m.group(2).lower() not in _UNITS:
            raise ValueError(f"expected a size like '2GB' or '512MiB', got {plain(value)}")
        # exact for integers of any length (a float would overflow past 1e308)
        whole, _, frac = m.group(1).partition(".")
        unit = _UNITS[m.group(2).lower()]
        n = int(whole or "0") * unit + (int(frac) * unit // 10 ** len(frac) if frac else 0)
    if n <= 0:
        raise ValueError(f"must be positive, got {plain(value)}")
    return n


def parse(text: str, source: str = "sweep file", *, memory_budget: int | None = None) -> Sweep:
    """Parse and validate a sweep file's text; raises :class:`SweepFileError` listing every
    problem found, each under its dotted key as written (TOML syntax errors are reported alone:
    nothing else can be read then). The grid is sized before its values are built
    (:func:`~jaxattn.engine._axes.check_grid_size`, against the memory budget).

    Args:
        text: The file's TOML text.
        source: The file's name, for the messages.
        memory_budget: Bytes, in place of the file's ``execution.memory_budget`` (the command
            line's ``--memory-budget``); ``None`` keeps the file's.

    Returns:
        The validated :class:`Sweep`.

    Raises:
        SweepFileError: Listing every problem found.
    """
    return _parse(text, source, memory_budget, sized=True)


def _parse(text: str, source: str, memory_budget: int | None, sized: bool) -> Sweep:
    """:func:`parse`; ``sized=False`` sizes the grid against the host memory only (a store's
    own file, planned when the store was made, perhaps under a larger ``--memory-budget``)."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise SweepFileError([f"TOML syntax: {err}"], source) from None
    problems: list[str] = []
    for key in doc:
        if key not in TOP_KEYS:
            problems.append(f"{toml_key(key)}: unknown key (expected one of {', '.join(TOP_KEYS)})")
    names = registry.names()
    model_name = doc.get("model")
    experiment = None
    if model_name is None:
        problems.append(f"model: missing (one of {', '.join(names)})")
    elif not isinstance(model_name, str) or model_name not in names:
        problems.append(f"model: unknown model {plain(model_name)} (one of {', '.join(names)})")
    else:
        experiment = registry.get(model_name)
    tables = {}
    for name in ("fixed", "grid", "execution"):
        tbl = doc.get(name, {})
        if not isinstance(tbl, dict):
            problems.append(f"{name}: expected a table, got {type(tbl).__name__}")
            tbl = {}
        tables[name] = tbl
    fixed, execution = tables["fixed"], tables["execution"]

    # the execution options first: the memory budget sizes the grid before its values are built
    opts: dict[str, Any] = {}
    for key, value in execution.items():
        if key not in EXECUTION_KEYS:
            problems.append(f"execution.{toml_key(key)}: unknown key (expected one of {', '.join(EXECUTION_KEYS)})")
        elif key == "memory_budget":
            try:
                opts[key] = parse_size(value)
            except ValueError as err:
                problems.append(f"execution.memory_budget: {err}")
        elif not isinstance(value, int) or isinstance(value, bool) or value < 1:
            problems.append(f"execution.{key}: expected an integer >= 1, got {plain(value)}")
        else:
            opts[key] = value
    if memory_budget is not None:
        opts["memory_budget"] = memory_budget
    budget = opts.get("memory_budget", DEFAULT_MEMORY_BUDGET) if sized else None
    dims = parse_dims(tables["grid"], problems, budget)

    variables = [v for d in dims for v in d.values]
    for v in sorted({v for v in variables if variables.count(v) > 1}):
        problems.append(f"grid: variable {v!r} appears in more than one dimension")
    dim_names = [d.name for d in dims]
    for n in sorted({n for n in dim_names if dim_names.count(n) > 1}):
        problems.append(f"grid.zip.{n}: dimension name used twice")
    for v in sorted(set(variables) & set(fixed)):
        problems.append(f"fixed.{toml_key(v)}: also a grid axis (give it in one place)")

    config, fixed_axes = None, {}
    if experiment is not None:
        axes = experiment.axis
        for name, value in fixed.items():
            if name in axes:
                try:
                    fixed_axes[name] = axes[name].check(value)
                except (ValueError, TypeError) as err:
                    problems.append(f"fixed.{toml_key(name)}: {err}")
        fields = {k: v for k, v in fixed.items() if k not in axes}
        unknown = [k for k in fields if k not in experiment.fields()]
        for k in unknown:
            problems.append(
                f"fixed.{toml_key(k)}: unknown parameter (expected one of "
                f"{', '.join(sorted(set(experiment.fields()) | set(axes)))})"
            )
        config = _config(experiment.config_type, {k: v for k, v in fields.items() if k not in unknown}, problems)
        dims = check_dims(
            dims,
            axes,
            problems,
            where=lambda d, v: f"grid.{toml_key(v)}" if d.name == v else f"grid.zip.{toml_key(d.name)}.{toml_key(v)}",
        )
    if problems:
        raise SweepFileError(problems, source)
    assert model_name is not None  # a missing model is a problem
    return Sweep(model_name, fixed, tuple(dims), config, fixed_axes, text=text, **opts)


def _config(config_type: type, fields: dict[str, Any], problems: list[str]):
    """The config of a ``[fixed]`` table, every problem under its key: each value's type (and a
    table-valued field given as a string, which TOML does not read as a table), then the
    config's own checks, again and again without each field they name, so that two bad values
    are two problems. A message that names no field given in the file stays under ``fixed``."""
    specs = cfgs.field_specs(config_type)
    values: dict[str, Any] = {}
    dropped: set[str] = set()  # the fields with a problem, left at their defaults
    for key, value in fields.items():
        spec = specs[key]
        msg = cfgs.check_value(spec, value)
        if msg is None and spec.kind == "custom" and isinstance(value, str):
            try:
                ok = isinstance(json.loads(value), dict)
            except ValueError:
                ok = False
            msg = None if ok else f"expected a table ({toml_key(key)} = {{ ... }}), got {plain(value)}"
        if msg is None:
            try:
                values[key] = cfgs.convert(spec, value)
            except (ValueError, TypeError, KeyError) as err:
                msg = str(err)
        if msg is not None:
            problems.append(f"fixed.{toml_key(key)}: {msg}")
            dropped.add(key)
    while True:
        try:
            config = config_type(**{k: v for k, v in values.items() if k not in dropped}).validate()
        except (ValueError, TypeError) as err:
            msg = str(err)
            name = msg.split(" ", 1)[0].rstrip(":,")
            if name in dropped:  # a default put in a bad value's place disagrees with another value
                return None
            if name in values:
                problems.append(f"fixed.{toml_key(name)}: {msg}")
                dropped.add(name)
                continue
            problems.append(f"fixed: {msg}")
            return None
        return None if dropped else config


def _read(path) -> str:
    """A sweep file's text; one that is not UTF-8 text is a :class:`SweepFileError`."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise SweepFileError(
            [f"not a text file: byte {data[err.start]:#04x} at offset {err.start} is not UTF-8 (a sweep file is TOML)"],
            str(path),
        ) from None


def load_file(path, *, memory_budget: int | None = None) -> Sweep:
    """Read and validate a sweep file.

    Args:
        path: The file's path.
        memory_budget: Bytes, in place of the file's ``execution.memory_budget``; ``None``
            keeps the file's.

    Returns:
        The validated :class:`Sweep`.

    Raises:
        SweepFileError: Listing every problem found (a file that is not UTF-8 text is one).
    """
    return parse(_read(path), source=str(path), memory_budget=memory_budget)


def read_sweep(root: str) -> Sweep:
    """The sweep file a store was made with; its grid is sized against the host memory only
    (the store was planned under its own memory budget).

    Args:
        root: The store's folder.

    Returns:
        The ``Sweep`` parsed from ``root/sweep.toml``.
    """
    path = os.path.join(root, "sweep.toml")
    return _parse(_read(path), path, None, sized=False)


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items() if x is not None) + " }"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def dumps(
    model: str, config=None, grid: Grid | None = None, *, fixed: dict | None = None, execution: dict | None = None
) -> str:
    """The sweep file of a run: ``model``, its config's fields (those not ``None``) and ``fixed``
    axis values under ``[fixed]``, the grid's dimensions (zips as ``[grid.zip.NAME]``) and the
    execution options. :func:`parse` reads it back to the same run.

    Args:
        model: The experiment's registered name.
        config: Its config; ``None`` writes no config fields.
        grid: The grid; ``None`` writes an empty ``[grid]``.
        fixed: Axis values to write under ``[fixed]``.
        execution: The ``[execution]`` options (those not ``None``).

    Returns:
        The TOML text.
    """
    lines = [f"model = {_toml_value(model)}", "", "[fixed]"]
    fields = registry.get(model).fields()
    values = {k: v for k, v in (cfgs.to_json(config) if config is not None else {}).items() if k in fields}
    values.update(fixed or {})
    lines += [f"{k} = {_toml_value(v)}" for k, v in values.items() if v is not None]
    zips = []
    lines += ["", "[grid]"]
    for d in grid.dims if grid is not None else ():
        if len(d.values) == 1 and d.name in d.values:
            lines.append(f"{d.name} = {_toml_value(list(d.values[d.name]))}")
        else:
            zips.append(d)
    for d in zips:
        lines += ["", f"[grid.zip.{d.name}]"] + [f"{k} = {_toml_value(list(v))}" for k, v in d.values.items()]
    if execution:
        lines += ["", "[execution]"] + [f"{k} = {_toml_value(v)}" for k, v in execution.items() if v is not None]
    return "\n".join(lines) + "\n"
