"""The flax.nnx adapter: the project's activations inside flax models (extra ``flax``)."""

import numpy as np
import pytest

nnx = pytest.importorskip("flax.nnx")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import optax  # noqa: E402

from jaxattn.contrib.flax_nnx import MultiHeadAttention  # noqa: E402
from jaxattn.core.attention import ACTIVATIONS  # noqa: E402
from jaxattn.slm import (
    network,  # noqa: E402
    priors,  # noqa: E402
)
from jaxattn.slm import task as slm  # noqa: E402


@pytest.mark.slow  # moved out of the default run to keep it under 10 minutes; CI runs it
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_layer_is_the_single_location_network(activation):
    """With its weights set from a MultiHead (query = the keys k_h, key and value projections the
    identity per head, output = sum over heads), the layer computes ``multihead.predict``."""
    H, D, L = 3, 16, 5
    key = jax.random.PRNGKey(1)
    params = network.MultiHead(jax.random.normal(key, (H, D)), jnp.array([0.3, -0.5, 0.1]))
    dirs = slm.latent_directions(jax.random.PRNGKey(2), D, 2)
    X = jax.vmap(lambda k: slm.sample(k, dirs, priors.onehot(2, 4.0), L).X)(jax.random.split(key, 4))

    layer = MultiHeadAttention(H, D, qkv_features=H * D, activation=activation, use_bias=False,
                               rngs=nnx.Rngs(0))
    eye = jnp.broadcast_to(jnp.eye(D)[:, None, :], (D, H, D))
    layer.query.kernel[...] = jnp.zeros((D, H, D)).at[0].set(params.keys)  # e_0 -> q_h = k_h
    layer.key.kernel[...] = eye * jnp.sqrt(D / D)  # chi = k_h . x_l / sqrt(head_dim = D)
    layer.value.kernel[...] = eye
    layer.out.kernel[...] = jnp.broadcast_to(jnp.eye(D), (H, D, D))
    layer.head_bias[...] = params.bias

    e0 = jnp.zeros((X.shape[0], 1, D)).at[..., 0].set(1.0)
    got = layer(e0, X)[:, 0]
    want = jax.vmap(lambda x: network.predict(params, x, network.Arch(activation)))(X)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


def test_softmax_sum_matches_flax_multihead_attention():
    """softmax with heads summed is standard attention: same output as flax's own layer on the
    same weights, with and without a causal mask."""
    B, Lq, D, H = 2, 6, 12, 3
    ref = nnx.MultiHeadAttention(H, D, decode=False, rngs=nnx.Rngs(0))
    ours = MultiHeadAttention(H, D, activation="softmax", aggregation="sum", rngs=nnx.Rngs(1))
    for name in ("query", "key", "value", "out"):
        getattr(ours, name).kernel[...] = getattr(ref, name).kernel[...]
        getattr(ours, name).bias[...] = jax.random.normal(jax.random.PRNGKey(len(name)), getattr(ref, name).bias.shape)
        getattr(ref, name).bias[...] = getattr(ours, name).bias[...]
    x = jax.random.normal(jax.random.PRNGKey(3), (B, Lq, D))
    np.testing.assert_allclose(ours(x), ref(x), rtol=1e-5, atol=1e-5)
    causal = nnx.make_causal_mask(jnp.ones((B, Lq)))
    np.testing.assert_allclose(ours(x, causal=True), ref(x, mask=causal), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("activation", ["softmax1", "bayes_softmax"])
def test_causal_mask_ignores_future_tokens(activation):
    layer = MultiHeadAttention(2, 8, activation=activation, rngs=nnx.Rngs(0))
    x = jax.random.normal(jax.random.PRNGKey(0), (1, 5, 8))
    y = x.at[:, 3:].set(100.0)
    np.testing.assert_allclose(layer(x, causal=True)[:, :3], layer(y, causal=True)[:, :3], rtol=1e-5)


class TinyTransformer(nnx.Module):
    """Embedding, one pre-norm attention block with an MLP, a linear read-out."""

    def __init__(self, vocab, d, H, activation, rngs):
        self.embed = nnx.Embed(vocab, d, rngs=rngs)
        self.pos = nnx.Param(0.1 * jax.random.normal(rngs.params(), (16, d)))
        self.ln1, self.ln2 = nnx.LayerNorm(d, rngs=rngs), nnx.LayerNorm(d, rngs=rngs)
        self.attn = MultiHeadAttention(H, d, activation=activation, rngs=rngs)
        self.mlp = nnx.Sequential(nnx.Linear(d, 2 * d, rngs=rngs), nnx.gelu, nnx.Linear(2 * d, d, rngs=rngs))
        self.head = nnx.Linear(d, vocab, rngs=rngs)

    def __call__(self, tokens):
        h = self.embed(tokens) + self.pos[: tokens.shape[-1]]
        h = h + self.attn(self.ln1(h), causal=True)
        h = h + self.mlp(self.ln2(h))
        return self.head(h)


@pytest.mark.parametrize("activation", ["bayes_softmax"])
def test_tiny_transformer_trains(activation):
    """Next-token prediction of sequences that repeat their first half: only attention can
    solve the second half, so the loss falls only if the layer learns to attend."""
    vocab, half, B = 8, 4, 64
    model = TinyTransformer(vocab, 32, 2, activation, nnx.Rngs(0))
    opt = nnx.Optimizer(model, optax.adam(3e-3), wrt=nnx.Param)

    def batch(key):
        first = jax.random.randint(key, (B, half), 0, vocab)
        return jnp.concatenate([first, first], axis=1)

    def loss_fn(model, seq):
        logits = model(seq[:, :-1])[:, half - 1:]  # predict the repeated half
        return optax.softmax_cross_entropy_with_integer_labels(logits, seq[:, half:]).mean()

    @nnx.jit
    def step(model, opt, seq):
        loss, grads = nnx.value_and_grad(loss_fn)(model, seq)
        opt.update(model, grads)
        return loss

    losses = [float(step(model, opt, batch(jax.random.PRNGKey(i)))) for i in range(150)]
    first, last = np.mean(losses[:10]), np.mean(losses[-10:])
    assert np.isfinite(losses).all()
    assert last < 0.5 * first, (first, last)
