"""Copy-head theory (Spec B, sections 3 and 5): the exact action against the reduced one, P* and
the order of the softmax transition, the linear onsets, the theory against Adam and SGLD, CLI."""

import json
import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxattn import copyhead as cp
from jaxattn.copyhead import action, curves, linear, network, profile, softmax, task

EXACT = jax.jit(action.exact_action, static_argnames="arch")
REDUCED = jax.jit(action.reduced_action_of_G, static_argnames="arch")


@partial(jax.jit, static_argnums=(0, 1, 2))
def _stats(P, L, V):
    """Statistics of the first ``P`` sequences of data seed 0 (float64 under ``x64``)."""
    return network.stats(task.one_hot(task.tokens(cp.data.data_key(0), P, L, V), V, jnp.result_type(float)))


@pytest.mark.parametrize("attention,L,V", [("softmax", 32, 4), ("linear", 8, 32)])
def test_reduced_action_matches_exact_action_at_large_P(x64, attention, L, V):
    """(B.3a) on one sampled data set against its data average (B.3b). Tolerance: 1% of S and 3%
    of the difference S(G) - S(G_0) between two logit matrices (the fluctuation corrections are
    O(V^2) against O(P) terms; measured: at most 0.7% and 2.3%)."""
    arch = network.CopyArch(L, V, attention)
    if attention == "softmax":
        Gs = [action.softmax_logits(jnp.float64(c), L) for c in (0.0, 1.0, 2.5, 4.0)]
    else:
        Gs = [L * action.linear_attention_matrix(a1, aG, L) for a1, aG in ((0.01, 0.01), (0.5, 0.1), (0.1, 0.5), (0.0, 1.0))]
    Gs.append(jax.random.normal(jax.random.key(1), (L, L), jnp.float64))
    exact, reduced = EXACT, REDUCED
    for P in (2000, 5000):
        st = _stats(P, L, V)
        e = np.array([float(exact(G, st, arch)) for G in Gs])
        r = np.array([float(reduced(G, jnp.float64(P), arch)) for G in Gs])
        np.testing.assert_allclose(e, r, rtol=0.01)
        de, dr = e[1:] - e[0], r[1:] - r[0]
        assert np.all(np.abs(de - dr) <= 0.03 * np.abs(dr) + 1e-6 * P), (de, dr)
    g = jax.grad(exact)(Gs[-1], st, arch)
    assert g.dtype == jnp.float64 and bool(jnp.all(jnp.isfinite(g)))


def test_order_parameter_actions_are_the_reduced_action_of_their_matrices(x64):
    for arch, (G, val) in [
        (network.CopyArch(12, 3), (action.softmax_logits(jnp.float64(1.7), 12), None)),
        (network.CopyArch(12, 3, "linear"), (12 * action.linear_attention_matrix(0.3, 0.4, 12), None)),
        (network.CopyArch(12, 3, cyclic=False), (action.softmax_logits(jnp.float64(1.7), 12, False), None)),
    ]:
        h = action.hyper(arch, 3.0)
        P = jnp.float64(400.0)
        full = REDUCED(G, P, arch, 3.0)
        ansatz = (jax.jit(action.softmax_action)(jnp.float64(1.7), P, h) if arch.attention == "softmax"
                  else jax.jit(action.linear_action)(jnp.float64(0.3), jnp.float64(0.4), P, h))
        np.testing.assert_allclose(float(full), float(ansatz), rtol=1e-12)
    # N = inf is min_W U: the MAP objective, no Occam term
    arch = network.CopyArch(6, 3)
    st = _stats(50, 6, 3)
    G = jax.random.normal(jax.random.key(0), (6, 6), jnp.float64)
    W = network.optimal_readout(network.attention(G, arch), st, arch)
    np.testing.assert_allclose(float(EXACT(G, st, arch, math.inf)),
                               float(jax.jit(network.loss, static_argnames="arch")(network.CopyParams(G, W), st, arch)), rtol=1e-10)


