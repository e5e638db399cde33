"""One grid through the in-memory API and through a sweep, and the compile cost with a cold and a
warm persistent compilation cache.

The grid: 4 ``H`` x 4 ``eta`` x 4 seeds, Bayes-softmax, ``D = 500``, ``t_max = 100``,
one-hot ``F = 2``, ``nu = 9`` (64 runs, common random numbers: 4 data streams of 16 members).

In this process (one XLA host device per core, as the command line has it):

- **API**: ``jaxattn.slm.train`` twice; the second call is the run time; the compile time is what
  JAX reports of tracing, lowering and compiling (``jax.monitoring`` events, summed over the
  devices, which compile concurrently);
- **sweep**: ``jaxattn.engine.run_sweep`` of the same grid from a sweep file into a fresh store (its
  programs were compiled by the API calls: same shapes), and the same once more into a second
  store: the run time of a sweep;
- **block shapes**: the API run at other ``(block, group)`` settings, for the table of what the
  default costs.

Then two fresh processes run the sweep with ``JAXATTN_CACHE_DIR`` set to one new folder: the
first process finds it empty (cold compile, which it fills), the second finds it full (its
"compile" is tracing, lowering and loading the compiled programs from disk).

Run:  python benchmarks/engine_paths.py                  (about 5 minutes on 2 cores)
      python benchmarks/engine_paths.py --old 4c38efc     (and the revision before the engine)
      python benchmarks/engine_paths.py --quick          (a smaller grid: smoke test)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time

import jaxattn

jaxattn.use_cpu_cores()

import jax  # noqa: E402
import numpy as np  # noqa: E402

from jaxattn import engine, slm  # noqa: E402

SWEEP = """
model = "slm_sgd"
[fixed]
D = {D}
t_max = {t_max}
activation = "bayes_softmax"
prior = {{ family = "onehot", F = 2, nu = 9.0 }}
[grid]
seed = [0, 1, 2, 3]
H = [1, 2, 3, 4]
eta = [0.25, 0.5, 1.0, 2.0]
"""

COMPILE_EVENTS = ("/jax/core/compile/jaxpr_trace_duration", "/jax/core/compile/jaxpr_to_mlir_module_duration",
                  "/jax/core/compile/backend_compile_duration")

CHILD = textwrap.dedent("""
    import json, sys, time
    import jax
    import jaxattn
    jaxattn.use_cpu_cores()
    from jaxattn import engine
    EVENTS = %r
    spent = dict.fromkeys(EVENTS, 0.0)
    jax.monitoring.register_event_duration_secs_listener(
        lambda e, d, **kw: spent.__setitem__(e, spent[e] + d) if e in EVENTS else None)
    engine.cache.enable()
    s = engine.parse(open(sys.argv[1]).read())
    t0 = time.perf_counter()
    engine.run_sweep(s, sys.argv[2])
    print(json.dumps([time.perf_counter() - t0, [spent[e] for e in EVENTS]]))
