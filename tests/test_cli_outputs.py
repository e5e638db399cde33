"""Nothing computed and then lost: every file a command writes is checked before any work, with
the option named; a figure that still fails at the end leaves the saved dataset and the printed
summary; inputs that would run nothing, or beyond what the kernels hold, are refused by name."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from jaxattn.cli import main

TINY = ["--D", "8", "--seeds", "1", "--t-max", "0.5", "--n-records", "2", "--n-test", "8", "--no-progress"]

def _formats() -> str:
    """The formats matplotlib's own canvas writes (they vary with its version: avif and gif are
    recent)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    return ", ".join(sorted(FigureCanvasAgg(Figure()).get_supported_filetypes()))


FORMATS = _formats()


def train(*args):
    return CliRunner().invoke(main, ["slm", "train", *TINY, "--no-ode", *args])


@pytest.mark.slow  # a whole command: 10 to 40 s on 2 cores, beyond the default run's share (README)
def test_the_main_job_from_a_folder_without_results_writes_its_figure_and_prints_its_summary(tmp_path):
    """Run where there is no ``results/``, with ``--out`` elsewhere: the default figure's folder
    is created, and the summary is printed (it used to fail after the work)."""
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    r = subprocess.run([sys.executable, "-m", "jaxattn", "slm", "train", *TINY, "--no-ode", "--out", str(elsewhere / "x.nc")],
                       cwd=work, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert (work / "results" / "slm_train.png").stat().st_size > 0
    assert (elsewhere / "x.nc").stat().st_size > 0
    lines = {k: v.strip() for k, v in (ln.split(": ", 1) for ln in r.stdout.strip().splitlines())}
    assert lines["figure"] == "results/slm_train.png" and lines["out"] == str(elsewhere / "x.nc")
    assert float(lines["final_error"].split()[0]) > 0 and lines["n_runs"] == "1" and lines["n_diverged"] == "0"


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--out", "/proc/x.nc",
         "cannot write /proc/x.nc: a file cannot be created in the folder /proc (No such file or directory)"),
        ("--figure", "/proc/x.png",
         "cannot write /proc/x.png: a file cannot be created in the folder /proc (No such file or directory)"),
        ("--figure", "{tmp}/x.foo", f"cannot write a figure as {{tmp}}/x.foo: unknown format '.foo' (formats: {FORMATS})"),
        ("--figure", "{tmp}/x", f"cannot write a figure as {{tmp}}/x: no extension names its format (formats: {FORMATS})"),
        ("--out", "{tmp}/notes.txt",
         "{tmp}/notes.txt exists and is not a netCDF file: not overwritten (remove it, or choose another path)"),
        ("--figure", "{tmp}/notes.png",
         "{tmp}/notes.png exists and is not a PNG figure: not overwritten (remove it, or choose another path)"),
    ],
)
def test_an_output_that_cannot_be_written_is_refused_before_any_work(tmp_path, option, value, message):
    for name in ("notes.txt", "notes.png"):
        (tmp_path / name).write_text("my notes\n")
    r = train(option, value.format(tmp=tmp_path))
    assert r.exit_code == 2
    assert r.output.strip().splitlines()[-1] == f"Error: Invalid value for '{option}': {message.format(tmp=tmp_path)}"
    assert (tmp_path / "notes.txt").read_text() == "my notes\n"  # untouched
    assert "final_error" not in r.output  # refused before the work


def test_a_figure_into_a_missing_folder_creates_it(tmp_path):
    fig = tmp_path / "new" / "folder" / "x.svg"
    r = train("--out", "", "--figure", str(fig))
    assert r.exit_code == 0, r.output
    assert re.search(rf"^figure: +{re.escape(str(fig))}$", r.output, re.M)
    assert fig.read_text().lstrip().startswith("<?xml")


@pytest.mark.parametrize(
    ("command", "message"),
    [
        (["copy", "sample", "--n-test", "2000000000"], "copy_sgld: its setup needs about 2.56 TB"),
        (["copy", "train", "--n-test", "2000000000"], "copy_adam: its setup needs about 2.56 TB"),
    ],
)
def test_a_test_set_too_large_is_refused_before_it_is_drawn(command, message):
    """The copy task's test set is counted in its setup's memory: 2 x 4 bytes x n_test x L (V + 1)
    at L = 32, V = 4 (its tokens and their one-hot embedding, twice for the counts' workspace)."""
    r = CliRunner().invoke(main, [*command, "--no-progress", "--out", "", "--figure", ""])
    assert r.exit_code == 2, r.output
    assert re.fullmatch(
        rf"Error: {message}, more than the [0-9.]+ [GMT]B of host memory available; make the model smaller",
        r.output.strip().splitlines()[-1],
    ), r.output


def test_an_empty_out_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = train("--out", "", "--figure", "")
    assert r.exit_code == 0, r.output
    assert re.search(r"^out: +none$", r.output, re.M) and re.search(r"^figure: +none$", r.output, re.M)
    assert os.listdir(tmp_path) == []


