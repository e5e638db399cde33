"""Theory against simulation in one call: online SGD and the order-parameter ODE on the same
configuration, each seed's ODE started from that run's own initial ``(M, Q, b)`` (both grids on
the engine: :func:`jaxattn.slm.train` and :func:`jaxattn.slm.integrate`)."""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np
import xarray as xr

from jaxattn.slm.config import SLMConfig, SLMODEConfig
from jaxattn.slm.experiments import integrate, train


class Comparison(NamedTuple):
    simulation: xr.Dataset  # one grid point: dims (seed, time, ...)
    theory: xr.Dataset  # the ODE of each seed: dims (seed, time, ...)
    deviations: dict  # largest |seed-mean simulation - seed-mean ODE| per observable


def compare(
    config: SLMConfig,
    *,
    seeds=4,
    H: int = 2,
    L: int = 4,
    eta: float = 1.0,
    signal: float = 1.0,
    n_bank: int | None = None,
    noise: bool = True,
    progress: bool = False,
) -> Comparison:
    """Run both and measure the largest deviation of ``M``, ``diag Q`` and the error. ``config``
    may be an :class:`SLMODEConfig` (its bank and tolerances are used); ``n_bank`` overrides its
    bank size."""
    base = {f.name: getattr(config, f.name) for f in dataclasses.fields(SLMConfig)}
    ode_config = config if isinstance(config, SLMODEConfig) else SLMODEConfig(**base)
    if n_bank is not None:
        ode_config = dataclasses.replace(ode_config, n_bank=n_bank)
    sim_config = SLMConfig(**base)
    grid = dict(seed=list(range(seeds)), H=H, L=L, eta=eta, signal=signal)
    p = train(sim_config, progress=progress, **grid).isel(H=0, L=0, eta=0, signal=0)
    th = integrate(ode_config, noise=float(noise), progress=progress, **grid).isel(H=0, L=0, eta=0, signal=0, noise=0)
    sim_q = np.diagonal(p["Q"].values, axis1=-2, axis2=-1)
    th_q = np.diagonal(th["Q"].values, axis1=-2, axis2=-1)

    def dev(a, b):
        return float(np.nanmax(np.abs(np.nanmean(a, axis=0) - np.mean(b, axis=0))))

    deviations = {
        "max_dev_M": dev(p["M"].values, th["M"].values),
        "max_dev_Q": dev(sim_q, th_q),
        "max_dev_error": dev(p["error"].values, th["risk"].values),
        "ode_ok": bool(not th["diverged"].any()),
        "n_seeds": seeds,
        "t_max": float(p["time"].values[-1]),
    }
    return Comparison(p, th, deviations)


def figure(c: Comparison, path: str | None = None):
    """ODE lines (seed mean), simulation mean and spread as markers: ``M`` per head and
    direction, ``diag Q`` per head, and the error."""
    from jaxattn.plots import plt

    p, th = c.simulation, c.theory
    sol = {k: th[k].values for k in ("M", "Q", "risk")}
    t = p["time"].values
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    M = p["M"].values
    for h in range(M.shape[2]):
        for f in range(M.shape[3]):
            col = colors[(h * M.shape[3] + f) % len(colors)]
            axes[0].plot(t, sol["M"][:, :, h, f].mean(0), color=col, label=f"h{h} s{f} ODE")
            axes[0].errorbar(t, M[:, :, h, f].mean(0), yerr=M[:, :, h, f].std(0), fmt="o", ms=3, color=col)
    q = np.diagonal(p["Q"].values, axis1=-2, axis2=-1)
    qt = np.diagonal(sol["Q"], axis1=-2, axis2=-1)
    for h in range(q.shape[2]):
        axes[1].plot(t, qt[:, :, h].mean(0), color=colors[h], label=f"Q[{h},{h}] ODE")
        axes[1].errorbar(t, q[:, :, h].mean(0), yerr=q[:, :, h].std(0), fmt="o", ms=3, color=colors[h])
    axes[2].plot(t, sol["risk"].mean(0), color="k", label="R(M, Q, b) along the ODE")
    e = p["error"].values
    axes[2].errorbar(t, e.mean(0), yerr=e.std(0), fmt="o", ms=3, color="k", label="simulation")
    for ax, name in zip(axes, ("M[h, f]", "Q[h, h]", "error")):
        ax.set_xscale("symlog", linthresh=max(t[1], 1e-3))
        ax.set_xlim(0, t[-1])
        ax.set_xlabel("t = samples / D")
        ax.set_ylabel(name)
        ax.legend(fontsize=7)
    fig.suptitle(f"{p.attrs.get('activation', '')}: ODE (lines) vs online SGD (markers, mean +- sd over seeds)")
    fig.tight_layout()
    if path:
        fig.savefig(path, dpi=120)
        plt.close(fig)
    return fig
