"""Claim (Spec A, section 3): the bank's error, not SGD's noise, set the
gaps between the ODE and online SGD through specialisation at ``D = 500``; a scrambled Sobol
bank closes them.

1. The drift's ingredient, ``grad R(M, Q, b)`` (Bayes-softmax, one-hot ``F = 2``, ``nu = 9``,
   ``L = 4``, ``H = 2``), at 6 random states, against a Sobol bank of 2^20 points: the largest
   error, mean over 4 banks of each kind and size.
2. Online SGD against the ODE from each seed's own start, heads matched per seed
   (``jaxattn.slm.compare``): ``D = 500``, 8 seeds, ``eta = 1``, to ``t = 200``, for softmax and
   softmax-1, with the ODE on a 2000-draw Monte Carlo bank and on Sobol banks of 4096 and 16384
   points. Reported: the largest gap of the seed means of ``M`` and ``diag Q``, each with the
   standard error of the seed mean of the per-seed deviation at that entry.

Run:  python scripts/slm_bank_accuracy.py    (about 9 minutes on 2 cores)
      python scripts/slm_bank_accuracy.py --quick   (a smoke test: small banks, softmax-1
          alone, D = 20, 2 seeds, to t = 2)
Prints markdown tables and writes nothing (--out-dir is accepted, like every script's).
"""

from __future__ import annotations

import time

import jaxattn

jaxattn.use_cpu_cores()

import _options  # noqa: E402
import jax  # noqa: E402
import numpy as np  # noqa: E402

from jaxattn import slm  # noqa: E402
from jaxattn.slm import priors  # noqa: E402
from jaxattn.slm import risk as R  # noqa: E402
from jaxattn.slm.compare import match_heads, max_deviation, permute_heads  # noqa: E402

OPT = _options.parse(__doc__)
PRIOR = priors.onehot(2, 9.0)
L, H, SEEDS = 4, 2, 8
ACTS = ["softmax", "softmax1"]  # of part 2
BANKS = {"Monte Carlo 2000": dict(n_bank=2000), "Sobol 4096": dict(n_bank=4096, bank_method="sobol"),
         "Sobol 16384": dict(n_bank=16384, bank_method="sobol")}
# the drift's reference bank and the sizes measured against it; the runs of part 2
N_REF, N_DRIFT = 2**20, (2**10, 2**12, 2**14, 2**16)
RUN = dict(D=500, t_max=200.0, n_records=20, n_test=2000)
if OPT.quick:
    N_REF, N_DRIFT, SEEDS = 2**10, (2**6, 2**8), 2
    RUN = dict(D=20, t_max=2.0, n_records=4, n_test=100)
    ACTS = ["softmax1"]  # each activation is compiled anew, for SGD and each bank
    BANKS = {"Monte Carlo 200": dict(n_bank=200), "Sobol 256": dict(n_bank=256, bank_method="sobol")}


def drift_errors():
    print("| draws n | Monte Carlo: max error of grad R | scrambled Sobol |\n|---:|---:|---:|")
    with jax.enable_x64(True):
        ref = R.make_bank(PRIOR, L, H, n=N_REF, key=jax.random.key(99), method="sobol")
        for n in N_DRIFT:
            banks = [R.make_bank(PRIOR, L, H, n=n, method=m, key=jax.random.key(k)) for m in ("mc", "sobol") for k in range(4)]
            errors = R.bank_errors(banks, ref, "bayes_softmax")  # 6 random states
            e = {"mc": np.mean(errors[:4]), "sobol": np.mean(errors[4:])}
            print(f"| {n} | {e['mc']:.1e} | {e['sobol']:.1e} |", flush=True)


def through_escape():
    print("\n| activation | ODE bank | max gap M (se) | max gap diag Q (se) | ODE wall (s) |\n|---|---|---|---|---:|")
    for act in ACTS:
        base = dict(RUN, prior=PRIOR, activation=act)
        grid = dict(seed=list(range(SEEDS)), H=H, L=L, eta=1.0)
        sim = slm.train(slm.SLMConfig(**base), **grid).isel(H=0, L=0, eta=0, signal=0)
        for name, bank in BANKS.items():
            t0 = time.perf_counter()
            th = slm.integrate(slm.SLMODEConfig(**base, **bank), **grid).isel(H=0, L=0, eta=0, signal=0, noise=0)
            wall = time.perf_counter() - t0
            p = permute_heads(sim, match_heads(sim["M"].values, th["M"].values))
            gm, sm = max_deviation(p["M"].values, th["M"].values)
            diag = [np.diagonal(x["Q"].values, axis1=-2, axis2=-1) for x in (p, th)]
            gq, sq = max_deviation(*diag)
            print(f"| {act} | {name} | {gm:.3f} ({sm:.3f}) | {gq:.3f} ({sq:.3f}) | {wall:.0f} |", flush=True)


if __name__ == "__main__":
    drift_errors()
    through_escape()
