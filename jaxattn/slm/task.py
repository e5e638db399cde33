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

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import DTypeLike
from jaxtyping import Array, Float, Int, PRNGKeyArray

from jaxattn.core import checks, precision
from jaxattn.slm.priors import Prior


class Draw(NamedTuple):
    """The random numbers of one sample, before a grid point turns them into data (:func:`assemble`).

    Attributes:
        noise: the Gaussian tokens ``xi_l ~ N(0, I_D)`` of every (padded) position, shape ``(L, D)``.
        u: uniform in ``[0, 1)``, shape ``()``; the location is ``floor(u L)``.
        theta: a draw of ``P_theta`` at unit signal strength, shape ``(F,)``.
    """

    noise: Float[Array, "L D"]  # xi_l for every (padded) position
    u: Float[Array, ""]  # uniform in [0, 1): the location is floor(u L)
    theta: Float[Array, " F"]  # a draw of P_theta at unit signal strength


class Sample(NamedTuple):
    """One sample of the single-location model (Spec A, section 1); the target is ``y = X[eps]``.

    Attributes:
        X: the tokens, shape ``(L, D)``: ``x_l ~ N(0, I_D)``, plus the spike
            ``sum_f theta_f s_f / sqrt(D)`` at ``l = eps``.
        eps: the location of the relevant token, an integer scalar.
        theta: the latent (at the sample's signal strength), shape ``(F,)``.
    """

    X: Float[Array, "L D"]
    eps: Int[Array, ""]
    theta: Float[Array, " F"]


def check_dims(D: int, L: int, F: int) -> tuple[int, int, int]:
    """Validate the dimensions (``L >= 2``, ``D >= F >= 1``).

    Args:
        D: embedding dimension.
        L: sequence length.
        F: number of latent directions.

    Returns:
        ``(D, L, F)`` as Python ints.

    Raises:
        ValueError: naming the dimension that is out of range.
    """
    L = checks.integer("L", L, 2)
    F = checks.integer("F", F, 1)
    D = checks.integer("D", D, 1)
    if D < F:
        raise ValueError(f"D must be >= F (the directions are orthogonal in R^D), got D={D}, F={F}")
    return D, L, F


def latent_directions(key: PRNGKeyArray, D: int, F: int, dtype: DTypeLike = jnp.float32) -> Float[Array, "F D"]:
    """``F`` orthogonal directions ``s_f`` in ``R^D`` with ``|s_f|^2 = D``: an orthonormalised
    Gaussian draw scaled by ``sqrt(D)`` (Spec A, section 1).

    Args:
        key: PRNG key of the Gaussian draw.
        D: embedding dimension (``>= F``).
        F: number of directions.
        dtype: floating dtype of the result.

    Returns:
        The directions ``s_f`` as rows, shape ``(F, D)``.
    """
    D = checks.integer("D", D, 1)
    F = checks.integer("F", F, 1)
    if D < F:
        raise ValueError(f"D must be >= F, got D={D}, F={F}")
    return _orthonormal_rows(key, D, F, jnp.dtype(dtype))


@functools.partial(jax.jit, static_argnums=(1, 2, 3))
def _orthonormal_rows(key: PRNGKeyArray, D: int, F: int, dtype) -> Float[Array, "F D"]:
    # one program (kept by the compilation cache) instead of a dispatch per operation: the main
    # job's start; the same bits as the operations one by one
    q, _ = jnp.linalg.qr(jax.random.normal(key, (D, F), dtype=dtype))
    return (q.T * jnp.sqrt(D)).astype(dtype)


def draw(key: PRNGKeyArray, prior: Prior, L_max: int, D: int, dtype: DTypeLike = jnp.float32) -> Draw:
    """The random numbers of one sample, with ``L_max`` token slots; token ``l`` is drawn from
    ``fold_in(key, l)``.

    Args:
        key: PRNG key of the sample.
        prior: the latent prior ``P_theta`` (at unit signal strength).
        L_max: number of token slots (the largest sequence length of a grid).
        D: embedding dimension.
        dtype: floating dtype of the draws.

    Returns:
        A :class:`Draw`: ``noise`` ``(L_max, D)``, ``u`` ``()``, ``theta`` ``(F,)``.
    """
    k_tok, k_u, k_theta = jax.random.split(key, 3)
    noise = jax.vmap(lambda i: jax.random.normal(jax.random.fold_in(k_tok, i), (D,), dtype))(jnp.arange(L_max))
    u = jax.random.uniform(k_u, (), dtype)
    return Draw(noise, u, prior.sample(k_theta).astype(dtype))