def test_softmax_p_star_and_order_of_the_transition():
    """Spec B, section 5: P* = 342 (L = 32, V = 4), 439 (V = 2), 377 (V = 8), 873 (L = 64, V = 4);
    a jump in c_G at L = 32, none at L = 8."""
    s = curves.theory_summary(network.CopyArch(32, 4))
    assert abs(s["p_star"] - 342) <= 15, s
    assert s["first_order"] and s["jump"] > 1.0
    assert s["p_spinodal_lo"] < s["p_star"] < s["p_spinodal_hi"]
    assert s["prev_weight_above"] - s["prev_weight_below"] > 0.1
    for (L, V), ref in {(32, 2): 439, (32, 8): 377, (64, 4): 873}.items():
        assert abs(curves.theory_summary(network.CopyArch(L, V))["p_star"] - ref) <= 0.02 * ref
    s8 = curves.theory_summary(network.CopyArch(8, 4))
    assert not s8["first_order"] and s8["jump"] == 0.0 and s8["p_spinodal_lo"] is None
    # continuous at L = 8: on a fine P grid c_G never moves by more than the grid step allows
    c = curves.softmax_curves(network.CopyArch(8, 4), np.geomspace(10, 500, 400))
    assert np.all(c["n_minima"] == 1) and np.max(np.abs(np.diff(c["c_G"]))) < 0.02
    c32 = curves.softmax_curves(network.CopyArch(32, 4), np.geomspace(100, 1000, 400))
    assert np.max(np.diff(c32["c_G"])) > 1.0


def test_linear_onset_and_pooling_before_copying():
    on = linear.linear_onsets(network.CopyArch(8, 32, "linear"))
    assert 900 < on.P_onset < 1800 and on.kind == "copying"
    np.testing.assert_allclose(on.P_copy, on.P_c_closed, rtol=1e-8)  # the spec's closed form
    c = curves.linear_curves(network.CopyArch(8, 32, "linear"), [0.9 * on.P_onset, 1.2 * on.P_onset])
    assert abs(c["aG"][0]) < 1e-6 and c["aG"][1] > 0.05
    # L >> V: pooling switches on first (near L V), copying takes over later (near L^{3/2} V^{1/2})
    s = curves.theory_summary(network.CopyArch(64, 4, "linear"))
    assert s["onset_kind"] == "pooling" and s["p_onset"] < 0.5 * s["p_crossover"]
    assert 0.5 < s["p_onset"] / (64 * 4) < 2 and 0.5 < s["p_crossover"] / (64**1.5 * 2) < 2


def test_theory_against_adam_filtered_to_global_minima():
    """No Occam term (N = inf: min_W U); the lowest-U Adam run per P (random and copy starts)."""
    ds = cp.train(cp.CopyConfig(L=32, V=4, n_steps=2000), P=[200, 1000], seed=[0, 1], init=["random", "copy"])
    best = cp.global_minimum(ds)
    th = curves.softmax_curves(network.CopyArch(32, 4), [200, 1000], math.inf)
    np.testing.assert_allclose(best["prev_weight"].values, th["prev_weight"], atol=0.02)
    np.testing.assert_allclose(best["test_error"].values, th["test_error"], atol=0.02)


@pytest.mark.slow  # 16 s
def test_theory_against_sgld_tempered():
    """N = 20, P = 150 and 1000 (at N = 20: P* = 330, spinodals 310 and 375): posterior means from
    both starts."""
    s = cp.sample(cp.CopyConfig(L=32, V=4), cp.SGLDConfig(N=20.0, n_chains=8, n_steps=2000, burn_in=2000),
                  P=[150, 1000])
    summ = cp.posterior_summary(s)
    assert int(summ["n_diverged"].sum()) == 0
    th = curves.softmax_curves(network.CopyArch(32, 4), [150, 1000], 20.0)
    for start in ("uniform", "copy"):
        np.testing.assert_allclose(summ["mean"].sel(start=start).values, th["prev_weight"], atol=0.03)


