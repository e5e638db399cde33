"""Grids of MAP runs (full-batch Adam) on the copy task, as an ``xarray.Dataset``.

:func:`train` runs the outer product ``P x seed x init`` (Spec B, section 4) as one compiled
computation: the data sets are padded to the largest ``P`` with per-sample masks (sequence ``i``
of seed ``s`` is the same for every ``P``, so each grid point trains on exactly the data it would
get alone), the seeds and the two initialisations (``"random"``: ``G_0 ~ N(0, sigma0^2)``;
``"copy"``: ``G_0 = c S``) are batch axes. :func:`global_minimum` keeps, per ``P``, the run with
the lowest ``U`` and counts the runs in each basin: near a first-order transition random
initialisations stay in the uniform basin beyond ``P*`` (hysteresis), so the unfiltered average
would place the transition wrongly.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time as _time
from dataclasses import dataclass
from functools import partial
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax
import xarray as xr

from jaxattn import _checks
from jaxattn.attention import prefix_mask
from jaxattn.devices import shard_streams
from jaxattn.models import copy as cm
from jaxattn.runners import full_batch as fbr
from jaxattn.tasks import copy as task

INITS = ("random", "copy")
GRID_AXES = ("P", "seed", "init")
OBSERVABLES = ("prev_weight", "a1", "aG", "U", "train_error", "test_error", "grad_norm")
TRACE_COUNT = {"setup": 0, "advance": 0, "observe": 0, "sample": 0}


@dataclass(frozen=True)
class CopyConfig:
    """Everything about a grid of copy-task runs except its axes.

    Attributes:
        L, V, attention, linear_norm, cyclic, beta, omega, sigma_G2: the network and loss
            (:class:`jaxattn.models.copy.CopyArch`).
        lr: Adam learning rate (cosine-decayed to ``lr * final_lr_fraction``).
        n_steps: Adam steps.
        sigma0: scale of the random initial logits.
        copy_strength: ``c`` of the copy-biased start ``G_0 = c S`` (default: ``ln L + 2`` for
            softmax, previous-token weight near 0.8 at ``L = 32``; ``A = S`` for linear).
        grad_tol: a run counts as converged when ``|grad U| <= grad_tol * sqrt(1 + n L)``, the
            gradient scale of the data term (``n`` samples).
        basin_threshold: previous-token weight above which a run is in the copy basin (default
            ``(ln L)^{1/4} / L^{3/4}``, the geometric middle of the uniform weight ``1/L`` and the
            softmax copy minimum ``~ sqrt(ln L / L)`` of Spec B, section 3; 0.10 at ``L = 32``).
        n_test: fresh test sequences (drawn from ``test_seed``, shared by the grid).
    """

    L: int = 32
    V: int = 4
    attention: str = "softmax"
    linear_norm: str = "L"
    cyclic: bool = True
    beta: float = 1.0
    omega: float = 1.0
    sigma_G2: float = 1.0
    lr: float = 0.05
    n_steps: int = 2000
    final_lr_fraction: float = 0.01
    sigma0: float = 0.1
    copy_strength: float | None = None
    grad_tol: float = 1e-4
    basin_threshold: float | None = None
    n_test: int = 2000
    test_seed: int = 12345

    @property
    def arch(self) -> cm.CopyArch:
        return cm.CopyArch(self.L, self.V, self.attention, self.linear_norm, self.cyclic,
                           float(self.beta), float(self.omega), float(self.sigma_G2))

    @property
    def c_copy(self) -> float:
        if self.copy_strength is not None:
            return float(self.copy_strength)
        if self.attention == "softmax":
            return math.log(self.L) + 2.0
        return float(self.L) if self.linear_norm == "L" else 1.0

    @property
    def threshold(self) -> float:
        if self.basin_threshold is not None:
            return float(self.basin_threshold)
        return math.log(self.L) ** 0.25 / self.L**0.75

    def validate(self) -> "CopyConfig":
        self.arch.validate()
        _checks.positive("lr", self.lr)
        _checks.integer("n_steps", self.n_steps, 1)
        _checks.positive("final_lr_fraction", self.final_lr_fraction)
        _checks.positive("sigma0", self.sigma0, allow_zero=True)
        if self.copy_strength is not None:
            _checks.as_array("copy_strength", self.copy_strength, ndim=0)
        _checks.positive("grad_tol", self.grad_tol)
        if self.basin_threshold is not None:
            _checks.positive("basin_threshold", self.basin_threshold)
        _checks.integer("n_test", self.n_test, 1)
        _checks.integer("test_seed", self.test_seed, 0)
        return self

    def to_attrs(self) -> dict:
        return {"config": json.dumps(dataclasses.asdict(self)), "attention": self.attention,
                "L": self.L, "V": self.V}


def _grid(P, seed, init) -> dict[str, list]:
    axes = {"P": _checks.integer_list("P", P, 1), "seed": _checks.integer_list("seed", seed, 0)}
    inits = [init] if isinstance(init, str) else list(init)
    if not inits or any(i not in INITS for i in inits):
        raise ValueError(f"init must be a non-empty list of {INITS}, got {init!r}")
    axes["init"] = inits
    for name, vals in axes.items():
        if len(set(vals)) != len(vals):
            raise ValueError(f"{name} has repeated values: {vals}")
    return axes


def data_key(seed: int):
    return jax.random.fold_in(jax.random.key(seed), 1)


def init_key(seed: int):
    return jax.random.fold_in(jax.random.key(seed), 0)


# --- the compiled pieces: one trace each per (config, grid shape) ------------------------------

@partial(jax.jit, static_argnames=("arch", "n_max", "n_test", "opt"))
def setup(arch: cm.CopyArch, Ps, dkeys, test_key, n_max: int, n_test: int, opt=None, init_args=None):
    """Training statistics ``(P, seed)`` (data padded to ``n_max`` and masked), test statistics
    and, given ``opt = (n_steps, final, sigma0)`` and ``init_args = (init keys, is_copy, c, lr)``,
    the initial states ``(seed, init)`` (one compiled program for all of it)."""
    TRACE_COUNT["setup"] += 1

    # one draw for the training seeds and the test set (one random-number program to compile);
    # sequence i of a key does not depend on how many are drawn, so the slices are exact
    n_all = max(n_max, n_test)
    keys = jnp.concatenate([dkeys, test_key[None]])
    X_all = task.one_hot(jax.vmap(lambda k: task.tokens(k, n_all, arch.L, arch.V))(keys), arch.V)

    def per_seed(X):
        return jax.vmap(lambda p: cm.stats(X, prefix_mask(p, n_max)))(Ps)  # (P,) stats

    train = jax.vmap(per_seed, out_axes=1)(X_all[:-1, :n_max])  # (P, seed)
    states = None if opt is None else init_states(arch, *init_args, *opt)
    return train, cm.stats(X_all[-1, :n_test]), states


def _optimizer(arch: cm.CopyArch, n_steps: int, final: float) -> fbr.FullBatch:
    return fbr.full_batch(lambda p, st: cm.loss(p, st, arch), optax.adam, n_steps=n_steps,
                          final_lr_fraction=final)


def init_states(arch, ikeys, is_copy, c_copy, lr, n_steps: int, final: float, sigma0: float):
    """Initial states of the grid ``(seed, init)``; ``ikeys`` is ``(seed,)``, ``is_copy``
    ``(init,)``; every ``P`` starts from the same parameters (paired comparisons)."""
    fb = _optimizer(arch, n_steps, final)

    def one(k, c):
        return fb.init(cm.init(k, arch, sigma0, c_copy, c), lr)

    return jax.vmap(lambda k: jax.vmap(lambda c: one(k, c))(is_copy))(ikeys)


@partial(jax.jit, static_argnames=("arch", "n_steps", "final"), donate_argnames=("states",))
def advance(arch, states, train_stats, n, n_steps: int, final: float):
    """``n`` Adam steps of every run of the ``(P, seed, init)`` grid (``n`` traced)."""
    TRACE_COUNT["advance"] += 1
    fb = _optimizer(arch, n_steps, final)
    inner = jax.vmap(fb.step, in_axes=(0, None))  # init axis shares the data
    grid_step = jax.vmap(jax.vmap(inner))
    return jax.lax.fori_loop(0, n, lambda _, s: grid_step(s, train_stats), states)


@partial(jax.jit, static_argnames=("arch",))
def observe(arch, states, train_stats, test_stats):
    """Observables of every run at its current parameters (``NaN`` where it diverged)."""
    TRACE_COUNT["observe"] += 1
    one = partial(observe_one, arch, test_stats=test_stats)
    return jax.vmap(jax.vmap(jax.vmap(one, in_axes=(0, None))))(states, train_stats)


def observe_one(arch, st: fbr.FullBatchState, data: cm.CopyStats, test_stats: cm.CopyStats) -> dict:
    """The observables of one run: order parameters, ``U``, train and test error, the gradient
    norm (``NaN`` if the run diverged) and ``diverged``."""
    p = st.params
    U, g = jax.value_and_grad(cm.loss)(p, data, arch)
    out = dict(cm.order_parameters(p.G, arch), U=U, train_error=cm.error(p, data, arch),
               test_error=cm.error(p, test_stats, arch), grad_norm=optax.tree.norm(g))
    out = {k: jnp.where(st.diverged, jnp.nan, v) for k, v in out.items()}
    out["diverged"] = st.diverged
    return out


# --- the grid ----------------------------------------------------------------------------------

def train(
    config: CopyConfig | None = None,
    *,
    P: Sequence[int] | int = (200, 700),
    seed: Sequence[int] | int = (0, 1),
    init: Sequence[str] | str = INITS,
    progress: bool = False,
    n_segments: int = 20,
    devices=None,
) -> xr.Dataset:
    """Train the grid ``P x seed x init`` by full-batch Adam on ``U``; return a Dataset with
    dimensions ``(P, seed, init)`` holding ``prev_weight``, ``a1``, ``aG``, ``U``,
    ``train_error``, ``test_error``, ``grad_norm``, ``converged``, ``copy_basin`` and
    ``diverged``. The ``P`` axis is sharded over ``devices`` (default: all local devices)."""
    config = (config or CopyConfig()).validate()
    axes = _grid(P, seed, init)
    arch = config.arch
    n_max = max(axes["P"])
    Ps = jnp.asarray(axes["P"], jnp.int32)
    is_copy = jnp.asarray([i == "copy" for i in axes["init"]])
    init_args = (jnp.stack([init_key(s) for s in axes["seed"]]), is_copy, jnp.float32(config.c_copy),
                 jnp.float32(config.lr))
    opt = (config.n_steps, float(config.final_lr_fraction), float(config.sigma0))
    train_stats, test_stats, st0 = setup(
        arch, Ps, jnp.stack([data_key(s) for s in axes["seed"]]),
        jax.random.key(config.test_seed), n_max, config.n_test, opt, init_args)
    states = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (len(Ps),) + x.shape), st0)
    states, train_stats = shard_streams((states, train_stats), devices)

    from tqdm.auto import tqdm

    t0 = _time.perf_counter()
    bounds = np.unique(np.linspace(0, config.n_steps, min(n_segments, config.n_steps) + 1).astype(int))
    with tqdm(total=config.n_steps, disable=not progress, desc="Adam", unit="step") as bar:
        for a, b in zip(bounds[:-1], bounds[1:]):
            states = advance(arch, states, train_stats, jnp.asarray(b - a), config.n_steps,
                             float(config.final_lr_fraction))
            jax.block_until_ready(states.step)
            bar.update(int(b - a))
    rec = jax.device_get(observe(arch, states, train_stats, test_stats))
    wall = _time.perf_counter() - t0
    return _to_dataset(config, axes, rec, wall)


def _to_dataset(config: CopyConfig, axes, rec, wall) -> xr.Dataset:
    dims = list(GRID_AXES)
    data = {k: (dims, np.asarray(rec[k], np.float64)) for k in OBSERVABLES}
    n = np.asarray(axes["P"], float)[:, None, None]
    scale = config.grad_tol * np.sqrt(1.0 + n * config.L)
    data["converged"] = (dims, (np.asarray(rec["grad_norm"]) <= scale) & ~np.asarray(rec["diverged"]))
    data["copy_basin"] = (dims, np.asarray(rec["prev_weight"]) > config.threshold)
    data["diverged"] = (dims, np.asarray(rec["diverged"]))
    ds = xr.Dataset(data, coords=dict(axes),
                    attrs={**config.to_attrs(), "wall_seconds": wall, "basin_threshold": config.threshold,
                           "jaxattn_version": _version()})
    ds["prev_weight"].attrs["long_name"] = "(1/L) sum_l A_{l,l-1}"
    ds["test_error"].attrs["long_name"] = "|f_l - y_l|^2 per position, fresh sequences"
    return ds


def _version() -> str:
    from jaxattn import __version__

    return __version__


def global_minimum(ds: xr.Dataset) -> xr.Dataset:
    """Per ``P``: the observables of the run with the lowest ``U`` (diverged runs excluded), its
    ``seed`` and ``init``, and per initialisation the number of runs ending in each basin
    (``n_copy``, ``n_uniform``). ``hysteresis`` marks the ``P`` where some run ended in the basin
    that is not the global minimum's: its start trapped it in a metastable state."""
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


