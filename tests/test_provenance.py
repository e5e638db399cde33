"""Provenance: every dataset and sweep store records the code, libraries, machine, precision and
command that made it; ``jaxattn info`` prints it; ``jaxattn --version`` the version."""

import json
import os
import subprocess
import sys

import jax
import pytest

from jaxattn import engine, io, slm
from jaxattn.engine import Grid, provenance
from jaxattn.version import __version__

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = {**os.environ, "JAXATTN_NO_CACHE": "1"}


def _head():
    if not os.path.exists(os.path.join(ROOT, ".git")):
        pytest.skip("not a git checkout")
    return subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()


def test_a_dataset_records_code_libraries_machine_and_precision():
    import diffrax
    import optax

    ds = slm.train(slm.SLMConfig(D=16, t_max=0.2, n_records=2, n_test=8), seed=[0], H=[1])
    p = provenance.of(ds.attrs)
    assert p["jaxattn"] == __version__ and p["git_commit"] == _head() and isinstance(p["git_dirty"], bool)
    assert p["libraries"]["jax"] == jax.__version__ and p["libraries"]["optax"] == optax.__version__
    assert p["libraries"]["diffrax"] == diffrax.__version__ and "blackjax" in p["libraries"]
    # the machine it ran on, whatever the backend (a GPU or TPU run records its own)
    assert p["backend"] == jax.default_backend() and p["device_kind"] == jax.devices()[0].device_kind
    assert p["n_devices"] == jax.device_count() and p["n_processes"] == jax.process_count()
    assert p["x64"] is False  # online SGD runs in float32
    assert p["matmul_precision"] == "highest"  # its products at full precision, by default
    from jaxattn.engine._compute import dataset_attrs
    from jaxattn.engine._plan import make_plan

    plan = make_plan(slm.SLM_ODE, slm.SLMODEConfig(D=16, t_max=0.2, n_records=2, n_bank=16),
                     Grid.from_values(slm.SLM_ODE.axis, {"seed": [0]}))
    theory = provenance.of(dataset_attrs(plan))
    assert theory["x64"] is True and theory["matmul_precision"] == "highest"  # the theory turns both on itself


@pytest.mark.slow  # four subprocesses (~40 s)
def test_info_of_a_saved_dataset_and_of_a_store(tmp_path):
    ds = slm.train(slm.SLMConfig(D=16, t_max=0.2, n_records=2, n_test=8), seed=[0], H=[1])
    path = io.save(ds, tmp_path / "r.nc")
    r = subprocess.run([sys.executable, "-m", "jaxattn", "info", path, "--json"], env=ENV, capture_output=True,
                       text=True, timeout=120)
    got = json.loads(r.stdout)
    assert got["kind"] == "dataset" and got["provenance"]["git_commit"] == _head() and got["config"]["D"] == 16
    f = tmp_path / "s.toml"
    f.write_text('model = "slm_sgd"\n[fixed]\nD = 16\nt_max = 0.2\nn_records = 2\nn_test = 8\n[grid]\nseed = [0, 1]\n')
    subprocess.run([sys.executable, "-m", "jaxattn", "sweep", "run", str(f), "--out", str(tmp_path / "st"),
                    "--no-progress"], env=ENV, check=True, capture_output=True, timeout=300)
    r = subprocess.run([sys.executable, "-m", "jaxattn", "info", str(tmp_path / "st")], env=ENV,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert f"jaxattn {__version__}  commit {_head()[:12]}" in r.stdout
    assert "command: jaxattn sweep run" in r.stdout and "x64: False  matmul_precision: highest" in r.stdout
    loaded = engine.load_store(str(tmp_path / "st"))
    assert provenance.of(loaded.attrs)["command"].startswith("jaxattn sweep run")
    v = subprocess.run([sys.executable, "-m", "jaxattn", "--version"], env=ENV, capture_output=True, text=True)
    assert v.stdout.strip() == f"jaxattn, version {__version__}"
