"""Claim (Spec A, section 3): the escape time from the unspecialised saddle grows like log D.

Bayes-softmax, H = 2, one-hot spikes F = 2, nu = 9, L = 4 (the setting of
scripts/slm_escape_time.py), online SGD at D from 250 to 10^4 with mini-batches of B = 4 at
eta = 4 (the same D -> inf ODE as B = 1 at eta = 1: a batch of B at eta maps to eta / B). Fewer
seeds at the largest D. Each D's seeds run as one grid on the engine, observed every 0.5 units of t
up to T_CAP.

The escape time is the first time with max_f |M[0, f] - M[1, f]| > 1 (sqrt(nu) = 3 when fully
specialised). The ODE's prediction: the noisy ODE (eta = 1) from 32 random starts per D drawn
with the exact finite-D law of the initial overlaps (slm_ode.random_initial_conditions), also at
D = 10^5 and 10^6, where simulation is out of reach. Straight-line fits of the escape time against
log D give the slopes.

Run:  python scripts/slm_escape_time_large_D.py      (about 12 minutes on 2 cores)
      python scripts/slm_escape_time_large_D.py --quick --out-dir /tmp/figs   (a smoke test: SGD at
          D = 20 and 40, the ODE also at 1000, 2 seeds and starts, to t = 30)
Writes docs/figures/slm_escape_time_large_D.png, docs/figures/slm_escape_time_large_D.json (or
the same under --out-dir) and prints a markdown table.
"""

from __future__ import annotations

import json
import os
import time

import jaxattn

jaxattn.use_cpu_cores()

import _options  # noqa: E402
import jax  # noqa: E402
import numpy as np  # noqa: E402

from jaxattn import slm  # noqa: E402
from jaxattn.plots import plt  # noqa: E402
from jaxattn.slm import ode as slm_ode  # noqa: E402
from jaxattn.slm import priors  # noqa: E402

OPT = _options.parse(__doc__)
PRIOR = priors.onehot(2, 9.0)
H, L, B, ETA = 2, 4, 4, 4.0  # SGD: batch B at eta; the ODE runs at eta / B = 1
SEEDS = {250: 24, 500: 24, 1000: 16, 2000: 8, 4000: 4, 10000: 2}
ODE_DS = [250, 500, 1000, 2000, 4000, 10000, 100_000, 1_000_000]
N_ODE = 32
T_CAP, DT_OBS = 80.0, 0.5
N_BANK = 2000  # the ODE's
if OPT.quick:
    SEEDS, ODE_DS, N_ODE, T_CAP, N_BANK = {20: 2, 40: 2}, [20, 40, 1000], 2, 30.0, 200
FIG = os.path.join(OPT.out_dir, "slm_escape_time_large_D")


def sgd_escape_times(D: int, n_seeds: int):
    """Escape time per seed (NaN if not by T_CAP) and the wall time, by online SGD at D (one
    grid on the engine, observed every DT_OBS)."""
    times = tuple(np.arange(0.0, T_CAP + 1e-9, DT_OBS))
    cfg = slm.SLMConfig(D=D, prior=PRIOR, activation="bayes_softmax", batch_size=B, times=times, n_test=8)
    t0 = time.perf_counter()
    p = slm.train(cfg, seed=list(range(n_seeds)), H=H, L=L, eta=ETA).isel(H=0, L=0, eta=0, signal=0)
    M = p["M"].values  # (seed, time, head, direction)
    split = np.abs(M[..., 0, :] - M[..., 1, :]).max(-1) > 1.0
    esc = np.where(split.any(-1), p["time"].values[np.argmax(split, axis=-1)], np.nan)
    return esc, time.perf_counter() - t0


def ode_escape_times(D: int, t):
    """Escape time per start (NaN if not by the last time) of the ODE from N_ODE starts with the
    exact law of the overlaps at D, and whether every solve succeeded."""
    with jax.enable_x64(True):
        y0 = slm_ode.random_initial_conditions(jax.random.fold_in(jax.random.key(7), D), H, 2, D=D, n=N_ODE)
    cfg = slm.SLMODEConfig(D=D, prior=PRIOR, activation="bayes_softmax", times=tuple(t), n_bank=N_BANK)
    sol = slm.integrate(cfg, start=y0, seed=range(N_ODE), H=H, L=L, eta=1.0).isel(H=0, L=0, eta=0, signal=0, noise=0)
    M = sol["M"].values
    split = np.abs(M[..., 0, :] - M[..., 1, :]).max(-1) > 1.0
    first = np.argmax(split, axis=-1)
    return np.where(split.any(-1), t[first], np.nan), not bool(sol["diverged"].any())