@pytest.mark.slow
def test_phase_diagram_in_one_call_matches_pointwise(x64, monkeypatch):
    import equinox as eqx

    base = action.hyper(network.CopyArch(16, 4))
    x = jnp.geomspace(0.2, 5.0, 61)  # a grid size no other test uses: this trace is the first
    Ls, Vs = jnp.array([16.0, 32.0]), jnp.array([4.0, 8.0])
    counted = eqx.debug.assert_max_traces(softmax.softmax_transition, max_traces=None)
    monkeypatch.setattr(softmax, "softmax_transition", counted)
    pd = softmax.softmax_phase_diagram(Ls, Vs, x, base, n_c=512)
    softmax.softmax_phase_diagram(Ls + 1.0, Vs, x, base, n_c=512)  # other values, same shapes: no new trace
    assert eqx.debug.get_num_traces(counted) == 1  # one trace for the whole (L, V) grid
    monkeypatch.undo()
    h = base._replace(L=jnp.float64(32.0), V=jnp.float64(8.0), n_pos=jnp.float64(32.0))
    tr, _ = jax.jit(softmax.softmax_transition, static_argnums=2)(x * softmax.p_star_closed_form(32.0, 8.0), h, 512)
    np.testing.assert_allclose(float(pd.P_star[1, 1]), float(tr.P_star), rtol=1e-9)
    assert pd.P_star.shape == (2, 2) and float(pd.first_order[0, 0]) == 0.0 and float(pd.first_order[1, 0]) == 1.0


def test_x64_stays_local():
    curves.theory_summary(network.CopyArch(8, 4))
    assert not jax.config.jax_enable_x64


def test_bad_input_names_the_parameter():
    for kwargs, name in [(dict(N=-1.0), "N"), (dict(N="x"), "N"), (dict(P=[10, -5]), "P")]:
        with pytest.raises(ValueError, match=name):
            curves.theory_summary(network.CopyArch(8, 4), **kwargs)
    with pytest.raises(ValueError, match="V"):
        curves.theory_summary(network.CopyArch(8, 1))


def test_cli_theory_json_and_errors():
    from click.testing import CliRunner

    from jaxattn.cli import main

    r = CliRunner().invoke(main, ["copy", "theory", "--attention", "softmax", "--L", "32", "--V", "4", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output.strip().splitlines()[-1])
    assert abs(out["p_star"] - 342) <= 15 and out["first_order"] is True
    r = CliRunner().invoke(main, ["copy", "theory", "--attention", "linear", "--L", "8", "--V", "32", "--P", "500,2000",
                                  "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output.strip().splitlines()[-1])
    assert 900 < out["p_onset"] < 1800 and len(out["curves"]["aG"]) == 2
    for args, name in [(["--V", "1"], "V"), (["--N", "0"], "N"), (["--P", "5,-1"], "P")]:
        r = CliRunner().invoke(main, ["copy", "theory", *args, "--json"])
        assert r.exit_code != 0 and name in r.output, r.output


@pytest.mark.slow
def test_softmax_critical_point_ends_the_first_order_line():
    cpnt = softmax.softmax_critical_point(network.CopyArch(32, 4))
    assert 16 < cpnt.L < 20 and cpnt.residual < 1e-8


@pytest.mark.slow  # 10 s: the softmax minima in float64
def test_landscape_theory_profile_has_the_transitions_minima():
    """``profile.theory_profile`` on the previous-token weight: ``copy_strength`` inverts
    ``prev_weight_softmax``, and near ``P*`` (``L = 32``, ``V = 4``) the profile's two local
    minima sit at the weights of ``softmax_minima``'s two branches, within the grid's spacing."""
    import jax

    from jaxattn.copyhead import action
    from jaxattn.copyhead.softmax import softmax_minima

    arch = network.CopyArch(32, 4, "softmax")
    a = np.linspace(0.01, 0.6, 2000)
    with jax.enable_x64(True):
        np.testing.assert_allclose(np.asarray(action.prev_weight_softmax(profile.copy_strength(a, 32), 32)), a, rtol=1e-12)
        m = softmax_minima(jnp.float64(342.0), action.hyper(arch, 1.0))
        want = np.asarray(action.prev_weight_softmax(jnp.stack([m.c_lo, m.c_hi]), 32))
    S = profile.theory_profile(arch, 342.0, 1.0, a)
    assert S.min() == 0.0
    inner = np.flatnonzero((S[1:-1] < S[:-2]) & (S[1:-1] < S[2:])) + 1  # the local minima
    assert len(inner) == 2
    np.testing.assert_allclose(a[inner], want, atol=2 * (a[1] - a[0]))
