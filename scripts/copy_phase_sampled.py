"""Claim (Spec B, sections 3 and 4): the copy head's sampled phase diagram. Where in (N, L) the
posterior's profile along the previous-token weight has two basins separated by a barrier at the
sampled P*, against the reduced, Gaussian-corrected and large-deviation P*, and where the sampled
first-order line ends: along N at L = 32, and along L at N = 1 and N = 20 (softmax, V = 4, data
set 0; ``jaxattn.copyhead.landscape.sampled_phase_diagram``, the P* search in rounds of engine
grids).

The map's defaults (``copyhead._config.MAP_SAMPLER``): HMC in the windows, 400 steps of
burn-in and 600 draws 3 steps apart, one P a point per round and four ladders, whose spread is
the log-odds' error with three degrees of freedom (at N = 1 the basin log-odds scatter from seed
to seed 1.9x MBAR's error, ``scripts/copy_landscape_seed_scatter.py``). ``jaxattn copy
phase-diagram --sampled --L 32 --N 1,2,3,4,5,10,20 --out DIR --json`` runs the first line.

Run:  python scripts/copy_phase_sampled.py             (each line's stores are kept in
                                                       results/copy_phase_sampled/{N,L}, and a
                                                       rerun resumes from them; --line N or L
                                                       runs one)
      python scripts/copy_phase_sampled.py --quick --out-dir /tmp/figs   (a smoke test: L = 8,
          N = 20 alone, short chains)
Writes docs/figures/copy_phase_sampled.json (each line's map: rows, critical points, rounds, and
the wall time) and docs/figures/copy_phase_sampled_{N,L}.png, or the same under --out-dir, and
prints a markdown table.
"""

from __future__ import annotations

import os
import time

import jaxattn

jaxattn.use_cpu_cores()

import _options  # noqa: E402

from jaxattn.copyhead import landscape  # noqa: E402
from jaxattn.copyhead.plots import sampled_phase_figure  # noqa: E402
from jaxattn.engine.store import read_json, write_json  # noqa: E402
from jaxattn.io import json_safe  # noqa: E402

OPT = _options.parse(__doc__, lambda ap: ap.add_argument("--line", choices=("N", "L"), help="run one line"))
STORES = os.path.join("results", "copy_phase_sampled") if not OPT.quick else os.path.join(OPT.out_dir, "stores")
SAMPLING: dict = {}  # the map's defaults
LINES = {"N": ([32], [1, 2, 3, 4, 5, 10, 20]), "L": ([8, 16, 24, 32, 48], [1, 20])}
if OPT.quick:
    SAMPLING = dict(burn_in=100, n_draws=10, thin=5, n_chains=2, reweight_span=8, large_deviation_samples=32)
    LINES = {"N": ([8], [20])}
OUT = os.path.join(OPT.out_dir, "copy_phase_sampled.json")


def _pm(x, dx):
    return "-" if x is None else f"{x:.1f} ± {dx:.1f}"


def table(maps: dict[str, landscape.PhaseMap]) -> None:
    print("| L | N | sampled P* | first order | barrier (kT) | large deviation | reduced P* | corrected P* | max R-hat |")
    print("|---|---|---|---|---|---|---|---|---|")
    seen = set()
    for m in maps.values():
        for r in m.rows:
            if (r.L, r.N) in seen:
                continue
            seen.add((r.L, r.N))
            t = r.theory
            corrected = "-" if t.p_star_corrected is None else f"{t.p_star_corrected:.1f}"
            print(
                f"| {r.L} | {r.N:g} | {_pm(r.p_star_sampled, r.p_star_sampled_err)} | "
                f"{'yes' if r.first_order_sampled else 'no'} | {_pm(r.barrier, r.barrier_err)} | "
                f"{_pm(t.p_star_large_deviation, t.p_star_large_deviation_err)} | {t.p_star_reduced:.1f} | "
                f"{corrected} | {r.max_window_rhat:.3f} |"
            )
    for name, m in maps.items():
        crit = m.critical_N_sampled if name == "N" else m.critical_L_sampled
        for v, c in crit.items():
            where = "not bracketed" if c is None else f"{c.value:.3g} in [{c.bracket[0]:g}, {c.bracket[1]:g}]"
            print(f"\n{'critical_N_sampled' if name == 'N' else 'critical_L_sampled'} at {'L' if name == 'N' else 'N'} = {v}: {where}")
        n = len(m.rounds)
        print(f"\nline {name}: {n} round{'s' * (n != 1)}, " + ", ".join(f"{r.ladders} ladders in {r.seconds} s" for r in m.rounds))


def main():
    kept = read_json(OUT) if os.path.exists(OUT) and OPT.line else {}
    out, maps = {k: v for k, v in kept.items() if k in LINES}, {}
    for name, (Ls, Ns) in LINES.items():
        if OPT.line and name != OPT.line:
            try:  # a line kept from an earlier run, if written by this code's format
                maps[name] = landscape.PhaseMap.from_json(out[name])
            except (KeyError, TypeError):
                print(f"line {name}: not rerun, and its kept result is of an older format")
            continue
        t0 = time.perf_counter()
        m = landscape.sampled_phase_diagram(
            Ls, Ns, 4, out=os.path.join(STORES, name), on_round=lambda r: print(r, flush=True), progress=True, **SAMPLING
        )
        wall = round(time.perf_counter() - t0, 1)
        figure = sampled_phase_figure(m, os.path.join(OPT.out_dir, f"copy_phase_sampled_{name}.png"))
        settings = {**landscape.MAP_SAMPLER, "n_chains": landscape.MAP_CHAINS, "bracket": 1, **SAMPLING}
        out[name] = {**json_safe(m), "figure": figure, "settings": settings, "seconds": wall}
        maps[name] = m
        write_json(OUT, out, indent=1)  # after each line: a killed run keeps the lines it finished
    table(maps)


if __name__ == "__main__":
    main()
