"""The precision of matrix products, read off the jaxprs: every ``dot_general`` of the theory's
entry points and of every experiment's programs carries ``Precision.HIGHEST`` (a GPU would
otherwise multiply float32 in TF32, a TPU in bfloat16 passes); a simulation's
``matmul_precision`` reaches its programs and keys them; provenance records it; a bad value is
refused by name. On a CPU every precision gives the same numbers, so the jaxprs are the check."""

import dataclasses

import jax
import jax.numpy as jnp
import pytest
from jax.lax import Precision
from jaxprs import equations

from jaxattn import engine
from jaxattn.copyhead import action, linear
from jaxattn.copyhead import network as copy_net
from jaxattn.copyhead._config import CopyConfig, CopyData, CopyLandscapeConfig, CopySGLDConfig, CopyTheoryConfig
from jaxattn.core import precision
from jaxattn.core.attention import prefix_mask
from jaxattn.engine import _compute, cache, provenance
from jaxattn.engine._plan import make_plan
from jaxattn.slm import bayes, ode, priors, risk, sde
from jaxattn.slm import network as slm_net
from jaxattn.slm import task as slm_task
from jaxattn.slm._config import SLMConfig, SLMODEConfig, SLMSDEConfig

HIGHEST = (Precision.HIGHEST, Precision.HIGHEST)
DEFAULT = (Precision.DEFAULT, Precision.DEFAULT)


def dot_precisions(jaxpr) -> list:
    """The ``precision`` of every ``dot_general`` in ``jaxpr`` and, recursively, in its sub-jaxprs."""
    return [e.params["precision"] for e in equations(jaxpr) if e.primitive.name == "dot_general"]


def test_the_walker_finds_dots_in_nested_jaxprs():
    def f(x):
        y = jax.lax.cond(x[0, 0] > 0, lambda x: x @ x, lambda x: x.T @ x, x)
        y = jax.lax.scan(lambda c, _: (c @ c, None), y, length=2)[0]
        return jax.jit(lambda z: jnp.einsum("ij,jk->ik", z, z))(y)

    assert dot_precisions(jax.make_jaxpr(f)(jnp.ones((2, 2)))) == [None] * 4


# --- the theory and the models' own functions ---------------------------------------------------

_COPY = copy_net.CopyArch(L=5, V=3)
_STATS = copy_net.stats(jax.nn.one_hot(jax.random.randint(jax.random.key(0), (9, 5), 0, 3), 3))
_P = copy_net.init(jax.random.key(1), _COPY, sigma0=1.0)
_PRIOR = priors.onehot(2, 4.0)
_S = slm_task.latent_directions(jax.random.key(0), 40, 2)
_BANK = risk.make_bank(_PRIOR, 4, 2, n=16)
_M, _Q, _b = 0.1 * jnp.ones((2, 2)), jnp.eye(2), jnp.zeros(2)
_ARGS = ode.ODEArgs(*map(jnp.asarray, (1.0, 1.0, 1.0)), prefix_mask(2, 2), prefix_mask(4, 4), jnp.asarray(1.0))
_ARCH = slm_net.Arch("bayes_softmax")
_X = jax.random.normal(jax.random.key(2), (4, 40))

ENTRY_POINTS = {
    "slm.bayes.bayes_estimator": lambda: bayes.bayes_estimator(_X, _S, _PRIOR),
    "slm.network.predict": lambda: slm_net.predict(slm_net.oracle_bayes_softmax(_PRIOR, _S), _X, _ARCH),
    "slm.risk.risk and its gradient": lambda: jax.grad(risk.risk)(_M, _Q, _b, _BANK, "bayes_softmax"),
    "slm.risk.minimise_risk": lambda: risk.minimise_risk(_M, _Q, _b, _BANK, "bayes_softmax", n_steps=2).risk,
    "slm.ode.rhs": lambda: ode.rhs(ode.OrderParams(_M, _Q, _b), _ARGS, _BANK, _ARCH),
    "slm.ode.random_initial_conditions": lambda: ode.random_initial_conditions(jax.random.key(0), 2, 2, D=40, n=2),
    "slm.sde.increment_covariance": lambda: sde.increment_covariance(
        ode.OrderParams(_M, _Q, _b), _ARGS, _BANK, sde.direction_draws(jax.random.key(3), _BANK, 2), _ARCH
    ),
    "copyhead.network.loss and its gradient (from counts)": lambda: jax.value_and_grad(copy_net.loss)(
        _P, _STATS, _COPY
    ),
    "copyhead.network.error": lambda: copy_net.error(_P, _STATS, _COPY),
    "copyhead.network.predict (per sequence)": lambda: copy_net.predict(_P, jnp.eye(5, 3), _COPY),
    "copyhead.network.stats (the counts)": lambda: copy_net.stats(jnp.ones((3, 5, 3))),
    "copyhead.action.exact_action and its gradient": lambda: jax.grad(action.exact_action)(_P.G, _STATS, _COPY),
    "copyhead.linear.linear_minimum": lambda: linear.linear_minimum(200.0, action.hyper(_COPY)),
}


