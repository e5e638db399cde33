"""Command line for the copy task (Spec B): ``jaxattn copy train | sample``.

``train`` runs full-batch Adam over a grid ``P x seeds x inits`` and reports the global minimum
per ``P``; ``sample`` runs SGLD chains on ``exp(-N U)`` from a uniform and a copy start. Both
accept ``--json`` (one JSON object on stdout) and write a netCDF dataset and a figure.
"""

from __future__ import annotations

import os

import click
import numpy as np

from jaxattn.cli import _emit, _fail_on_value_error, _ints

HEADLINE = ("prev_weight", "a1", "aG", "U", "train_error", "test_error")


def _scalar_or_list(x):
    vals = np.asarray(x, float).ravel().tolist()
    return vals[0] if len(vals) == 1 else vals


def _model_options(fn):
    for opt in reversed([
        click.option("--attention", type=click.Choice(["softmax", "linear"]), default="softmax", show_default=True),
        click.option("--linear-norm", type=click.Choice(["L", "none"]), default="L", show_default=True,
                     help="Linear attention A = G / L or A = G."),
        click.option("--cyclic/--no-cyclic", default=True, show_default=True,
                     help="Cyclic boundary y_0 = x_{L-1}, or drop position 0 from the loss."),
        click.option("--L", "L", type=int, default=32, show_default=True, help="Sequence length."),
        click.option("--V", "V", type=int, default=4, show_default=True, help="Vocabulary size."),
        click.option("--beta", type=float, default=1.0, show_default=True),
        click.option("--omega", type=float, default=1.0, show_default=True, help="Prior variance of W."),
        click.option("--sigma-G2", "sigma_G2", type=float, default=1.0, show_default=True,
                     help="Prior variance of G."),
        click.option("--copy-strength", type=float, default=None, help="c of the copy start G = c S."),
        click.option("--n-test", type=int, default=2000, show_default=True, help="Fresh test sequences."),
        click.option("--progress/--no-progress", default=True, show_default=True),
    ]):
        fn = opt(fn)
    return fn


def _config(o: dict, **extra):
    from jaxattn.copy import CopyConfig

    return CopyConfig(L=o["L"], V=o["V"], attention=o["attention"], linear_norm=o["linear_norm"],
                      cyclic=o["cyclic"], beta=o["beta"], omega=o["omega"], sigma_G2=o["sigma_G2"],
                      copy_strength=o["copy_strength"], n_test=o["n_test"], **extra)


@click.group()
def copy():
    """The copy task (Spec B): Adam grids over P with global-minimum filtering, SGLD sampling."""


@copy.command()
@_model_options
@click.option("--P", "P", callback=_ints, default="200,350,700", show_default=True, help="Sample sizes (list).")
@click.option("--seeds", type=int, default=4, show_default=True, help="Seeds 0..seeds-1.")
@click.option("--inits", default="random,copy", show_default=True, help="Initialisations (random, copy).")
@click.option("--lr", type=float, default=0.05, show_default=True, help="Adam learning rate (cosine decay).")
@click.option("--n-steps", type=int, default=2000, show_default=True, help="Adam steps.")
@click.option("--sigma0", type=float, default=0.1, show_default=True, help="Scale of random initial G.")
@click.option("--out", default="results/copy_train.nc", show_default=True, help="netCDF file ('' for none).")
@click.option("--figure", default="results/copy_train.png", show_default=True, help="PNG ('' for none).")
@click.option("--json", "as_json", is_flag=True, help="Print the headline numbers as one JSON object.")
@_fail_on_value_error
def train(P, seeds, inits, lr, n_steps, sigma0, out, figure, as_json, **o):
    """Full-batch Adam on U over P x seeds x inits; report the global minimum per P."""
    from jaxattn import copy as cp
    from jaxattn import results

    if seeds < 1:
        raise ValueError(f"seeds must be >= 1, got {seeds}")
    config = _config(o, lr=lr, n_steps=n_steps, sigma0=sigma0)
    ds = cp.train(config, P=P, seed=list(range(seeds)), init=[s.strip() for s in inits.split(",")],
                  progress=o["progress"])
    best = cp.global_minimum(ds)
    if out:
        results.save(ds, out)
    if figure:
        copy_figure(ds, path=figure)
    head = {k: _scalar_or_list(best[k].values) for k in HEADLINE}
    _emit({
        **head,
        "P": P if len(P) > 1 else P[0],
        "best_init": _scalar_or_list_str(best["best_init"].values),
        "n_copy": {i: _ints_or_list(best["n_copy"].sel(init=i)) for i in ds["init"].values.tolist()},
        "n_uniform": {i: _ints_or_list(best["n_uniform"].sel(init=i)) for i in ds["init"].values.tolist()},
        "hysteresis": [bool(h) for h in best["hysteresis"].values] if len(P) > 1 else bool(best["hysteresis"][0]),
        "n_runs": int(ds["U"].size),
        "n_converged": int(ds["converged"].sum()),
        "n_diverged": int(ds["diverged"].sum()),
        "wall_seconds": round(float(ds.attrs["wall_seconds"]), 2),
        "out": out,
        "figure": figure,
    }, as_json)


