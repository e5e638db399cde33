"""Compile once and remember it: a second process loads the engine's programs (no trace of the
experiment, almost no compile) and gives the same bits; a program's key changes with anything
that changes the program."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
import xla_cache
from jaxlib import version

from jaxattn.engine import cache

RUN = textwrap.dedent("""
    import json, sys
    import equinox as eqx
    import jax
    import numpy as np
    from jaxattn import engine, slm
    from jaxattn.engine import Grid
    spent = [0.0]
    EVENTS = ("/jax/core/compile/jaxpr_trace_duration", "/jax/core/compile/jaxpr_to_mlir_module_duration",
              "/jax/core/compile/backend_compile_duration")
    jax.monitoring.register_event_duration_secs_listener(
        lambda e, d, **kw: spent.__setitem__(0, spent[0] + d) if e in EVENTS else None)
    assert engine.cache.enable() is not None
    exp = slm.SLM_SGD
    counted = eqx.debug.assert_max_traces(type(exp).step.__get__(exp), max_traces=None)
    exp.step = counted
    config = slm.SLMConfig(D=24, t_max=0.5, n_records=2, n_test=16)
    ds = engine.run(exp, config, Grid.from_values(exp.axis, dict(seed=[0, 1], H=[1, 2])))
    np.save(sys.argv[1], ds["M"].values)
    print(json.dumps({"traces": eqx.debug.get_num_traces(counted), "compile": spent[0]}))
""")


@pytest.mark.slow
def test_a_second_process_loads_the_programs_and_gives_the_same_bits(tmp_path):
    import numpy as np

    env = {k: v for k, v in xla_cache.uncached().items() if k != "JAXATTN_NO_CACHE"}
    env["JAXATTN_CACHE_DIR"] = str(tmp_path / "cache")
    out = []
    for i in range(2):
        r = subprocess.run([sys.executable, "-c", RUN, str(tmp_path / f"M{i}.npy")], env=env, capture_output=True,
                           text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-3000:]
        out.append(json.loads(r.stdout.strip().splitlines()[-1]))
    assert out[0]["traces"] == 1 and out[1]["traces"] == 0, out  # the second process traced nothing
    np.testing.assert_array_equal(np.load(tmp_path / "M0.npy"), np.load(tmp_path / "M1.npy"))
    assert os.listdir(tmp_path / "cache" / "programs")
    if version.__version_info__[:3] >= (0, 10, 2):  # older jaxlib on CPU: no xla/ (next test)
        assert out[1]["compile"] < 0.25 * out[0]["compile"], out
        assert os.listdir(tmp_path / "cache" / "xla")


@pytest.mark.parametrize("jaxlib_version, xla", [((0, 10, 1), False), ((0, 10, 2), True)])
def test_jax_compilation_cache_is_left_off_where_every_load_from_it_logs_an_error(tmp_path, monkeypatch,
                                                                                 jaxlib_version, xla):
    """On CPU, jaxlib before 0.10.2 logs a (spurious) SIGILL warning per executable loaded from
    JAX's cache; there ``enable`` keeps the programs but not ``xla/``."""
    import jax

    monkeypatch.setattr(version, "__version_info__", jaxlib_version)
    monkeypatch.delenv("JAXATTN_NO_CACHE", raising=False)
    monkeypatch.setitem(cache._STATE, "programs", None)
    before = jax.config.jax_compilation_cache_dir, jax.config.jax_persistent_cache_min_compile_time_secs
    jax.config.update("jax_compilation_cache_dir", None)
    try:
        assert cache.enable(str(tmp_path)) == str(tmp_path)
        assert cache.program_dir() == str(tmp_path / "programs")
        assert jax.config.jax_compilation_cache_dir == (str(tmp_path / "xla") if xla else None)
    finally:
        jax.config.update("jax_compilation_cache_dir", before[0])
        jax.config.update("jax_persistent_cache_min_compile_time_secs", before[1])


