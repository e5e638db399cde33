"""Command line of the copy head (Spec B): ``jaxattn copy train | sample | theory | phase-diagram |
landscape``.

``train`` runs full-batch Adam over a grid ``P x seeds x inits`` and reports the global minimum
per ``P``; ``sample`` runs SGLD chains on ``exp(-N U)`` from a uniform and a copy start; ``theory``
and ``phase-diagram`` evaluate the reduced effective action. The options are the fields of the
configs (:mod:`jaxattn.copyhead._config`) with their defaults; every command accepts ``--json``.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from typing import Any

import click
import numpy as np

from jaxattn.cli.common import (
    OutPath,
    clean_errors,
    config_from,
    config_options,
    emit,
    fail_late,
    figure_error,
    figure_option,
    floats,
    ints,
    out_option,
    progress_option,
    renamed,
    words,
)
from jaxattn.copyhead._config import (
    LANDSCAPE_KERNELS,
    LD_SAMPLES,
    MAP_CHAINS,
    MAP_SAMPLER,
    REWEIGHT_SPAN,
    CopyConfig,
    CopyData,
    CopyLandscapeConfig,
    SGLDConfig,
)
from jaxattn.copyhead.network import ATTENTIONS, LINEAR_NORMS, CopyArch
from jaxattn.core import checks
from jaxattn.core.checks import plain
from jaxattn.core.precision import MATMUL_PRECISIONS

HEADLINE = ("prev_weight", "a1", "aG", "U", "train_error", "test_error")
CHOICES = {"attention": ATTENTIONS, "linear_norm": LINEAR_NORMS, "matmul_precision": MATMUL_PRECISIONS}


def _scalar_or_list(x, cast: Callable[[Any], Any] = float):
    vals = [cast(v) for v in np.asarray(x).ravel()]
    return vals[0] if len(vals) == 1 else vals


@click.group()
def copy():
    """The copy task (Spec B): Adam grids over P with global-minimum filtering, SGLD sampling, theory."""


@copy.command()
@config_options(CopyConfig, choices=CHOICES)
@click.option("--P", "P", callback=ints, default="200,350,700", show_default=True, help="Sample sizes (list).")
@click.option("--seeds", type=int, default=4, show_default=True, help="Seeds 0..seeds-1.")
@click.option(
    "--inits", callback=words, default="random,copy", show_default=True, help="Initialisations (random, copy)."
)
@progress_option
@out_option("results/copy_train.nc")
@figure_option("results/copy_train.png")
@click.option("--json", "as_json", is_flag=True, help="Print the headline numbers as one JSON object.")
@clean_errors
def train(P, seeds, inits, progress, out, figure, as_json, **o):
    """Full-batch Adam on U over P x seeds x inits; report the global minimum per P."""
    from jaxattn import io
    from jaxattn.copyhead import experiments
    from jaxattn.copyhead.plots import copy_figure

    ds = experiments.train(
        config_from(CopyConfig, o), P=P, seed=range(checks.integer("seeds", seeds, 1)), init=inits, progress=progress
    )
    best = experiments.global_minimum(ds)
    if out:
        io.save(ds, out)
    fig_err = figure_error(figure, lambda path: copy_figure(ds, path=path))
    head = {k: _scalar_or_list(best[k].values) for k in HEADLINE}
    inits = ds["init"].values.tolist()
    emit(
        {
            **head,
            "P": P if len(P) > 1 else P[0],
            "best_init": _scalar_or_list(best["best_init"].values, str),
            "n_copy": {i: _scalar_or_list(best["n_copy"].sel(init=i), int) for i in inits},
            "n_uniform": {i: _scalar_or_list(best["n_uniform"].sel(init=i), int) for i in inits},
            "hysteresis": [bool(h) for h in best["hysteresis"].values] if len(P) > 1 else bool(best["hysteresis"][0]),
            "n_runs": int(ds["U"].size),
            "n_converged": int(ds["converged"].sum()),
            "n_diverged": int(ds["diverged"].sum()),
            "wall_seconds": round(float(ds.attrs["wall_seconds"]), 2),
            "out": out or None,
            "figure": None if fig_err else figure or None,
        },
        as_json,
    )
    fail_late(fig_err)


@copy.command()
@config_options(CopyData, choices=CHOICES)
@config_options(SGLDConfig)
@click.option("--P", "P", callback=ints, default="200,700", show_default=True, help="Sample sizes (list).")
@click.option(
    "--starts", callback=words, default="uniform,copy", show_default=True, help="Chain starts (uniform, copy)."
)
@progress_option
@out_option("results/copy_sample.nc")
@figure_option("results/copy_sample.png")
@click.option(
    "--arviz",
    "arviz_path",
    type=OutPath("netcdf"),
    default=None,
    help="Also write the draws as ArviZ InferenceData (netCDF).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the headline numbers as one JSON object.")
@clean_errors
def sample(P, starts, progress, out, figure, arviz_path, as_json, **o):
    """SGLD chains on exp(-N U) from uniform and copy starts; report posterior means per P."""
    from jaxattn import io
    from jaxattn.copyhead import experiments
    from jaxattn.copyhead.plots import copy_figure

    ds = experiments.sample(config_from(CopyData, o), config_from(SGLDConfig, o), P=P, start=starts, progress=progress)
    if out:
        io.save(ds, out)
    arviz_err = None
    if arviz_path:
        from jaxattn.core.diagnostics import to_arviz

        try:
            os.makedirs(os.path.dirname(os.path.abspath(arviz_path)), exist_ok=True)
            to_arviz(ds, list(experiments.SAMPLE_OBSERVABLES)).to_netcdf(arviz_path)
        except Exception as err:  # noqa: BLE001 - the draws are saved in --out; the summary stands
            arviz_err = f"could not write the ArviZ file {arviz_path}: {err}"
    fig_err = figure_error(figure, lambda path: copy_figure(None, ds, path=path))
    starts_ = ds["start"].values.tolist()
    head = {}
    for k in HEADLINE:
        s = experiments.posterior_summary(ds, k)
        head[k] = {st: _scalar_or_list(s["mean"].sel(start=st).values) for st in ds["start"].values.tolist()}
        if k == "prev_weight":
            head["prev_weight_se"] = {
                st: _scalar_or_list(s["se"].sel(start=st).values) for st in ds["start"].values.tolist()
            }
    first = dict(start=0, chain=0)
    emit(
        {
            **head,
            "P": P if len(P) > 1 else P[0],
            "n_chains": int(ds.sizes["chain"]),
            "n_diverged": int(ds["diverged"].sum()),
            "eps_G": _scalar_or_list(ds["eps_G"].isel(first).values),
            "eps_W": _scalar_or_list(ds["eps_W"].isel(first).values),
            **{
                f"{d}_{k}": {st: _scalar_or_list(ds[f"{d}_{k}"].sel(start=st).values) for st in starts_}
                for k in HEADLINE
                for d in ("rhat", "ess")
            },
            "arviz": None if arviz_err else arviz_path or None,
            "wall_seconds": round(float(ds.attrs["wall_seconds"]), 2),
            "out": out or None,
            "figure": None if fig_err else figure or None,
        },
        as_json,
    )
    fail_late(arviz_err, fig_err)


# --- theory (Spec B, section 3) ------------------------------------------------------------------


def _N(_ctx, param, value):
    try:
        return float(value)
    except (TypeError, ValueError) as err:
        raise click.BadParameter(f"expected a number or 'inf', got {plain(value)}", param=param) from err


@copy.command()
@config_options(CopyArch, choices=CHOICES)
@click.option(
    "--N",
    "N",
    callback=_N,
    default="1",
    show_default=True,
    help="Inverse temperature of exp(-N U); 'inf' gives the MAP (no Occam term).",
)
@click.option("--P", "P", default=None, help="Sample sizes for the theory curves (comma-separated).")
@out_option("", "netCDF file of the numbers and curves ('' for none).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@clean_errors
def theory(N, P, out, as_json, **o):
    """Minima of the reduced action: softmax P*, spinodals and jump; linear onsets and crossover."""
    from jaxattn.copyhead.curves import theory_summary

    Ps = None
    if P is not None:
        try:
            Ps = [float(v) for v in P.split(",") if v.strip()]
        except ValueError as err:
            raise ValueError(f"P must be comma-separated numbers, got {plain(P)}") from err
    arch = config_from(CopyArch, o)
    summary = theory_summary(arch, N, Ps)
    if out:
        from jaxattn import io
        from jaxattn.engine.config import to_json

        curves = summary.get("curves") or {}
        arrays = {k: ("P", np.asarray(v, float)) for k, v in curves.items() if k != "P"}
        ds = io.result_dataset(
            summary, experiment="copy_theory", config={**to_json(arch), "N": N}, arrays=arrays, x64=True
        )
        io.save(ds.assign_coords(P=curves["P"]) if curves else ds, out)
    emit({**summary, "out": out or None}, as_json)


THEORY_ONLY = ("L_max", "n_P", "critical")
"""``THEORY_ONLY`` are the options of ``phase-diagram`` that only the reduced action's diagram reads."""


