"""Order-parameter ODEs at equal accuracy: the cost of ``max |dM| <= 1e-3`` at ``t = 10``.

The grid of ``benchmarks/slm_ode_throughput.py`` (Bayes-softmax, one-hot ``F = 2, nu = 4``,
``H = 2, L = 4``, 4 random starts of ``D = 1000`` x 8 values of ``eta`` in ``[0.2, 2]``), integrated
to ``t = 10`` with banks of ``n`` score draws (times 2 latents):

  reference  a scrambled Sobol bank of 2^18 draws; its own error is bounded by its distance to an
             independent one of 2^17 draws (another scramble);
  jaxattn    ``slm.integrate`` with a Sobol and with a Monte Carlo bank of n = 2^10 ..
             2^16, warm (compile excluded);
  scipy      ``solve_ivp`` RK45 one point at a time with the NumPy right-hand side of
             ``slm_ode_throughput.py`` (read in blocks of 2^16 draws), on a plain Monte Carlo bank
             of the size that reaches 1e-3.

The error of a bank is ``max |M - M_ref|`` at ``t = 10`` over the grid. Plain Monte Carlo's error
falls as ``n^-1/2``; its size for 1e-3, ``n_mc``, is fitted to its measured errors at 2^10..2^16
(rounded up to a power of 2) and checked by integrating, with a bank of that size, the grid point
where Monte Carlo errs most; where that point still misses 1e-3, scipy needs more draws and the
ratio printed is a lower bound. scipy's time on the grid is measured in two parts: its right-hand-side
evaluations per point (every grid point solved on a 2^10-draw bank: the same ODE to 1e-2, so the
same steps) times the measured time of one NumPy evaluation on ``n_mc`` draws. A full scipy
solve on ``n_mc`` draws takes minutes per point, hours for the grid.

Run:  python benchmarks/slm_ode_accuracy.py            (about 25 minutes on 2 cores)
      python benchmarks/slm_ode_accuracy.py --quick    (a smoke test: small banks, a minute)
"""

from __future__ import annotations

import os
import platform
import sys
import time

import jaxattn

jaxattn.use_cpu_cores()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import scipy  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from slm_ode_throughput import ATOL, NU, RTOL, D, F, H, L, np_rhs, scipy_point  # noqa: E402

from jaxattn import slm  # noqa: E402
from jaxattn.slm import ode as slm_ode  # noqa: E402
from jaxattn.slm import priors  # noqa: E402
from jaxattn.slm.risk import make_bank  # noqa: E402

TARGET = 1e-3
SIZES = [2**k for k in range(10, 17)]
REF, CHECK = 2**18, 2**17
CHUNK = 2**16  # NumPy draws per block
ACT = "bayes_softmax"


