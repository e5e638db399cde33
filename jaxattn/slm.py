"""Grids of online-SGD runs on the single-location model, returned as an ``xarray.Dataset``.

:func:`train` runs the outer product of the grid axes ``seed x H x L x eta x signal`` as one
compiled computation: ``H`` and ``L`` are padded to their maxima and masked, ``eta`` and
``signal`` are batch axes, and with ``share_data=True`` (the default) every grid point of one
seed sees the same data stream (common random numbers: paired comparisons across ``H``, ``L``,
``eta``, ``signal`` and, between calls, activations; and one draw of the tokens per seed and step
instead of one per grid point).
"""

from __future__ import annotations

import dataclasses
import json
import time as _time
from dataclasses import dataclass, field
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr

from jaxattn import _checks, priors
from jaxattn.attention import check_activation
from jaxattn.devices import shard_streams
from jaxattn.models.multihead import Arch
from jaxattn.runners import online_sgd as osgd
from jaxattn.tasks import single_location as slm

GRID_AXES = ("seed", "H", "L", "eta", "signal")


@dataclass(frozen=True)
class SLMConfig:
    """Everything about a grid of runs except its axes.

    Attributes:
        D: embedding dimension (one compile per value).
        prior: ``P_theta`` (its ``F`` is the number of latent directions).
        activation, aggregation: see :mod:`jaxattn.attention`.
        t_max: training time in units of ``samples / D``.
        n_records: number of recording times, log-spaced from ``t_min`` to ``t_max`` (plus 0),
            unless ``times`` lists them.
        batch_size: samples per SGD step (mean gradient; ``t`` advances by ``batch_size / D``).
        sigma0: initial keys ``k_h ~ N(0, sigma0^2 I_D)``.
        bias_lr: bias step is ``bias_lr * eta / D``.
        n_test: test samples for the recorded error (the same test set for every run and time).
        share_data: common random numbers across everything but the seed.
        directions_seed: seed of the latent directions and of the test set (shared by the grid).
    """

    D: int = 500
    prior: priors.Prior = field(default_factory=lambda: priors.onehot(2, 9.0))
    activation: str = "bayes_softmax"
    aggregation: str | None = None
    t_max: float = 50.0
    n_records: int = 25
    t_min: float = 0.1
    times: tuple[float, ...] | None = None
    batch_size: int = 1
    sigma0: float = 1.0
    bias_lr: float = 1.0
    n_test: int = 1000
    share_data: bool = True
    directions_seed: int = 0

    @property
    def F(self) -> int:
        return self.prior.F

    def record_steps(self) -> np.ndarray:
        """Step indices at which observables are recorded (sorted, unique, starting at 0)."""
        if self.times is not None:
            t = np.asarray(self.times, float)
        else:
            t = np.concatenate([[0.0], np.geomspace(min(self.t_min, self.t_max), self.t_max, self.n_records)])
        steps = np.unique(np.round(t * self.D / self.batch_size).astype(np.int64))
        return steps

    def validate(self) -> "SLMConfig":
        _checks.integer("D", self.D, 1)
        if self.D < self.F:
            raise ValueError(f"D must be >= F, got D={self.D}, F={self.F}")
        check_activation(self.activation, self.aggregation)
        _checks.positive("t_max", self.t_max)
        _checks.positive("t_min", self.t_min)
        _checks.integer("n_records", self.n_records, 1)
        if self.times is not None:
            t = _checks.as_array("times", self.times, ndim=1)
            if t.size == 0 or np.any(t < 0):
                raise ValueError(f"times must be a non-empty list of values >= 0, got {self.times!r}")
        _checks.integer("batch_size", self.batch_size, 1)
        _checks.positive("sigma0", self.sigma0, allow_zero=True)
        _checks.positive("bias_lr", self.bias_lr, allow_zero=True)
        _checks.integer("n_test", self.n_test, 1)
        leaves = jax.tree_util.tree_leaves(self.prior)
        if not leaves or not all(np.all(np.isfinite(np.asarray(x))) for x in leaves):
            raise ValueError("prior must have finite parameters")
        return self

    def to_attrs(self) -> dict:
        """The configuration as netCDF-safe attributes."""
        d = {k: v for k, v in dataclasses.asdict(self).items() if k != "prior"}
        d["prior"] = describe_prior(self.prior)
        return {"config": json.dumps(d), "activation": self.activation, "D": self.D, "F": self.F}


