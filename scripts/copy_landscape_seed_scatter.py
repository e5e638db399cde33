"""Check (Spec B, section 4): are the sampled basin log-odds' error bars honest, and is the
sampler's default run long enough? The copy head's softmax posterior, L = 32, V = 4, data set 0,
sampled again and again with new chain seeds at one P near each N's sampled P* (N = 1, P = 610;
N = 20, P = 340), at the default run length (burn-in 1000, 200 draws thinned by 10) and at 4x
(burn-in 4000, 800 draws); two ladders of umbrella windows with replica exchange each time.

For each it prints the log-odds' mean over seeds with its standard error, their standard
deviation (the true error of one run), MBAR's analytical error of one run (which takes the draws
it keeps as independent) and the spread between a run's two ladders
(``jaxattn.copyhead.landscape.ladder_spread``). The mean at the default length against the mean
at 4x is the default's bias.

Run:  python scripts/copy_landscape_seed_scatter.py                   (about 8 minutes on 2 cores)
      python scripts/copy_landscape_seed_scatter.py --quick --out-dir /tmp/figs   (a smoke test:
          L = 8, two seeds, one short length)
Writes docs/figures/copy_landscape_seed_scatter.json, or the same under --out-dir, and prints a
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

from jaxattn.copyhead import landscape, network, profile  # noqa: E402
from jaxattn.core import umbrella  # noqa: E402

OPT = _options.parse(__doc__)
ARCH = network.CopyArch(32, 4)
POINTS = ((1.0, 610), (20.0, 340))
SEEDS = range(6)
LENGTHS = {"default": {}, "4x": dict(burn_in=4000, n_draws=800)}
if OPT.quick:
    ARCH, POINTS, SEEDS = network.CopyArch(8, 4), ((20.0, 46),), range(2)
    LENGTHS = {"default": dict(burn_in=100, n_draws=10, thin=5)}


def one(N: float, P: int, seed: int, kw: dict) -> tuple[float, float, float]:
    """A run's log-odds, MBAR's error of it, and the spread between its ladders."""
    a_bar = profile.theory_barrier(ARCH, N)[1]
    prof = landscape.sampled_profile(ARCH, P, N, seed=seed, **kw)
    p, dp = umbrella.probability(prof.draws, prof.windows, lambda c: profile.prev_weight(c, ARCH.L) > a_bar)
    y, dy = np.log(p / (1 - p)), dp / (p * (1 - p))
    return float(y), float(dy), float(landscape.ladder_spread(prof, a_bar, ARCH.L)[0])


def main():
    rows = []
    for N, P in POINTS:
        for name, kw in LENGTHS.items():
            t0 = time.perf_counter()
            runs = np.array([one(N, P, s, kw) for s in SEEDS])
            y = runs[:, 0]
            rows.append(
                dict(
                    N=N,
                    P=P,
                    length=name,
                    log_odds=y.tolist(),
                    mean=float(y.mean()),
                    mean_err=float(y.std(ddof=1) / np.sqrt(len(y))),
                    sd=float(y.std(ddof=1)),
                    mbar_err=float(runs[:, 1].mean()),
                    ladder_spread=float(runs[:, 2].mean()),
                    seconds=round(time.perf_counter() - t0, 1),
                )
            )
            print(rows[-1], flush=True)
    with open(os.path.join(OPT.out_dir, "copy_landscape_seed_scatter.json"), "w") as f:
        json.dump(dict(L=ARCH.L, V=ARCH.V, seeds=len(SEEDS), rows=rows), f, indent=1)
    print("| N | P | run length | mean log-odds | sd over seeds | MBAR error | ladder spread | sd / MBAR |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['N']:g} | {r['P']} | {r['length']} | {r['mean']:.2f} ± {r['mean_err']:.2f} | {r['sd']:.2f} | "
            f"{r['mbar_err']:.2f} | {r['ladder_spread']:.2f} | {r['sd'] / r['mbar_err']:.1f} |"
        )


if __name__ == "__main__":
    main()
