"""Command line of the single-location model: ``jaxattn slm train | compare | bayes-risk | prune``.

The options are the fields of :class:`~jaxattn.slm._config.SLMConfig` (and, for ``compare``, of
:class:`~jaxattn.slm._config.SLMODEConfig`) with their defaults, plus the grid axes as
comma-separated lists (``--H 2,4 --eta 0.5,1``) and ``--seeds N`` for seeds ``0 .. N-1``.
Every command accepts ``--json`` to print its headline numbers as one JSON object.
"""

from __future__ import annotations

import click
import numpy as np

from jaxattn.cli.common import (
    Choice,
    axis_list,
    clean_errors,
    config_from,
    config_options,
    emit,
    fail_late,
    figure_error,
    figure_option,
    out_option,
    progress_option,
)
from jaxattn.core.attention import available_activations
from jaxattn.core.precision import MATMUL_PRECISIONS
from jaxattn.slm._config import SLMConfig, SLMODEConfig, SLMSDEConfig
from jaxattn.slm.experiments import SLM_SGD

CHOICES = {"activation": available_activations, "aggregation": ("mean", "sum"), "matmul_precision": MATMUL_PRECISIONS}


def prior_options(fn):
    for opt in reversed(
        [
            click.option(
                "--prior",
                type=Choice(["onehot", "flipped", "gaussian"]),
                default="onehot",
                show_default=True,
                help="P_theta: sqrt(nu) e_f, +-sqrt(nu) per direction, or N(0, nu I).",
            ),
            click.option("--F", "F", type=int, default=2, show_default=True, help="Number of latent directions."),
            click.option("--nu", type=float, default=9.0, show_default=True, help="Signal strength of the prior."),
        ]
    ):
        fn = opt(fn)
    return fn


def model_options(fn):
    """The config's fields, the prior, the grid axes, ``--seeds`` and ``--progress``."""
    for opt in reversed(
        [axis_list(a) for a in SLM_SGD.axes if a.name != "seed"]
        + [
            click.option("--seeds", type=int, default=4, show_default=True, help="Seeds 0..seeds-1."),
            progress_option,
        ]
    ):
        fn = opt(fn)
    return prior_options(config_options(SLMConfig, choices=CHOICES)(fn))


def _prior(o: dict):
    from jaxattn.slm import priors

    return priors.from_name(o["prior"], o["F"], o["nu"])


def _seeds(o: dict) -> range:
    from jaxattn.core import checks

    # a range, not a list: the grid is sized from its length before any point is built
    return range(checks.integer("seeds", o["seeds"], 1))


def _grid(o: dict) -> dict:
    return dict(seed=_seeds(o), H=o["H"], L=o["L"], eta=o["eta"], signal=o["signal"])


def _config(config_type: type, o: dict):
    """The command's config; a ``--t-min`` given above ``--t-max`` (an empty range of recording
    times) is refused here, where it is known to be the user's and not the default's."""
    from click.core import ParameterSource

    ctx = click.get_current_context(silent=True)
    given = ctx is not None and ctx.get_parameter_source("t_min") not in (None, ParameterSource.DEFAULT)
    if given and o["t_min"] > o["t_max"]:
        raise ValueError(f"--t-min must be <= --t-max (an empty time range), got {o['t_min']:g} and {o['t_max']:g}")
    return config_from(config_type, o, prior=_prior(o))


def _train(o: dict):
    from jaxattn.slm.experiments import train as run

    return run(_config(SLMConfig, o), progress=o["progress"], **_grid(o))


def _bayes(prior, L, n=100_000, seed=0):
    import jax

    from jaxattn.slm.bayes import bayes_risk

    with jax.enable_x64(True):
        return bayes_risk(prior, L, n=n, key=jax.random.key(seed))


@click.group()
def slm():
    """The single-location model (Spec A): online SGD, Bayes risk, head pruning, ODE vs SGD."""


@slm.command()
@model_options
@out_option("results/slm_train.nc", "netCDF file of the dataset ('' for none).")
@figure_option(
    "results/slm_train.png", "Figure of M, Q and the error against time: online SGD beside its ODE ('' for none)."
)
@click.option(
    "--ode/--no-ode",
    default=True,
    show_default=True,
    help="Integrate the order-parameter ODE from each run's own start, beside online SGD.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the headline numbers as one JSON object.")
