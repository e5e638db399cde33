"""Theory against simulation in one call: online SGD and the order-parameter ODE on the same
configuration, each seed's ODE started from that run's own initial ``(M, Q, b)`` (both grids on
the engine: :func:`jaxattn.slm.train` and :func:`jaxattn.slm.integrate`).

Heads are exchangeable: through specialisation each seed's heads may take the directions in
another order in SGD than in that seed's ODE. The comparison therefore matches heads per seed
(:func:`match_heads`, on ``M`` at the final time, applied to the whole trajectory) before
averaging over seeds, and reports the escape time from the unspecialised saddle
(:func:`escape_time`; defined in ``docs/theory/single_location.md``) of both."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, cast

import numpy as np
import xarray as xr

from jaxattn.core.checks import choice, integer
from jaxattn.slm._config import SLMConfig, SLMODEConfig, SLMSDEConfig
from jaxattn.slm.experiments import integrate, train

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


class Comparison(NamedTuple):
    """Online SGD against the order-parameter ODE on one grid point (:func:`compare`).

    Attributes:
        simulation: the online-SGD runs, dims ``(seed, time, ...)``, heads matched to the ODE's.
        theory: the ODE of each seed, dims ``(seed, time, ...)``.
        deviations: largest ``|seed-mean simulation - seed-mean ODE|`` per observable, the
            escape times' statistics and bookkeeping (``ode_ok``, ``n_seeds``, ``t_max``).
    """

    simulation: xr.Dataset  # one grid point: dims (seed, time, ...), heads matched to the ODE's
    theory: xr.Dataset  # the ODE of each seed: dims (seed, time, ...)
    deviations: dict  # largest |seed-mean simulation - seed-mean ODE| per observable, escape times


def match_heads(M_sim: np.ndarray, M_ref: np.ndarray) -> np.ndarray:
    """The permutation ``perm`` of the simulation's heads that best matches the reference's, per
    seed: ``M_sim[s, :, perm[s]]`` follows ``M_ref[s]``. Heads are matched on ``M`` at the final
    time (``scipy.optimize.linear_sum_assignment`` maximising ``sum_h M_sim[perm h] . M_ref[h]``
    over the directions), and the same matching is applied to the whole trajectory.

    Args:
        M_sim: ``(seed, time, head, direction)``.
        M_ref: ``(seed, time, head, direction)``.

    Returns:
        ``(seed, head)`` integer array."""
    from scipy.optimize import linear_sum_assignment

    M_sim, M_ref = np.asarray(M_sim), np.asarray(M_ref)
    out = np.empty(M_sim.shape[:1] + M_sim.shape[2:3], np.int64)
    for s in range(M_sim.shape[0]):
        a, b = np.nan_to_num(M_sim[s, -1]), np.nan_to_num(M_ref[s, -1])
        rows, cols = linear_sum_assignment(-(b @ a.T))  # rows: reference heads, cols: simulation heads
        out[s, rows] = cols
    return out


def permute_heads(ds: xr.Dataset, perm: np.ndarray) -> xr.Dataset:
    """``ds`` (dims ``seed``, ``time``, ``head`` [, ``head_``]) with each seed's heads reordered by
    ``perm`` ``(seed, head)``: ``M``, ``b`` along ``head``, ``Q`` along both head axes.

    Args:
        ds: a Dataset with a leading ``seed`` dimension (as :func:`jaxattn.slm.train`'s, one
            grid point).
        perm: per seed, the new order of the heads, integers of shape ``(seed, head)``
            (:func:`match_heads`).

    Returns:
        A copy of ``ds`` with ``M``, ``b`` and ``Q`` reordered.
    """
    out = ds.copy()
    take = lambda x, axis: np.stack([np.take(x[s], perm[s], axis=axis - 1) for s in range(len(perm))])  # noqa: E731
    for k in ("M", "b"):
        if k in ds:
            out[k] = (ds[k].dims, take(ds[k].values, ds[k].dims.index("head")), ds[k].attrs)
    if "Q" in ds:
        q = take(ds["Q"].values, ds["Q"].dims.index("head"))
        out["Q"] = (ds["Q"].dims, take(q, ds["Q"].dims.index("head_")), ds["Q"].attrs)
    return out


def escape_time(M: np.ndarray, time: np.ndarray, fraction: float = 0.5, growth: float = 10.0) -> np.ndarray:
    """The escape time of each run from the unspecialised saddle: the first recorded time at which
    the heads' spread ``s(t) = max_f (max_h M[h, f] - min_h M[h, f])`` reaches ``fraction`` of its
    final value, provided the spread grew at least ``growth``-fold over the run (``NaN``
    otherwise: no escape within the run; and for one head).

    Args:
        M: ``(seed, time, head, direction)``.
        time: ``(time,)``.
        fraction: the fraction of the final spread that marks the escape.
        growth: the least growth of the spread over the run for an escape to count.

    Returns:
        ``(seed,)``."""
    M = np.asarray(M, np.float64)
    out = np.full(M.shape[0], np.nan)
    if M.shape[2] < 2:
        return out
    spread = np.nanmax(np.nanmax(M, axis=2) - np.nanmin(M, axis=2), axis=-1)  # (seed, time)
    for s in range(M.shape[0]):
        final = spread[s, -1]
        if not np.isfinite(final) or final < growth * spread[s, 0]:
            continue
        out[s] = time[np.flatnonzero(spread[s] >= fraction * final)[0]]
    return out


def end_state(M: np.ndarray, threshold: float = 0.5) -> str:
    """The configuration class of one run's heads at the final time: each head's signed
    directions, sorted over heads (heads are exchangeable). Head ``h`` is on direction ``f`` with
    sign ``+-`` when ``|M[h, f]| >= threshold * max |M|``; a head on none is ``off``, a head on
    several is written ``+s0+s1``. For ``H = 2`` and one-hot ``F = 2``: ``"+s0 +s1"`` (the
    directions covered), ``"+s0 +s0"`` (a duplicate), ``"+s0+s1 off"`` (one head on both, one
    switched off); for a flipped spike, ``"+s0 -s0"`` is a pair on ``+-s_0``
    (``docs/theory/single_location.md``, section 7).

    Args:
        M: the final overlaps of one run, shape ``(H, F)`` (``NaN`` rows: padded heads, left out).
        threshold: the fraction of the largest ``|M|`` that puts a head on a direction.

    Returns:
        The class, e.g. ``"+s0 +s1"``; ``"diverged"`` if ``M`` is not finite.
    """
    M = np.asarray(M, np.float64)
    M = M[~np.all(np.isnan(M), axis=1)]
    if M.size == 0 or not np.all(np.isfinite(M)):
        return "diverged"
    top = np.abs(M).max()
    heads = []
    for row in M:
        on = [
            f"{'+' if row[f] > 0 else '-'}s{f}" for f in range(len(row)) if top > 0 and abs(row[f]) >= threshold * top
        ]
        heads.append("".join(on) or "off")
    return " ".join(sorted(heads))


def end_state_kind(label: str) -> str:
    """The coarse class of an :func:`end_state` label: how the heads split, and how many are off.
    ``"pairs"``: every head that is on holds one signed direction (heads pair on ``+-s_f``);
    ``"combinations"``: every head that is on holds a sign combination of several directions;
    ``"mixed"``: some of each.

    Args:
        label: an :func:`end_state` label, e.g. ``"+s0+s1 -s0 -s1 off"``.

    Returns:
        E.g. ``"mixed, 1 off"``; ``"diverged"`` for a diverged run.
    """
    if label == "diverged":
        return label
    heads = label.split()
    on = [h.count("s") for h in heads if h != "off"]
    kind = "pairs" if all(n == 1 for n in on) else "combinations" if all(n > 1 for n in on) else "mixed"
    return f"{kind}, {len(heads) - len(on)} off"


def end_state_fractions(M: np.ndarray, threshold: float = 0.5, coarse: bool = False) -> dict[str, float]:
    """The fraction of runs in each configuration class (:func:`end_state`) at the final time.

    Args:
        M: ``(seed, time, head, direction)``; the last time is classified.
        threshold: as in :func:`end_state`.
        coarse: count the coarse classes of :func:`end_state_kind` instead.

    Returns:
        Class -> fraction of the seeds, the classes sorted by decreasing fraction.
    """
    classes = [end_state(m[-1], threshold) for m in np.asarray(M)]
    if coarse:
        classes = [end_state_kind(c) for c in classes]
    names, counts = np.unique(classes, return_counts=True)
    order = np.argsort(-counts, kind="stable")
    return {str(names[i]): float(counts[i]) / len(classes) for i in order}


def compare(
    config: SLMConfig,
    *,
    seeds: int = 4,
    H: int = 2,
    L: int = 4,
    eta: float = 1.0,
    signal: float = 1.0,
    n_bank: int | None = None,
    noise: bool = True,
    theory: str = "ode",
    progress: bool = False,
) -> Comparison:
    """Run both, match each seed's heads to its ODE's, and measure the largest deviation of the
    seed means of ``M``, ``diag Q`` and the error (``max_dev_M``, ``max_dev_Q``,
    ``max_dev_error``; ``max_dev_M_unmatched`` in SGD's own head order) with the standard error
    of the seed mean of the per-seed deviation where it is largest (``max_dev_M_se``,
    ``max_dev_Q_se``, ``max_dev_error_se``: how far 8 or 32 seeds can resolve it), the escape times'
    mean and spread over seeds (``escape_time_sim_mean``, ``..._std``,
    ``escape_time_theory_mean``, ``..._std``; ``None`` where no seed escaped), and the fraction of
    seeds ending in each configuration class (``end_states_sim``, ``end_states_theory``;
    :func:`end_state`) and coarse class (``end_kinds_sim``, ``end_kinds_theory``;
    :func:`end_state_kind`). ``config`` may be
    an :class:`SLMODEConfig` (its bank and tolerances are used); ``n_bank`` overrides its bank
    size. Spec A, section 3: the ODE is to match simulation.

    Args:
        config: the fixed parameters (an :class:`SLMConfig` or :class:`SLMODEConfig`).
        seeds: number of seeds (``0..seeds-1``).
        H: number of heads.
        L: sequence length.
        eta: learning rate.
        signal: scale of the latent.
        n_bank: draws of the ODE's bank (default: the config's).
        noise: include the ``eta^2`` SGD-noise term (``False``: gradient flow).
        theory: ``"ode"`` (the order-parameter ODEs) or ``"sde"`` (their finite-``D`` SDE,
            :class:`~jaxattn.slm._config.SLMSDEConfig`).
        progress: show progress bars.

    Returns:
        A :class:`Comparison`: the matched simulation, the ODE and the ``deviations`` dict.
    """
    theory = choice("theory", theory, ("ode", "sde"))
    base = {f.name: getattr(config, f.name) for f in dataclasses.fields(SLMConfig)}
    theory_type = SLMSDEConfig if theory == "sde" else SLMODEConfig
    if isinstance(config, SLMODEConfig):  # keep its bank and solver fields, and the SDE's if it has them
        fields = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
        ode_config = theory_type(**{k: v for k, v in fields.items() if k in theory_type.__dataclass_fields__})
    else:
        ode_config = theory_type(**base)
    if n_bank is not None:
        ode_config = dataclasses.replace(ode_config, n_bank=n_bank)
    sim_config = SLMConfig(**base)
    grid: dict[str, Any] = dict(seed=range(integer("seeds", seeds, 1)), H=H, L=L, eta=eta, signal=signal)
    p = train(sim_config, progress=progress, **grid).isel(H=0, L=0, eta=0, signal=0)
    th = integrate(ode_config, noise=float(noise), progress=progress, **grid).isel(H=0, L=0, eta=0, signal=0, noise=0)
    return matched(p, th, theory)


def matched(p: xr.Dataset, th: xr.Dataset, theory: str = "ode") -> Comparison:
    """One grid point's online-SGD runs and their theory, each seed's heads matched to its
    theory's (:func:`match_heads`), with the deviations :func:`compare` reports.

    Args:
        p: online SGD over ``(seed, time, ...)`` (one grid point of :func:`~jaxattn.slm.train`).
        th: the theory over the same seeds and times (:func:`~jaxattn.slm.integrate`).
        theory: its name, ``"ode"`` or ``"sde"`` (reported).

    Returns:
        A :class:`Comparison` (see :func:`compare`).
    """
    seeds = p.sizes["seed"]
    raw_M = p["M"].values
    p = permute_heads(p, match_heads(raw_M, th["M"].values))
    sim_q = np.diagonal(p["Q"].values, axis1=-2, axis2=-1)
    th_q = np.diagonal(th["Q"].values, axis1=-2, axis2=-1)

    pairs = {"M": (p["M"].values, th["M"].values), "Q": (sim_q, th_q), "error": (p["error"].values, th["risk"].values)}
    dev = {k: max_deviation(a, b) for k, (a, b) in pairs.items()}
    deviations = {
        "max_dev_M": dev["M"][0],
        "max_dev_M_unmatched": max_deviation(raw_M, th["M"].values)[0],  # the heads in SGD's own order
        "max_dev_Q": dev["Q"][0],
        "max_dev_error": dev["error"][0],
        "max_dev_M_se": dev["M"][1],
        "max_dev_Q_se": dev["Q"][1],
        "max_dev_error_se": dev["error"][1],
        **_escape_stats(p["M"].values, th["M"].values, p["time"].values),
        "end_states_sim": end_state_fractions(p["M"].values),
        "end_states_theory": end_state_fractions(th["M"].values),
        "end_kinds_sim": end_state_fractions(p["M"].values, coarse=True),
        "end_kinds_theory": end_state_fractions(th["M"].values, coarse=True),
        "theory": theory,
        "ode_ok": bool(not th["diverged"].any()),
        "n_seeds": seeds,
        "t_max": float(p["time"].values[-1]),
    }
    return Comparison(p, th, deviations)


def max_deviation(sim: np.ndarray, theory: np.ndarray) -> tuple[float, float | None]:
    """The largest gap between the seed means, ``max |mean_s sim - mean_s theory|`` over every
    other axis (NaN entries of ``sim``, padded heads, left out), and the standard error of the seed
    mean of the per-seed deviation ``sim - theory`` at that entry: the sampling error the gap is
    to be read against (each seed's theory starts from that seed's start, so the two are paired).

    Args:
        sim: simulation values, shape ``(seed, ...)``.
        theory: the theory's values, the same shape.

    Returns:
        ``(gap, standard error)``; the standard error is ``None`` with fewer than two finite seeds.
    """
    gap = np.abs(np.nanmean(sim, axis=0) - np.mean(theory, axis=0))
    i = np.unravel_index(np.nanargmax(gap), gap.shape)
    d = (sim - theory)[(slice(None), *i)]
    d = d[np.isfinite(d)]
    return float(gap[i]), (float(d.std(ddof=1) / np.sqrt(d.size)) if d.size > 1 else None)


def _escape_stats(M_sim, M_ode, time) -> dict:
    out = {}
    for name, M in (("sim", M_sim), ("theory", M_ode)):
        t = escape_time(M, time)
        ok = t[np.isfinite(t)]
        out[f"escape_time_{name}_mean"] = float(ok.mean()) if ok.size else None
        out[f"escape_time_{name}_std"] = float(ok.std(ddof=1)) if ok.size > 1 else None
    return out


def _band(ax, t, runs, color, label=None):
    """The seed mean of ``runs`` ``(seed, time)`` as markers, one standard deviation as a band."""
    with warnings.catch_warnings():  # times where every run diverged are blank, not an alarm
        warnings.simplefilter("ignore", RuntimeWarning)
        m, sd = np.nanmean(runs, 0), np.nanstd(runs, 0)
    ax.plot(t, m, "o", ms=3, color=color, label=label)
    ax.fill_between(t, m - sd, m + sd, color=color, alpha=0.2, lw=0)


def figure(c: Comparison, path: str | None = None, bayes_risk: float | None = None) -> Figure:
    """Theory lines (seed mean) and the simulation's seed mean (markers) with a band of one
    standard deviation, heads matched per seed: ``M`` per head, one panel per direction, then
    ``diag Q`` per head, and the error (with the Bayes risk, if given).

    Args:
        c: the comparison (:func:`compare`).
        path: file to save the figure to (and close it); ``None``: only return it.
        bayes_risk: drawn as a horizontal line in the error panel (``None``: not drawn).

    Returns:
        The matplotlib ``Figure``.
    """
    from jaxattn.plots import plt, save

    p, th = c.simulation, c.theory
    kind = str(c.deviations.get("theory", "ode")).upper()
    sol = {k: th[k].values for k in ("M", "Q", "risk")}
    t = p["time"].values
    M = p["M"].values
    F = M.shape[3]
    fig, axes = plt.subplots(1, F + 2, figsize=(4.2 * (F + 2), 3.8))
    axes = cast("Sequence[Axes]", axes)  # F + 2 >= 3 panels: an array of Axes
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for f in range(F):
        for h in range(M.shape[2]):
            col = colors[h % len(colors)]
            axes[f].plot(t, sol["M"][:, :, h, f].mean(0), color=col, label=f"head {h} {kind}")
            _band(axes[f], t, M[:, :, h, f], col)
    q = np.diagonal(p["Q"].values, axis1=-2, axis2=-1)
    qt = np.diagonal(sol["Q"], axis1=-2, axis2=-1)
    for h in range(q.shape[2]):
        axes[F].plot(t, qt[:, :, h].mean(0), color=colors[h], label=f"Q[{h},{h}] {kind}")
        _band(axes[F], t, q[:, :, h], colors[h])
    axes[F + 1].plot(t, sol["risk"].mean(0), color="k", label=f"R(M, Q, b) along the {kind}")
    _band(axes[F + 1], t, p["error"].values, "k", label="online SGD")
    if bayes_risk is not None:
        axes[F + 1].axhline(bayes_risk, color="C3", ls="--", label=f"Bayes risk {bayes_risk:.3f}")
    for ax, name in zip(axes, [f"M[h, {f}] (heads matched)" for f in range(F)] + ["Q[h, h]", "error"]):
        ax.set_xscale("symlog", linthresh=max(t[1], 1e-3))
        ax.set_xlim(0, t[-1])
        ax.set_xlabel("t = samples / D")
        ax.set_ylabel(name)
        ax.legend(fontsize=7)
    fig.suptitle(
        f"{p.attrs.get('activation', '')}: {kind} (lines) vs online SGD (markers and band: mean +- sd over "
        f"{p.sizes['seed']} seeds, heads matched per seed)"
    )
    fig.tight_layout()
    if path:
        save(fig, path)
    return fig
