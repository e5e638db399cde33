"""Sweep adapters of the single-location model: online SGD and the order-parameter ODEs."""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxattn import _checks
from jaxattn.sweep.models import Layout, Model, _axis_problems, _check_fields, _values

# --- single-location online SGD ----------------------------------------------------------------

def _slm_prior(spec: dict):
    from jaxattn import priors

    spec = dict(spec)
    family = spec.pop("family", "onehot")
    if family == "discrete":
        return priors.discrete(spec.pop("support"), spec.pop("weights", None))
    F, nu = spec.pop("F", 2), spec.pop("nu", 1.0)
    if spec:
        raise ValueError(f"unknown prior parameters {sorted(spec)}")
    return priors.from_name(family, F, nu)


def _slm_config(fixed: dict):
    from jaxattn import slm

    rest = {k: v for k, v in fixed.items() if k not in SLM_POINT and k != "prior"}
    prior = _slm_prior(fixed.get("prior", {"family": "onehot", "F": 2, "nu": 9.0}))
    return slm.SLMConfig(prior=prior, **rest).validate()


def _slm_fields() -> dict:
    from jaxattn import slm

    fields = {f.name: f.default for f in dataclasses.fields(slm.SLMConfig) if f.name != "prior"}
    fields = {k: (v if v is not None else object()) for k, v in fields.items()}
    return {**fields, "prior": {}, **SLM_POINT}


SLM_POINT = {"seed": 0, "H": 2, "L": 4, "eta": 0.5, "signal": 1.0}
_SLM_CHECKS = {
    "seed": lambda v: _checks.integer("seed", v, 0),
    "H": lambda v: _checks.integer("H", v, 1),
    "L": lambda v: _checks.integer("L", v, 2),
    "eta": lambda v: _checks.positive("eta", v),
    "signal": lambda v: _checks.positive("signal", v, allow_zero=True),
}


def _slm_validate(fixed: dict, axes: dict) -> list[str]:
    problems = _check_fields(fixed, _slm_fields())
    if "prior" in fixed and not isinstance(fixed["prior"], dict):
        problems.append("fixed.prior: expected a table like { family = 'onehot', F = 2, nu = 9.0 }")
    elif not problems:  # the fixed values have the right types: check them together
        try:
            _slm_config(fixed)
        except (ValueError, TypeError, KeyError) as err:
            problems.append(f"fixed: {err}")
    return problems + _axis_problems(axes, fixed, _SLM_CHECKS)


class SLMStatic(NamedTuple):
    cfg: Any  # online_sgd.SGDConfig
    steps: tuple[int, ...]
    n_test: int
    share_data: bool
    times: tuple[float, ...]
    F: int


def _slm_setup(fixed: dict, axes: dict):
    from jaxattn import priors
    from jaxattn.models.multihead import Arch
    from jaxattn.runners import online_sgd as osgd
    from jaxattn.tasks import single_location as task

    config = _slm_config(fixed)
    cfg = osgd.SGDConfig(
        D=config.D, H_max=max(_values(SLM_POINT, fixed, axes, "H")), L_max=max(_values(SLM_POINT, fixed, axes, "L")),
        arch=Arch(config.activation, config.aggregation), batch_size=config.batch_size,
        sigma0=float(config.sigma0), bias_lr=float(config.bias_lr))
    steps = config.record_steps()
    dkey = jax.random.key(config.directions_seed)
    shared = dict(directions=task.latent_directions(jax.random.fold_in(dkey, 0), config.D, config.F),
                  prior=priors.astype(config.prior, jnp.float32), test_key=jax.random.fold_in(dkey, 1))
    static = SLMStatic(cfg, tuple(int(s) for s in steps), config.n_test, config.share_data,
                       tuple(float(t) for t in steps * config.batch_size / config.D), config.F)
    return static, shared


