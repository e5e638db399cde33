"""The command line answers ``--help`` and ``--version`` without importing JAX or a model: the
groups' command tables stand in for the commands until one runs, and stay equal to them."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest

from jaxattn import cli

PROBE = """
import sys
from jaxattn.cli import main
try:
    main({args!r}, prog_name="jaxattn")
except SystemExit as e:
    assert e.code == 0, e.code
heavy = sorted(m for m in sys.modules if m in ("jax", "jaxlib", "numpy", "xarray") or m.startswith(("jaxattn.slm", "jaxattn.copyhead", "jaxattn.engine")))
print("HEAVY", heavy)
"""


@pytest.mark.parametrize(
    "args", [["--help"], ["--version"], ["slm", "--help"], ["copy", "--help"], ["sweep", "--help"]]
)
def test_help_and_version_import_neither_jax_nor_a_model(args):
    out = subprocess.run([sys.executable, "-c", PROBE.format(args=args)], capture_output=True, text=True, check=True)
    assert out.stdout.strip().endswith("HEAVY []"), out.stdout + out.stderr


def test_the_command_tables_are_the_commands():
    """Every group's table lists exactly its real commands, each with the command's own help."""
    for name, (ref, help, table) in cli.GROUPS.items():
        group = cli._load(ref)
        assert isinstance(group, click.Group) and group.help is not None
        assert help == group.get_short_help_str(10**6), name
        ctx = click.Context(group)
        assert sorted(table) == sorted(group.list_commands(ctx)), name
        for cmd, text in table.items():
            assert text == group.get_command(ctx, cmd).get_short_help_str(10**6), f"{name} {cmd}"


def test_a_command_runs_through_its_stub_and_an_unknown_one_is_named():
    from click.testing import CliRunner

    r = CliRunner().invoke(cli.main, ["slm", "bayes-risk", "--help"])
    assert r.exit_code == 0 and "--nu" in r.output, r.output
    r = CliRunner().invoke(cli.main, ["slm", "trian"])
    assert r.exit_code == 2 and "No such command 'trian'" in r.output, r.output


def test_choices_are_shown_hyphenated_and_read_in_either_spelling():
    from click.testing import CliRunner

    from jaxattn.cli.common import Choice

    c = Choice(["softmax", "bayes_softmax"])
    assert list(c.choices) == ["softmax", "bayes-softmax"]
    assert c.convert("bayes-softmax", None, None) == c.convert("bayes_softmax", None, None) == "bayes_softmax"
    with pytest.raises(click.BadParameter, match="'bayes-softmax'"):
        c.convert("bayes", None, None)
    r = CliRunner().invoke(cli.main, ["slm", "train", "--help"], terminal_width=200)
    assert "--activation [softmax|softmax1|bayes-softmax|linear]" in r.output
    assert "[default: bayes-softmax]" in r.output and "bayes_softmax" not in r.output
