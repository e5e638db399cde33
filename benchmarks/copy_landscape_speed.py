"""Umbrella sampling of the copy head's posterior: the ``P*`` search before replica exchange and
reweighting against today's, at ``N = 20, L = 32, V = 4`` on data set 0, each the scan
``jaxattn.copyhead.landscape.landscape`` runs by default (``jaxattn copy landscape --N 20``), in
one process:

  independent   each window's chains on their own (``exchange=False``), 4 chains per window, the
                scan of five ``P`` around the theory's ``P*`` and secant steps until a pair of
                sampled ``P`` brackets the crossing (``reweight_span=0``): the defaults before;
  exchange      today's defaults: 2 ladders of windows swapping neighbours every 10 steps, the
                scan starting at the theory's ``P*`` alone, each ``P``'s draws reweighted to
                ``P +- 12``, stopping as soon as one curve crosses zero;
  hmc           the same scan with HMC in the windows (``kernel="hmc"``, 4 leapfrog steps a
                step at step 0.04, exact): 100 burn-in steps, 200 draws every 3 steps, swaps
                every 2 steps (3150 gradients a chain against SGLD's 3000: 2800 in the steps and
                one per window at each swap round, which refreshes the moved replicas' densities).

The SGLD chains run 1000 burn-in steps and 200 draws every 10 steps. Per scheme: the wall time of the
scan (the first scheme's compiles and theory included: the second finds the theory's caches warm,
which favours it), the ``P`` sampled, the sampled ``P*`` and its standard error, the time at equal
error ``t (se / 0.5)^2`` (the time to a standard error of 0.5 if the error fell as
``1 / sqrt(time)``; a fixed cost does not fall, so this favours the scheme with the smaller
error), and the effective samples of the windows' coordinate per second per window (each
window's effective sample size over its chains, summed over the scan's ``P``, averaged over
windows). ``speedup`` is the ratio of the times at equal error of the independent scheme and the
fastest new one (``hmc``; ``p_star_new`` is its ``P*``), ``speedup_exchange`` that of today's
default, ``wall_time_ratio`` of the wall times (independent over ``hmc``). A step's cost does not
grow with ``P`` (the action sees the data through the token co-occurrence counts): the full run
also times one short profile at ``P = 340`` and at ``3400``.

``--kernels`` instead compares the windows' kernels on long runs at ``P = 330`` (the scan's one
``P``): SGLD at steps 0.025, 0.05 (the default) and 0.1, MALA at 0.1 and HMC at the ``hmc``
row's settings, each with 4 ladders of 800 draws, so that each ``P*`` has a standard error near
0.1 and a step's bias shows against the exact kernels.

Run:  python benchmarks/copy_landscape_speed.py [--json]      (about 5 minutes on 2 cores)
      python benchmarks/copy_landscape_speed.py --kernels     (about 9 minutes on 2 cores)
      python benchmarks/copy_landscape_speed.py --quick       (a smoke test: L = 24, short chains,
                                                              the old scheme at two P)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import numpy as np

from jaxattn.copyhead import landscape
from jaxattn.copyhead.network import CopyArch

INDEPENDENT = dict(exchange=False, n_chains=4, reweight_span=0)
EXCHANGE: dict = {}  # today's defaults
HMC = dict(kernel="hmc", n_leapfrog=4, step=0.04, burn_in=100, thin=3, swap_every=2)
TARGET_SE = 0.5


def scheme(arch: CopyArch, N: float, kw: dict, P: list[int] | None = None) -> dict:
    """One scheme's scan (default: its default scan), timed, with its ``P*``, errors and the
    windows' health."""
    t = time.perf_counter()
    r = landscape.landscape(arch, P, N, **kw)
    dt = time.perf_counter() - t
    ess = np.sum([np.nan_to_num(p.ess) for p in r.profiles], axis=0)  # per window, over the scan
    se = r.p_star_sampled_err
    diag = landscape.window_diagnostics(r.profiles)
    return dict(
        settings=kw,
        P=r.P,
        seconds=dt,
        p_star=r.p_star_sampled,
        p_star_err=se,
        seconds_at_equal_error=dt * (se / TARGET_SE) ** 2 if np.isfinite(se) else float("nan"),
        ess_per_s_per_window=float(np.mean(ess)) / dt,
        max_window_rhat=max(diag["max_window_rhat"]),
        min_swap_acceptance=diag["min_swap_acceptance"],
        passages=diag["passages"],
    )


KERNELS = {
    "sgld step 0.025": dict(step=0.025),
    "sgld step 0.05": {},
    "sgld step 0.1": dict(step=0.1),
    "mala step 0.1": dict(kernel="mala", step=0.1),
    "hmc": HMC,
}


def kernels(arch: CopyArch, N: float) -> dict:
    """Each kernel of :data:`KERNELS` at ``P = 330`` alone, 4 ladders of 800 draws: ``P*`` and its
    error, wall time, the gradients a window's chain takes (HMC: ``n_leapfrog`` a step and one
    per swap round, which refreshes the moved replicas' cached densities), and the windows'
    effective sample size per thousand gradients (mean and smallest)."""
    out = {}
    for name, kw in KERNELS.items():
        kw = dict(kw, n_chains=4, n_draws=800)
        t = time.perf_counter()
        r = landscape.landscape(arch, [330], N, **kw)
        dt = time.perf_counter() - t
        steps = kw.get("burn_in", 1000) + kw["n_draws"] * kw.get("thin", 10)
        adjusted = kw.get("kernel", "sgld") != "sgld"
        grads = steps * kw.get("n_leapfrog", 1) if kw.get("kernel") == "hmc" else steps
        grads += steps // kw.get("swap_every", 10) if adjusted else 0
        ess = np.nan_to_num(r.profiles[0].ess)
        out[name] = dict(
            settings=kw,
            seconds=dt,
            p_star=r.p_star_sampled,
            p_star_err=r.p_star_sampled_err,
            gradients=grads,
            ess_per_kgrad=1000 * float(ess.mean()) / grads,
            min_ess_per_kgrad=1000 * float(ess.min()) / grads,
            max_window_rhat=max(landscape.window_diagnostics(r.profiles)["max_window_rhat"]),
        )
    return out