def fit(Ds, means):
    x, y = np.log(np.asarray(Ds, float)), np.asarray(means)
    ok = np.isfinite(y)
    slope, icpt = np.polyfit(x[ok], y[ok], 1)
    return float(slope), float(icpt)


def main():
    seeds, ode_ds = SEEDS, ODE_DS
    res = {"sgd": {}, "ode": {}}
    for D, n in seeds.items():
        esc, wall = sgd_escape_times(D, n)
        res["sgd"][D] = esc.tolist()
        print(f"SGD D={D}: {n} seeds, escape {np.nanmean(esc):.1f} +- {np.nanstd(esc):.1f}, "
              f"not escaped {int(np.isnan(esc).sum())}, wall {wall:.0f} s", flush=True)
    t = np.arange(0.0, T_CAP + 1e-9, 0.25)
    for D in ode_ds:
        esc, ok = ode_escape_times(D, t)
        res["ode"][D] = esc.tolist()
        print(f"ODE D={D}: escape {np.nanmean(esc):.1f} +- {np.nanstd(esc):.1f} (ok {ok})", flush=True)

    sD = list(seeds)
    s_mean = [np.nanmean(res["sgd"][D]) for D in sD]
    s_sem = [np.nanstd(res["sgd"][D]) / np.sqrt(np.isfinite(res["sgd"][D]).sum()) for D in sD]
    o_mean = [np.nanmean(res["ode"][D]) for D in ode_ds]
    o_sem = [np.nanstd(res["ode"][D]) / np.sqrt(np.isfinite(res["ode"][D]).sum()) for D in ode_ds]
    slope_sgd, icpt_sgd = fit(sD, s_mean)
    od_sim = [D for D in ode_ds if D in seeds]
    slope_ode, _ = fit(od_sim, [o_mean[ode_ds.index(D)] for D in od_sim])
    slope_ode_all, icpt_ode_all = fit(ode_ds, o_mean)
    # slope of the SGD fit with its standard error (from the per-seed spread, weighted)
    x = np.log(np.asarray(sD, float))
    w = 1.0 / np.maximum(np.asarray(s_sem), 1e-3) ** 2
    A = np.stack([x, np.ones_like(x)], 1)
    cov = np.linalg.inv(A.T @ (w[:, None] * A))
    wslope = float(np.linalg.solve(A.T @ (w[:, None] * A), A.T @ (w * np.asarray(s_mean)))[0])
    wslope_se = float(np.sqrt(cov[0, 0]))

    print(f"| D | seeds | escape time, SGD (mean +- sd) | escape time, ODE ({N_ODE} starts, mean +- sd) |")
    print("|---|---|---|---|")
    for D in ode_ds:
        o = np.asarray(res["ode"][D])
        cell = "-"
        if D in seeds:
            s = np.asarray(res["sgd"][D])
            cell = f"{np.nanmean(s):.1f} +- {np.nanstd(s):.1f}"
        print(f"| {D} | {seeds.get(D, '-')} | {cell} | {np.nanmean(o):.1f} +- {np.nanstd(o):.1f} |")
    print(f"slope d t_esc / d log D: SGD {slope_sgd:.2f} (weighted {wslope:.2f} +- {wslope_se:.2f}), "
          f"ODE at the same D {slope_ode:.2f}, ODE up to 1e6 {slope_ode_all:.2f}")
    res["slopes"] = dict(sgd=slope_sgd, sgd_weighted=wslope, sgd_weighted_se=wslope_se, ode_same_D=slope_ode,
                         ode_all=slope_ode_all)

    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    ax.errorbar(sD, s_mean, yerr=s_sem, marker="o", capsize=3, ls="none", label=f"online SGD (B = {B}, eta = {ETA:g})")
    ax.errorbar(ode_ds, o_mean, yerr=o_sem, marker="s", capsize=3, ls="none", label="ODE, finite-D starts (eta = 1)")
    xx = np.geomspace(min(ode_ds), max(ode_ds), 50)
    ax.plot(xx, icpt_sgd + slope_sgd * np.log(xx), "C0--", lw=1, label=f"fit SGD: {slope_sgd:.2f} log D")
    ax.plot(xx, icpt_ode_all + slope_ode_all * np.log(xx), "C1:", lw=1, label=f"fit ODE: {slope_ode_all:.2f} log D")
    ax.set_xscale("log")
    ax.set_xlabel("D")
    ax.set_ylabel("escape time (mean +- s.e.)")
    ax.set_title("Bayes-softmax, H = 2, one-hot F = 2, nu = 9")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(FIG + ".png", dpi=120)
    with open(FIG + ".json", "w") as fh:
        json.dump(res, fh, indent=1)
    print(f"figure: {os.path.relpath(FIG)}.png")


if __name__ == "__main__":
    main()
