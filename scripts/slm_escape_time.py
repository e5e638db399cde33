"""Claims (Spec A, section 3): a fast unspecialised phase, then specialisation after a time that
grows like log D (the escape from the unspecialised saddle, seeded by O(1/sqrt(D)) overlaps).

Bayes-softmax, H = 2, one-hot spikes F = 2, nu = 9, L = 4, eta = 1. For each D, online SGD over
4 seeds (one compile per D) and the order-parameter ODE from 8 random starts with the exact
finite-D law of the initial overlaps. The escape time is the first time at which the two heads
differ by more than 1 in some direction, max_f |M[0, f] - M[1, f]| > 1 (sqrt(nu) = 3 when fully
specialised). A straight-line fit of the escape time against log D gives the slope.

Run:  python scripts/slm_escape_time.py      (a few minutes on 2 cores)
      python scripts/slm_escape_time.py --quick --out-dir /tmp/figs   (a smoke test: D = 20 and
          40, 2 seeds and 2 starts, to t = 30)
Writes docs/figures/slm_escape_time.png (or the same under --out-dir) and prints a markdown table.
"""

from __future__ import annotations

import os

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
DS = [250, 500, 1000, 2000]
PRIOR = priors.onehot(2, 9.0)
T_MAX = 100.0
N_SEEDS, N_ODE, N_BANK = 4, 8, 2000  # SGD's seeds, the ODE's starts and its bank
if OPT.quick:
    DS, T_MAX, N_SEEDS, N_ODE, N_BANK = [20, 40], 30.0, 2, 2, 200
TIMES = tuple(np.concatenate([[0.0], np.geomspace(0.5, T_MAX, 60)]))
OUT = os.path.join(OPT.out_dir, "slm_escape_time.png")


def escape_time(t, M):
    """First time with max_f |M[0,f] - M[1,f]| > 1; M has shape (..., time, head, direction)."""
    split = np.abs(M[..., 0, :] - M[..., 1, :]).max(-1) > 1.0
    first = np.argmax(split, axis=-1)
    return np.where(split.any(-1), t[first], np.nan)


def main():
    rows, sims, odes = [], {}, {}
    for D in DS:
        cfg = slm.SLMConfig(D=D, prior=PRIOR, activation="bayes_softmax", times=TIMES, n_test=500)
        ds = slm.train(cfg, seed=range(N_SEEDS), H=2, L=4, eta=1.0)
        p = ds.isel(H=0, L=0, eta=0, signal=0)
        t = p["time"].values
        sims[D] = (t, p["M"].values)
        with jax.enable_x64(True):
            y0 = slm_ode.random_initial_conditions(jax.random.key(D), 2, 2, D=D, n=N_ODE)
        ode_cfg = slm.SLMODEConfig(D=D, prior=PRIOR, activation="bayes_softmax", times=tuple(t), n_bank=N_BANK)
        sol = slm.integrate(ode_cfg, start=y0, seed=range(N_ODE), H=2, L=4, eta=1.0)
        M_ode = sol["M"].isel(H=0, L=0, eta=0, signal=0, noise=0).values  # (start, time, head, direction)
        odes[D] = M_ode
        ts_sim, ts_ode = escape_time(t, p["M"].values), escape_time(t, M_ode)
        rows.append((D, np.nanmean(ts_sim), np.nanstd(ts_sim), np.nanmean(ts_ode), np.nanstd(ts_ode)))

    logD = np.log(DS)
    slope_sim = np.polyfit(logD, [r[1] for r in rows], 1)[0]
    slope_ode = np.polyfit(logD, [r[3] for r in rows], 1)[0]
    print(f"| D | escape time, SGD ({N_SEEDS} seeds) | escape time, ODE ({N_ODE} starts) |")
    print("|---|---|---|")
    for D, ms, ss, mo, so in rows:
        print(f"| {D} | {ms:.1f} +- {ss:.1f} | {mo:.1f} +- {so:.1f} |")
    print(f"slope d t_escape / d log D: SGD {slope_sim:.2f}, ODE {slope_ode:.2f}")

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.8))
    t, M = sims[DS[-1]]
    for s in range(M.shape[0]):
        for h in range(2):
            for f in range(2):
                a.plot(t, M[s, :, h, f], color=f"C{f}", ls="-" if h == 0 else "--", alpha=0.7)
    a.set_xscale("log")
    a.set_xlabel("t = samples / D")
    a.set_ylabel(f"M[h, f] (D = {DS[-1]}; colour: f, style: head)")
    a.set_title("fast common rise, then the heads split")
    b.errorbar(DS, [r[1] for r in rows], yerr=[r[2] for r in rows], marker="o", label="online SGD")
    b.errorbar(DS, [r[3] for r in rows], yerr=[r[4] for r in rows], marker="s", label="ODE, finite-D starts")
    b.set_xscale("log")
    b.set_xlabel("D")
    b.set_ylabel("escape time")
    b.legend()
    fig.tight_layout()
    fig.savefig(OUT, dpi=120)
    print(f"figure: {os.path.relpath(OUT)}")


if __name__ == "__main__":
    main()