@pytest.mark.parametrize("name", sorted(ENTRY_POINTS))
def test_theory_and_model_entry_points_multiply_at_highest(name):
    got = dot_precisions(jax.make_jaxpr(ENTRY_POINTS[name])())
    assert got and all(p == HIGHEST for p in got), got


def test_a_float64_block_is_at_highest_whatever_the_caller_set():
    """The theory's float64 blocks (bayes_risk, pruning, curves, profiles, fluctuations) override
    any precision around them; the models' own functions keep a precision the caller set (a
    simulation's choice reaches them)."""
    with jax.default_matmul_precision("default"):
        with precision.float64():
            assert dot_precisions(jax.make_jaxpr(lambda x: x @ x)(jnp.ones((2, 2)))) == [HIGHEST]
            got = dot_precisions(jax.make_jaxpr(lambda p: copy_net.loss(p, _STATS, _COPY))(_P))
            assert got and all(p == HIGHEST for p in got)
        got = dot_precisions(jax.make_jaxpr(lambda p: copy_net.loss(p, _STATS, _COPY))(_P))
        assert got and all(p == DEFAULT for p in got)


def test_a_bad_precision_is_refused_by_name():
    with pytest.raises(ValueError, match="matmul_precision must be one of"):
        with precision.matmul("fast"):
            pass
    for config in (SLMConfig(), CopyConfig(), CopySGLDConfig(), CopyLandscapeConfig(), CopyData()):
        with pytest.raises(ValueError, match="matmul_precision"):
            dataclasses.replace(config, matmul_precision="tf32").validate()
    with pytest.raises(engine.GridError, match="matmul_precision"):
        engine.run(engine.get("slm_sgd"), SLMConfig(D=8, matmul_precision="bf16"))
    with pytest.raises(engine.SweepFileError, match="matmul_precision must be one of"):
        engine.parse('model = "slm_sgd"\n[fixed]\nmatmul_precision = "fast"\n[grid]\nseed = [0]\n')
    with pytest.raises(engine.SweepFileError, match="matmul_precision: unknown parameter"):  # the theory's is fixed
        engine.parse('model = "slm_ode"\n[fixed]\nmatmul_precision = "default"\n[grid]\nseed = [0]\n')


def test_the_command_line_offers_and_checks_matmul_precision():
    from click.testing import CliRunner

    from jaxattn.cli import main

    for cmd in (["slm", "train"], ["slm", "compare"], ["copy", "train"], ["copy", "sample"], ["copy", "landscape"]):
        r = CliRunner().invoke(main, [*cmd, "--help"])
        assert r.exit_code == 0 and "--matmul-precision" in r.output, (cmd, r.output)
    r = CliRunner().invoke(main, ["slm", "train", "--matmul-precision", "fast"])
    assert r.exit_code == 2 and "--matmul-precision" in r.output and "'highest'" in r.output, r.output


# --- the engine's programs ----------------------------------------------------------------------


class _Traced(Exception):
    """Raised once ``finish`` is traced: nothing is compiled or run."""


def program_jaxprs(name: str, config, **grid) -> dict:
    """The jaxprs of the ``init``, ``step`` and ``finish`` programs of a run of ``name``, traced by
    the engine's own path (the plan, the chunk's layout, the x64 setting) with their inputs,
    without compiling or running them; the caller sets no precision."""
    got = {}

    def call(self, prog, *args):
        if prog not in got:
            got[prog] = jax.make_jaxpr(self.fns[prog], return_shape=True)(*args)
        if prog == "finish":
            raise _Traced
        return got[prog][1]

    _compute.clear_caches()
    orig = _compute.Programs.__call__
    _compute.Programs.__call__ = call
    try:
        engine.run(engine.get(name), config, **grid)
    except _Traced:
        pass
    finally:
        _compute.Programs.__call__ = orig
        _compute.clear_caches()
    assert set(got) == {"init", "step", "finish"}
    return {k: v[0] for k, v in got.items()}


def program_dots(name: str, config, **grid) -> list:
    """The precision of every ``dot_general`` in the three programs of a run of ``name``."""
    return [p for j in program_jaxprs(name, config, **grid).values() for p in dot_precisions(j)]


# tiny runs of every registered experiment, at their default precision
PROGRAMS = {
    "slm_sgd": (SLMConfig(D=8, t_max=0.1, n_records=1, n_test=4), {}),
    "slm_ode": (SLMODEConfig(D=8, t_max=0.1, n_records=1, n_bank=8), {}),
    "slm_sde": (SLMSDEConfig(D=8, t_max=0.1, n_records=1, n_bank=8, dt=0.1), {}),
    "copy_adam": (CopyConfig(L=3, V=2, n_steps=2, n_test=4), dict(P=3)),
    "copy_sgld": (CopySGLDConfig(L=3, V=2, n_steps=2, burn_in=1, thin=1, n_test=4), dict(P=3)),
    "copy_theory": (CopyTheoryConfig(attention="linear"), dict(L=4, V=3)),
    "copy_landscape": (CopyLandscapeConfig(L=3, V=2, n_windows=24, burn_in=1, n_draws=8, thin=1), dict(P=3, N=2.0)),
}


