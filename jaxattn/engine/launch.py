"""Sweeps on a cluster through submitit: the workers of :func:`~jaxattn.engine._sweep.run_sweep`
as the tasks of one job array.

Task ``I`` of ``N`` runs the sweep as worker ``I/N`` (the chunks ``I, I + N, ...`` first, then
whatever is left). A task that is preempted or runs out of time is requeued by submitit
(:class:`submitit.helpers.Checkpointable`); the requeued task has the same worker label, so it
takes its own old claims over at once and goes on. Nothing is lost when a task dies for good: its
claims go stale and the other workers take them over. ``executor="local"`` runs the same tasks as
processes of this machine.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import sys

from jaxattn.core.checks import plain

try:
    import submitit
except ImportError:  # an optional extra: jaxattn[cluster]
    submitit = None


class SubmitError(RuntimeError):
    """SLURM cannot take the job array: its commands are missing here, or ``sbatch`` refused the
    submission; the message is one line (the last line of SLURM's own error)."""


def _require():
    if submitit is None:
        raise ImportError("jaxattn sweep submit needs submitit: pip install 'jaxattn[cluster]'")


class SweepWorker(submitit.helpers.Checkpointable if submitit is not None else object):  # pyright: ignore[reportGeneralTypeIssues]
    """One task of the array: run the sweep (its text, so no file need be shared) as ``I/N``;
    returns the ids of the chunks it computed.

    Attributes:
        checkpoint: Inherited from ``submitit.helpers.Checkpointable`` (where submitit is
            installed): a preempted or timed-out task is requeued with the same arguments.
    """

    def __call__(self, text: str, out: str, i: int, n: int) -> list[int]:
        """Run the sweep as worker ``i`` of ``n``.

        Args:
            text: The sweep file's text.
            out: The store's folder.
            i: This worker's index, ``0 <= i < n``.
            n: The number of workers.

        Returns:
            The ids of the chunks this worker computed.
        """
        from jaxattn.core.devices import use_cpu_cores

        use_cpu_cores()
        from jaxattn.engine._sweep import run_sweep
        from jaxattn.engine._sweepfile import parse

        return list(run_sweep(parse(text), out, worker=(i, n)).computed)


def submit(
    file: str,
    out: str,
    *,
    executor: str = "slurm",
    workers: int = 2,
    partition: str | None = None,
    gpus_per_node: int | None = None,
    cpus_per_task: int | None = None,
    mem_gb: float | None = None,
    time_min: int = 60,
    folder: str | None = None,
) -> list:
    """Submit ``workers`` tasks of the sweep in ``file`` into the store ``out``; returns the jobs.

    The plan is written here first (and the file checked against an existing store), so a file
    that differs from the store's is refused before anything is queued.

    Args:
        file: The sweep file.
        out: The store's folder.
        executor: ``"slurm"``, or ``"local"`` for processes of this machine.
        workers: The number of tasks (workers).
        partition: The Slurm partition; ``None`` for the default.
        gpus_per_node: GPUs per node; ``None`` for submitit's default.
        cpus_per_task: CPUs per task; ``None`` for submitit's default.
        mem_gb: Memory per node in GB; ``None`` for submitit's default.
        time_min: The time limit of each task, in minutes.
        folder: submitit's log folder; ``None`` means ``out/submitit``.

    Returns:
        The submitit jobs, one per worker.

    Raises:
        ImportError: If submitit is not installed.
        ValueError: If ``executor`` or ``workers`` is invalid (``workers`` above the number of
            chunks among them: found after the store's plan is written, before any job starts).
        SubmitError: If ``executor="slurm"`` and SLURM's ``sbatch`` or ``srun`` is not on the
            ``PATH`` (found before anything is written), or ``sbatch`` refuses the job.
    """
    _require()
    assert submitit is not None
    if executor not in ("slurm", "local"):
        raise ValueError(f"executor must be 'slurm' or 'local', got {plain(executor)}")
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    if executor == "slurm":
        missing = [c for c in ("sbatch", "srun") if shutil.which(c) is None]
        if missing:
            raise SubmitError(
                f"executor 'slurm' needs SLURM's sbatch and srun; {' and '.join(missing)} "
                f"{'is' if len(missing) == 1 else 'are'} not on the PATH (run it where SLURM is, or use "
                "--executor local for processes of this machine)"
            )
    import jax

    from jaxattn.engine._sweep import open_store, sweep_plan
    from jaxattn.engine._sweepfile import load_file

    sweep = load_file(file)
    out = os.path.abspath(out)
    plan = sweep_plan(sweep, out)
    n_chunks = len(open_store(sweep, plan, out, len(jax.local_devices()))["chunks"])
    if workers > n_chunks:  # a worker computes whole chunks: the others would start and find none
        raise ValueError(
            f"workers must be <= the sweep's {n_chunks} chunk{'s' if n_chunks > 1 else ''} (a worker computes "
            f"whole chunks), got {workers}"
        )
    try:
        ex = submitit.AutoExecutor(folder=folder or os.path.join(out, "submitit"), cluster=executor)
    except RuntimeError as err:  # submitit's own check that srun runs
        raise SubmitError(f"executor {executor!r}: {_one_line(err)}") from None
    params: dict = {"timeout_min": time_min, "name": f"jaxattn-{sweep.model}"}
    if gpus_per_node is not None:
        params["gpus_per_node"] = gpus_per_node
    if cpus_per_task is not None:
        params["cpus_per_task"] = cpus_per_task
    if mem_gb is not None:
        params["mem_gb"] = mem_gb
    if executor == "slurm":
        params["slurm_array_parallelism"] = workers
        if partition is not None:
            params["slurm_partition"] = partition
    ex.update_parameters(**params)
    n = workers
    said = io.StringIO()
    try:
        # submitit prints sbatch's stderr before it raises it: said once, in the error, instead
        with contextlib.redirect_stderr(said):
            jobs = ex.map_array(SweepWorker(), [sweep.text] * n, [out] * n, list(range(n)), [n] * n)
    except RuntimeError as err:  # sbatch refused it (submitit's FailedJobError: sbatch's stderr)
        if executor != "slurm":
            sys.stderr.write(said.getvalue())
            raise
        raise SubmitError(
            f"sbatch refused the job array: {_one_line(err)} (the plan is in {out}; nothing was computed)"
        ) from None
    sys.stderr.write(said.getvalue())
    return jobs


def _one_line(err: BaseException) -> str:
    """An error's text on one line (SLURM's tools write a line per step, the cause last)."""
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    return "; ".join(lines) if lines else type(err).__name__


def wait(jobs) -> list[list[int]]:
    """The chunks each job computed, once each has returned (a failed job raises its error).

    A task has returned when its result is written; SLURM may list it as running a moment longer,
    while its process exits.

    Args:
        jobs: The jobs from :func:`submit`.

    Returns:
        Each job's list of computed chunk ids.
    """
    return [job.result() for job in jobs]
