"""Invariants of the shared attention activations (Spec A, section 2)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxattn.core.attention import ACTIVATIONS, attention_weights, prefix_mask


def scores(seed=0, H=3, L=5, scale=2.0):
    k1, k2 = jax.random.split(jax.random.key(seed))
    return scale * jax.random.normal(k1, (H, L)), jax.random.normal(k2, (H,))


def test_softmax_rows_sum_to_one_over_H():
    chi, b = scores()
    s = attention_weights(chi, b, "softmax")
    np.testing.assert_allclose(s.sum(axis=1), 1 / 3, rtol=1e-6)
    # the bias cancels
    np.testing.assert_allclose(attention_weights(chi, 5 * b, "softmax"), s, rtol=1e-6)


def test_softmax_matches_the_explicit_per_head_formula_with_padding():
    """sigma[h, l] = exp(chi[h, l]) / sum_{l' real} exp(chi[h, l']) / H_real on real heads and
    positions, 0 elsewhere (heads averaged), written out in float64 NumPy."""
    chi, b = scores(seed=3, H=4, L=6)
    hm, pm = prefix_mask(3, 4), prefix_mask(5, 6)
    got = np.asarray(attention_weights(chi, b, "softmax", head_mask=hm, pos_mask=pm))
    c = np.asarray(chi, np.float64)
    want = np.zeros((4, 6))
    for h in range(3):
        e = np.exp(c[h, :5] - c[h, :5].max())
        want[h, :5] = e / e.sum() / 3
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-9)


def test_bayes_softmax_sums_to_one_over_heads_and_positions():
    chi, b = scores()
    s = attention_weights(chi, b, "bayes_softmax")
    np.testing.assert_allclose(s.sum(), 1.0, rtol=1e-6)
    # it is one softmax over the flattened (head, position) logits
    np.testing.assert_allclose(s.ravel(), jax.nn.softmax((chi + b[:, None]).ravel()), rtol=1e-5)


def test_softmax1_heads_sum_below_one_and_match_definition():
    chi, b = scores()
    s = attention_weights(chi, b, "softmax1")
    assert np.all(s.sum(axis=1) < 1.0)
    e = np.exp(np.asarray(chi + b[:, None], float))
    np.testing.assert_allclose(s, e / (1 + e.sum(axis=1, keepdims=True)), rtol=1e-5)


def test_linear_is_chi_over_HL_and_aggregation_option():
    chi, b = scores()
    np.testing.assert_allclose(attention_weights(chi, b, "linear"), chi / 15, rtol=1e-6)
    np.testing.assert_allclose(attention_weights(chi, b, "linear", aggregation="sum"), chi / 5, rtol=1e-6)
    s = attention_weights(chi, b, "softmax", aggregation="sum")
    np.testing.assert_allclose(s.sum(axis=1), 1.0, rtol=1e-6)


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_masked_entries_are_zero_and_padding_is_exact(activation):
    chi, b = scores(H=4, L=6)
    hm, pm = prefix_mask(3, 4), prefix_mask(5, 6)
    s = attention_weights(chi, b, activation, head_mask=hm, pos_mask=pm)
    assert np.all(s[3] == 0) and np.all(s[:, 5] == 0)
    # the padded model computes exactly what the small model computes
    small = attention_weights(chi[:3, :5], b[:3], activation)
    np.testing.assert_allclose(s[:3, :5], small, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_masked_entries_get_no_gradient(activation):
    chi, b = scores(H=4, L=6)
    hm, pm = prefix_mask(3, 4), prefix_mask(5, 6)
    target = jnp.arange(6.0)

    def f(chi, b):
        return jnp.sum(attention_weights(chi, b, activation, head_mask=hm, pos_mask=pm).sum(0) * target)

    gc, gb = jax.grad(f, argnums=(0, 1))(chi, b)
    assert np.all(gc[3] == 0) and np.all(gc[:, 5] == 0) and gb[3] == 0
    # even if the padded entries hold non-finite garbage
    chi_bad = chi.at[3].set(jnp.nan).at[:, 5].set(jnp.inf)
    gc2 = jax.grad(f)(chi_bad, b)
    assert np.all(np.isfinite(gc2))


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_extreme_scores_have_finite_weights_and_gradients(activation):
    chi = jnp.array([[1e4, -1e4, 0.0], [-1e4, -1e4, -1e4]])
    b = jnp.array([0.0, 1e4])

    def f(chi, b):
        return jnp.sum(attention_weights(chi, b, activation) ** 2)

    s = attention_weights(chi, b, activation)
    g = jax.grad(f, argnums=(0, 1))(chi, b)
    assert np.all(np.isfinite(s))
    assert all(np.all(np.isfinite(x)) for x in g)


def test_vmap_over_examples_matches_loop():
    chi = jax.random.normal(jax.random.key(3), (7, 2, 4))
    b = jnp.zeros(2)
    batched = jax.vmap(lambda c: attention_weights(c, b, "bayes_softmax"))(chi)
    for i in range(7):
        np.testing.assert_allclose(batched[i], attention_weights(chi[i], b, "bayes_softmax"), rtol=1e-6)


def test_bad_activation_names_the_parameter():
    chi, b = scores()
    with pytest.raises(ValueError, match="activation"):
        attention_weights(chi, b, "relu")
    with pytest.raises(ValueError, match="aggregation"):
        attention_weights(chi, b, "softmax", aggregation="max")


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=25, deadline=None)
@given(
    H=st.integers(1, 4), L=st.integers(2, 6), n_heads=st.integers(1, 4), n_pos=st.integers(1, 6),
    scale=st.floats(0.0, 50.0), seed=st.integers(0, 2**16),
)
def test_normalisation_invariants_for_any_shape_and_padding(H, L, n_heads, n_pos, scale, seed):
    """Property test: with any number of real heads and positions, softmax rows sum to 1/H_real,
    Bayes-softmax sums to 1, softmax-1 heads sum to less than 1, and padded entries are zero."""
    n_heads, n_pos = min(n_heads, H), min(n_pos, L)
    chi, b = scores(seed, H, L, scale)
    hm, pm = prefix_mask(n_heads, H), prefix_mask(n_pos, L)
    w = {a: np.asarray(attention_weights(chi, b, a, head_mask=hm, pos_mask=pm), float)
         for a in ("softmax", "softmax1", "bayes_softmax")}
    np.testing.assert_allclose(w["softmax"][:n_heads].sum(1), 1.0 / n_heads, rtol=1e-5)
    np.testing.assert_allclose(w["bayes_softmax"].sum(), 1.0, rtol=1e-5)
    assert np.all(w["softmax1"][:n_heads].sum(1) <= 1.0 + 1e-6)
    for a in w:
        assert np.all(w[a][n_heads:] == 0) and np.all(w[a][:, n_pos:] == 0) and np.all(w[a] >= 0)
