"""Claim (Spec B, sections 3 and 4): sampling the copy head's posterior locates the
first-order transition. The free-energy profile F(a) along the previous-token weight, from
umbrella sampling of the marginal posterior of G (W integrated out exactly, the exact finite-data
action B.3a on data set 0) with MBAR, against the reduced action S(a) (B.3b on the ansatz); the
sampled P* (basins of equal posterior probability) against the reduced action's P* and against
the reduced action with the Gaussian fluctuations of the other L^2 - 1 directions of G.

Softmax, L = 32, V = 4, at N = 20 and N = 1 (``jaxattn.copyhead.landscape.landscape`` with
independent windows and no reweighting, ``SAMPLING`` below; ``jaxattn copy landscape --N 20
--no-exchange --chains 4 --reweight-span 0 --json`` runs the same). With ``--linear``: linear
attention, L = 4, V = 8, along |a_G| at N = 20 and N = 1, the sampled minimum against the reduced
action's (``jaxattn copy landscape --attention linear --L 4 --V 8 --N 20 --json``).

Run:  python scripts/copy_landscape_sampled.py                    (about 6 minutes on 2 cores)
      python scripts/copy_landscape_sampled.py --corrected-only   (the Gaussian-corrected theory
                                                                    of the last run only)
      python scripts/copy_landscape_sampled.py --linear           (about 1.5 minutes)
      python scripts/copy_landscape_sampled.py --quick --out-dir /tmp/figs   (a smoke test: N = 20
          alone, few short chains; without --linear or --corrected-only it runs all three modes)
Writes docs/figures/copy_landscape_sampled_N{20,1}.png and docs/figures/copy_landscape_sampled.json
(docs/figures/copy_landscape_linear_N{20,1}.png and .json with --linear), or the same under
--out-dir, and prints a markdown table.
"""

from __future__ import annotations

import json
import os
import time

import jaxattn

jaxattn.use_cpu_cores()

import _options  # noqa: E402

from jaxattn.copyhead import (  # noqa: E402
    fluctuations,
    landscape,
    network,
    profile,
)
from jaxattn.copyhead.plots import sampled_landscape_figure  # noqa: E402


def _flags(ap):
    ap.add_argument("--linear", action="store_true", help="linear attention, L = 4, V = 8")
    ap.add_argument("--corrected-only", action="store_true", help="the Gaussian-corrected theory of the last run only")


OPT = _options.parse(__doc__, _flags)
ARCH = network.CopyArch(32, 4, "softmax")
LINEAR = network.CopyArch(4, 8, "linear")
FIGURES = OPT.out_dir
FIG = os.path.join(FIGURES, "copy_landscape_sampled")
NS = (20.0, 1.0)
# the scheme the claims page reports: independent windows, 4 chains each, a scan of five P around
# the theory's P* and secant steps (landscape's defaults before replica exchange and reweighting)
SAMPLING = dict(exchange=False, n_chains=4, reweight_span=0)
if OPT.quick:  # N = 20 alone (each N is compiled anew), few short chains, at most one P added
    NS = (20.0,)
    SAMPLING = dict(SAMPLING, max_extend=1, max_spacing=1.0, n_chains=2, burn_in=20, n_draws=10, thin=2, n_bins=8)


def add_corrected(row: dict, N: float) -> None:
    """The reduced and the Gaussian-corrected gaps at the row's P, and the corrected P*
    (``fluctuations.p_star_corrected_near`` from the reduced action's P*: ``None`` where the
    Gaussian approximation fails, a Hessian eigenvalue that is not positive)."""
    c_bar = float(profile.copy_strength(row["a_barrier"], ARCH.L))
    gaps = [fluctuations.corrected_gap(ARCH, P, N, c_bar) for P in row["P"]]
    row["gap_reduced"] = [g[0] for g in gaps]
    row["gap_corrected"] = [g[1] for g in gaps]
    row["p_star_corrected"] = fluctuations.p_star_corrected_near(ARCH, N, row["p_star_theory"])


def main(corrected_only: bool = False):
    if corrected_only:  # recompute the theory columns of an existing run
        with open(f"{FIG}.json") as f:
            rows = json.load(f)
        for N, row in rows.items():
            add_corrected(row, float(N))
        with open(f"{FIG}.json", "w") as f:
            json.dump(rows, f, indent=1)
        return table(rows)
    rows = {}
    for N in NS:
        t0 = time.perf_counter()
        r = landscape.landscape(ARCH, None, N, progress=True, **SAMPLING)
        sampled_landscape_figure(r, f"{FIG}_N{N:g}.png")
        row = dict(
            landscape.scan_record(r),
            wall_seconds=time.perf_counter() - t0,
            **landscape.window_diagnostics(list(r.profiles)),
        )
        add_corrected(row, N)
        rows[f"{N:g}"] = row
        with open(f"{FIG}.json", "w") as f:  # after each N: a long run keeps what it has
            json.dump(rows, f, indent=1, default=lambda x: None if x != x else x)
    table(rows)


def linear() -> None:
    """Linear attention along |a_G| at N = 20 and 1, on the default grid (0.5, 1, 2, 4 onsets)."""
    rows = {}
    for N in NS:
        t0 = time.perf_counter()
        r = landscape.landscape(LINEAR, None, N, progress=True, **SAMPLING)
        sampled_landscape_figure(r, os.path.join(FIGURES, f"copy_landscape_linear_N{N:g}.png"))
        rows[f"{N:g}"] = dict(
            landscape.scan_record(r), wall_seconds=time.perf_counter() - t0, **landscape.window_diagnostics(list(r.profiles))
        )
    with open(os.path.join(FIGURES, "copy_landscape_linear.json"), "w") as f:
        json.dump(rows, f, indent=1)
    print("| N | P | P / onset | sampled minimum abs(a_G) | theory abs(a_G) | max R-hat | min ESS |")
    print("|---|---|---|---|---|---|---|")
    for N, row in rows.items():
        for k, P in enumerate(row["P"]):
            print(
                f"| {N} | {P} | {P / row['p_onset_theory']:.2f} | {row['a_min_sampled'][k]:.3f} | "
                f"{row['a_min_theory'][k]:.3f} | {row['max_window_rhat'][k]:.3f} | {row['min_window_ess'][k]:.0f} |"
            )
    print(f"bin width {rows['20']['bin_width']:.3f}")


def table(rows: dict) -> None:
    print("| N | reduced-action P* | Gaussian-corrected P* | sampled P* | sampled - reduced | sampled - corrected |")
    print("|---|---|---|---|---|---|")
    for N, row in rows.items():
        ps, dps, pt = row["p_star_sampled"], row["p_star_sampled_err"], row["p_star_theory"]
        pc = row["p_star_corrected"]
        print(
            f"| {N} | {pt:.1f} | {'-' if pc is None else f'{pc:.1f}'} | {ps:.1f} ± {dps:.1f} | "
            f"{ps - pt:+.1f} ({100 * (ps - pt) / pt:+.1f}%) | "
            f"{'-' if pc is None else f'{ps - pc:+.1f} ({100 * (ps - pc) / pc:+.1f}%)'} |"
        )


if __name__ == "__main__":
    if OPT.linear:
        linear()
    else:
        main(corrected_only=OPT.corrected_only)
        if OPT.quick and not OPT.corrected_only:  # the smoke test goes through the other two modes too
            main(corrected_only=True)
            linear()
