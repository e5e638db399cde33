"""A grid sharded over several (forced host) devices gives the numbers of one device, to float
rounding."""

import json
import subprocess
import sys

import numpy as np
import pytest

SCRIPT = r"""
import json, sys
import jaxattn
assert jaxattn.use_cpu_cores(4)
import jax
from jaxattn import slm
cfg = slm.SLMConfig(D=40, t_max=2.0, n_records=2, n_test=32, activation="softmax1")
grid = dict(seed=[0, 1, 2, 3], H=[1, 2], eta=[0.5, 1.0])
out = {}
for n in (1, 4):
    ds = slm.train(cfg, devices=jax.local_devices()[:n], **grid)
    out[n] = ds["error"].values.ravel().tolist() + ds["M"].values.ravel().tolist()
print(json.dumps({"n_devices": len(jax.local_devices()), "one": out[1], "four": out[4]}))
"""


@pytest.mark.slow  # long; CI runs it with the slow checks
def test_sharded_grid_equals_single_device():
    res = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    d = json.loads(res.stdout.strip().splitlines()[-1])
    assert d["n_devices"] == 4
    # equal to float rounding (XLA may fuse the partitioned program differently)
    np.testing.assert_allclose(np.array(d["one"]), np.array(d["four"]), rtol=1e-5, atol=1e-6)
