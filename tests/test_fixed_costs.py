"""A grid's fixed costs do not grow with its number of points: the per-point inputs of every
experiment come from one compiled, vectorised program (no Python loop of JAX calls per point),
so a run compiles and dispatches as often at 4096 points as at 64. Keys derived for a whole grid
at once equal those of JAX's own calls one point at a time."""

import json
import os
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest
import xla_cache

from jaxattn.core import keys

# Counts compiles (XLA's backend compiles) and dispatches (executions of compiled programs)
# during one engine run at each grid size, in a fresh process. JAX's C++ fast path runs a cached
# program without Python; with its fast-path data withheld every call takes the Python path,
# where each execution is counted.
COUNT = textwrap.dedent("""
    import json, sys
    import jax
    from jax._src import pjit
    from jax._src.interpreters import pxla
    pjit._get_fastpath_data = lambda *a, **k: None
    counts = {"compiles": 0, "dispatches": 0}
    _call = pxla.ExecuteReplicated.__call__
    def call(self, *a, **k):
        counts["dispatches"] += 1
        return _call(self, *a, **k)
    pxla.ExecuteReplicated.__call__ = call
    def compiled(event, duration, **kw):
        if event == "/jax/core/compile/backend_compile_duration":
            counts["compiles"] += 1
    jax.monitoring.register_event_duration_secs_listener(compiled)
    sys.path.insert(0, "tests")
    from test_engine import CASES
    from jaxattn import engine
    name, axis = sys.argv[1], sys.argv[2]
    case, exp = CASES[name], engine.get(name)
    fixed = {k: v for k, v in case["alone"].items() if k != axis}
    out = {}
    for n in (8, 64, 4096):  # 8 first: what a process compiles once, whatever the grid
        counts.update(compiles=0, dispatches=0)
        values = [10.0 + i for i in range(n)] if axis == "P" else list(range(n))
        # one chunk at every size: a chunk is a dispatch of its own, sized by memory, not points
        engine.run(exp, case["config"], fixed=fixed, memory_budget=10**13, **{axis: values})
        out[n] = dict(counts)
    print(json.dumps(out))
""")

# the axis grown for each experiment of the contract suite (tests/test_engine.py), and whether
# it counts in the default set (one experiment, the lightest: each process compiles its programs
# at three sizes, 13 to 35 s on 2 cores; the others count with the slow checks)
GROWN = {
    "slm_sgd": ("seed", False),
    "slm_ode": ("seed", False),
    "slm_sde": ("seed", False),
    "copy_adam": ("seed", False),
    "copy_sgld": ("chain", False),
    "copy_theory": ("P", True),
    "copy_landscape": ("chain", False),
}


def test_every_experiment_of_the_contract_suite_is_counted():
    from test_engine import CASES

    assert set(GROWN) == set(CASES)


@pytest.mark.parametrize(
    "name", [n if fast else pytest.param(n, marks=pytest.mark.slow) for n, (_, fast) in GROWN.items()]
)
def test_compiles_and_dispatches_do_not_grow_with_the_grid(name):
    env = xla_cache.uncached(JAXATTN_NO_CACHE="1")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    r = subprocess.run([sys.executable, "-c", COUNT, name, GROWN[name][0]], cwd=root, env=env,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    counts = json.loads(r.stdout.strip().splitlines()[-1])
    assert counts["64"] == counts["4096"], counts
    assert counts["64"]["dispatches"] < 200, counts  # a run's dispatches: its segments and inputs, not its points


def test_keys_of_a_whole_grid_equal_jax_calls_one_point_at_a_time():
    seeds, heads = np.array([0, 1, 7, 2**31 - 1]), np.array([1, 2, 3, 4])
    bits = keys.float_bits([0.5, 1.0, 0.1, 3.0])
    got = jax.random.key_data(keys.derive(seeds, 1, heads, bits))
    for i, s in enumerate(seeds):
        k = jax.random.fold_in(jax.random.key(int(s)), 1)
        for d in (int(heads[i]), int(bits[i])):
            k = jax.random.fold_in(k, d)
        np.testing.assert_array_equal(got[i], jax.random.key_data(k))
    # broadcasting: a scalar seed against a (2, 3) table of data, and no data at all
    table = keys.derive(5, np.arange(3)[None, :], np.arange(2)[:, None])
    assert table.shape == (2, 3)
    np.testing.assert_array_equal(
        jax.random.key_data(table[1, 2]),
        jax.random.key_data(jax.random.fold_in(jax.random.fold_in(jax.random.key(5), 2), 1)),
    )
    np.testing.assert_array_equal(jax.random.key_data(keys.derive(9)), jax.random.key_data(jax.random.key(9)))


def test_key_values_out_of_range_are_named():
    with pytest.raises(ValueError, match=r"seed must be integers in \[0, 2147483648\), got values in \[0, 2147483648\]"):
        keys.derive([0, 2**31])
    with pytest.raises(ValueError, match="key datum 1 must be integers in"):
        keys.derive(0, 1, -1)
    with pytest.raises(ValueError, match="seed must be integers, got float64"):
        keys.derive(0.5)
    with jax.enable_x64(True):  # 64-bit seeds, as jax.random.key takes them then
        np.testing.assert_array_equal(jax.random.key_data(keys.derive(2**40)),
                                      jax.random.key_data(jax.random.key(2**40)))