def location(u: Float[Array, ""], L: Int[Array, ""]) -> Int[Array, ""]:
    """``eps = floor(u L)``: uniform in ``0..L-1`` for ``u`` uniform in ``[0, 1)``.

    Args:
        u: uniform number in ``[0, 1)``, shape ``()``.
        L: sequence length, shape ``()``.

    Returns:
        The location ``eps`` (int32, clipped to ``L - 1``), shape ``()``.
    """
    return jnp.minimum(jnp.floor(u * L).astype(jnp.int32), L - 1)


@precision.matmul("highest", unless_set=True)
def assemble(
    d: Draw, directions: Float[Array, "F D"], L: Int[Array, ""], signal: float | Float[Array, ""] = 1.0
) -> Sample:
    """The sample of one grid point: sequence length ``L`` (positions ``>= L`` are padding, to be
    masked), latent ``signal * theta``, relevant token
    ``x_eps = xi_eps + sum_f theta_f s_f / sqrt(D)`` (Spec A, section 1).

    Args:
        d: the random numbers of the sample (:func:`draw`), ``noise`` of shape ``(L_max, D)``.
        directions: the latent directions ``s_f``, shape ``(F, D)``.
        L: sequence length of the grid point, shape ``()``.
        signal: scale of the latent, ``theta -> signal * theta``.

    Returns:
        A :class:`Sample`: ``X`` ``(L_max, D)``, ``eps`` ``()``, ``theta`` ``(F,)``.
    """
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
    """One sample ``(X, eps, theta)`` of the single-location model (Spec A, section 1); the
    target is ``X[eps]``.

    Args:
        key: PRNG key of the sample.
        directions: the latent directions ``s_f``, shape ``(F, D)``.
        prior: the latent prior ``P_theta``.
        L: sequence length.
        L_max: number of token slots (default ``L``); positions ``>= L`` are padding.
        signal: scale of the latent, ``theta -> signal * theta``.

    Returns:
        A :class:`Sample`: ``X`` ``(L_max, D)``, ``eps`` ``()``, ``theta`` ``(F,)``.
    """
    F, D = directions.shape
    L_max = L if L_max is None else L_max
    d = draw(key, prior, L_max, D, directions.dtype)
    return assemble(d, directions, jnp.asarray(L), signal)


@precision.matmul("highest", unless_set=True)
def measure_error(
    predict_fn: Callable[[Float[Array, "L D"]], Float[Array, " D"]],
    directions: Float[Array, "F D"],
    prior: Prior,
    L: int,
    *,
    n: int = 10_000,
    key: PRNGKeyArray | None = None,
    chunk: int = 2000,
) -> tuple[float, float]:
    """Mean and standard error of ``|y - predict_fn(X)|^2 / D`` over ``n`` fresh samples of the
    single-location model (``predict_fn`` maps one ``X`` of shape ``(L, D)`` to ``y_hat``;
    Spec A, section 1).

    Args:
        predict_fn: maps the tokens ``X`` ``(L, D)`` of one sample to a prediction ``(D,)``.
        directions: the latent directions ``s_f``, shape ``(F, D)``.
        prior: the latent prior ``P_theta``.
        L: sequence length.
        n: number of samples, rounded up to a multiple of ``chunk``.
        key: PRNG key of the samples (default ``jax.random.key(12345)``).
        chunk: samples per compiled pass.

    Returns:
        ``(mean, standard_error)`` of the per-sample error, two floats.
    """
    key = jax.random.key(12345) if key is None else key
    D = directions.shape[-1]

    @jax.jit
    def errs(k):
        s = jax.vmap(lambda kk: sample(kk, directions, prior, L))(jax.random.split(k, chunk))
        r = jax.vmap(lambda x, e: x[e] - predict_fn(x))(s.X, s.eps)
        return jnp.sum(r * r, axis=-1) / D

    e = np.concatenate([np.asarray(errs(jax.random.fold_in(key, i))) for i in range(-(-n // chunk))])
    return float(e.mean()), float(e.std() / np.sqrt(e.size))
