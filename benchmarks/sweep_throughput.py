"""Sweep throughput against grid size: single-location online SGD through ``jaxattn.engine``.

For each grid size ``n`` (grid points = seeds of one configuration), one sweep of ``n`` points
in a single chunk runs twice into fresh stores; the second run is timed (the compile is cached by
then, and reported separately from the first). Time per grid point should fall while the device
has idle capacity and then stay flat: a flat tail means no per-point overhead.

Run:  python benchmarks/sweep_throughput.py                     (sizes 1 .. 4096)
      python benchmarks/sweep_throughput.py --quick             (smoke test)
      python benchmarks/sweep_throughput.py --json out.json     (also write the rows)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import tempfile
import time

import jaxattn

jaxattn.use_cpu_cores()  # as the command line does: one host device per core on a CPU

import jax  # noqa: E402

from jaxattn import engine  # noqa: E402

TEMPLATE = """
model = "slm_sgd"
[fixed]
D = {D}
t_max = {t_max}
n_records = 4
n_test = 200
L = {L}
H = {H}
[grid]
seed = {{ range = [0, {n}] }}
[execution]
block = {block}
chunk_size = {chunk}
"""


def one(n: int, args, root: str) -> dict:
    devs = jax.local_devices()
    # a block per device where the grid is small (no padding), else blocks of args.block
    block = max(1, min(-(-n // len(devs)), args.block))
    unit = block * len(devs)
    chunk = -(-n // unit) * unit  # the whole grid in one chunk
    s = engine.parse(TEMPLATE.format(D=args.D, t_max=args.t_max, L=args.L, H=args.H, n=n, block=block, chunk=chunk))
    t0 = time.perf_counter()
    engine.run_sweep(s, os.path.join(root, f"a{n}"))
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    rep = engine.run_sweep(s, os.path.join(root, f"b{n}"))
    warm = time.perf_counter() - t0
    steps = int(round(args.t_max * args.D))
    return dict(points=n, block=block, devices=rep.n_devices, padded=chunk, first_s=first, warm_s=warm,
                ms_per_point=1e3 * warm / n, steps_per_s=n * steps / warm)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--D", type=int, default=100)
    p.add_argument("--L", type=int, default=8)
    p.add_argument("--H", type=int, default=4)
    p.add_argument("--t-max", type=float, default=5.0)
    p.add_argument("--block", type=int, default=256, help="largest block (points vmapped together)")
    p.add_argument("--sizes", default="1,4,16,64,256,1024,4096")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", default=None)
    args = p.parse_args()
    sizes = [1, 8] if args.quick else [int(x) for x in args.sizes.split(",")]
    if args.quick:
        args.t_max = 0.5
    dev = jax.local_devices()[0]
    print(f"# {platform.machine()}, {os.cpu_count()} cores, jax {jax.__version__}, {len(jax.local_devices())} x "
          f"{dev.device_kind} ({dev.platform}); D={args.D}, L={args.L}, H={args.H}, t_max={args.t_max} "
          f"({int(round(args.t_max * args.D))} steps), bayes_softmax")
    print("| grid points | block | first run (s, with compile) | warm run (s) | ms per point | SGD steps x runs / s |")
    print("|---|---|---|---|---|---|")
    rows = []
    root = tempfile.mkdtemp(prefix="jaxattn-sweep-bench-")
    try:
        for n in sizes:
            r = one(n, args, root)
            rows.append(r)
            print(f"| {n} | {r['block']} | {r['first_s']:.2f} | {r['warm_s']:.3f} | {r['ms_per_point']:.3f} | "
                  f"{r['steps_per_s']:,.0f} |", flush=True)
            if args.json:  # after every size, so that a run stopped by a time limit keeps the sizes done
                with open(args.json + ".tmp", "w") as f:
                    json.dump({"device": str(dev.device_kind), "platform": dev.platform, "rows": rows}, f, indent=1)
                os.replace(args.json + ".tmp", args.json)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
