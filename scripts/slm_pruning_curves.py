"""Claim (Spec A, section 5): greedy pruning. For softmax-1 and Bayes-softmax about H - F heads
can be removed with little loss, and past that they degrade more sharply than softmax.

One-hot spikes F = 2, nu = 9, L = 4, H = 4; online SGD at D = 200, eta = 1, t = 200, 2 seeds per
activation; then greedy pruning on R(M, Q, b) (a bank of 20000 draws per head-count).

Run:  python scripts/slm_pruning_curves.py     (about 2 minutes on 2 cores)
      python scripts/slm_pruning_curves.py --quick --out-dir /tmp/figs   (a smoke test:
          Bayes-softmax alone, D = 20, to t = 2, a bank of 500)
Writes docs/figures/slm_pruning_curves.png (or the same under --out-dir) and prints a markdown
table (seed means).
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
from jaxattn.slm import priors  # noqa: E402
from jaxattn.slm.pruning import prune_greedy  # noqa: E402
from jaxattn.slm.risk import make_bank  # noqa: E402

OPT = _options.parse(__doc__)
ACTS = ["softmax", "softmax1", "bayes_softmax"]
PRIOR = priors.onehot(2, 9.0)
H = 4
D, T_MAX, N_BANK = 200, 200.0, 20000
if OPT.quick:  # one activation: each is compiled anew
    ACTS, D, T_MAX, N_BANK = ["bayes_softmax"], 20, 2.0, 500
OUT = os.path.join(OPT.out_dir, "slm_pruning_curves.png")


def main():
    curves = {}
    for act in ACTS:
        cfg = slm.SLMConfig(D=D, prior=PRIOR, activation=act, t_max=T_MAX, n_records=2, n_test=500)
        p = slm.train(cfg, seed=[0, 1], H=H, L=4, eta=1.0).isel(H=0, L=0, eta=0, signal=0, time=-1)
        with jax.enable_x64(True):
            bank = make_bank(PRIOR, 4, H, n=N_BANK)
            curves[act] = np.array([prune_greedy(p["M"].values[s], p["Q"].values[s], p["b"].values[s],
                                                 bank, act).risk for s in range(2)])
    print("| heads removed | " + " | ".join(ACTS) + " |")
    print("|---|" + "---|" * len(ACTS))
    for k in range(H):
        print(f"| {k} | " + " | ".join(f"{curves[a][:, k].mean():.3f}" for a in ACTS) + " |")
    fig, ax = plt.subplots(figsize=(5, 3.6))
    for a in ACTS:
        ax.errorbar(range(H), curves[a].mean(0), yerr=curves[a].std(0), marker="o", capsize=3, label=a)
    ax.set_xlabel(f"heads removed (of H = {H}; F = 2)")
    ax.set_ylabel("risk R(M, Q, b)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(OUT, dpi=120)
    print(f"figure: {os.path.relpath(OUT)}")


if __name__ == "__main__":
    main()
