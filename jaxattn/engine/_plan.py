"""The plan of a run: an experiment, its config and a grid checked and laid out as streams.

:func:`make_plan` validates the config, the grid and the block settings (every problem named,
in one :class:`GridError`) and groups the grid's points into *streams*: points equal in every
axis the experiment does not declare shared, which see the same data. The compiled programs and
the chunks that run the plan are in :mod:`jaxattn.engine._compute`.
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

import jax
import numpy as np

from jaxattn.core import precision
from jaxattn.core.checks import plain
from jaxattn.engine._axes import Grid, available_memory, check_dims, check_grid_size, size_text
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
    def matmul_precision(self) -> str:
        """The precision of the run's matrix products (:meth:`Experiment.matmul_precision`)."""
        return self.experiment.matmul_precision(self.config)

    @property
    def variables(self) -> list[str]:
        """The grid's variables, in dimension order."""
        return self.grid.variables

    def columns(self, points: list[tuple]) -> dict[str, np.ndarray]:
        """Points (tuples over the grid's variables) as one array per axis, every axis.

        Args:
            points: Points as tuples over :attr:`variables`.

        Returns:
            Every axis name -> its value at each point, a 1-d numpy array (integers, reals or
                strings; fixed axes repeated).
        """
        cols = {v: np.asarray([p[i] for p in points]) for i, v in enumerate(self.variables)}
        for name, value in self.fixed.items():
            cols[name] = np.full(len(points), value)
        return cols

    def stream_key(self, point: tuple) -> tuple:
        """The stream a point belongs to.

        Args:
            point: A point as a tuple over :attr:`variables`.

        Returns:
            The point's values of the variables that are not shared axes.
        """
        return tuple(point[i] for i in self._stream_variables)

    @functools.cached_property
    def _stream_variables(self) -> tuple[int, ...]:
        shared = self.experiment.shared_axes(self.config)
        return tuple(i for i, v in enumerate(self.variables) if v not in shared)


def make_plan(
    experiment: Experiment,
    config=None,
    grid: Grid | None = None,
    *,
    fixed: dict | None = None,
    block: int | None = None,
    group: int | None = None,
    devices=None,
    memory_budget: int | None = None,
) -> Plan:
    """Validate a run (a :class:`GridError` lists every problem) and set it up.

    Args:
        experiment: The experiment.
        config: Its config; ``None`` means the default ``experiment.config_type()``.
        grid: The grid; ``None`` means no dimensions (one point).
        fixed: Values of axes that are not grid dimensions (others take their defaults).
        block: Streams per block; ``None`` means :func:`default_block` (the experiment's rule
            on a CPU, the whole grid on accelerators as far as ``memory_budget`` holds).
        group: Members per group; ``None`` means :meth:`Experiment.default_group`.
        devices (Sequence[jax.Device] | None): The devices the run computes on (the default
            block follows their kind); ``None`` means ``jax.local_devices()``.
        memory_budget: Bytes per chunk (the default block on accelerators fits it), and what
            the grid's plan may take in host memory (:func:`check_grid_size`); ``None`` means
            :func:`default_memory_budget`.

    Returns:
        The ``Plan``, with :meth:`Experiment.setup` run.

    Raises:
        GridError: Listing every problem in the config, grid, fixed values and block shape;
            a grid too large for the memory budget or the host, alone, before anything else.
    """
    config = experiment.config_type() if config is None else config
    grid = Grid(()) if grid is None else grid
    # sized before any point is listed (the streams below list them all)
    budget = default_memory_budget(devices) if memory_budget is None else memory_budget
    try:
        check_grid_size({d.name: d.size for d in grid.dims}, budget, n_variables=len(grid.variables))
    except ValueError as err:
        raise GridError([str(err)]) from None
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
    # the shared data (directions, test sets, banks) at full precision whatever the run's
    # matmul_precision: a faster mode changes the run, never the problem it is run on
    why = _too_large(experiment, "its setup", experiment.setup_bytes(config, values), devices)
    if why is not None:
        raise GridError([why])
    with jax.enable_x64(experiment.uses_x64(config)), precision.matmul("highest"):
        static, shared = experiment.setup(config, values)
    why = _too_large(experiment, "one grid point", experiment.bytes_per_point(static), devices)
    if why is not None:
        raise GridError([why])
    want, got = experiment.matmul_precision(config), experiment.static_matmul_precision(static)
    if want != got:  # a program traced at one precision must never serve another
        raise GridError(
            [f"matmul_precision: {experiment.name}'s setup gives a static at {got!r}, its config asks {want!r}"]
        )
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
        sizes = Counter(plan.stream_key(p) for p in grid.points())
        plan = replace(plan, block=default_block(plan, len(sizes), max(sizes.values()), devices, memory_budget))
    return plan


