"""The engine's contract, for every registered experiment: one trace per sweep whatever its
number of points; a point's bits the same alone or inside a larger grid, through the API or a
sweep, with any chunk size, on 1 or 4 devices; SIGKILL and resume equal to an uninterrupted run
(on two experiments: the store is the engine's); common random numbers drawn once per stream and
step."""

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import equinox as eqx
import jax
import numpy as np
import pytest
import xla_cache

from jaxattn import engine
from jaxattn.copyhead._config import CopyConfig, CopyLandscapeConfig, CopySGLDConfig, CopyTheoryConfig
from jaxattn.engine import Grid
from jaxattn.slm._config import SLMConfig, SLMODEConfig, SLMSDEConfig

# Small runs of every experiment. ``grid`` has several streams (chunks of one stream each are
# several chunks) and members; ``alone`` is one of its points, at another block slot than (0,0,0).
CASES = {
    "slm_sgd": dict(config=SLMConfig(D=24, t_max=0.5, n_records=2, n_test=16),
                    grid=dict(seed=[0, 1, 2], H=[1, 2], eta=[0.5, 1.0]), alone=dict(seed=2, H=2, eta=1.0)),
    "slm_ode": dict(config=SLMODEConfig(D=24, t_max=0.5, n_records=2, n_bank=64),
                    grid=dict(seed=[0, 1, 2], H=[1, 2], noise=[0.0, 1.0]), alone=dict(seed=1, H=2, noise=1.0)),
    "slm_sde": dict(config=SLMSDEConfig(D=24, t_max=0.5, n_records=2, n_bank=64, dt=0.1),
                    grid=dict(seed=[0, 1, 2], H=[1, 2], noise=[0.0, 1.0]), alone=dict(seed=1, H=2, noise=1.0)),
    "copy_adam": dict(config=CopyConfig(L=4, V=2, n_steps=30, n_test=20),
                      grid=dict(P=[5, 12], seed=[0, 1, 2], init=["random", "copy"]),
                      alone=dict(P=12, seed=2, init="copy")),
    "copy_sgld": dict(config=CopySGLDConfig(L=4, V=2, N=4.0, n_steps=20, burn_in=10, thin=5, n_test=20),
                      grid=dict(P=[5, 12], start=["uniform", "copy"], data_seed=[0, 1, 2], chain=[0, 1]),
                      alone=dict(P=12, start="copy", data_seed=1, chain=1)),
    "copy_theory": dict(config=CopyTheoryConfig(), grid=dict(L=[8, 12], P=[50.0, 100.0, 400.0]),
                        alone=dict(L=12, P=400.0)),
    "copy_landscape": dict(config=CopyLandscapeConfig(L=4, V=2, n_windows=24, burn_in=10, n_draws=10, thin=2),
                           grid=dict(P=[5, 12], N=[2.0, 4.0], data_seed=[0, 1, 2], chain=[0, 1]),
                           alone=dict(P=12, N=4.0, data_seed=1, chain=1)),
}


def _equal(a, b, exact=True):
    assert set(a.data_vars) == set(b.data_vars)
    for k in a.data_vars:
        x, y = np.asarray(a[k].values), np.asarray(b[k].values)
        assert x.dtype == y.dtype, k
        np.testing.assert_array_equal(x, y, err_msg=k)  # NaN == NaN here


def _grid(name, values):
    return Grid.from_values(engine.get(name).axis, values)


def _select(ds, point):
    return ds.sel({k: [v] for k, v in point.items()})


def test_every_registered_experiment_has_a_case():
    assert set(engine.names()) >= set(CASES) and set(CASES) >= {n for n in engine.names() if n in engine._registry.BUILTIN}


def _count_traces(exp, monkeypatch):
    """Wrap the experiment's programs' pieces to count (and cap at one) their traces."""
    engine.clear_caches()
    counted = {}
    for fn in ("init", "step", "finish"):
        counted[fn] = eqx.debug.assert_max_traces(getattr(type(exp), fn).__get__(exp), max_traces=1)
        monkeypatch.setattr(exp, fn, counted[fn])
    return counted


def _assert_one_trace(counted):
    for fn, wrapped in counted.items():
        assert eqx.debug.get_num_traces(wrapped) == 1, fn


