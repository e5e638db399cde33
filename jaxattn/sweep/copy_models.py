"""Sweep adapters of the copy task: full-batch Adam (:func:`jaxattn.copy.train`) and SGLD
posterior sampling (:func:`jaxattn.copy.sample`), one grid point at a time."""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxattn import _checks
from jaxattn.sweep.models import Layout, Model, _axis_problems, _check_fields, _values


def _config(fixed: dict, point: dict):
    from jaxattn.copy import CopyConfig

    return CopyConfig(**{k: v for k, v in fixed.items() if k not in point}).validate()


def _fields(cls) -> dict:
    return {f.name: (f.default if f.default is not None else object()) for f in dataclasses.fields(cls)}


def _validate(fixed: dict, axes: dict, fields: dict, checks: dict, build) -> list[str]:
    problems = _check_fields(fixed, fields)
    if not problems:  # the fixed values have the right types: check them together
        try:
            build(fixed)
        except (ValueError, TypeError) as err:
            problems.append(f"fixed: {err}")
    return problems + _axis_problems(axes, fixed, checks)


def _choice(name, options):
    def check(v):
        if v not in options:
            raise ValueError(f"{name} must be one of {options}, got {v!r}")
    return check


def _test_stats(config):
    from jaxattn.models import copy as cm
    from jaxattn.tasks import copy as task

    arch = config.arch
    X = task.one_hot(task.tokens(jax.random.key(config.test_seed), config.n_test, arch.L, arch.V), arch.V)
    return cm.stats(X)


def _train_stats(arch, data_key, P, n_max):
    """The statistics of the first ``P`` of ``n_max`` sequences drawn from ``data_key``."""
    from jaxattn.attention import prefix_mask
    from jaxattn.models import copy as cm
    from jaxattn.tasks import copy as task

    X = task.one_hot(task.tokens(data_key, n_max, arch.L, arch.V), arch.V)
    return cm.stats(X, prefix_mask(P, n_max))


# --- Adam ------------------------------------------------------------------------------------------

ADAM_POINT = {"P": 200, "seed": 0, "init": "random"}
_ADAM_CHECKS = {"P": lambda v: _checks.integer("P", v, 1), "seed": lambda v: _checks.integer("seed", v, 0),
                "init": _choice("init", ("random", "copy"))}


class AdamStatic(NamedTuple):
    arch: Any
    n_max: int
    n_steps: int
    final: float
    sigma0: float
    c_copy: float
    lr: float
    grad_tol: float
    threshold: float


def _adam_validate(fixed, axes):
    from jaxattn.copy import CopyConfig

    return _validate(fixed, axes, {**_fields(CopyConfig), **ADAM_POINT}, _ADAM_CHECKS,
                     lambda f: _config(f, ADAM_POINT))


def _adam_setup(fixed, axes):
    c = _config(fixed, ADAM_POINT)
    static = AdamStatic(c.arch, max(_values(ADAM_POINT, fixed, axes, "P")), c.n_steps, float(c.final_lr_fraction),
                        float(c.sigma0), float(c.c_copy), float(c.lr), float(c.grad_tol), float(c.threshold))
    return static, {"test": _test_stats(c)}


def _adam_params(static, points):
    from jaxattn import copy as cp

    n = len(next(iter(points.values())))
    col = {k: points.get(k, [ADAM_POINT[k]] * n) for k in ADAM_POINT}
    return {"data_key": jnp.stack([cp.data_key(int(s)) for s in col["seed"]]),
            "init_key": jnp.stack([cp.init_key(int(s)) for s in col["seed"]]),
            "P": jnp.asarray(col["P"], jnp.int32), "is_copy": jnp.asarray([i == "copy" for i in col["init"]])}


def _adam_block(static: AdamStatic, shared, p):
    from jaxattn import copy as cp
    from jaxattn.models import copy as cm
    from jaxattn.runners import full_batch as fbr

    arch = static.arch
    fb = cp._optimizer(arch, static.n_steps, static.final)

    def one(p):
        st = _train_stats(arch, p["data_key"], p["P"], static.n_max)
        s0 = fb.init(cm.init(p["init_key"], arch, static.sigma0, static.c_copy, p["is_copy"]), static.lr)
        s = fbr.run(fb, s0, st, static.n_steps)
        out = cp.observe_one(arch, s, st, shared["test"])
        scale = static.grad_tol * jnp.sqrt(1.0 + p["P"] * arch.L)
        out["converged"] = (out["grad_norm"] <= scale) & ~out["diverged"]
        out["copy_basin"] = out["prev_weight"] > static.threshold
        return out

    return jax.vmap(one)(p)


