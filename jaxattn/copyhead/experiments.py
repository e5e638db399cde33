"""What the engine runs for the copy head (Spec B): full-batch Adam (MAP) grids, SGLD posterior
chains and the reduced effective action's minima, and the Python API over them.

Adam (:func:`train`) runs the grid ``P x seed x init``: the data sets are padded to the largest
``P`` with per-sample masks (sequence ``i`` of seed ``s`` is the same for every ``P``, so each
grid point trains on exactly the data it would get alone); ``P`` and the initialisation
(``"random"``: ``G_0 ~ N(0, sigma0^2)``; ``"copy"``: ``G_0 = c S``) share the seed's data stream.
:func:`global_minimum` keeps, per ``P``, the run with the lowest ``U`` and counts the runs in each
basin: near a first-order transition random initialisations stay in the uniform basin beyond
``P*`` (hysteresis), so the unfiltered average would place the transition wrongly.

SGLD (:func:`sample`) runs one chain per point of ``P x start x data_seed x chain`` on
``exp(-N U)``; the theory (:func:`theory_grid`) the global minimum of the reduced action over
``P x L x V x N x beta x omega x sigma_G2``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
import xarray as xr
from jax.typing import DTypeLike
from jaxtyping import Array, PRNGKeyArray

from jaxattn import engine
from jaxattn.copyhead import action as ca
from jaxattn.copyhead import network as cm
from jaxattn.copyhead import softmax as cph
from jaxattn.copyhead import task
from jaxattn.copyhead.config import CopyConfig, CopyData, CopySGLDConfig, CopyTheoryConfig, SGLDConfig
from jaxattn.copyhead.linear import linear_minimum
from jaxattn.core.attention import prefix_mask
from jaxattn.core.kernels import full_batch as fbr
from jaxattn.core.kernels import sgld as sg
from jaxattn.engine import (
    Experiment,
    Grid,
    Layout,
    OneShot,
    choice_axis,
    float_axis,
    int_axis,
    over_groups,
    stream_values,
)

INITS = ("random", "copy")
STARTS = ("uniform", "copy")
GRID_AXES = ("P", "seed", "init")
OBSERVABLES = ("prev_weight", "a1", "aG", "U", "train_error", "test_error", "grad_norm")
SAMPLE_OBSERVABLES = ("prev_weight", "a1", "aG", "U", "train_error", "test_error")
LONG_NAMES = {"prev_weight": "(1/L) sum_l A_{l,l-1}", "test_error": "|f_l - y_l|^2 per position, fresh sequences"}
N_SEGMENTS = 20  # progress updates of a long run


def data_key(seed: int) -> PRNGKeyArray:
    """The PRNG key of the data set of ``seed`` (``fold_in(key(seed), 1)``).

    Args:
        seed: the data seed.

    Returns:
        A typed PRNG key; sequence ``i`` is drawn from ``fold_in`` of it and ``i``
            (:func:`jaxattn.copyhead.task.tokens`).
    """
    return jax.random.fold_in(jax.random.key(seed), 1)


def init_key(seed: int) -> PRNGKeyArray:
    """The PRNG key of the random start of ``seed`` (``fold_in(key(seed), 0)``).

    Args:
        seed: the run's seed.

    Returns:
        A typed PRNG key.
    """
    return jax.random.fold_in(jax.random.key(seed), 0)


def chain_key(chain_seed: int, chain: int) -> PRNGKeyArray:
    """The PRNG key of the noise of SGLD chain ``chain`` (``fold_in(fold_in(key(chain_seed), 2), chain)``).

    Args:
        chain_seed: seed of the chains' noise.
        chain: index of the chain.

    Returns:
        A typed PRNG key.
    """
    return jax.random.fold_in(jax.random.fold_in(jax.random.key(chain_seed), 2), chain)


def test_stats(config: CopyData) -> cm.CopyStats:
    """The statistics of the test sequences (drawn from ``test_seed``).

    Args:
        config: the network and the test set (``n_test``, ``test_seed``).

    Returns:
        Named tuple :class:`~jaxattn.copyhead.network.CopyStats` of the ``n_test`` test sequences.
    """
    X = task.one_hot(task.tokens(jax.random.key(config.test_seed), config.n_test, config.L, config.V), config.V)
    return cm.stats(X)


def stream_data(arch: cm.CopyArch, keys: PRNGKeyArray, n_max: int) -> Array:
    """One-hot tokens of each stream's data set, drawn once per stream: sequence ``i`` of a
    stream is :func:`jaxattn.copyhead.task.tokens`'s ``i``-th, so ``P`` sequences are the first
    ``P`` of ``n_max``.

    Args:
        arch: the network (``L``, ``V``).
        keys: one data key per stream, shape ``(S,)``.
        n_max: sequences per stream.

    Returns:
        One-hot tokens, shape ``(S, n_max, L, V)``.
    """
    return task.one_hot(jax.vmap(lambda k: task.tokens(k, n_max, arch.L, arch.V))(keys), arch.V)


def member_stats(X: Array, P: Array, n_max: int) -> cm.CopyStats:
    """Statistics of the first ``P`` sequences of each member's stream.

    Args:
        X: each stream's one-hot tokens, shape ``(S, n_max, L, V)`` (:func:`stream_data`).
        P: each member's number of sequences, shape ``(S, M)``.
        n_max: sequences per stream.

    Returns:
        :class:`~jaxattn.copyhead.network.CopyStats` with leading axes ``(S, M)``.
    """
    return jax.vmap(lambda x, ps: jax.vmap(lambda p: cm.stats(x, prefix_mask(p, n_max)))(ps))(X, P)


def optimizer(arch: cm.CopyArch, n_steps: int, final: float) -> fbr.FullBatch:
    """Full-batch Adam on ``U`` (cosine decay to ``final`` times the rate).

    Args:
        arch: the network (its loss ``U``).
        n_steps: steps of the cosine decay.
        final: final learning rate as a fraction of the run's rate.

    Returns:
        Named tuple :class:`~jaxattn.core.kernels.full_batch.FullBatch` ``(init, step)`` pair.
    """
    return fbr.full_batch(lambda p, st: cm.loss(p, st, arch), optax.adam, n_steps=n_steps, final_lr_fraction=final)


def observe_one(arch: cm.CopyArch, st: fbr.FullBatchState, data: cm.CopyStats, test: cm.CopyStats) -> dict:
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
    U, g = jax.value_and_grad(cm.loss)(p, data, arch)
    out = dict(
        cm.order_parameters(p.G, arch),
        U=U,
        train_error=cm.error(p, data, arch),
        test_error=cm.error(p, test, arch),
        grad_norm=optax.tree.norm(g),
    )
    out = {k: jnp.where(st.diverged, jnp.nan, v) for k, v in out.items()}
    out["diverged"] = st.diverged
    return out


def segments(n: int, k: int = N_SEGMENTS) -> tuple[int, ...]:
    """``n`` steps cut into at most ``k`` nearly equal segments, for the engine's progress.

    Args:
        n: steps (``>= 1``).
        k: the most segments.

    Returns:
        The segments' lengths, summing to ``n``.
    """
    bounds = np.unique(np.linspace(0, n, min(k, n) + 1).astype(int))
    return tuple(int(x) for x in np.diff(bounds))


# --- Adam ----------------------------------------------------------------------------------------


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
    """

    arch: cm.CopyArch
    n_max: int
    n_steps: int
    final: float
    sigma0: float
    c_copy: float
    lr: float
    grad_tol: float
    threshold: float
    segments: tuple[int, ...]


