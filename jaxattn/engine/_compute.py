"""The one grid engine: an experiment, its config and a grid in; an ``xarray.Dataset`` out.

:func:`run` is the only way a grid is computed, from Python (``jaxattn.slm.train`` and the other
model APIs), from the command line and from a sweep file (:func:`run_sweep`, which writes chunk by
chunk into a resumable store, :mod:`jaxattn.engine.store`). The steps:

1. **Plan.** The grid's points are grouped into *streams*: points equal in every axis the
   experiment does not declare shared. A stream is laid out as ``G`` groups of ``M`` members
   (padded by repeating a real member; at least two groups in the buffers, of which only ``G``
   are computed), ``S`` streams make a block, and whole streams make a
   chunk (sized from ``chunk_size`` points or a memory budget). The block is the experiment's
   rule on a CPU and the whole grid on accelerators, as far as the budget holds
   (:func:`~jaxattn.engine.default_block`).
2. **Inputs.** The chunk's per-point inputs come from :meth:`Experiment.params` on the columns
   of its points, all points at once (keys from one compiled program,
   :func:`jaxattn.core.keys.derive`): a run's dispatches and compiles do not grow with its
   points (``tests/test_fixed_costs.py``).
3. **Compile once.** Three programs per run (:meth:`Experiment.init`, ``step`` and ``finish``,
   each looping over the device's blocks), compiled for the shapes of a block, which do not
   depend on the grid: a sweep traces each once, whatever its number of points or chunks. The
   persistent compilation cache (:mod:`jaxattn.engine.cache`) remembers them across processes.
4. **Dispatch.** A chunk's blocks are split into one share per device, and each share runs the
   unpartitioned single-device program in a thread of its own (:class:`Programs` says why). The
   experiment's ``step`` is called ``segments`` times from Python, which drives the progress
   bar.
5. **Assemble.** The real points' outputs are taken from their slots and laid out over the
   grid's dimensions (or written as one chunk file with a ``point`` dimension).

A point's numbers depend only on its own values and the block shape ``(S, M)``: the same bits
alone or inside a larger grid, in any chunk, on one device or several, from any front end.
"""

from __future__ import annotations

import functools
import threading
import time
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr

from jaxattn.engine import config as cfgs
from jaxattn.engine._axes import Grid
from jaxattn.engine._experiment import MIN_WIDTH, Experiment, loop_over
from jaxattn.engine._plan import DEFAULT_MEMORY_BUDGET, Plan, default_memory_budget, make_plan, streams_within

# --- the compiled programs -----------------------------------------------------------------------


