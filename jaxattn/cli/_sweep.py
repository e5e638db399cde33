"""Command line: ``jaxattn sweep run | submit | status | plot``."""

from __future__ import annotations

import json
import os

import click

from jaxattn.cli.common import OutPath, as_typed, emit, problem_writing, progress_option


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
        raise click.BadParameter(
            f"asked for {n} devices, {len(devs)} available ({devs[0].platform})", param_hint="--devices"
        )
    return devs[:n] if n else devs


@click.group()
def sweep():
    """Sweeps: a grid from a TOML file, one compile, sharded, stored chunk by chunk, resumable."""


def _worker(text: str | None) -> tuple[int, int] | None:
    """``I/N`` from ``--worker``, else from a SLURM job array's environment, else ``None``."""
    if text is None:
        i, n = os.environ.get("SLURM_ARRAY_TASK_ID"), os.environ.get("SLURM_ARRAY_TASK_COUNT")
        if i is None or n is None:
            return None
        text = f"{i}/{n}"
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise click.BadParameter(f"expected I/N (e.g. 0/4), got {text!r}", param_hint="--worker") from None
    if not 0 <= i < n:
        raise click.BadParameter(f"expected 0 <= I < N, got {text!r}", param_hint="--worker")
    return i, n


def start_distributed() -> None:
    """``jax.distributed.initialize`` from the environment: a TPU pod or SLURM is detected by
    JAX; elsewhere ``JAX_COORDINATOR_ADDRESS``, ``JAX_NUM_PROCESSES`` and ``JAX_PROCESS_ID`` name
    the coordinator, the number of processes and this one. Recoverability is turned on so that a
    process that dies does not stop the others (they finish their chunks and take over its)."""
    import jax

    kw = {}
    for var, key in (("JAX_NUM_PROCESSES", "num_processes"), ("JAX_PROCESS_ID", "process_id")):
        if os.environ.get(var):
            try:
                kw[key] = int(os.environ[var])
            except ValueError:
                raise click.UsageError(f"--distributed: {var} must be an integer, got {os.environ[var]!r}") from None
    jax.config.update("jax_enable_recoverability", True)
    try:
        jax.distributed.initialize(**kw)
    except (RuntimeError, ValueError) as err:  # no cluster found, or JAX already started in this process
        first = str(err).strip().splitlines()[0].rstrip(".") if str(err).strip() else type(err).__name__
        raise click.UsageError(
            f"--distributed: JAX's distributed runtime did not start ({first}); run it under SLURM or on a TPU "
            "pod, or set JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES and JAX_PROCESS_ID"
        ) from None


def _check_store_out(out: str) -> None:
    """Refuse an ``--out`` that cannot hold a store before any work."""
    from jaxattn.engine.store import out_problem

    why = out_problem(out)
    if why is not None:
        ctx = click.get_current_context()
        raise click.BadParameter(why, ctx, next(p for p in ctx.command.params if p.name == "out"))


def _budget(text: str | None) -> int | None:
    """``--memory-budget`` in bytes; a bad size is a usage error naming the option."""
    if text is None:
        return None
    from jaxattn.engine import parse_size

    try:
        return parse_size(text)
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint="'--memory-budget'") from None


def _store(path: str) -> str:
    """A store's folder for ``status`` and ``plot``: one line, not a traceback, if it is none."""
    from jaxattn.engine import store

    try:
        store.require_manifest(path)
    except (store.NotAStore, store.DamagedStore) as err:
        raise click.ClickException(str(err)) from None
    return path


