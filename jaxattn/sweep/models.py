"""What a sweep can run: one adapter per model, mapping a block of grid points to observables.

An adapter says which fixed parameters and grid axes its model takes, validates them (every
problem, with its path in the sweep file), and provides the three pieces the engine
(:mod:`jaxattn.sweep.engine`) needs:

- ``setup(fixed, axes) -> (static, shared)``: a hashable ``static`` (shapes and choices that fix
  the compiled program; shape-changing axes such as ``H``, ``L`` and ``P`` enter only through
  their maxima, so one compile serves the whole sweep) and ``shared`` arrays (replicated);
- ``params(static, points) -> pytree`` with one leading entry per point, from that point's values
  alone (keys are derived from seeds, never from positions: a point's numbers do not depend on
  which chunk, block or device computes it);
- ``block(static, shared, params) -> dict`` of observables of a block of points (traced; the
  engine vmaps nothing itself), and ``layout(static)``, the extra dimensions of each observable.

The models themselves live in their own modules; an adapter only calls them.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxattn import _checks


class Layout(NamedTuple):
    """Each observable's dimensions after the point axis, and their coordinates."""

    dims: dict[str, tuple[str, ...]]
    coords: dict[str, np.ndarray]


class Model(NamedTuple):
    name: str
    doc: str
    validate: Callable[[dict, dict], list[str]]
    setup: Callable[[dict, dict], tuple[Any, Any]]
    params: Callable[[Any, dict], Any]
    block: Callable[[Any, Any, Any], dict]
    layout: Callable[[Any], Layout]
    bytes_per_point: Callable[[Any], int]
    point_defaults: dict[str, Any]


# --- shared validation -------------------------------------------------------------------------

def _check_fields(fixed: dict, allowed: dict[str, Any], path: str = "fixed") -> list[str]:
    """Unknown keys and values of the wrong type (by the type of the default)."""
    problems = []
    for key, value in fixed.items():
        if key not in allowed:
            problems.append(f"{path}.{key}: unknown parameter (expected one of {', '.join(sorted(allowed))})")
            continue
        default = allowed[key]
        if isinstance(default, bool):
            ok = isinstance(value, bool)
        elif isinstance(default, int):
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif isinstance(default, float):
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        elif isinstance(default, str):
            ok = isinstance(value, str)
        else:
            ok = True
        if not ok:
            problems.append(f"{path}.{key}: expected {type(default).__name__}, got {value!r}")
    return problems


def _check_axis(path: str, values, check) -> list[str]:
    problems = []
    for v in values:
        try:
            check(v)
        except (ValueError, TypeError) as err:
            problems.append(f"{path}: {err}")
            break
    return problems


def _axis_problems(axes: dict, fixed: dict, checks: dict[str, Callable]) -> list[str]:
    problems = []
    for name, values in axes.items():
        if name not in checks:
            problems.append(f"grid.{name}: not an axis of this model (axes: {', '.join(checks)})")
        else:
            problems += _check_axis(f"grid.{name}", values, checks[name])
    for name in checks:
        if name in fixed:
            problems += _check_axis(f"fixed.{name}", [fixed[name]], checks[name])
    return problems


def _values(static_defaults: dict, fixed: dict, axes: dict, name: str) -> list:
    """An axis's values, from the grid, else the fixed value, else the default."""
    if name in axes:
        return list(axes[name])
    return [fixed.get(name, static_defaults[name])]


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
    problems += _axis_problems(axes, fixed, _SLM_CHECKS)
    if "prior" in fixed and not isinstance(fixed["prior"], dict):
        problems.append("fixed.prior: expected a table like { family = 'onehot', F = 2, nu = 9.0 }")
    elif not problems:
        try:
            _slm_config(fixed)
        except (ValueError, TypeError, KeyError) as err:
            problems.append(f"fixed: {err}")
    return problems


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

MODELS: dict[str, Model] = {m.name: m for m in (SLM_SGD,)}
