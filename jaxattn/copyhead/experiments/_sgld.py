"""SGLD posterior chains of the copy head: one chain per point of
``P x start x data_seed x chain`` on ``exp(-N U)``, their draws, and the posterior means.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr
from jax.typing import DTypeLike

from jaxattn import engine
from jaxattn.copyhead import network, task
from jaxattn.copyhead._config import CopyData, CopySGLDConfig, SGLDConfig
from jaxattn.copyhead.data import chain_key, data_key, member_stats, stream_data, test_bytes, test_stats
from jaxattn.copyhead.experiments._adam import LONG_NAMES
from jaxattn.core.kernels import sgld
from jaxattn.engine import Experiment, Layout, choice_axis, int_axis, over_groups, segments, stream_values

STARTS = ("uniform", "copy")


SAMPLE_OBSERVABLES = ("prev_weight", "a1", "aG", "U", "train_error", "test_error")


class SGLDStatic(NamedTuple):
    """The static (hashable) part of a :class:`CopySGLD` run.

    Attributes:
        arch: the network.
        n_max: the largest ``P`` of the grid (data sets are padded to it).
        N: inverse temperature of ``exp(-N U)``.
        c_copy: ``c`` of the copy start ``G = c S``.
        sampler: the sampler's config.
        schedule: the chain's segments (burn-in, then draws; one per call of ``step``).
        matmul_precision: the precision the programs' matrix products are traced at (a part of
            the static, so that two precisions never share a program).
    """

    arch: network.CopyArch
    n_max: int
    N: float
    c_copy: float
    sampler: SGLDConfig
    schedule: sgld.Schedule
    matmul_precision: str


def start_params(
    arch: network.CopyArch, start: str, c_copy: float, dtype: DTypeLike = jnp.float32
) -> network.CopyParams:
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
        return network.CopyParams(jnp.zeros((arch.L, arch.L), dtype), jnp.zeros((arch.V, arch.V), dtype))
    return network.CopyParams(c_copy * task.shift_matrix(arch.L, arch.cyclic, dtype), jnp.eye(arch.V, dtype=dtype))


def observe_draw(arch: network.CopyArch) -> Callable[[network.CopyParams, Any], dict]:
    """The observables of one posterior draw (``data`` is ``(train, test)`` statistics).

    Args:
        arch: the network.

    Returns:
        ``obs(params, data) -> dict``: scalars keyed ``prev_weight``, ``a1``, ``aG``, ``U``,
            ``train_error`` and ``test_error``.
    """

    def obs(p: network.CopyParams, data):
        train_stats, test = data
        return dict(
            network.order_parameters(p.G, arch),
            U=network.loss(p, train_stats, arch),
            train_error=network.error(p, train_stats, arch),
            test_error=network.error(p, test, arch),
        )

    return obs


class CopySGLD(Experiment):
    """One SGLD chain on ``exp(-N U)`` per point (Spec B, section 4): the observables of every
    kept draw, the step sizes, and whether the chain diverged.

    Attributes:
        name: ``"copy_sgld"``.
        doc: one line describing it.
        config_type: :class:`~jaxattn.copyhead._config.CopySGLDConfig`.
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

    def setup_bytes(self, c, values) -> int:
        return test_bytes(c)

    def setup(self, c: CopySGLDConfig, values):
        s = c.sampler
        sched = sgld.schedule(segments(s.burn_in, 5), segments(s.n_kept))
        static = SGLDStatic(
            c.arch,
            max(values["P"]),
            float(c.N),
            float(c.c_copy),
            s,
            sched,
            c.matmul_precision,
        )
        return static, {"test": test_stats(c)}

    def params(self, s: SGLDStatic, points):
        eps = s.sampler.step_sizes(s.arch, points["P"])
        return {
            "data_key": data_key(points["data_seed"]),
            "chain_key": chain_key(s.sampler.chain_seed, points["chain"]),
            "P": np.asarray(points["P"], np.int32),
            "is_copy": np.asarray(points["start"]) == "copy",
            "eps": eps,
        }

    def _kernel(self, s: SGLDStatic):
        return sgld.sgld(lambda q, d: network.loss(q, d[0], s.arch), s.N)

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
        adv, first, nd = (jnp.asarray(t)[k] for t in s.schedule)
        thin = s.sampler.thin

        def chain(key, st, data, eps, draws):
            return sgld.run_segment(kernel, obs, key, st, (data, shared["test"]), eps, adv, nd, thin, first, draws)

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
        return s.schedule.steps(s.sampler.thin), "step"

    def attrs(self, c: CopySGLDConfig, s) -> dict:
        return {"attention": c.attention, "L": c.L, "V": c.V, "N": float(c.N)}


COPY_SGLD = CopySGLD()


SAMPLE_GRID = {"P": (200, 700), "start": STARTS}
"""``SAMPLE_GRID`` is the grid :func:`sample` runs unless told otherwise (each with ``n_chains`` chains)."""


def sample(config: CopyData | None = None, sgld_config: SGLDConfig | None = None, **kw: Any) -> xr.Dataset:
    """SGLD posterior samples on one data set (``sgld_config.data_seed``): a Dataset with
    dimensions ``(P, start, chain, draw)`` holding the observables of every kept draw,
    ``diverged`` ``(P, start, chain)`` (a chain whose step sizes made it blow up: its draws are
    ``NaN``), the step sizes ``eps_G``, ``eps_W``, and per ``(P, start)`` the split R-hat and
    effective sample size of every observable, ``rhat_<name>`` and ``ess_<name>``, over the
    chains that did not diverge (:mod:`jaxattn.core.diagnostics`; ``to_arviz`` hands the draws
    to ArviZ).

    Args:
        config: the network, test set and starts; default ``CopyData()``.
        sgld_config: the sampler; default ``SGLDConfig()`` (its ``n_chains`` chains per point).
        **kw: the axes ``P`` (numbers of training sequences) and ``start`` (``"uniform"`` and/or
            ``"copy"``), a value or a list each (default :data:`SAMPLE_GRID`); and the options of :func:`jaxattn.engine.run` (``progress``, ``devices``, ``block``, ``group``, ``chunk_size``, ``memory_budget``).

    Returns:
        ``xr.Dataset`` with dimensions ``(P, start, chain, draw)`` and the diagnostics above.
    """
    from jaxattn.core.diagnostics import add_diagnostics

    config = CopySGLDConfig.of(config or CopyData(), sgld_config or SGLDConfig()).validate()
    axes = {**SAMPLE_GRID, "chain": range(config.n_chains), **kw}
    ds = engine.run(COPY_SGLD, config, fixed={"data_seed": config.data_seed}, **axes)
    return add_diagnostics(ds, SAMPLE_OBSERVABLES)


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