def test_a_figure_that_fails_at_the_end_keeps_the_dataset_and_the_summary(tmp_path, monkeypatch):
    from jaxattn.slm import _cli

    def broken(*args):
        raise OSError("disk full")

    monkeypatch.setattr(_cli, "_training_figure", broken)
    out, fig = tmp_path / "x.nc", tmp_path / "x.png"
    r = train("--out", str(out), "--figure", str(fig))
    assert r.exit_code == 1
    lines = r.output.strip().splitlines()
    assert lines[-1] == f"Error: could not write the figure {fig}: disk full"
    fields = {k: v.strip() for k, v in (ln.split(": ", 1) for ln in lines[:-1])}
    assert fields["figure"] == "none" and fields["out"] == str(out) and float(fields["final_error"].split()[0]) > 0
    assert out.stat().st_size > 0 and not fig.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--D", "20", "--t-max", "0.01"],
         "--t-max gives no SGD step: 0.01 * D / batch_size = 0.01 * 20 / 1 rounds to 0 (raise it, or D)"),
        (["--t-min", "5", "--t-max", "2"], "--t-min must be <= --t-max (an empty time range), got 5 and 2"),
        (["--t-max", "1e15"],
         "--t-max gives 8e+15 SGD steps (time * D / batch_size), more than a step counter holds (2147483647)"),
        (["--D", "2147483648"], "--D must be <= 2147483647 (the kernels' int32), got 2147483648"),
        (["--t-max", "nan"], "--t-max must be finite, got nan"),
        (["--sigma0", "nan"], "--sigma0 must be finite, got nan"),
        (["--diverge-bound", "nan"], "--diverge-bound must be > 1 (inf allowed), got nan"),
        (["--eta", ","], "Invalid value for '--eta': expected at least one number, got ','"),
        (["--t-max", "1e15", "--n-records", "2000000000"],  # the step counter first: no 16 GB of times
         "--t-max gives 8e+15 SGD steps (time * D / batch_size), more than a step counter holds (2147483647)"),
        (["--n-records", "2000000000"],  # refused before the log-spaced times are built (16 GB)
         "--n-records must be <= 1000 or the number of SGD steps + 1 (5: a record is a step, t_max * D / "
         "batch_size of them), got 2000000000"),
    ],
)
def test_a_run_of_nothing_or_beyond_the_kernels_is_refused_by_name(args, message):
    r = train(*args)
    assert r.exit_code == 2 and r.output.strip().splitlines()[-1] == f"Error: {message}", r.output


def test_times_of_zero_alone_ask_for_the_initial_state_and_are_not_refused():
    from jaxattn.slm import SLMConfig

    assert SLMConfig(D=20, times=(0.0,)).validate().record_steps().tolist() == [0]
    with pytest.raises(ValueError, match="times gives no SGD step: 0.01 "):
        SLMConfig(D=20, times=(0.0, 0.01)).validate()


def test_errors_name_the_option_as_typed_not_the_config_field():
    r = CliRunner().invoke(main, ["copy", "sample", "--chains", "0", "--no-progress", "--out", "", "--figure", ""])
    assert r.exit_code == 2 and r.output.strip().splitlines()[-1] == "Error: --chains must be >= 1, got 0"


def test_an_unusable_cache_says_so_once_and_the_run_goes_on(tmp_path, capsys, monkeypatch):
    from jaxattn.engine import cache

    monkeypatch.delenv("JAXATTN_NO_CACHE", raising=False)
    blocked = tmp_path / "file"
    blocked.write_text("")
    where = str(blocked / "cache")
    assert cache.enable(where) is None and cache.enable(where) is None
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"jaxattn: the compile cache {where} cannot be used ({blocked} is a file, not a folder); running "
        "without it, so every run compiles afresh (set JAXATTN_CACHE_DIR to a writable folder, or "
        "JAXATTN_NO_CACHE=1)"
    ]


def test_a_point_larger_than_the_device_is_refused_before_compiling(monkeypatch):
    """The SGD point's state is at least the test batch it draws, 256 samples x L x D floats:
    at D = 10^6, L = 8 that is 8.19 GB, past a device of 1 GB; at D = 1000, 8.2 MB fits."""
    from jaxattn import engine, slm
    from jaxattn.engine import _plan

    monkeypatch.setattr(_plan, "available_memory", lambda: 10**9)
    with pytest.raises(engine.GridError) as err:  # make_plan: before anything is compiled
        engine.make_plan(slm.SLM_SGD, slm.SLMConfig(D=10**6, t_max=1e-5, n_test=256), fixed={"L": 8})
    (msg,) = err.value.problems
    need = float(msg.split("needs about ")[1].split(" GB")[0])
    assert msg.startswith("slm_sgd: one grid point needs about ") and 256 * 8 * 10**6 * 4 / 1e9 <= need < 8.3
    assert msg.endswith("more than the 1 GB of host memory available; make the model smaller")
    engine.make_plan(slm.SLM_SGD, slm.SLMConfig(D=1000, t_max=1e-2, n_test=256), fixed={"L": 8})
    # the latent directions (a D x F draw and its QR, 16 bytes an entry measured, 32 counted; F = 2
    # by default) are refused before they are drawn
    r = train("--D", "1000000000", "--t-max", "1e-6")
    assert r.exit_code == 2 and r.output.splitlines()[-1] == (
        "Error: slm_sgd: its setup needs about 64 GB, more than the 1 GB of host memory available; make the "
        "model smaller"
    ), r.output


