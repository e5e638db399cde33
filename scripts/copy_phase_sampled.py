"""Claim (Spec B, sections 3 and 4): the copy head's sampled phase diagram. Where in (N, L) the
posterior's profile along the previous-token weight has two basins separated by a barrier at the
sampled P*, against the reduced action's P* and its Gaussian-corrected P*, and where the sampled
first-order line ends: along N at L = 32, and along L at N = 1 and N = 20 (softmax, V = 4, data
set 0; ``jaxattn.copyhead.landscape.sampled_phase_diagram``).

The chains are 4x longer than the sampler's default (burn-in 4000, 800 draws) and there are four
ladders: at N = 1 the basin log-odds scatter from seed to seed 1.9x MBAR's error, and the 4x
chains halve that scatter (``scripts/copy_landscape_seed_scatter.py``); four ladders make the
spread between them an error estimate with three degrees of freedom. ``jaxattn copy phase-diagram --sampled --L 32
--N 1,2,3,4,5,10,20 --burn-in 4000 --n-draws 800 --chains 4 --json`` runs the first line.

Run:  python scripts/copy_phase_sampled.py                    (about 33 minutes on 2 cores; each
                                                              (L, N) row is kept in
                                                              results/copy_phase_sampled, and a
                                                              rerun resumes from them)
      python scripts/copy_phase_sampled.py --quick --out-dir /tmp/figs   (a smoke test: L = 8,
          N = 20 alone, short chains)
Writes docs/figures/copy_phase_sampled.json and docs/figures/copy_phase_sampled_{N,L}.png, or the
same under --out-dir, and prints a markdown table.
"""

from __future__ import annotations

import json
import os

import jaxattn

jaxattn.use_cpu_cores()

import _options  # noqa: E402

from jaxattn.copyhead import landscape  # noqa: E402
from jaxattn.copyhead.plots import sampled_phase_figure  # noqa: E402

OPT = _options.parse(__doc__)
ROWS = os.path.join("results", "copy_phase_sampled") if not OPT.quick else os.path.join(OPT.out_dir, "rows")
SAMPLING = dict(burn_in=4000, n_draws=800, n_chains=4)
LINES = {"N": ([32], [1, 2, 3, 4, 5, 10, 20]), "L": ([8, 16, 24, 32, 48], [1, 20])}
if OPT.quick:
    SAMPLING = dict(burn_in=100, n_draws=10, thin=5, n_chains=2, reweight_span=8)
    LINES = {"N": ([8], [20])}


def _pm(x, dx):
    return "-" if x is None else f"{x:.1f} ± {dx:.1f}"


def table(out: dict) -> None:
    print("| L | N | sampled P* | first order | barrier (kT) | jump in a | reduced P* | corrected P* | max R-hat |")
    print("|---|---|---|---|---|---|---|---|---|")
    seen = set()
    for line in out.values():
        for r in line["rows"]:
            if (r["L"], r["N"]) in seen:
                continue
            seen.add((r["L"], r["N"]))
            corrected = "-" if r["p_star_corrected"] is None else f"{r['p_star_corrected']:.1f}"
            print(
                f"| {r['L']} | {r['N']:g} | {_pm(r['p_star_sampled'], r['p_star_sampled_err'])} | "
                f"{'yes' if r['first_order_sampled'] else 'no'} | {_pm(r['barrier'], r['barrier_err'])} | "
                f"{r['jump_a']:.3f} ± {r['jump_a_err']:.3f} | {r['p_star_reduced']:.1f} | {corrected} | "
                f"{r['max_window_rhat']:.3f} |"
            )
    for name, line in out.items():
        key = "critical_N_sampled" if name == "N" else "critical_L_sampled"
        for v, c in line[key].items():
            where = "not bracketed" if c is None else f"{c['value']:.3g} in [{c['bracket'][0]:g}, {c['bracket'][1]:g}]"
            print(f"\n{key} at {'L' if name == 'N' else 'N'} = {v}: {where}")


def main():
    out = {}
    for name, (Ls, Ns) in LINES.items():
        r = landscape.sampled_phase_diagram(Ls, Ns, 4, out=ROWS, on_row=lambda row: print(row, flush=True), **SAMPLING)
        r["figure"] = sampled_phase_figure(r, os.path.join(OPT.out_dir, f"copy_phase_sampled_{name}.png"))
        r["settings"] = SAMPLING
        out[name] = r
    with open(os.path.join(OPT.out_dir, "copy_phase_sampled.json"), "w") as f:
        json.dump(out, f, indent=1)
    table(out)


if __name__ == "__main__":
    main()