class Programs:
    """The ``init``, ``step`` and ``finish`` of one experiment and ``static``, each a loop over
    the blocks of one device (one trace each, whatever the grid or the device).

    A chunk's blocks are split into one share per device, and each share runs the
    *unpartitioned* program: XLA compiles an SPMD-partitioned program (``shard_map``, ``pmap``)
    with other fusions than a single-device one, and the two differ in the last bit; one
    single-device program is what gives a point the same bits on one device or several. On a
    CPU the shares run concurrently on the first device (one compile); accelerators compile the
    program for each device, concurrently.

    When the program cache is on (:mod:`jaxattn.engine.cache`), each program runs in its
    ``jax.export`` form, traced and lowered once and kept, so a second process loads it instead
    of tracing the experiment again; otherwise it is plainly jitted. Both forms compile the same
    StableHLO and give the same bits.

    Args:
        experiment: The experiment.
        static: Its ``static`` from :meth:`Experiment.setup`.

    Each program is traced at the run's precision of matrix products
    (:meth:`Experiment.static_matmul_precision`, a part of ``static``).

    Attributes:
        experiment: The experiment.
        static: Its ``static``.
        matmul_precision: The precision every program is traced at (``"highest"``, ``"high"``,
            ``"default"``).
        fns: ``"init"``, ``"step"``, ``"finish"`` -> the per-device loop over blocks.
        donate: Program name -> index of the argument whose buffers are donated.
    """

    def __init__(self, experiment: Experiment, static):
        from jaxattn.core.keys import default_threefry
        from jaxattn.core.precision import matmul

        default_threefry()  # before the first trace: JAX's generator lowered unrolled on CPUs
        e = experiment
        self.experiment, self.static = experiment, static
        self.matmul_precision = e.static_matmul_precision(static)
        mm = self.matmul_precision  # part of static, so of this object's cache key and the export's

        # each program is traced inside the precision block: every dot_general it holds carries
        # the run's precision, whatever the caller's (or JAX's global) setting
        def init(shared, params, nb, ng):
            with matmul(mm):
                return loop_over(lambda p: e.init(static, shared, p, ng), nb, 0, params)

        def step(shared, params, state, k, nb, ng):
            with matmul(mm):
                return loop_over(lambda p, s: e.step(static, shared, p, s, k, ng), nb, 0, params, state)

        def finish(shared, params, state, nb, ng):
            with matmul(mm):
                return loop_over(lambda p, s: e.finish(static, shared, p, s, ng), nb, 0, params, state)

        self.fns = {"init": init, "step": step, "finish": finish}
        self.donate = {"step": 2}  # step's state is consumed: its buffers are reused
        self._ready: dict[tuple, tuple] = {}
        self._shapes: dict[str, tuple] = {}
        self._lock = threading.Lock()

    def __call__(self, name: str, *args):
        leaves, tdef = jax.tree_util.tree_flatten(args)
        sig = (name, str(tdef), tuple((tuple(x.shape), str(x.dtype)) for x in leaves))
        with self._lock:
            if sig not in self._ready:
                self._ready[sig] = self._build(name, args, leaves, tdef, sig)
                self._shapes[name] = (sig, [jax.ShapeDtypeStruct(x.shape, x.dtype) for x in leaves])
        fn, out_def = self._ready[sig]
        return jax.tree_util.tree_unflatten(out_def, fn(*leaves))

    def compiled_text(self, name: str) -> str:
        """The optimised HLO of program ``name`` (``"init"``, ``"step"``, ``"finish"``) for the
        shapes it was last built for: the module XLA compiles, whose fusions and other
        instructions are the kernels the device runs.

        Args:
            name: The program.

        Returns:
            The compiled module as text (``Compiled.as_text``).

        Raises:
            KeyError: If the program has not been called.
        """
        sig, shapes = self._shapes[name]
        return self._ready[sig][0].lower(*shapes).compile().as_text()

    def _build(self, name, args, leaves, tdef, sig):
        """Load the exported program, or export it (a trace and a lowering) and keep it. A stored
        program that cannot run here (exported for another platform, or unreadable by this jax)
        is exported again and replaced."""
        from jaxattn.core.devices import lowering_platform
        from jaxattn.engine import cache

        platform = lowering_platform(next(iter(leaves[0].devices())) if leaves else None)
        x64 = bool(jax.config.jax_enable_x64)  # pyright: ignore[reportAttributeAccessIssue]
        key = cache.fingerprint(self.experiment, self.static, name, sig, platform, x64)
        donate = ()
        if name in self.donate:
            i = self.donate[name]
            start = len(jax.tree_util.tree_leaves(args[:i]))
            donate = tuple(range(start, start + len(jax.tree_util.tree_leaves(args[i]))))
        box = {}

        def flat(*lv):
            out, box["out"] = jax.tree_util.tree_flatten(self.fns[name](*jax.tree_util.tree_unflatten(tdef, lv)))
            return out

        def jitted():
            fn = jax.jit(flat, donate_argnums=donate)
            jax.eval_shape(fn, *leaves)
            return fn, box["out"]

        if cache.program_dir() is None:
            # nothing is kept: the plain jitted program (an export costs a quarter more compile
            # time, for nothing; same bits, checked by tests/test_cache.py)
            return jitted()
        got = cache.load_program(key)
        if got is not None:
            if platform == "cpu":
                _load_lapack()
            try:
                return _compiled(got[0], donate, leaves), got[1]
            except Exception:  # noqa: BLE001 - another platform, another jax: exported again, replaced
                pass
        try:
            # exported from shapes alone: the inputs' placement is the caller's, not the
            # program's (and jax 0.8.2 mis-lowers a placed key array's sharding in the call)
            shapes = [jax.ShapeDtypeStruct(x.shape, x.dtype) for x in leaves]
            exported = jax.export.export(jax.jit(flat), platforms=[platform])(*shapes)
            blob = exported.serialize()
        except NotImplementedError:
            # a program with a host callback cannot be exported: it runs jitted, and JAX's
            # persistent cache leaves it out too; always so for this program, so its bits
            # do not depend on the caches
            return jitted()
        exported, out_def = jax.export.deserialize(blob), box["out"]
        cache.save_program(key, exported, out_def)
        return _compiled(exported, donate, leaves), out_def


