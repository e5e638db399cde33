"""The copy head's theory against ``P`` for both attentions: the global minimum, both softmax
branches, the linear minimum, their previous-token weight and test error, and the JSON summary of
the theory at one architecture (``docs/theory/copy_head.md``). Float64 inside; NumPy out.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from jaxattn.copyhead import action, network
from jaxattn.copyhead.linear import linear_crossover, linear_onsets, linear_scan_jit
from jaxattn.copyhead.softmax import p_star_closed_form, softmax_minima_over_P, transition_of
from jaxattn.core import precision


def _f(x):
    x = float(x)
    return None if np.isnan(x) else x


def _bucketed(fn, Ps):
    """``fn`` (jitted, vmapped over ``P``) on ``Ps`` padded to a power-of-two length: one compile
    per size bucket instead of one per length."""
    n = len(Ps)
    m = 1 << max(0, (n - 1).bit_length())
    out = fn(jnp.concatenate([Ps, jnp.full((m - n,), Ps[-1], Ps.dtype)]))
    return jax.tree_util.tree_map(lambda x: x[:n], out)


def softmax_curves(arch: network.CopyArch, P: ArrayLike | Sequence[float], N: float = 1.0) -> dict[str, np.ndarray]:
    """The theory against ``P``: global minimum ``c_G``, previous-token weight and test error,
    and both branches (``*_uniform``, ``*_copy``; equal where only one minimum exists).

    Args:
        arch: the network.
        P: numbers of training sequences (positive, 1-D).
        N: inverse temperature.

    Returns:
        NumPy arrays of shape (nP,) keyed ``P``, ``n_minima``, ``S`` and ``c_G``, ``prev_weight``,
            ``test_error`` with the suffixes ``""`` (global), ``_uniform`` and ``_copy``.
    """
    with precision.float64():
        h = action.hyper(arch, N)
        Ps = jnp.asarray(action.check_P(P))
        m = _bucketed(lambda x: softmax_minima_over_P(x, h), Ps)
        out = {"P": np.asarray(Ps), "n_minima": np.asarray(m.n_minima)}
        for tag, c in (("", m.c), ("_uniform", m.c_lo), ("_copy", m.c_hi)):
            st, _ = action.softmax_stats(c, h)
            out["c_G" + tag] = np.asarray(c)
            out["prev_weight" + tag] = np.asarray(st.s / h.n_pos)
            out["test_error" + tag] = np.asarray(action.test_error(st, Ps, h))
        out["S"] = np.asarray(m.S)
        return out


def linear_curves(arch: network.CopyArch, P: ArrayLike | Sequence[float], N: float = 1.0) -> dict[str, np.ndarray]:
    """The linear theory against ``P``: ``(a_1, a_G)``, previous-token weight, test error.

    Args:
        arch: the network.
        P: numbers of training sequences (positive, 1-D).
        N: inverse temperature.

    Returns:
        NumPy arrays of shape (nP,) keyed ``P``, ``a1``, ``aG``, ``prev_weight``, ``test_error``
            and ``S``.
    """
    with precision.float64():
        h = action.hyper(arch, N)
        Ps = jnp.asarray(action.check_P(P))
        m = _bucketed(lambda x: linear_scan_jit(x, h), Ps)
        st, _ = action.linear_stats(m.a1, m.aG, h)
        return {
            "P": np.asarray(Ps),
            "a1": np.asarray(m.a1),
            "aG": np.asarray(m.aG),
            "prev_weight": np.asarray(st.s / h.n_pos),
            "test_error": np.asarray(action.test_error(st, Ps, h)),
            "S": np.asarray(m.S),
        }


def theory_summary(
    arch: network.CopyArch,
    N: float = 1.0,
    P: ArrayLike | Sequence[float] | None = None,
    n_P: int = 400,
    n_P_linear: int = 128,
) -> dict:
    """Headline numbers of the theory (JSON-ready): softmax ``P*``, spinodals, jump, closed form;
    linear onsets, kind, crossover. With ``P`` given, the curves at those ``P`` too.

    Args:
        arch: the network; ``arch.attention`` picks the softmax or the linear summary.
        N: inverse temperature (``inf`` allowed).
        P: optional numbers of sequences for the curves (:func:`softmax_curves` /
            :func:`linear_curves`).
        n_P: softmax: ``P`` grid points (0.05 to 20 times the closed-form ``P*``) for ``P*``.
        n_P_linear: linear: ``P`` grid points (0.3 to 100 times the onset) for the crossover.

    Returns:
        A JSON-ready dict: the architecture, then the softmax transition or the linear onsets and
            crossover (NaN as ``None``), and ``curves`` (lists) when ``P`` is given.
    """
    N = action.check_N(N)
    arch = arch.validate()
    out = {
        "attention": arch.attention,
        "L": arch.L,
        "V": arch.V,
        "N": N if np.isfinite(N) else "inf",
        "beta": arch.beta,
        "omega": arch.omega,
        "sigma_G2": arch.sigma_G2,
        "cyclic": arch.cyclic,
    }
    if arch.attention == "softmax":
        with precision.float64():
            tr = transition_of(action.hyper(arch, N), n_P)
            pcf = float(p_star_closed_form(jnp.float64(arch.L), jnp.float64(arch.V), arch.beta, arch.sigma_G2))
        out.update(
            p_star=_f(tr.P_star),
            first_order=bool(tr.first_order > 0.5),
            p_spinodal_lo=_f(tr.P_spinodal_lo),
            p_spinodal_hi=_f(tr.P_spinodal_hi),
            c_below=_f(tr.c_below),
            c_above=_f(tr.c_above),
            jump=_f(tr.jump),
            prev_weight_below=_f(tr.a_below),
            prev_weight_above=_f(tr.a_above),
            p_star_closed_form=pcf,
            p_star_L_ln2L_over_4=arch.L * np.log(arch.L) ** 2 / 4,
        )
        curves = softmax_curves(arch, P, N) if P is not None else None
    else:
        on = linear_onsets(arch, N)
        Ps = np.geomspace(0.3, 100.0, n_P_linear) * on.P_onset
        lc = linear_curves(arch, Ps, N)
        out.update(
            p_onset=on.P_onset,
            onset_kind=on.kind,
            onset_direction=list(on.direction),
            p_second_root=_f(on.P_second),
            p_copy=_f(on.P_copy),
            p_pool=_f(on.P_pool),
            p_c_closed_form=on.P_c_closed,
            p_crossover=_f(linear_crossover(Ps, lc["a1"], lc["aG"], arch.L)),
            V2=arch.V**2,
            L32_V12=arch.L**1.5 * arch.V**0.5,
        )
        curves = linear_curves(arch, P, N) if P is not None else None
    if curves is not None:
        out["curves"] = {k: [_f(x) for x in v] for k, v in curves.items()}
    return out