# --- SGLD posterior sampling -------------------------------------------------------------------

STARTS = ("uniform", "copy")
SAMPLE_OBSERVABLES = ("prev_weight", "a1", "aG", "U", "train_error", "test_error")


@dataclass(frozen=True)
class SGLDConfig:
    """Unadjusted Langevin on ``exp(-N U)`` (Spec B, section 4).

    Attributes:
        N: inverse temperature of the posterior (``N = 1``: the plain Bayesian posterior).
        eps_G, eps_W: step sizes of the two blocks (default: ``step_fraction`` over the block's
            curvature scale, ``N (beta n / (L V) + 1 / sigma_G^2)`` and ``N (beta n / V + 1/omega)``).
        n_steps: steps after burn-in; a draw is kept every ``thin`` steps.
        n_chains: independent chains per ``(P, start)``, from ``G = 0, W = 0`` (``"uniform"``) or
            from ``G = c S, W = I`` (``"copy"``).
        data_seed: the data set (the same sequences as :func:`train`'s seed ``data_seed``).
    """

    N: float = 1.0
    eps_G: float | None = None
    eps_W: float | None = None
    step_fraction: float = 0.05
    n_steps: int = 4000
    burn_in: int = 2000
    thin: int = 20
    n_chains: int = 16
    data_seed: int = 0
    chain_seed: int = 0

    def validate(self) -> "SGLDConfig":
        _checks.positive("N", self.N)
        if self.eps_G is not None:
            _checks.positive("eps_G", self.eps_G)
        if self.eps_W is not None:
            _checks.positive("eps_W", self.eps_W)
        _checks.positive("step_fraction", self.step_fraction)
        _checks.integer("n_steps", self.n_steps, 1)
        _checks.integer("burn_in", self.burn_in, 0)
        _checks.integer("thin", self.thin, 1)
        if self.thin > self.n_steps:
            raise ValueError(f"thin must be <= n_steps, got thin={self.thin}, n_steps={self.n_steps}")
        _checks.integer("n_chains", self.n_chains, 1)
        _checks.integer("data_seed", self.data_seed, 0)
        _checks.integer("chain_seed", self.chain_seed, 0)
        return self

    def step_sizes(self, arch: cm.CopyArch, n) -> cm.CopyParams:
        """Per-block step sizes for ``n`` samples (arrays, so a ``P`` grid gets one each)."""
        n = np.asarray(n, float)
        eG = self.step_fraction / (self.N * (arch.beta * n / (arch.L * arch.V) + 1.0 / arch.sigma_G2))
        eW = self.step_fraction / (self.N * (arch.beta * n / arch.V + 1.0 / arch.omega))
        eG = np.full_like(n, self.eps_G) if self.eps_G is not None else eG
        eW = np.full_like(n, self.eps_W) if self.eps_W is not None else eW
        return cm.CopyParams(jnp.asarray(eG, jnp.float32), jnp.asarray(eW, jnp.float32))


