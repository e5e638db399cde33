"""Precision: the theory enables float64 itself; float64 on a slow device warns once, naming the
way out, and never on a CPU; the Bayes risk to +-0.001 against its reference values."""

import types
import warnings

import jax
import numpy as np
import pytest

from jaxattn.core import precision
from jaxattn.slm.bayes import bayes_risk
from jaxattn.slm.priors import onehot


def _dev(platform, kind):
    return types.SimpleNamespace(platform=platform, device_kind=kind)


def test_slow_float64_devices_by_kind():
    assert precision.slow_float64(_dev("gpu", "Tesla T4")) and precision.slow_float64(_dev("gpu", "NVIDIA L4"))
    assert precision.slow_float64(_dev("tpu", "TPU v4"))
    assert not precision.slow_float64(_dev("gpu", "NVIDIA A100-SXM4-40GB"))
    assert not precision.slow_float64(_dev("gpu", "NVIDIA H200"))
    assert not precision.slow_float64(jax.devices("cpu")[0])


def test_the_warning_fires_once_on_a_slow_device_and_never_on_the_cpu(monkeypatch):
    monkeypatch.setattr(precision, "_WARNED", set())
    t4 = _dev("gpu", "Tesla T4")
    with pytest.warns(precision.Float64Warning, match=r"Tesla T4.*1/16 to 1/64.*JAX_PLATFORMS=cpu"):
        with precision.float64(t4):
            assert jax.config.jax_enable_x64
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a second warning would raise
        with precision.float64(t4):
            pass
        with precision.float64(jax.devices("cpu")[0]):
            pass
    assert not jax.config.jax_enable_x64  # the block was local


def test_the_bayes_risk_runs_in_float64_whatever_the_caller_set():
    prior = onehot(2, 9.0)
    assert not jax.config.jax_enable_x64
    plain = bayes_risk(prior, 4, n=20_000, chunk=10_000)
    with jax.enable_x64(True):
        x64 = bayes_risk(prior, 4, n=20_000, chunk=10_000)
    assert plain == x64  # the same float64 computation, bit for bit


@pytest.mark.slow  # 2 million draws per point, ~15 s in all
@pytest.mark.parametrize("nu, expected", [(1, 0.6418), (4, 0.3430), (9, 0.1037), (16, 0.0177), (25, 0.0018)])
def test_bayes_risk_onehot_F2_L4_within_a_thousandth(nu, expected):
    r = bayes_risk(onehot(2, float(nu)), 4, n=2_000_000)
    assert 3 * r.se_p_eps < 0.0009  # enough draws for the +-0.001 band (the reference is rounded to 5e-5)
    assert r.risk == pytest.approx(expected, abs=0.001)
    assert r.risk_nishimori == pytest.approx(expected, abs=0.001)  # the Nishimori twin too


@pytest.mark.slow  # 18 s: two compiles of the ODE grid
def test_ode_computes_in_float64_from_a_float32_caller():
    """``slm.integrate`` called with x64 off, from float32 starts, returns float64 results equal to
    those of a float64 caller (the theory switches float64 on itself)."""
    from jaxattn import slm
    from jaxattn.slm import ode, priors

    cfg = slm.SLMODEConfig(D=100, prior=priors.onehot(2, 4.0), times=(0.0, 1.0, 3.0), n_bank=200)
    assert not jax.config.jax_enable_x64
    y0 = ode.random_initial_conditions(jax.random.key(1), 2, 2, D=100, n=2)
    assert y0.M.dtype == np.float32  # as a float32 caller makes them
    got = slm.integrate(cfg, start=y0, seed=[0, 1])
    assert got["M"].dtype == np.float64 and got["risk"].dtype == np.float64
    with jax.enable_x64(True):
        want = slm.integrate(cfg, start=y0, seed=[0, 1])
    for k in ("M", "Q", "b", "risk"):
        np.testing.assert_array_equal(got[k].values, want[k].values)
    assert not jax.config.jax_enable_x64  # and the caller's setting is left as it was
