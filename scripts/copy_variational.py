"""Check (Spec B, section 4): which theory of the fluctuations of G gets the sampled P* at small
N, where the Laplace (Gaussian-corrected) theory does not exist? Softmax, V = 4, at every point
of the sampled phase diagram (L = 32 for N = 1 to 20; L = 8 to 48 at N = 1 and N = 20):

- the large-deviation P* (``jaxattn.copyhead.fluctuations.p_star_large_deviation``: the
  posterior of the reduced action projected on the previous-token weight through the large
  deviations of the rows' statistics), at every point, converged in its row samples (to 0.1%),
  with its error from independent scrambles;
- the variational P* (``p_star_variational``: the best Gaussian q(G) with its mean on the ansatz,
  256 draws per copy strength), at L = 32 for N = 1, 2, 5, 20 and at L = 8 for N = 1 (it costs
  minutes a point);

and the large-deviation profile's barrier at its P*, beside the sampled, reduced and corrected
P* (and the sampled barrier) of the sampled phase diagram
(``docs/figures/copy_phase_sampled.json``, from ``scripts/copy_phase_sampled.py``).

Run:  python scripts/copy_variational.py                         (55 minutes here, on a machine
          shared with a test run; a rerun keeps the P* of an earlier run of the same code (the
          package's version and source hash) with the same settings)
      python scripts/copy_variational.py --quick --out-dir /tmp/figs   (a smoke test: L = 8,
          N = 20, few draws)
Writes docs/figures/copy_variational.json and the sampled phase diagram's figures with these
lines added (copy_phase_theories_N.png, copy_phase_theories_L.png), or the same under --out-dir,
and prints a markdown table.
"""

from __future__ import annotations

import json
import os
import sys
import time

import jaxattn

jaxattn.use_cpu_cores()

import _options  # noqa: E402
import numpy as np  # noqa: E402

from jaxattn.copyhead import fluctuations, landscape, network, plots, profile  # noqa: E402
from jaxattn.core import umbrella  # noqa: E402
from jaxattn.engine.store import write_json  # noqa: E402

OPT = _options.parse(__doc__)
POINTS = [(32, N) for N in (1.0, 2.0, 3.0, 4.0, 5.0, 10.0, 20.0)]
POINTS += [(L, N) for N in (1.0, 20.0) for L in (8, 16, 24, 48)]
VARIATIONAL = {(32, 1.0), (32, 2.0), (32, 5.0), (32, 20.0), (8, 1.0)}
N_SAMPLES = 256
LD = dict(n_samples=512, rtol=1e-3, n_scrambles=4, max_samples=1 << 14)  # p_star_large_deviation's defaults
if OPT.quick:
    POINTS, VARIATIONAL, N_SAMPLES = [(8, 20.0)], {(8, 20.0)}, 16
    LD = dict(n_samples=32, rtol=1e-2, n_scrambles=2, max_samples=64)
SAMPLED = os.path.join(os.path.dirname(__file__), "..", "docs", "figures", "copy_phase_sampled.json")


def sampled_map() -> dict[str, landscape.PhaseMap]:
    """The sampled phase diagram's lines, ``N`` and ``L`` (empty when the map was not computed;
    a line kept in an older format is named and left out)."""
    if not os.path.exists(SAMPLED):
        return {}
    with open(SAMPLED) as f:
        kept = json.load(f)
    lines = {}
    for part, m in kept.items():
        try:
            lines[part] = landscape.PhaseMap.from_json(m)
        except (KeyError, TypeError) as err:
            print(f"line {part} of {SAMPLED} is of an older format ({type(err).__name__}: {err}): "
                  "rerun scripts/copy_phase_sampled.py --line " + part, file=sys.stderr)
    return lines


def figures(sampled: dict, rows: list[dict]) -> None:
    """The sampled phase diagram's figures with the new theories' lines added."""
    new = {(r["L"], r["N"]): r for r in rows}
    for part in ("N", "L"):
        if part not in sampled:
            continue
        extra = {
            f"{name} (this script)": {key: r[f"p_star_{name.replace(' ', '_')}"] for key, r in new.items()}
            for name in ("large deviation", "variational")
        }
        plots.sampled_phase_figure(sampled[part], os.path.join(OPT.out_dir, f"copy_phase_theories_{part}.png"), extra)


LD_KEYS = ("p_star_large_deviation", "p_star_large_deviation_err", "n_samples_large_deviation",
           "converged_large_deviation")
