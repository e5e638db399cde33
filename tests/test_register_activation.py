"""register_activation: a new activation is usable by name wherever a built-in one is."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxattn.core import attention
from jaxattn.core.attention import attention_weights, prefix_mask, register_activation


def _sigmoid(scores, bias, valid):
    return jax.nn.sigmoid(jnp.where(valid, scores + bias[:, None], 0.0))


@pytest.fixture
def registry(monkeypatch):
    monkeypatch.setattr(attention, "_REGISTERED", {})
    return attention._REGISTERED


def test_registered_activation_weights_masks_and_grads(registry):
    register_activation("test_sigmoid", _sigmoid, aggregation="sum")
    assert "test_sigmoid" in attention.available_activations()
    chi = jax.random.normal(jax.random.PRNGKey(0), (3, 5))
    b = jnp.array([0.1, -0.2, 0.3])
    sigma = attention_weights(chi, b, "test_sigmoid")
    np.testing.assert_allclose(sigma, jax.nn.sigmoid(chi + b[:, None]), rtol=1e-6)
    # masked heads/positions: exactly zero weight and zero gradient; padding changes nothing
    hm, pm = prefix_mask(2, 3), prefix_mask(4, 5)
    padded = attention_weights(chi, b, "test_sigmoid", head_mask=hm, pos_mask=pm)
    np.testing.assert_allclose(padded[:2, :4], attention_weights(chi[:2, :4], b[:2], "test_sigmoid"), rtol=1e-6)
    assert float(jnp.abs(padded[2]).sum() + jnp.abs(padded[:, 4]).sum()) == 0.0
    g = jax.grad(lambda c: attention_weights(c, b, "test_sigmoid", head_mask=hm, pos_mask=pm).sum())(chi)
    assert float(jnp.abs(g[2]).sum() + jnp.abs(g[:, 4]).sum()) == 0.0
    # the default aggregation is the registered one; "mean" divides by the number of real heads
    mean = attention_weights(chi, b, "test_sigmoid", head_mask=hm, pos_mask=pm, aggregation="mean")
    np.testing.assert_allclose(mean, padded / 2, rtol=1e-6)


def test_register_refuses_builtins_and_bad_arguments(registry):
    with pytest.raises(ValueError, match="built-in"):
        register_activation("softmax", _sigmoid)
    with pytest.raises(ValueError, match="aggregation"):
        register_activation("x", _sigmoid, aggregation="max")
    with pytest.raises(TypeError):
        register_activation("x", 3)
    with pytest.raises(ValueError, match="activation must be one of"):
        attention_weights(jnp.zeros((2, 3)), None, "not_registered")
