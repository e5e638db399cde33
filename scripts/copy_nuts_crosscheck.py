"""Check (Spec B, section 4): across a real barrier, does plain NUTS, with no windows and no
bias, put half the posterior above the barrier at the umbrella windows' sampled ``P*``?

The copy head's softmax posterior, V = 4, data set 0, at the two points of the sampled map with
the lowest barrier it resolves, low enough for NUTS to cross: L = 32, N = 3 (``P*`` near 409,
about 1.2 kT) and the plain posterior at L = 48, N = 1 (``P*`` near 1037, about 1.4 kT). At each
the script
  1. finds the windowed ``P*`` on data set 0 (``jaxattn.copyhead.landscape.landscape``, default
     settings of the sampled phase diagram: four ladders of 56 umbrella windows exchanging
     replicas, chains four times the default length, MBAR) with its error, its barrier and the
     log-odds' slope;
  2. runs NUTS on the joint posterior of ``(G, W)`` (``jaxattn.copyhead.sampling.nuts_reference``) on the
     same data at three ``P`` around it (log-odds about -1, 0, +1 by the windows' slope; up to two
     more, outward, until NUTS's log-odds change sign), from random starts near the uniform state
     and from the copy state;
  3. checks that NUTS crosses freely (R-hat of the previous-token weight over the chains of both
     starts, and each start's fraction above the barrier), and takes NUTS's ``P*`` where the
     log-odds of the fraction of draws above the barrier cross zero (its error from the
     indicator's effective sample size);
  4. compares the two ``P*`` in units of their combined error.

Run:  python scripts/copy_nuts_crosscheck.py                  (about 15 minutes on 2 cores)
      python scripts/copy_nuts_crosscheck.py --quick --out-dir /tmp/figs   (a smoke test: L = 8,
          N = 1, short chains; its numbers mean nothing)
Writes docs/figures/copy_nuts_crosscheck.json, or the same under --out-dir, and prints a markdown
table per point.
"""

from __future__ import annotations

import json
import os
import time

import jaxattn

jaxattn.use_cpu_cores()

import _options  # noqa: E402
import numpy as np  # noqa: E402

from jaxattn.copyhead import CopyArch, CopyData, landscape  # noqa: E402
from jaxattn.copyhead.sampling import nuts_reference  # noqa: E402
from jaxattn.core import diagnostics  # noqa: E402

OPT = _options.parse(__doc__)
V = 4
POINTS = ((32, 3.0), (48, 1.0))  # (L, N): the lowest barriers the sampled map resolves
NUTS = dict(n_warmup=500, n_samples=2000, n_chains=4)
# the sampled phase diagram's settings when this check was run (2026-12-04, SGLD; the map's default
# is HMC since 2026-12-07): chains four times the default length and four ladders, since at small
# N the default's log-odds scatter more than their errors say
WINDOWS: dict = dict(burn_in=4000, n_draws=800, n_chains=4)
SCAN: list[int] | None = None  # the windows' default scan from the theory's P*
if OPT.quick:
    POINTS, SCAN = ((8, 1.0),), [79]
    NUTS = dict(n_warmup=50, n_samples=50, n_chains=2)
    WINDOWS = dict(burn_in=100, n_draws=20, thin=5, n_windows=20)


def nuts_at(L: int, N: float, P: int, a_bar: float) -> dict:
    """NUTS from both starts at ``P``: the fraction of draws above the barrier, its log-odds and
    their errors, and whether the two starts agree."""
    runs = {s: nuts_reference(CopyData(L=L, V=V), P, N=N, start=s, seed=P, **NUTS) for s in ("uniform", "copy")}
    a = np.concatenate([r["prev_weight"] for r in runs.values()])  # (chain, draw), both starts
    inside = (a > a_bar).astype(float)
    f = float(inside.mean())
    ess = float(diagnostics.ess(inside))
    df = float(inside.std() / np.sqrt(max(ess, 1.0)))
    return dict(
        P=P,
        fraction=f,
        fraction_err=df,
        log_odds=float(np.log(f / (1 - f))) if 0 < f < 1 else float("nan"),
        log_odds_err=df / (f * (1 - f)) if 0 < f < 1 else float("nan"),
        fraction_by_start={s: float((r["prev_weight"] > a_bar).mean()) for s, r in runs.items()},
        rhat=float(diagnostics.split_rhat(a)),
        ess=ess,
    )


