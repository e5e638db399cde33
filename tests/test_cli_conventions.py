"""One spelling for each notion across commands: every command's options, walked through click's
own tree, against the table of docs/index.md ("Options"); each old spelling is refused in one
line naming the new one."""

from __future__ import annotations

import importlib
import os
import re

import click
from click.testing import CliRunner

from jaxattn.cli import GROUPS, main

DOCS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "index.md")


def table() -> list[dict[str, str]]:
    text = open(DOCS, encoding="utf-8").read()
    section = re.split(r"\n##+ ", text.split("### Options", 1)[1], maxsplit=1)[0]
    rows = [ln for ln in section.splitlines() if ln.startswith("| ") and not ln.startswith("| notion")]
    out = []
    for ln in rows:
        notion, option, meaning, old = (c.strip() for c in ln.strip("|").split("|"))
        out.append(dict(notion=notion, options=re.findall(r"`([^`]+)`", option), meaning=meaning, old=old))
    return out


def commands():
    for spec, *_ in GROUPS.values():
        module, _, attr = spec.partition(":")
        group = getattr(importlib.import_module(module), attr)
        for name, command in group.commands.items():
            yield f"{group.name} {name}", command


def options(command, hidden: bool):
    return [p for p in command.params if isinstance(p, click.Option) and p.hidden == hidden and p.name != "help"]


def test_every_option_of_every_command_follows_the_table():
    rows = table()
    spelled = {o.split("/")[0] for r in rows for o in r["options"]}
    old = {o: r for r in rows for o in re.findall(r"`([^`]+)`", r["old"])}
    assert {"--chains", "--seeds", "--seed", "--out", "--figure", "--progress", "--json"} <= spelled
    seen = set()
    for where, command in commands():
        for p in options(command, hidden=False):
            flag = max(p.opts, key=len)
            seen.add(flag)
            text = f"{where} {flag}"
            assert flag not in ("--n-chains", "--out-dir"), f"{text}: an old spelling"
            if "chain" in flag and "seed" not in flag:
                assert flag == "--chains", f"{text}: a count of chains is --chains"
            if flag == "--seed":  # a seed of the chains is --chain-seed
                assert "chain" not in (p.help or ""), f"{text}: {p.help}"
            if flag == "--seeds":
                assert p.type is click.INT or isinstance(p.type, click.types.IntParamType), text
            if "progress" in flag:
                assert p.opts == ["--progress"] and p.secondary_opts == ["--no-progress"], text
            if "figure" in flag or flag.endswith("-dir") or flag in ("--output", "-o"):
                assert flag in ("--figure", "--out"), f"{text}: outputs are --out and --figure"
            if flag == "--json":
                assert p.is_flag, text
    assert spelled - {"--chain-seed", "--data-seed"} <= seen, "the table names an option no command has"
    assert set(old) == {"--n-chains", "--out-dir", "--seed"}


def test_old_spellings_are_refused_in_one_line_naming_the_new():
    said = 0
    for where, command in commands():
        for p in options(command, hidden=True):
            flag = max(p.opts, key=len)
            r = CliRunner().invoke(main, [*where.split(), flag, "1"])
            new = {"--n-chains": "--chains", "--out-dir": "--out", "--seed": "--chain-seed"}[flag]
            assert r.exit_code == 2 and r.output.strip().splitlines()[-1] == f"Error: {flag} is now {new}", r.output
            said += 1
    assert said == 5  # landscape: --n-chains, --seed; phase-diagram: --out-dir, --n-chains, --seed


READ_ONLY = {"sweep status"}
"""Commands that compute nothing (they read a store); ``jaxattn info`` is outside the groups."""


def test_every_command_that_computes_saves_with_out():
    missing = [name for name, command in commands() if name not in READ_ONLY
               and "--out" not in {o for p in options(command, hidden=False) for o in p.opts}]
    assert missing == []
