"""Claim (Spec A, section 3): the end states of online SGD by distribution,
against the finite-D SDE and the ODE from the same starts.

Flipped spike ``theta_f = 3 r_f`` (F = 2, symmetric), Bayes-softmax with H = 4 heads, L = 4,
D = 500, B = 4 at eta = 4, t to T_MAX = 300. Each seed's final heads are classified by
``jaxattn.slm.compare.end_state``: the signed directions each head is on, so a class says which
directions are covered and whether heads pair on +-s_f (``"+s0 -s0 +s1 -s1"``) or cover sign
combinations (``"+s0+s1 ..."``). The table gives the fraction of seeds in each class and its
binomial standard error (32 seeds each), first by coarse class (``end_state_kind``: pairs, sign
combinations or mixed, and how many heads are off), then the 8 commonest fine classes. Whether
these are end states is measured, not assumed: the fraction of seeds whose fine class at
``T_MAX`` is already their class at ``2 T_MAX / 3`` is printed for each method. The ODE and the
SDE use a scrambled Sobol bank of 4096 points (``docs/theory/single_location.md``, section 4).

Run:  python scripts/slm_end_states_sde.py    (about 50 minutes on 2 cores, the SDE most of it)
      python scripts/slm_end_states_sde.py --quick --out-dir /tmp/figs   (a smoke test: 3 seeds,
          D = 30, to t = 6, a small bank)
Writes docs/figures/slm_end_states_sde.json (or the same under --out-dir) and prints a markdown
table.
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
from jaxattn.slm import priors  # noqa: E402
from jaxattn.slm.compare import end_state, end_state_fractions  # noqa: E402

OPT = _options.parse(__doc__)
N_SEEDS, T_MAX, D = (3, 6.0, 30) if OPT.quick else (32, 300.0, 500)
BASE = dict(
    D=D,
    prior=priors.flipped_spike([3.0, 3.0]),
    activation="bayes_softmax",
    batch_size=4,
    n_test=8,
    times=tuple(np.linspace(0.0, T_MAX, 13)),
)
GRID = dict(seed=list(range(N_SEEDS)), H=4, L=4, eta=4.0)
BANK = dict(n_bank=256 if OPT.quick else 4096, bank_method="sobol")  # the ODE's and the SDE's
OUT = os.path.join(OPT.out_dir, "slm_end_states_sde.json")


def main():
    runs = {}
    t0 = time.perf_counter()
    runs["sgd"] = slm.train(slm.SLMConfig(**BASE), **GRID)
    runs["ode"] = slm.integrate(slm.SLMODEConfig(**BASE, **BANK), **GRID)
    runs["sde"] = slm.integrate(slm.SLMSDEConfig(**BASE, **BANK, dt=0.1), **GRID)
    M = {k: v["M"].values.reshape(N_SEEDS, len(BASE["times"]), 4, 2) for k, v in runs.items()}
    print(f"wall {time.perf_counter() - t0:.0f} s")
    out = {"final_M": {k: m[:, -1].tolist() for k, m in M.items()}, "settled": {}}
    earlier = int(np.argmin(np.abs(np.asarray(BASE["times"]) - 2 * T_MAX / 3)))
    for k, m in M.items():  # a seed is settled when its class at T_MAX is its class at 2 T_MAX / 3
        same = [end_state(m[s, -1]) == end_state(m[s, earlier]) for s in range(N_SEEDS)]
        out["settled"][k] = float(np.mean(same))
        print(f"{k}: {sum(same)} of {N_SEEDS} seeds in the same class at t = {BASE['times'][earlier]:g} and {T_MAX:g}")
    for coarse, title, top in ((True, "coarse class (end_state_kind)", None), (False, "class (end_state)", 8)):
        fr = {k: end_state_fractions(m, coarse=coarse) for k, m in M.items()}
        out["kinds" if coarse else "classes"] = fr
        classes = sorted(set().union(*fr.values()), key=lambda c: -fr["sgd"].get(c, 0.0))[:top]
        print(f"\n| {title} | SGD | SDE | ODE |\n|---|---|---|---|")
        for c in classes:
            cells = []
            for k in ("sgd", "sde", "ode"):
                p = fr[k].get(c, 0.0)
                cells.append(f"{p:.2f} +- {np.sqrt(p * (1 - p) / N_SEEDS):.2f}")
            print(f"| `{c}` | " + " | ".join(cells) + " |")
    with open(OUT, "w") as fh:
        json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