@clean_errors
def train(out, figure, ode, as_json, **o):
    """Train a grid (seeds x H x L x eta x signal) by online SGD; write the dataset and a figure."""
    from jaxattn import io

    ds = _train(o)
    th = _ode_beside(o) if ode else None
    if th is not None:  # in the same file: ode_M, ode_Q, ode_b, ode_error, ode_diverged
        ds = _beside(ds, th, "ode")
    if out:
        io.save(ds, out)
    br = _bayes(_prior(o).scaled(o["signal"][0]), o["L"][0]).risk
    fig_err = figure_error(figure, lambda path: _training_figure(ds, th, br, path))
    final = ds["error"].isel(time=-1)
    mean = final.mean("seed").values.ravel().tolist()
    n_div = int(ds["diverged"].sum())
    if n_div:
        click.echo(
            f"{n_div} of {final.size} runs diverged (a non-finite loss, or Q_hh or the error above "
            f"{o['diverge_bound']:g} times its start): lower --eta, or raise --diverge-bound",
            err=True,
        )
    summary = {
        "final_error": mean[0] if len(mean) == 1 else mean,
        "final_error_std": float(final.std("seed").values.ravel()[0]),
    }
    if th is not None:
        ode_final = th["risk"].isel(time=-1).mean("seed").values.ravel().tolist()
        summary["ode_final_error"] = ode_final[0] if len(ode_final) == 1 else ode_final
    record = summary | {
        "bayes_risk": br,
        "n_runs": int(final.size),
        "n_diverged": n_div,
        "wall_seconds": round(
            float(ds.attrs["wall_seconds"]) + (float(th.attrs["wall_seconds"]) if th is not None else 0), 2
        ),
        "out": out or None,
        "figure": None if fig_err else figure or None,
    }
    human = dict(record)
    std = human.pop("final_error_std")
    if isinstance(human["final_error"], float):  # its spread over the seeds, beside it
        human["final_error"] = f"{human['final_error']:.4g} (sd {std:.2g} over {final.sizes['seed']} seeds)"
    emit(record, as_json, human)
    fail_late(fig_err)


def _beside(ds, th, prefix: str):
    """The runs ``ds`` with their theory ``th`` in the same dataset: ``PREFIX_M``, ``_Q``,
    ``_b``, ``_diverged`` and ``_error`` (the theory's ``risk``)."""
    return ds.assign({f"{prefix}_{k}": th[k] for k in ("M", "Q", "b", "diverged")} | {f"{prefix}_error": th["risk"]})


def _ode_beside(o: dict):
    """The order-parameter ODE over the training grid, each seed from its SGD run's start (the
    ``slm_ode`` experiment), the ODE's own fields at their defaults; its ``noise`` axis dropped."""
    from jaxattn.slm.experiments import integrate

    config = SLMODEConfig(**vars(_config(SLMConfig, o)))
    return integrate(config, progress=o["progress"], **_grid(o)).isel(noise=0, drop=True)


def _training_figure(ds, th, bayes_risk: float, path: str) -> None:
    """The first grid point: SGD beside its ODE (:func:`~jaxattn.slm.compare.figure`), or SGD
    alone (:func:`~jaxattn.slm.plots.training_figure`) without the ODE."""
    first = {d: 0 for d in ("H", "L", "eta", "signal")}
    if th is None:
        from jaxattn.slm import plots

        plots.training_figure(ds, bayes_risk=bayes_risk, path=path)
        return
    from jaxattn.slm.compare import figure, matched

    sgd = ds[["M", "Q", "b", "error"]].isel(first)
    sgd.attrs = ds.attrs
    figure(matched(sgd, th.isel(first)), path=path, bayes_risk=bayes_risk)


@slm.command()
@model_options
@config_options(SLMSDEConfig, skip=tuple(f for f in SLMConfig.__dataclass_fields__))
@click.option(
    "--theory",
    type=click.Choice(["ode", "sde"]),
    default="ode",
    show_default=True,
    help="The D -> inf order-parameter ODE, or the finite-D SDE (--dt, --brownian-seed).",
)
@click.option("--gradient-flow", is_flag=True, help="Drop the SGD-noise term of the ODE.")
@out_option("results/slm_compare.nc", "netCDF file of both, heads matched ('' for none).")
@figure_option("results/slm_compare.png", "'' for none.")
@click.option("--json", "as_json", is_flag=True)
@clean_errors
def compare(theory, gradient_flow, out, figure, as_json, **o):
    """Theory against simulation: the order-parameter ODE (or SDE) and online SGD on one
    configuration, heads matched per seed."""
    from jaxattn.slm import compare as sc

    if len(o["H"]) > 1 or len(o["L"]) > 1 or len(o["eta"]) > 1 or len(o["signal"]) > 1:
        raise ValueError("compare takes one value each of H, L, eta and signal")
    config = _config(SLMSDEConfig if theory == "sde" else SLMODEConfig, o)
    c = sc.compare(
        config,
        seeds=o["seeds"],
        H=o["H"][0],
        L=o["L"][0],
        eta=o["eta"][0],
        signal=o["signal"][0],
        noise=not gradient_flow,
        theory=theory,
        progress=o["progress"],
    )
    if out:  # the runs and their theory side by side, as slm train saves them (theory_*)
        from jaxattn import io

        io.save(io.with_result(_beside(c.simulation, c.theory, "theory"), c.deviations), out)
    fig_err = figure_error(figure, lambda path: sc.figure(c, path))
    emit({**c.deviations, "out": out or None, "figure": None if fig_err else figure or None}, as_json)
    fail_late(fig_err)