# the default run checks one experiment; the others (15-35 s each) run with the slow checks
FAST = ("copy_theory",)


@pytest.mark.parametrize("name", [n if n in FAST else pytest.param(n, marks=pytest.mark.slow) for n in CASES])
def test_one_trace_alone_in_grid_chunks_and_sweep(name, tmp_path, monkeypatch):
    case, exp = CASES[name], engine.get(name)
    try:
        # a sweep of the grid in chunks of one stream: several chunks (the last one padded), one trace
        text = engine.dumps(name, case["config"], _grid(name, case["grid"]), execution={"chunk_size": 1})
        counted = _count_traces(exp, monkeypatch)
        rep = engine.run_sweep(engine.parse(text), str(tmp_path / "s"))
        assert len(rep.computed) > 1 and not rep.failed
        _assert_one_trace(counted)
        # in memory, through the API's engine call: the same bits
        counted = _count_traces(exp, monkeypatch)
        full = engine.run(exp, case["config"], _grid(name, case["grid"]))
        _assert_one_trace(counted)
        _equal(engine.load_store(str(tmp_path / "s")), full)
        monkeypatch.undo()
        # the same point alone: another block, another slot, one group instead of several
        alone = engine.run(exp, case["config"], _grid(name, {k: [v] for k, v in case["alone"].items()}),
                           block=int(full.attrs["block"]))
        _equal(alone, _select(full, case["alone"]))
    finally:
        monkeypatch.undo()
        engine.clear_caches()


@pytest.mark.slow  # several compiles: 10 to 40 s on 2 cores, beyond the default run's share (README)
def test_every_point_alone_has_its_bits_in_the_grid_also_where_its_stream_is_one_group():
    """Alone, a point's stream is one group; in the grid, four. Before the buffers held at least
    two groups (``MIN_WIDTH``), XLA specialised the one-group loop and 6 of these 30 arrays
    differed in their last bits (at D = 12, with JAX's rolled or unrolled threefry)."""
    exp, cfg = engine.get("slm_sgd"), SLMConfig(D=12, t_max=0.25, n_records=2, n_test=8)
    full = engine.run(exp, cfg, _grid("slm_sgd", dict(seed=[0, 1, 2], H=[1, 2], eta=[0.5, 1.0])), block=1)
    for seed in (0, 1, 2):
        for eta in (0.5, 1.0):
            point = dict(seed=seed, H=2, eta=eta)  # H = 2: the grid's H_max, the same shapes
            alone = engine.run(exp, cfg, _grid("slm_sgd", {k: [v] for k, v in point.items()}), block=1)
            _equal(alone, _select(full, point))


def test_a_grid_point_is_checked_and_errors_name_the_axis():
    exp = engine.get("slm_sgd")
    with pytest.raises(engine.GridError, match="H must be >= 1"):
        engine.run(exp, SLMConfig(D=24), Grid((engine.Dim("H", {"H": (0,)}),)))
    with pytest.raises(ValueError, match="eta has repeated values"):
        _grid("slm_sgd", dict(eta=[1.0, 1.0]))
    with pytest.raises(ValueError, match="colour is not an axis"):
        _grid("slm_sgd", dict(colour=[1]))
    with pytest.raises(engine.GridError, match="block must be an integer >= 1"):
        engine.run(exp, SLMConfig(D=24), _grid("slm_sgd", dict(seed=0)), block=0)