def _adam_layout(static):
    from jaxattn.copy import OBSERVABLES

    return Layout({k: () for k in OBSERVABLES + ("converged", "copy_basin", "diverged")}, {})


def _adam_bytes(static: AdamStatic) -> int:
    a = static.arch
    return 4 * (static.n_max * a.L * a.V * 2 + 6 * (a.L * a.L + a.V * a.V))


COPY_ADAM = Model("copy_adam", "copy task, full-batch Adam (jaxattn.copy.train)", _adam_validate, _adam_setup,
                  _adam_params, _adam_block, _adam_layout, _adam_bytes, ADAM_POINT)


# --- SGLD ----------------------------------------------------------------------------------------
# N, the step sizes, n_steps, burn_in and thin are fixed (they shape the chain); a grid point is
# one chain: its P, start, data seed and chain seed.

SGLD_POINT = {"P": 200, "start": "uniform", "data_seed": 0, "chain": 0}
_SGLD_CHECKS = {"P": lambda v: _checks.integer("P", v, 1), "start": _choice("start", ("uniform", "copy")),
                "data_seed": lambda v: _checks.integer("data_seed", v, 0),
                "chain": lambda v: _checks.integer("chain", v, 0)}


def _sgld_configs(fixed):
    from jaxattn.copy import SGLDConfig

    names = {f.name for f in dataclasses.fields(SGLDConfig)} - {"n_chains", "data_seed", "chain_seed"}
    c = _config({k: v for k, v in fixed.items() if k not in names}, SGLD_POINT)
    s = SGLDConfig(**{k: v for k, v in fixed.items() if k in names}).validate()
    return c, s


def _sgld_fields():
    from jaxattn.copy import CopyConfig, SGLDConfig

    sg = {k: v for k, v in _fields(SGLDConfig).items() if k not in ("n_chains", "data_seed", "chain_seed")}
    return {**_fields(CopyConfig), **sg, **SGLD_POINT}


class SGLDStatic(NamedTuple):
    arch: Any
    n_max: int
    N: float
    burn_in: int
    n_kept: int
    thin: int
    c_copy: float
    sgld: Any  # SGLDConfig (hashable: frozen dataclass)


def _sgld_validate(fixed, axes):
    return _validate(fixed, axes, _sgld_fields(), _SGLD_CHECKS, _sgld_configs)


