"""Convergence diagnostics of MCMC draws, and their hand-over to ArviZ.

:func:`split_rhat` and :func:`ess` are blackjax's estimators (``blackjax.diagnostics``: the
potential scale reduction of Gelman et al., *Bayesian Data Analysis* 3rd ed., eq. 11.4, on chains
split in halves, and the effective sample size of eq. 11.8 with Geyer's initial monotone
sequence), applied over every other dimension of a labelled array. :func:`add_diagnostics` puts
them into a sampler's dataset; :func:`to_arviz` turns the dataset into an ``arviz.InferenceData``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike

if TYPE_CHECKING:
    from arviz import InferenceData


def _split(x: np.ndarray) -> np.ndarray:
    """``(chain, draw, ...)`` -> ``(2 chain, draw // 2, ...)``: each chain's halves as two chains."""
    n = x.shape[1] // 2
    return np.concatenate([x[:, :n], x[:, x.shape[1] - n :]], axis=0)


@functools.lru_cache(maxsize=1)
def _estimators():
    """blackjax's estimators, jitted (one compile per shape, not one per operation)."""
    import jax
    from blackjax.diagnostics import effective_sample_size, potential_scale_reduction

    rhat = jax.jit(lambda x: potential_scale_reduction(x, chain_axis=0, sample_axis=1))
    n_eff = jax.jit(lambda x: effective_sample_size(x, chain_axis=0, sample_axis=1))
    return rhat, n_eff


def split_rhat(x: ArrayLike) -> np.ndarray | float:
    """Split R-hat of draws ``x`` ``(chain, draw, ...)``, over the trailing dimensions: near 1 for
    mixed chains, far above 1 when chains sit in different modes (``NaN`` with fewer than 4 draws
    per chain).

    Args:
        x: Draws of shape ``(chain, draw, ...)`` (array-like; computed in float32).

    Returns:
        A ``float`` for ``x`` of shape ``(chain, draw)``, else an ``np.ndarray`` of the trailing
            shape ``x.shape[2:]``.
    """
    x = np.asarray(x, np.float32)
    if x.ndim < 2 or x.shape[1] < 4:
        return float("nan") if x.ndim <= 2 else np.full(x.shape[2:], np.nan)
    r = np.asarray(_estimators()[0](_split(x)), np.float64)
    return float(r) if r.ndim == 0 else r


def ess(x: ArrayLike) -> np.ndarray | float:
    """Effective sample size of draws ``x`` ``(chain, draw, ...)``, all chains together, over the
    trailing dimensions.

    Args:
        x: Draws of shape ``(chain, draw, ...)`` (array-like; computed in float32).

    Returns:
        A ``float`` for ``x`` of shape ``(chain, draw)``, else an ``np.ndarray`` of the trailing
            shape ``x.shape[2:]``; ``NaN`` with fewer than 4 draws per chain.
    """
    x = np.asarray(x, np.float32)
    if x.ndim < 2 or x.shape[1] < 4:
        return float("nan") if x.ndim <= 2 else np.full(x.shape[2:], np.nan)
    e = np.asarray(_estimators()[1](x), np.float64)
    return float(e) if e.ndim == 0 else e


def add_diagnostics(ds: xr.Dataset, variables: Sequence[str], exclude: str | None = "diverged") -> xr.Dataset:
    """``ds`` with ``rhat_<v>`` and ``ess_<v>`` for each of ``variables`` (which have dimensions
    ``chain`` and ``draw``), over the remaining dimensions; chains flagged in ``exclude`` (a
    boolean over ``chain`` and the other dimensions) are left out.

    Args:
        ds: A sampler's dataset.
        variables: Names of variables of ``ds`` with dimensions ``chain`` and ``draw``.
        exclude: Name of a boolean variable flagging chains to leave out (ignored if ``None`` or
            absent from ``ds``).

    Returns:
        A copy of ``ds`` with ``rhat_<v>`` and ``ess_<v>`` added for each ``v``, over the
            dimensions of ``v`` other than ``chain`` and ``draw``.
    """
    out = ds.copy()
    for v in variables:
        x = ds[v]
        if exclude is not None and exclude in ds:
            x = x.where(~ds[exclude])
        rest = [d for d in x.dims if d not in ("chain", "draw")]
        x = x.transpose("chain", "draw", *rest)
        a = x.values.reshape(x.shape[:2] + (-1,))  # (chain, draw, point)
        ok = np.asarray(np.isfinite(a).all(axis=1))  # (chain, point): chains that did not diverge
        if ok.all():  # the usual case: every point at once
            r, e = split_rhat(a), ess(a)
        else:
            r, e = np.full(a.shape[2], np.nan), np.full(a.shape[2], np.nan)
            for i in range(a.shape[2]):
                if ok[:, i].any():
                    r[i], e[i] = split_rhat(a[ok[:, i], :, i]), ess(a[ok[:, i], :, i])
        shape = x.shape[2:]
        out[f"rhat_{v}"] = (rest, np.reshape(r, shape), {"long_name": f"split R-hat of {v}"})
        out[f"ess_{v}"] = (rest, np.reshape(e, shape), {"long_name": f"effective sample size of {v}"})
    return out


def to_arviz(ds: xr.Dataset, variables: Sequence[str] | None = None) -> InferenceData:
    """An ``arviz.InferenceData`` of a sampler's dataset: a ``posterior`` group of dimensions
    ``(chain, draw, ...)`` holding ``variables`` (default: every variable with both), and a
    ``sample_stats`` group with ``diverging`` ``(chain, draw, ...)`` where the dataset flags
    diverged chains. Needs ``arviz`` (``pip install "jaxattn[arviz]"``).

    Args:
        ds: A sampler's dataset, with dimensions ``chain`` and ``draw``.
        variables: Names of the variables to put in ``posterior`` (default: every variable with
            dimensions ``chain`` and ``draw``).

    Returns:
        The ``arviz.InferenceData``; its ``posterior`` attributes are the ``str``, ``int`` and
            ``float`` attributes of ``ds``.

    Raises:
        ImportError: If ``arviz`` is not installed.
        ValueError: If ``ds`` lacks ``chain`` or ``draw``, or a name in ``variables`` is not in it.
    """
    try:
        import arviz as az
    except ImportError as err:
        raise ImportError("to_arviz needs arviz: pip install 'jaxattn[arviz]'") from err
    if "chain" not in ds.dims or "draw" not in ds.dims:
        raise ValueError(f"a sampler's dataset has dimensions 'chain' and 'draw'; got {tuple(ds.dims)}")
    names = (
        list(variables)
        if variables is not None
        else [k for k, v in ds.data_vars.items() if "chain" in v.dims and "draw" in v.dims]
    )
    missing = [k for k in names if k not in ds]
    if missing:
        raise ValueError(f"no variable {missing[0]!r} in the dataset (has: {', '.join(map(str, ds.data_vars))})")
    post = ds[names]
    post = post.transpose("chain", "draw", *[d for d in post.dims if d not in ("chain", "draw")])
    groups: dict[str, Any] = {"posterior": post}
    if "diverged" in ds:
        div = ds["diverged"].broadcast_like(ds[names[0]]).rename("diverging")
        groups["sample_stats"] = div.transpose("chain", "draw", ...).to_dataset()
    attrs = {k: v for k, v in ds.attrs.items() if isinstance(v, str | int | float)}
    idata = az.InferenceData(**groups)
    idata.posterior.attrs.update(attrs)  # pyright: ignore[reportAttributeAccessIssue]
    return idata