def main():
    global SIZES, REF, CHECK
    quick = "--quick" in sys.argv[1:]
    if quick:
        SIZES, REF, CHECK = [2**8, 2**9], 2**11, 2**10
    n = 32
    with jax.enable_x64(True):
        prior = priors.astype(priors.onehot(F, NU), jnp.float64)
        n_starts = 4  # the grid: 4 starts x 8 values of eta, point i = (start i // 8, eta i % 8)
        etas = np.linspace(0.2, 2.0, n // n_starts)
        y0 = slm_ode.random_initial_conditions(jax.random.key(2), H, F, D=D, n=n_starts)
        points = [(i // len(etas), float(etas[i % len(etas)])) for i in range(n)]

        def solve(n_bank, bank_seed, method, seed=None, eta=None, repeats=1):
            """M at t = 10 per point, and the best warm wall time of ``repeats`` runs (the first
            compiles), on the bank ``make_bank(..., n=n_bank, key=key(bank_seed), method=method)``;
            the whole grid unless ``seed`` and ``eta`` pick a point."""
            seed, eta = (range(n_starts), list(etas)) if seed is None else (seed, eta)
            config = slm.SLMODEConfig(D=D, prior=prior, activation=ACT, times=(0.0, 10.0), n_bank=n_bank,
                                      bank_seed=bank_seed, bank_method=method, rtol=RTOL, atol=ATOL)
            s = slm.integrate(config, start=y0, seed=seed, eta=eta)
            best = np.inf
            for _ in range(repeats):
                t0 = time.perf_counter()
                s = slm.integrate(config, start=y0, seed=seed, eta=eta)
                best = min(best, time.perf_counter() - t0)
            assert not bool(s["diverged"].any())
            return s["M"].isel(time=-1).values.reshape(-1, H, F), best

        t0 = time.perf_counter()
        M_ref, _ = solve(REF, 99, "sobol", repeats=0)
        M_chk, _ = solve(CHECK, 98, "sobol", repeats=0)
        ref_err = float(np.abs(M_chk - M_ref).max())
        print(f"# reference: Sobol 2^{REF.bit_length() - 1}; max|dM| to an independent Sobol "
              f"2^{CHECK.bit_length() - 1}: {ref_err:.1e} "
              f"({time.perf_counter() - t0:.0f} s); |M| up to {np.abs(M_ref).max():.2f}", flush=True)

        rows, per_point = {}, {}
        for method in ("sobol", "mc"):
            for m in SIZES:
                M, t = solve(m, 1, method, repeats=2 if m <= 2**13 else 1)
                per_point[method, m] = np.abs(M - M_ref).max(axis=(1, 2))
                rows[method, m] = (float(per_point[method, m].max()), t)
                print(f"# jaxattn {method:5s} n = {m:6d}: max|dM| = {rows[method, m][0]:.2e}, {t:.2f} s", flush=True)

        ok_q = [m for m in SIZES if rows["sobol", m][0] <= TARGET]
        n_q = ok_q[0] if ok_q else None
        # Monte Carlo's n^-1/2 law through its measured errors (a geometric mean of err * sqrt(n))
        c = float(np.exp(np.mean([np.log(rows["mc", m][0] * np.sqrt(m)) for m in SIZES])))
        n_mc = 2 ** int(np.ceil(np.log2((c / TARGET) ** 2)))
        n_mc = min(n_mc, 2**12) if quick else n_mc
        worst = int(np.argmax(per_point["mc", SIZES[-1]]))
        t0 = time.perf_counter()
        M_big, _ = solve(n_mc, 1, "mc", seed=points[worst][0], eta=points[worst][1], repeats=0)
        err_big = float(np.abs(M_big[0] - M_ref[worst]).max())
        print(f"# Monte Carlo: err ~ {c:.3f} n^-1/2 -> n_mc = 2^{int(np.log2(n_mc))} for {TARGET:g}; at the "
              f"worst grid point (eta = {points[worst][1]:.2f}) n_mc gives max|dM| = {err_big:.2e} "
              f"({time.perf_counter() - t0:.0f} s)", flush=True)

        # scipy: evaluations per point (a 2^10-draw bank) x the cost of one evaluation on n_mc draws
        y0_np = [np.asarray(v, np.float64) for v in y0]
        small = tuple(np.asarray(x) for x in make_bank(prior, L, H, n=2**10, key=jax.random.key(1), method="mc"))
        nfev = []
        for i in range(n):
            j, eta = points[i]
            s = scipy_point(y0_np[0][j], y0_np[1][j], y0_np[2][j], eta, small, np.array([0.0, 10.0]), ACT)
            assert s.success, s.message
            nfev.append(s.nfev)
        big_np = tuple(np.asarray(x) for x in make_bank(prior, L, H, n=n_mc, key=jax.random.key(1), method="mc"))
        state = [v[points[worst][0]] for v in y0_np]
        np_rhs(*state, points[worst][1], *big_np, ACT, CHUNK)  # warm the pages
        reps = 3
        t0 = time.perf_counter()
        for _ in range(reps):
            np_rhs(*state, points[worst][1], *big_np, ACT, CHUNK)
        t_eval = (time.perf_counter() - t0) / reps
        t_sp = t_eval * sum(nfev)
        print(f"# scipy: {sum(nfev)} RHS evaluations over the grid ({min(nfev)} to {max(nfev)} per point); "
              f"one NumPy evaluation on {n_mc} x 2 draws: {t_eval:.2f} s", flush=True)

    print(
        f"# {platform.machine()}, {os.cpu_count()} cores, jax {jax.__version__}, scipy {scipy.__version__}, "
        f"numpy {np.__version__}, {len(jax.devices())} XLA device(s); rtol={RTOL:g}, atol={ATOL:g}"
    )
    print("| bank | draws n (x 2 latents) | max abs dM at t = 10 | jaxattn wall time (s) |")
    print("|---|---:|---:|---:|")
    for (method, m), (e, t) in rows.items():
        print(f"| {'Monte Carlo' if method == 'mc' else 'scrambled Sobol'} | {m} | {e:.2e} | {t:.2f} |")
    print(f"# reference error bound (Sobol {REF} against {CHECK}): {ref_err:.1e}")
    print(f"# smallest Sobol n under {TARGET:g}: {n_q}; Monte Carlo needs n_mc = {n_mc} (fitted; {err_big:.2e} "
          f"at the worst point)")
    if n_q is not None:
        t_q = rows["sobol", n_q][1]
        # where n_mc still misses the target at the worst point, scipy needs more draws: a lower bound
        bound = "" if err_big <= TARGET else f" (a lower bound: n_mc gives {err_big:.1e} at the worst point)"
        print(f"# at max|dM| <= {TARGET:g}: scipy (Monte Carlo n = {n_mc}) {t_sp:.0f} s; jaxattn (Sobol n = {n_q}) "
              f"{t_q:.2f} s: {t_sp / t_q:.0f}x{bound}; target: >= 20x")


if __name__ == "__main__":
    main()
