"""Claim (Spec A, section 4): final error against signal strength for softmax, softmax-1 and
Bayes-softmax, with the Bayes risk drawn in. Claimed: softmax keeps an error floor as the signal
grows, softmax-1 goes to zero, Bayes-softmax reaches the Bayes risk once H covers the support.

One-hot spikes F = 2, L = 4, H = 2; online SGD at D = 200, eta = 1, up to t = 200, 2 seeds; the
signal grid is one compile per activation (a grid axis), and the three activations see the same
data stream (common random numbers).

Run:  python scripts/slm_activation_comparison.py    (about 2 minutes on 2 cores)
Writes docs/figures/slm_activation_comparison.png and prints a markdown table.
"""

from __future__ import annotations

import os

import jaxattn

jaxattn.use_cpu_cores()

import jax  # noqa: E402
import numpy as np  # noqa: E402

from jaxattn import priors, slm  # noqa: E402
from jaxattn.plots import plt  # noqa: E402
from jaxattn.theory.slm_bayes import bayes_risk  # noqa: E402

NUS = [1.0, 4.0, 9.0, 16.0, 25.0]
ACTS = ["softmax", "softmax1", "bayes_softmax"]
OUT = os.path.join(os.path.dirname(__file__), "..", "docs", "figures", "slm_activation_comparison.png")


def main():
    base = priors.onehot(2, 1.0)
    final = {}
    for act in ACTS:
        cfg = slm.SLMConfig(D=200, prior=base, activation=act, t_max=200.0, n_records=3, n_test=2000)
        ds = slm.train(cfg, seed=[0, 1], H=2, L=4, eta=1.0, signal=np.sqrt(NUS))
        final[act] = ds["error"].isel(H=0, L=0, eta=0, time=-1).values  # (seed, signal)
    with jax.enable_x64(True):
        br = [bayes_risk(priors.onehot(2, nu), 4, n=200_000).risk for nu in NUS]

    print("| nu | Bayes risk | " + " | ".join(ACTS) + " |")
    print("|---|---|" + "---|" * len(ACTS))
    for i, nu in enumerate(NUS):
        cells = " | ".join(f"{final[a][:, i].mean():.3f}" for a in ACTS)
        print(f"| {nu:g} | {br[i]:.3f} | {cells} |")

    fig, ax = plt.subplots(figsize=(5, 3.6))
    for a in ACTS:
        ax.errorbar(NUS, final[a].mean(0), yerr=final[a].std(0), marker="o", capsize=3, label=a)
    ax.plot(NUS, br, "k--", label="Bayes risk")
    ax.set_xlabel("signal strength nu (one-hot, F = 2, L = 4)")
    ax.set_ylabel("test error after t = 200 (D = 200, H = 2)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(OUT, dpi=120)
    print(f"figure: {os.path.relpath(OUT)}")


if __name__ == "__main__":
    main()
