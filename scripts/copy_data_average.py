"""Check (Spec B, section 4): the large-deviation theory averages the action over data sets; the
sampler sees one data set's exact action. How far does the sampled P* move from one data set to
the next, and does the theory match the mean over data sets? Softmax, V = 4, at L = 8 and 32,
N = 1 and 20: the sampled P* of each of K data sets (umbrella windows with replica exchange,
2 ladders of chains 4x the default), their mean, spread and standard
error, against the large-deviation P* with its own error (``docs/figures/copy_variational.json``,
from ``scripts/copy_variational.py``).

Each L is one sweep of the ``copy_landscape`` experiment (``data_seed`` x ``chain``, with ``N``
zipped with a ``P`` near its P*; each data set's P* is within the +-12 sequences every draw is
reweighted to), kept in ``results/copy_data_average/L{L}``: a killed run resumes from its chunks.

Run:  python scripts/copy_data_average.py                       (8 minutes on 2 cores)
      python scripts/copy_data_average.py --quick --out-dir /tmp/figs   (a smoke test: L = 8,
          N = 20, 2 data sets, short chains)
Writes docs/figures/copy_data_average.json (or the same under --out-dir) and prints a markdown
table.
"""

from __future__ import annotations

import json
import os

import jaxattn

jaxattn.use_cpu_cores()

import _options  # noqa: E402
import numpy as np  # noqa: E402

from jaxattn import engine  # noqa: E402
from jaxattn.copyhead import CopyLandscapeConfig, landscape  # noqa: E402
from jaxattn.copyhead.landscape import COPY_LANDSCAPE  # noqa: E402

OPT = _options.parse(__doc__)
N_DATA = 6
# the P sampled at each (L, N): the sampled phase diagram's P* (data set 0), rounded
POINTS = {8: {1.0: 79, 20.0: 46}, 32: {1.0: 586, 20.0: 340}}
# the windows: the most the spacing needs at any (N, P) of the L (fewer are padded)
# (2 ladders, not the map's 4: each data set's error need only be well below the spread across
# data sets, about 0.8% of P*, and it halves the cost)
SAMPLING = dict(burn_in=4000, n_draws=800, chains=2, n_windows={8: 28, 32: 56}, reweight_span=12)
STORES = os.path.join("results", "copy_data_average")
if OPT.quick:
    N_DATA, POINTS = 2, {8: {20.0: 46}}
    SAMPLING = dict(burn_in=100, n_draws=10, chains=2, n_windows={8: 28}, reweight_span=8)
    STORES = os.path.join(OPT.out_dir, "copy_data_average_stores")
THEORY = os.path.join(_options.FIGURES, "copy_variational.json")
OUT = os.path.join(OPT.out_dir, "copy_data_average.json")


def sweep(L: int) -> engine.Sweep:
    """The sweep of ``L``: ``chain`` x ``data_seed`` x ``N`` zipped with its ``P``."""
    s = SAMPLING
    config = CopyLandscapeConfig(
        L=L,
        V=4,
        attention="softmax",
        n_windows=s["n_windows"][L],
        c_lo=-0.5,
        c_hi=3.0,
        burn_in=s["burn_in"],
        n_draws=s["n_draws"],
        reweight_span=s["reweight_span"],
    )
    Ns, Ps = zip(*sorted(POINTS[L].items()))
    grid = engine.Grid(
        (
            engine.Dim("chain", {"chain": tuple(range(s["chains"]))}),
            engine.Dim("data_seed", {"data_seed": tuple(range(N_DATA))}),
            engine.Dim("point", {"N": Ns, "P": Ps}),
        )
    )
    return engine.parse(engine.dumps(COPY_LANDSCAPE.name, config, grid), f"the sweep of L = {L}")


def sampled(L: int) -> list[dict]:
    """Each data set's row at every N of ``L``: its sampled P* and error (the sweep computed, or
    resumed, first)."""
    out = os.path.join(STORES, f"L{L}")
    report = engine.run_sweep(sweep(L), out, progress=True)
    if report.failed:
        raise SystemExit(f"{out}: chunks failed: {report.failed}")
    ds = engine.load_store(out)
    rows = []
    for k in ds["data_seed"].values:
        for r in landscape.phase_of_dataset(ds.sel(data_seed=k), large_deviation_samples=0).rows:
            rows.append(dict(L=L, N=r.N, data_seed=int(k), p_star_sampled=r.p_star_sampled, p_star_sampled_err=r.p_star_sampled_err))
    return rows


def summary(rows: list[dict], theory: dict) -> list[dict]:
    """Per (L, N): the data sets' P*, their mean, sd and standard error, and the theory's P*."""
    out = []
    for L, N in sorted({(r["L"], r["N"]) for r in rows}):
        mine = [r for r in rows if (r["L"], r["N"]) == (L, N)]
        x = np.array([r["p_star_sampled"] for r in mine], float)
        t = theory.get((L, N), {})
        sd = float(np.std(x, ddof=1)) if x.size > 1 else float("nan")
        out.append(
            dict(
                L=L,
                N=N,
                p_star_sampled=x.tolist(),
                p_star_sampled_err=[r["p_star_sampled_err"] for r in mine],
                mean=float(x.mean()),
                sd=sd,
                sem=sd / np.sqrt(x.size),
                p_star_large_deviation=t.get("p_star_large_deviation"),
                p_star_large_deviation_err=t.get("p_star_large_deviation_err"),
            )
        )
    return out


def main():
    theory = {}
    if os.path.exists(THEORY):
        with open(THEORY) as f:
            theory = {(r["L"], r["N"]): r for r in json.load(f)["rows"]}
    rows = [r for L in sorted(POINTS) for r in sampled(L)]
    table = summary(rows, theory)
    key = _options.result_key(
        n_data=N_DATA,
        points={str(k): v for k, v in POINTS.items()},
        sampling={**SAMPLING, "n_windows": {str(k): v for k, v in SAMPLING["n_windows"].items()}},
    )
    engine.store.write_json(OUT, dict(key=key, rows=rows, summary=table), indent=1)
    print("| L | N | sampled P*, data set 0 | mean over data sets | sd | large deviation | theory - mean |")
    print("|---|---|---|---|---|---|---|")
    for s in table:
        x0, e0 = s["p_star_sampled"][0], s["p_star_sampled_err"][0]
        ld, dld = s["p_star_large_deviation"], s["p_star_large_deviation_err"]
        known = ld is not None and dld is not None  # an older theory file states no error
        diff = f"{ld - s['mean']:+.2f} ± {np.hypot(dld, s['sem']):.2f}" if known else "-"
        theo = f"{ld:.2f} ± {dld:.2f}" if known else "-"
        print(
            f"| {s['L']} | {s['N']:g} | {x0:.2f} ± {e0:.2f} | {s['mean']:.2f} ± {s['sem']:.2f} | {s['sd']:.2f} | "
            f"{theo} | {diff} |"
        )


if __name__ == "__main__":
    main()
