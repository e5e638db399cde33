"""The ``jaxattn`` command: each model's group (``jaxattn slm ...``, ``jaxattn copy ...``), loaded
when first used, the sweep commands (``jaxattn sweep ...``) and ``jaxattn info PATH``. More groups come from the
entry-point group ``jaxattn.commands`` of other installed packages."""

from __future__ import annotations

import importlib

import click

COMMANDS = {
    "slm": "jaxattn.slm.cli:slm",
    "copy": "jaxattn.copyhead.cli:copy",
    "sweep": "jaxattn.cli.sweep:sweep",
    "info": "jaxattn.cli.info:info",
}
ENTRY_POINT_GROUP = "jaxattn.commands"


def _commands() -> dict[str, str]:
    from importlib.metadata import entry_points

    extra = {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name not in COMMANDS}
    return {**COMMANDS, **extra}


class LazyGroup(click.Group):
    """A group whose subcommands are imported only when listed or run (a fast ``--help``)."""

    def list_commands(self, ctx):
        return sorted(_commands())

    def get_command(self, ctx, name):
        ref = _commands().get(name)
        if ref is None:
            return None
        module, _, attr = ref.partition(":")
        return getattr(importlib.import_module(module), attr)


@click.group(cls=LazyGroup)
@click.version_option(package_name="jaxattn", prog_name="jaxattn")
@click.option(
    "--no-cache",
    is_flag=True,
    help="Do not use the persistent compilation cache (also JAXATTN_NO_CACHE=1; folder: JAXATTN_CACHE_DIR).",
)
def main(no_cache):
    """jaxattn: simulate the theory of attention."""
    from jaxattn.core.devices import use_cpu_cores
    from jaxattn.engine import cache

    use_cpu_cores()  # one XLA host device per core: grids are sharded over them
    if not no_cache:
        cache.enable()


__all__ = ["main"]
