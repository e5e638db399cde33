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



# --- theory (Spec B, section 3): jaxattn copy theory | phase-diagram ----------------------------

def _N(_ctx, param, value):
    try:
        x = float(value)
    except (TypeError, ValueError) as err:
        raise click.BadParameter(f"expected a number or 'inf', got {value!r}", param=param) from err
    return x


@copy.command()
@click.option("--attention", type=click.Choice(["softmax", "linear"]), default="softmax", show_default=True)
@click.option("--linear-norm", type=click.Choice(["L", "none"]), default="L", show_default=True)
@click.option("--cyclic/--no-cyclic", default=True, show_default=True)
@click.option("--L", "L", type=int, default=32, show_default=True, help="Sequence length.")
@click.option("--V", "V", type=int, default=4, show_default=True, help="Vocabulary size.")
@click.option("--beta", type=float, default=1.0, show_default=True)
@click.option("--omega", type=float, default=1.0, show_default=True, help="Prior variance of W.")
@click.option("--sigma-G2", "sigma_G2", type=float, default=1.0, show_default=True, help="Prior variance of G.")
@click.option("--N", "N", callback=_N, default="1", show_default=True,
              help="Inverse temperature of exp(-N U); 'inf' gives the MAP (no Occam term).")
@click.option("--P", "P", default=None, help="Sample sizes for the theory curves (comma-separated).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@_fail_on_value_error
def theory(attention, linear_norm, cyclic, L, V, beta, omega, sigma_G2, N, P, as_json):
    """Minima of the reduced action: softmax P*, spinodals and jump; linear onsets and crossover."""
    from jaxattn.models.copy import CopyArch
    from jaxattn.theory.copy_phase import theory_summary

    Ps = None
    if P is not None:
        try:
            Ps = [float(v) for v in P.split(",") if v.strip()]
        except ValueError as err:
            raise ValueError(f"P must be comma-separated numbers, got {P!r}") from err
    arch = CopyArch(L, V, attention, linear_norm, cyclic, beta, omega, sigma_G2)
    _emit(theory_summary(arch, N, Ps), as_json)


@copy.command("phase-diagram")
@click.option("--L-max", "L_max", type=int, default=512, show_default=True, help="Largest L of the softmax P*(L).")
@click.option("--n-P", "n_P", type=int, default=400, show_default=True, help="P grid points per (L, V).")
@click.option("--out-dir", default="results/copy_theory", show_default=True, help="Folder of the figures.")
@click.option("--critical/--no-critical", default=True, show_default=True,
              help="Locate the end of the softmax first-order line (V = 4; about 30 s).")
@click.option("--json", "as_json", is_flag=True, help="Print the fits as one JSON object.")
@_fail_on_value_error
def phase_diagram(L_max, n_P, out_dir, critical, as_json):
    """Softmax P*(L, V) with fits, linear thresholds against V and L, action landscapes."""
    if L_max < 32:
        raise ValueError(f"L_max must be >= 32, got {L_max}")
    if n_P < 20:
        raise ValueError(f"n_P must be >= 20, got {n_P}")
    fits = phase_figures(out_dir, L_max=L_max, n_P=n_P, critical=critical)
    fits["landscape"] = landscape_figure(os.path.join(out_dir, "copy_landscape.png"))
    _emit(fits, as_json)


V_GRID = (2, 3, 4, 6, 8, 12, 16, 32)


def softmax_phase_data(L_max: int = 512, n_L: int = 16, Vs=V_GRID, n_P: int = 400, N: float = 1.0):
    """``P*``, spinodals and the jump over ``L`` (geometric from 16 to ``L_max``) x ``Vs`` (one
    compiled call) with fits of ``P*`` at each ``V`` to ``A L ln^2 L`` and to the closed form."""
    import jax
    import jax.numpy as jnp

    from jaxattn.models.copy import CopyArch
    from jaxattn.theory import copy_action as ca
    from jaxattn.theory import copy_phase as cph

    Ls = np.unique(np.round(np.geomspace(16, L_max, n_L)).astype(int))
    with jax.enable_x64(True):
        base = ca.hyper(CopyArch(16, 4), N)
        pd = cph.softmax_phase_diagram(jnp.asarray(Ls, float), jnp.asarray(Vs, float),
                                       jnp.geomspace(0.2, 5.0, n_P), base)
        pd = {k: np.asarray(v) for k, v in pd._asdict().items()}
        cf = np.asarray(cph.p_star_closed_form(jnp.asarray(Ls, float)[:, None], jnp.asarray(Vs, float)[None, :]))
    fo = pd["first_order"] > 0.5
    fits = {}
    for j, V in enumerate(Vs):
        ok = fo[:, j]
        x = Ls[ok] * np.log(Ls[ok]) ** 2
        A = float(np.sum(x * pd["P_star"][ok, j]) / np.sum(x * x))
        fits[int(V)] = {"A_L_ln2L": A, "max_rel_dev_L_ln2L": float(np.max(np.abs(A * x / pd["P_star"][ok, j] - 1))),
                        "ratio_to_closed_form": [round(float(r), 4) for r in pd["P_star"][ok, j] / cf[ok, j]]}
    return Ls, np.asarray(Vs), pd, cf, fits


def linear_threshold_data(N: float = 1.0):
    """Linear onsets and crossovers against ``V`` at ``L = 8`` and against ``L`` at ``V = 4``."""
    from jaxattn.models.copy import CopyArch
    from jaxattn.theory import copy_phase as cph

    out = {}
    for name, grid in (("V", [(8, V) for V in (4, 8, 16, 32, 64, 128)]), ("L", [(L, 4) for L in (8, 16, 32, 64, 128, 256)])):
        rows = []
        for L, V in grid:
            s = cph.theory_summary(CopyArch(L, V, "linear"), N, n_P_linear=80)
            rows.append((L, V, s["p_onset"], s["p_crossover"], s["p_copy"], s["onset_kind"]))
        out[name] = rows
    return out


def phase_figures(out_dir: str, L_max: int = 512, n_P: int = 400, critical: bool = True) -> dict:
    """``copy_phase_diagram.png`` (softmax ``P*(L)`` with spinodals, fits and closed form;
    ``P*/closed form``) and ``copy_linear_thresholds.png`` (onsets and crossovers against ``V``
    and ``L``). Returns the fits."""
    from jaxattn.models.copy import CopyArch
    from jaxattn.plots import plt
    from jaxattn.theory import copy_phase as cph

    os.makedirs(out_dir, exist_ok=True)
    Ls, Vs, pd, cf, fits = softmax_phase_data(L_max, n_P=n_P)
    crit = cph.softmax_critical_point(CopyArch(32, 4)) if critical else None
    fig, ax = plt.subplots(1, 3, figsize=(15, 4.2))
    for j, V in enumerate(Vs):
        if V not in (2, 4, 8, 32):
            continue
        fo = pd["first_order"][:, j] > 0.5
        ax[0].plot(Ls[fo], pd["P_star"][fo, j], "o-", color=f"C{j}", ms=3, label=f"P*, V={V}")
        ax[0].plot(Ls[~fo], pd["P_star"][~fo, j], "x", color=f"C{j}")
        ax[0].fill_between(Ls[fo], pd["P_spinodal_lo"][fo, j], pd["P_spinodal_hi"][fo, j], color=f"C{j}", alpha=0.15)
        ax[0].plot(Ls, fits[int(V)]["A_L_ln2L"] * Ls * np.log(Ls) ** 2, ":", color=f"C{j}")
        ax[1].plot(Ls[fo], pd["P_star"][fo, j] / cf[fo, j], "o-", color=f"C{j}", ms=3, label=f"V={V}")
        ax[2].plot(Ls[fo], pd["jump"][fo, j], "o-", color=f"C{j}", ms=3, label=f"V={V}")
    if crit is not None:
        ax[0].plot([crit.L], [crit.P], "k*", ms=12, label=f"critical point V=4 (L={crit.L:.1f})")
    ax[0].set(xscale="log", yscale="log", xlabel="L", ylabel="P*", title="softmax: P* (band: spinodals; dotted: A L ln^2 L)")
    ax[1].set(xscale="log", xlabel="L", ylabel="P* / closed form", title="against the spec's closed form")
    ax[2].set(xscale="log", xlabel="L", ylabel="jump in c_G at P*", title="size of the jump (x: continuous)")
    for a in ax:
        a.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "copy_phase_diagram.png"), dpi=120)
    plt.close(fig)

    lin = linear_threshold_data()
    fig, ax = plt.subplots(1, 2, figsize=(10, 4))
    for a, name, ref in ((ax[0], "V", "V^2"), (ax[1], "L", "L^{3/2} V^{1/2}")):
        rows = lin[name]
        x = np.array([r[1] if name == "V" else r[0] for r in rows], float)
        L_, V_ = np.array([r[0] for r in rows], float), np.array([r[1] for r in rows], float)
        a.plot(x, [r[2] for r in rows], "o-", label="onset (Hessian at A=0)")
        a.plot(x, [r[3] for r in rows], "s-", label="crossover to copying")
        a.plot(x, [r[4] for r in rows], "^--", label="a_G curvature zero (closed form)")
        a.plot(x, V_**2 if name == "V" else L_**1.5 * V_**0.5, "k:", label=ref)
        if name == "L":
            a.plot(x, L_ * V_, "k--", lw=0.8, label="L V")
        a.set(xscale="log", yscale="log", xlabel=name, ylabel="P",
              title=f"linear attention, {'L = 8' if name == 'V' else 'V = 4'}")
        a.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "copy_linear_thresholds.png"), dpi=120)
    plt.close(fig)
    out = {"L": Ls.tolist(), "fits": {str(k): v for k, v in fits.items()},
           "P_star_V4": [round(float(p), 2) for p in pd["P_star"][:, list(Vs).index(4)]],
           "first_order_V4": [bool(f > 0.5) for f in pd["first_order"][:, list(Vs).index(4)]],
           "linear": {k: [list(r) for r in v] for k, v in lin.items()}}
    if crit is not None:
        out["critical_point_V4"] = crit._asdict()
    return out


