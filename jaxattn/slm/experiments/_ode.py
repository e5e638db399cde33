"""The order-parameter ODEs and their finite-``D`` SDE on the engine: the ``slm_ode`` and
``slm_sde`` experiments over ``seed x H x L x eta x signal x noise``, each seed from the initial
order parameters of online SGD's run of that seed, and :func:`integrate`.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr

from jaxattn import engine
from jaxattn.core import keys
from jaxattn.core.attention import prefix_mask
from jaxattn.engine import Experiment, Layout, over_groups, stream_values
from jaxattn.slm import network
from jaxattn.slm import ode as slm_ode
from jaxattn.slm import sde as slm_sde
from jaxattn.slm._config import SLMODEConfig, SLMSDEConfig
from jaxattn.slm.experiments._common import (
    HYPER,
    ODE_AXES,
    directions_and_test_key,
    directions_bytes,
    head_layout,
    masked_heads,
    point_keys,
)
from jaxattn.slm.risk import make_bank


class ODEStatic(NamedTuple):
    """The static part of an order-parameter ODE grid (:class:`OrderParameterODE`).

    Attributes:
        arch: activation and head aggregation.
        H_max: number of heads the grid is padded to.
        L_max: sequence length the grid is padded to.
        D: embedding dimension of the initial keys.
        F: number of latent directions.
        sigma0: scale of the initial keys.
        batch_size: samples per SGD step (the ODE runs at ``eta / batch_size``).
        times: the recording times.
        rtol: relative tolerance of the solver.
        atol: absolute tolerance of the solver.
        max_steps: solver steps per interval before a solve counts as failed.
        chunk: draws per pass of the right-hand side (``None``: the whole bank).
        bias_lr: the biases' step relative to ``eta / D``.
        dt: Euler-Maruyama step of the SDE (:class:`OrderParameterSDE`; unused by the ODEs).
        sde_steps: static bound on the SDE's steps per interval.
        brownian_seed: seed of the SDE's Brownian paths.
    """

    arch: network.Arch
    H_max: int
    L_max: int
    D: int
    F: int
    sigma0: float
    batch_size: int
    times: tuple[float, ...]
    rtol: float
    atol: float
    max_steps: int
    chunk: int | None
    bias_lr: float = 1.0
    # the SDE's (OrderParameterSDE): Euler-Maruyama step, static bound on its steps per interval,
    # seed of the Brownian paths
    dt: float = 0.0
    sde_steps: int = 0
    brownian_seed: int = 0


class OrderParameterODE(Experiment):
    """The order-parameter ODEs of online SGD (Spec A, section 3) in float64 (float32 with
    ``precision = "float32"``, ``docs/theory/single_location.md``, section 9), each point started
    from the initial ``(M, Q, b)`` of the online-SGD run of the same seed (its keys drawn at
    dimension ``D``): ``M``, ``Q``, ``b`` and the risk at the recording times, and whether the
    solve failed (``diverged``). Each segment integrates one interval between recording times.

    Attributes:
        name: ``"slm_ode"``, the name it is registered under.
        doc: one line describing it.
        config_type: :class:`~jaxattn.slm._config.SLMODEConfig`.
        axes: the grid axes ``seed``, ``H``, ``L``, ``eta``, ``signal``, ``noise``.
        x64: ``True``: traced and run in float64.
        block: default streams per block.
        group: default members per group.
    """

    name = "slm_ode"
    doc = "single-location model, order-parameter ODEs (jaxattn.slm.integrate)"
    config_type = SLMODEConfig
    axes = ODE_AXES
    x64 = True
    block = 2
    group = 1  # nothing is drawn per step: members share only their start

    def shared_axes(self, config) -> frozenset[str]:
        return HYPER | {"noise"}

    def fields(self):
        # the theory computes at full precision whatever the config says: the field is that of
        # the online-SGD runs the ODEs describe (slm compare), not one a sweep of them may set
        return tuple(f for f in super().fields() if f != "matmul_precision")

    def setup_bytes(self, config, values) -> int:
        return directions_bytes(config)

    def setup(self, config: SLMODEConfig, values):
        H_max, L_max = max(values["H"]), max(values["L"])
        with jax.enable_x64(True):  # the same draws at either precision: float32 is the float64 bank rounded
            bank = make_bank(
                config.prior,
                L_max,
                H_max,
                n=config.n_bank,
                key=jax.random.key(config.bank_seed),
                method=config.bank_method,
                dtype=jnp.float64,
            )
        bank = jax.tree_util.tree_map(lambda x: jnp.asarray(np.asarray(x), jnp.result_type(float)), bank)
        static = ODEStatic(
            network.Arch(config.activation, config.aggregation),
            H_max,
            L_max,
            config.D,
            config.F,
            float(config.sigma0),
            config.batch_size,
            tuple(float(t) for t in self._times(config)),
            float(config.rtol),
            float(config.atol),
            int(config.max_steps),
            slm_ode.default_chunk(),
            float(config.bias_lr),
        )
        return static, {"bank": bank, **self._start_inputs(config)}

    def _times(self, config: SLMODEConfig) -> np.ndarray:
        """The recording times: those of online SGD at ``D`` (whole steps), so that each seed's
        ODE and its SGD run are recorded at the same times."""
        return config.record_times()

    def _start_inputs(self, config: SLMODEConfig) -> dict:
        """The shared arrays :meth:`_start` reads: the latent directions of the SGD runs."""
        directions, _ = directions_and_test_key(config)
        return {"directions": directions}

    def params(self, static: ODEStatic, points):
        return {
            "init_key": point_keys(True, points["seed"], 0, 0, 0.0, 0.0)[0],
            **{k: np.asarray(points[k], jnp.result_type(float)) for k in ("eta", "signal", "noise")},
            **{k: np.asarray(points[k], np.int32) for k in ("H", "L")},
        }

    def _args(self, static: ODEStatic, q) -> slm_ode.ODEArgs:
        return slm_ode.ODEArgs(
            q["eta"] / static.batch_size,
            q["signal"],
            q["noise"],
            prefix_mask(q["H"], static.H_max),
            prefix_mask(q["L"], static.L_max),
            jnp.full_like(q["eta"], static.bias_lr),
        )

    def _record(self, static, shared, y, ok, q) -> dict:
        a = self._args(static, q)
        M, Q, b = masked_heads(y.M, y.Q, y.b, a.head_mask)
        return dict(M=M, Q=Q, b=b, risk=slm_ode.risk_at(y, a, shared["bank"], static.arch), ok=ok)

    def _start(self, static: ODEStatic, shared, p) -> slm_ode.OrderParams:
        """The ``(S, ...)`` start of each stream: the SGD run's own, its keys drawn at dimension
        ``D`` in float32 as online SGD draws them."""

        def y0(k):
            f = jnp.result_type(float)
            keys = network.init(k, static.H_max, static.D, static.sigma0).keys.astype(f)
            dirs = shared["directions"].astype(f)
            return slm_ode.OrderParams(keys @ dirs.T / static.D, keys @ keys.T / static.D, jnp.zeros(static.H_max, f))

        return jax.vmap(y0)(stream_values(p["init_key"]))

    def init(self, static: ODEStatic, shared, p, n_groups):
        start = self._start(static, shared, p)  # (S, ...): one start per stream
        T = len(static.times)

        def group(q):
            y = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x[:, None], q["eta"].shape + x.shape[1:]), start)
            rec = jax.eval_shape(jax.vmap(jax.vmap(lambda y, q: self._record(static, shared, y, True, q))), y, q)
            buf = {k: jnp.zeros(v.shape[:2] + (T,) + v.shape[2:], v.dtype) for k, v in rec.items() if k != "ok"}
            return y, jnp.ones(q["eta"].shape, bool), buf

        return over_groups(group, n_groups, p)

    def step(self, static: ODEStatic, shared, p, state, k, n_groups):
        ts = jnp.asarray(static.times)
        t0 = jnp.where(k == 0, 0.0, ts[jnp.maximum(k - 1, 0)])  # segment k: up to the k-th recording

        def one(y, ok, rec, q):
            y, ok1 = self._advance(static, shared, y, q, t0, ts[k])
            r = self._record(static, shared, y, ok & ok1, q)
            rec = {n: rec[n].at[k].set(r[n]) for n in rec}
            return y, r["ok"], rec

        return over_groups(lambda y, ok, rec, q: jax.vmap(jax.vmap(one))(y, ok, rec, q), n_groups, *state, p)

    def _advance(self, static: ODEStatic, shared, y, q, t0, t1):
        a = self._args(static, q)
        return slm_ode.advance(
            y, a, shared["bank"], t0, t1, static.arch, static.rtol, static.atol, static.max_steps, static.chunk
        )

    def finish(self, static, shared, p, state, n_groups):
        _, ok, rec = state
        return {**rec, "diverged": ~ok}

    def progress_units(self, static: ODEStatic):
        return np.diff(np.asarray(static.times), prepend=0.0), "t"

    def layout(self, static: ODEStatic) -> Layout:
        return head_layout(static.times, static.H_max, static.F, "risk")

    def bytes_per_point(self, static: ODEStatic) -> int:
        return 8 * len(static.times) * static.H_max * (static.F + static.H_max + 2) * 8

    def attrs(self, config, static) -> dict:
        return {"activation": config.activation, "D": config.D, "F": config.F}


SLM_ODE = OrderParameterODE()


class OrderParameterSDE(OrderParameterODE):
    """The finite-``D`` order-parameter SDE (:mod:`jaxattn.slm.sde`) in float64: the ODEs' drift
    plus the ``(Sigma / D)^{1/2} dW`` fluctuations of online SGD, each seed on its own Brownian
    path and started, as the ODEs are, from the online-SGD run's own ``(M, Q, b)``. The variables
    and dims are those of :data:`SLM_ODE`.

    Attributes:
        name: ``"slm_sde"``, the name it is registered under.
        doc: one line describing it.
        config_type: :class:`~jaxattn.slm._config.SLMSDEConfig`.
    """

    name = "slm_sde"
    doc = "single-location model, finite-D order-parameter SDE (jaxattn.slm.integrate with SLMSDEConfig)"
    config_type = SLMSDEConfig

    def setup(self, config: SLMSDEConfig, values):
        static, shared = super().setup(config, values)
        u = slm_sde.direction_draws(jax.random.fold_in(jax.random.key(config.bank_seed), 1), shared["bank"], config.F)
        dt = float(config.dt)
        static = static._replace(
            dt=dt, sde_steps=slm_sde.max_interval_steps(static.times, dt), brownian_seed=int(config.brownian_seed)
        )
        return static, {**shared, "u": u}

    def params(self, static: ODEStatic, points):
        brownian = keys.derive(static.brownian_seed, points["seed"])
        return {**super().params(static, points), "brownian_key": brownian}

    def _advance(self, static: ODEStatic, shared, y, q, t0, t1):
        return slm_sde.advance(
            y,
            self._args(static, q),
            shared["bank"],
            shared["u"],
            q["brownian_key"],
            t0,
            t1,
            static.times[-1],
            static.D,
            static.dt,
            static.arch,
            static.sde_steps,
            static.chunk,
        )


SLM_SDE = OrderParameterSDE()


class GivenStartODE(OrderParameterODE):
    """The order-parameter ODEs of :data:`SLM_ODE` from given starts: seed ``s`` starts from
    ``(M[s], Q[s], b[s])`` of ``start`` (its first ``H`` heads at a grid point with ``H`` heads),
    for a continuation (online SGD to some time, then the ODE), a start drawn from another law
    (:func:`~jaxattn.slm.ode.random_initial_conditions`), or a perturbation. With no SGD run to
    pair with, the recording times are the config's ``times`` as given (not rounded to SGD's
    steps at ``D``), and no directions are drawn. The starts enter as per-point inputs: one compile serves any starts
    of the same shape. :func:`integrate` builds it from its ``start`` argument.

    Args:
        start: the starts, ``M`` ``(n, H, F)``, ``Q`` ``(n, H, H)``, ``b`` ``(n, H)``.

    Attributes:
        name: ``"slm_ode_from"`` (not registered: its starts are arrays, not sweep-file values).
        doc: one line describing it.
    """

    name = "slm_ode_from"
    doc = "single-location model, order-parameter ODEs from given starts (jaxattn.slm.integrate(start=...))"

    def __init__(self, start: slm_ode.OrderParams):
        M, Q, b = (np.asarray(x, np.float64) for x in start)
        n, H, F = M.shape if M.ndim == 3 else (0, 0, 0)
        if M.ndim != 3 or Q.shape != (n, H, H) or b.shape != (n, H):
            raise ValueError(
                f"start must hold M (n, H, F), Q (n, H, H) and b (n, H), got shapes {M.shape}, {Q.shape}, {b.shape}"
            )
        self.start: tuple[np.ndarray, np.ndarray, np.ndarray] = (M, Q, b)  # float64, on the host

    # the starts are inputs, not part of the program: instances share their compiled programs
    def __eq__(self, other) -> bool:
        return type(other) is type(self)

    def __hash__(self) -> int:
        return hash(type(self))

    def setup(self, config: SLMODEConfig, values):
        n, H, F = self.start[0].shape
        if F != config.F:
            raise ValueError(f"start has F = {F} directions, the prior has F = {config.F}")
        if max(values["H"]) > H:
            raise ValueError(f"H must be at most the start's {H} heads, got H = {max(values['H'])}")
        if min(values["seed"]) < 0 or max(values["seed"]) >= n:
            raise ValueError(f"seed must index the {n} starts (0 to {n - 1}), got {sorted(values['seed'])}")
        return super().setup(config, values)

    def params(self, static: ODEStatic, points):
        s, f = np.asarray(points["seed"]), jnp.result_type(float)
        h = static.H_max  # a grid's start keeps its first H_max heads
        M, Q, b = (jnp.asarray(np.asarray(x, f)[s]) for x in self.start)
        return {**super().params(static, points), "start": slm_ode.OrderParams(M[:, :h], Q[:, :h, :h], b[:, :h])}

    def _times(self, config: SLMODEConfig) -> np.ndarray:
        return config.record_times() if config.times is None else np.unique(np.asarray(config.times, float))

    def _start_inputs(self, config: SLMODEConfig) -> dict:
        return {}

    def _start(self, static: ODEStatic, shared, p) -> slm_ode.OrderParams:
        return stream_values(p["start"])


INTEGRATE_GRID = {a.name: a.default for a in ODE_AXES}
"""``INTEGRATE_GRID`` is the grid :func:`integrate` runs unless told otherwise: one point, each axis at its default."""


def integrate(config: SLMODEConfig | None = None, start: slm_ode.OrderParams | None = None, **kw: Any) -> xr.Dataset:
    """The order-parameter ODEs over the grid ``seed x H x L x eta x signal x noise`` (float64):
    a Dataset with dimensions ``(seed, H, L, eta, signal, noise, time, head, ...)`` holding ``M``,
    ``Q``, ``b``, ``risk`` and ``diverged`` (a failed solve). Each seed starts from the initial
    order parameters of :func:`~jaxattn.slm.experiments._sgd.train`'s run of that seed, so theory
    and simulation are paired, or from ``start[seed]``. An
    :class:`~jaxattn.slm._config.SLMSDEConfig` integrates the SDE.

    Args:
        config: the fixed parameters (default ``SLMODEConfig()``); a plain
            :class:`~jaxattn.slm._config.SLMConfig` gets the ODE fields' defaults.
        start: given starts (:class:`GivenStartODE`): seed ``s`` starts from ``M[s]``, ``Q[s]``,
            ``b[s]``; ``None``: each seed from its SGD run's start. The ODEs only.
        **kw: the axes of :func:`~jaxattn.slm.experiments._sgd.train` and ``noise`` (``1``: online
            SGD, with the ``eta^2`` noise term; ``0``: gradient flow), a value or a list each
            (default :data:`INTEGRATE_GRID`); and the options of :func:`jaxattn.engine.run` (``progress``, ``devices``, ``block``, ``group``, ``chunk_size``, ``memory_budget``).

    Returns:
        An ``xarray.Dataset`` with ``M``, ``Q``, ``b``, ``risk`` and ``diverged``.
    """
    if config is not None and not isinstance(config, SLMODEConfig):
        import dataclasses

        config = SLMODEConfig(**{f.name: getattr(config, f.name) for f in dataclasses.fields(config)})
    if start is not None and isinstance(config, SLMSDEConfig):
        raise ValueError("start is for the ODEs: the SDE starts from each seed's SGD run")
    experiment = SLM_SDE if isinstance(config, SLMSDEConfig) else SLM_ODE if start is None else GivenStartODE(start)
    return engine.run(experiment, config or SLMODEConfig(), **{**INTEGRATE_GRID, **kw})
