"""Command line: ``jaxattn slm train | bayes-risk | prune | compare``, ``jaxattn copy ...``
(:mod:`jaxattn.cli_copy`) and ``jaxattn sweep ...`` (:mod:`jaxattn.cli_sweep`).

Every command accepts ``--json`` to print its headline numbers as one JSON object on stdout.
Grid options take comma-separated lists (``--H 2,4 --eta 0.5,1``).
"""

from __future__ import annotations

import functools
import json
import os

import click
import numpy as np


def _floats(_ctx, param, value):
    if value is None:
        return None
    try:
        return [float(v) for v in str(value).split(",") if v.strip()]
    except ValueError as err:
        raise click.BadParameter(f"expected comma-separated numbers, got {value!r}", param=param) from err


def _ints(ctx, param, value):
    vals = _floats(ctx, param, value)
    if vals is None:
        return None
    if not all(float(v).is_integer() for v in vals):
        raise click.BadParameter(f"expected comma-separated integers, got {value!r}", param=param)
    return [int(v) for v in vals]


def _emit(obj: dict, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(obj))
    else:
        for k, v in obj.items():
            click.echo(f"{k}: {v}")


def _fail_on_value_error(fn):
    """Turn a ``ValueError`` from validation into a clean usage error naming the parameter."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ValueError as err:
            raise click.UsageError(str(err)) from err

    return wrapper


def _prior_options(fn):
    for opt in reversed([
        click.option("--prior", type=click.Choice(["onehot", "flipped", "gaussian"]), default="onehot",
                     show_default=True, help="P_theta: sqrt(nu) e_f, +-sqrt(nu) per direction, or N(0, nu I)."),
        click.option("--F", "F", type=int, default=2, show_default=True, help="Number of latent directions."),
        click.option("--nu", type=float, default=9.0, show_default=True, help="Signal strength of the prior."),
    ]):
        fn = opt(fn)
    return fn


def _model_options(fn):
    for opt in reversed([
        click.option("--activation", type=click.Choice(["softmax", "softmax1", "bayes_softmax", "linear"]),
                     default="bayes_softmax", show_default=True),
        click.option("--aggregation", type=click.Choice(["mean", "sum"]), default=None,
                     help="Head aggregation (default: mean for softmax/linear, sum otherwise)."),
        click.option("--D", "D", type=int, default=200, show_default=True, help="Embedding dimension."),
        click.option("--H", "H", callback=_ints, default="2", show_default=True, help="Heads (list)."),
        click.option("--L", "L", callback=_ints, default="4", show_default=True, help="Sequence length (list)."),
        click.option("--eta", callback=_floats, default="1.0", show_default=True, help="Learning rate (list)."),
        click.option("--signal", callback=_floats, default="1.0", show_default=True,
                     help="Scale of theta (list)."),
        click.option("--seeds", type=int, default=4, show_default=True, help="Seeds 0..seeds-1."),
        click.option("--t-max", type=float, default=200.0, show_default=True, help="Training time samples/D."),
        click.option("--n-records", type=int, default=25, show_default=True, help="Log-spaced recordings."),
        click.option("--batch-size", type=int, default=1, show_default=True),
        click.option("--sigma0", type=float, default=1.0, show_default=True, help="Initial key scale."),
        click.option("--n-test", type=int, default=1000, show_default=True, help="Test samples per record."),
        click.option("--share-data/--no-share-data", default=True, show_default=True,
                     help="Common random numbers across the grid (one data stream per seed)."),
        click.option("--progress/--no-progress", default=True, show_default=True),
    ]):
        fn = opt(fn)
    return _prior_options(fn)


def _config(o: dict):
    """The :class:`~jaxattn.slm.SLMConfig` of the model options."""
    from jaxattn import priors, slm

    return slm.SLMConfig(
        D=o["D"], prior=priors.from_name(o["prior"], o["F"], o["nu"]), activation=o["activation"],
        aggregation=o["aggregation"], t_max=o["t_max"], n_records=o["n_records"],
        batch_size=o["batch_size"], sigma0=o["sigma0"], n_test=o["n_test"], share_data=o["share_data"],
    )


def _train(o: dict):
    from jaxattn import slm

    config = _config(o)
    if o["seeds"] < 1:
        raise ValueError(f"seeds must be >= 1, got {o['seeds']}")
    return slm.train(config, seed=list(range(o["seeds"])), H=o["H"], L=o["L"], eta=o["eta"],
                     signal=o["signal"], progress=o["progress"])


def _bayes(prior_name, F, nu, L, n=100_000, seed=0):
    import jax

    from jaxattn import priors
    from jaxattn.theory.slm_bayes import bayes_risk

    with jax.enable_x64(True):
        return bayes_risk(priors.from_name(prior_name, F, nu), L, n=n, key=jax.random.key(seed))


@click.group()
@click.version_option(package_name="jaxattn")
def main():
    """jaxattn: simulate the theory of attention."""
    from jaxattn.devices import use_cpu_cores

    use_cpu_cores()  # one XLA host device per core: grids are sharded over them


@main.group()
def slm():
    """The single-location model (Spec A): online SGD, Bayes risk, head pruning."""


@slm.command()
@_model_options
@click.option("--out", default="results/slm_train.nc", show_default=True, help="netCDF file of the dataset.")
@click.option("--figure", default="results/slm_train.png", show_default=True, help="PNG of M(t) and error(t).")
@click.option("--json", "as_json", is_flag=True, help="Print the headline numbers as one JSON object.")
@_fail_on_value_error
def train(out, figure, as_json, **o):
    """Train a grid (seeds x H x L x eta x signal) by online SGD; write the dataset and a figure."""
    from jaxattn import plots, results

    ds = _train(o)
    results.save(ds, out)
    signal = o["signal"][0]
    br = _bayes(o["prior"], o["F"], o["nu"] * signal**2, o["L"][0]).risk
    if figure:
        plots.training_figure(ds, bayes_risk=br, path=figure)
    final = ds["error"].isel(time=-1)
    mean = final.mean("seed").values.ravel().tolist()
    _emit({
        "final_error": mean[0] if len(mean) == 1 else mean,
        "final_error_std": float(final.std("seed").values.ravel()[0]),
        "bayes_risk": br,
        "n_runs": int(final.size),
        "n_diverged": int(ds["diverged"].sum()),
        "wall_seconds": round(float(ds.attrs["wall_seconds"]), 2),
        "out": out,
        "figure": figure,
    }, as_json)


@slm.command()
@_model_options
@click.option("--n-bank", type=int, default=4000, show_default=True, help="Monte Carlo draws of the ODE's expectations.")
@click.option("--gradient-flow", is_flag=True, help="Drop the SGD-noise term of the ODE.")
@click.option("--figure", default="results/slm_compare.png", show_default=True)
@click.option("--json", "as_json", is_flag=True)
@_fail_on_value_error
def compare(n_bank, gradient_flow, figure, as_json, **o):
    """Theory against simulation: the order-parameter ODE and online SGD on one configuration."""
    from jaxattn import slm_compare as sc

    if len(o["H"]) > 1 or len(o["L"]) > 1 or len(o["eta"]) > 1 or len(o["signal"]) > 1:
        raise ValueError("compare takes one value each of H, L, eta and signal")
    config = _config(o)
    c = sc.compare(config, seeds=o["seeds"], H=o["H"][0], L=o["L"][0], eta=o["eta"][0], signal=o["signal"][0],
                   n_bank=n_bank, noise=not gradient_flow, progress=o["progress"])
    if figure:
        os.makedirs(os.path.dirname(os.path.abspath(figure)), exist_ok=True)
        sc.figure(c, figure)
    _emit({**c.deviations, "figure": figure}, as_json)


@slm.command("bayes-risk")
@_prior_options
@click.option("--L", "L", type=int, default=4, show_default=True)
@click.option("--n", type=int, default=200_000, show_default=True, help="Monte Carlo samples.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@_fail_on_value_error
def bayes_risk(prior, F, nu, L, n, seed, as_json):
    """The Bayes risk 1 - E[p_eps] of a prior, with its Nishimori twin and standard error."""
    r = _bayes(prior, F, nu, L, n=n, seed=seed)
    _emit({"bayes_risk": r.risk, "bayes_risk_nishimori": r.risk_nishimori, "stderr": r.se_p_eps,
           "prior": prior, "F": F, "L": L, "nu": nu}, as_json)


@slm.command()
@_model_options
@click.option("--from", "source", default=None, help="Prune the runs of a saved dataset instead of training.")
@click.option("--n-bank", type=int, default=20000, show_default=True, help="Monte Carlo draws of R(M,Q,b).")
@click.option("--figure", default="results/slm_prune.png", show_default=True)
@click.option("--json", "as_json", is_flag=True)
@_fail_on_value_error
def prune(source, n_bank, figure, as_json, **o):
    """Greedy head pruning of trained models: risk against heads removed."""
    import jax

    from jaxattn import results, slm
    from jaxattn.pruning import prune_greedy
    from jaxattn.theory.slm_risk import make_bank

    ds = results.load(source) if source else _train(o)
    cfg = results.config_of(ds)
    prior = slm.prior_from_description(cfg["prior"])
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
    if figure:
        _prune_figure(curves, cfg["activation"], figure)
    _emit({"activation": cfg["activation"], "H": H, "risk_vs_removed": mean, "per_seed": curves,
           "removed": removed, "figure": figure}, as_json)


def _prune_figure(curves, activation, path):
    from jaxattn.plots import plt

    fig, ax = plt.subplots(figsize=(4.5, 3.5))
    for c in curves:
        ax.plot(range(len(c)), c, color="0.7", marker=".")
    ax.plot(range(len(curves[0])), np.mean(curves, axis=0), color="k", marker="o", label=activation)
    ax.set_xlabel("heads removed")
    ax.set_ylabel("risk R(M, Q, b)")
    ax.legend()
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


from jaxattn.cli_copy import copy as _copy  # noqa: E402

main.add_command(_copy)

from jaxattn.cli_sweep import sweep as _sweep  # noqa: E402

main.add_command(_sweep)


if __name__ == "__main__":
    main()
