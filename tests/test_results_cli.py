"""Datasets round-trip through netCDF; the command line prints its headline numbers as JSON."""

import json

import numpy as np
import pytest
from click.testing import CliRunner

from jaxattn import io as results
from jaxattn import slm
from jaxattn.cli import main


@pytest.mark.slow  # moved out of the default run to keep it under 10 minutes; CI runs it
def test_dataset_roundtrip(tmp_path):
    ds = slm.train(slm.SLMConfig(D=30, t_max=1.0, n_records=2, n_test=16), seed=[0, 1], H=[1, 2])
    path = results.save(ds, tmp_path / "sub" / "r.nc")
    back = results.load(path)
    for v in ("M", "Q", "b", "error", "diverged"):
        np.testing.assert_array_equal(back[v].values, ds[v].values)
    assert back.attrs["activation"] == "bayes_softmax"
    cfg = results.config_of(back)
    assert cfg["D"] == 30 and cfg["prior"]["family"] == "discrete"
    assert list(back["H"].values) == [1, 2] and back["time"].values[0] == 0


def test_cli_bayes_risk_json():
    out = CliRunner().invoke(main, ["slm", "bayes-risk", "--prior", "onehot", "--F", "2", "--L", "4",
                                    "--nu", "9", "--n", "100000", "--json"])
    assert out.exit_code == 0, out.output
    d = json.loads(out.output)
    assert abs(d["bayes_risk"] - 0.103) < 0.006


@pytest.mark.slow  # moved out of the default run to keep it under 10 minutes; CI runs it
def test_cli_train_and_prune(tmp_path):
    nc, png = str(tmp_path / "r.nc"), str(tmp_path / "r.png")
    out = CliRunner().invoke(main, ["slm", "train", "--D", "40", "--t-max", "2", "--seeds", "2", "--H", "2,3",
                                    "--n-test", "64", "--no-progress", "--out", nc, "--figure", png, "--json"])
    assert out.exit_code == 0, out.output
    d = json.loads(out.output.strip().splitlines()[-1])
    assert len(d["final_error"]) == 2 and d["n_runs"] == 4 and d["n_diverged"] == 0
    assert (tmp_path / "r.png").stat().st_size > 1000
    out = CliRunner().invoke(main, ["slm", "prune", "--from", nc, "--n-bank", "2000", "--json",
                                    "--figure", str(tmp_path / "p.png")])
    assert out.exit_code == 0, out.output
    d = json.loads(out.output.strip().splitlines()[-1])
    assert d["H"] == 3 and len(d["risk_vs_removed"]) == 3


def test_cli_bad_input_names_the_parameter():
    out = CliRunner().invoke(main, ["slm", "train", "--L", "1", "--no-progress", "--json"])
    assert out.exit_code != 0 and "L must be >= 2" in out.output
    out = CliRunner().invoke(main, ["slm", "bayes-risk", "--nu", "-1"])
    assert out.exit_code != 0 and "nu" in out.output


@pytest.mark.slow  # a whole command: 10 to 40 s on 2 cores, beyond the default run's share (README)
def test_the_main_job_shows_its_ode_beside_sgd_and_prints_what_the_readme_shows(tmp_path):
    """``jaxattn slm train`` at its defaults (the README's first command): the ODE's final error is
    within 0.01 of online SGD's (a tenth of the error; the ODE is the ``D -> infinity`` limit and
    sits 0.004 above SGD at ``D = 200``, while a wrong start or time scale would leave it on the
    plateau, 0.2 to 0.8), the dataset holds both, and the numbers are those the README prints."""
    import pathlib
    import re

    import jaxattn

    nc, png = tmp_path / "r.nc", tmp_path / "r.png"
    out = CliRunner().invoke(main, ["slm", "train", "--no-progress", "--out", str(nc), "--figure", str(png), "--json"])
    assert out.exit_code == 0, out.output
    d = json.loads(out.output.strip().splitlines()[-1])
    assert abs(d["ode_final_error"] - d["final_error"]) < 0.01, d
    assert d["bayes_risk"] < d["final_error"] < d["bayes_risk"] + 0.01 and d["n_diverged"] == 0
    ds = jaxattn.load(nc)
    assert {"ode_M", "ode_Q", "ode_b", "ode_error"} <= set(ds.data_vars)
    assert float(ds["ode_error"].isel(time=-1).mean("seed").squeeze()) == pytest.approx(d["ode_final_error"], rel=1e-12)
    assert png.stat().st_size > 10_000

    readme = (pathlib.Path(__file__).parents[1] / "README.md").read_text()
    shown = dict(re.findall(r"^(\w+): +([0-9.]+)", readme, re.M))
    sd = re.search(r"^final_error: .*\(sd ([0-9.]+) over 4 seeds\)$", readme, re.M)
    assert sd is not None
    shown["final_error_std"] = sd.group(1)
    for key in ("final_error", "final_error_std", "ode_final_error", "bayes_risk", "n_runs", "n_diverged"):
        decimals = len(shown[key].partition(".")[2])  # the summary's rounding, to its last digit
        assert abs(float(shown[key]) - d[key]) <= 0.5 * 10**-decimals, key