@sweep.command("run")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--out", type=click.Path(file_okay=False), default=None, help="Store folder (default: results/<file name>)."
)
@click.option("--devices", type=int, default=None, help="Use the first N local devices (default: all).")
@click.option(
    "--memory-budget",
    default=None,
    help="Memory for one chunk and for the grid's plan, e.g. 2GB (default: the file's).",
)
@click.option(
    "--chunk-size", type=click.IntRange(min=1), default=None, help="Points per chunk (overrides the memory budget)."
)
@click.option("--extend", is_flag=True, help="Accept a grid with added values: compute only the new points.")
@click.option(
    "--verify", is_flag=True, help="Check every finished chunk's checksum first (damaged ones are recomputed)."
)
@click.option("--repair", is_flag=True, help="Rebuild a damaged or lost manifest.json from FILE and the chunks.")
@click.option(
    "--worker",
    "worker_text",
    default=None,
    metavar="I/N",
    help="One of N workers sharing the store (default: from SLURM_ARRAY_TASK_ID/COUNT). Only "
    "orders which chunks this worker tries first; claims decide who computes what.",
)
@click.option("--reclaim", is_flag=True, help="Take over every claim found at start (after a crash).")
@click.option(
    "--claim-timeout",
    type=float,
    default=300.0,
    show_default=True,
    help="Seconds without a heartbeat after which another host's claim is dead.",
)
@click.option(
    "--distributed",
    is_flag=True,
    help="Call jax.distributed.initialize() first (a TPU pod, several GPU hosts): process 0 plans.",
)
@progress_option
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON object.")
def run_cmd(
    file,
    out,
    devices,
    memory_budget,
    chunk_size,
    extend,
    verify,
    repair,
    worker_text,
    reclaim,
    claim_timeout,
    distributed,
    progress,
    as_json,
):
    """Run (or resume, or help with) the sweep in FILE: claim a chunk, compute it, write it, take the
    next, until every chunk of the store is finished."""
    from jaxattn import engine as sw

    worker = _worker(worker_text)
    if claim_timeout <= 0:
        raise click.BadParameter(f"must be > 0, got {claim_timeout}", param_hint="--claim-timeout")
    if distributed:
        start_distributed()
    budget = _budget(memory_budget)
    try:
        spec = sw.load_file(file, memory_budget=budget)  # the grid sized against the budget first
    except ValueError as err:
        raise click.UsageError(str(err)) from err
    out = out or os.path.join("results", os.path.splitext(os.path.basename(file))[0])
    _check_store_out(out)
    devs = _devices(devices)
    try:
        rep = sw.run_sweep(
            spec,
            out,
            devices=devs,
            chunk_size=chunk_size,
            memory_budget=budget,
            extend=extend,
            progress=progress,
            worker=worker,
            reclaim=reclaim,
            claim_timeout=claim_timeout,
            verify=verify,
            repair=repair,
        )
    except sw.DamagedStore as err:
        raise click.ClickException(str(err)) from err
    except (sw.SweepChanged, ValueError) as err:  # the grid's and the config's problems, before any work
        raise click.UsageError(str(err)) from err
    st = sw.status(out, claim_timeout=claim_timeout, full=verify)  # sizes were just checked; sums if asked
    # without --verify the checksums were not read: "0 damaged" would be a claim not checked
    damaged = len(st["damaged"]) if verify else "unchecked"
    emit(
        {
            "out": out,
            "model": spec.model,
            "n_points": spec.n_points,
            "n_chunks": rep.n_chunks,
            "chunk_points": rep.chunk_points,
            "devices": rep.n_devices,
            "computed": len(rep.computed),
            "skipped": len(rep.skipped),
            "failed": len(st["failed"]),
            "pending": len(st["pending"]),
            "damaged": damaged,
            "diverged": len(st["diverged"]),
            "wall_seconds": round(rep.wall_seconds, 2),
        },
        as_json,
    )
    if st["failed"]:
        raise click.ClickException(str(sw.ChunksFailed(out, st["failed"])))


