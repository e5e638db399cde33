"""Claim script (Spec B, section 4): the theory's order parameter and test error against P next
to full-batch Adam (lowest U per P over random and copy-biased starts, every run shown) and SGLD
posterior means (tempered, uniform and copy starts), for softmax (L = 32, V = 4) and linear
attention (L = 4, V = 8).

Adam computes the MAP: it is compared with the theory at N = inf (min_W U, no Occam term). SGLD
samples exp(-N U) at N = 20: it is compared with the theory at N = 20. The metastable branch of
the softmax theory (the local minimum that is not the global one) is drawn dashed.

Writes docs/figures/copy_theory_vs_experiment.png (or the same under --out-dir) and prints the
deviations as JSON.

Run:  python scripts/copy_theory_vs_experiment.py      (about 3 minutes on 2 cores)
      python scripts/copy_theory_vs_experiment.py --quick --out-dir /tmp/figs   (a smoke test: two
          P each, short Adam and SGLD runs)
"""

import json
import math
import os
import time

import _options
import numpy as np

from jaxattn import copyhead as cp
from jaxattn.copyhead import curves
from jaxattn.copyhead.network import CopyArch
from jaxattn.plots import plt

OPT = _options.parse(__doc__)
OUT = os.path.join(OPT.out_dir, "copy_theory_vs_experiment.png")
N_SGLD = 20.0
SEEDS, N_ADAM = [0, 1, 2], 2000  # Adam's seeds and steps
SGLD = dict(n_chains=8, n_steps=2000, burn_in=2000)
CASES = {
    "softmax": dict(L=32, V=4, P_adam=np.unique(np.geomspace(100, 1000, 10).round().astype(int)).tolist(),
                    P_sgld=[150, 250, 450, 700, 1000], var="prev_weight", label="previous-token weight"),
    "linear": dict(L=4, V=8, P_adam=np.unique(np.geomspace(10, 1000, 10).round().astype(int)).tolist(),
                   P_sgld=[20, 60, 150, 400, 1000], var="aG", label="|a_G|"),
}
if OPT.quick:  # the smallest and the largest P of each grid, short runs
    CASES = {att: dict(c, P_adam=c["P_adam"][::9], P_sgld=c["P_sgld"][::4]) for att, c in CASES.items()}
    SEEDS, N_ADAM = [0, 1], 20
    SGLD = dict(n_chains=2, n_steps=40, burn_in=20)


def run(att, c):
    cfg = cp.CopyConfig(L=c["L"], V=c["V"], attention=att, n_steps=N_ADAM)
    ds = cp.train(cfg, P=c["P_adam"], seed=SEEDS, init=["random", "copy"])
    best = cp.global_minimum(ds)
    sm = cp.sample(cfg, cp.SGLDConfig(N=N_SGLD, **SGLD), P=c["P_sgld"])
    return ds, best, sm


def main():
    t0 = time.perf_counter()
    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    report = {}
    for row, (att, c) in enumerate(CASES.items()):
        arch = CopyArch(c["L"], c["V"], att)
        ds, best, sm = run(att, c)
        Pf = np.geomspace(min(c["P_adam"]) * 0.8, max(c["P_adam"]) * 1.2, 300)
        theory = curves.softmax_curves if att == "softmax" else curves.linear_curves
        th_map, th_N = theory(arch, Pf, math.inf), theory(arch, Pf, N_SGLD)
        at_adam = theory(arch, c["P_adam"], math.inf)
        at_sgld = theory(arch, c["P_sgld"], N_SGLD)
        var = c["var"]
        absf = np.abs if var == "aG" else (lambda v: v)
        for col, (v, lab) in enumerate(((var, c["label"]), ("test_error", "test error"))):
            ax = axes[row, col]
            ax.plot(Pf, th_map[v], "k-", label="theory, N = inf (MAP)")
            ax.plot(Pf, th_N[v], "k:", label=f"theory, N = {N_SGLD:g}")
            if att == "softmax":
                for b in ("_uniform", "_copy"):
                    other = np.where(th_map["n_minima"] >= 2, th_map[v + b], np.nan)
                    other = np.where(np.isclose(other, th_map[v]), np.nan, other)
                    ax.plot(Pf, other, "k--", lw=0.8, label="metastable branch" if b == "_uniform" else None)
            for j, init in enumerate(ds["init"].values.tolist()):
                y = absf(ds[v].sel(init=init).values)
                for s in range(y.shape[1]):
                    ax.plot(ds["P"].values, y[:, s], "o^"[j], color=f"C{j}", alpha=0.35, ls="none",
                            label=f"Adam, {init} start" if s == 0 else None)
            ax.plot(best["P"].values, absf(best[v].values), "rs", mfc="none", ms=8, label="Adam, lowest U")
            summ = cp.posterior_summary(sm.assign(**{v: absf(sm[v])}) if var == "aG" else sm, v)
            for j, st in enumerate(summ["start"].values.tolist()):
                ax.errorbar(np.asarray(c["P_sgld"]) * (1.03 if j else 0.97), summ["mean"].sel(start=st).values,
                            yerr=summ["se"].sel(start=st).values, fmt="D", color=f"C{j + 2}", ms=5,
                            label=f"SGLD N={N_SGLD:g}, {st} start")
            ax.set(xscale="log", xlabel="P", ylabel=lab, title=f"{att}, L={c['L']}, V={c['V']}")
            if col == 0:
                ax.legend(fontsize=7)
        summ = cp.posterior_summary(sm.assign(**{var: absf(sm[var])}), var)
        report[att] = {
            "P_adam": c["P_adam"],
            "adam_best": absf(best[var].values).round(4).tolist(),
            "theory_map": np.asarray(at_adam[var]).round(4).tolist(),
            "max_dev_adam": float(np.max(np.abs(absf(best[var].values) - at_adam[var]))),
            "max_dev_adam_test_error": float(np.max(np.abs(best["test_error"].values - at_adam["test_error"]))),
            "best_init": best["best_init"].values.tolist(),
            "P_sgld": c["P_sgld"],
            "sgld_mean": {st: summ["mean"].sel(start=st).values.round(4).tolist() for st in ("uniform", "copy")},
            "theory_N": np.asarray(at_sgld[var]).round(4).tolist(),
            "dev_sgld": {st: (summ["mean"].sel(start=st).values - at_sgld[var]).round(4).tolist()
                         for st in ("uniform", "copy")},
            "sgld_diverged": int(sm["diverged"].sum()),
        }
    fig.tight_layout()
    fig.savefig(OUT, dpi=120)
    report["wall_seconds"] = round(time.perf_counter() - t0, 1)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
