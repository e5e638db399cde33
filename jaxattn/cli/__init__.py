"""The ``jaxattn`` command: each model's group (``jaxattn slm ...``, ``jaxattn copy ...``), the
sweep commands (``jaxattn sweep ...``) and ``jaxattn info PATH``. More groups come from the
entry-point group ``jaxattn.commands`` of other installed packages.

Nothing heavy is imported to answer ``--help`` or ``--version``: the groups and their commands'
one-line helps are listed in :data:`GROUPS` (a test keeps them equal to the commands' own), and a
command's module (with JAX and its model) is imported only when that command is run or asked for
its own ``--help``.
"""

from __future__ import annotations

import importlib

import click

GROUPS: dict[str, tuple[str, str, dict[str, str]]] = {
    "slm": (
        "jaxattn.slm._cli:slm",
        "The single-location model (Spec A): online SGD, Bayes risk, head pruning, ODE vs SGD.",
        {
            "bayes-risk": "The Bayes risk 1 - E[p_eps] of a prior, with its Nishimori twin and standard error.",
            "compare": "Theory against simulation: the order-parameter ODE (or SDE) and online SGD on one "
            "configuration, heads matched per seed.",
            "prune": "Greedy head pruning of trained models: risk against heads removed.",
            "train": "Train a grid (seeds x H x L x eta x signal) by online SGD; write the dataset and a figure.",
        },
    ),
    "copy": (
        "jaxattn.copyhead._cli:copy",
        "The copy task (Spec B): Adam grids over P with global-minimum filtering, SGLD sampling, theory.",
        {
            "landscape": "Free-energy profile by umbrella sampling and MBAR: softmax along the previous-token "
            "weight, with P* from sampling; linear along |a_G|, with the minimum against the theory's.",
            "phase-diagram": "Softmax P*(L, V) with fits, linear thresholds against V and L, action landscapes; "
            "with --sampled, P* from sampling at every (L, N) against the reduced and corrected theories, and "
            "where the sampled first-order line ends.",
            "sample": "SGLD chains on exp(-N U) from uniform and copy starts; report posterior means per P.",
            "theory": "Minima of the reduced action: softmax P*, spinodals and jump; linear onsets and crossover.",
            "train": "Full-batch Adam on U over P x seeds x inits; report the global minimum per P.",
        },
    ),
    "sweep": (
        "jaxattn.cli._sweep:sweep",
        "Sweeps: a grid from a TOML file, one compile, sharded, stored chunk by chunk, resumable.",
        {
            "plot": "Quick look: VAR against grid dimension X, one line per value of HUE; every other dimension "
            "is averaged (time: its last value).",
            "run": "Run (or resume, or help with) the sweep in FILE: claim a chunk, compute it, write it, take "
            "the next, until every chunk of the store is finished.",
            "status": "Done, pending, claimed, stale, failed and damaged chunks of the store at PATH, each "
            "worker's chunks, last heartbeat and SLURM job, the time left at the current pace, and the "
            "diverged grid points.",
            "submit": "Submit the sweep in FILE as WORKERS workers of a submitit job array (`--executor local`: "
            "subprocesses of this machine).",
        },
    ),
}
"""Group name -> (its ``module:attribute``, its one-line help, command name -> one-line help)."""

COMMANDS = {"info": "jaxattn.cli._info:info"}
"""Top-level commands that are not groups (light modules, imported when listed)."""

ENTRY_POINT_GROUP = "jaxattn.commands"


def _load(ref: str):
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


def _plugins() -> dict[str, str]:
    from importlib.metadata import entry_points

    known = set(GROUPS) | set(COMMANDS)
    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name not in known}


def _start(ctx: click.Context) -> None:
    """What every computing command needs first, once per process: one XLA host device per core
    (grids are sharded over them), the persistent compilation cache (unless ``--no-cache``), and
    JAX's notices through the project (its log's warnings said once each, in one line; XLA's
    informational C++ log off unless ``TF_CPP_MIN_LOG_LEVEL`` says otherwise)."""
    root = ctx.find_root()
    if (root.obj or {}).get("started"):
        return
    import os

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")  # read when XLA's runtime loads, below
    import jax  # noqa: F401  (before route: JAX's own log handler is installed at import)

    from jaxattn.core.devices import use_cpu_cores
    from jaxattn.core.notices import route
    from jaxattn.engine import cache

    route("jax", "JAX")

    use_cpu_cores()
    if not (root.obj or {}).get("no_cache"):
        cache.enable()
    root.obj = {**(root.obj or {}), "started": True}


class _GroupStub(click.Group):
    """A group known by its table entry: lists its commands and their helps from :data:`GROUPS`,
    and imports the real group only to run a command (or show that command's own ``--help``)."""

    def __init__(self, name: str, ref: str, help: str, commands: dict[str, str]):
        super().__init__(name=name, help=help)
        self.ref, self.table = ref, commands

    def list_commands(self, ctx):
        return sorted(self.table)

    def get_command(self, ctx, cmd_name):
        if cmd_name not in self.table:
            return None
        _start(ctx)
        return _load(self.ref).get_command(ctx, cmd_name)

    def format_commands(self, ctx, formatter):
        limit = formatter.width - 6 - max(len(n) for n in self.table)
        rows = [(n, click.Command(n, help=h).get_short_help_str(limit)) for n, h in sorted(self.table.items())]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


class LazyGroup(click.Group):
    """The root group: the model groups and ``sweep`` from :data:`GROUPS` (nothing imported until
    a command runs), ``info``, and the plugins' commands (imported when listed)."""

    def list_commands(self, ctx):
        return sorted({*GROUPS, *COMMANDS, *_plugins()})

    def get_command(self, ctx, cmd_name):
        if cmd_name in GROUPS:
            return _GroupStub(cmd_name, *GROUPS[cmd_name])
        ref = COMMANDS.get(cmd_name) or _plugins().get(cmd_name)
        return None if ref is None else _load(ref)


@click.group(cls=LazyGroup)
@click.version_option(package_name="jaxattn", prog_name="jaxattn")
@click.option(
    "--no-cache",
    is_flag=True,
    help="Do not use the persistent compilation cache (also JAXATTN_NO_CACHE=1; folder: JAXATTN_CACHE_DIR).",
)
@click.pass_context
def main(ctx, no_cache):
    """jaxattn: simulate the theory of attention."""
    ctx.obj = {**(ctx.obj or {}), "no_cache": no_cache}
    if ctx.invoked_subcommand not in (*GROUPS, *COMMANDS):  # a plugin's command: start as ours do
        _start(ctx)


__all__ = ["main"]