def point(L: int, N: float) -> dict:
    """The windows' ``P*`` and NUTS's at one ``(L, N)``."""
    t0 = time.perf_counter()
    win = landscape.landscape(CopyArch(L, V), SCAN, N, **WINDOWS)
    t_win = time.perf_counter() - t0
    p_win, dp_win, a_bar = win.p_star_sampled, win.p_star_sampled_err, win.a_barrier
    if not np.isfinite(p_win):  # only in a smoke test's short chains
        p_win, dp_win = float(win.P[0]), float("nan")
    slope = abs(win.log_ratio_slope) if np.isfinite(win.log_ratio_slope) else 0.05
    step = int(np.clip(round(1.0 / slope), 2, max(2, int(0.1 * p_win))))
    Ps = [int(round(p_win)) + d * step for d in (-1, 0, 1)]
    print(
        f"L = {L}, N = {N:g}: windows P* = {p_win:.1f} +- {dp_win:.1f}, barrier {win.barrier_at_p_star:.2f} +-"
        f" {win.barrier_at_p_star_err:.2f} kT, slope {slope:.3f} per sequence ({t_win:.0f} s);"
        f" NUTS at P = {Ps}",
        flush=True,
    )
    t1 = time.perf_counter()
    rows = []
    for P in Ps:
        rows.append(nuts_at(L, N, P, a_bar))
        print(rows[-1], flush=True)
    for _ in range(2):  # NUTS's log-odds all of one sign: one step more, towards their zero
        y = np.array([r["log_odds"] for r in rows])
        if np.nanmin(y) < 0 < np.nanmax(y) or not np.isfinite(y).any():
            break
        P = min(Ps) - step if np.nanmin(y) > 0 else max(Ps) + step
        Ps.append(P)
        rows.append(nuts_at(L, N, P, a_bar))
        print(rows[-1], flush=True)
    rows.sort(key=lambda r: r["P"])
    t_nuts = time.perf_counter() - t1
    P_, y, dy = (np.array([r[k] for r in rows]) for k in ("P", "log_odds", "log_odds_err"))
    p_nuts, dp_nuts = landscape.crossing(P_, y, dy)  # independent points: a weighted line
    z = (p_nuts - p_win) / float(np.hypot(dp_nuts, dp_win))
    return dict(
        L=L,
        N=N,
        data_seed=0,
        a_barrier=a_bar,
        nuts=NUTS,
        windows=WINDOWS,
        p_star_windows=p_win,
        p_star_windows_err=dp_win,
        barrier=win.barrier_at_p_star,
        barrier_err=win.barrier_at_p_star_err,
        first_order=bool(win.first_order_sampled),
        p_star_nuts=p_nuts,
        p_star_nuts_err=dp_nuts,
        z=z,
        rows=rows,
        max_rhat=max(r["rhat"] for r in rows),
        seconds_windows=round(t_win),
        seconds_nuts=round(t_nuts),
    )


def main():
    rows = [point(L, N) for L, N in POINTS]
    with open(os.path.join(OPT.out_dir, "copy_nuts_crosscheck.json"), "w") as f:
        json.dump(dict(V=V, rows=rows), f, indent=1)
    for out in rows:
        print(f"L = {out['L']}, N = {out['N']:g}, barrier {out['barrier']:.2f} +- {out['barrier_err']:.2f} kT")
        print("| P | fraction above the barrier | uniform start | copy start | log-odds | R-hat | ESS |")
        print("|---|---|---|---|---|---|---|")
        for r in out["rows"]:
            s = r["fraction_by_start"]
            print(
                f"| {r['P']} | {r['fraction']:.3f} +- {r['fraction_err']:.3f} | {s['uniform']:.3f} |"
                f" {s['copy']:.3f} | {r['log_odds']:.2f} +- {r['log_odds_err']:.2f} | {r['rhat']:.3f} |"
                f" {r['ess']:.0f} |"
            )
        print(
            f"P*: windows {out['p_star_windows']:.1f} +- {out['p_star_windows_err']:.1f}, NUTS"
            f" {out['p_star_nuts']:.1f} +- {out['p_star_nuts_err']:.1f}; difference {out['z']:+.2f} combined"
            f" errors (windows {out['seconds_windows']} s, NUTS {out['seconds_nuts']} s)"
        )


if __name__ == "__main__":
    main()