def _slm_params(static: SLMStatic, points: dict):
    from jaxattn import slm
    from jaxattn.runners import online_sgd as osgd

    n = len(next(iter(points.values())))
    col = {k: points.get(k, [SLM_POINT[k]] * n) for k in SLM_POINT}
    keys = [slm.point_keys(static.share_data, *(col[k][i] for k in SLM_POINT)) for i in range(n)]
    return osgd.RunParams(
        init_key=jnp.stack([k[0] for k in keys]), data_key=jnp.stack([k[1] for k in keys]),
        eta=jnp.asarray(col["eta"], jnp.float32), signal=jnp.asarray(col["signal"], jnp.float32),
        H=jnp.asarray(col["H"], jnp.int32), L=jnp.asarray(col["L"], jnp.int32))


def _slm_block(static: SLMStatic, shared, rp):
    from jaxattn.runners import online_sgd as osgd

    cfg = static.cfg
    rps = jax.tree_util.tree_map(lambda x: x[:, None], rp)  # (stream, member=1)
    states = jax.vmap(jax.vmap(lambda r: osgd.init(cfg, r)))(rps)
    gaps = jnp.asarray(np.diff(np.asarray(static.steps), prepend=0), jnp.int32)

    def segment(st, n):
        st = osgd.advance(cfg, shared["directions"], shared["prior"], st, rps, n)
        obs = osgd.observe(cfg, shared["directions"], shared["prior"], st, rps, shared["test_key"], static.n_test)
        return st, obs

    _, rec = jax.lax.scan(segment, states, gaps)  # leaves (time, B, 1, ...)
    rec = {k: jnp.moveaxis(v[:, :, 0], 0, 1) for k, v in rec.items()}
    rec["diverged"] = rec["diverged"][:, -1]
    return rec


def _slm_layout(static: SLMStatic) -> Layout:
    H = static.cfg.H_max
    return Layout(
        dims=dict(M=("time", "head", "direction"), Q=("time", "head", "head_"), b=("time", "head"),
                  error=("time",), diverged=()),
        coords=dict(time=np.asarray(static.times), head=np.arange(H), head_=np.arange(H),
                    direction=np.arange(static.F)))


def _slm_bytes(static: SLMStatic) -> int:
    c = static.cfg
    per_step = 4 * (c.H_max * c.D * 3 + c.L_max * c.D * 2 * c.batch_size)
    records = 4 * len(static.steps) * (c.H_max * (static.F + c.H_max + 1) + 1)
    return per_step + records


SLM_SGD = Model(
    "slm_sgd", "single-location model, online SGD (jaxattn.slm.train)", _slm_validate, _slm_setup,
    _slm_params, _slm_block, _slm_layout, _slm_bytes, SLM_POINT)



# --- single-location ODEs ------------------------------------------------------------------------
# The same fixed parameters as online SGD (D sets the random initial conditions' O(1/sqrt(D))
# overlaps, and t = samples / D the recording times), plus the bank and the tolerances.

ODE_EXTRA = {"n_bank": 4000, "rtol": 1e-5, "atol": 1e-7, "bank_seed": 0}
ODE_POINT = {**SLM_POINT, "noise": 1.0}
_ODE_CHECKS = {**_SLM_CHECKS, "noise": lambda v: v in (0, 1, True, False) or _bad("noise must be 0 or 1", v)}


def _bad(msg, v):
    raise ValueError(f"{msg}, got {v!r}")


def _ode_validate(fixed: dict, axes: dict) -> list[str]:
    fields = {**_slm_fields(), **ODE_EXTRA, "noise": 1.0}
    problems = _check_fields(fixed, fields)
    if not problems:
        try:
            _slm_config({k: v for k, v in fixed.items() if k not in ODE_EXTRA and k != "noise"})
            _checks.integer("n_bank", fixed.get("n_bank", 4000), 1)
            _checks.positive("rtol", fixed.get("rtol", 1e-5))
            _checks.positive("atol", fixed.get("atol", 1e-7))
        except (ValueError, TypeError, KeyError) as err:
            problems.append(f"fixed: {err}")
    return problems + _axis_problems(axes, fixed, _ODE_CHECKS)