class CopyAdam(Experiment):
    """Full-batch Adam on ``U`` (Spec B, section 4): the order parameters, ``U``, the errors and
    the gradient norm at the end, whether the run converged, and which basin it ended in.

    Attributes:
        name: ``"copy_adam"``.
        doc: one line describing it.
        config_type: :class:`~jaxattn.copyhead.config.CopyConfig`.
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
        )
        return static, {"test": test_stats(c)}

    def params(self, static, points):
        return {
            "data_key": jnp.stack([data_key(s) for s in points["seed"]]),
            "init_key": jnp.stack([init_key(s) for s in points["seed"]]),
            "P": jnp.asarray(points["P"], jnp.int32),
            "is_copy": jnp.asarray([i == "copy" for i in points["init"]]),
        }

    def init(self, s: AdamStatic, shared, p, n_groups):
        fb = optimizer(s.arch, s.n_steps, s.final)
        X = stream_data(s.arch, stream_values(p["data_key"]), s.n_max)

        def group(q):
            st = member_stats(X, q["P"], s.n_max)
            lr = jnp.asarray(s.lr, jnp.float32)  # what fb.init makes of it
            one = lambda k, c: fb.init(cm.init(k, s.arch, s.sigma0, s.c_copy, c), lr)  # noqa: E731
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


# --- SGLD ----------------------------------------------------------------------------------------


class SGLDStatic(NamedTuple):
    """The static (hashable) part of a :class:`CopySGLD` run.

    Attributes:
        arch: the network.
        n_max: the largest ``P`` of the grid (data sets are padded to it).
        N: inverse temperature of ``exp(-N U)``.
        c_copy: ``c`` of the copy start ``G = c S``.
        sampler: the sampler's config.
        advance: per segment, steps before its draws (burn-in segments).
        first: per segment, index of its first draw.
        n_draws: per segment, draws it takes (``thin`` steps each).
    """

    arch: cm.CopyArch
    n_max: int
    N: float
    c_copy: float
    sampler: SGLDConfig
    advance: tuple[int, ...]  # per segment: steps before its draws (burn-in segments)
    first: tuple[int, ...]  # per segment: index of its first draw
    n_draws: tuple[int, ...]  # per segment: draws it takes (thin steps each)


def start_params(arch: cm.CopyArch, start: str, c_copy: float, dtype: DTypeLike = jnp.float32) -> cm.CopyParams:
    """The uniform state ``G = 0, W = 0`` or the copy state ``G = c S, W = I``.

    Args:
        arch: the network.
        start: ``"uniform"``, or anything else for the copy state.
        c_copy: ``c`` of the copy state.
        dtype: dtype of the parameters.

    Returns:
        Named tuple :class:`~jaxattn.copyhead.network.CopyParams` ``(G, W)``, shapes (L, L) and (V, V).
    """
    if start == "uniform":
        return cm.CopyParams(jnp.zeros((arch.L, arch.L), dtype), jnp.zeros((arch.V, arch.V), dtype))
    return cm.CopyParams(c_copy * task.shift_matrix(arch.L, arch.cyclic, dtype), jnp.eye(arch.V, dtype=dtype))


def observe_draw(arch: cm.CopyArch) -> Callable[[cm.CopyParams, Any], dict]:
    """The observables of one posterior draw (``data`` is ``(train, test)`` statistics).

    Args:
        arch: the network.

    Returns:
        ``obs(params, data) -> dict``: scalars keyed ``prev_weight``, ``a1``, ``aG``, ``U``,
            ``train_error`` and ``test_error``.
    """

    def obs(p: cm.CopyParams, data):
        train_stats, test = data
        return dict(
            cm.order_parameters(p.G, arch),
            U=cm.loss(p, train_stats, arch),
            train_error=cm.error(p, train_stats, arch),
            test_error=cm.error(p, test, arch),
        )

    return obs


class CopySGLD(Experiment):
    """One SGLD chain on ``exp(-N U)`` per point (Spec B, section 4): the observables of every
    kept draw, the step sizes, and whether the chain diverged.

    Attributes:
        name: ``"copy_sgld"``.
        doc: one line describing it.
        config_type: :class:`~jaxattn.copyhead.config.CopySGLDConfig`.
        axes: ``P``, ``start`` (``"uniform"`` or ``"copy"``), ``data_seed`` and ``chain``.
        block: default streams per block.
        group: default members per group.
    """

    name = "copy_sgld"
    doc = "copy task, SGLD posterior chains (jaxattn.copyhead.sample)"
    config_type = CopySGLDConfig
    axes = (
        int_axis("P", 200, 1, shared=True, help="Training sequences."),
        choice_axis("start", "uniform", STARTS, shared=True, help="Chain start: uniform or copy."),
        int_axis("data_seed", 0, 0, help="The data set."),
        int_axis("chain", 0, 0, shared=True, help="The chain (its noise)."),
    )
    block = 2
    group = 4

    def fields(self):
        return tuple(f for f in super().fields() if f not in ("n_chains", "data_seed"))

    def setup(self, c: CopySGLDConfig, values):
        s = c.sampler
        burn = segments(s.burn_in, 5) if s.burn_in else ()
        draws = segments(s.n_kept)
        first = np.concatenate([[0], np.cumsum(draws)[:-1]]).astype(int)
        static = SGLDStatic(
            c.arch,
            max(values["P"]),
            float(c.N),
            float(c.c_copy),
            s,
            burn + (0,) * len(draws),
            (0,) * len(burn) + tuple(int(f) for f in first),
            (0,) * len(burn) + draws,
        )
        return static, {"test": test_stats(c)}

    def params(self, s: SGLDStatic, points):
        eps = s.sampler.step_sizes(s.arch, points["P"])
        return {
            "data_key": jnp.stack([data_key(d) for d in points["data_seed"]]),
            "chain_key": jnp.stack([chain_key(s.sampler.chain_seed, c) for c in points["chain"]]),
            "P": jnp.asarray(points["P"], jnp.int32),
            "is_copy": jnp.asarray([x == "copy" for x in points["start"]]),
            "eps": eps,
        }

    def _kernel(self, s: SGLDStatic):
        return sg.sgld(lambda q, d: cm.loss(q, d[0], s.arch), s.N)

    def init(self, s: SGLDStatic, shared, p, n_groups):
        kernel = self._kernel(s)
        X = stream_data(s.arch, stream_values(p["data_key"]), s.n_max)
        uniform, copy = start_params(s.arch, "uniform", s.c_copy), start_params(s.arch, "copy", s.c_copy)
        n_kept = s.sampler.n_kept

        def group(q):
            st = member_stats(X, q["P"], s.n_max)
            p0 = jax.vmap(jax.vmap(lambda c: jax.tree_util.tree_map(lambda u, v: jnp.where(c, v, u), uniform, copy)))(
                q["is_copy"]
            )
            chains = jax.vmap(jax.vmap(kernel.init))(p0)
            shape = q["P"].shape + (n_kept,)
            draws = {k: jnp.zeros(shape, jnp.float32) for k in SAMPLE_OBSERVABLES}
            return chains, st, draws

        return over_groups(group, n_groups, p)

    def step(self, s: SGLDStatic, shared, p, state, k, n_groups):
        kernel = self._kernel(s)
        obs = observe_draw(s.arch)
        adv, first, nd = (jnp.asarray(t)[k] for t in (s.advance, s.first, s.n_draws))
        thin = s.sampler.thin

        def chain(key, st, data, eps, draws):
            return sg.run_segment(kernel, obs, key, st, (data, shared["test"]), eps, adv, nd, thin, first, draws)

        def group(chains, data, draws, q):
            chains, draws = jax.vmap(jax.vmap(chain))(q["chain_key"], chains, data, q["eps"], draws)
            return chains, data, draws

        return over_groups(group, n_groups, *state, p)

    def finish(self, s, shared, p, state, n_groups):
        chains, _, draws = state
        return {**draws, "diverged": chains.diverged, "eps_G": p["eps"].G, "eps_W": p["eps"].W}

    def layout(self, s: SGLDStatic) -> Layout:
        return Layout(
            {**{k: ("draw",) for k in SAMPLE_OBSERVABLES}, "diverged": (), "eps_G": (), "eps_W": ()},
            {"draw": np.arange(s.sampler.n_kept)},
            LONG_NAMES,
        )

    def bytes_per_point(self, s: SGLDStatic) -> int:
        a = s.arch
        return 4 * (s.n_max * a.L * a.V * 2 + 4 * (a.L * a.L + a.V * a.V) + (a.L * a.V) ** 2 + 8 * s.sampler.n_kept)

    def progress_units(self, s: SGLDStatic):
        return np.asarray(s.advance) + np.asarray(s.n_draws) * s.sampler.thin, "step"

    def attrs(self, c: CopySGLDConfig, s) -> dict:
        return {"attention": c.attention, "L": c.L, "V": c.V, "N": float(c.N)}


COPY_SGLD = CopySGLD()


# --- theory --------------------------------------------------------------------------------------


class CopyTheory(OneShot):
    """The global minimum of the reduced effective action (Spec B, section 3), float64 (float32
    with ``precision = "float32"``): for
    softmax the minimising ``c_G``, both branches' minima and their number; for linear the
    minimising ``(a_1, a_G)``; for both the action, the previous-token weight and the test error.
    ``L``, ``V`` and the hyper-parameters are traced numbers, so they are axes like ``P``.

    Attributes:
        name: ``"copy_theory"``.
        doc: one line describing it.
        config_type: :class:`~jaxattn.copyhead.config.CopyTheoryConfig`.
        axes: ``P``, ``L``, ``V``, ``N``, ``beta``, ``omega`` and ``sigma_G2``.
        x64: true (float64).
        block: default streams per block.
        group: default members per group.
    """

    name = "copy_theory"
    doc = "copy task, minima of the reduced effective action (jaxattn.copyhead.softmax)"
    config_type = CopyTheoryConfig
    axes = (
        float_axis("P", 200.0, help="Training sequences (a real number in the theory)."),
        int_axis("L", 32, 2, help="Sequence length."),
        int_axis("V", 4, 2, help="Vocabulary size."),
        float_axis("N", 1.0, help="Inverse temperature."),
        float_axis("beta", 1.0, help="Data weight."),
        float_axis("omega", 1.0, help="Prior variance of W."),
        float_axis("sigma_G2", 1.0, help="Prior variance of G."),
    )
    x64 = True
    block = 8
    group = 1

    def setup(self, c: CopyTheoryConfig, values):
        return c, {}

    def params(self, c, points):
        f = jnp.result_type(float)  # float64, or float32 with precision = float32
        return {k: jnp.asarray(points[k], f) for k in ("P", "L", "V", "N", "beta", "omega", "sigma_G2")}

    def _one(self, c: CopyTheoryConfig, p) -> dict:
        L = p["L"]
        n_pos = L if c.cyclic else L - 1.0
        g = L if (c.attention == "linear" and c.linear_norm == "L") else jnp.ones_like(L)
        h = ca.CopyHyper(L, p["V"], p["beta"], p["omega"], p["sigma_G2"], p["N"], n_pos, g)
        if c.attention == "softmax":
            m = cph.softmax_minima(p["P"], h)
            st, _ = ca.softmax_stats(m.c, h)
            out = dict(c_G=m.c, c_G_uniform=m.c_lo, c_G_copy=m.c_hi, n_minima=m.n_minima)
        else:
            m = linear_minimum(p["P"], h)
            st, _ = ca.linear_stats(m.a1, m.aG, h)
            out = dict(a1=m.a1, aG=m.aG)
        out.update(S=m.S, prev_weight=st.s / h.n_pos, test_error=ca.test_error(st, p["P"], h))
        out["diverged"] = ~jnp.isfinite(m.S)
        return out

    def compute(self, c, shared, q):
        return jax.vmap(jax.vmap(lambda x: self._one(c, x)))(q)

    def layout(self, c: CopyTheoryConfig) -> Layout:
        names = ("c_G", "c_G_uniform", "c_G_copy", "n_minima") if c.attention == "softmax" else ("a1", "aG")
        return Layout({k: () for k in names + ("S", "prev_weight", "test_error", "diverged")}, {})

    def bytes_per_point(self, c) -> int:
        return 8 * cph.N_C * 8

    def attrs(self, c: CopyTheoryConfig, s) -> dict:
        return {"attention": c.attention}


COPY_THEORY = CopyTheory()


# --- the Python API ------------------------------------------------------------------------------


def _grid(experiment: Experiment, **values) -> Grid:
    return Grid.from_values(experiment.axis, values)


def train(
    config: CopyConfig | None = None,
    *,
    P: Sequence[int] | int = (200, 700),
    seed: Sequence[int] | int = (0, 1),
    init: Sequence[str] | str = INITS,
    progress: bool = False,
    devices: Sequence[Any] | None = None,
    block: int | None = None,
    group: int | None = None,
) -> xr.Dataset:
    """Train the grid ``P x seed x init`` by full-batch Adam on ``U``; return a Dataset with
    dimensions ``(P, seed, init)`` holding ``prev_weight``, ``a1``, ``aG``, ``U``,
    ``train_error``, ``test_error``, ``grad_norm``, ``converged``, ``copy_basin`` and
    ``diverged``. The blocks are sharded over ``devices`` (default: all local devices).
    Spec B, section 4.

    Args:
        config: the fixed parameters; default ``CopyConfig()``.
        P: numbers of training sequences.
        seed: seeds of the data set and the random start.
        init: starts, ``"random"`` and/or ``"copy"``.
        progress: show progress.
        devices: the ``jax.Device`` objects to shard over (default: all local devices).
        block: streams per block (default: the experiment's).
        group: members per group (default: the experiment's).

    Returns:
        ``xr.Dataset`` with dimensions ``(P, seed, init)`` holding the observables above.
    """
    grid = _grid(COPY_ADAM, P=P, seed=seed, init=init)
    return engine.run(
        COPY_ADAM, config or CopyConfig(), grid, devices=devices, block=block, group=group, progress=progress
    )


def sample(
    config: CopyData | None = None,
    sgld_config: SGLDConfig | None = None,
    *,
    P: Sequence[int] | int = (200, 700),
    start: Sequence[str] | str = STARTS,
    progress: bool = False,
    devices: Sequence[Any] | None = None,
    block: int | None = None,
    group: int | None = None,
) -> xr.Dataset:
    """SGLD posterior samples on one data set (``sgld_config.data_seed``): a Dataset with
    dimensions ``(P, start, chain, draw)`` holding the observables of every kept draw,
    ``diverged`` ``(P, start, chain)`` (a chain whose step sizes made it blow up: its draws are
    ``NaN``), the step sizes ``eps_G``, ``eps_W``, and per ``(P, start)`` the split R-hat and
    effective sample size of every observable, ``rhat_<name>`` and ``ess_<name>``, over the
    chains that did not diverge (:mod:`jaxattn.core.diagnostics`; ``to_arviz`` hands the draws
    to ArviZ). Spec B, section 4.

    Args:
        config: the network, test set and starts; default ``CopyData()``.
        sgld_config: the sampler; default ``SGLDConfig()`` (its ``n_chains`` chains per point).
        P: numbers of training sequences.
        start: chain starts, ``"uniform"`` and/or ``"copy"``.
        progress: show progress.
        devices: the ``jax.Device`` objects to shard over (default: all local devices).
        block: streams per block (default: the experiment's).
        group: members per group (default: the experiment's).

    Returns:
        ``xr.Dataset`` with dimensions ``(P, start, chain, draw)`` and the diagnostics above.
    """
    from jaxattn.core.diagnostics import add_diagnostics

    config = CopySGLDConfig.of(config or CopyData(), sgld_config or SGLDConfig()).validate()
    grid = _grid(COPY_SGLD, P=P, start=start, chain=range(config.n_chains))
    ds = engine.run(
        COPY_SGLD,
        config,
        grid,
        fixed={"data_seed": config.data_seed},
        devices=devices,
        block=block,
        group=group,
        progress=progress,
    )
    return add_diagnostics(ds, SAMPLE_OBSERVABLES)


def theory_grid(
    config: CopyTheoryConfig | None = None,
    *,
    P: Sequence[float] | float = 200.0,
    L: Sequence[int] | int = 32,
    V: Sequence[int] | int = 4,
    N: Sequence[float] | float = 1.0,
    progress: bool = False,
    devices: Sequence[Any] | None = None,
    **hyper: Any,
) -> xr.Dataset:
    """The reduced action's global minimum over the grid ``P x L x V x N`` (and ``beta``,
    ``omega``, ``sigma_G2`` given as keywords): a Dataset over those dimensions (float64).
    Spec B, section 3.

    Args:
        config: the static choices; default ``CopyTheoryConfig()``.
        P: numbers of training sequences (real numbers).
        L: sequence lengths.
        V: vocabulary sizes.
        N: inverse temperatures.
        progress: show progress.
        devices: the ``jax.Device`` objects to shard over (default: all local devices).
        **hyper: further axes ``beta``, ``omega``, ``sigma_G2`` (a value or a sequence each).

    Returns:
        ``xr.Dataset`` over the grid's dimensions: ``S``, ``prev_weight``, ``test_error``,
            ``diverged`` and ``c_G``, ``c_G_uniform``, ``c_G_copy``, ``n_minima`` (softmax) or
            ``a1``, ``aG`` (linear).
    """
    grid = _grid(COPY_THEORY, P=P, L=L, V=V, N=N, **hyper)
    return engine.run(COPY_THEORY, config or CopyTheoryConfig(), grid, devices=devices, progress=progress)


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


def posterior_summary(ds: xr.Dataset, var: str = "prev_weight") -> xr.Dataset:
    """Posterior mean of ``var`` per ``(P, start)`` over the non-diverged chains, with its Monte
    Carlo error from the spread of the chain means (independent chains).

    Args:
        ds: the output of :func:`sample`, dimensions ``(P, start, chain, draw)``.
        var: the observable.

    Returns:
        ``xr.Dataset`` over ``(P, start)`` with ``mean``, ``se``, ``n_chains`` (not diverged) and
            ``n_diverged``.
    """
    x = ds[var].where(~ds["diverged"])
    chain_mean = x.mean("draw")
    n = (~ds["diverged"]).sum("chain")
    return xr.Dataset(
        {
            "mean": chain_mean.mean("chain"),
            "se": chain_mean.std("chain", ddof=1) / np.sqrt(n),
            "n_chains": n,
            "n_diverged": ds["diverged"].sum("chain"),
        }
    )