@pytest.mark.skipif(__import__("jax").default_backend() != "cpu", reason="the block rule measured on a CPU")
def test_online_sgd_default_block_follows_the_tokens_and_the_streams(tmp_path):
    """Online SGD's default block: about 2^16 tokens a step on a CPU, at most 32 streams, at most
    half the grid's streams; at D = 1000, 64 runs the best block measured is 8, at D = 100, 256
    runs 16 or 32 (within the machine's noise; benchmarks/README.md). A sweep extended later keeps
    its store's block."""
    exp = engine.get("slm_sgd")

    def block(D, L, seeds, share_data=False, **kw):
        config = SLMConfig(D=D, share_data=share_data, **kw)
        return engine.make_plan(exp, config, _grid("slm_sgd", dict(seed=list(range(seeds)), L=L))).block

    assert block(1000, 8, 64) == 8 and block(100, 8, 256) == 32  # the two benchmark sizes
    assert block(200, 4, 4) == 2 and block(200, 4, 3) == 1 and block(200, 4, 1) == 1  # the main job's 4 seeds: 2 blocks
    assert block(100, 8, 256, batch_size=8) == 8 and block(10**5, 8, 64) == 1  # bigger steps, smaller blocks
    assert block(8, 4, 4096) == 32  # never past 32 streams on a CPU
    grid = _grid("slm_sgd", dict(seed=list(range(64)), L=8, eta=[0.5, 1.0]))  # shared data: 64 streams, not 128
    assert engine.make_plan(exp, SLMConfig(D=1000), grid).block == 8
    assert engine.make_plan(exp, SLMConfig(D=1000), grid, block=3).block == 3

    small = engine.dumps("slm_sgd", SLMConfig(D=64), _grid("slm_sgd", dict(seed=[0, 1, 2, 3])))
    big = engine.parse(small.replace("[0, 1, 2, 3]", str(list(range(64)))))
    out = str(tmp_path / "store")
    from jaxattn.engine._sweep import open_store

    man = open_store(engine.parse(small), engine.sweep_plan(engine.parse(small)), out, 1)
    assert man["block"] == 2 and engine.sweep_plan(big).block == 32
    assert engine.sweep_plan(big, out).block == 2  # the store's block, so extending it is allowed
    assert open_store(big, engine.sweep_plan(big, out), out, 1, extend=True)["block"] == 2


class _Accelerator:
    """A device as the engine sees it (its platform and memory), for the block rule on a CPU."""

    platform = "gpu"

    def __init__(self, limit):
        self.limit = limit

    def memory_stats(self):
        return {"bytes_limit": self.limit}