def start_params(arch: cm.CopyArch, start: str, c_copy: float, dtype=jnp.float32) -> cm.CopyParams:
    """The uniform state ``G = 0, W = 0`` or the copy state ``G = c S, W = I``."""
    if start == "uniform":
        return cm.CopyParams(jnp.zeros((arch.L, arch.L), dtype), jnp.zeros((arch.V, arch.V), dtype))
    return cm.CopyParams(c_copy * task.shift_matrix(arch.L, arch.cyclic, dtype), jnp.eye(arch.V, dtype=dtype))


def _observe_draw(arch):
    def obs(p: cm.CopyParams, data):
        train_stats, test_stats = data
        return dict(cm.order_parameters(p.G, arch), U=cm.loss(p, train_stats, arch),
                    train_error=cm.error(p, train_stats, arch), test_error=cm.error(p, test_stats, arch))
    return obs


@partial(jax.jit, static_argnames=("arch", "N", "n_kept", "thin"))
def sample_grid(arch, N: float, keys, starts, train_stats, test_stats, eps, burn_in, n_kept: int, thin: int):
    """SGLD chains of the grid ``(P, start, chain)``: ``keys`` ``(chain,)``, ``starts`` a
    :class:`CopyParams` batched over ``start``, ``train_stats`` and ``eps`` batched over ``P``."""
    TRACE_COUNT["sample"] += 1
    from jaxattn.runners import sgld as sg

    kernel = sg.sgld(lambda p, d: cm.loss(p, d[0], arch), N)
    obs = _observe_draw(arch)

    def chain(key, p0, st, e):
        final, draws = sg.run_chain(kernel, obs, key, kernel.init(p0), (st, test_stats), e,
                                    burn_in, n_kept, thin)
        return draws, final.diverged

    per_start = jax.vmap(chain, in_axes=(0, None, None, None))  # chains
    per_P = jax.vmap(per_start, in_axes=(None, 0, None, None))  # starts
    return jax.vmap(per_P, in_axes=(None, None, 0, 0))(keys, starts, train_stats, eps)