@functools.cache
def _load_lapack() -> None:
    """Have jaxlib find its LAPACK kernels, as lowering a LAPACK call does. jaxlib before 0.10
    looks them up only there, so in a process that lowered none, a stored program's first
    factorisation or solve jumped to a null kernel (``copy landscape``'s second run crashed)."""
    spec = jax.ShapeDtypeStruct((2, 2), np.float32)
    jax.jit(jnp.linalg.cholesky).trace(spec).lower(lowering_platforms=("cpu",))


def _compiled(exported, donate: tuple, leaves: list):
    """An exported program, jitted; lowered once for ``leaves`` first, which raises where it
    cannot run here (another platform, or a serialization this jax cannot call). The lowering
    only wraps the stored module: no trace of the experiment, no compile."""
    fn = jax.jit(exported.call, donate_argnums=donate)
    fn.lower(*leaves)
    return fn


@functools.lru_cache(maxsize=32)
def programs(experiment: Experiment, static) -> Programs:
    """The :class:`Programs` of ``experiment`` and ``static`` (the 32 most recent are kept).

    Args:
        experiment: The experiment.
        static: Its ``static`` (hashable).

    Returns:
        The cached :class:`Programs`.
    """
    return Programs(experiment, static)


def clear_caches() -> None:
    """Forget the compiled programs (the next run traces again)."""
    programs.cache_clear()


# --- one chunk -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Slots:
    """Where a chunk's points sit among its slots ``(block, S, G, M)``, flattened.

    Attributes:
        slots: The index (in the chunk's points) of the point in each slot, real or repeated,
            ``(n_blocks * S * width * M,)``.
        positions: Slot of each real point, in the chunk's point order, ``(n_points,)``.
        n_blocks: The number of blocks.
        groups: Groups computed per stream slot (``G``).
    """

    slots: np.ndarray  # the point in each slot (real or repeated), by its index in the chunk
    positions: np.ndarray  # slot of each real point, in the chunk's point order
    n_blocks: int
    groups: int

    @property
    def width(self) -> int:
        """Groups per stream slot in the buffers: ``groups``, and at least :data:`MIN_WIDTH`."""
        return max(self.groups, MIN_WIDTH)