def describe_prior(prior: priors.Prior) -> str:
    fields = {k: np.asarray(v).tolist() for k, v in prior._asdict().items() if k != "factor"}
    return json.dumps({"family": type(prior).__name__, **fields})


def prior_from_description(text: str) -> priors.Prior:
    """Inverse of :func:`describe_prior` (used to reload a dataset's configuration)."""
    d = json.loads(text)
    fam = d.pop("family")
    if fam == "Discrete":
        return priors.discrete(d["support"], d["weights"])
    if fam == "FlippedSpike":
        return priors.flipped_spike(d["amplitude"], d["mean_"])
    return priors.gaussian(d["mean_"], d["cov_"])


def _grid(seed, H, L, eta, signal) -> dict[str, list]:
    axes = {
        "seed": _checks.integer_list("seed", seed, 0),
        "H": _checks.integer_list("H", H, 1),
        "L": _checks.integer_list("L", L, 2),
        "eta": _checks.positive_list("eta", eta),
        "signal": _checks.positive_list("signal", signal, allow_zero=True),
    }
    for name, vals in axes.items():
        if len(set(vals)) != len(vals):
            raise ValueError(f"{name} has repeated values: {vals}")
    return axes


def _bits(x: float) -> int:
    return int(np.asarray(x, np.float32).view(np.uint32))


def point_keys(share_data: bool, seed: int, H: int, L: int, eta: float, signal: float):
    """The ``(init_key, data_key)`` of one run, from its own values only (never its position in a
    grid, so a run's numbers do not depend on the grid around it). With ``share_data`` the data
    key depends on the seed alone: common random numbers across the other axes."""
    base = jax.random.key(seed)
    dk = jax.random.fold_in(base, 1)
    if not share_data:
        for v in (H, L, _bits(eta), _bits(signal)):
            dk = jax.random.fold_in(dk, v)
    return jax.random.fold_in(base, 0), dk