@copy.command("phase-diagram")
@click.option("--L-max", "L_max", type=int, default=512, show_default=True, help="Largest L of the softmax P*(L).")
@click.option("--n-P", "n_P", type=int, default=400, show_default=True, help="P grid points per (L, V).")
@out_option(
    "results/copy_theory",
    "Folder of the figures (and, with --sampled, of the map's stores, one per L: a rerun resumes).",
    kind="folder",
    dest="out_dir",
)
@click.option(
    "--critical/--no-critical",
    default=True,
    show_default=True,
    help="Locate the end of the softmax first-order line (V = 4; about 30 s).",
)
@click.option("--sampled", is_flag=True, help="The phase diagram from sampling: P*, barrier and jump at every (L, N).")
@click.option("--L", "Ls", callback=ints, default="32", show_default=True, help="--sampled: sequence lengths (list).")
@click.option("--V", "V", type=int, default=4, show_default=True, help="--sampled: vocabulary size.")
@click.option(
    "--N",
    "Ns",
    callback=floats,
    default="1,2,5,10,20",
    show_default=True,
    help="--sampled: inverse temperatures (list).",
)
@config_options(
    CopyLandscapeConfig,
    choices={**CHOICES, "kernel": LANDSCAPE_KERNELS},
    skip=("L", "V", "attention", "linear_norm", "N", "n_windows", "c_lo", "c_hi", "chain_seed"),
    defaults=MAP_SAMPLER,
)
@click.option(
    "--n-windows",
    type=int,
    default=None,
    help="--sampled: umbrella windows per P (default: the most the first round's P need, rounded up to 4).",
)
@click.option("--bracket", type=int, default=1, show_default=True, help="--sampled: P per open (L, N) in each round.")
@click.option("--max-rounds", type=int, default=6, show_default=True, help="--sampled: the most rounds.")
@click.option(
    "--ld-samples",
    "large_deviation_samples",
    type=int,
    default=LD_SAMPLES,
    show_default=True,
    help="--sampled: points per scramble of the large-deviation P* (0: left out).",
)
@click.option("--data-seed", type=int, default=0, show_default=True, help="--sampled: the training data set.")
@click.option(
    "--chains",
    "n_chains",
    type=int,
    default=MAP_CHAINS,
    show_default=True,
    help="--sampled: ladders of umbrella windows.",
)
@click.option("--chain-seed", "seed", type=int, default=0, show_default=True, help="--sampled: seed of the chains.")
@renamed("--out-dir", "--out")
@renamed("--n-chains", "--chains")
@renamed("--seed", "--chain-seed")
@click.option(
    "--store",
    "stores",
    multiple=True,
    type=click.Path(exists=True, file_okay=False),
    help="--sampled: read the rows from a copy_landscape sweep's store (one per L; repeat) instead of sampling.",
)
@progress_option
@click.option("--json", "as_json", is_flag=True, help="Print the fits (or the sampled rows) as one JSON object.")
@click.pass_context
@clean_errors
def phase_diagram(ctx, L_max, n_P, out_dir, critical, sampled, Ls, V, Ns, stores, progress, as_json, **o):
    """Softmax P*(L, V) with fits, linear thresholds against V and L, action landscapes; with
    --sampled, P* from sampling at every (L, N) against the reduced and corrected theories, and
    where the sampled first-order line ends."""
    from click.core import ParameterSource

    given = {k for k in ctx.params if ctx.get_parameter_source(k) != ParameterSource.DEFAULT}
    flag_of = {q.name: q.opts[0] for q in ctx.command.params}
    theory_given = sorted(flag_of[k] for k in given & set(THEORY_ONLY))
    sampled_given = sorted(flag_of[k] for k in given - set(THEORY_ONLY) - {"out_dir", "as_json", "sampled"})
    if sampled and theory_given:
        raise ValueError(f"{', '.join(theory_given)}: not read with --sampled (the reduced action's diagram only)")
    if not sampled and sampled_given:
        raise ValueError(f"{', '.join(sampled_given)}: these options need --sampled")
    if sampled and stores:
        read = {"out_dir", "as_json", "sampled", "stores", "progress", "large_deviation_samples"}
        sampling = sorted(flag_of[k] for k in given - read)
        if sampling:
            raise ValueError(f"{', '.join(sampling)}: not read with --store (the store's sweep file sets them)")
    if sampled:
        return _sampled_phase_diagram(out_dir, Ls, V, Ns, progress, as_json, o, stores)
    from jaxattn.copyhead.plots import landscape_figure, phase_figures

    if L_max < 32:
        raise ValueError(f"L_max must be >= 32, got {L_max}")
    if n_P < 20:
        raise ValueError(f"n_P must be >= 20, got {n_P}")
    fits = phase_figures(out_dir, L_max=L_max, n_P=n_P, critical=critical)
    fits["landscape"] = landscape_figure(os.path.join(out_dir, "copy_landscape.png"))
    emit(fits, as_json)