def sample(
    config: CopyConfig | None = None,
    sgld_config: SGLDConfig | None = None,
    *,
    P: Sequence[int] | int = (200, 700),
    start: Sequence[str] | str = STARTS,
    progress: bool = False,
    devices=None,
) -> xr.Dataset:
    """SGLD posterior samples on one data set per ``P``: a Dataset with dimensions
    ``(P, start, chain, draw)`` holding the observables of every kept draw and ``diverged``
    ``(P, start, chain)`` (a chain whose step sizes made it blow up: its draws are ``NaN``).
    The chain axis is sharded over ``devices`` (default: all local devices; see
    :func:`jaxattn.devices.use_cpu_cores`)."""
    config = (config or CopyConfig()).validate()
    sc = (sgld_config or SGLDConfig()).validate()
    Ps_list = _checks.integer_list("P", P, 1)
    starts = [start] if isinstance(start, str) else list(start)
    if not starts or any(s not in STARTS for s in starts) or len(set(starts)) != len(starts):
        raise ValueError(f"start must be a non-empty list of distinct {STARTS}, got {start!r}")
    if len(set(Ps_list)) != len(Ps_list):
        raise ValueError(f"P has repeated values: {Ps_list}")
    arch = config.arch
    Ps = jnp.asarray(Ps_list, jnp.int32)
    train_stats, test_stats, _ = setup(arch, Ps, data_key(sc.data_seed)[None], jax.random.key(config.test_seed),
                                    max(Ps_list), config.n_test)
    train_stats = jax.tree_util.tree_map(lambda x: x[:, 0], train_stats)
    p0 = [start_params(arch, s, config.c_copy) for s in starts]
    p0 = jax.tree_util.tree_map(lambda *x: jnp.stack(x), *p0)
    keys = shard_streams(jax.random.split(jax.random.key(sc.chain_seed), sc.n_chains), devices)
    eps = sc.step_sizes(arch, Ps_list)
    n_kept = sc.n_steps // sc.thin
    from tqdm.auto import tqdm

    t0 = _time.perf_counter()
    with tqdm(total=1, disable=not progress, desc=f"SGLD ({len(Ps_list) * len(starts) * sc.n_chains} chains)") as bar:
        draws, diverged = jax.device_get(sample_grid(arch, float(sc.N), keys, p0, train_stats, test_stats, eps,
                                                     jnp.asarray(sc.burn_in), n_kept, sc.thin))
        bar.update(1)
    wall = _time.perf_counter() - t0
    dims = ["P", "start", "chain", "draw"]
    ds = xr.Dataset(
        {k: (dims, np.asarray(draws[k], np.float64)) for k in SAMPLE_OBSERVABLES}
        | {"diverged": (dims[:3], np.asarray(diverged)),
           "eps_G": (["P"], np.asarray(eps.G, np.float64)), "eps_W": (["P"], np.asarray(eps.W, np.float64))},
        coords={"P": Ps_list, "start": starts, "chain": np.arange(sc.n_chains), "draw": np.arange(n_kept)},
        attrs={**config.to_attrs(), "sgld_config": json.dumps(dataclasses.asdict(sc)), "wall_seconds": wall,
               "jaxattn_version": _version()},
    )
    return ds


def posterior_summary(ds: xr.Dataset, var: str = "prev_weight") -> xr.Dataset:
    """Posterior mean of ``var`` per ``(P, start)`` over the non-diverged chains, with its Monte
    Carlo error from the spread of the chain means (independent chains)."""
    x = ds[var].where(~ds["diverged"])
    chain_mean = x.mean("draw")
    n = (~ds["diverged"]).sum("chain")
    return xr.Dataset({"mean": chain_mean.mean("chain"), "se": chain_mean.std("chain", ddof=1) / np.sqrt(n),
                       "n_chains": n, "n_diverged": ds["diverged"].sum("chain")})
