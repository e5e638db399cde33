"""Figures of the copy head: Adam runs and SGLD means against ``P``, the softmax phase diagram,
linear attention's thresholds, and the action landscape."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from jaxattn.copyhead.network import CopyArch

if TYPE_CHECKING:
    import xarray as xr
    from matplotlib.figure import Figure


def copy_figure(
    train_ds: xr.Dataset | None = None, sample_ds: xr.Dataset | None = None, path: str | None = None
) -> Figure:
    """Order parameters and errors against ``P``: every Adam run (by initialisation), the
    global minimum, and SGLD posterior means by start (with their Monte Carlo errors).

    Args:
        train_ds: output of :func:`jaxattn.copyhead.train` (``None``: no Adam runs).
        sample_ds: output of :func:`jaxattn.copyhead.sample` (``None``: no SGLD means).
        path: where to save the figure (``None``: not saved, nor closed).

    Returns:
        The matplotlib figure (three panels: previous-token weight, ``a_G``, test error).
    """
    from jaxattn.copyhead.experiments import global_minimum, posterior_summary
    from jaxattn.plots import plt, save

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    panels = (("prev_weight", "previous-token weight"), ("aG", "a_G"), ("test_error", "test error"))
    for ax, (var, label) in zip(axes, panels):
        if train_ds is not None:
            P = train_ds["P"].values
            for j, init in enumerate(train_ds["init"].values.tolist()):
                y = train_ds[var].sel(init=init).values
                for s in range(y.shape[1]):
                    ax.plot(
                        P,
                        y[:, s],
                        ls="none",
                        marker="o^"[j % 2],
                        color=f"C{j}",
                        alpha=0.4,
                        label=f"Adam, {init} init" if s == 0 else None,
                    )
            best = global_minimum(train_ds)
            ax.plot(P, best[var].values, color="k", marker=".", label="global minimum (lowest U)")
        if sample_ds is not None:
            summ = posterior_summary(sample_ds, var)
            for j, st in enumerate(sample_ds["start"].values.tolist()):
                m = summ["mean"].sel(start=st)
                ax.errorbar(
                    sample_ds["P"].values,
                    m.values,
                    yerr=summ["se"].sel(start=st).values,
                    capsize=3,
                    color=f"C{j + 2}",
                    marker="s",
                    label=f"SGLD, {st} start",
                )
        ax.set_xscale("log")
        ax.set_xlabel("P")
        ax.set_ylabel(label)
    axes[0].legend(fontsize=7)
    ds = train_ds if train_ds is not None else sample_ds
    if ds is not None:
        fig.suptitle(f"copy task, {ds.attrs.get('attention')} attention, L={ds.attrs.get('L')}, V={ds.attrs.get('V')}")
    fig.tight_layout()
    if path:
        save(fig, path)
    return fig


V_GRID = (2, 3, 4, 6, 8, 12, 16, 32)


def softmax_phase_data(
    L_max: int = 512, n_L: int = 16, Vs: Sequence[int] = V_GRID, n_P: int = 400, N: float = 1.0
) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray], np.ndarray, dict[int, dict]]:
    """``P*``, spinodals and the jump over ``L`` (geometric from 16 to ``L_max``) x ``Vs`` (one
    compiled call) with fits of ``P*`` at each ``V`` to ``A L ln^2 L`` and to the closed form.

    Args:
        L_max: largest ``L``.
        n_L: number of ``L`` values (before rounding to distinct integers).
        Vs: vocabulary sizes.
        n_P: ``P`` grid points per ``(L, V)`` (0.2 to 5 times the closed-form ``P*``).
        N: inverse temperature.

    Returns:
        ``(Ls, Vs, pd, cf, fits)``: the ``L`` values (nL,), ``Vs`` (nV,), the
            :class:`~jaxattn.copyhead.softmax.SoftmaxTransition` fields as a dict of (nL, nV) arrays,
            the closed-form ``P*`` (nL, nV), and per ``V`` the fit ``A_L_ln2L``, its largest relative
            deviation and the ratios to the closed form (first-order points only).
    """
    import jax
    import jax.numpy as jnp

    from jaxattn.copyhead import action, softmax

    Ls = np.unique(np.round(np.geomspace(16, L_max, n_L)).astype(int))
    with jax.enable_x64(True):
        base = action.hyper(CopyArch(16, 4), N)
        pd = softmax.softmax_phase_diagram(
            jnp.asarray(Ls, float), jnp.asarray(Vs, float), jnp.geomspace(0.2, 5.0, n_P), base
        )
        pd = {k: np.asarray(v) for k, v in pd._asdict().items()}
        cf = np.asarray(softmax.p_star_closed_form(jnp.asarray(Ls, float)[:, None], jnp.asarray(Vs, float)[None, :]))
    fo = pd["first_order"] > 0.5
    fits = {}
    for j, V in enumerate(Vs):
        ok = fo[:, j]
        x = Ls[ok] * np.log(Ls[ok]) ** 2
        A = float(np.sum(x * pd["P_star"][ok, j]) / np.sum(x * x))
        fits[int(V)] = {
            "A_L_ln2L": A,
            "max_rel_dev_L_ln2L": float(np.max(np.abs(A * x / pd["P_star"][ok, j] - 1))),
            "ratio_to_closed_form": [round(float(r), 4) for r in pd["P_star"][ok, j] / cf[ok, j]],
        }
    return Ls, np.asarray(Vs), pd, cf, fits


def linear_threshold_data(N: float = 1.0) -> dict[str, list[tuple]]:
    """Linear onsets and crossovers against ``V`` at ``L = 8`` and against ``L`` at ``V = 4``.

    Args:
        N: inverse temperature.

    Returns:
        ``{"V": rows, "L": rows}``, each row ``(L, V, p_onset, p_crossover, p_copy, onset_kind)``
            from :func:`~jaxattn.copyhead.curves.theory_summary`.
    """
    from jaxattn.copyhead import curves

    out = {}
    for name, grid in (
        ("V", [(8, V) for V in (4, 8, 16, 32, 64, 128)]),
        ("L", [(L, 4) for L in (8, 16, 32, 64, 128, 256)]),
    ):
        rows = []
        for L, V in grid:
            s = curves.theory_summary(CopyArch(L, V, "linear"), N, n_P_linear=80)
            rows.append((L, V, s["p_onset"], s["p_crossover"], s["p_copy"], s["onset_kind"]))
        out[name] = rows
    return out


def phase_figures(out_dir: str, L_max: int = 512, n_P: int = 400, critical: bool = True) -> dict:
    """``copy_phase_diagram.png`` (softmax ``P*(L)`` with spinodals, fits and closed form;
    ``P*/closed form``) and ``copy_linear_thresholds.png`` (onsets and crossovers against ``V``
    and ``L``). Returns the fits.

    Args:
        out_dir: directory of the two figures (created if missing).
        L_max: largest ``L`` of the softmax phase diagram.
        n_P: ``P`` grid points per ``(L, V)``.
        critical: also locate the critical point at ``V = 4``
            (:func:`~jaxattn.copyhead.softmax.softmax_critical_point`).

    Returns:
        JSON-ready dict: ``L``, the ``fits`` per ``V``, ``P_star_V4``, ``first_order_V4``, the
            ``linear`` rows and, with ``critical``, ``critical_point_V4``.
    """
    from jaxattn.copyhead import softmax
    from jaxattn.plots import plt, save

    os.makedirs(out_dir, exist_ok=True)
    Ls, Vs, pd, cf, fits = softmax_phase_data(L_max, n_P=n_P)
    crit = softmax.softmax_critical_point(CopyArch(32, 4)) if critical else None
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
    ax[0].set(
        xscale="log", yscale="log", xlabel="L", ylabel="P*", title="softmax: P* (band: spinodals; dotted: A L ln^2 L)"
    )
    ax[1].set(xscale="log", xlabel="L", ylabel="P* / closed form", title="against the spec's closed form")
    ax[2].set(xscale="log", xlabel="L", ylabel="jump in c_G at P*", title="size of the jump (x: continuous)")
    for a in ax:
        a.legend(fontsize=7)
    fig.tight_layout()
    save(fig, os.path.join(out_dir, "copy_phase_diagram.png"))

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
        a.set(
            xscale="log",
            yscale="log",
            xlabel=name,
            ylabel="P",
            title=f"linear attention, {'L = 8' if name == 'V' else 'V = 4'}",
        )
        a.legend(fontsize=7)
    fig.tight_layout()
    save(fig, os.path.join(out_dir, "copy_linear_thresholds.png"))
    out = {
        "L": Ls.tolist(),
        "fits": {str(k): v for k, v in fits.items()},
        "P_star_V4": [round(float(p), 2) for p in pd["P_star"][:, list(Vs).index(4)]],
        "first_order_V4": [bool(f > 0.5) for f in pd["first_order"][:, list(Vs).index(4)]],
        "linear": {k: [list(r) for r in v] for k, v in lin.items()},
    }
    if crit is not None:
        out["critical_point_V4"] = crit._asdict()
    return out


def landscape_figure(path: str, L: int = 32, V: int = 4, lin: tuple[int, int] = (8, 32)) -> dict:
    """``S`` over the order parameters at several ``P``: ``S(c_G) - min`` for softmax around
    ``P*`` (two competing minima) and contours of ``S(a_1, a_G)`` for linear attention.

    Args:
        path: where to save the figure.
        L: sequence length of the softmax panel.
        V: vocabulary size of the softmax panel.
        lin: ``(L, V)`` of the linear-attention panels (at 0.7, 1.5 and 5 times the onset).

    Returns:
        ``{"softmax_p_star": ..., "linear_onset": ...}``.
    """
    import jax
    import jax.numpy as jnp

    from jaxattn.copyhead import action, curves, linear
    from jaxattn.plots import plt, save

    s = curves.theory_summary(CopyArch(L, V))
    on = linear.linear_onsets(CopyArch(*lin, "linear"))
    fig, ax = plt.subplots(1, 4, figsize=(17, 3.9))
    with jax.enable_x64(True):
        h = action.hyper(CopyArch(L, V))
        c = jnp.linspace(-1.0, 4.0, 600)
        for k, f in enumerate((0.8, 0.95, 1.0, 1.05, 1.25)):
            P = f * s["p_star"]
            y = np.asarray(action.softmax_action(c, jnp.float64(P), h))
            ax[0].plot(np.asarray(c), y - y.min(), color=f"C{k}", label=f"P = {P:.0f}")
        ax[0].set(ylim=(0, 6), xlabel="c_G", ylabel="S - min S", title=f"softmax L={L}, V={V}: P* = {s['p_star']:.0f}")
        ax[0].legend(fontsize=7)
        hl = action.hyper(CopyArch(*lin, "linear"))
        a1, aG = jnp.linspace(-0.3, 0.5, 161), jnp.linspace(-0.1, 0.4, 161)
        for a, f in zip(ax[1:], (0.7, 1.5, 5.0)):
            P = jnp.float64(f * on.P_onset)
            Z = np.asarray(jax.vmap(lambda x, P=P: jax.vmap(lambda y: action.linear_action(x, y, P, hl))(aG))(a1))
            m = linear.linear_minimum(P, hl)
            a.contourf(np.asarray(aG), np.asarray(a1), np.log1p(Z - Z.min()), 30, cmap="viridis")
            a.plot([float(m.aG)], [float(m.a1)], "r*", ms=10)
            a.set(xlabel="a_G", ylabel="a_1", title=f"linear L={lin[0]}, V={lin[1]}: P = {float(P):.0f}")
    fig.tight_layout()
    save(fig, path)
    return {"softmax_p_star": s["p_star"], "linear_onset": on.P_onset}


def sampled_landscape_figure(result, path: str | None = None) -> Figure:
    """The sampled ``F(a)`` (markers with MBAR's errors) over the theory's ``S(a)`` (lines) at
    every ``P`` of :func:`jaxattn.copyhead.landscape.landscape`; beside it, for softmax the
    basins' log-odds against ``P`` with the sampled and the theory's ``P*``, for linear attention
    the minimum's ``|a_G|`` against ``P`` (sampled markers, the theory's line and onset).

    Args:
        result: the scan of :func:`jaxattn.copyhead.landscape.landscape` (a ``SoftmaxScan`` or a
            ``LinearScan``).
        path: where to save the figure (``None``: not saved, nor closed).

    Returns:
        The matplotlib figure (two panels).
    """
    from jaxattn.plots import plt, save

    linear = hasattr(result, "p_onset_theory")
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4.2))
    top = 0.0
    for k, (P, prof) in enumerate(zip(result.P, result.profiles)):
        ok = np.isfinite(prof.F)
        ax.errorbar(prof.a[ok], prof.F[ok], prof.dF[ok], fmt="o", ms=3, color=f"C{k % 10}", label=f"P = {P}")
        ax.plot(prof.a, prof.theory, "-", color=f"C{k % 10}", lw=1)
        top = max(top, float(np.nanpercentile(prof.F[ok], 60)))
    if not linear:
        ax.axvline(result.a_barrier, color="0.6", ls=":", lw=1)
    ax.set(
        xlabel="copy strength |a_G|" if linear else "previous-token weight a",
        ylabel="F(a) - min  (markers: sampled; lines: theory S)",
        ylim=(-1, max(top, 5.0)),
        title=f"N = {result.N:g}",
    )
    ax.legend(fontsize=7)
    if linear:
        bx.errorbar(
            result.P,
            result.a_min_sampled,
            0.5 * result.bin_width,
            fmt="o",
            color="k",
            ms=4,
            label="sampled minimum (± half a bin)",
        )
        bx.plot(result.P, result.a_min_theory, "s--", color="C3", ms=4, mfc="none", label="theory minimum")
        bx.axvline(result.p_onset_theory, color="C3", ls=":", label=f"theory onset P = {result.p_onset_theory:.1f}")
        bx.set(xscale="log", xlabel="P", ylabel="|a_G| at the minimum", title="one minimum, moving continuously")
        bx.legend(fontsize=7)
    else:
        bx.errorbar(
            result.P,
            result.log_ratio,
            result.log_ratio_err,
            fmt="o-",
            color="k",
            ms=4,
            label="sampled ln(p_copy / p_uniform)",
        )
        bx.axhline(0, color="0.6", lw=1)
        bx.axvline(result.p_star_theory, color="C3", ls="--", label=f"theory P* = {result.p_star_theory:.1f}")
        if np.isfinite(result.p_star_sampled):
            bx.axvspan(
                result.p_star_sampled - result.p_star_sampled_err,
                result.p_star_sampled + result.p_star_sampled_err,
                color="C0",
                alpha=0.3,
                label=f"sampled P* = {result.p_star_sampled:.1f} ± {result.p_star_sampled_err:.1f}",
            )
        bx.set(xlabel="P", ylabel="basin log-odds", title="P* from sampling")
        bx.legend(fontsize=7)
    fig.tight_layout()
    if path is not None:
        save(fig, path)
    return fig


def sampled_phase_figure(result, path: str | None = None, extra: dict | None = None) -> str | None:
    """The sampled phase diagram (a :class:`~jaxattn.copyhead.landscape.PhaseMap`):
    ``P*`` against ``N`` for each ``L`` (or against ``L`` for each ``N``, when there are more
    ``L`` than ``N``), sampled with error bars (filled: first order; open: no resolved jump),
    the reduced action's, the Gaussian-corrected and the large-deviation ``P*`` as lines (and any
    ``extra`` line), the sampled critical point as a shaded bracket; beside it the barrier at the
    sampled ``P*`` in ``kT``.

    Args:
        result: the map (:func:`jaxattn.copyhead.landscape.sampled_phase_diagram`).
        path: where to save the PNG (``None``: not drawn).
        extra: more theory lines, name -> ``{(L, N): P*}``.

    Returns:
        ``path``, or ``None`` when not drawn.
    """
    if not path:
        return None
    from jaxattn.plots import plt, save

    rows = result.rows
    Ls = sorted({r.L for r in rows})
    Ns = sorted({r.N for r in rows})
    by_N = len(Ns) >= len(Ls)
    x_key, line_key = ("N", "L") if by_N else ("L", "N")
    lines = Ls if by_N else Ns
    crit = result.critical_N_sampled if by_N else result.critical_L_sampled
    theory = {
        "reduced action": ("-", lambda r: r.theory.p_star_reduced),
        "Gaussian-corrected": ("--", lambda r: r.theory.p_star_corrected),
        "large deviation": ("-.x", lambda r: r.theory.p_star_large_deviation),
        **{
            name: (":+", lambda r, v=values: v.get((r.L, r.N)))  # pyright: ignore[reportUnknownLambdaType]
            for name, values in (extra or {}).items()
        },
    }
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4.4))
    for k, v in enumerate(lines):
        rs = sorted((r for r in rows if getattr(r, line_key) == v), key=lambda r: getattr(r, x_key))
        x = np.array([getattr(r, x_key) for r in rs], float)
        color = f"C{k % 10}"

        def col(get, rs=rs):  # None (a theory without an answer there): NaN
            return np.array([np.nan if get(r) is None else get(r) for r in rs], float)

        y, dy = col(lambda r: r.p_star_sampled), col(lambda r: r.p_star_sampled_err)
        jump = np.array([r.first_order_sampled for r in rs], bool)
        lab = f"{line_key} = {v:g}"
        for mask, fill in ((jump, color), (~jump, "none")):
            if mask.any():
                ax.errorbar(x[mask], y[mask], dy[mask], fmt="o", color=color, mfc=fill, ms=5, capsize=2)
        for name, (style, get) in theory.items():
            line = col(get)
            if np.isfinite(line).any():
                ax.plot(x, line, style, color=color, lw=1, ms=6, label=f"{lab}: {name}")
        b, db = col(lambda r: r.barrier), col(lambda r: r.barrier_err)
        bx.errorbar(x, b, db, fmt="o-", color=color, ms=4, capsize=2, label=lab)
        c = crit.get(f"{v:g}" if not by_N else str(v)) if crit else None
        if c:
            for a in (ax, bx):
                a.axvspan(*c.bracket, color=color, alpha=0.12)
                a.axvline(c.value, color=color, ls=":", lw=1)
    ticks = sorted({float(getattr(r, x_key)) for r in rows})
    for a in (ax, bx):
        a.set_xscale("log")
        a.set_xticks(ticks, [f"{t:g}" for t in ticks])  # the sampled values, not powers of ten
        a.minorticks_off()
    ax.set(
        xlabel=x_key,
        ylabel="P*",
        title=f"P* from sampling (filled: first order), V = {result.V}",
    )
    ax.legend(fontsize=7)
    bx.axhline(0, color="0.6", lw=1)
    bx.set(xlabel=x_key, ylabel="barrier at the sampled P* (kT)", title="the barrier (shaded: critical bracket)")
    bx.legend(fontsize=7)
    fig.tight_layout()
    return save(fig, path)