def run_params(config: SLMConfig, axes: dict[str, list]) -> osgd.RunParams:
    """The flat grid (outer product, ``seed`` outermost) as batched :class:`RunParams`, laid out
    ``(stream, member)``. The keys of a grid point depend only on its own values, never on its
    position in the grid."""
    pts = np.array(np.meshgrid(*[np.arange(len(v)) for v in axes.values()], indexing="ij")).reshape(5, -1).T
    init_keys, data_keys, cols = [], [], {k: [] for k in axes}
    for idx in pts:
        vals = {k: axes[k][i] for k, i in zip(axes, idx)}
        ik, dk = point_keys(config.share_data, **vals)
        init_keys.append(ik)
        data_keys.append(dk)
        for k in axes:
            cols[k].append(vals[k])
    n_streams = len(axes["seed"]) if config.share_data else len(pts)
    shape = (n_streams, len(pts) // n_streams)
    rp = osgd.RunParams(
        init_key=jnp.stack(init_keys),
        data_key=jnp.stack(data_keys),
        eta=jnp.asarray(cols["eta"], jnp.float32),
        signal=jnp.asarray(cols["signal"], jnp.float32),
        H=jnp.asarray(cols["H"], jnp.int32),
        L=jnp.asarray(cols["L"], jnp.int32),
    )
    return jax.tree_util.tree_map(lambda x: x.reshape(shape + x.shape[1:]), rp)


def train(
    config: SLMConfig | None = None,
    *,
    seed: Sequence[int] | int = 0,
    H: Sequence[int] | int = 2,
    L: Sequence[int] | int = 4,
    eta: Sequence[float] | float = 0.5,
    signal: Sequence[float] | float = 1.0,
    progress: bool = False,
    devices=None,
) -> xr.Dataset:
    """Train the grid ``seed x H x L x eta x signal`` by online SGD; return the recorded
    observables as a Dataset with dimensions ``(seed, H, L, eta, signal, time, head, direction)``.

    Variables: ``M[..., time, head, direction]``, ``Q[..., time, head, head_]``,
    ``b[..., time, head]`` (``NaN`` on padded heads), ``error[..., time]`` (test error
    ``|y - y_hat|^2 / D``) and ``diverged[...]`` (a run whose loss became non-finite: its
    observables are ``NaN`` from then on; the rest of the grid is unaffected).

    The data streams are sharded over ``devices`` (default: all local devices; see
    :mod:`jaxattn.devices`); the numbers do not depend on the placement.
    """
    config = (config or SLMConfig()).validate()
    axes = _grid(seed, H, L, eta, signal)
    cfg = osgd.SGDConfig(
        D=config.D,
        H_max=max(axes["H"]),
        L_max=max(axes["L"]),
        arch=Arch(config.activation, config.aggregation),
        batch_size=config.batch_size,
        sigma0=float(config.sigma0),
        bias_lr=float(config.bias_lr),
    )
    dkey = jax.random.key(config.directions_seed)
    directions = slm.latent_directions(jax.random.fold_in(dkey, 0), config.D, config.F)
    test_key = jax.random.fold_in(dkey, 1)
    prior = priors.astype(config.prior, jnp.float32)
    rps = shard_streams(run_params(config, axes), devices)
    # jitted like `advance`, so that the first call of `advance` sees states of the same kind
    # (committed, same sharding) as every later call: no second trace
    states = jax.jit(jax.vmap(jax.vmap(lambda r: osgd.init(cfg, r))))(rps)

    steps = config.record_steps()
    records = []
    bar = _progress(int(steps[-1]) * config.batch_size / config.D, progress)
    done = 0
    t0 = _time.perf_counter()
    for target in steps:
        if target > done:
            states = osgd.advance(cfg, directions, prior, states, rps, jnp.asarray(target - done))
            bar.update(float((target - done) * config.batch_size / config.D))
            done = int(target)
        records.append(jax.device_get(osgd.observe(cfg, directions, prior, states, rps, test_key, config.n_test)))
    bar.close()
    wall = _time.perf_counter() - t0
    return _to_dataset(config, axes, steps, records, wall)


def _progress(total: float, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, disable=not enabled, unit="t", desc="online SGD", bar_format=None)


def _to_dataset(config: SLMConfig, axes, steps, records, wall) -> xr.Dataset:
    grid_shape = tuple(len(v) for v in axes.values())
    stacked = {k: np.stack([r[k] for r in records], axis=2) for k in ("M", "Q", "b", "error")}

    def shaped(x):  # (stream, member, time, ...) -> (*grid, time, ...)
        return x.reshape(grid_shape + x.shape[2:])

    gd = list(GRID_AXES)
    H_max = max(axes["H"])
    coords = dict(axes)
    coords.update(time=steps * config.batch_size / config.D, head=np.arange(H_max),
                  head_=np.arange(H_max), direction=np.arange(config.F))
    ds = xr.Dataset(
        {
            "M": (gd + ["time", "head", "direction"], shaped(stacked["M"])),
            "Q": (gd + ["time", "head", "head_"], shaped(stacked["Q"])),
            "b": (gd + ["time", "head"], shaped(stacked["b"])),
            "error": (gd + ["time"], shaped(stacked["error"])),
            "diverged": (gd, records[-1]["diverged"].reshape(grid_shape)),
        },
        coords=coords,
        attrs={**config.to_attrs(), "wall_seconds": wall, "jaxattn_version": _version()},
    )
    ds["time"].attrs["long_name"] = "t = samples / D"
    ds["error"].attrs["long_name"] = "test error |y - y_hat|^2 / D"
    return ds


def _version() -> str:
    from jaxattn import __version__

    return __version__


def measure_error(
    predict_fn, directions, prior: priors.Prior, L: int, *, n: int = 10_000, key=None, chunk: int = 2000
) -> tuple[float, float]:
    """Mean and standard error of ``|y - predict_fn(X)|^2 / D`` over ``n`` fresh samples of the
    single-location model (``predict_fn`` maps one ``X`` of shape ``(L, D)`` to ``y_hat``)."""
    key = jax.random.key(12345) if key is None else key
    D = directions.shape[-1]

    @jax.jit
    def errs(k):
        s = jax.vmap(lambda kk: slm.sample(kk, directions, prior, L))(jax.random.split(k, chunk))
        r = jax.vmap(lambda x, e: x[e] - predict_fn(x))(s.X, s.eps)
        return jnp.sum(r * r, axis=-1) / D

    e = np.concatenate([np.asarray(errs(jax.random.fold_in(key, i))) for i in range(-(-n // chunk))])
    return float(e.mean()), float(e.std() / np.sqrt(e.size))