def _pm(x, dx, digits: int = 1) -> str:
    return "-" if x is None else f"{x:.{digits}f} +- {dx:.{digits}f}"


def _phase_line(row) -> str:
    """One row of the sampled phase diagram (:class:`~jaxattn.copyhead.landscape.PhaseRow`), as a line of text."""
    t = row.theory

    def num(x):
        return "-" if x is None else f"{x:.1f}"

    ld = "-" if t.p_star_large_deviation is None else _pm(t.p_star_large_deviation, t.p_star_large_deviation_err)
    return (
        f"L={row.L} N={row.N:g}: P* {_pm(row.p_star_sampled, row.p_star_sampled_err)} "
        f"({'first order' if row.first_order_sampled else 'no resolved jump'}; "
        f"barrier {_pm(row.barrier, row.barrier_err)} kT, jump in a {_pm(row.jump_a, row.jump_a_err, 3)}); "
        f"large deviation {ld}, reduced {num(t.p_star_reduced)}, corrected {num(t.p_star_corrected)}"
    )


def _sampled_phase_diagram(out_dir, Ls, V, Ns, progress, as_json, o, stores=()):
    from jaxattn.copyhead import landscape
    from jaxattn.copyhead.plots import sampled_phase_figure

    if stores:
        from jaxattn import engine

        ld = o.pop("large_deviation_samples")
        r = landscape.phase_of_dataset([engine.load_store(s) for s in stores], large_deviation_samples=ld)
    else:
        r = landscape.sampled_phase_diagram(
            Ls,
            Ns,
            V,
            out=out_dir,
            progress=progress,
            on_round=lambda rnd: click.echo(str(rnd), err=True),  # a long map shows its progress
            **o,
        )
    for row in r.rows:
        click.echo(_phase_line(row), err=True)
    figure = sampled_phase_figure(r, os.path.join(out_dir, "copy_phase_sampled.png"))
    if as_json:
        from jaxattn.io import json_safe

        return emit({**json_safe(r), "figure": figure}, True)
    for key, name in (("critical_N_sampled", "L"), ("critical_L_sampled", "N")):
        for v, c in getattr(r, key).items():
            where = "not bracketed" if c is None else f"{c.value:.3g} (between {c.bracket[0]:g} and {c.bracket[1]:g})"
            click.echo(f"{key} at {name}={v}: {where}")
    click.echo(f"figure: {figure}")


