"""The plan of a run: an experiment, its config and a grid checked and laid out as streams.

:func:`make_plan` validates the config, the grid and the block settings (every problem named,
in one :class:`GridError`) and groups the grid's points into *streams*: points equal in every
axis the experiment does not declare shared, which see the same data. The compiled programs and
the chunks that run the plan are in :mod:`jaxattn.engine._compute`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import jax
import numpy as np

from jaxattn.core.checks import plain
from jaxattn.engine._axes import Grid, check_dims
from jaxattn.engine._experiment import Experiment

DEFAULT_MEMORY_BUDGET = 2 * 10**9
"""Bytes per chunk when neither ``chunk_size`` nor ``memory_budget`` is given."""


class GridError(ValueError):
    """Every problem found in a run's config and grid, each as ``path: message``.

    Args:
        problems: The messages.
        source: What was checked (``"grid"``, or e.g. a sweep file's path).

    Attributes:
        problems: The messages.
    """

    def __init__(self, problems: list[str], source: str = "grid"):
        self.problems = list(problems)
        if len(problems) == 1 and source == "grid":
            super().__init__(problems[0])
        else:
            super().__init__(f"{source}: {len(problems)} problem(s)\n" + "\n".join(f"  {p}" for p in problems))


@dataclass(frozen=True)
class Plan:
    """A validated run: the experiment, its config, the grid, the value of every axis that is
    not a grid dimension, and the block shape (``block`` streams of ``group`` members).

    Attributes:
        experiment: The experiment.
        config: Its validated config.
        grid: The grid, its values checked by their axes.
        fixed: Every axis that is not a grid variable -> its value.
        block: Streams per block (``S``).
        group: Members per group (``M``).
        static: The ``static`` from :meth:`Experiment.setup`.
        shared: The ``shared`` arrays from :meth:`Experiment.setup`.
    """

    experiment: Experiment
    config: Any
    grid: Grid
    fixed: dict[str, Any]
    block: int
    group: int
    static: Any = field(compare=False)
    shared: Any = field(compare=False)

    @property
    def x64(self) -> bool:
        """Whether the run is traced and run in float64 (:meth:`Experiment.uses_x64`)."""
        return self.experiment.uses_x64(self.config)

    @property
    def variables(self) -> list[str]:
        """The grid's variables, in dimension order."""
        return self.grid.variables

    def columns(self, points: list[tuple]) -> dict[str, list]:
        """Points (tuples over the grid's variables) as one list per axis, every axis.

        Args:
            points: Points as tuples over :attr:`variables`.

        Returns:
            Every axis name -> its value at each point (fixed axes repeated).
        """
        cols = {v: [p[i] for p in points] for i, v in enumerate(self.variables)}
        for name, value in self.fixed.items():
            cols[name] = [value] * len(points)
        return cols

    def stream_key(self, point: tuple) -> tuple:
        """The stream a point belongs to.

        Args:
            point: A point as a tuple over :attr:`variables`.

        Returns:
            The point's values of the variables that are not shared axes.
        """
        shared = self.experiment.shared_axes(self.config)
        return tuple(x for v, x in zip(self.variables, point) if v not in shared)


def make_plan(
    experiment: Experiment,
    config=None,
    grid: Grid | None = None,
    *,
    fixed: dict | None = None,
    block: int | None = None,
    group: int | None = None,
) -> Plan:
    """Validate a run (a :class:`GridError` lists every problem) and set it up.

    Args:
        experiment: The experiment.
        config: Its config; ``None`` means the default ``experiment.config_type()``.
        grid: The grid; ``None`` means no dimensions (one point).
        fixed: Values of axes that are not grid dimensions (others take their defaults).
        block: Streams per block; ``None`` means :meth:`Experiment.default_block`.
        group: Members per group; ``None`` means :meth:`Experiment.default_group`.

    Returns:
        The ``Plan``, with :meth:`Experiment.setup` run.

    Raises:
        GridError: Listing every problem in the config, grid, fixed values and block shape.
    """
    config = experiment.config_type() if config is None else config
    grid = Grid(()) if grid is None else grid
    problems = []
    if not isinstance(config, experiment.config_type):
        problems.append(f"config: expected {experiment.config_type.__name__}, got {type(config).__name__}")
    else:
        try:
            config = config.validate()
        except (ValueError, TypeError) as err:
            problems.append(str(err))
    axes = experiment.axis
    fixed_axes = {}
    for name, value in (fixed or {}).items():
        if name not in axes:
            problems.append(f"{name}: not an axis of {experiment.name} (axes: {', '.join(axes)})")
            continue
        try:
            fixed_axes[name] = axes[name].check(value)
        except (ValueError, TypeError) as err:
            problems.append(str(err))
    for name in grid.variables:
        if name in fixed_axes:
            problems.append(f"{name}: both a grid axis and a fixed value")
    grid = Grid(
        tuple(check_dims(list(grid.dims), axes, problems, where=lambda d, v: v if d.name == v else f"{d.name}.{v}"))
    )
    for name, n in (("block", block), ("group", group)):
        if n is not None and (isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1):
            problems.append(f"{name} must be an integer >= 1, got {plain(n)}")
    if problems:
        raise GridError(problems)
    for a in experiment.axes:
        if a.name not in grid.variables and a.name not in fixed_axes:
            fixed_axes[a.name] = a.default
    values = {a.name: sorted(set(_column(grid, fixed_axes, a.name)), key=_sort_key) for a in experiment.axes}
    with jax.enable_x64(experiment.uses_x64(config)):
        static, shared = experiment.setup(config, values)
    plan = Plan(
        experiment,
        config,
        grid,
        fixed_axes,
        int(block or 0),
        int(group or experiment.default_group(config)),
        static,
        shared,
    )
    if block is None:
        n_streams = len({plan.stream_key(p) for p in grid.points()})
        plan = replace(plan, block=int(experiment.default_block(config, static, n_streams)))
    return plan


def _column(grid: Grid, fixed: dict, name: str) -> list:
    for d in grid.dims:
        if name in d.values:
            return list(d.values[name])
    return [fixed[name]]


def _sort_key(v):
    return (isinstance(v, str), v)
