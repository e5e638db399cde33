"""The tiny online-SGD sweep the store, worker and SLURM tests share, and their comparison of two
datasets bit for bit."""

from __future__ import annotations

import numpy as np

TEMPLATE = """
model = "slm_sgd"
[fixed]
D = 48
t_max = {t_max}
n_records = 3
n_test = 32
[grid]
seed = {{ range = [0, {seeds}] }}
eta = [0.5, 1.0]
[execution]
chunk_size = {chunk}
"""


def tiny_sweep(seeds: int = 6, chunk: int = 2, t_max: float = 6.0) -> str:
    """``2 * seeds`` points in chunks of ``chunk``: about a second a chunk once compiled at
    ``t_max = 6``; 2 to 3 s a chunk on one core at ``t_max = 2000`` (long enough to stop a worker
    mid-chunk)."""
    return TEMPLATE.format(seeds=seeds, chunk=chunk, t_max=t_max)


def assert_same_bits(a, b) -> None:
    """Two datasets with the same variables, equal bit for bit (``NaN`` equal to ``NaN``)."""
    assert set(a.data_vars) == set(b.data_vars)
    for k in a.data_vars:
        np.testing.assert_array_equal(a[k].values, b[k].values, err_msg=k)