def _sgld_setup(fixed, axes):
    c, s = _sgld_configs(fixed)
    static = SGLDStatic(c.arch, max(_values(SGLD_POINT, fixed, axes, "P")), float(s.N), s.burn_in,
                        s.n_steps // s.thin, s.thin, float(c.c_copy), s)
    return static, {"test": _test_stats(c)}


def _sgld_params(static: SGLDStatic, points):
    from jaxattn import copy as cp

    n = len(next(iter(points.values())))
    col = {k: points.get(k, [SGLD_POINT[k]] * n) for k in SGLD_POINT}
    eps = static.sgld.step_sizes(static.arch, col["P"])
    return {"data_key": jnp.stack([cp.data_key(int(s)) for s in col["data_seed"]]),
            "chain_key": jnp.stack([jax.random.fold_in(jax.random.key(int(c)), 2) for c in col["chain"]]),
            "P": jnp.asarray(col["P"], jnp.int32), "is_copy": jnp.asarray([s == "copy" for s in col["start"]]),
            "eps": eps}


def _sgld_block(static: SGLDStatic, shared, p):
    from jaxattn import copy as cp
    from jaxattn.models import copy as cm
    from jaxattn.runners import sgld as sg

    arch = static.arch
    kernel = sg.sgld(lambda q, d: cm.loss(q, d[0], arch), static.N)
    obs = cp._observe_draw(arch)
    uniform = cp.start_params(arch, "uniform", static.c_copy)
    copy = cp.start_params(arch, "copy", static.c_copy)

    def one(p):
        st = _train_stats(arch, p["data_key"], p["P"], static.n_max)
        p0 = jax.tree_util.tree_map(lambda u, c: jnp.where(p["is_copy"], c, u), uniform, copy)
        final, draws = sg.run_chain(kernel, obs, p["chain_key"], kernel.init(p0), (st, shared["test"]), p["eps"],
                                    static.burn_in, static.n_kept, static.thin)
        return {**draws, "diverged": final.diverged}

    return jax.vmap(one)(p)


def _sgld_layout(static: SGLDStatic):
    from jaxattn.copy import SAMPLE_OBSERVABLES

    return Layout({**{k: ("draw",) for k in SAMPLE_OBSERVABLES}, "diverged": ()},
                  {"draw": np.arange(static.n_kept)})


def _sgld_bytes(static: SGLDStatic) -> int:
    a = static.arch
    return 4 * (static.n_max * a.L * a.V * 2 + 4 * (a.L * a.L + a.V * a.V) + 8 * static.n_kept)


COPY_SGLD = Model("copy_sgld", "copy task, SGLD posterior chains (jaxattn.copy.sample)", _sgld_validate,
                  _sgld_setup, _sgld_params, _sgld_block, _sgld_layout, _sgld_bytes, SGLD_POINT)


# --- theory ----------------------------------------------------------------------------------------
# The reduced effective action's minima (jaxattn.theory.copy_phase) at every grid point; L, V and
# the hyper-parameters are traced numbers there, so they are axes like P (one compile per sweep).

THEORY_POINT = {"P": 200.0, "L": 32.0, "V": 4.0, "N": 1.0, "beta": 1.0, "omega": 1.0, "sigma_G2": 1.0}
THEORY_FIXED = {"attention": "softmax", "linear_norm": "L", "cyclic": True}
_THEORY_CHECKS = {
    "P": lambda v: _checks.positive("P", v), "L": lambda v: _checks.integer("L", v, 2),
    "V": lambda v: _checks.integer("V", v, 2), "N": lambda v: _checks.positive("N", v),
    "beta": lambda v: _checks.positive("beta", v), "omega": lambda v: _checks.positive("omega", v),
    "sigma_G2": lambda v: _checks.positive("sigma_G2", v)}


class TheoryStatic(NamedTuple):
    attention: str
    linear_norm: str
    cyclic: bool


def _theory_validate(fixed, axes):
    def build(f):
        _choice("attention", ("softmax", "linear"))(f.get("attention", "softmax"))
        _choice("linear_norm", ("L", "none"))(f.get("linear_norm", "L"))
    problems = _check_fields(fixed, {**THEORY_FIXED, **THEORY_POINT})
    if not problems:
        try:
            build(fixed)
        except ValueError as err:
            problems.append(f"fixed: {err}")
    return problems + _axis_problems(axes, fixed, _THEORY_CHECKS)


def _theory_setup(fixed, axes):
    f = {**THEORY_FIXED, **{k: fixed[k] for k in THEORY_FIXED if k in fixed}}
    return TheoryStatic(f["attention"], f["linear_norm"], bool(f["cyclic"])), {}


def _theory_params(static, points):
    n = len(next(iter(points.values())))
    return {k: jnp.asarray(points.get(k, [THEORY_POINT[k]] * n), jnp.float64) for k in THEORY_POINT}


def _theory_block(static: TheoryStatic, shared, p):
    from jaxattn.theory import copy_action as ca
    from jaxattn.theory import copy_phase as cph

    def one(p):
        L = p["L"]
        n_pos = L if static.cyclic else L - 1.0
        g = L if (static.attention == "linear" and static.linear_norm == "L") else jnp.ones_like(L)
        h = ca.CopyHyper(L, p["V"], p["beta"], p["omega"], p["sigma_G2"], p["N"], n_pos, g)
        if static.attention == "softmax":
            m = cph.softmax_minima(p["P"], h)
            st, _ = ca.softmax_stats(m.c, h)
            out = dict(c_G=m.c, c_G_uniform=m.c_lo, c_G_copy=m.c_hi, n_minima=m.n_minima)
        else:
            m = cph.linear_minimum(p["P"], h)
            st, _ = ca.linear_stats(m.a1, m.aG, h)
            out = dict(a1=m.a1, aG=m.aG)
        out.update(S=m.S, prev_weight=st.s / h.n_pos, test_error=ca.test_error(st, p["P"], h))
        out["diverged"] = ~jnp.isfinite(m.S)
        return out

    return jax.vmap(one)(p)


def _theory_layout(static: TheoryStatic):
    names = ("c_G", "c_G_uniform", "c_G_copy", "n_minima") if static.attention == "softmax" else ("a1", "aG")
    return Layout({k: () for k in names + ("S", "prev_weight", "test_error", "diverged")}, {})


COPY_THEORY = Model("copy_theory", "copy task, minima of the reduced effective action (jaxattn.theory.copy_phase)",
                    _theory_validate, _theory_setup, _theory_params, _theory_block, _theory_layout,
                    lambda static: 8 * 400 * 8, THEORY_POINT, x64=True)