def test_a_billion_seeds_and_a_store_in_proc_are_refused_in_one_line(tmp_path):
    r = train("--seeds", "1000000000", "--H", "1,2")
    assert r.exit_code == 2
    assert re.fullmatch(
        r"Error: grid: 2000000000 points \(seed 1000000000 x H 2\) need about 1.66 TB of host memory to plan "
        r"\(832 bytes a point\), more than the [0-9.]+ [kMG]?B of host memory available; make the grid smaller "
        r"or split it",
        r.output.strip().splitlines()[-1],
    ), r.output
    f = tmp_path / "t.toml"
    f.write_text('model = "slm_sgd"\n[fixed]\nD = 8\n')
    r = CliRunner().invoke(main, ["sweep", "run", str(f), "--out", "/proc/xstore"])
    assert r.exit_code == 2 and r.output.strip().splitlines()[-1] == (
        "Error: Invalid value for '--out': a file cannot be created in the folder /proc (No such file or directory)"
    )


def _saved(tmp_path, *args):
    """Run a command with ``--out`` and ``--json``; its record, the dataset it saved and what
    ``jaxattn info`` says of that dataset."""
    import jaxattn

    out = tmp_path / "result.nc"
    r = CliRunner().invoke(main, [*args, "--out", str(out), "--json"])
    assert r.exit_code == 0, r.output
    record = json.loads(r.stdout.strip().splitlines()[-1])
    assert record["out"] == str(out)
    info = CliRunner().invoke(main, ["info", str(out), "--json"])
    assert info.exit_code == 0, info.output
    return record, jaxattn.load(out), json.loads(info.stdout)


@pytest.mark.slow  # a whole command: 10 to 40 s on 2 cores, beyond the default run's share (README)
def test_jaxattn_info_reads_the_datasets_that_copy_landscape_and_slm_compare_save(tmp_path):
    from jaxattn.io import result_of

    record, ds, info = _saved(tmp_path, "copy", "landscape", "--L", "4", "--V", "2", "--P", "20", "--burn-in", "100",
                              "--n-draws", "20", "--no-progress", "--figure", "")
    assert info["experiment"] == "copy_landscape" and info["provenance"]["matmul_precision"] == "highest"
    assert info["config"]["L"] == 4 and info["config"]["n_draws"] == 20
    assert ds["F"].dims == ("P", "bin") and ds["P"].values.tolist() == [20]
    assert np.nanmin(ds["F"].values) == 0  # F relative to its lowest bin
    assert ds["target"].shape == (1, record["n_windows"][0])
    assert result_of(ds)["p_star_sampled"] == record["p_star_sampled"]

    record, ds, info = _saved(tmp_path, "slm", "compare", "--D", "20", "--seeds", "2", "--t-max", "1", "--n-bank", "200",
                              "--no-progress", "--figure", "")
    assert info["experiment"] == "slm_sgd" and info["provenance"]["libraries"]["jax"]
    assert ds["error"].dims == ds["theory_error"].dims and ds.sizes["seed"] == 2
    # the saved runs and theory give back the deviation the command reported
    gap = np.abs(ds["error"].mean("seed") - ds["theory_error"].mean("seed")).max()
    assert float(gap) == pytest.approx(record["max_dev_error"], rel=1e-12)
    assert result_of(ds)["max_dev_M"] == record["max_dev_M"]


def test_theory_bayes_risk_and_prune_save_their_numbers_with_provenance(tmp_path):
    record, ds, info = _saved(tmp_path, "copy", "theory", "--L", "8", "--V", "4", "--P", "10,50,100")
    assert info["experiment"] == "copy_theory" and info["provenance"]["x64"] is True
    assert float(ds["p_star"]) == record["p_star"] and ds["P"].values.tolist() == [10, 50, 100]
    assert ds["S"].values.tolist() == record["curves"]["S"]
    record, ds, info = _saved(tmp_path, "slm", "bayes-risk", "--n", "1000")
    assert info["experiment"] == "slm_bayes_risk" and info["config"]["n"] == 1000
    assert float(ds["bayes_risk"]) == record["bayes_risk"] and float(ds["stderr"]) == record["stderr"]
    record, ds, info = _saved(tmp_path, "slm", "prune", "--D", "20", "--seeds", "2", "--t-max", "1", "--n-bank", "200",
                              "--no-progress", "--figure", "")
    assert info["experiment"] == "slm_prune" and info["config"]["D"] == 20
    assert ds["risk"].shape == (2, 2) and ds["risk"].mean("run").values.tolist() == pytest.approx(
        record["risk_vs_removed"], rel=1e-12)
