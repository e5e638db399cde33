"""The copy head's phase diagram from sampling: at every ``(L, N)`` the sampled ``P*``, whether
the posterior jumps there (two basins with a barrier the data resolve), the barrier and the jump
of the previous-token weight, beside the reduced action's and the Gaussian-corrected ``P*``; and
where, along ``N`` or ``L``, the sampled first-order line ends.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import math
import os
from collections.abc import Callable, Sequence

import numpy as np
import xarray as xr

from jaxattn.copyhead import action, fluctuations, network
from jaxattn.copyhead._config import REWEIGHT_SPAN, CopyLandscapeConfig
from jaxattn.copyhead.curves import theory_summary
from jaxattn.copyhead.landscape._experiment import COPY_LANDSCAPE
from jaxattn.copyhead.landscape._profiles import inverse_temperature, sampled_profile, window_diagnostics
from jaxattn.copyhead.landscape._search import _check_sampler, landscape, landscape_of_dataset
from jaxattn.core import checks, precision
from jaxattn.engine import store

ROW_KEYS = (
    "L",
    "V",
    "N",
    "p_star_sampled",
    "p_star_sampled_err",
    "first_order_sampled",
    "barrier",
    "barrier_err",
    "jump_a",
    "jump_a_err",
    "log_ratio_slope",
    "log_ratio_slope_err",
    "P",
    "p_star_reduced",
    "first_order_reduced",
    "p_star_corrected",
    "max_window_rhat",
    "min_window_ess",
    "seconds",
)
"""``ROW_KEYS`` are the fields of one ``(L, N)`` row of :func:`sampled_phase_diagram`."""


_ARCH_KEYS = ("beta", "omega", "sigma_G2", "cyclic")


def _finite(x) -> float | None:
    return float(x) if x is not None and np.isfinite(x) else None


def phase_point(arch: network.CopyArch, N: float, *, progress: bool = False, **kw) -> dict:
    """One point of the sampled phase diagram: :func:`landscape` at ``(arch, N)`` (its ``P``
    scan from the reduced action's ``P*``), the reduced action's ``P*`` and whether it jumps
    there, and the Gaussian-corrected ``P*`` (:func:`~jaxattn.copyhead.fluctuations.p_star_corrected_near`).

    Args:
        arch: the network (softmax attention).
        N: inverse temperature.
        progress: show a progress bar over ``P``.
        **kw: passed to :func:`landscape`.

    Returns:
        A dict with the keys :data:`ROW_KEYS`: ``barrier`` and ``barrier_err`` are the
            profile's largest barrier at the sampled ``P*`` in ``kT``, ``first_order_sampled``
            whether it clears two errors; ``max_window_rhat`` and ``min_window_ess`` the worst
            window over every sampled ``P``; ``None`` for a number that does not exist (no
            crossing, no correction).
    """
    import time

    t0 = time.perf_counter()
    r = landscape(arch, None, N, progress=progress, **kw)
    return _row(arch, N, r, time.perf_counter() - t0)


def _row(arch: network.CopyArch, N: float, r: dict, seconds: float) -> dict:
    """A row (:data:`ROW_KEYS`) from the summary of :func:`landscape` or :func:`landscape_of_dataset`."""
    s = theory_summary(arch, N)
    row = {
        "L": arch.L,
        "V": arch.V,
        "N": float(N),
        "p_star_sampled": _finite(r["p_star_sampled"]),
        "p_star_sampled_err": _finite(r["p_star_sampled_err"]),
        "first_order_sampled": bool(r["first_order_sampled"]),
        "barrier": _finite(r["barrier_at_p_star"]),
        "barrier_err": _finite(r["barrier_at_p_star_err"]),
        "jump_a": _finite(r["jump_a"]),
        "jump_a_err": _finite(r["jump_a_err"]),
        "log_ratio_slope": _finite(r["log_ratio_slope"]),
        "log_ratio_slope_err": _finite(r["log_ratio_slope_err"]),
        "P": [int(p) for p in r["P"]],
        "p_star_reduced": float(s["p_star"]),
        "first_order_reduced": bool(s["first_order"]),
        "p_star_corrected": fluctuations.p_star_corrected_near(arch, N, float(s["p_star"])),
    }
    health = window_diagnostics(r["profiles"])  # over every sampled P: the worst window
    row["max_window_rhat"] = max(health["max_window_rhat"])
    row["min_window_ess"] = min(health["min_window_ess"])
    row["seconds"] = round(seconds, 1)
    return row


def _by_N(ds: xr.Dataset) -> list[tuple[float, xr.Dataset]]:
    """A ``copy_landscape`` dataset split by ``N``, each part with ``P`` as its dimension: ``N``
    fixed, a dimension of its own, or zipped with ``P`` in one dimension."""
    if "N" not in ds.coords:
        return [(inverse_temperature(ds), ds)]
    if "N" in ds.dims:
        return [(float(n), ds.sel(N=n)) for n in ds["N"].values]
    dim = ds["N"].dims[0]
    if ds["P"].dims != (dim,):
        raise ValueError(f"N and P: zip them in one dimension, or make each its own (N is zipped in {dim!r})")
    Ns = np.asarray(ds["N"].values, float)
    return [(float(n), ds.isel({dim: np.flatnonzero(Ns == n)}).swap_dims({dim: "P"})) for n in np.unique(Ns)]


def phase_of_dataset(datasets: xr.Dataset | Sequence[xr.Dataset], n_bins: int = 40) -> dict:
    """The sampled phase diagram from ``copy_landscape`` runs, one per ``L`` (a sweep's store
    read by :func:`jaxattn.engine.load_store`, or :func:`jaxattn.engine.run`'s dataset), each
    over ``N`` and ``P`` (``N`` a grid dimension, or zipped with ``P`` to sample each ``N`` near
    its own ``P*``): a row per ``(L, N)`` from :func:`landscape_of_dataset` on that ``N``'s ``P``
    (no secant refinement: only the sampled ``P``), and the critical points along ``N`` and
    ``L`` (:func:`critical_point`), as :func:`sampled_phase_diagram` gives them.

    Args:
        datasets: one dataset, or one per ``L`` (softmax attention, one ``V``, one data set each).
        n_bins: bins of the profiles.

    Returns:
        ``{"V", "rows", "critical_N_sampled", "critical_L_sampled"}`` as
            :func:`sampled_phase_diagram`; a row's ``seconds`` is the time to read it.

    Raises:
        ValueError: if a dataset is not ``copy_landscape``'s, not softmax attention, of another
            ``V``, or holds two datasets of one ``L``.
    """
    import time

    from jaxattn.engine import config as cfgs

    datasets = [datasets] if isinstance(datasets, xr.Dataset) else list(datasets)
    if not datasets:
        raise ValueError("datasets: give at least one copy_landscape dataset")
    rows = []
    for ds in datasets:
        if ds.attrs.get("experiment") != COPY_LANDSCAPE.name:
            raise ValueError(f"not a copy_landscape dataset (experiment={ds.attrs.get('experiment')!r})")
        arch = cfgs.from_json(CopyLandscapeConfig, ds.attrs["config"]).arch
        if arch.attention != "softmax":
            raise ValueError(f"attention: the phase diagram is softmax attention's, got {arch.attention!r}")
        for N, part in _by_N(ds):
            t0 = time.perf_counter()
            r = landscape_of_dataset(part, n_bins)
            rows.append(_row(arch, N, r, time.perf_counter() - t0))
    Vs = {r["V"] for r in rows}
    if len(Vs) != 1:
        raise ValueError(f"V: one vocabulary at a time, the datasets have {sorted(Vs)}")
    if len({(r["L"], r["N"]) for r in rows}) != len(rows):
        raise ValueError("L: two datasets hold the same (L, N); give one dataset per L")
    rows.sort(key=lambda r: (r["L"], r["N"]))
    return {"V": Vs.pop(), "rows": rows, **_critical_points(rows)}


def critical_point(x: Sequence[float], rows: Sequence[dict]) -> dict | None:
    """Where the sampled first-order line ends along ``x`` (``N`` or ``L``, increasing): the pair
    of neighbouring values where ``first_order_sampled`` turns from false to true, and inside it
    the zero of the criterion's margin ``z = barrier / barrier_err - 2`` interpolated linearly in
    ``ln x`` (``z`` is the number of standard errors by which the barrier clears the two the
    criterion asks, so it changes sign between the two rows).

    Args:
        x: the values, increasing, one per row.
        rows: rows of :func:`phase_point`.

    Returns:
        ``{"value", "bracket"}``, or ``None`` where the rows do not bracket one end: all on one
            side, or more than one change (the line is then not resolved by these values).
    """
    x = [float(v) for v in x]
    if any(b <= a for a, b in zip(x, x[1:])):
        raise ValueError(f"the values must be increasing, got {x}")
    flags = [bool(r["first_order_sampled"]) for r in rows]
    changes = [i for i in range(len(flags) - 1) if flags[i] != flags[i + 1]]
    if len(changes) != 1 or flags[changes[0]]:
        return None
    i = changes[0]

    def margin(r):
        b, e = r["barrier"], r["barrier_err"]
        return (b or 0.0) / e - 2.0 if e else -2.0

    z0, z1 = margin(rows[i]), margin(rows[i + 1])
    lo, hi = x[i], x[i + 1]
    t = min(max(-z0 / (z1 - z0), 0.0), 1.0) if z1 != z0 else 0.5
    value = math.exp(math.log(lo) + t * (math.log(hi) - math.log(lo)))
    return {"value": value, "bracket": [lo, hi]}


def sampled_phase_diagram(
    Ls: Sequence[int],
    Ns: Sequence[float],
    V: int = 4,
    *,
    out: str | None = None,
    progress: bool = False,
    on_row: Callable[[dict], None] | None = None,
    **kw,
) -> dict:
    """The sampled phase diagram over ``Ls x Ns`` at vocabulary ``V`` (softmax attention): a
    :func:`phase_point` per ``(L, N)``, and per ``L`` the sampled critical ``N``, per ``N`` the
    sampled critical ``L`` (:func:`critical_point`) where the values bracket one.

    With ``out``, every finished row is written to ``out/rows/L{L}_N{N}.json`` as soon as it is
    done and read back instead of computed on the next call with the same settings, so a killed
    run resumes where it stopped (a row of other sampler settings is an error, not reused).

    Args:
        Ls: sequence lengths (each ``>= 2``).
        Ns: inverse temperatures (each ``> 0``).
        V: vocabulary size.
        out: a folder for the rows (``None``: keep nothing).
        progress: show a progress bar over each point's ``P``.
        on_row: called with each row when it is done (computed or read back).
        **kw: passed to :func:`landscape` (sampler settings, ``data_seed``, ``n_chains``, ``seed``).

    Returns:
        ``{"rows": [...], "critical_N_sampled": {L: ...}, "critical_L_sampled": {N: ...}}``,
            rows ordered by ``L`` then ``N``; a critical value is ``{"value", "bracket"}`` or
            ``None`` (not bracketed).

    Raises:
        ValueError: naming ``L``, ``N`` or ``V`` when a value is out of range, before any work.
    """
    Ls = sorted({int(L) for L in Ls})
    if not Ls or Ls[0] < 2:
        raise ValueError(f"L must be a list of integers >= 2, got {checks.plain(list(Ls))}")
    if int(V) < 2:
        raise ValueError(f"V must be >= 2, got {checks.plain(V)}")
    Ns = sorted({float(action.check_N(N)) for N in Ns})
    if not Ns:
        raise ValueError("N must be a non-empty list")
    arch_kw = {k: kw.pop(k) for k in _ARCH_KEYS if k in kw}
    archs = {L: network.CopyArch(L, int(V), "softmax", **arch_kw).validate() for L in Ls}
    for N in Ns:  # every bad setting named before any work
        _check_sampler(archs[Ls[0]], N, kw)
    settings = _settings(arch_kw, kw)
    rows = []
    for L, arch in archs.items():
        for N in Ns:
            path = os.path.join(out, "rows", f"L{L}_N{N:g}.json") if out else None
            row = _read_row(path, settings)
            if row is None:
                row = phase_point(arch, N, progress=progress, **kw)
                if path:
                    _write_row(path, row, settings)
            rows.append(row)
            if on_row:
                on_row(row)
    return {"V": int(V), "rows": rows, **_critical_points(rows)}


def _critical_points(rows: list[dict]) -> dict:
    """``critical_N_sampled`` per ``L`` and ``critical_L_sampled`` per ``N`` of a set of rows
    (:func:`critical_point` along each line; empty where only one value of the other exists)."""
    Ls, Ns = sorted({r["L"] for r in rows}), sorted({r["N"] for r in rows})

    def line(rs, x):
        rs = sorted(rs, key=lambda r: r[x])
        return critical_point([r[x] for r in rs], rs) if len(rs) > 1 else None

    return {
        "critical_N_sampled": {str(L): line([r for r in rows if r["L"] == L], "N") for L in Ls} if len(Ns) > 1 else {},
        "critical_L_sampled": {f"{N:g}": line([r for r in rows if r["N"] == N], "L") for N in Ns}
        if len(Ls) > 1
        else {},
    }


def _settings(arch_kw: dict, kw: dict) -> dict:
    """Everything a row depends on besides ``(L, V, N)``, defaults filled in, so that the same
    run from Python or the command line (which passes every default) finds its rows."""
    base = {k: p.default for k, p in inspect.signature(sampled_profile).parameters.items() if p.kind is p.KEYWORD_ONLY}
    base.update(reweight_span=REWEIGHT_SPAN, max_extend=inspect.signature(landscape).parameters["max_extend"].default)
    base.update({f.name: f.default for f in dataclasses.fields(network.CopyArch) if f.name in _ARCH_KEYS})
    # rows sampled before matmul_precision existed hold none: its default is kept as its absence
    settings = precision.without_default_matmul({**base, **arch_kw, **kw})
    return json.loads(json.dumps(settings, default=str))


def _read_row(path: str | None, settings: dict) -> dict | None:
    if not path or not os.path.exists(path):
        return None
    saved = store.read_json(path)
    if saved.get("settings") != settings:
        raise ValueError(
            f"{path} was sampled with other settings ({saved.get('settings')}, now {settings}): "
            "use another folder, or remove it"
        )
    return saved["row"]


def _write_row(path: str, row: dict, settings: dict) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    store.write_json(path, {"settings": settings, "row": row})  # atomic: a kill leaves it whole or absent
