"""Claim (Spec A, section 3): the finite-D order-parameter SDE gives online SGD's
distribution of escape times from the unspecialised saddle, mean and spread, at D from 500 to 4000.

Bayes-softmax, H = 2, one-hot F = 2, nu = 9, L = 4, mini-batches of B = 4 at eta = 4 (the theory
at eta / B = 1). Online SGD over SEEDS[D] seeds; the ODE and the SDE over 24 seeds, each started
from the SGD run of that seed's initial (M, Q, b) at that D (``slm.integrate``, ``SLMODEConfig`` and
``SLMSDEConfig``). The escape time is ``jaxattn.slm.compare.escape_time``: the first recorded time
at which the heads' spread reaches half of its final value (docs/theory/single_location.md, section 7).

Run:  python scripts/slm_escape_time_sde.py           (about 30 minutes on 2 cores)
      python scripts/slm_escape_time_sde.py --quick --out-dir /tmp/figs   (a smoke test: D = 20
          only, 3 seeds, to t = 20, a small bank)
Writes docs/figures/slm_escape_time_sde.png and .json (or the same under --out-dir), and prints a
markdown table.
"""

from __future__ import annotations

import json
import os
import time

import jaxattn

jaxattn.use_cpu_cores()

import _options  # noqa: E402
import numpy as np  # noqa: E402

from jaxattn import slm  # noqa: E402
from jaxattn.plots import plt  # noqa: E402
from jaxattn.slm import priors  # noqa: E402
from jaxattn.slm.compare import escape_time  # noqa: E402

OPT = _options.parse(__doc__)
SEEDS = {500: 24, 1000: 24, 2000: 16, 4000: 8}
N_THEORY = 24
T_MAX, DT_OBS = 70.0, 0.5
BASE = dict(prior=priors.onehot(2, 9.0), activation="bayes_softmax", batch_size=4, n_test=8)
GRID = dict(H=2, L=4, eta=4.0)
THEORY = dict(n_bank=1000)
if OPT.quick:
    SEEDS, N_THEORY, T_MAX, THEORY = {20: 3}, 3, 20.0, dict(n_bank=200)
FIG = os.path.join(OPT.out_dir, "slm_escape_time_sde")


def escape(ds, n):
    M = ds["M"].values.reshape(n, -1, 2, 2)
    return escape_time(M, ds["time"].values)


def stats(e):
    ok = e[np.isfinite(e)]
    return dict(mean=float(ok.mean()), sd=float(ok.std(ddof=1)), n=int(ok.size), not_escaped=int(e.size - ok.size))


def main():
    seeds, n_th = SEEDS, N_THEORY
    times = tuple(np.arange(0.0, T_MAX + 1e-9, DT_OBS))
    res = {}
    for D, n in seeds.items():
        base = dict(BASE, D=D, times=times)
        row = {}
        t0 = time.perf_counter()
        row["sgd"] = escape(slm.train(slm.SLMConfig(**base), seed=list(range(n)), **GRID), n)
        t1 = time.perf_counter()
        row["ode"] = escape(slm.integrate(slm.SLMODEConfig(**base, **THEORY), seed=list(range(n_th)), **GRID), n_th)
        t2 = time.perf_counter()
        sde_cfg = slm.SLMSDEConfig(**base, **THEORY, dt=0.1)
        row["sde"] = escape(slm.integrate(sde_cfg, seed=list(range(n_th)), **GRID), n_th)
        t3 = time.perf_counter()
        res[D] = {k: v.tolist() for k, v in row.items()}
        res[D]["wall_seconds"] = dict(sgd=t1 - t0, ode=t2 - t1, sde=t3 - t2)
        print(
            f"D={D}: "
            + ", ".join(f"{k} {s['mean']:.1f} +- {s['sd']:.1f} (n={s['n']})" for k, s in ((k, stats(v)) for k, v in row.items()))
            + f"; wall {t1 - t0:.0f} / {t2 - t1:.0f} / {t3 - t2:.0f} s",
            flush=True,
        )

    print(f"\n| D | SGD seeds | escape time, SGD (mean +- sd) | ODE, {n_th} seeds | SDE, {n_th} seeds |")
    print("|---|---|---|---|---|")
    for D, r in res.items():
        s = {k: stats(np.asarray(r[k], float)) for k in ("sgd", "ode", "sde")}
        cells = " | ".join(f"{s[k]['mean']:.1f} +- {s[k]['sd']:.1f}" for k in ("sgd", "ode", "sde"))
        print(f"| {D} | {s['sgd']['n']} | {cells} |")

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    Ds = np.asarray(list(res), float)
    for i, (k, label) in enumerate((("sgd", "online SGD"), ("ode", "ODE (same starts)"), ("sde", "SDE (same starts)"))):
        s = [stats(np.asarray(res[D][k], float)) for D in res]
        x = Ds * (1.0 + 0.04 * (i - 1))
        m, sd, n = (np.array([q[f] for q in s]) for f in ("mean", "sd", "n"))
        axes[0].errorbar(x, m, yerr=sd / np.sqrt(n), marker="os^"[i], capsize=3, ls="none", label=label)
        axes[1].errorbar(x, sd, yerr=sd / np.sqrt(2 * (n - 1)), marker="os^"[i], capsize=3, ls="none", label=label)
    for ax, name in zip(axes, ("mean escape time (+- s.e.)", "spread over seeds: sd (+- s.e.)")):
        ax.set_xscale("log")
        ax.set_xlabel("D")
        ax.set_ylabel(name)
        ax.legend(fontsize=8)
    fig.suptitle("Bayes-softmax, H = 2, one-hot F = 2, nu = 9, B = 4, eta = 4: escape from the saddle")
    fig.tight_layout()
    fig.savefig(FIG + ".png", dpi=120)
    with open(FIG + ".json", "w") as fh:
        json.dump(res, fh, indent=1)
    print(f"figure: {os.path.relpath(FIG)}.png")


if __name__ == "__main__":
    main()