def device_memory(devices=None) -> int | None:
    """The memory one of the run's devices holds: the host memory available now on a CPU
    (:func:`~jaxattn.engine._axes.available_memory`), an accelerator's ``bytes_limit``.

    Args:
        devices (Sequence[jax.Device] | None): The run's devices; ``None`` means
            ``jax.local_devices()``.

    Returns:
        Bytes, or ``None`` where the backend does not say.
    """
    devices = list(jax.local_devices() if devices is None else devices)
    if devices[0].platform == "cpu":
        return available_memory()
    try:
        return min(int((d.memory_stats() or {})["bytes_limit"]) for d in devices)
    except Exception:  # noqa: BLE001 - a backend without memory statistics
        return None


def _too_large(experiment: Experiment, what: str, need: int, devices) -> str | None:
    """Why a run cannot start on the devices: its setup, or one grid point's state alone (the
    experiment's bytes per point, without the workspace a chunk adds), exceeds a device's
    memory. Said before anything is compiled, instead of an allocation failure after."""
    devices = list(jax.local_devices() if devices is None else devices)
    have = device_memory(devices)
    if have is None or need <= have:
        return None
    kind = "host memory available" if devices[0].platform == "cpu" else f"memory of one {devices[0].platform} device"
    return (
        f"{experiment.name}: {what} needs about {size_text(need)}, more than the "
        f"{size_text(have)} of {kind}; make the model smaller"
    )


def default_memory_budget(devices=None) -> int:
    """Bytes per chunk when the run does not say: :data:`DEFAULT_MEMORY_BUDGET` on a CPU; on
    accelerators a quarter of their memory (``bytes_limit``, else 2 GB each), so that a chunk,
    its workspace and XLA's own buffers fit.

    Args:
        devices (Sequence[jax.Device] | None): The run's devices; ``None`` means
            ``jax.local_devices()``.

    Returns:
        The budget in bytes.
    """
    devices = list(jax.local_devices() if devices is None else devices)
    if devices[0].platform == "cpu":
        return DEFAULT_MEMORY_BUDGET
    total = 0
    for d in devices:
        try:
            total += int((d.memory_stats() or {}).get("bytes_limit", DEFAULT_MEMORY_BUDGET))
        except Exception:  # noqa: BLE001 - a backend without memory statistics
            total += DEFAULT_MEMORY_BUDGET
    return total // 4


def default_block(plan: Plan, n_streams: int, largest_stream: int, devices=None, budget: int | None = None) -> int:
    """Streams per block when the run does not say.

    On a CPU, the experiment's own rule (:meth:`Experiment.default_block`, measured there: small
    blocks that stay in the caches). On accelerators, where one launch costs about what a
    larger one does, the whole grid in one block per device, as far as the memory budget holds
    (the workspace of :func:`~jaxattn.engine._compute.chunk_streams`, 4x the experiment's bytes
    per point).

    Args:
        plan: The run (its experiment, config, static and group).
        n_streams: The grid's streams.
        largest_stream: Points in its largest stream.
        devices (Sequence[jax.Device] | None): The run's devices; ``None`` means
            ``jax.local_devices()``.
        budget: Bytes per chunk; ``None`` means :func:`default_memory_budget`.

    Returns:
        Streams per block, at least 1.
    """
    devices = list(jax.local_devices() if devices is None else devices)
    e = plan.experiment
    if devices[0].platform == "cpu":
        return int(e.default_block(plan.config, plan.static, n_streams))
    budget = default_memory_budget(devices) if budget is None else budget
    fits = streams_within(plan, budget // len(devices), largest_stream)
    return max(1, min(-(-n_streams // len(devices)), fits))


def streams_within(plan: Plan, budget: int, largest_stream: int) -> int:
    """How many streams ``budget`` bytes hold: each padded to whole groups of its largest
    stream's size, 4x the experiment's bytes per point (the inputs, the state and XLA's
    workspace).

    Args:
        plan: The run (its experiment, static and group).
        budget: Bytes.
        largest_stream: Points in the largest stream.

    Returns:
        The number of streams (0 where not even one fits).
    """
    per_stream = -(-largest_stream // plan.group) * plan.group
    return budget // max(1, 4 * plan.experiment.bytes_per_point(plan.static) * per_stream)


def _column(grid: Grid, fixed: dict, name: str) -> list:
    for d in grid.dims:
        if name in d.values:
            return list(d.values[name])
    return [fixed[name]]


def _sort_key(v):
    return (isinstance(v, str), v)
