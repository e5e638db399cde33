"""Command line: ``jaxattn info PATH``: where a result came from."""

from __future__ import annotations

import json
import os

import click


def read_info(path: str) -> dict:
    """The provenance and identity of a saved dataset (``.nc``) or a sweep store (a folder):
    for a store, also each worker's own provenance, from its start in the log."""
    from jaxattn.engine import provenance, store

    if os.path.isdir(path):
        try:
            man = store.read_manifest(path)
        except store.DamagedStore as err:
            raise click.ClickException(str(err)) from None
        if man is None:
            raise click.ClickException(f"{path} is neither a dataset nor a sweep store (no manifest.json)")
        attrs = man.get("attrs", {})
        workers = {
            e.get("worker", str(e.get("pid"))): e["provenance"]
            for e in store.read_log(path)
            if e.get("event") == "start" and "provenance" in e
        }
        out = {
            "path": path,
            "kind": "sweep store",
            "experiment": man["experiment"],
            "provenance": provenance.of(attrs),
            "workers": workers,
        }
        sweep_file = os.path.join(path, "sweep.toml")
        if os.path.exists(sweep_file):
            out["sweep"] = open(sweep_file, encoding="utf-8").read()
        return out
    from jaxattn import io

    try:
        ds = io.load(path)
    except (OSError, ValueError) as err:
        raise click.ClickException(f"cannot read {path} as a dataset: {err}") from err
    return {
        "path": path,
        "kind": "dataset",
        "experiment": ds.attrs.get("experiment"),
        "provenance": provenance.of(ds.attrs),
        "config": json.loads(ds.attrs["config"]) if "config" in ds.attrs else None,
    }


@click.command("info")
@click.argument("path", type=click.Path(exists=True))
@click.option("--json", "as_json", is_flag=True, help="Print it as one JSON object.")
def info(path, as_json):
    """Where the result at PATH (a dataset file or a sweep store) came from: package version, git
    commit and dirty flag, library versions, backend, device kind, precision (x64, and that of
    matrix products) and command."""
    got = read_info(path)
    if as_json:
        click.echo(json.dumps(got))
        return
    p = got["provenance"]
    click.echo(f"{got['kind']}: {path}  experiment: {got['experiment']}")
    if not p:
        click.echo("no provenance recorded (made before jaxattn 0.2.0)")
        return
    commit = p.get("git_commit")
    click.echo(
        f"jaxattn {p['jaxattn']}"
        + (
            f"  commit {commit[:12]}{' (dirty)' if p.get('git_dirty') else ''}"
            if commit
            else "  (not from a git checkout)"
        )
    )
    libs = ", ".join(f"{k} {v}" for k, v in p["libraries"].items() if v)
    click.echo(f"libraries: {libs}")
    click.echo(
        f"backend: {p['backend']} ({p['device_kind']}, {p['n_devices']} devices, {p['n_processes']} processes)"
        f"  x64: {p['x64']}" + (f"  matmul_precision: {p['matmul_precision']}" if "matmul_precision" in p else "")
    )
    click.echo(f"command: {p['command']}")
    if got.get("workers"):
        click.echo(
            f"workers: {len(got['workers'])} started, commits "
            f"{sorted({(w.get('git_commit') or '?')[:12] for w in got['workers'].values()})}"
        )