@copy.command()
@config_options(
    CopyLandscapeConfig,
    choices={**CHOICES, "kernel": LANDSCAPE_KERNELS},
    skip=("N", "n_windows", "c_lo", "c_hi", "chain_seed"),
    defaults={"reweight_span": REWEIGHT_SPAN},
)
@click.option("--N", "N", callback=_N, default="20", show_default=True, help="Inverse temperature of exp(-N U).")
@click.option(
    "--P",
    "P",
    callback=ints,
    default=None,
    help="Sample sizes (comma-separated; default: a grid around the theory's P*).",
)
@click.option("--data-seed", type=int, default=0, show_default=True, help="The training data set.")
@click.option(
    "--chains",
    "n_chains",
    type=int,
    default=2,
    show_default=True,
    help="Ladders of umbrella windows (chains per window).",
)
@click.option("--chain-seed", "seed", type=int, default=0, show_default=True, help="Seed of the chains.")
@renamed("--n-chains", "--chains")
@renamed("--seed", "--chain-seed")
@progress_option
@out_option("results/copy_landscape.nc", "netCDF file of the profiles and windows per P ('' for none).")
@figure_option("results/copy_landscape.png")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@clean_errors
def landscape(N, P, data_seed, n_chains, seed, progress, out, figure, as_json, **o):
    """Free-energy profile by umbrella sampling and MBAR: softmax along the previous-token weight, with P*
    from sampling; linear along |a_G|, with the minimum against the theory's."""
    import dataclasses

    from jaxattn.copyhead import landscape
    from jaxattn.copyhead.plots import sampled_landscape_figure

    arch = config_from(CopyArch, o)
    sampler = {k: v for k, v in o.items() if k not in {f.name for f in dataclasses.fields(CopyArch)}}
    with warnings.catch_warnings():  # a cut ladder is the summary's "ladders" line, not a warning as well
        warnings.filterwarnings("ignore", message=r"P=\d+: replica exchange never swapped")
        r = landscape.landscape(
            arch, P, N, progress=progress, data_seed=data_seed, n_chains=n_chains, seed=seed, **sampler
        )
    fig_err = figure_error(figure, lambda path: sampled_landscape_figure(r, path))
    profs = list(r.profiles)
    record = {
        **landscape.scan_record(r),
        **landscape.window_diagnostics(profs),
        "out": out or None,
        "figure": None if fig_err else figure or None,
    }
    if out:
        from jaxattn import io

        io.save(io.with_result(landscape.profiles_dataset(profs, list(r.P)), record), out)
    emit(record, as_json, _landscape_summary(record))
    fail_late(fig_err)


