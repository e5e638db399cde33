"""Run every benchmark of this folder, one after the other, and write one dated JSON of what each
printed (its tables), how long it took, and whether it ran, with the revision and the machine.

Run:  python benchmarks/run_all.py                 (every benchmark at full size: about an hour on 2 cores)
      python benchmarks/run_all.py --quick         (each one's smoke test: a few minutes; CI runs it)
      python benchmarks/run_all.py --only slm_throughput,slm_ode_throughput

The JSON goes to ``benchmarks/results/DATE[-quick].json`` (``--out`` to choose). Each entry's
``stdout`` holds the markdown table that ``benchmarks/README.md`` shows, so a table there is
copied from one such file, whose name and revision it cites. A benchmark that fails is recorded
(its exit code and the tail of its error) and the others still run; the exit code is 1 then.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BENCHMARKS = [
    "slm_throughput",
    "slm_ode_throughput",
    "slm_ode_accuracy",
    "copy_throughput",
    "copy_theory_throughput",
    "copy_landscape_speed",
    "sweep_throughput",
    "grid_fixed_costs",
    "engine_paths",
    "mbar_solvers",
]
"""Every benchmark script, in the order run (a test checks that none is left out)."""


def _revision() -> dict:
    def git(*args):
        return subprocess.run(["git", *args], cwd=HERE, capture_output=True, text=True).stdout.strip()

    return {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain", "--untracked-files=no"))}


def _machine() -> dict:
    import jax

    return {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "backend": jax.default_backend(),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="each benchmark's smoke test (its --quick)")
    ap.add_argument("--only", default=None, help="comma-separated benchmark names (default: all)")
    ap.add_argument("--out", default=None, help="the JSON file (default: benchmarks/results/DATE[-quick].json)")
    args = ap.parse_args(argv)
    names = BENCHMARKS if args.only is None else [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        ap.error(f"--only: unknown benchmark {', '.join(unknown)} (known: {', '.join(BENCHMARKS)})")
    today = datetime.date.today().isoformat()
    out = args.out or os.path.join(HERE, "results", f"{today}{'-quick' if args.quick else ''}.json")
    results = {}
    for name in names:
        cmd = [sys.executable, os.path.join(HERE, f"{name}.py")] + (["--quick"] if args.quick else [])
        print(f"run_all: {name} ...", flush=True)
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=os.path.dirname(HERE))
        seconds = round(time.perf_counter() - t0, 1)
        results[name] = {
            "command": " ".join(["python", f"benchmarks/{name}.py"] + cmd[2:]),
            "seconds": seconds,
            "returncode": proc.returncode,
            "stdout": proc.stdout,
            "stderr_tail": proc.stderr[-2000:] if proc.returncode else "",
        }
        print(f"run_all: {name}: {'ok' if proc.returncode == 0 else f'FAILED ({proc.returncode})'} in {seconds} s")
    doc = {"date": today, "quick": args.quick, "revision": _revision(), "machine": _machine(), "results": results}
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
    print(f"run_all: wrote {out}")
    return 1 if any(r["returncode"] for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