def step_cost_against_P(arch: CopyArch, N: float) -> dict:
    """Seconds of one short profile at ``P = 340`` and ``3400`` (the same window count) after each
    has compiled."""
    out = {}
    # one window count for both (P = 3400 needs more windows: its action is steeper)
    n = max(landscape.place_windows(arch, P, N, (-0.5, 3.0))[1].size for P in (340, 3400))
    for P in (340, 3400):
        kw = dict(n_chains=2, burn_in=0, n_draws=40, thin=10, n_windows=n)
        landscape.sampled_profile(arch, P, N, **kw)  # compile
        t = time.perf_counter()
        landscape.sampled_profile(arch, P, N, **kw)
        out[P] = time.perf_counter() - t
    return {"seconds_P340": out[340], "seconds_P3400": out[3400], "ratio": out[3400] / out[340]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a smoke test: L = 8, short chains")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--out-dir", default=None, help="also write the JSON object there")
    ap.add_argument("--kernels", action="store_true", help="compare the windows' kernels on long runs instead")
    args = ap.parse_args()
    if args.kernels:
        res = kernels(CopyArch(L=32, V=4), 20.0)
        if args.out_dir:
            os.makedirs(args.out_dir, exist_ok=True)
            with open(os.path.join(args.out_dir, "copy_landscape_kernels.json"), "w") as f:
                f.write(json.dumps(res, default=float) + "\n")
        if args.json:
            print(json.dumps(res, default=float))
            return
        print(
            "| kernel | wall s | P* | se | gradients | ESS / 1000 gradients (mean, min) | max R-hat |  (L=32, N=20, P=330)"
        )
        print("|---|---|---|---|---|---|---|")
        for name, r in res.items():
            print(
                f"| {name} | {r['seconds']:.1f} | {r['p_star']:.2f} | {r['p_star_err']:.2f} | {r['gradients']} | "
                f"{r['ess_per_kgrad']:.1f}, {r['min_ess_per_kgrad']:.1f} | {r['max_window_rhat']:.3f} |"
            )
        return
    P_old = None
    if args.quick:  # L = 24 (the first-order line ends near L = 16), two P for the old scheme
        arch, N, P_old = CopyArch(L=24, V=4), 20.0, [221, 223]
        short = dict(burn_in=50, n_draws=20, thin=2, max_extend=0)
        old, new, fast = dict(INDEPENDENT, **short, n_chains=2), dict(EXCHANGE, **short), dict(HMC, **short)
    else:
        arch, N, old, new, fast = CopyArch(L=32, V=4), 20.0, INDEPENDENT, EXCHANGE, HMC
    a, b, h = scheme(arch, N, old, P_old), scheme(arch, N, new), scheme(arch, N, fast)
    res = dict(
        L=arch.L,
        V=arch.V,
        N=N,
        quick=args.quick,
        machine=f"{platform.machine()}, {os.cpu_count()} cores",
        independent=a,
        exchange=b,
        hmc=h,
        p_star_old=a["p_star"],
        p_star_old_err=a["p_star_err"],
        p_star_new=h["p_star"],
        p_star_new_err=h["p_star_err"],
        speedup=a["seconds_at_equal_error"] / h["seconds_at_equal_error"],
        speedup_exchange=a["seconds_at_equal_error"] / b["seconds_at_equal_error"],
        wall_time_ratio=a["seconds"] / h["seconds"],
        ess_rate_ratio=h["ess_per_s_per_window"] / a["ess_per_s_per_window"],
    )
    if not args.quick:
        res["step_cost_against_P"] = step_cost_against_P(arch, N)
    text = json.dumps(res, default=float)
    if args.out_dir:
        os.makedirs(args.out_dir, exist_ok=True)
        with open(os.path.join(args.out_dir, "copy_landscape_speed.json"), "w") as f:
            f.write(text + "\n")
    if args.json:
        print(text)
        return
    print(f"| scheme | P sampled | wall s | P* | se | s at se 0.5 | ESS/s/window | max R-hat |  (L={arch.L}, N={N:g})")
    print("|---|---|---|---|---|---|---|---|")
    for name, r in (("independent", a), ("exchange", b), ("hmc", h)):
        print(
            f"| {name} | {r['P']} | {r['seconds']:.1f} | {r['p_star']:.2f} | {r['p_star_err']:.2f} | "
            f"{r['seconds_at_equal_error']:.1f} | {r['ess_per_s_per_window']:.2f} | {r['max_window_rhat']:.3f} |"
        )
    print(
        f"speedup at equal error: hmc {res['speedup']:.2f}x, exchange {res['speedup_exchange']:.2f}x; "
        f"wall-time ratio (hmc) {res['wall_time_ratio']:.2f}x"
    )
    if "step_cost_against_P" in res:
        s = res["step_cost_against_P"]
        print(f"step cost: P = 3400 takes {s['ratio']:.2f}x the time of P = 340")


if __name__ == "__main__":
    main()