@slm.command("bayes-risk")
@prior_options
@click.option("--L", "L", type=int, default=4, show_default=True)
@click.option("--n", type=int, default=200_000, show_default=True, help="Monte Carlo samples.")
@click.option("--seed", type=int, default=0, show_default=True)
@out_option("", "netCDF file of the numbers ('' for none).")
@click.option("--json", "as_json", is_flag=True)
@clean_errors
def bayes_risk(prior, F, nu, L, n, seed, out, as_json):
    """The Bayes risk 1 - E[p_eps] of a prior, with its Nishimori twin and standard error."""
    from jaxattn.core import checks

    checks.integer("seed", seed, 0)
    r = _bayes(_prior(dict(prior=prior, F=F, nu=nu)), L, n=n, seed=seed)
    record = {
        "bayes_risk": r.risk,
        "bayes_risk_nishimori": r.risk_nishimori,
        "stderr": r.se_p_eps,
        "prior": prior,
        "F": F,
        "L": L,
        "nu": nu,
    }
    if out:
        from jaxattn import io

        config = dict(prior=prior, F=F, nu=nu, L=L, n=n, seed=seed)
        io.save(io.result_dataset(record, experiment="slm_bayes_risk", config=config, x64=True), out)
    emit({**record, "out": out or None}, as_json)


@slm.command()
@model_options
@click.option("--from", "source", default=None, help="Prune the runs of a saved dataset instead of training.")
@click.option("--n-bank", type=int, default=20000, show_default=True, help="Monte Carlo draws of R(M,Q,b).")
@out_option("results/slm_prune.nc", "netCDF file of the risk per seed and heads removed ('' for none).")
@figure_option("results/slm_prune.png", "'' for none.")
@click.option("--json", "as_json", is_flag=True)
@clean_errors
def prune(source, n_bank, out, figure, as_json, **o):
    """Greedy head pruning of trained models: risk against heads removed."""
    import jax

    from jaxattn import io
    from jaxattn.slm import priors
    from jaxattn.slm.pruning import prune_greedy
    from jaxattn.slm.risk import make_bank

    ds = io.load(source) if source else _train(o)
    cfg = io.config_of(ds)
    prior = priors.from_spec(cfg["prior"])
    point = ds.isel(time=-1, H=-1, L=0, eta=0, signal=0)
    H, L = int(point["H"]), int(point["L"])
    curves, removed = [], []
    with jax.enable_x64(True):
        bank = make_bank(prior.scaled(float(point["signal"])), L, H, n=n_bank)
        for s in range(point.sizes["seed"]):
            p = point.isel(seed=s)
            if bool(p["diverged"]):
                continue
            M, Q, b = p["M"].values[:H], p["Q"].values[:H, :H], p["b"].values[:H]
            r = prune_greedy(M, Q, b, bank, cfg["activation"], cfg["aggregation"])
            curves.append(r.risk.tolist())
            removed.append(r.removed.tolist())
    if not curves:
        raise ValueError("every run diverged: nothing to prune")
    mean = np.mean(curves, axis=0).tolist()
    record = {"activation": cfg["activation"], "H": H, "risk_vs_removed": mean, "per_seed": curves, "removed": removed}
    if out:  # the attributes of the runs pruned (their config and provenance)
        from jaxattn import io

        arrays = {
            "risk": (("run", "n_removed"), np.asarray(curves)),
            "removed_head": (("run", "step"), np.asarray(removed)),
        }
        attrs = {**ds.attrs, "runs_of": ds.attrs.get("experiment", "")}
        io.save(io.result_dataset(record, experiment="slm_prune", config=cfg, arrays=arrays, attrs=attrs), out)
    fig_err = figure_error(figure, lambda path: _prune_figure(curves, cfg["activation"], path))
    emit({**record, "out": out or None, "figure": None if fig_err else figure or None}, as_json)
    fail_late(fig_err)


def _prune_figure(curves, activation, path):
    from jaxattn.plots import plt, save

    fig, ax = plt.subplots(figsize=(4.5, 3.5))
    for c in curves:
        ax.plot(range(len(c)), c, color="0.7", marker=".")
    ax.plot(range(len(curves[0])), np.mean(curves, axis=0), color="k", marker="o", label=activation)
    ax.set_xlabel("heads removed")
    ax.set_ylabel("risk R(M, Q, b)")
    ax.legend()
    fig.tight_layout()
    save(fig, path)
