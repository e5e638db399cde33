"""The protocol a model implements to run on the engine, and the block layout it computes on.

An :class:`Experiment` declares once what a model is:

- ``config_type``: its fixed parameters, a frozen dataclass with defaults and ``validate()``
  (:mod:`jaxattn.engine.config` derives sweep fields and command-line options from it);
- ``axes``: its grid axes (:class:`~jaxattn.engine._axes.Axis`), which of them are *shared*
  hyper-parameters (points differing only there share one data stream), and defaults;
- ``setup(config, values)``: a hashable ``static`` (shapes and choices that fix the compiled
  program: shape-changing axes such as ``H``, ``L``, ``P`` enter only through their largest
  value, smaller ones are masked; the precision of matrix products, ``matmul_precision``, where
  the config chooses it) and ``shared`` arrays (replicated on every device);
- ``params(static, points)``: the per-point inputs (keys from values, never from positions);
- ``init``, ``step``, ``finish``: an ``(init, step)`` pair over the explicit state of one
  *block*, and the observables read off the final state. The engine calls ``step`` once per
  *segment* (``progress_units`` says how many, and how much progress each is), from Python, so
  a long run shows its progress and its programs stay cacheable (a host callback inside a
  program would keep it out of the persistent compilation cache);
- ``layout(static)``: each observable's dimensions after the grid's, and their coordinates.

The block layout. The engine groups the points into *streams* (points equal in every non-shared
axis) and lays a block out as ``(S, G, M)``: ``S`` streams, each with ``G`` groups of ``M``
members (padded by repeating a real member). Every leaf of ``params`` has these three leading
axes, and every member of a stream has the stream's values, so a stream's data can be drawn
once from member ``[s, 0, 0]``'s key and used by all its members. :func:`over_groups` applies a
function to one ``(S, M)`` group at a time: the shapes of every computation on the data are
then those of the block, whatever the grid, which is what makes a point's bits independent of
the grid around it (XLA picks algorithms by shape; ``docs/architecture.md``). ``S`` and ``M``
are execution settings (``block`` and ``group``) with one default rule per experiment
(:meth:`Experiment.default_block`), the same for the Python API, the command line and sweeps.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Int, PyTree

from jaxattn.engine._axes import Axis


class Layout(NamedTuple):
    """Each observable's dimensions after the grid's, their coordinates, and attributes for the
    dataset (``long_name`` per variable).

    Attributes:
        dims: Observable name -> the names of its own dimensions (after the grid's).
        coords: Coordinate name -> its values, for those dimensions.
        long_names: Observable name -> its ``long_name`` attribute.
    """

    dims: dict[str, tuple[str, ...]]
    coords: dict[str, np.ndarray]
    long_names: dict[str, str] = {}


class Experiment:
    """Base class of the experiments (one instance per experiment, registered by name in
    :mod:`jaxattn.engine._registry`). Subclasses set the class attributes and implement
    :meth:`setup`, :meth:`params`, :meth:`compute` and :meth:`layout`.

    Attributes:
        name: The name the experiment is registered under.
        doc: One line describing it.
        config_type: Its config dataclass (fixed parameters).
        axes: Its grid axes.
        x64: Whether it is traced and run in float64 (the theory).
        block: Default streams per block (``S``).
        group: Default members per group (``M``) where axes are shared.
    """

    name: str = ""
    doc: str = ""
    config_type: type = object
    axes: tuple[Axis, ...] = ()
    x64: bool = False  # traced and run in float64 (the theory)
    block: int = 2  # default streams per block
    group: int = 1  # default members per group

    def uses_x64(self, config) -> bool:
        """Whether a run of ``config`` is traced and run in float64: :attr:`x64`, unless the config
        has a ``precision`` field (``"float64"`` or ``"float32"``), which decides.

        Args:
            config: The run's validated config.

        Returns:
            ``True`` for float64.
        """
        precision = getattr(config, "precision", None)
        return self.x64 if precision is None else precision == "float64"

    def matmul_precision(self, config) -> str:
        """The precision of the matrix products of a run of ``config``
        (:data:`~jaxattn.core.precision.MATMUL_PRECISIONS`): ``"highest"`` for the theory
        (:attr:`x64`: full precision on every device, always), else the config's
        ``matmul_precision`` field where it has one (a simulation's choice), else ``"highest"``.

        Args:
            config: The run's validated config.

        Returns:
            ``"highest"``, ``"high"`` or ``"default"``.
        """
        return "highest" if self.x64 else getattr(config, "matmul_precision", "highest")

    def static_matmul_precision(self, static) -> str:
        """The precision the programs of ``static`` are traced under (the engine caches programs by
        ``static``, and keys exported ones by its ``repr``): the ``matmul_precision``
        attribute of ``static``, which :meth:`setup` gives it where the config chooses one, so
        that two precisions never share a program; ``"highest"`` where it has none.
        :func:`~jaxattn.engine.make_plan` checks that it is :meth:`matmul_precision`.

        Args:
            static: From :meth:`setup`.

        Returns:
            ``"highest"``, ``"high"`` or ``"default"``.
        """
        return getattr(static, "matmul_precision", "highest")

    # --- declared ----------------------------------------------------------------------------
    @property
    def axis(self) -> dict[str, Axis]:
        """The axes by name."""
        return {a.name: a for a in self.axes}

    def shared_axes(self, config) -> frozenset[str]:
        """The axes whose points share a data stream under ``config`` (default: those declared
        ``shared``).

        Args:
            config: The run's config.

        Returns:
            The names of the shared axes.
        """
        return frozenset(a.name for a in self.axes if a.shared)

    def default_group(self, config) -> int:
        """Members per group when the run does not say: 1 where nothing is shared.

        Args:
            config: The run's config.

        Returns:
            :attr:`group`, or 1 where no axis is shared under ``config``.
        """
        return self.group if self.shared_axes(config) else 1

    def default_block(self, config, static, n_streams: int) -> int:
        """Streams per block when the run does not say (default: :attr:`block`). An experiment may
        choose it from its shapes and the grid's number of streams; a point's bits depend on it
        (the run's dataset and a sweep's manifest record the block used).

        Args:
            config: The run's validated config.
            static: From :meth:`setup`.
            n_streams: The number of streams in the grid.

        Returns:
            :attr:`block`.
        """
        return self.block

    def fields(self) -> tuple[str, ...]:
        """The config fields a sweep file's ``[fixed]`` table and the command line may set.

        Returns:
            The field names of :attr:`config_type`, in declaration order.
        """
        import dataclasses

        return tuple(f.name for f in dataclasses.fields(self.config_type))

    # --- implemented by each experiment --------------------------------------------------------
    def setup(self, config, values: dict[str, list]) -> tuple[Any, PyTree]:
        """``(static, shared)`` for a run whose axes take ``values`` (every axis, a list each).

        Args:
            config: The validated config.
            values: Every axis name -> the sorted distinct values it takes in the run.

        Returns:
            ``(static, shared)``: a hashable ``static`` that fixes the compiled programs, and a
                pytree of ``shared`` arrays replicated on every device.
        """
        raise NotImplementedError

    def params(self, static, points: dict[str, np.ndarray]) -> PyTree:
        """Per-point inputs with a leading point axis, from the points' values alone, computed
        for all points at once: numpy on the columns, and keys from
        :func:`jaxattn.core.keys.derive` (one compiled program). No Python loop over the points
        and no JAX call per point: a grid's fixed cost must not grow with its size.

        Args:
            static: From :meth:`setup`.
            points: Every axis name -> its value at each point (1-d numpy arrays of one length).

        Returns:
            A pytree whose leaves (numpy or JAX arrays) are ``(n_points, ...)``.
        """
        raise NotImplementedError

    def init(self, static, shared: PyTree, params: PyTree, n_groups: Int[Array, ""]) -> PyTree:
        """The state of one block (leaves of ``params`` are ``(S, G, M, ...)``).

        Args:
            static: From :meth:`setup`.
            shared: The shared arrays from :meth:`setup`.
            params: The block's inputs, leaves ``(S, G, M, ...)``.
            n_groups: The number of groups ``G`` in use (a runtime scalar).

        Returns:
            The block's initial state (a pytree).
        """
        raise NotImplementedError

    def step(
        self, static, shared: PyTree, params: PyTree, state: PyTree, k: Int[Array, ""], n_groups: Int[Array, ""]
    ) -> PyTree:
        """Segment ``k`` (a runtime index, ``0 <= k < n_segments``) of one block.

        Args:
            static: From :meth:`setup`.
            shared: The shared arrays from :meth:`setup`.
            params: The block's inputs, leaves ``(S, G, M, ...)``.
            state: The block's state before the segment.
            k: The segment's index (a runtime scalar).
            n_groups: The number of groups ``G`` in use (a runtime scalar).

        Returns:
            The block's state after the segment (same structure as ``state``).
        """
        raise NotImplementedError

    def finish(
        self, static, shared: PyTree, params: PyTree, state: PyTree, n_groups: Int[Array, ""]
    ) -> dict[str, Array]:
        """The observables of one block, ``(S, G, M, *layout.dims[name])`` each.

        Args:
            static: From :meth:`setup`.
            shared: The shared arrays from :meth:`setup`.
            params: The block's inputs, leaves ``(S, G, M, ...)``.
            state: The block's final state.
            n_groups: The number of groups ``G`` in use (a runtime scalar).

        Returns:
            Observable name -> array ``(S, G, M, *layout.dims[name])``.
        """
        raise NotImplementedError

    def layout(self, static) -> Layout:
        """The observables' own dimensions and coordinates.

        Args:
            static: From :meth:`setup`.

        Returns:
            The ``Layout`` (dims, coords and long names per observable).
        """
        raise NotImplementedError

    def setup_bytes(self, config, values: dict[str, list]) -> int:
        """Memory :meth:`setup` needs (the shared data and the workspace that makes it), found
        from the config and the axes' values alone: a run whose setup would not fit is refused
        before it starts.

        Args:
            config: The run's config.
            values: Each axis's sorted values, as :meth:`setup` gets them.

        Returns:
            Bytes (default ``0``: a setup too small to matter).
        """
        return 0

    def bytes_per_point(self, static) -> int:
        """Device memory one point needs (sizes chunks from a memory budget).

        Args:
            static: From :meth:`setup`.

        Returns:
            Bytes per point (default ``65536``).
        """
        return 1 << 16

    def progress_units(self, static) -> tuple[np.ndarray, str]:
        """The progress each segment makes (its length is the number of segments) and the unit's
        name, for the progress bar.

        Args:
            static: From :meth:`setup`.

        Returns:
            ``(units, name)``: a 1-d array ``(n_segments,)`` of each segment's progress, and the
                unit's name (default: one segment, ``"block"``).
        """
        return np.ones(1), "block"

    def attrs(self, config, static) -> dict:
        """Attributes for the dataset beyond the config (JSON-safe scalars).

        Args:
            config: The run's config.
            static: From :meth:`setup`.

        Returns:
            Attribute name -> value (default: none).
        """
        return {}

    def __repr__(self) -> str:
        return f"<experiment {self.name}>"


class OneShot(Experiment):
    """An experiment computed in one segment, one group at a time (theory grids, ODE solves):
    subclasses implement :meth:`compute` for one ``(S, M)`` group instead of ``init``, ``step``
    and ``finish``.

    Attributes:
        name: As in :class:`Experiment`.
        doc: As in :class:`Experiment`.
        config_type: As in :class:`Experiment`.
        axes: As in :class:`Experiment`.
        x64: As in :class:`Experiment`.
        block: As in :class:`Experiment`.
        group: As in :class:`Experiment`.
    """

    def compute(self, static, shared: PyTree, params: PyTree) -> dict[str, Array]:
        """The observables of one group: leaves of ``params`` are ``(S, M, ...)``.

        Args:
            static: From :meth:`setup`.
            shared: The shared arrays from :meth:`setup`.
            params: One group's inputs, leaves ``(S, M, ...)``.

        Returns:
            Observable name -> array ``(S, M, *layout.dims[name])``.
        """
        raise NotImplementedError

    def init(self, static, shared, params, n_groups):
        return {}

    def step(self, static, shared, params, state, k, n_groups):
        return over_groups(lambda q: self.compute(static, shared, q), n_groups, params)

    def finish(self, static, shared, params, state, n_groups):
        return state


MIN_WIDTH = 2
"""The fewest groups a stream slot's buffers hold. The groups are computed by a loop whose trip
count is a runtime value (:func:`over_groups`), so that a point's code does not
depend on how many groups there are; but on an axis of length 1 every index is 0, XLA makes the
loop's slices static and fuses its body with what surrounds it, and a point alone could differ in
its last bit from the same point in a larger grid (seen in online SGD's test error). The extra
group is never computed: it costs the memory of its inputs and state, within the memory budget's
factor of 4 on the bytes per point (``streams_within`` counts computed groups
only, so that an accelerator's default block stays the whole grid where it fits)."""


def loop_over(fn: Callable[..., PyTree], n: Int[Array, ""], axis: int, *trees: PyTree) -> PyTree:
    """``fn`` applied to each of the first ``n`` entries along ``axis`` of ``trees``, its
    outputs stacked along the same axis (a buffer as long as the axis).

    A loop whose trip count is a runtime value: every entry is computed by the same code (XLA can
    neither unroll nor inline it), so an entry's numbers do not depend on how many there are, as
    long as the axis is at least 2 long (:data:`MIN_WIDTH`). ``fn`` is traced once.

    Args:
        fn: Takes one entry of each tree (``axis`` removed) and returns a pytree.
        n: How many entries to compute (a runtime scalar, at most the axis's length).
        axis: The axis looped over.
        *trees: Pytrees whose leaves share the length of ``axis``.

    Returns:
        ``fn``'s outputs stacked along ``axis`` to the axis's full length (entries from ``n`` on
            are zeros).
    """
    tree = jax.tree_util

    def take(t, i):
        return tree.tree_map(lambda x: jax.lax.dynamic_index_in_dim(x, i, axis, keepdims=False), t)

    # traced once: jit's trace cache serves the loop body's call with the shapes' trace
    fn = jax.jit(fn)
    shapes = jax.eval_shape(fn, *(take(t, 0) for t in trees))
    size = tree.tree_leaves(trees)[0].shape[axis]
    buf = tree.tree_map(lambda s: jnp.zeros(s.shape[:axis] + (size,) + s.shape[axis:], s.dtype), shapes)

    def body(i, buf):
        out = fn(*(take(t, i) for t in trees))
        return tree.tree_map(lambda b, v: jax.lax.dynamic_update_index_in_dim(b, v, i, axis), buf, out)

    return jax.lax.fori_loop(0, n, body, buf)


def over_groups(fn: Callable[..., PyTree], n_groups: Int[Array, ""], *trees: PyTree) -> PyTree:
    """``fn`` applied to each group of a block: ``trees`` have leaves ``(S, G, M, ...)``; ``fn``
    gets the ``(S, M, ...)`` slices of group ``g`` and returns a pytree of ``(S, M, ...)``
    leaves, stacked back into ``(S, G, M, ...)`` (:func:`loop_over` axis 1): a point's numbers
    do not depend on how many groups its stream has.

    Args:
        fn: Takes the ``(S, M, ...)`` slices of one group of each tree, returns a pytree.
        n_groups: How many groups to compute (a runtime scalar).
        *trees: Pytrees with leaves ``(S, G, M, ...)``.

    Returns:
        ``fn``'s outputs with leaves ``(S, G, M, ...)`` (groups from ``n_groups`` on are zeros).
    """
    return loop_over(fn, n_groups, 1, *trees)


def stream_values(tree: PyTree) -> PyTree:
    """The ``(S, ...)`` values of each stream (member ``[s, 0, 0]``) of ``(S, G, M, ...)`` leaves.

    Args:
        tree: A pytree with leaves ``(S, G, M, ...)``.

    Returns:
        The same pytree with leaves ``(S, ...)``.
    """
    return jax.tree_util.tree_map(lambda x: x[:, 0, 0], tree)


N_SEGMENTS = 20
"""``N_SEGMENTS`` segments at most cut a long run for the engine's progress (:func:`segments`)."""


def segments(n: int, k: int = N_SEGMENTS) -> tuple[int, ...]:
    """``n`` steps cut into at most ``k`` nearly equal segments: an experiment's ``step`` runs
    one segment per call, and the engine's progress bar moves once per segment.

    Args:
        n: Steps (``>= 1``).
        k: The most segments.

    Returns:
        The segments' lengths, summing to ``n``.
    """
    bounds = np.unique(np.linspace(0, n, min(k, n) + 1).astype(int))
    return tuple(int(x) for x in np.diff(bounds))