@sweep.command("submit")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--out", type=click.Path(file_okay=False), required=True, help="Store folder (shared by the workers).")
@click.option("--executor", type=click.Choice(["slurm", "local"]), default="slurm", show_default=True)
@click.option("--workers", type=int, default=2, show_default=True, help="Workers (one job-array task each).")
@click.option("--partition", default=None, help="SLURM partition.")
@click.option("--gpus-per-node", type=int, default=None, help="GPUs per worker.")
@click.option("--cpus-per-task", type=int, default=None, help="CPU cores per worker.")
@click.option("--mem-gb", type=float, default=None, help="Memory per worker, in GB.")
@click.option(
    "--time",
    "time_min",
    type=int,
    default=60,
    show_default=True,
    help="Minutes per job; a worker that runs out is requeued and goes on.",
)
@click.option("--logs", default=None, help="Folder of submitit's logs (default: OUT/submitit).")
@click.option(
    "--wait/--no-wait", default=None, help="Wait for the workers and report (default: yes for local, no for slurm)."
)
@click.option("--json", "as_json", is_flag=True)
def submit_cmd(
    file, out, executor, workers, partition, gpus_per_node, cpus_per_task, mem_gb, time_min, logs, wait, as_json
):
    """Submit the sweep in FILE as WORKERS workers of a submitit job array (`--executor local`:
    subprocesses of this machine). Each runs `jaxattn sweep run FILE --out OUT --worker I/N`."""
    from jaxattn.engine import launch

    for hint, value, least in (
        ("--workers", workers, 1),
        ("--time", time_min, 1),
        ("--gpus-per-node", gpus_per_node, 0),
        ("--cpus-per-task", cpus_per_task, 1),
    ):
        if value is not None and value < least:
            raise click.BadParameter(f"must be >= {least}, got {value}", param_hint=hint)
    if mem_gb is not None and not 0 < mem_gb < float("inf"):  # NaN too
        raise click.BadParameter(f"must be finite and > 0, got {mem_gb}", param_hint="--mem-gb")
    _check_store_out(out)
    try:
        jobs = launch.submit(
            file,
            out,
            executor=executor,
            workers=workers,
            partition=partition,
            gpus_per_node=gpus_per_node,
            cpus_per_task=cpus_per_task,
            mem_gb=mem_gb,
            time_min=time_min,
            folder=logs,
        )
    except (ImportError, ValueError) as err:
        raise click.UsageError(as_typed(str(err), click.get_current_context(silent=True))) from err
    except launch.SubmitError as err:
        raise click.ClickException(str(err)) from None
    wait = executor == "local" if wait is None else wait
    summary = {"out": out, "executor": executor, "workers": workers, "jobs": [j.job_id for j in jobs]}
    if wait:
        results = launch.wait(jobs)
        from jaxattn import engine as sw

        st = sw.status(out)
        summary.update(
            computed=[len(r) for r in results],
            done=len(st["done"]),
            pending=len(st["pending"]),
            failed=len(st["failed"]),
        )
    emit(summary, as_json)


