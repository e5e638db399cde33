"""A grid's fixed costs against its number of points: one-step runs, where the work per point is
almost nothing and what is left is what the engine pays per point (deriving the inputs, laying
out the slots, assembling the Dataset) and per compile.

For each experiment and grid size (points = seeds, or the experiment's own point axis), a run
of the smallest length is timed cold (first run in the process, program cache off: trace and
compile included) and warm (best of ``--repeats``). The warm slope between the smallest and the
largest grid is the cost of one more point.

Run:  python benchmarks/grid_fixed_costs.py                 (slm_sgd, 64 and 4096 points)
      python benchmarks/grid_fixed_costs.py --all           (every registered experiment)
      python benchmarks/grid_fixed_costs.py --quick         (8 and 64 points)
      python benchmarks/grid_fixed_costs.py --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

os.environ["JAXATTN_NO_CACHE"] = "1"  # the cold runs compile (no program kept across processes)

import jaxattn  # noqa: E402

jaxattn.use_cpu_cores()

import jax  # noqa: E402

from jaxattn import engine  # noqa: E402


def cases() -> dict:
    """Experiment name -> (config, fixed axes, the axis grown, its values for n points): each at
    its smallest length (one SGD step, a few draws), so that per-point fixed costs dominate."""
    from jaxattn import copyhead, slm

    def seeds(n):
        return list(range(n))

    return {
        "slm_sgd": (slm.SLMConfig(D=100, t_max=0.01, n_records=1, n_test=1), dict(H=4, L=8), "seed", seeds),
        "slm_ode": (slm.SLMODEConfig(D=100, t_max=0.01, n_records=1, n_bank=64), dict(H=2, L=4), "seed", seeds),
        "copy_adam": (copyhead.CopyConfig(L=4, V=2, n_steps=1, n_test=8), dict(P=8), "seed", seeds),
        "copy_sgld": (copyhead.CopySGLDConfig(L=4, V=2, n_steps=1, burn_in=1, thin=1, n_test=8), dict(P=8), "chain",
                      seeds),
        "copy_theory": (copyhead.CopyTheoryConfig(), dict(), "P", lambda n: [10.0 + i for i in range(n)]),
    }


def time_one(name: str, n: int, repeats: int) -> dict:
    """One grid size of one experiment, in this process: the first run (trace and compile
    included) and the best warm run."""
    config, fixed, axis, values = cases()[name]
    exp = engine.get(name)
    grid = {axis: values(n)}
    t0 = time.perf_counter()
    engine.run(exp, config, fixed=fixed, **grid)
    cold = time.perf_counter() - t0
    warm = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        engine.run(exp, config, fixed=fixed, **grid)
        warm.append(time.perf_counter() - t0)
    return dict(experiment=name, points=n, cold_s=cold, warm_s=min(warm))


def time_case(name: str, sizes, repeats: int) -> list[dict]:
    """Each size in a fresh process (a cold run compiles everything, eager operations too)."""
    rows = []
    for n in sizes:
        out = subprocess.run([sys.executable, __file__, "--one", name, str(n), "--repeats", str(repeats)],
                             capture_output=True, text=True, check=True).stdout
        r = json.loads(out.strip().splitlines()[-1])
        rows.append(r)
        print(f"| {name} | {n} | {r['cold_s']:.2f} | {r['warm_s']:.4f} |", flush=True)
    lo, hi = rows[0], rows[-1]
    slope = (hi["warm_s"] - lo["warm_s"]) / (hi["points"] - lo["points"])
    compile_ratio = (hi["cold_s"] - hi["warm_s"]) / max(1e-9, lo["cold_s"] - lo["warm_s"])
    print(f"# {name}: {1e6 * slope:.1f} us per extra point (warm); cold-minus-warm at {hi['points']} / at "
          f"{lo['points']}: {compile_ratio:.2f}", flush=True)
    for r in rows:
        r.update(us_per_extra_point=1e6 * slope, compile_ratio=compile_ratio)
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--all", action="store_true", help="every experiment in the table, not only slm_sgd")
    p.add_argument("--sizes", default="64,4096")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", default=None)
    p.add_argument("--one", nargs=2, metavar=("EXPERIMENT", "POINTS"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        print(json.dumps(time_one(args.one[0], int(args.one[1]), args.repeats)))
        return
    sizes = [8, 64] if args.quick else [int(x) for x in args.sizes.split(",")]
    dev = jax.local_devices()[0]
    print(f"# {platform.machine()}, {os.cpu_count()} cores, jax {jax.__version__}, {len(jax.local_devices())} x "
          f"{dev.device_kind} ({dev.platform}); program cache off")
    print("| experiment | grid points | first run (s, with compile) | warm run (s) |")
    print("|---|---|---|---|")
    names = list(cases()) if args.all else ["slm_sgd"]
    rows = []
    for name in names:
        rows += time_case(name, sizes, args.repeats)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
