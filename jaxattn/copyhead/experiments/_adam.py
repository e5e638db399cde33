"""Full-batch Adam (MAP) grids of the copy head over ``P x seed x init``, and the global minimum
per ``P``.

The data sets are padded to the largest ``P`` with per-sample masks (sequence ``i`` of seed ``s``
is the same for every ``P``, so each grid point trains on exactly the data it would get alone);
``P`` and the initialisation (``"random"``: ``G_0 ~ N(0, sigma0^2)``; ``"copy"``: ``G_0 = c S``)
share the seed's data stream. :func:`global_minimum` keeps, per ``P``, the run with the lowest
``U`` and counts the runs in each basin: near a first-order transition random initialisations
stay in the uniform basin beyond ``P*`` (hysteresis), so the unfiltered average would place the
transition wrongly.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
import xarray as xr

from jaxattn import engine
from jaxattn.copyhead import network
from jaxattn.copyhead._config import CopyConfig
from jaxattn.copyhead.data import data_key, init_key, member_stats, stream_data, test_bytes, test_stats
from jaxattn.core.kernels import full_batch
from jaxattn.engine import Experiment, Layout, choice_axis, int_axis, over_groups, segments, stream_values

INITS = ("random", "copy")


OBSERVABLES = ("prev_weight", "a1", "aG", "U", "train_error", "test_error", "grad_norm")


LONG_NAMES = {"prev_weight": "(1/L) sum_l A_{l,l-1}", "test_error": "|f_l - y_l|^2 per position, fresh sequences"}


def optimizer(arch: network.CopyArch, n_steps: int, final: float) -> full_batch.FullBatch:
    """Full-batch Adam on ``U`` (cosine decay to ``final`` times the rate).

    Args:
        arch: the network (its loss ``U``).
        n_steps: steps of the cosine decay.
        final: final learning rate as a fraction of the run's rate.

    Returns:
        Named tuple :class:`~jaxattn.core.kernels.full_batch.FullBatch` ``(init, step)`` pair.
    """
    return full_batch.full_batch(
        lambda p, st: network.loss(p, st, arch), optax.adam, n_steps=n_steps, final_lr_fraction=final
    )


def observe_one(
    arch: network.CopyArch, st: full_batch.FullBatchState, data: network.CopyStats, test: network.CopyStats
) -> dict:
    """The observables of one run: order parameters, ``U``, train and test error, the gradient
    norm (``NaN`` if the run diverged) and ``diverged``.

    Args:
        arch: the network.
        st: the run's final optimiser state.
        data: statistics of the training set.
        test: statistics of the test set.

    Returns:
        Scalars keyed ``prev_weight``, ``a1``, ``aG``, ``U``, ``train_error``, ``test_error``,
            ``grad_norm`` (all ``NaN`` if diverged) and ``diverged``.
    """
    p = st.params
    U, g = jax.value_and_grad(network.loss)(p, data, arch)
    out = dict(
        network.order_parameters(p.G, arch),
        U=U,
        train_error=network.error(p, data, arch),
        test_error=network.error(p, test, arch),
        grad_norm=optax.tree.norm(g),
    )
    out = {k: jnp.where(st.diverged, jnp.nan, v) for k, v in out.items()}
    out["diverged"] = st.diverged
    return out


class AdamStatic(NamedTuple):
    """The static (hashable) part of a :class:`CopyAdam` run.

    Attributes:
        arch: the network.
        n_max: the largest ``P`` of the grid (data sets are padded to it).
        n_steps: Adam steps.
        final: final learning rate as a fraction of ``lr``.
        sigma0: scale of the random initial logits.
        c_copy: ``c`` of the copy-biased start ``G_0 = c S``.
        lr: Adam learning rate.
        grad_tol: convergence tolerance on the gradient norm.
        threshold: previous-token weight above which a run is in the copy basin.
        segments: steps of each progress segment.
        matmul_precision: the precision the programs' matrix products are traced at (a part of
            the static, so that two precisions never share a program).
    """

    arch: network.CopyArch
    n_max: int
    n_steps: int
    final: float
    sigma0: float
    c_copy: float
    lr: float
    grad_tol: float
    threshold: float
    segments: tuple[int, ...]
    matmul_precision: str


class CopyAdam(Experiment):
    """Full-batch Adam on ``U`` (Spec B, section 4): the order parameters, ``U``, the errors and
    the gradient norm at the end, whether the run converged, and which basin it ended in.

    Attributes:
        name: ``"copy_adam"``.
        doc: one line describing it.
        config_type: :class:`~jaxattn.copyhead._config.CopyConfig`.
        axes: ``P``, ``seed`` and ``init`` (``"random"`` or ``"copy"``).
        block: default streams per block.
        group: default members per group.
    """

    name = "copy_adam"
    doc = "copy task, full-batch Adam (jaxattn.copyhead.train)"
    config_type = CopyConfig
    axes = (
        int_axis("P", 200, 1, shared=True, help="Training sequences."),
        int_axis("seed", 0, 0, help="Seed of the data set and the random start."),
        choice_axis("init", "random", INITS, shared=True, help="Start: random or copy."),
    )
    block = 2
    group = 2

    def setup_bytes(self, c, values) -> int:
        return test_bytes(c)

    def setup(self, c: CopyConfig, values):
        static = AdamStatic(
            c.arch,
            max(values["P"]),
            c.n_steps,
            float(c.final_lr_fraction),
            float(c.sigma0),
            float(c.c_copy),
            float(c.lr),
            float(c.grad_tol),
            float(c.threshold),
            segments(c.n_steps),
            c.matmul_precision,
        )
        return static, {"test": test_stats(c)}

    def params(self, static, points):
        return {
            "data_key": data_key(points["seed"]),
            "init_key": init_key(points["seed"]),
            "P": np.asarray(points["P"], np.int32),
            "is_copy": np.asarray(points["init"]) == "copy",
        }

    def init(self, s: AdamStatic, shared, p, n_groups):
        fb = optimizer(s.arch, s.n_steps, s.final)
        X = stream_data(s.arch, stream_values(p["data_key"]), s.n_max)

        def group(q):
            st = member_stats(X, q["P"], s.n_max)
            lr = jnp.asarray(s.lr, jnp.float32)  # what fb.init makes of it
            one = lambda k, c: fb.init(network.init(k, s.arch, s.sigma0, s.c_copy, c), lr)  # noqa: E731
            return jax.vmap(jax.vmap(one))(q["init_key"], q["is_copy"]), st

        return over_groups(group, n_groups, p)

    def step(self, s: AdamStatic, shared, p, state, k, n_groups):
        fb = optimizer(s.arch, s.n_steps, s.final)
        n = jnp.asarray(s.segments)[k]

        def group(st, data):
            run = lambda a, d: jax.lax.fori_loop(0, n, lambda _, x: fb.step(x, d), a)  # noqa: E731
            return jax.vmap(jax.vmap(run))(st, data), data

        return over_groups(group, n_groups, *state)

    def finish(self, s: AdamStatic, shared, p, state, n_groups):
        def group(st, data, q):
            out = jax.vmap(jax.vmap(lambda a, d: observe_one(s.arch, a, d, shared["test"])))(st, data)
            scale = s.grad_tol * jnp.sqrt(1.0 + q["P"] * s.arch.L)
            out["converged"] = (out["grad_norm"] <= scale) & ~out["diverged"]
            out["copy_basin"] = out["prev_weight"] > s.threshold
            return out

        return over_groups(group, n_groups, *state, p)

    def layout(self, s) -> Layout:
        return Layout({k: () for k in OBSERVABLES + ("converged", "copy_basin", "diverged")}, {}, LONG_NAMES)

    def bytes_per_point(self, s: AdamStatic) -> int:
        a = s.arch
        return 4 * (s.n_max * a.L * a.V * 2 + 6 * (a.L * a.L + a.V * a.V) + (a.L * a.V) ** 2)

    def progress_units(self, s: AdamStatic):
        return np.asarray(s.segments, float), "step"

    def attrs(self, c: CopyConfig, s) -> dict:
        return {"attention": c.attention, "L": c.L, "V": c.V, "basin_threshold": c.threshold}


COPY_ADAM = CopyAdam()


TRAIN_GRID = {"P": (200, 700), "seed": (0, 1), "init": INITS}
"""``TRAIN_GRID`` is the grid :func:`train` runs unless told otherwise."""


def train(config: CopyConfig | None = None, **kw: Any) -> xr.Dataset:
    """Train the grid ``P x seed x init`` by full-batch Adam on ``U``; return a Dataset with
    dimensions ``(P, seed, init)`` holding ``prev_weight``, ``a1``, ``aG``, ``U``,
    ``train_error``, ``test_error``, ``grad_norm``, ``converged``, ``copy_basin`` and
    ``diverged``. The blocks are sharded over ``devices`` (default: all local devices).

    Args:
        config: the fixed parameters; default ``CopyConfig()``.
        **kw: the axes ``P`` (numbers of training sequences), ``seed`` (of the data set and the
            random start) and ``init`` (``"random"`` and/or ``"copy"``), a value or a list each
            (default :data:`TRAIN_GRID`); and the options of :func:`jaxattn.engine.run` (``progress``, ``devices``, ``block``, ``group``, ``chunk_size``, ``memory_budget``).

    Returns:
        ``xr.Dataset`` with dimensions ``(P, seed, init)`` holding the observables above.
    """
    return engine.run(COPY_ADAM, config or CopyConfig(), **{**TRAIN_GRID, **kw})


def global_minimum(ds: xr.Dataset) -> xr.Dataset:
    """Per ``P``: the observables of the run with the lowest ``U`` (diverged runs excluded), its
    ``seed`` and ``init``, and per initialisation the number of runs ending in each basin
    (``n_copy``, ``n_uniform``). ``hysteresis`` marks the ``P`` where some run ended in the basin
    that is not the global minimum's: its start trapped it in a metastable state (Spec B,
    section 4: keep the lowest ``U`` per ``P``).

    Args:
        ds: the output of :func:`train`, dimensions ``(P, seed, init)``.

    Returns:
        ``xr.Dataset`` over ``P`` (``n_copy``, ``n_uniform`` over ``(P, init)``): the best run's
            observables, ``converged``, ``copy_basin``, ``best_seed``, ``best_init``, ``hysteresis``.
    """
    U = ds["U"].where(~ds["diverged"])
    flat = U.stack(run=("seed", "init")).fillna(np.inf)
    idx = flat.argmin("run")
    best = ds.stack(run=("seed", "init")).isel(run=idx)
    out = best[list(OBSERVABLES) + ["converged", "copy_basin"]].drop_vars(["run", "seed", "init"])
    out["best_seed"] = ("P", best["seed"].values)
    out["best_init"] = ("P", best["init"].values.astype(str))
    ok = ~ds["diverged"]
    out["n_copy"] = (ds["copy_basin"] & ok).sum("seed")
    out["n_uniform"] = (~ds["copy_basin"] & ok).sum("seed")
    other = xr.where(out["copy_basin"], out["n_uniform"], out["n_copy"]).sum("init")
    out["hysteresis"] = other > 0
    out.attrs = dict(ds.attrs)
    return out