@sweep.command("status")
@click.argument("path", type=click.Path(exists=True, file_okay=False))
@click.option(
    "--claim-timeout",
    type=float,
    default=300.0,
    show_default=True,
    help="Seconds without a heartbeat after which a claim counts as stale.",
)
@click.option("--json", "as_json", is_flag=True)
def status_cmd(path, claim_timeout, as_json):
    """Done, pending, claimed, stale, failed and damaged chunks of the store at PATH, each worker's
    chunks, last heartbeat and SLURM job, the time left at the current pace, and the diverged grid
    points."""
    from jaxattn import engine as sw

    st = sw.status(_store(path), claim_timeout=claim_timeout)
    if as_json:
        click.echo(json.dumps(st))
        return
    click.echo(f"model: {st['model']}  points: {st['n_points']}  chunks: {st['n_chunks']}")
    click.echo(
        f"done: {len(st['done'])}  pending: {len(st['pending'])}  claimed: {len(st['claimed'])}  "
        f"stale: {len(st['stale'])}  failed: {len(st['failed'])}  damaged: {len(st['damaged'])}"
    )
    left, n_left = st["seconds_left"], len(st["pending"]) + len(st["claimed"]) + len(st["stale"])
    if left and n_left:
        who = f"{st['running']} workers running" if st["running"] > 1 else "1 worker running"
        if not st["running"]:
            who = "for one worker; none is running"
        click.echo(
            f"time left: about {_duration(left)} ({n_left} chunk{'s' if n_left > 1 else ''} at "
            f"{_duration(st['seconds_per_chunk'])} each, {who})"
        )
    for label, w in st["workers"].items():
        seen = "" if w["last_seen_seconds_ago"] is None else f", last seen {w['last_seen_seconds_ago']:.0f} s ago"
        job = ""
        if "slurm" in w:
            s = w["slurm"]
            job = f", SLURM job {s.get('array_job_id', s.get('job_id'))}"
            job += f" task {s['array_task_id']}" if "array_task_id" in s else ""
        click.echo(
            f"  worker {label} ({w['host']}, pid {w['pid']}{job}): {len(w['computed'])} computed, "
            f"claims {w['claimed']}{seen}"
        )
    for cid in st["stale"]:
        click.echo(f"  stale claim: chunk {cid} (taken over by the next worker that gets to it)")
    for cid, err in st["failed"].items():
        click.echo(f"  failed chunk {cid}: {err.splitlines()[0]}")
    for cid, why in st["damaged"].items():
        click.echo(f"  damaged chunk {cid}: {why} (`jaxattn sweep run --verify` recomputes it)")
    click.echo(f"diverged points: {len(st['diverged'])}")
    for p in st["diverged"]:
        click.echo(f"  {p}")


def _duration(seconds: float) -> str:
    if seconds < 10:
        return f"{seconds:.2g} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


@sweep.command("plot")
@click.argument("path", type=click.Path(exists=True, file_okay=False))
@click.option("--var", required=True, help="Observable to plot (e.g. error).")
@click.option("--x", "x", required=True, help="Grid dimension on the x axis.")
@click.option("--hue", default=None, help="Grid dimension drawn as one line per value.")
@click.option(
    "--out",
    "fig_path",
    type=OutPath("figure"),
    default=None,
    help="Figure file, its format from the extension; its folder is created (default: PATH/plots/<var>.png).",
)
def plot_cmd(path, var, x, hue, fig_path):
    """Quick look: VAR against grid dimension X, one line per value of HUE; every other dimension
    is averaged (time: its last value). Points not finished are left out, and said so."""
    import warnings

    from jaxattn import engine as sw
    from jaxattn.plots import save, sweep_quicklook

    _store(path)
    if fig_path is None:  # inside the store, in a folder its checks accept (a repair is never blocked)
        fig_path = os.path.join(path, "plots", f"{var}.png")
        why = problem_writing(fig_path, "figure")
        if why is not None:
            raise click.ClickException(f"{why} (choose another with --out)")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            ds = sw.load_store(path, complete=False)
        except FileNotFoundError as err:  # no finished chunk yet
            raise click.ClickException(str(err)) from None
    for w in caught:
        if not issubclass(w.category, sw.store.IncompleteStore):  # said below, for the figure
            click.echo(f"Warning: {w.message}", err=True)
    try:
        fig = sweep_quicklook(ds, var, x, hue)
    except ValueError as err:
        raise click.UsageError(str(err)) from err
    done = ds["done"].values
    if not done.all():
        click.echo(
            f"Warning: {int(done.size - done.sum())} of {done.size} points of {path} are not finished "
            f"(pending, failed or damaged chunks); the figure shows the {int(done.sum())} that are",
            err=True,
        )
    try:
        save(fig, fig_path)
    except (OSError, ValueError) as err:
        raise click.ClickException(f"could not write the figure {fig_path}: {err}") from None
    click.echo(fig_path)
