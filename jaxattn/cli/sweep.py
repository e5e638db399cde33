"""Command line: ``jaxattn sweep run | status | plot``."""

from __future__ import annotations

import json
import os

import click

from jaxattn.cli.common import emit


def _devices(n: int | None):
    """The first ``n`` local devices (all by default). On a CPU, asks XLA for ``n`` host devices
    first if JAX has not started yet."""
    import jax

    from jaxattn.core.devices import backends_started

    if n is not None:
        if n < 1:
            raise click.BadParameter(f"must be >= 1, got {n}", param_hint="--devices")
        if not backends_started():
            jax.config.update("jax_num_cpu_devices", max(n, os.cpu_count() or 1))
    devs = jax.local_devices()
    if n is not None and n > len(devs):
        raise click.BadParameter(f"asked for {n} devices, {len(devs)} available ({devs[0].platform})",
                                 param_hint="--devices")
    return devs[:n] if n else devs


@click.group()
def sweep():
    """Sweeps: a grid from a TOML file, one compile, sharded, stored chunk by chunk, resumable."""


@sweep.command("run")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Store folder (default: results/<file name>).")
@click.option("--devices", type=int, default=None, help="Use the first N local devices (default: all).")
@click.option("--memory-budget", default=None, help="Memory for one chunk, e.g. 2GB (default: the file's).")
@click.option("--chunk-size", type=int, default=None, help="Points per chunk (overrides the memory budget).")
@click.option("--extend", is_flag=True, help="Accept a grid with added values: compute only the new points.")
@click.option("--distributed", is_flag=True, help="Call jax.distributed.initialize() first (several hosts).")
@click.option("--progress/--no-progress", default=True, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON object.")
def run_cmd(file, out, devices, memory_budget, chunk_size, extend, distributed, progress, as_json):
    """Run (or resume) the sweep in FILE."""
    from jaxattn import sweep as sw

    if distributed:
        import jax

        jax.distributed.initialize()
    try:
        spec = sw.load_file(file)
        budget = sw.parse_size(memory_budget) if memory_budget is not None else None
    except ValueError as err:
        raise click.UsageError(str(err)) from err
    out = out or os.path.join("results", os.path.splitext(os.path.basename(file))[0])
    devs = _devices(devices)
    try:
        rep = sw.run(spec, out, devices=devs, chunk_size=chunk_size, memory_budget=budget, extend=extend,
                     progress=progress)
    except sw.SweepChanged as err:
        raise click.UsageError(str(err)) from err
    st = sw.status(out)
    emit({"out": out, "model": spec.model, "n_points": spec.n_points, "n_chunks": rep.n_chunks,
           "chunk_points": rep.chunk_points, "devices": rep.n_devices, "computed": len(rep.computed),
           "skipped": len(rep.skipped), "failed": len(st["failed"]), "pending": len(st["pending"]),
           "diverged": len(st["diverged"]), "wall_seconds": round(rep.wall_seconds, 2)}, as_json)
    if st["failed"]:
        raise SystemExit(1)


@sweep.command("status")
@click.argument("path", type=click.Path(exists=True, file_okay=False))
@click.option("--json", "as_json", is_flag=True)
def status_cmd(path, as_json):
    """Done, pending and failed chunks of the store at PATH, and the diverged grid points."""
    from jaxattn import sweep as sw

    st = sw.status(path)
    if as_json:
        click.echo(json.dumps(st))
        return
    click.echo(f"model: {st['model']}  points: {st['n_points']}  chunks: {st['n_chunks']}")
    click.echo(f"done: {len(st['done'])}  pending: {len(st['pending'])}  failed: {len(st['failed'])}")
    if st["pending"] and st["seconds_per_chunk"]:
        left = len(st["pending"]) * st["seconds_per_chunk"]
        click.echo(f"time left at the last run's pace: about {left / 60:.1f} min "
                   f"({st['seconds_per_chunk']:.1f} s per chunk)")
    for cid, err in st["failed"].items():
        click.echo(f"  failed chunk {cid}: {err.splitlines()[0]}")
    click.echo(f"diverged points: {len(st['diverged'])}")
    for p in st["diverged"]:
        click.echo(f"  {p}")


@sweep.command("plot")
@click.argument("path", type=click.Path(exists=True, file_okay=False))
@click.option("--var", required=True, help="Observable to plot (e.g. error).")
@click.option("--x", "x", required=True, help="Grid dimension on the x axis.")
@click.option("--hue", default=None, help="Grid dimension drawn as one line per value.")
@click.option("--out", "fig_path", default=None, help="Figure path (default: PATH/<var>.png).")
def plot_cmd(path, var, x, hue, fig_path):
    """Quick look: VAR against grid dimension X, one line per value of HUE; every other dimension
    is averaged (time: its last value)."""
    from jaxattn import sweep as sw
    from jaxattn.plots import sweep_quicklook

    ds = sw.load(path, complete=False)
    try:
        fig = sweep_quicklook(ds, var, x, hue)
    except ValueError as err:
        raise click.UsageError(str(err)) from err
    fig_path = fig_path or os.path.join(path, f"{var}.png")
    fig.savefig(fig_path, dpi=120)
    click.echo(fig_path)