class ODEStatic(NamedTuple):
    arch: Any
    H_max: int
    L_max: int
    D: int
    F: int
    sigma0: float
    batch_size: int
    times: tuple[float, ...]
    rtol: float
    atol: float


def _ode_setup(fixed: dict, axes: dict):
    from jaxattn.models.multihead import Arch
    from jaxattn.theory import slm_risk

    extra = {**ODE_EXTRA, **{k: fixed[k] for k in ODE_EXTRA if k in fixed}}
    config = _slm_config({k: v for k, v in fixed.items() if k not in ODE_EXTRA and k != "noise"})
    H_max = max(_values(ODE_POINT, fixed, axes, "H"))
    L_max = max(_values(ODE_POINT, fixed, axes, "L"))
    bank = slm_risk.make_bank(config.prior, L_max, H_max, n=int(extra["n_bank"]),
                              key=jax.random.key(int(extra["bank_seed"])), dtype=jnp.float64)
    times = config.record_steps() * config.batch_size / config.D
    static = ODEStatic(Arch(config.activation, config.aggregation), H_max, L_max, config.D, config.F,
                       float(config.sigma0), config.batch_size, tuple(float(t) for t in times),
                       float(extra["rtol"]), float(extra["atol"]))
    return static, {"bank": bank}


def _ode_params(static: ODEStatic, points: dict):
    n = len(next(iter(points.values())))
    col = {k: points.get(k, [ODE_POINT[k]] * n) for k in ODE_POINT}
    return {"key": jnp.stack([jax.random.key(int(s)) for s in col["seed"]]),
            **{k: jnp.asarray(col[k], jnp.float64) for k in ("eta", "signal", "noise")},
            **{k: jnp.asarray(col[k], jnp.int32) for k in ("H", "L")}}


def _ode_block(static: ODEStatic, shared, p):
    from jaxattn.attention import prefix_mask
    from jaxattn.theory import slm_ode

    y0 = jax.vmap(lambda k: jax.tree_util.tree_map(lambda x: x[0], slm_ode.random_initial_conditions(
        k, static.H_max, static.F, static.D, static.sigma0)))(p["key"])
    args = slm_ode.ODEArgs(p["eta"] / static.batch_size, p["signal"], p["noise"],
                           jax.vmap(lambda h: prefix_mask(h, static.H_max))(p["H"]),
                           jax.vmap(lambda n: prefix_mask(n, static.L_max))(p["L"]))
    sol = slm_ode.integrate_grid(y0, args, shared["bank"], jnp.asarray(static.times), static.arch,
                                 static.rtol, static.atol)
    hm = args.head_mask[:, None, :]
    return dict(M=jnp.where(hm[..., None], sol.M, jnp.nan),
                Q=jnp.where(hm[..., None] & hm[..., None, :], sol.Q, jnp.nan),
                b=jnp.where(hm, sol.b, jnp.nan), risk=sol.risk, diverged=~sol.ok)


def _ode_layout(static: ODEStatic) -> Layout:
    H = static.H_max
    return Layout(
        dims=dict(M=("time", "head", "direction"), Q=("time", "head", "head_"), b=("time", "head"),
                  risk=("time",), diverged=()),
        coords=dict(time=np.asarray(static.times), head=np.arange(H), head_=np.arange(H),
                    direction=np.arange(static.F)))


def _ode_bytes(static: ODEStatic) -> int:
    return 8 * len(static.times) * static.H_max * (static.F + static.H_max + 2) * 8


SLM_ODE = Model(
    "slm_ode", "single-location model, order-parameter ODEs (jaxattn.theory.slm_ode)", _ode_validate,
    _ode_setup, _ode_params, _ode_block, _ode_layout, _ode_bytes, ODE_POINT, x64=True)
