"""The copy head's theory on the engine: the global minimum of the reduced effective action over
``P x L x V x N x beta x omega x sigma_G2`` (float64), every value a traced number.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr

from jaxattn import engine
from jaxattn.copyhead import action, softmax
from jaxattn.copyhead._config import CopyTheoryConfig
from jaxattn.copyhead.linear import linear_minimum
from jaxattn.engine import Layout, OneShot, float_axis, int_axis


class CopyTheory(OneShot):
    """The global minimum of the reduced effective action (Spec B, section 3), float64 (float32
    with ``precision = "float32"``): for
    softmax the minimising ``c_G``, both branches' minima and their number; for linear the
    minimising ``(a_1, a_G)``; for both the action, the previous-token weight and the test error.
    ``L``, ``V`` and the hyper-parameters are traced numbers, so they are axes like ``P``.

    Attributes:
        name: ``"copy_theory"``.
        doc: one line describing it.
        config_type: :class:`~jaxattn.copyhead._config.CopyTheoryConfig`.
        axes: ``P``, ``L``, ``V``, ``N``, ``beta``, ``omega`` and ``sigma_G2``.
        x64: true (float64).
        block: default streams per block.
        group: default members per group.
    """

    name = "copy_theory"
    doc = "copy task, minima of the reduced effective action (jaxattn.copyhead.softmax)"
    config_type = CopyTheoryConfig
    axes = (
        float_axis("P", 200.0, help="Training sequences (a real number in the theory)."),
        int_axis("L", 32, 2, help="Sequence length."),
        int_axis("V", 4, 2, help="Vocabulary size."),
        float_axis("N", 1.0, help="Inverse temperature."),
        float_axis("beta", 1.0, help="Data weight."),
        float_axis("omega", 1.0, help="Prior variance of W."),
        float_axis("sigma_G2", 1.0, help="Prior variance of G."),
    )
    x64 = True
    block = 8
    group = 1

    def setup(self, c: CopyTheoryConfig, values):
        return c, {}

    def params(self, c, points):
        f = jnp.result_type(float)  # float64, or float32 with precision = float32
        return {k: np.asarray(points[k], f) for k in ("P", "L", "V", "N", "beta", "omega", "sigma_G2")}

    def _one(self, c: CopyTheoryConfig, p) -> dict:
        L = p["L"]
        n_pos = L if c.cyclic else L - 1.0
        g = L if (c.attention == "linear" and c.linear_norm == "L") else jnp.ones_like(L)
        h = action.CopyHyper(L, p["V"], p["beta"], p["omega"], p["sigma_G2"], p["N"], n_pos, g)
        if c.attention == "softmax":
            m = softmax.softmax_minima(p["P"], h)
            st, _ = action.softmax_stats(m.c, h)
            out = dict(c_G=m.c, c_G_uniform=m.c_lo, c_G_copy=m.c_hi, n_minima=m.n_minima)
        else:
            m = linear_minimum(p["P"], h)
            st, _ = action.linear_stats(m.a1, m.aG, h)
            out = dict(a1=m.a1, aG=m.aG)
        out.update(S=m.S, prev_weight=st.s / h.n_pos, test_error=action.test_error(st, p["P"], h))
        out["diverged"] = ~jnp.isfinite(m.S)
        return out

    def compute(self, c, shared, q):
        return jax.vmap(jax.vmap(lambda x: self._one(c, x)))(q)

    def layout(self, c: CopyTheoryConfig) -> Layout:
        names = ("c_G", "c_G_uniform", "c_G_copy", "n_minima") if c.attention == "softmax" else ("a1", "aG")
        return Layout({k: () for k in names + ("S", "prev_weight", "test_error", "diverged")}, {})

    def bytes_per_point(self, c) -> int:
        return 8 * softmax.N_C * 8

    def attrs(self, c: CopyTheoryConfig, s) -> dict:
        return {"attention": c.attention}


COPY_THEORY = CopyTheory()


THEORY_GRID = {"P": 200.0, "L": 32, "V": 4, "N": 1.0}
"""``THEORY_GRID`` is the grid :func:`theory_grid` runs unless told otherwise."""


def theory_grid(config: CopyTheoryConfig | None = None, **kw: Any) -> xr.Dataset:
    """The reduced action's global minimum over the grid ``P x L x V x N`` (and ``beta``,
    ``omega``, ``sigma_G2`` given as keywords): a Dataset over those dimensions (float64).

    Args:
        config: the static choices; default ``CopyTheoryConfig()``.
        **kw: the axes ``P`` (real numbers), ``L``, ``V``, ``N`` (default :data:`THEORY_GRID`)
            and ``beta``, ``omega``, ``sigma_G2``, a value or a list each; and the options of :func:`jaxattn.engine.run` (``progress``, ``devices``, ``block``, ``group``, ``chunk_size``, ``memory_budget``).

    Returns:
        ``xr.Dataset`` over the grid's dimensions: ``S``, ``prev_weight``, ``test_error``,
            ``diverged`` and ``c_G``, ``c_G_uniform``, ``c_G_copy``, ``n_minima`` (softmax) or
            ``a1``, ``aG`` (linear).
    """
    return engine.run(COPY_THEORY, config or CopyTheoryConfig(), **{**THEORY_GRID, **kw})
