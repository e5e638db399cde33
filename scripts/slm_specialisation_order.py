"""Claims (Spec A, section 3): heads pick up directions in decreasing order of Var theta_f; with
Bayes-softmax the heads end on single directions +-s_f, with softmax / softmax-1 they split along
sign combinations.

Flipped-spike prior theta_f = a_f r_f, amplitudes a = (2.0, 1.2) (Var = 4.0, 1.44), L = 4,
H = 4, online SGD at D = 300, eta = 1, up to t = 200, 2 seeds per activation.

Run:  python scripts/slm_specialisation_order.py     (about 2 minutes on 2 cores)
      python scripts/slm_specialisation_order.py --quick --out-dir /tmp/figs   (a smoke test:
          Bayes-softmax alone, D = 20, to t = 15)
Writes docs/figures/slm_specialisation_order.png (or the same under --out-dir) and prints the
pick-up times and final M.
"""

from __future__ import annotations

import os

import jaxattn

jaxattn.use_cpu_cores()

import _options  # noqa: E402
import numpy as np  # noqa: E402

from jaxattn import slm  # noqa: E402
from jaxattn.plots import plt  # noqa: E402
from jaxattn.slm import priors  # noqa: E402

OPT = _options.parse(__doc__)
PRIOR = priors.flipped_spike([2.0, 1.2])
ACTS = ["bayes_softmax", "softmax1", "softmax"]
D, T_MAX, N_RECORDS = 300, 200.0, 40
if OPT.quick:  # one activation (each is compiled anew), to t = 15: Bayes-softmax picks up s_0 by then
    ACTS, D, T_MAX, N_RECORDS = ["bayes_softmax"], 20, 15.0, 8
OUT = os.path.join(OPT.out_dir, "slm_specialisation_order.png")


def pickup_times(t, M, threshold=1.0):
    """Per seed and direction f: first time some head has |M[h, f]| > threshold (NaN: never)."""
    hit = (np.abs(M) > threshold).any(axis=-2)  # (seed, time, direction)
    first = np.argmax(hit, axis=1)
    return np.where(hit.any(axis=1), t[first], np.nan)


def main():
    fig, axes = plt.subplots(1, len(ACTS), figsize=(14, 3.8), squeeze=False)  # an array, also for one activation
    axes = axes[0]
    print("| activation | pick-up time s_0 (Var 4.0) | pick-up time s_1 (Var 1.44) | final M of seed 0 (rows: heads) |")
    print("|---|---|---|---|")
    for ax, act in zip(axes, ACTS):
        cfg = slm.SLMConfig(D=D, prior=PRIOR, activation=act, t_max=T_MAX, n_records=N_RECORDS, n_test=500)
        p = slm.train(cfg, seed=[0, 1], H=4, L=4, eta=1.0).isel(H=0, L=0, eta=0, signal=0)
        t, M = p["time"].values, p["M"].values
        tp = pickup_times(t, M)
        final = np.array2string(M[0, -1], precision=2, suppress_small=True).replace("\n", "")
        cells = [f"{np.nanmean(x):.1f}" if np.isfinite(x).any() else f"not by t = {t[-1]:g}" for x in tp.T]
        print(f"| {act} | {cells[0]} | {cells[1]} | {final} |")
        for h in range(4):
            for f in range(2):
                ax.plot(t, M[0, :, h, f], color=f"C{f}", ls=["-", "--", ":", "-."][h])
        ax.set_xscale("symlog", linthresh=t[1])
        ax.set_xlim(0, t[-1])
        ax.set_title(f"{act} (seed 0; colour: direction)")
        ax.set_xlabel("t = samples / D")
        ax.set_ylabel("M[h, f]")
    fig.tight_layout()
    fig.savefig(OUT, dpi=120)
    print(f"figure: {os.path.relpath(OUT)}")


if __name__ == "__main__":
    main()
