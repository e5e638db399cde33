"""Theory against simulation in one call: online SGD and the order-parameter ODE on the same
configuration, each seed's ODE started from that run's own initial ``(M, Q, b)``."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr

from jaxattn import slm
from jaxattn.models.multihead import Arch
from jaxattn.theory import slm_ode, slm_risk


class Comparison(NamedTuple):
    simulation: xr.Dataset  # one grid point: dims (seed, time, ...)
    theory: slm_ode.Solution  # leading axis: seed
    deviations: dict  # largest |seed-mean simulation - seed-mean ODE| per observable


def compare(config: slm.SLMConfig, *, seeds=4, H: int = 2, L: int = 4, eta: float = 1.0,
            signal: float = 1.0, n_bank: int = 4000, noise: bool = True, progress: bool = False) -> Comparison:
    """Run both and measure the largest deviation of ``M``, ``diag Q`` and the error."""
    ds = slm.train(config, seed=list(range(seeds)), H=H, L=L, eta=eta, signal=signal, progress=progress)
    p = ds.isel(H=0, L=0, eta=0, signal=0)
    arch = Arch(config.activation, config.aggregation)
    with jax.enable_x64(True):
        y0 = slm_ode.OrderParams(*(jnp.asarray(p[k].values[:, 0], float) for k in ("M", "Q", "b")))
        bank = slm_risk.make_bank(config.prior, L, H, n=n_bank)
        args = slm_ode.ODEArgs(jnp.full(seeds, eta / config.batch_size), jnp.full(seeds, signal),
                               jnp.full(seeds, float(noise)), jnp.ones((seeds, H), bool), jnp.ones((seeds, L), bool))
        sol = slm_ode.integrate_grid(y0, args, bank, jnp.asarray(p["time"].values), arch)
        sol = jax.tree_util.tree_map(np.asarray, sol)
    sim_q = np.diagonal(p["Q"].values, axis1=-2, axis2=-1)
    th_q = np.diagonal(sol.Q, axis1=-2, axis2=-1)

    def dev(a, b):
        return float(np.nanmax(np.abs(np.nanmean(a, axis=0) - np.mean(b, axis=0))))

    deviations = {
        "max_dev_M": dev(p["M"].values, sol.M),
        "max_dev_Q": dev(sim_q, th_q),
        "max_dev_error": dev(p["error"].values, sol.risk),
        "ode_ok": bool(np.all(sol.ok)),
        "n_seeds": seeds,
        "t_max": float(p["time"].values[-1]),
    }
    return Comparison(p, sol, deviations)


def figure(c: Comparison, path: str | None = None):
    """ODE lines (seed mean), simulation mean and spread as markers: ``M`` per head and
    direction, ``diag Q`` per head, and the error."""
    from jaxattn.plots import plt

    p, sol = c.simulation, c.theory
    t = p["time"].values
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    M = p["M"].values
    for h in range(M.shape[2]):
        for f in range(M.shape[3]):
            col = colors[(h * M.shape[3] + f) % len(colors)]
            axes[0].plot(t, sol.M[:, :, h, f].mean(0), color=col, label=f"h{h} s{f} ODE")
            axes[0].errorbar(t, M[:, :, h, f].mean(0), yerr=M[:, :, h, f].std(0), fmt="o", ms=3, color=col)
    q = np.diagonal(p["Q"].values, axis1=-2, axis2=-1)
    qt = np.diagonal(sol.Q, axis1=-2, axis2=-1)
    for h in range(q.shape[2]):
        axes[1].plot(t, qt[:, :, h].mean(0), color=colors[h], label=f"Q[{h},{h}] ODE")
        axes[1].errorbar(t, q[:, :, h].mean(0), yerr=q[:, :, h].std(0), fmt="o", ms=3, color=colors[h])
    axes[2].plot(t, sol.risk.mean(0), color="k", label="R(M, Q, b) along the ODE")
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