def layout_chunk(
    plan: Plan, points: list[tuple], n_devices: int, groups: int | None = None, n_blocks: int | None = None
) -> Slots:
    """The *stream slots* of ``points`` (the rows of the blocks), padded to ``G`` groups of ``M``
    members each (at least ``groups``) and to whole blocks on every device (at least
    ``n_blocks``: the chunks of one run all have the same shape, so they share one trace).

    A slot holds the members of one stream. Where there are fewer streams than slots on the
    devices (``block x devices``), the largest streams are split over several slots, in whole
    groups: each slot draws its stream's data itself (the same numbers), and every device gets
    work. A member's numbers depend on its stream's values and its own, not on the split.

    Args:
        plan: The run.
        points: The chunk's points (tuples over the grid's variables).
        n_devices: The number of devices the blocks are split over.
        groups: The least number of groups per stream slot; ``None`` means 1.
        n_blocks: The least number of blocks; ``None`` means no minimum.

    Returns:
        The chunk's :class:`Slots`.
    """
    streams: dict[tuple, list[int]] = {}
    for i, p in enumerate(points):
        streams.setdefault(plan.stream_key(p), []).append(i)
    real = list(streams.values())
    M, unit = plan.group, plan.block * n_devices
    while len(real) < unit:
        big = max(range(len(real)), key=lambda j: len(real[j]))
        n = len(real[big])
        if n <= M:
            break
        cut = -(-(n // 2) // M) * M  # whole groups in the first half
        real[big : big + 1] = [real[big][:cut], real[big][cut:]]
    G = max(groups or 1, -(-max(len(m) for m in real) // M))
    per_stream = max(G, MIN_WIDTH) * M
    n_streams = max(-(-len(real) // unit) * unit, (n_blocks or 0) * plan.block)
    slots, positions = [], np.empty(len(points), np.int64)
    for m in real + [real[-1]] * (n_streams - len(real)):
        slots += m + [m[-1]] * (per_stream - len(m))
    for j, m in enumerate(real):
        positions[m] = j * per_stream + np.arange(len(m))
    return Slots(np.asarray(slots, np.int64), positions, n_streams // plan.block, G)


class ProgressBar:
    """Progress of a run, fed by the segments of every chunk on every device (a tqdm bar).

    Args:
        plan: The run's plan (its experiment's progress units).
        n_chunks: The chunks the run computes.
        enabled: Whether the bar is shown.
    """

    def __init__(self, plan: Plan, n_chunks: int, enabled: bool):
        import threading

        from tqdm.auto import tqdm

        self.units, unit = plan.experiment.progress_units(plan.static)
        self.units = np.asarray(self.units, float)
        total = float(self.units.sum()) * n_chunks
        self.lock = threading.Lock()
        self.bar = tqdm(
            total=total,
            disable=not enabled,
            unit=unit,
            desc=plan.experiment.name,
            bar_format="{l_bar}{bar}| {n:.4g}/{total:.4g} {unit} [{elapsed}<{remaining}]",
        )

    def segment(self, k: int, share: float = 1.0) -> None:
        with self.lock:
            # the shares' float sum may pass the total by a rounding: tqdm would warn and show a
            # negative time left
            self.bar.update(max(0.0, min(float(self.units[k]) * share, self.bar.total - self.bar.n)))

    def close(self) -> None:
        self.bar.close()


def chunk_shape(plan: Plan, chunks: list[list[tuple]], n_devices: int) -> tuple[int, int]:
    """``(groups, n_blocks)`` that every chunk of a run is padded to.

    Args:
        plan: The run.
        chunks: Every chunk's points.
        n_devices: The number of devices.

    Returns:
        ``(groups, n_blocks)``: the largest of the chunks' :func:`layout_chunk`.
    """
    lays = [layout_chunk(plan, c, n_devices) for c in chunks]
    return max(lay.groups for lay in lays), max(lay.n_blocks for lay in lays)


def compute_chunk(
    plan: Plan,
    points: list[tuple],
    devices: tuple,
    bar: ProgressBar | None = None,
    groups: int | None = None,
    n_blocks: int | None = None,
) -> dict[str, np.ndarray]:
    """The outputs of ``points`` (a leading axis in their order), computed in blocks split into
    ``len(devices)`` shares (padded to ``groups`` groups per stream and ``n_blocks`` blocks); each
    share runs in a thread of its own, on its device (on a CPU, all on the first one).

    Args:
        plan: The run.
        points: The chunk's points (tuples over the grid's variables).
        devices: The devices to split the blocks over.
        bar: The progress bar fed by every segment; ``None`` for none.
        groups: Groups per stream slot to pad to (see :func:`layout_chunk`).
        n_blocks: Blocks to pad to (see :func:`layout_chunk`).

    Returns:
        Observable name -> array ``(len(points), *layout.dims[name])``.
    """
    e = plan.experiment
    progs = programs(e, plan.static)
    lay = layout_chunk(plan, points, len(devices), groups, n_blocks)
    S, W, M = plan.block, lay.width, plan.group
    n_dev = len(devices)
    per = lay.n_blocks // n_dev
    n_segments = len(e.progress_units(plan.static)[0])
    with jax.enable_x64(plan.x64):
        cols = {k: v[lay.slots] for k, v in plan.columns(points).items()}
        params = e.params(plan.static, cols)
        params = jax.tree_util.tree_map(lambda x: x.reshape((n_dev, per, S, W, M) + x.shape[1:]), params)

    # XLA's CPU client runs concurrent executions of one device in parallel: on a CPU every share
    # runs on the first device, with one compiled program (measured: a third of the compile time
    # of one program per host device, the same run time); accelerators get one program each
    on_cpu = devices[0].platform == "cpu"
    if plan.x64:
        from jaxattn.core.precision import warn_if_slow

        warn_if_slow(devices[0])

    def on_device(i: int):
        dev = devices[0] if on_cpu else devices[i]
        with jax.enable_x64(plan.x64):
            put = functools.partial(jax.device_put, device=dev)
            p = put(jax.tree_util.tree_map(lambda x: x[i], params))
            shared, nb, ng = put(plan.shared), put(np.int32(per)), put(np.int32(lay.groups))
            state = progs("init", shared, p, nb, ng)
            for k in range(n_segments):
                state = progs("step", shared, p, state, put(np.int32(k)), nb, ng)
                if bar is not None:
                    jax.block_until_ready(state)
                    bar.segment(k, 1.0 / n_dev)
            return jax.device_get(progs("finish", shared, p, state, nb, ng))

    if n_dev == 1:
        outs = [on_device(0)]
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(n_dev) as pool:
            outs = list(pool.map(on_device, range(n_dev)))
    out = {k: np.concatenate([np.asarray(o[k]) for o in outs]) for k in outs[0]}
    return {k: v.reshape((-1,) + v.shape[4:])[lay.positions] for k, v in out.items()}


def chunk_streams(
    plan: Plan, points: list[tuple], n_devices: int, chunk_size: int | None, memory_budget: int | None
) -> list[list[tuple]]:
    """``points`` cut into chunks of whole streams: ``chunk_size`` points each (at least one
    stream), or as many as ``memory_budget`` holds (4x the experiment's bytes per point: the
    workspace). The cut depends on the number of devices only through the memory budget.

    Args:
        plan: The run.
        points: The points to cut.
        n_devices: The number of devices (whole blocks on each where the budget allows).
        chunk_size: Points per chunk; ``None`` sizes chunks from ``memory_budget``.
        memory_budget: Bytes per chunk; ``None`` means :data:`DEFAULT_MEMORY_BUDGET`.

    Returns:
        The chunks, each a list of points (whole streams).
    """
    streams: dict[tuple, list[tuple]] = {}
    for p in points:
        streams.setdefault(plan.stream_key(p), []).append(p)
    largest = max(len(s) for s in streams.values())
    if chunk_size is not None:
        n_streams = max(1, chunk_size // (-(-largest // plan.group) * plan.group))
    else:  # as many as the budget holds, in whole blocks on every device where that is possible
        n_streams = max(1, streams_within(plan, memory_budget or DEFAULT_MEMORY_BUDGET, largest))
        unit = plan.block * n_devices
        n_streams = n_streams // unit * unit if n_streams >= unit else n_streams
    groups = list(streams.values())
    return [[p for s in groups[i : i + n_streams] for p in s] for i in range(0, len(groups), n_streams)]


# --- in memory -----------------------------------------------------------------------------------


def run(
    experiment: Experiment,
    config=None,
    grid: Grid | None = None,
    *,
    fixed: dict | None = None,
    devices=None,
    block: int | None = None,
    group: int | None = None,
    chunk_size: int | None = None,
    memory_budget: int | None = None,
    progress: bool = False,
    **axes: Any,
) -> xr.Dataset:
    """Compute ``experiment`` over ``grid`` in memory and return the Dataset: one dimension per
    grid dimension, then the observables' own dimensions; the config, the experiment's name and
    the package version in its attributes.

    The grid comes from a :class:`~jaxattn.engine._axes.Grid`, or from keyword arguments, one
    plain dimension per axis named, in that order (``run(SLM_SGD, seed=range(4), H=[2, 4])``):
    the models' Python entry points are this call with their defaults.

    ``fixed`` gives axes that are not grid dimensions a value (default: the axis default);
    ``block`` (streams per block) and ``group`` (members per group) set the block shape
    (default: the experiment's rule on a CPU, the whole grid on accelerators as far as the
    memory budget holds: :func:`~jaxattn.engine.default_block`); ``devices`` defaults to
    all local devices.

    Args:
        experiment: The experiment.
        config: Its config; ``None`` means the default.
        grid: The grid; ``None`` means a single point.
        fixed: Values of axes that are not grid dimensions.
        devices: The devices to compute on; ``None`` means ``jax.local_devices()``.
        block: Streams per block; ``None`` means the experiment's.
        group: Members per group; ``None`` means the experiment's default.
        chunk_size: Points per chunk; ``None`` sizes chunks from ``memory_budget``.
        memory_budget: Bytes per chunk; ``None`` means
            :func:`~jaxattn.engine.default_memory_budget` (2 GB on a CPU, a quarter of the
            accelerators' memory).
        progress: Show a progress bar.
        **axes: Axis name -> a value or a list of values: the grid, instead of ``grid``.

    Returns:
        The ``xarray.Dataset`` (see :func:`to_dataset`).

    Raises:
        GridError: If the config, grid or settings are invalid.
        ValueError: If both ``grid`` and axes are given, or a keyword is not an axis.
    """
    plan, devices, budget = _plan(experiment, config, grid, fixed, devices, block, group, memory_budget, axes)
    points = plan.grid.points()
    chunks = chunk_streams(plan, points, len(devices), chunk_size, budget)
    groups, n_blocks = chunk_shape(plan, chunks, len(devices))
    t0 = time.perf_counter()
    bar = ProgressBar(plan, len(chunks), progress)
    index = {p: i for i, p in enumerate(points)}
    out: dict[str, np.ndarray] = {}
    try:
        for chunk in chunks:
            res = compute_chunk(plan, chunk, devices, bar, groups, n_blocks)
            pos = np.asarray([index[p] for p in chunk])
            for k, v in res.items():
                if k not in out:
                    out[k] = np.zeros((len(points),) + v.shape[1:], v.dtype)
                out[k][pos] = v
    finally:
        bar.close()
    return to_dataset(plan, out, wall=time.perf_counter() - t0)


def _plan(experiment, config, grid, fixed, devices, block, group, memory_budget, axes) -> tuple[Plan, tuple, int]:
    """:func:`run`'s plan, devices and memory budget from its arguments."""
    if axes:
        if grid is not None:
            raise ValueError(f"give the grid either as grid= or as axes ({', '.join(axes)}), not both")
        grid = Grid.from_values(experiment.axis, axes)
    devices = tuple(jax.local_devices() if devices is None else devices)
    budget = default_memory_budget(devices) if memory_budget is None else memory_budget
    plan = make_plan(
        experiment, config, grid, fixed=fixed, block=block, group=group, devices=devices, memory_budget=budget
    )
    return plan, devices, budget


def program_text(
    experiment: Experiment,
    config=None,
    grid: Grid | None = None,
    *,
    program: str = "step",
    fixed: dict | None = None,
    devices=None,
    block: int | None = None,
    group: int | None = None,
    **axes: Any,
) -> str:
    """The optimised HLO module of one of the programs :func:`run` runs for this grid, as XLA
    compiles it for the first device: its fusions and other instructions are the kernels the
    device launches (read by :func:`jaxattn.core.hlo.loop_kernels`).

    The grid is run first, as :func:`run` runs it (its programs are built by running them).

    Args:
        experiment: The experiment.
        config: Its config; ``None`` means the default.
        grid: The grid; ``None`` means a single point (or the grid of ``axes``).
        program: ``"init"``, ``"step"`` or ``"finish"``.
        fixed: As for :func:`run`.
        devices: As for :func:`run`.
        block: As for :func:`run`.
        group: As for :func:`run`.
        **axes: As for :func:`run`.

    Returns:
        The compiled module as text.

    Raises:
        ValueError: If ``program`` is not one of the three.
    """
    if program not in ("init", "step", "finish"):
        raise ValueError(f"program must be 'init', 'step' or 'finish', got {program!r}")
    plan, devices, _ = _plan(experiment, config, grid, fixed, devices, block, group, None, axes)
    run(experiment, config, grid, fixed=fixed, devices=devices, block=block, group=group, **axes)
    return programs(experiment, plan.static).compiled_text(program)


def to_dataset(plan: Plan, out: dict[str, np.ndarray], wall: float | None = None) -> xr.Dataset:
    """Outputs over the grid's points (flat order) as a Dataset over the grid's dimensions.

    Args:
        plan: The run.
        out: Observable name -> array ``(n_points, *layout.dims[name])``, points in flat order.
        wall: Wall-clock seconds, stored as ``wall_seconds``; ``None`` stores none.

    Returns:
        An ``xarray.Dataset``: each observable over ``(*grid dims, *its own dims)``, with the
            grid's and the layout's coordinates and :func:`dataset_attrs` plus ``jaxattn_version``.
    """
    from jaxattn.version import __version__

    layout = plan.experiment.layout(plan.static)
    grid = plan.grid
    dims = [d.name for d in grid.dims]
    data = {k: (dims + list(layout.dims[k]), v.reshape(grid.shape + v.shape[1:])) for k, v in out.items()}
    coords: dict[str, Any] = {}
    for d in grid.dims:
        for var, vals in d.values.items():
            coords[var] = (d.name, list(vals))
    coords.update(layout.coords)
    ds = xr.Dataset(data, coords=coords, attrs=dataset_attrs(plan))
    for k, name in layout.long_names.items():
        if k in ds:
            ds[k].attrs["long_name"] = name
    if wall is not None:
        ds.attrs["wall_seconds"] = wall
    ds.attrs["jaxattn_version"] = __version__
    return ds


def dataset_attrs(plan: Plan) -> dict:
    """The attributes every result of ``plan`` carries: the config (JSON), the experiment, the
    fixed axis values, the block shape, the experiment's own, and the provenance (JSON:
    :mod:`jaxattn.engine.provenance`).

    Args:
        plan: The run.

    Returns:
        Attribute name -> JSON-safe value.
    """
    import json

    from jaxattn.engine import provenance

    return {
        "experiment": plan.experiment.name,
        "config": json.dumps(cfgs.to_json(plan.config)),
        "fixed_axes": json.dumps(plan.fixed),
        "block": plan.block,
        "group": plan.group,
        **plan.experiment.attrs(plan.config, plan.static),
        "provenance": provenance.as_attr(plan.x64, plan.matmul_precision),
    }