def landscape_figure(path: str, L: int = 32, V: int = 4, lin=(8, 32)) -> dict:
    """``S`` over the order parameters at several ``P``: ``S(c_G) - min`` for softmax around
    ``P*`` (two competing minima) and contours of ``S(a_1, a_G)`` for linear attention."""
    import jax
    import jax.numpy as jnp

    from jaxattn.models.copy import CopyArch
    from jaxattn.plots import plt
    from jaxattn.theory import copy_action as ca
    from jaxattn.theory import copy_phase as cph

    s = cph.theory_summary(CopyArch(L, V))
    on = cph.linear_onsets(CopyArch(*lin, "linear"))
    fig, ax = plt.subplots(1, 4, figsize=(17, 3.9))
    with jax.enable_x64(True):
        h = ca.hyper(CopyArch(L, V))
        c = jnp.linspace(-1.0, 4.0, 600)
        for k, f in enumerate((0.8, 0.95, 1.0, 1.05, 1.25)):
            P = f * s["p_star"]
            y = np.asarray(ca.softmax_action(c, jnp.float64(P), h))
            ax[0].plot(np.asarray(c), y - y.min(), color=f"C{k}", label=f"P = {P:.0f}")
        ax[0].set(ylim=(0, 6), xlabel="c_G", ylabel="S - min S",
                  title=f"softmax L={L}, V={V}: P* = {s['p_star']:.0f}")
        ax[0].legend(fontsize=7)
        hl = ca.hyper(CopyArch(*lin, "linear"))
        a1, aG = jnp.linspace(-0.3, 0.5, 161), jnp.linspace(-0.1, 0.4, 161)
        for a, f in zip(ax[1:], (0.7, 1.5, 5.0)):
            P = jnp.float64(f * on.P_onset)
            Z = np.asarray(jax.vmap(lambda x: jax.vmap(lambda y: ca.linear_action(x, y, P, hl))(aG))(a1))
            m = cph.linear_minimum(P, hl)
            a.contourf(np.asarray(aG), np.asarray(a1), np.log1p(Z - Z.min()), 30, cmap="viridis")
            a.plot([float(m.aG)], [float(m.a1)], "r*", ms=10)
            a.set(xlabel="a_G", ylabel="a_1", title=f"linear L={lin[0]}, V={lin[1]}: P = {float(P):.0f}")
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return {"softmax_p_star": s["p_star"], "linear_onset": on.P_onset}