def test_program_key_changes_with_what_changes_the_program(monkeypatch):
    from jaxattn import slm
    from jaxattn.core import attention

    exp = slm.SLM_SGD
    sig = ("step", "tree", (((2, 3), "float32"),))
    key = cache.fingerprint(exp, ("static", 1), "step", sig, "cpu", False)
    assert key == cache.fingerprint(exp, ("static", 1), "step", sig, "cpu", False)
    others = [cache.fingerprint(exp, ("static", 2), "step", sig, "cpu", False),
              cache.fingerprint(exp, ("static", 1), "init", sig, "cpu", False),
              cache.fingerprint(exp, ("static", 1), "step", sig[:2] + ((((2, 4), "float32"),),), "cpu", False),
              cache.fingerprint(exp, ("static", 1), "step", sig, "gpu", False),
              cache.fingerprint(exp, ("static", 1), "step", sig, "cpu", True),
              cache.fingerprint(slm.SLM_ODE, ("static", 1), "step", sig, "cpu", False)]
    assert len({key, *others}) == 7
    # a registered activation is part of every program's key: another function, another key
    monkeypatch.setattr(attention, "_REGISTERED", {})
    attention.register_activation("gate", lambda s, b, v: s * 0.5)
    k1 = cache.fingerprint(exp, ("static", 1), "step", sig, "cpu", False)
    attention.register_activation("gate", lambda s, b, v: s * 0.25)
    k2 = cache.fingerprint(exp, ("static", 1), "step", sig, "cpu", False)
    assert len({key, k1, k2}) == 3


def test_cache_off_by_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("JAXATTN_NO_CACHE", "1")
    assert cache.enable(str(tmp_path)) is None


PLANT = textwrap.dedent("""
    import json, sys
    import jax
    import numpy as np
    from jaxattn import engine, slm
    from jaxattn.engine import Grid, _compute, cache
    exp = slm.SLM_SGD
    config = slm.SLMConfig(D=24, t_max=0.5, n_records=2, n_test=16)
    grid = Grid.from_values(exp.axis, dict(seed=[0, 1], H=[1, 2]))
    reference = engine.run(exp, config, grid)["M"].values  # the caches off: plainly jitted
    assert cache.enable(sys.argv[1]) is not None
    # a first run keeps this machine's programs; note the key, inputs and tree of each
    built, build = [], _compute.Programs._build
    def record(self, name, args, leaves, tdef, sig):
        key = cache.fingerprint(self.experiment, self.static, name, sig, "cpu", False)
        shapes = [jax.ShapeDtypeStruct(x.shape, x.dtype) for x in leaves]
        built.append((self, name, shapes, tdef, key))
        return build(self, name, args, leaves, tdef, sig)
    _compute.Programs._build = record
    engine.clear_caches()
    engine.run(exp, config, grid)
    _compute.Programs._build = build
    # plant, under each of those keys, the same program exported for a CUDA GPU
    for progs, name, shapes, tdef, key in built:
        def flat(*lv, progs=progs, name=name, tdef=tdef):
            return jax.tree_util.tree_leaves(progs.fns[name](*jax.tree_util.tree_unflatten(tdef, lv)))
        out_def = jax.tree_util.tree_structure(jax.eval_shape(
            lambda *lv: progs.fns[name](*jax.tree_util.tree_unflatten(tdef, lv)), *shapes))
        cache.save_program(key, jax.export.export(jax.jit(flat), platforms=["cuda"])(*shapes), out_def)
        assert cache.load_program(key)[0].platforms == ("cuda",)
    engine.clear_caches()
    again = engine.run(exp, config, grid)["M"].values
    np.testing.assert_array_equal(again, reference)
    print(json.dumps({"planted": len(built),
                      "replaced": [cache.load_program(k)[0].platforms for *_, k in built]}))
""")


def test_a_program_stored_for_another_platform_is_exported_again_and_replaced(tmp_path):
    """A stored program that cannot run here (exported for CUDA, read on a CPU) is traced and
    exported again, replaces the stored one, and gives the bits of a run with the caches off."""
    env = {k: v for k, v in xla_cache.uncached().items() if k != "JAXATTN_NO_CACHE"}
    r = subprocess.run([sys.executable, "-c", PLANT, str(tmp_path / "cache")], env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["planted"] == 3 and out["replaced"] == [["cpu"]] * 3, out  # init, step and finish


def test_the_platform_key_is_the_one_jax_lowers_for():
    import jax

    from jaxattn.core.devices import lowering_platform

    assert lowering_platform() == jax.export.default_export_platform()

    class Client:
        platform_version = "PJRT C API\ncuda 13000"

    class GPU:
        platform, client = "gpu", Client()

    assert lowering_platform(GPU()) == "cuda"  # a GPU device says "gpu"; exports say "cuda"
    Client.platform_version = "PJRT C API\nrocm 6.3"
    assert lowering_platform(GPU()) == "rocm"