def test_accelerators_take_the_whole_grid_in_one_block_as_far_as_memory_holds():
    """On accelerators the default block is every stream of the grid, split evenly over the
    devices, unless a chunk of that size (4x the bytes per point: the workspace) exceeds the
    memory budget, a quarter of the devices' memory by default; the CPU keeps its rule."""
    from jaxattn.engine._plan import default_block, default_memory_budget

    exp = engine.get("slm_sgd")
    plan = engine.make_plan(exp, SLMConfig(D=100), _grid("slm_sgd", dict(seed=list(range(4096)), L=8)))
    per_point = 4 * exp.bytes_per_point(plan.static)
    big = [_Accelerator(141 * 10**9)]
    assert default_memory_budget(big) == 141 * 10**9 // 4
    # 4 x 829 kB a point (its state, and the test batch it draws: 256 x L x D floats) x 4096 = 13.6 GB
    assert 256 * 8 * 100 * 4 < per_point / 4 < 256 * 8 * 100 * 4 * 1.05
    assert default_block(plan, 4096, 1, big) == 4096  # 13.6 GB fit in 35 GB
    assert default_block(plan, 4096, 1, big * 4) == 1024  # four devices, a quarter each
    assert default_block(plan, 4096, 1, big, budget=1000 * per_point) == 1000  # the budget binds
    assert default_block(plan, 4096, 3, big, budget=1000 * per_point) == 333  # 3 points a stream
    assert default_block(plan, 4096, 1, big, budget=per_point // 2) == 1  # never below one stream
    assert default_block(plan, 4096, 1, jax.devices("cpu")) == 32  # the CPU's rule: 2**16 // (L D) = 81, at most 32
    copy = engine.get("copy_theory")
    cplan = engine.make_plan(copy, CopyTheoryConfig(), _grid("copy_theory", dict(P=[10.0, 20.0, 30.0])))
    assert default_block(cplan, 3, 1, big) == 3 and default_block(cplan, 3, 1, jax.devices("cpu")) == copy.block


@pytest.mark.slow  # 23 s
def test_shared_stream_is_drawn_once_per_stream_and_step(monkeypatch):
    """8 members of 2 streams: the tokens are drawn for each stream slot and step, not for each
    point (counted at run time, through a callback in an instrumented draw)."""
    import jax

    from jaxattn.slm import sgd

    draws = []
    original = sgd.draw_batch

    def counted(cfg, prior, key, step):
        jax.debug.callback(lambda n: draws.append(np.size(n)), step)  # batched over streams under vmap
        return original(cfg, prior, key, step)

    monkeypatch.setattr(sgd, "draw_batch", counted)
    engine.clear_caches()
    try:
        config = SLMConfig(D=16, times=(0.0, 5 / 16), n_test=8)
        grid = _grid("slm_sgd", dict(seed=[0, 1], H=[1, 2], eta=[0.5, 1.0], signal=[0.5, 1.0]))
        engine.run(engine.get("slm_sgd"), config, grid, block=2, group=4)
        assert sum(draws) == 2 * 5  # 2 stream slots (one block) x 5 steps: 10 draws for 16 points
        draws.clear()
        unshared = SLMConfig(D=16, times=(0.0, 5 / 16), n_test=8, share_data=False)
        engine.run(engine.get("slm_sgd"), unshared, grid, block=2)
        assert sum(draws) == 16 * 5  # one stream per point
    finally:
        engine.clear_caches()


@pytest.mark.slow  # 25 s
def test_members_of_a_stream_see_the_data_of_that_stream_alone():
    """Common random numbers: each member of a 4-member stream follows exactly the run of that
    member alone (the same stream), and two learning rates move the keys in proportion at step 1."""
    from jaxattn import slm

    config = SLMConfig(D=50, times=(0.0, 0.02), n_test=16, sigma0=0.5)
    ds = slm.train(config, seed=0, H=2, L=4, eta=[0.1, 0.2, 0.3, 0.4])
    one = slm.train(config, seed=0, H=2, L=4, eta=0.3)
    _equal(one, ds.sel(eta=[0.3]))
    d = (ds["M"].isel(time=1) - ds["M"].isel(time=0)).isel(seed=0, H=0, L=0, signal=0).values
    np.testing.assert_allclose(d[1], 2 * d[0], rtol=0.05, atol=1e-5)


@pytest.mark.slow  # 16 s
def test_cli_list_flags_and_the_equivalent_sweep_file_give_the_same_bits(tmp_path):
    from click.testing import CliRunner

    from jaxattn import io
    from jaxattn.cli import main

    r = CliRunner().invoke(main, ["--no-cache", "slm", "train", "--D", "24", "--t-max", "0.5", "--n-records", "2",
                                  "--n-test", "16", "--H", "1,2", "--eta", "0.5,1", "--seeds", "2", "--no-progress",
                                  "--out", str(tmp_path / "cli.nc"), "--figure", "", "--json"])
    assert r.exit_code == 0, r.output
    cli = io.load(tmp_path / "cli.nc")
    f = tmp_path / "same.toml"
    f.write_text(textwrap.dedent("""
        model = "slm_sgd"
        [fixed]
        D = 24
        t_max = 0.5
        n_records = 2
        n_test = 16
        [grid]
        seed = [0, 1]
        H = [1, 2]
        L = [4]
        eta = [0.5, 1.0]
        signal = [1.0]
    """))
    r = CliRunner().invoke(main, ["--no-cache", "sweep", "run", str(f), "--out", str(tmp_path / "sw"),
                                  "--no-progress"])
    assert r.exit_code == 0, r.output
    sw = io.load(tmp_path / "sw")
    _equal(sw, cli[list(sw.data_vars)])


_DEVICES = textwrap.dedent("""
    import json, sys
    import jax
    jax.config.update("jax_num_cpu_devices", 4)
    from jaxattn import engine, io
    text, out = sys.argv[1], sys.argv[2]
    sw = engine.parse(text)
    d4 = engine.run(sw.experiment, sw.config, sw.grid, devices=jax.devices())
    engine.run_sweep(sw, out + "/c1", devices=jax.devices(), chunk_size=1)
    engine.run_sweep(sw, out + "/c3", devices=jax.devices()[:2], chunk_size=3)
    io.save(d4, out + "/d4.nc")
    print("ok")
""")


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_same_bits_on_1_and_4_devices_and_any_chunk_size(name, tmp_path):
    from jaxattn import io

    case = CASES[name]
    text = engine.dumps(name, case["config"], _grid(name, case["grid"]))
    env = {**os.environ, "JAXATTN_NO_CACHE": "1"}
    r = subprocess.run([sys.executable, "-c", _DEVICES, text, str(tmp_path)], env=env, capture_output=True,
                       text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    # against this process's in-memory run, on one device: the same program as a one-device run in
    # the 4-device process, which is not run again there
    ref = engine.run(engine.get(name), case["config"], _grid(name, case["grid"]))
    for other in ("d4.nc", "c1", "c3"):
        _equal(io.load(tmp_path / other), ref)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_same_bits_with_the_program_cache_cold_warm_and_off(name, tmp_path, monkeypatch):
    """The exported programs (stored, then loaded) against the plain jitted ones; each of the
    three (init, step, finish) is stored: a program with a host callback cannot be exported, and
    JAX's persistent cache leaves it out too (the SDE's step held two, from diffrax's checks)."""
    from jaxattn.engine import cache

    case = CASES[name]
    exp, grid = engine.get(name), _grid(name, case["grid"])
    engine.clear_caches()
    off = engine.run(exp, case["config"], grid)
    monkeypatch.setitem(cache._STATE, "programs", str(tmp_path))
    runs = []
    for _ in range(2):  # cold: exported and stored; warm: loaded
        engine.clear_caches()
        runs.append(engine.run(exp, case["config"], grid))
    engine.clear_caches()
    assert len([f for f in os.listdir(tmp_path) if f.endswith(".bin")]) == 3, os.listdir(tmp_path)
    for ds in runs:
        _equal(ds, off)


# The store, its manifest and the resume are the engine's and know no model; that every experiment
# gives the same bits in any chunks is checked above. So a kill is checked on the default model,
# whose points share streams, and on the sampler with the most state (windows, ladders, exchanges)
# (each 15-35 s: a process killed and one resumed, both compiling afresh).
KILLED = ("slm_sgd", "copy_landscape")


@pytest.mark.slow
@pytest.mark.parametrize("name", KILLED)
def test_kill_and_resume(name, tmp_path):
    case = CASES[name]
    f = tmp_path / "s.toml"
    f.write_text(engine.dumps(name, case["config"], _grid(name, case["grid"]), execution={"chunk_size": 1}))
    # compiled afresh, as before the kill: a cached compile could finish the sweep first
    env = xla_cache.uncached(XLA_FLAGS="--xla_force_host_platform_device_count=2", JAXATTN_NO_CACHE="1")
    cmd = [sys.executable, "-m", "jaxattn", "sweep", "run", str(f), "--no-progress"]
    killed, full = str(tmp_path / "killed"), str(tmp_path / "full")
    engine.run_sweep(engine.parse(f.read_text()), full)  # uninterrupted, in this process (the same bits anywhere)
    n_chunks = len(json.load(open(os.path.join(full, "manifest.json")))["chunks"])
    assert n_chunks >= 3

    proc = subprocess.Popen(cmd + ["--out", killed], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    chunks = os.path.join(killed, "chunks")
    deadline = time.time() + 300
    while time.time() < deadline:
        if os.path.isdir(chunks) and len([p for p in os.listdir(chunks) if p.endswith(".nc")]) >= 1:
            break
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    survived = {p for p in os.listdir(chunks) if p.endswith(".nc") and not p.startswith(".")}
    assert 1 <= len(survived) < n_chunks, survived  # killed mid-sweep
    # a write cut short on this host by a process that is gone
    open(os.path.join(chunks, f".c000001.nc.tmp-{socket.gethostname()}-999999999-abc"), "wb").write(b"half")

    subprocess.run(cmd + ["--out", killed], env=env, check=True, capture_output=True, timeout=600)
    events = [json.loads(line) for line in open(os.path.join(killed, "log.jsonl"))]
    computed = [e for e in events if e.get("event") == "computed"]
    rerun = [e["chunk"] for e in computed if e["pid"] == events[-1]["pid"]]
    finished_before = {int(p[1:7]) for p in survived}
    assert len(rerun) == len(set(rerun)) and sorted(rerun) == sorted(set(range(n_chunks)) - finished_before)
    _equal(engine.load_store(killed), engine.load_store(full))
    assert not [p for p in os.listdir(chunks) if ".tmp-" in p]