def test_every_registered_experiment_has_a_case():
    from jaxattn.engine._registry import BUILTIN

    assert set(PROGRAMS) == set(BUILTIN)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_every_program_multiplies_at_highest_by_default(name):
    config, grid = PROGRAMS[name]
    got = program_dots(name, config, **grid)
    assert got and all(p == HIGHEST for p in got), got


def test_a_simulation_chooses_its_precision_and_the_theory_cannot():
    config, grid = PROGRAMS["slm_sgd"]
    for mode, want in (("default", DEFAULT), ("high", (Precision.HIGH, Precision.HIGH))):
        got = program_dots("slm_sgd", dataclasses.replace(config, matmul_precision=mode))
        assert got and all(p == want for p in got), (mode, got)  # HIGHEST nowhere: the choice reaches every product
    # a sampler's products follow it too (as do the count-based losses inside it)
    config, grid = PROGRAMS["copy_sgld"]
    got = program_dots("copy_sgld", dataclasses.replace(config, matmul_precision="default"), **grid)
    assert got and all(p == DEFAULT for p in got), got
    # the ODEs' config carries the field of the SGD runs they describe: the ODEs ignore it
    config, grid = PROGRAMS["slm_ode"]
    got = program_dots("slm_ode", dataclasses.replace(config, matmul_precision="default"))
    assert got and all(p == HIGHEST for p in got), got


@pytest.mark.parametrize("name", ["slm_sgd", "copy_adam", "copy_sgld", "copy_landscape"])
def test_two_precisions_never_share_a_program(name):
    config, grid = PROGRAMS[name]
    e = engine.get(name)
    plans = {m: make_plan(e, dataclasses.replace(config, matmul_precision=m)) for m in precision.MATMUL_PRECISIONS}
    statics = {m: p.static for m, p in plans.items()}
    assert {e.static_matmul_precision(s) for s in statics.values()} == set(precision.MATMUL_PRECISIONS)
    assert len({_compute.programs(e, s) for s in statics.values()}) == 3  # the in-process cache
    assert {m: _compute.programs(e, s).matmul_precision for m, s in statics.items()} == {m: m for m in statics}
    keys = {cache.fingerprint(e, s, "step", ("sig",), "cuda", False) for s in statics.values()}
    assert len(keys) == 3 and None not in keys  # the exported programs' keys


def test_a_static_without_the_configs_precision_is_refused():
    """An experiment whose ``setup`` leaves the precision out of its static would let two
    precisions share a program: the plan refuses it."""
    sgd = engine.get("slm_sgd")

    class Forgetful(type(sgd)):
        name = "forgetful"

        def setup(self, config, values):
            static, shared = super().setup(config, values)
            return static._replace(matmul_precision="highest"), shared

    with pytest.raises(engine.GridError, match="matmul_precision: forgetful's setup gives a static at 'highest'"):
        make_plan(Forgetful(), SLMConfig(D=8, matmul_precision="default"))


# --- provenance ---------------------------------------------------------------------------------


def test_provenance_records_the_precision_of_matrix_products():
    from jaxattn import slm

    ds = slm.train(SLMConfig(D=8, t_max=0.1, n_records=1, n_test=4, matmul_precision="high"), seed=[0], H=[1])
    assert provenance.of(ds.attrs)["matmul_precision"] == "high"
    assert '"matmul_precision": "high"' in ds.attrs["config"]
    for name, config, want in (
        ("slm_sgd", SLMConfig(D=8), "highest"),
        ("copy_adam", CopyConfig(matmul_precision="default"), "default"),
        ("slm_ode", SLMODEConfig(D=8, matmul_precision="default"), "highest"),  # the theory: always
        ("copy_theory", CopyTheoryConfig(precision="float32"), "highest"),
    ):
        plan = make_plan(engine.get(name), config)
        assert provenance.of(_compute.dataset_attrs(plan))["matmul_precision"] == want, name
    assert provenance.collect()["matmul_precision"] == "default"  # nothing set: the device's own
    with precision.matmul("high"):
        assert provenance.collect()["matmul_precision"] == "high"


def test_stores_made_before_the_setting_still_resume():
    """A sweep store (the sampled phase diagram's too) is keyed by its config: a faster precision
    is a difference (a rerun at another is refused), while the default is kept as its absence,
    so that stores made before the setting existed still resume."""
    text = 'model = "copy_sgld"\n[fixed]\nL = 4\n{}[grid]\nP = [5]\n'
    ident = {m: engine.parse(text.format(f'matmul_precision = "{m}"\n' if m else "")).identity(2, 4)
             for m in ("", "highest", "default")}
    assert ident[""] == ident["highest"] != ident["default"]
