"""Copy-head theory: the full softmax phase diagram in one jitted call against a NumPy/SciPy loop.

The grid: 16 values of ``L`` (geometric, 16 to 512), 8 values of ``V`` (2 to 32), 400 values of
``P`` per ``(L, V)`` (0.2 to 5 times the closed-form ``P*``): 51,200 points. At each point the
action ``S(c_G)`` (Spec B, B.3b, softmax ansatz, unit hyper-parameters, N = 1) is scanned on 1024
values of ``c_G`` and its local minima are refined; per ``(L, V)`` the spinodals and ``P*`` are
refined by 40 bisection steps each. Two implementations of the same algorithm, float64 both:

  jaxattn       ``jaxattn.copyhead.softmax.softmax_phase_diagram``: one jitted call, vmapped
                over ``(L, V)`` and ``P``; Newton refinement (10 steps, autodiff derivatives);
                timed warm (compile reported apart), on one XLA device and with the ``L`` axis
                sharded over one host device per core;
  numpy/scipy   a Python loop over ``(L, V, P)``: the ``c_G`` grid vectorised in NumPy, each local
                minimum refined by ``scipy.optimize.minimize_scalar`` (bounded, on the grid
                bracket), spinodals by the same bisection, ``P*`` by ``scipy.optimize.brentq``
                on ``S_copy - S_uniform``.

The two must agree on ``P*`` (checked, printed). Run:

    python benchmarks/copy_theory_throughput.py            (about 2 minutes on 2 cores)
    python benchmarks/copy_theory_throughput.py --n-c 512  (a coarser c_G grid in both)
    python benchmarks/copy_theory_throughput.py --quick    (smoke test: 4 L, 2 V, 40 P)
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import jaxattn

jaxattn.use_cpu_cores()  # before JAX starts: one host device per core (used by the sharded run)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import scipy.optimize  # noqa: E402

from jaxattn.copyhead import (
    action,  # noqa: E402
    softmax,  # noqa: E402
)
from jaxattn.copyhead.network import CopyArch  # noqa: E402
from jaxattn.core.devices import shard_streams  # noqa: E402

N_C = 1024
N_BISECT = 40


# --- the NumPy / SciPy reference -------------------------------------------------------------

def np_action(c, P, L, V):
    """(B.3b) on the softmax ansatz, unit hyper-parameters, N = 1, cyclic (NumPy)."""
    a = 1.0 / (1.0 + (L - 1) * np.exp(-c))
    s, q, n = L * a, L * (a**2 + (1 - a) ** 2 / (L - 1)), L
    kP = P / L
    energy = L * c**2 * (L - 1) / L / 2 + kP * L / 2 - kP**2 / 2 * ((V - 1) * (s / V) ** 2 / (1 + kP * q / V)
                                                                  + (n / V) ** 2 / (1 + kP * n / V))
    return energy + V / 2 * ((V - 1) * np.log1p(kP * q / V) + np.log1p(kP * n / V))


def np_minima(P, L, V, cg):
    y = np_action(cg, P, L, V)
    idx = np.nonzero((y[1:-1] < y[:-2]) & (y[1:-1] <= y[2:]))[0] + 1
    if idx.size == 0:
        idx = np.array([int(np.argmin(y))])
    out = []
    for i in (idx[0], idx[-1]):
        lo, hi = cg[max(i - 1, 0)], cg[min(i + 1, cg.size - 1)]
        r = scipy.optimize.minimize_scalar(lambda c: np_action(c, P, L, V), bounds=(lo, hi), method="bounded",
                                           options={"xatol": 1e-10})
        out.append((r.x, r.fun))
    return out, idx.size


def np_transition(L, V, Ps):
    cg = np.linspace(-2.0, 2.0 * np.log(L) + 4.0, N_C)
    n_min = np.array([np_minima(P, L, V, cg)[1] for P in Ps])
    two = n_min >= 2
    if not two.any():
        return np.nan, False
    i0, i1 = np.argmax(two), len(Ps) - 1 - np.argmax(two[::-1])

    def bisect(pred, lo, hi):
        for _ in range(N_BISECT):
            mid = np.sqrt(lo * hi)
            lo, hi = (mid, hi) if pred(mid) else (lo, mid)
        return lo, hi

    has2 = lambda P: np_minima(P, L, V, cg)[1] >= 2  # noqa: E731
    s_lo = bisect(lambda P: not has2(P), Ps[max(i0 - 1, 0)], Ps[i0])
    s_hi = bisect(has2, Ps[i1], Ps[min(i1 + 1, len(Ps) - 1)])

    def dS(P):
        (lo, hi), _ = np_minima(P, L, V, cg)
        return hi[1] - lo[1]

    return scipy.optimize.brentq(dS, s_lo[1], s_hi[0], xtol=1e-12 * s_lo[1], maxiter=N_BISECT), True


def numpy_diagram(Ls, Vs, x):
    P_star = np.full((len(Ls), len(Vs)), np.nan)
    for i, L in enumerate(Ls):
        for j, V in enumerate(Vs):
            pcf = float(softmax.p_star_closed_form(np.float64(L), np.float64(V)))
            P_star[i, j] = np_transition(float(L), float(V), x * pcf)[0]
    return P_star


# --- jaxattn -----------------------------------------------------------------------------------

def jax_diagram(Ls, Vs, x, sharded: bool):
    with jax.enable_x64(True):
        base = action.hyper(CopyArch(16, 4))
        L_arr = jnp.asarray(Ls, jnp.float64)
        if sharded:
            L_arr = shard_streams(L_arr)
        args = (L_arr, jnp.asarray(Vs, jnp.float64), jnp.asarray(x), base)
        t = time.perf_counter()
        jax.block_until_ready(softmax.softmax_phase_diagram(*args, n_c=N_C, n_bisect=N_BISECT))
        compile_s = time.perf_counter() - t
        best = np.inf
        for _ in range(3):
            t = time.perf_counter()
            pd = jax.block_until_ready(softmax.softmax_phase_diagram(*args, n_c=N_C, n_bisect=N_BISECT))
            best = min(best, time.perf_counter() - t)
        return np.asarray(pd.P_star), np.asarray(pd.first_order) > 0.5, best, compile_s


def main():
    global N_C
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--n-c", type=int, default=N_C, help="c_G grid points (both implementations)")
    a = ap.parse_args()
    N_C = a.n_c
    nL, nV, nP = (4, 2, 40) if a.quick else (16, 8, 400)
    Ls = np.unique(np.round(np.geomspace(16, 512, nL)).astype(int))
    Vs = np.array([2, 3, 4, 6, 8, 12, 16, 32])[:: 8 // nV][:nV]
    x = np.geomspace(0.2, 5.0, nP)
    pj, fo, t1, c1 = jax_diagram(Ls, Vs, x, sharded=False)
    pj2, _, t2, c2 = jax_diagram(Ls, Vs, x, sharded=len(jax.devices()) > 1 and len(Ls) % len(jax.devices()) == 0)
    t = time.perf_counter()
    pn = numpy_diagram(Ls, Vs, x)
    tn = time.perf_counter() - t
    ok = fo & np.isfinite(pn)
    dev = float(np.max(np.abs(pj[ok] / pn[ok] - 1)))
    print(f"# {platform.machine()}, {jax.device_count()} host devices, jax {jax.__version__}, float64")
    print(f"# grid: {len(Ls)} L x {len(Vs)} V x {nP} P = {len(Ls) * len(Vs) * nP:,} points, {N_C} c_G values each")
    print(f"# P* agreement jaxattn vs numpy/scipy: max relative deviation {dev:.1e} over {int(ok.sum())} first-order points")
    print("| implementation | wall s | compile s | speed-up vs numpy/scipy |")
    print("|---|---:|---:|---:|")
    print(f"| jaxattn, 1 device | {t1:.2f} | {c1:.1f} | {tn / t1:.1f}x |")
    print(f"| jaxattn, L sharded over {jax.device_count()} devices | {t2:.2f} | {c2:.1f} | {tn / t2:.1f}x |")
    print(f"| numpy/scipy loop | {tn:.1f} | - | 1.0x |")
    print(json.dumps({"jax_1dev_s": round(t1, 3), "jax_sharded_s": round(t2, 3), "numpy_s": round(tn, 2),
                      "speedup_1dev": round(tn / t1, 1), "speedup_sharded": round(tn / t2, 1),
                      "max_rel_dev_P_star": dev, "P_star_V4": pj[:, list(Vs).index(4)].round(2).tolist()
                      if 4 in Vs else None}))


if __name__ == "__main__":
    main()
