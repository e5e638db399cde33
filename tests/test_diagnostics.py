"""Convergence diagnostics: split R-hat and ESS against ArviZ's (an independent implementation)
and closed forms, chains in two modes flagged, and sampler output handed to ArviZ."""

import warnings

import numpy as np
import pytest

from jaxattn import copyhead as cp
from jaxattn.core.diagnostics import ess, split_rhat, to_arviz

az = pytest.importorskip("arviz")
warnings.filterwarnings("ignore", category=FutureWarning)


def _ar1(rho, n_chains, n, seed):
    rng = np.random.default_rng(seed)
    e = rng.normal(size=(n_chains, n))
    z = np.zeros((n_chains, n))
    z[:, 0] = e[:, 0] / np.sqrt(1 - rho**2)  # stationary start
    for t in range(1, n):
        z[:, t] = rho * z[:, t - 1] + e[:, t]
    return z


def test_split_rhat_and_ess_against_arviz_and_the_ar1_closed_form():
    x = np.random.default_rng(0).normal(size=(4, 2000))
    # float32 inside blackjax: agreement to 1e-6 relative on R-hat
    assert split_rhat(x) == pytest.approx(float(az.rhat(x, method="split")), rel=1e-6)
    z = _ar1(0.8, 4, 20000, 1)
    assert split_rhat(z) == pytest.approx(float(az.rhat(z, method="split")), rel=1e-6)
    assert ess(z) == pytest.approx(float(az.ess(z, method="mean")), rel=2e-3)  # measured 3e-4
    # AR(1): ESS = n (1 - rho) / (1 + rho) = 8889 for 80000 draws; the estimate's own spread
    # across data sets is about 5% at this length
    assert ess(z) == pytest.approx(4 * 20000 * 0.2 / 1.8, rel=0.1)


def test_chains_in_different_modes_have_rhat_far_above_one():
    rng = np.random.default_rng(2)
    stuck = np.concatenate([rng.normal(size=(2, 1000)), 3.0 + rng.normal(size=(2, 1000))])
    # between-chain variance 9/4 against a within-chain 1: R-hat = sqrt(1 + 9/4 ...) ~ 1.8
    assert split_rhat(stuck) > 1.5
    assert split_rhat(rng.normal(size=(4, 1000))) < 1.01


def test_sgld_dataset_carries_diagnostics_and_converts_to_arviz(tmp_path):
    ds = cp.sample(cp.CopyConfig(L=4, V=2), cp.SGLDConfig(n_chains=4, n_steps=200, burn_in=100, thin=5), P=[8, 32])
    for v in cp.experiments.SAMPLE_OBSERVABLES:
        assert ds[f"rhat_{v}"].dims == ("P", "start") and ds[f"ess_{v}"].dims == ("P", "start")
    x = ds["prev_weight"].sel(P=32, start="copy").values  # (chain, draw)
    assert float(ds["rhat_prev_weight"].sel(P=32, start="copy")) == pytest.approx(
        float(az.rhat(x, method="split")), rel=1e-5)
    idata = to_arviz(ds)
    assert idata.posterior["prev_weight"].dims[:2] == ("chain", "draw")
    assert idata.posterior.sizes["chain"] == 4 and idata.posterior.sizes["draw"] == ds.sizes["draw"]
    assert idata.sample_stats["diverging"].dims[:2] == ("chain", "draw")
    summ = az.summary(idata.posterior.sel(P=32, start="copy"), var_names=["prev_weight"], kind="diagnostics")
    assert np.isfinite(summ["r_hat"].values).all()
    path = tmp_path / "i.nc"
    idata.to_netcdf(str(path))
    assert az.from_netcdf(str(path)).posterior["prev_weight"].shape == idata.posterior["prev_weight"].shape
    with pytest.raises(ValueError, match="'chain' and 'draw'"):
        to_arviz(ds.isel(draw=0))