""" % (COMPILE_EVENTS,))


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--old", default=None, help="also time this earlier revision (e.g. 4c38efc) the same way")
    args = ap.parse_args()
    D, t_max = (100, 10.0) if args.quick else (500, 100.0)
    text = SWEEP.format(D=D, t_max=t_max)
    s = engine.parse(text)
    config = s.config
    grid = dict(seed=[0, 1, 2, 3], H=[1, 2, 3, 4], eta=[0.25, 0.5, 1.0, 2.0])
    root = tempfile.mkdtemp()
    spent = [0.0]
    jax.monitoring.register_event_duration_secs_listener(
        lambda e, d, **kw: spent.__setitem__(0, spent[0] + d) if e in COMPILE_EVENTS else None)
    try:
        _, _ = timed(lambda: slm.train(config, **grid))
        api_compile = spent[0]
        api, ds = timed(lambda: slm.train(config, **grid))
        sw1, _ = timed(lambda: engine.run_sweep(s, os.path.join(root, "s1")))
        sw2, _ = timed(lambda: engine.run_sweep(s, os.path.join(root, "s2")))
        loaded = engine.load_store(os.path.join(root, "s2"))
        same = all(np.array_equal(loaded[k].values, ds[k].isel(L=0, signal=0).values, equal_nan=True)
                   for k in ("M", "Q", "b", "error"))
        shapes = []
        for block, group in ((2, 1), (2, 2), (2, 4), (2, 16), (4, 16)):
            slm.train(config, block=block, group=group, **grid)  # compile
            t, _ = timed(lambda: slm.train(config, block=block, group=group, **grid))
            shapes.append((block, group, t))

        cache = os.path.join(root, "xla")
        f = os.path.join(root, "s.toml")
        open(f, "w").write(text)
        env = {**os.environ, "JAXATTN_CACHE_DIR": cache}
        env.pop("JAXATTN_NO_CACHE", None)
        proc = []
        for i in range(2):
            r = subprocess.run([sys.executable, "-c", CHILD, f, os.path.join(root, f"p{i}")], env=env,
                               capture_output=True, text=True, check=True)
            proc.append(json.loads(r.stdout.strip().splitlines()[-1]))  # [wall, compile]
    finally:
        shutil.rmtree(root, ignore_errors=True)

    n_dev = len(jax.local_devices())
    print(f"# {platform.machine()}, {os.cpu_count()} cores, jax {jax.__version__}, {n_dev} XLA host devices, "
          f"D = {D}, t_max = {t_max:g}, 64 runs in 4 streams; default block shape "
          f"(block, group) = ({slm.SLM_SGD.block}, {slm.SLM_SGD.group})")
    print("| path | run (s) | compile (s) | run / API run |")
    print("|---|---|---|---|")
    print(f"| API, `jaxattn.slm.train` | {api:.2f} | {api_compile:.2f} | 1.00 |")
    print(f"| sweep, `jaxattn.engine.run_sweep` (programs compiled) | {sw2:.2f} | - | {sw2 / api:.2f} |")
    print(f"| sweep, first call in this process | {sw1:.2f} | - | {sw1 / api:.2f} |")
    for i, (wall, comp) in enumerate(proc):
        label = "cold cache (empty folder)" if i == 0 else "warm cache (filled by the first)"
        print(f"| sweep in a new process, {label}: wall, compile | {wall:.2f} | {sum(comp):.2f} | - |")
    cold, warm = sum(proc[0][1]), sum(proc[1][1])
    print("\n| new process | tracing (s) | lowering to StableHLO (s) | XLA compile or cache load (s) |")
    print("|---|---|---|---|")
    for i, (_, comp) in enumerate(proc):
        print(f"| {'cold' if i == 0 else 'warm'} cache | " + " | ".join(f"{x:.2f}" for x in comp) + " |")
    print(f"\nwarm-cache compile / cold compile: {warm / cold:.1%}")
    print("\n| block | group | API run (s) |")
    print("|---|---|---|")
    for b, g, t in shapes:
        print(f"| {b} | {g} | {t:.2f} |")
    print(f"\nsweep and API bit-identical: {same}")
    if args.old:
        print("\n" + old_main(args.old, D, t_max))
    assert same


OLD = textwrap.dedent("""
    import sys, time, tempfile
    import jaxattn
    jaxattn.use_cpu_cores()
    from jaxattn import engine, slm
    from jaxattn.slm.priors import onehot
    D, t_max = int(sys.argv[1]), float(sys.argv[2])
    cfg = slm.SLMConfig(D=D, t_max=t_max, prior=onehot(2, 9.0), activation="bayes_softmax")
    grid = dict(seed=[0, 1, 2, 3], H=[1, 2, 3, 4], eta=[0.25, 0.5, 1.0, 2.0])
    slm.train(cfg, **grid)
    t0 = time.perf_counter(); slm.train(cfg, **grid); api = time.perf_counter() - t0
    s = engine.parse(open(sys.argv[3]).read())
    t0 = time.perf_counter(); engine.run_sweep(s, tempfile.mkdtemp() + "/a"); sw1 = time.perf_counter() - t0
    t0 = time.perf_counter(); engine.run_sweep(s, tempfile.mkdtemp() + "/b"); sw2 = time.perf_counter() - t0
    print(api, sw1, sw2)
""")


def old_main(rev: str, D: int, t_max: float) -> str:
    """The same grid through the API and a sweep of an earlier revision (``git archive``), run in
    a subprocess on this machine now: the before of this table."""
    tmp = tempfile.mkdtemp()
    try:
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        archive = subprocess.run(["git", "-C", here, "archive", rev, "jaxattn"], capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
        f = os.path.join(tmp, "s.toml")
        open(f, "w").write(SWEEP.format(D=D, t_max=t_max).replace('[grid]', '[grid]\n'))
        env = {**os.environ, "PYTHONPATH": tmp}
        r = subprocess.run([sys.executable, "-c", OLD, str(D), str(t_max), f], env=env, capture_output=True,
                           text=True, check=True, cwd=tmp)
        api, sw1, sw2 = map(float, r.stdout.split()[-3:])
        return (f"revision {rev}: API run {api:.2f} s; sweep {sw1:.2f} s (first, compiles per device), "
                f"{sw2:.2f} s (second): sweep / API = {sw2 / api:.1f}x")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
