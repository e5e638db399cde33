"""Data of the single-location model with a multi-index latent (Spec A, section 1).

One sample: a location ``eps ~ Unif{0..L-1}``, a latent ``theta ~ P_theta`` on ``R^F``, noise
tokens ``x_l ~ N(0, I_D)`` for ``l != eps`` and the relevant token
``x_eps = xi + sum_f theta_f s_f / sqrt(D)``, so that ``x_eps . s_f / sqrt(D) ~ N(theta_f, 1)``.
The target is the relevant token itself, ``y = x_eps``.

Sampling is split in two so that grids can share one data stream (common random numbers):
:func:`draw` makes the random numbers, which do not depend on ``L`` (up to its padded maximum),
on the signal strength or on the model; :func:`assemble` turns them into ``(X, eps, theta)`` for
one grid point. Token ``l`` of a sample is drawn from its own key ``fold_in(key, l)``, so padding
``L`` to a larger maximum does not change the tokens of the real positions.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int, PRNGKeyArray

from jaxattn.core import checks
from jaxattn.slm.priors import Prior


class Draw(NamedTuple):
    """The random numbers of one sample, before a grid point turns them into data."""

    noise: Float[Array, "L D"]  # xi_l for every (padded) position
    u: Float[Array, ""]  # uniform in [0, 1): the location is floor(u L)
    theta: Float[Array, " F"]  # a draw of P_theta at unit signal strength


class Sample(NamedTuple):
    X: Float[Array, "L D"]
    eps: Int[Array, ""]
    theta: Float[Array, " F"]


def check_dims(D: int, L: int, F: int) -> tuple[int, int, int]:
    """Validate the dimensions (``L >= 2``, ``D >= F >= 1``)."""
    L = checks.integer("L", L, 2)
    F = checks.integer("F", F, 1)
    D = checks.integer("D", D, 1)
    if D < F:
        raise ValueError(f"D must be >= F (the directions are orthogonal in R^D), got D={D}, F={F}")
    return D, L, F


def latent_directions(key: PRNGKeyArray, D: int, F: int, dtype=jnp.float32) -> Float[Array, "F D"]:
    """``F`` orthogonal directions ``s_f`` in ``R^D`` with ``|s_f|^2 = D``: an orthonormalised
    Gaussian draw scaled by ``sqrt(D)``."""
    D = checks.integer("D", D, 1)
    F = checks.integer("F", F, 1)
    if D < F:
        raise ValueError(f"D must be >= F, got D={D}, F={F}")
    q, _ = jnp.linalg.qr(jax.random.normal(key, (D, F), dtype=dtype))
    return (q.T * jnp.sqrt(D)).astype(dtype)


def draw(key: PRNGKeyArray, prior: Prior, L_max: int, D: int, dtype=jnp.float32) -> Draw:
    """The random numbers of one sample, with ``L_max`` token slots."""
    k_tok, k_u, k_theta = jax.random.split(key, 3)
    noise = jax.vmap(lambda i: jax.random.normal(jax.random.fold_in(k_tok, i), (D,), dtype))(jnp.arange(L_max))
    u = jax.random.uniform(k_u, (), dtype)
    return Draw(noise, u, prior.sample(k_theta).astype(dtype))


def location(u: Float[Array, ""], L: Int[Array, ""]) -> Int[Array, ""]:
    """``eps = floor(u L)``: uniform in ``0..L-1`` for ``u`` uniform in ``[0, 1)``."""
    return jnp.minimum(jnp.floor(u * L).astype(jnp.int32), L - 1)


def assemble(d: Draw, directions: Float[Array, "F D"], L: Int[Array, ""], signal: Float[Array, ""] = 1.0) -> Sample:
    """The sample of one grid point: sequence length ``L`` (positions ``>= L`` are padding, to be
    masked), latent ``signal * theta``."""
    D = d.noise.shape[-1]
    eps = location(d.u, L)
    theta = signal * d.theta
    spike = (theta @ directions) / jnp.sqrt(jnp.asarray(D, d.noise.dtype))
    return Sample(d.noise.at[eps].add(spike), eps, theta)


def sample(
    key: PRNGKeyArray,
    directions: Float[Array, "F D"],
    prior: Prior,
    L: int,
    *,
    L_max: int | None = None,
    signal: float = 1.0,
) -> Sample:
    """One sample ``(X, eps, theta)`` of the single-location model; the target is ``X[eps]``."""
    F, D = directions.shape
    L_max = L if L_max is None else L_max
    d = draw(key, prior, L_max, D, directions.dtype)
    return assemble(d, directions, jnp.asarray(L), signal)
