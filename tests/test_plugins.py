"""Plugins: an activation and a model (experiment) from another installed package, used by name
from the command line (``--help`` lists the activation), a sweep file, and Python."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

PLUGIN = textwrap.dedent('''
    """A tiny jaxattn plugin: a 'relu_norm' activation and a 'tiny_sgd' model."""
    import jax.numpy as jnp

    from jaxattn.slm.experiments._sgd import OnlineSGDExperiment


    def relu_norm(scores, bias, valid):
        r = jnp.where(valid, jnp.maximum(scores + bias[:, None], 0.0), 0.0)
        return r / (1.0 + jnp.sum(r, axis=1, keepdims=True))


    relu_norm.aggregation = "sum"


    class TinySGD(OnlineSGDExperiment):
        name = "tiny_sgd"


    TINY_SGD = TinySGD()
''')


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A folder holding the package ``tinyplug`` and its distribution metadata (what ``pip
    install`` leaves), put on ``PYTHONPATH`` of the subprocesses."""
    d = tmp_path_factory.mktemp("site")
    (d / "tinyplug.py").write_text(PLUGIN)
    info = d / "tinyplug-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tinyplug\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[jaxattn.activations]\nrelu_norm = tinyplug:relu_norm\n\n[jaxattn.models]\ntiny_sgd = tinyplug:TINY_SGD\n")
    return str(d)


def _run(site, *args, code=None):
    env = {**os.environ, "JAXATTN_NO_CACHE": "1", "PYTHONPATH": site + os.pathsep + os.environ.get("PYTHONPATH", "")}
    cmd = [sys.executable, "-c", code] if code else [sys.executable, "-m", "jaxattn", *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow  # two subprocesses (~35 s)
def test_plugin_activation_on_the_command_line(site, tmp_path):
    r = _run(site, "slm", "train", "--help")
    assert "relu-norm" in r.stdout, r.stdout  # shown as the command line spells it
    r = _run(site, "slm", "train", "--activation", "relu-norm", "--D", "16", "--t-max", "0.2", "--seeds", "1",
             "--out", str(tmp_path / "r.nc"), "--figure", "", "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout.strip().splitlines()[-1])["n_runs"] == 1
    from jaxattn import io

    ds = io.load(tmp_path / "r.nc")
    assert io.config_of(ds)["activation"] == ds.attrs["activation"] == "relu_norm"
    assert bool(ds["error"].notnull().all())


@pytest.mark.slow  # two subprocesses that train (~30 s)
def test_plugin_model_and_activation_in_a_sweep_file_and_from_python(site, tmp_path):
    f = tmp_path / "s.toml"
    f.write_text('model = "tiny_sgd"\n[fixed]\nD = 16\nt_max = 0.2\nn_records = 2\nn_test = 8\n'
                 'activation = "relu_norm"\n[grid]\nseed = [0, 1]\n')
    r = _run(site, "sweep", "run", str(f), "--out", str(tmp_path / "st"), "--no-progress", "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    code = textwrap.dedent(f'''
        import numpy as np
        from jaxattn import engine, slm
        from jaxattn.core.attention import available_activations
        assert "relu_norm" in available_activations() and "tiny_sgd" in engine.names()
        exp = engine.get("tiny_sgd")
        cfg = slm.SLMConfig(D=16, t_max=0.2, n_records=2, n_test=8, activation="relu_norm")
        ds = engine.run(exp, cfg, engine.Grid.from_values(exp.axis, {{"seed": [0, 1]}}))
        swept = engine.load_store({str(tmp_path / "st")!r})
        assert np.array_equal(ds["error"].values, swept["error"].values, equal_nan=True)
        assert ds.attrs["experiment"] == "tiny_sgd" and np.isfinite(ds["error"].values).all()
        print("ok")
    ''')
    r = _run(site, code=code)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-2000:]
