"""pymbar's MBAR solve with its JAX solvers (pymbar's choice whenever JAX is installed) against its
NumPy ones (what ``jaxattn.core.umbrella`` runs), on pools of harmonic windows of the size the
copy head's sampled ``P*`` solves: ``K`` windows evenly spaced over ``[-1, 3]``, ``n`` draws
each from the window's own Gaussian. Each backend runs in a fresh process; each pool is solved
twice, the first time cold (for JAX, a compile of its solvers for that number of draws), and
the free energies of the two backends are compared.

Run:  python benchmarks/mbar_solvers.py           (K = 56 with 600 and 2400 draws, K = 24 with 200)
      python benchmarks/mbar_solvers.py --quick   (K = 24 with 200 draws)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import numpy as np

POOLS = ((56, 2400), (56, 600), (24, 200))


def solve(backend: str, pools) -> list[dict]:
    """Solve each pool twice with ``backend`` ("jax": pymbar as imported; "numpy": as jaxattn runs it)."""
    import jax

    if backend == "numpy":
        from jaxattn.core import umbrella

        pymbar = umbrella._pymbar()
    else:
        import pymbar

    rows = []
    for K, n in pools:
        c = np.linspace(-1.0, 3.0, K)
        kappa = 1.0 / (c[1] - c[0]) ** 2
        x = np.concatenate([np.random.default_rng(k).normal(ck, 1 / np.sqrt(kappa), n) for k, ck in enumerate(c)])
        u_kn = 0.5 * kappa * (x[None, :] - c[:, None]) ** 2
        times = []
        for _ in range(2):
            t = time.perf_counter()
            with jax.enable_x64(True):  # pymbar's JAX solvers would switch it on globally
                f = np.asarray(pymbar.MBAR(u_kn, np.full(K, n)).f_k)
            times.append(time.perf_counter() - t)
        rows.append(dict(K=K, n=n, cold_s=times[0], warm_s=times[1], f=f.tolist()))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="one small pool")
    ap.add_argument("--backend", choices=("jax", "numpy"), help=argparse.SUPPRESS)  # the child process
    args = ap.parse_args()
    pools = POOLS[-1:] if args.quick else POOLS
    if args.backend:
        print(json.dumps(solve(args.backend, pools)))
        return
    out = {}
    for backend in ("jax", "numpy"):
        cmd = [sys.executable, __file__, "--backend", backend] + (["--quick"] if args.quick else [])
        r = subprocess.run(cmd, capture_output=True, text=True, check=True)
        out[backend] = json.loads(r.stdout.strip().splitlines()[-1])
    print("| K windows | draws each | JAX cold s | JAX warm s | NumPy cold s | NumPy warm s | max abs diff of f_k |")
    print("|---|---|---|---|---|---|---|")
    for j, m in zip(out["jax"], out["numpy"]):
        diff = float(np.max(np.abs(np.subtract(j["f"], m["f"]))))
        print(
            f"| {j['K']} | {j['n']} | {j['cold_s']:.2f} | {j['warm_s']:.2f} | {m['cold_s']:.2f} | {m['warm_s']:.2f} "
            f"| {diff:.1e} |"
        )


if __name__ == "__main__":
    main()