def _ints_or_list(x):
    vals = [int(v) for v in np.asarray(x).ravel()]
    return vals[0] if len(vals) == 1 else vals


def _scalar_or_list_str(x):
    vals = [str(v) for v in np.asarray(x).ravel()]
    return vals[0] if len(vals) == 1 else vals


@copy.command()
@_model_options
@click.option("--P", "P", callback=_ints, default="200,700", show_default=True, help="Sample sizes (list).")
@click.option("--starts", default="uniform,copy", show_default=True, help="Chain starts (uniform, copy).")
@click.option("--N", "N", type=float, default=1.0, show_default=True, help="Inverse temperature of exp(-N U).")
@click.option("--eps-G", "eps_G", type=float, default=None, help="Step size of G (default: from curvature).")
@click.option("--eps-W", "eps_W", type=float, default=None, help="Step size of W (default: from curvature).")
@click.option("--step-fraction", type=float, default=0.05, show_default=True)
@click.option("--chains", type=int, default=16, show_default=True, help="Chains per (P, start).")
@click.option("--n-steps", type=int, default=4000, show_default=True, help="Steps after burn-in.")
@click.option("--burn-in", type=int, default=2000, show_default=True)
@click.option("--thin", type=int, default=20, show_default=True)
@click.option("--data-seed", type=int, default=0, show_default=True)
@click.option("--out", default="results/copy_sample.nc", show_default=True, help="netCDF file ('' for none).")
@click.option("--figure", default="results/copy_sample.png", show_default=True, help="PNG ('' for none).")
@click.option("--json", "as_json", is_flag=True, help="Print the headline numbers as one JSON object.")
@_fail_on_value_error
def sample(P, starts, N, eps_G, eps_W, step_fraction, chains, n_steps, burn_in, thin, data_seed, out, figure,
           as_json, **o):
    """SGLD chains on exp(-N U) from uniform and copy starts; report posterior means per P."""
    from jaxattn import copy as cp
    from jaxattn import results

    sc = cp.SGLDConfig(N=N, eps_G=eps_G, eps_W=eps_W, step_fraction=step_fraction, n_steps=n_steps,
                       burn_in=burn_in, thin=thin, n_chains=chains, data_seed=data_seed)
    ds = cp.sample(_config(o), sc, P=P, start=[s.strip() for s in starts.split(",")], progress=o["progress"])
    if out:
        results.save(ds, out)
    if figure:
        copy_figure(None, ds, path=figure)
    head = {}
    for k in HEADLINE:
        s = cp.posterior_summary(ds, k)
        head[k] = {st: _scalar_or_list(s["mean"].sel(start=st).values) for st in ds["start"].values.tolist()}
        if k == "prev_weight":
            head["prev_weight_se"] = {st: _scalar_or_list(s["se"].sel(start=st).values)
                                      for st in ds["start"].values.tolist()}
    _emit({**head, "P": P if len(P) > 1 else P[0], "n_chains": int(ds.sizes["chain"]),
           "n_diverged": int(ds["diverged"].sum()), "eps_G": _scalar_or_list(ds["eps_G"].values),
           "eps_W": _scalar_or_list(ds["eps_W"].values),
           "wall_seconds": round(float(ds.attrs["wall_seconds"]), 2), "out": out, "figure": figure}, as_json)


def copy_figure(train_ds=None, sample_ds=None, path: str | None = None):
    """Order parameters and errors against ``P``: every Adam run (by initialisation), the
    global minimum, and SGLD posterior means by start (with their Monte Carlo errors)."""
    from jaxattn.copy import global_minimum, posterior_summary
    from jaxattn.plots import plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    panels = (("prev_weight", "previous-token weight"), ("aG", "a_G"), ("test_error", "test error"))
    for ax, (var, label) in zip(axes, panels):
        if train_ds is not None:
            P = train_ds["P"].values
            for j, init in enumerate(train_ds["init"].values.tolist()):
                y = train_ds[var].sel(init=init).values
                for s in range(y.shape[1]):
                    ax.plot(P, y[:, s], ls="none", marker="o^"[j % 2], color=f"C{j}", alpha=0.4,
                            label=f"Adam, {init} init" if s == 0 else None)
            best = global_minimum(train_ds)
            ax.plot(P, best[var].values, color="k", marker=".", label="global minimum (lowest U)")
        if sample_ds is not None:
            summ = posterior_summary(sample_ds, var)
            for j, st in enumerate(sample_ds["start"].values.tolist()):
                m = summ["mean"].sel(start=st)
                ax.errorbar(sample_ds["P"].values, m.values, yerr=summ["se"].sel(start=st).values, capsize=3,
                            color=f"C{j + 2}", marker="s", label=f"SGLD, {st} start")
        ax.set_xscale("log")
        ax.set_xlabel("P")
        ax.set_ylabel(label)
    axes[0].legend(fontsize=7)
    ds = train_ds if train_ds is not None else sample_ds
    if ds is not None:
        fig.suptitle(f"copy task, {ds.attrs.get('attention')} attention, L={ds.attrs.get('L')}, V={ds.attrs.get('V')}")
    fig.tight_layout()
    if path:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        fig.savefig(path, dpi=120)
        plt.close(fig)
    return fig