RHAT_MIXED = 1.05
"""The largest split R-hat of a window whose chains count as mixed (the usual threshold)."""


def _landscape_summary(r: dict) -> dict:
    """What a person ran ``copy landscape`` for: ``P*`` with its error against the theory's, the
    verdict, the barrier there, and whether the windows' chains mixed and the ladders exchanged.
    The arrays (log-odds per ``P``, reweighted curves, per-window diagnostics) are in ``--json``."""
    from jaxattn.cli.common import with_error

    P = r["P"]
    if "p_star_sampled" in r:
        head = {
            "P* sampled": with_error(r["p_star_sampled"], r["p_star_sampled_err"]),
            "P* theory": r["p_star_theory"],
            "first order": "yes (a barrier between the basins at P*)"
            if r["first_order_sampled"]
            else "no: a crossover (no barrier at P*)",
            "barrier at P*": with_error(r["barrier_at_p_star"], r["barrier_at_p_star_err"]),
            "jump in a": with_error(r["jump_a"], r["jump_a_err"]),
        }
    else:
        head = {
            "a_min sampled": r["a_min_sampled"],
            "a_min theory": r["a_min_theory"],
            "onset P theory": r["p_onset_theory"],
        }
    rhat, ess = r["max_window_rhat"], r["min_window_ess"]
    worst = int(np.nanargmax(rhat))
    mixed = (
        f"yes (R-hat <= {max(rhat):.3g}, ESS >= {min(ess):.0f})"
        if max(rhat) <= RHAT_MIXED
        else f"no: R-hat {rhat[worst]:.3g} at P = {P[worst]} (above {RHAT_MIXED}): longer chains"
    )
    cut = [(p, pairs) for p, pairs in zip(P, r["pairs_never_swapped"]) if pairs]
    ladder = (
        "every neighbouring pair swapped"
        if not cut
        else "cut at " + "; ".join(f"P = {p}: windows {', '.join(f'{k}-{k + 1}' for k in pairs)}" for p, pairs in cut)
    )
    flagged = sum(r["n_flagged_windows"])
    return {
        **head,
        "N": r["N"],
        "P sampled": P,
        "windows": f"{r['n_windows'][0]} per P" + (f", {flagged} left out (a chain diverged)" if flagged else ""),
        "chains mixed": mixed,
        "ladders": ladder if any(a is not None for a in r["min_swap_acceptance"]) else "no exchange",
        "out": r["out"],
        "figure": r["figure"],
    }