OUT = os.path.join(OPT.out_dir, "copy_variational.json")


KEY = _options.result_key(n_samples_variational=N_SAMPLES, large_deviation=LD)


def earlier() -> dict:
    """The rows of an earlier run by the same code with the same settings, by ``(L, N)``: a rerun
    keeps their P* (a killed run resumes; a rerun only recomputes the barriers)."""
    kept = _options.earlier(OUT, KEY)
    return {} if kept is None else {(r["L"], r["N"]): r for r in kept["rows"]}


def barrier(arch: network.CopyArch, P: float | None, N: float, n_rows: int) -> float | None:
    """The large-deviation profile's barrier at its own P* (``umbrella.two_basins`` on 400 points
    of ``a``, ``n_rows`` points of the rows; 0 with one minimum)."""
    if P is None:
        return None
    x = profile.weight_logits(arch.L, 400)
    a = 1 / (1 + np.exp(-x))
    F = fluctuations.large_deviation_profile(arch, P, N, a, n_samples=n_rows)
    return float(umbrella.two_basins(a, F, np.zeros_like(F)).barrier)


def main():
    sampled, rows, done = sampled_map(), [], earlier()
    known = {(r.L, r.N): r for m in sampled.values() for r in m.rows}
    for L, N in POINTS:
        t0 = time.perf_counter()
        arch = network.CopyArch(L, 4)
        kept = done.get((L, N))
        if kept:
            ld = {k: kept[k] for k in LD_KEYS}
            var, t_ld = kept["p_star_variational"], kept["seconds_large_deviation"]
        else:
            res = fluctuations.p_star_large_deviation(arch, N, **LD)
            ld = dict(
                p_star_large_deviation=res.p_star,
                p_star_large_deviation_err=res.error,
                n_samples_large_deviation=res.n_samples,
                converged_large_deviation=res.converged,
            )
            t_ld = time.perf_counter() - t0
            var = fluctuations.p_star_variational(arch, N, n_samples=N_SAMPLES) if (L, N) in VARIATIONAL else None
        s = known.get((L, N))
        rows.append(
            dict(
                L=L,
                N=N,
                **ld,
                barrier_large_deviation=barrier(arch, ld["p_star_large_deviation"], N, ld["n_samples_large_deviation"]),
                p_star_variational=var,
                p_star_sampled=s and s.p_star_sampled,
                p_star_sampled_err=s and s.p_star_sampled_err,
                p_star_reduced=s and s.theory.p_star_reduced,
                p_star_corrected=s and s.theory.p_star_corrected,
                seconds_large_deviation=round(t_ld, 1),
                barrier_sampled=s and s.barrier,
                seconds=kept["seconds"] if kept else round(time.perf_counter() - t0, 1),
            )
        )
        print(json.dumps(rows[-1]), flush=True)
        # after every point, so that a killed run resumes from the points it finished
        write_json(OUT, dict(key=KEY, n_samples_variational=N_SAMPLES, large_deviation=LD, rows=rows), indent=1)
    figures(sampled, rows)

    def fmt(x, ref=None):
        if x is None:
            return "-"
        return f"{x:.1f}" if ref is None else f"{x:.1f} ({100 * (x / ref - 1):+.1f}%)"

    def ld_cell(r):
        x, e, ref, se = r["p_star_large_deviation"], r["p_star_large_deviation_err"], r["p_star_sampled"], r["p_star_sampled_err"]
        if x is None:
            return "-"
        if ref is None:
            return f"{x:.2f} ± {e:.2f}"
        z = (x - ref) / np.hypot(e, se or 0.0)
        return f"{x:.2f} ± {e:.2f} ({100 * (x / ref - 1):+.2f}%, {z:+.1f} combined errors)"

    keys = ("p_star_variational", "p_star_corrected", "p_star_reduced")
    print("| L | N | sampled P* | large deviation | variational | corrected | reduced | barrier sampled | barrier LD |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        ref = r["p_star_sampled"]
        sampled = "-" if ref is None else f"{ref:.1f} ± {r['p_star_sampled_err']:.1f}"
        cells = [ld_cell(r)] + [fmt(r[k], ref) for k in keys]
        bars = ["-" if r[k] is None else f"{r[k]:.2f}" for k in ("barrier_sampled", "barrier_large_deviation")]
        print(f"| {r['L']} | {r['N']:g} | {sampled} | " + " | ".join(cells + bars) + " |")


if __name__ == "__main__":
    main()
