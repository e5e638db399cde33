"""What the engine runs for the single-location model: grids of online-SGD runs and of the
order-parameter ODEs, and the Python API over them (:func:`train`, :func:`integrate`).

Both take an :class:`~jaxattn.slm.config.SLMConfig` and the axes ``seed x H x L x eta x signal``
(the ODEs also ``noise``). ``H`` and ``L`` are padded to their maxima and masked; with
``share_data`` (the default) the points of one seed share one data stream: the same tokens,
drawn once per step for all of them (common random numbers: paired comparisons across ``H``,
``L``, ``eta``, ``signal`` and, between runs, activations). A point's keys come from its own
values (:func:`point_keys`), never from its place in the grid.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr
from jaxtyping import Array, Float, PRNGKeyArray

from jaxattn import engine
from jaxattn.core.attention import prefix_mask
from jaxattn.engine import Experiment, Grid, Layout, float_axis, int_axis, over_groups, stream_values
from jaxattn.slm import network as mh
from jaxattn.slm import ode as slm_ode
from jaxattn.slm import priors, task
from jaxattn.slm import sde as slm_sde
from jaxattn.slm import sgd as osgd
from jaxattn.slm.config import SLMConfig, SLMODEConfig, SLMSDEConfig
from jaxattn.slm.risk import make_bank

GRID_AXES = ("seed", "H", "L", "eta", "signal")
HYPER = frozenset({"H", "L", "eta", "signal"})

AXES = (
    int_axis("seed", 0, 0, help="Seed of the initial keys and of the data stream."),
    int_axis("H", 2, 1, shared=True, help="Heads."),
    int_axis("L", 4, 2, shared=True, help="Sequence length."),
    float_axis("eta", 1.0, shared=True, help="Learning rate."),
    float_axis("signal", 1.0, allow_zero=True, shared=True, help="Scale of theta."),
)


def _noise(v):
    if isinstance(v, str) or float(v) not in (0.0, 1.0):
        raise ValueError(f"noise must be 0 or 1, got {v!r}")
    return float(v)


ODE_AXES = AXES + (
    engine.Axis(
        "noise", "float", 1.0, _noise, shared=True, help="1: online SGD (the eta^2 noise term), 0: gradient flow."
    ),
)


def _bits(x: float) -> int:
    return int(np.asarray(x, np.float32).view(np.uint32))


def point_keys(
    share_data: bool, seed: int, H: int, L: int, eta: float, signal: float
) -> tuple[PRNGKeyArray, PRNGKeyArray]:
    """The ``(init_key, data_key)`` of one run, from its own values only (never its position in a
    grid, so a run's numbers do not depend on the grid around it). With ``share_data`` the data
    key depends on the seed alone: common random numbers across the other axes.

    Args:
        share_data: whether the data key depends on the seed alone.
        seed: the run's seed.
        H: number of heads.
        L: sequence length.
        eta: learning rate (its float32 bits enter the data key without ``share_data``).
        signal: signal strength (likewise).

    Returns:
        ``(init_key, data_key)``, two PRNG keys.
    """
    base = jax.random.key(seed)
    dk = jax.random.fold_in(base, 1)
    if not share_data:
        for v in (H, L, _bits(eta), _bits(signal)):
            dk = jax.random.fold_in(dk, v)
    return jax.random.fold_in(base, 0), dk


def directions_and_test_key(config: SLMConfig) -> tuple[Float[Array, "F D"], PRNGKeyArray]:
    """The latent directions and the test-set key (both from ``directions_seed``).

    Args:
        config: the grid's configuration (``directions_seed``, ``D``, ``F``).

    Returns:
        ``(directions, test_key)``: the directions ``s_f`` of shape ``(F, D)``
            (:func:`jaxattn.slm.task.latent_directions`) and a PRNG key.
    """
    dkey = jax.random.key(config.directions_seed)
    return task.latent_directions(jax.random.fold_in(dkey, 0), config.D, config.F), jax.random.fold_in(dkey, 1)


def _head_layout(times, H: int, F: int, last: str) -> Layout:
    return Layout(
        dims=dict(
            M=("time", "head", "direction"),
            Q=("time", "head", "head_"),
            b=("time", "head"),
            **{last: ("time",)},
            diverged=(),
        ),
        coords=dict(time=np.asarray(times), head=np.arange(H), head_=np.arange(H), direction=np.arange(F)),
        long_names={"error": "test error |y - y_hat|^2 / D", "risk": "R(M, Q, b) along the ODE"},
    )


def _masked(M, Q, b, hm, bad: bool | Array = False):
    """``NaN`` on padded heads (and everywhere once ``bad``)."""
    return (
        jnp.where(bad | ~hm[..., None], jnp.nan, M),
        jnp.where(bad | ~(hm[..., None] & hm[..., None, :]), jnp.nan, Q),
        jnp.where(bad | ~hm, jnp.nan, b),
    )


# --- online SGD ----------------------------------------------------------------------------------


class SGDStatic(NamedTuple):
    """The static part of an online-SGD grid (:class:`OnlineSGD`), fixed by its config and axes.

    Attributes:
        cfg: the SGD configuration (padded ``H_max``, ``L_max``).
        gaps: SGD steps before each recording (the first is 0: ``t = 0``).
        times: the recording times ``t = samples / D``.
        n_test: test samples per recorded error.
        F: number of latent directions.
        share_data: common random numbers across everything but the seed.
    """

    cfg: osgd.SGDConfig
    gaps: tuple[int, ...]  # SGD steps before each recording (the first is 0: t = 0)
    times: tuple[float, ...]
    n_test: int
    F: int
    share_data: bool


class OnlineSGD(Experiment):
    """Online SGD on the single-location model (Spec A, section 2): ``M``, ``Q``, ``b`` and the
    test error at the recording times, and whether the run diverged.

    Attributes:
        name: ``"slm_sgd"``, the name it is registered under.
        doc: one line describing it.
        config_type: :class:`~jaxattn.slm.config.SLMConfig`.
        axes: the grid axes ``seed``, ``H``, ``L``, ``eta``, ``signal``.
        block: default streams per block.
        group: default members per group.
    """

    name = "slm_sgd"
    doc = "single-location model, online SGD (jaxattn.train)"
    config_type = SLMConfig
    axes = AXES
    block = 2
    group = 1  # measured fastest on a CPU (benchmarks/README.md); raise both on a GPU

    def shared_axes(self, config: SLMConfig) -> frozenset[str]:
        return HYPER if config.share_data else frozenset()

    def setup(self, config: SLMConfig, values):
        cfg = osgd.SGDConfig(
            D=config.D,
            H_max=max(values["H"]),
            L_max=max(values["L"]),
            arch=mh.Arch(config.activation, config.aggregation),
            batch_size=config.batch_size,
            sigma0=float(config.sigma0),
            bias_lr=float(config.bias_lr),
        )
        steps = config.record_steps()
        directions, test_key = directions_and_test_key(config)
        shared = dict(directions=directions, prior=priors.astype(config.prior, jnp.float32), test_key=test_key)
        static = SGDStatic(
            cfg,
            tuple(int(g) for g in np.diff(steps, prepend=0)),
            tuple(float(t) for t in steps * config.batch_size / config.D),
            config.n_test,
            config.F,
            config.share_data,
        )
        return static, shared

    def params(self, static: SGDStatic, points) -> osgd.RunParams:
        keys = [point_keys(static.share_data, *(points[k][i] for k in GRID_AXES)) for i in range(len(points["seed"]))]
        return osgd.RunParams(
            init_key=jnp.stack([k[0] for k in keys]),
            data_key=jnp.stack([k[1] for k in keys]),
            eta=jnp.asarray(points["eta"], jnp.float32),
            signal=jnp.asarray(points["signal"], jnp.float32),
            H=jnp.asarray(points["H"], jnp.int32),
            L=jnp.asarray(points["L"], jnp.int32),
        )

    def init(self, static: SGDStatic, shared, p, n_groups):
        cfg = static.cfg
        states = over_groups(lambda rp: jax.vmap(jax.vmap(lambda r: osgd.init(cfg, r)))(rp), n_groups, p)
        lead = p.eta.shape + (len(static.gaps),)
        H = cfg.H_max
        rec = dict(
            M=jnp.zeros(lead + (H, static.F)),
            Q=jnp.zeros(lead + (H, H)),
            b=jnp.zeros(lead + (H,)),
            error=jnp.zeros(lead),
        )
        return states, rec

    def step(self, static: SGDStatic, shared, p, state, k, n_groups):
        cfg, dirs, prior = static.cfg, shared["directions"], shared["prior"]
        states, rec = state

        def sgd_step(_, st):
            # one batch per stream, drawn once and applied to every member of the stream
            sv = stream_values((p.data_key, st.step))
            batch = jax.vmap(lambda k, n: osgd.draw_batch(cfg, prior, k, n))(*sv)

            def group(s, rp):
                return jax.vmap(lambda b, s_, r_: jax.vmap(lambda a, c: osgd.update(cfg, dirs, a, c, b))(s_, r_))(
                    batch, s, rp
                )

            return over_groups(group, n_groups, st, p)

        states = jax.lax.fori_loop(0, jnp.asarray(static.gaps)[k], sgd_step, states)
        test = jax.vmap(lambda i: task.draw(jax.random.fold_in(shared["test_key"], i), prior, cfg.L_max, cfg.D))(
            jnp.arange(static.n_test)
        )

        def observe(st: osgd.SGDState, rp: osgd.RunParams):
            hm, pm = prefix_mask(rp.H, cfg.H_max), prefix_mask(rp.L, cfg.L_max)
            M, Q = mh.order_parameters(st.params, dirs)

            def err(d):
                s = task.assemble(d, dirs, rp.L, rp.signal)
                return mh.error(st.params, s.X, s.X[s.eps], cfg.arch, hm, pm)

            e = jnp.mean(jax.lax.map(err, test, batch_size=min(static.n_test, 256)))
            M, Q, b = _masked(M, Q, st.params.bias, hm, st.diverged)
            return dict(M=M, Q=Q, b=b, error=jnp.where(st.diverged, jnp.nan, e))

        obs = over_groups(lambda s, rp: jax.vmap(jax.vmap(observe))(s, rp), n_groups, states, p)
        rec = jax.tree_util.tree_map(lambda r, o: jax.lax.dynamic_update_index_in_dim(r, o, k, 3), rec, obs)
        return states, rec

    def finish(self, static, shared, p, state, n_groups):
        states, rec = state
        return {**rec, "diverged": states.diverged}

    def layout(self, static: SGDStatic) -> Layout:
        return _head_layout(static.times, static.cfg.H_max, static.F, "error")

    def bytes_per_point(self, static: SGDStatic) -> int:
        c = static.cfg
        per_step = 4 * (c.H_max * c.D * 3 + c.L_max * c.D * 2 * c.batch_size)
        records = 4 * len(static.gaps) * (c.H_max * (static.F + c.H_max + 1) + 1)
        return per_step + records

    def progress_units(self, static: SGDStatic):
        return np.asarray(static.gaps) * static.cfg.batch_size / static.cfg.D, "t"

    def attrs(self, config: SLMConfig, static) -> dict:
        return {"activation": config.activation, "D": config.D, "F": config.F}


SLM_SGD = OnlineSGD()


# --- the order-parameter ODEs --------------------------------------------------------------------


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

    arch: mh.Arch
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
        config_type: :class:`~jaxattn.slm.config.SLMODEConfig`.
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
        directions, _ = directions_and_test_key(config)
        static = ODEStatic(
            mh.Arch(config.activation, config.aggregation),
            H_max,
            L_max,
            config.D,
            config.F,
            float(config.sigma0),
            config.batch_size,
            tuple(float(t) for t in config.record_times()),
            float(config.rtol),
            float(config.atol),
            int(config.max_steps),
            slm_ode.default_chunk(),
            float(config.bias_lr),
        )
        return static, {"bank": bank, "directions": directions}

    def params(self, static: ODEStatic, points):
        return {
            "init_key": jnp.stack([point_keys(True, s, 0, 0, 0.0, 0.0)[0] for s in points["seed"]]),
            **{k: jnp.asarray(points[k], jnp.result_type(float)) for k in ("eta", "signal", "noise")},
            **{k: jnp.asarray(points[k], jnp.int32) for k in ("H", "L")},
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
        M, Q, b = _masked(y.M, y.Q, y.b, a.head_mask)
        return dict(M=M, Q=Q, b=b, risk=slm_ode.risk_at(y, a, shared["bank"], static.arch), ok=ok)

    def init(self, static: ODEStatic, shared, p, n_groups):
        def y0(k):  # the SGD run's own start: keys at dimension D, in float32 as online SGD draws them
            f = jnp.result_type(float)
            keys = mh.init(k, static.H_max, static.D, static.sigma0).keys.astype(f)
            dirs = shared["directions"].astype(f)
            return slm_ode.OrderParams(keys @ dirs.T / static.D, keys @ keys.T / static.D, jnp.zeros(static.H_max, f))

        start = jax.vmap(y0)(stream_values(p["init_key"]))  # (S, ...): one start per stream
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
        return _head_layout(static.times, static.H_max, static.F, "risk")

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
        config_type: :class:`~jaxattn.slm.config.SLMSDEConfig`.
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
        base = jax.random.key(static.brownian_seed)
        keys = jnp.stack([jax.random.fold_in(base, int(s)) for s in points["seed"]])
        return {**super().params(static, points), "brownian_key": keys}

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


# --- the Python API ------------------------------------------------------------------------------


def _grid(experiment: Experiment, **values) -> Grid:
    return Grid.from_values(experiment.axis, values)


def train(
    config: SLMConfig | None = None,
    *,
    seed: Sequence[int] | int = 0,
    H: Sequence[int] | int = 2,
    L: Sequence[int] | int = 4,
    eta: Sequence[float] | float = 1.0,
    signal: Sequence[float] | float = 1.0,
    progress: bool = False,
    devices=None,
    block: int | None = None,
    group: int | None = None,
) -> xr.Dataset:
    """Train the grid ``seed x H x L x eta x signal`` by online SGD; return the recorded
    observables as a Dataset with dimensions ``(seed, H, L, eta, signal, time, head, direction)``.

    Variables: ``M[..., time, head, direction]``, ``Q[..., time, head, head_]``,
    ``b[..., time, head]`` (``NaN`` on padded heads), ``error[..., time]`` (test error
    ``|y - y_hat|^2 / D``) and ``diverged[...]`` (a run whose loss became non-finite: its
    observables are ``NaN`` from then on; the rest of the grid is unaffected).

    The blocks of data streams are sharded over ``devices`` (default: all local devices); the
    numbers depend on nothing but each point's values and the block shape (``block`` streams of
    ``group`` members; :mod:`jaxattn.engine`).

    Args:
        config: the fixed parameters (default ``SLMConfig()``).
        seed: seed(s) of the initial keys and the data stream.
        H: number(s) of heads.
        L: sequence length(s).
        eta: learning rate(s).
        signal: scale(s) of the latent, ``theta -> signal * theta``.
        progress: show a progress bar.
        devices (Sequence[jax.Device] | None): devices to shard the blocks over (default: all
            local devices).
        block: streams per block (default: the experiment's).
        group: members per group (default: the experiment's).

    Returns:
        An ``xarray.Dataset`` with ``M``, ``Q``, ``b``, ``error`` and ``diverged`` as above.
    """
    grid = _grid(SLM_SGD, seed=seed, H=H, L=L, eta=eta, signal=signal)
    return engine.run(
        SLM_SGD, config or SLMConfig(), grid, devices=devices, block=block, group=group, progress=progress
    )


def integrate(
    config: SLMODEConfig | None = None,
    *,
    seed: Sequence[int] | int = 0,
    H: Sequence[int] | int = 2,
    L: Sequence[int] | int = 4,
    eta: Sequence[float] | float = 1.0,
    signal: Sequence[float] | float = 1.0,
    noise: Sequence[float] | float = 1.0,
    progress: bool = False,
    devices=None,
    block: int | None = None,
    group: int | None = None,
) -> xr.Dataset:
    """The order-parameter ODEs over the grid ``seed x H x L x eta x signal x noise`` (float64):
    a Dataset with dimensions ``(seed, H, L, eta, signal, noise, time, head, ...)`` holding ``M``,
    ``Q``, ``b``, ``risk`` and ``diverged`` (a failed solve). Each seed starts from the initial
    order parameters of :func:`train`'s run of that seed, so theory and simulation are paired.

    Args:
        config: the fixed parameters (default ``SLMODEConfig()``); a plain
            :class:`~jaxattn.slm.config.SLMConfig` gets the ODE fields' defaults.
        seed: seed(s), pairing each ODE with the online-SGD run of that seed.
        H: number(s) of heads.
        L: sequence length(s).
        eta: learning rate(s).
        signal: scale(s) of the latent, ``theta -> signal * theta``.
        noise: ``1`` (online SGD, with the ``eta^2`` noise term) and/or ``0`` (gradient flow).
        progress: show a progress bar.
        devices (Sequence[jax.Device] | None): devices to shard the blocks over (default: all
            local devices).
        block: streams per block (default: the experiment's).
        group: members per group (default: the experiment's).

    Returns:
        An ``xarray.Dataset`` with ``M``, ``Q``, ``b``, ``risk`` and ``diverged``.
    """
    if config is not None and not isinstance(config, SLMODEConfig):
        import dataclasses

        config = SLMODEConfig(**{f.name: getattr(config, f.name) for f in dataclasses.fields(config)})
    experiment = SLM_SDE if isinstance(config, SLMSDEConfig) else SLM_ODE
    grid = _grid(experiment, seed=seed, H=H, L=L, eta=eta, signal=signal, noise=noise)
    return engine.run(
        experiment, config or SLMODEConfig(), grid, devices=devices, block=block, group=group, progress=progress
    )


def measure_error(
    predict_fn: Callable[[Float[Array, "L D"]], Float[Array, " D"]],
    directions: Float[Array, "F D"],
    prior: priors.Prior,
    L: int,
    *,
    n: int = 10_000,
    key: PRNGKeyArray | None = None,
    chunk: int = 2000,
) -> tuple[float, float]:
    """Mean and standard error of ``|y - predict_fn(X)|^2 / D`` over ``n`` fresh samples of the
    single-location model (``predict_fn`` maps one ``X`` of shape ``(L, D)`` to ``y_hat``;
    Spec A, section 1).

    Args:
        predict_fn: maps the tokens ``X`` ``(L, D)`` of one sample to a prediction ``(D,)``.
        directions: the latent directions ``s_f``, shape ``(F, D)``.
        prior: the latent prior ``P_theta``.
        L: sequence length.
        n: number of samples, rounded up to a multiple of ``chunk``.
        key: PRNG key of the samples (default ``jax.random.key(12345)``).
        chunk: samples per compiled pass.

    Returns:
        ``(mean, standard_error)`` of the per-sample error, two floats.
    """
    key = jax.random.key(12345) if key is None else key
    D = directions.shape[-1]

    @jax.jit
    def errs(k):
        s = jax.vmap(lambda kk: task.sample(kk, directions, prior, L))(jax.random.split(k, chunk))
        r = jax.vmap(lambda x, e: x[e] - predict_fn(x))(s.X, s.eps)
        return jnp.sum(r * r, axis=-1) / D

    e = np.concatenate([np.asarray(errs(jax.random.fold_in(key, i))) for i in range(-(-n // chunk))])
    return float(e.mean()), float(e.std() / np.sqrt(e.size))
