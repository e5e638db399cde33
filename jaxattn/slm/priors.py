"""Latent priors ``P_theta`` on ``R^F`` of the single-location model (Spec A, section 1).

Three families, each an immutable pytree with the same methods:

- ``sample(key, shape)``: draws of ``theta``, shape ``(*shape, F)``;
- ``log_z(c)``: ``log Z(c) = log E_theta exp(theta . c - |theta|^2 / 2)``, the log-likelihood
  ratio "signal vs noise" of a token whose projections on the directions are ``c`` (Spec A,
  section 4); it drives the Bayes posterior over the location;
- ``mean()``, ``cov()``: the first two moments (the mean drives the unspecialised phase, the
  covariance the specialisation);
- ``scaled(s)``: the prior of ``s * theta`` (a signal-strength knob shared by all families).

Build them with :func:`discrete`, :func:`onehot`, :func:`flipped_spike` or :func:`gaussian`,
which validate their input (``ValueError`` naming the parameter).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpy.typing as npt
from jax.typing import DTypeLike
from jaxtyping import Array, Float, PRNGKeyArray

from jaxattn.core import checks
from jaxattn.core.checks import plain


class Discrete(NamedTuple):
    """``theta = support[k]`` with probability ``weights[k]`` (Spec A, section 1).

    Attributes:
        support: the support points ``theta^(k)`` as rows, shape ``(K, F)``.
        weights: their probabilities ``pi_k``, shape ``(K,)``, summing to one.
    """

    support: Float[Array, "K F"]
    weights: Float[Array, " K"]

    @property
    def F(self) -> int:
        return self.support.shape[-1]

    def sample(self, key: PRNGKeyArray, shape: tuple[int, ...] = ()) -> Float[Array, "... F"]:
        logits = jnp.log(jnp.maximum(self.weights, 1e-300))
        idx = jax.random.categorical(key, logits, shape=shape)
        return self.support[idx]

    def log_z(self, c: Float[Array, " F"]) -> Float[Array, ""]:
        logw = jnp.where(self.weights > 0, jnp.log(jnp.where(self.weights > 0, self.weights, 1.0)), -jnp.inf)
        return jax.nn.logsumexp(logw + self.support @ c - 0.5 * jnp.sum(self.support**2, axis=-1))

    def mean(self) -> Float[Array, " F"]:
        return self.weights @ self.support

    def cov(self) -> Float[Array, "F F"]:
        d = self.support - self.mean()
        return (d * self.weights[:, None]).T @ d

    def scaled(self, s) -> Discrete:
        return Discrete(self.support * s, self.weights)


class FlippedSpike(NamedTuple):
    """``theta_f = mean_f + amplitude_f * r_f`` with independent Rademacher signs ``r_f``
    (Spec A, section 1).

    Attributes:
        mean_: the mean ``mu``, shape ``(F,)``.
        amplitude: the amplitudes ``a_f`` (standard deviations), shape ``(F,)``.
    """

    mean_: Float[Array, " F"]
    amplitude: Float[Array, " F"]

    @property
    def F(self) -> int:
        return self.amplitude.shape[-1]

    def sample(self, key: PRNGKeyArray, shape: tuple[int, ...] = ()) -> Float[Array, "... F"]:
        r = jax.random.rademacher(key, (*shape, self.F), dtype=self.amplitude.dtype)
        return self.mean_ + self.amplitude * r

    def log_z(self, c: Float[Array, " F"]) -> Float[Array, ""]:
        # The prior factorises over f, so Z does too: Z = prod_f (z_f(+1) + z_f(-1)) / 2.
        tp, tm = self.mean_ + self.amplitude, self.mean_ - self.amplitude
        return jnp.sum(jnp.logaddexp(tp * c - 0.5 * tp**2, tm * c - 0.5 * tm**2) - jnp.log(2.0))

    def mean(self) -> Float[Array, " F"]:
        return self.mean_

    def cov(self) -> Float[Array, "F F"]:
        return jnp.diag(self.amplitude**2)

    def scaled(self, s) -> FlippedSpike:
        return FlippedSpike(self.mean_ * s, self.amplitude * s)


class Gaussian(NamedTuple):
    """``theta ~ N(mean, cov)``; ``factor`` is a square root of ``cov`` (``cov = factor factor^T``)
    (Spec A, section 1).

    Attributes:
        mean_: the mean, shape ``(F,)``.
        cov_: the covariance, shape ``(F, F)``.
        factor: a square root of the covariance, shape ``(F, F)``.
    """

    mean_: Float[Array, " F"]
    cov_: Float[Array, "F F"]
    factor: Float[Array, "F F"]

    @property
    def F(self) -> int:
        return self.mean_.shape[-1]

    def sample(self, key: PRNGKeyArray, shape: tuple[int, ...] = ()) -> Float[Array, "... F"]:
        z = jax.random.normal(key, (*shape, self.F), dtype=self.mean_.dtype)
        return self.mean_ + z @ self.factor.T

    def log_z(self, c: Float[Array, " F"]) -> Float[Array, ""]:
        # Z(c) is the density ratio N(c; mean, I + cov) / N(c; 0, I): valid for singular cov too.
        a = jnp.eye(self.F, dtype=self.cov_.dtype) + self.cov_
        d = c - self.mean_
        _, logdet = jnp.linalg.slogdet(a)
        return -0.5 * logdet - 0.5 * d @ jnp.linalg.solve(a, d) + 0.5 * c @ c

    def mean(self) -> Float[Array, " F"]:
        return self.mean_

    def cov(self) -> Float[Array, "F F"]:
        return self.cov_

    def scaled(self, s) -> Gaussian:
        return Gaussian(self.mean_ * s, self.cov_ * s**2, self.factor * s)


Prior = Discrete | FlippedSpike | Gaussian


def discrete(support: npt.ArrayLike, weights: npt.ArrayLike | None = None) -> Discrete:
    """A discrete prior on the rows of ``support`` (shape ``(K, F)``); uniform weights by default.

    Args:
        support: the support points as rows, array-like of shape ``(K, F)``.
        weights: their probabilities, shape ``(K,)``, non-negative and summing to one
            (default: uniform).

    Returns:
        A :class:`Discrete` prior.

    Raises:
        ValueError: on a malformed ``support`` or ``weights``.
    """
    support = checks.as_array("support", support, ndim=2)
    K = support.shape[0]
    if K < 1 or support.shape[1] < 1:
        raise ValueError(f"support must have shape (K, F) with K, F >= 1, got {support.shape}")
    weights = np.full(K, 1.0 / K) if weights is None else checks.as_array("weights", weights, ndim=1)
    if weights.shape != (K,):
        raise ValueError(f"weights must have shape ({K},) to match support {support.shape}, got {weights.shape}")
    if np.any(weights < 0):
        raise ValueError(f"weights must be non-negative, got {weights.tolist()}")
    if abs(weights.sum() - 1.0) > 1e-6:
        raise ValueError(f"weights must sum to 1, got sum {weights.sum():.6g}")
    return Discrete(jnp.asarray(support), jnp.asarray(weights))


def onehot(F: int, nu: float) -> Discrete:
    """One-hot spikes ``theta = sqrt(nu) e_f``, ``f`` uniform in ``0..F-1`` (Spec A, section 1).

    Args:
        F: number of latent directions (``>= 1``).
        nu: signal strength ``nu >= 0`` (``|theta|^2 = nu``).

    Returns:
        A :class:`Discrete` prior with support ``sqrt(nu) I_F`` ``(F, F)`` and uniform weights.
    """
    F = checks.integer("F", F, 1)
    nu = checks.positive("nu", nu, allow_zero=True)
    return discrete(np.sqrt(nu) * np.eye(F))


def flipped_spike(amplitude: npt.ArrayLike, mean: npt.ArrayLike | None = None) -> FlippedSpike:
    """``theta_f = mean_f + amplitude_f r_f``, ``r_f = +-1``: diagonal covariance ``amplitude^2``
    (Spec A, section 1).

    Args:
        amplitude: the amplitudes ``a_f >= 0``, shape ``(F,)``.
        mean: the mean ``mu``, shape ``(F,)`` (default: zero, the symmetric case).

    Returns:
        A :class:`FlippedSpike` prior.

    Raises:
        ValueError: on a malformed ``amplitude`` or ``mean``.
    """
    amplitude = checks.as_array("amplitude", amplitude, ndim=1)
    if amplitude.size < 1 or np.any(amplitude < 0):
        raise ValueError(f"amplitude must be a non-empty list of values >= 0, got {amplitude.tolist()}")
    mean = np.zeros_like(amplitude) if mean is None else checks.as_array("mean", mean, ndim=1)
    if mean.shape != amplitude.shape:
        raise ValueError(f"mean must have shape {amplitude.shape} to match amplitude, got {mean.shape}")
    return FlippedSpike(jnp.asarray(mean), jnp.asarray(amplitude))


def gaussian(mean: npt.ArrayLike, cov: npt.ArrayLike) -> Gaussian:
    """``theta ~ N(mean, cov)``; ``cov`` may be a scalar (isotropic), a vector (diagonal) or a matrix
    (Spec A, section 1).

    Args:
        mean: the mean, shape ``(F,)``.
        cov: the covariance: a scalar, a vector ``(F,)`` or a matrix ``(F, F)``, symmetric
            positive semi-definite.

    Returns:
        A :class:`Gaussian` prior (with ``factor`` from the eigendecomposition of ``cov``).

    Raises:
        ValueError: on a malformed ``mean`` or ``cov``.
    """
    mean = checks.as_array("mean", mean, ndim=1)
    F = mean.size
    if F < 1:
        raise ValueError("mean must have at least one entry")
    cov = checks.as_array("cov", cov)
    if cov.ndim == 0:
        cov = cov * np.eye(F)
    elif cov.ndim == 1:
        cov = np.diag(cov) if cov.shape == (F,) else cov
    if cov.shape != (F, F):
        raise ValueError(f"cov must be a scalar, a length-{F} vector or a {F}x{F} matrix, got shape {cov.shape}")
    if np.any(np.diag(cov) < 0):
        raise ValueError(f"cov must have non-negative variances, got diagonal {np.diag(cov).tolist()}")
    if not np.allclose(cov, cov.T, atol=1e-10):
        raise ValueError("cov must be symmetric")
    evals, evecs = np.linalg.eigh(cov)
    if evals.min() < -1e-9 * max(1.0, evals.max()):
        raise ValueError(f"cov must be positive semi-definite, smallest eigenvalue {evals.min():.3g}")
    factor = evecs * np.sqrt(np.clip(evals, 0, None))
    return Gaussian(jnp.asarray(mean), jnp.asarray(cov), jnp.asarray(factor))


def from_name(name: str, F: int, nu: float = 1.0) -> Prior:
    """A prior by name, for the command line: ``onehot`` (``sqrt(nu) e_f``), ``flipped``
    (``+-sqrt(nu)`` per direction) or ``gaussian`` (``N(0, nu I)``).

    Args:
        name: ``"onehot"``, ``"flipped"`` or ``"gaussian"``.
        F: number of latent directions.
        nu: signal strength (``>= 0``).

    Returns:
        The prior (:class:`Discrete`, :class:`FlippedSpike` or :class:`Gaussian`).

    Raises:
        ValueError: on an unknown ``name`` or an invalid ``F`` or ``nu``.
    """
    if name == "onehot":
        return onehot(F, nu)
    F = checks.integer("F", F, 1)
    nu = checks.positive("nu", nu, allow_zero=True)
    if name == "flipped":
        return flipped_spike(np.full(F, np.sqrt(nu)))
    if name == "gaussian":
        return gaussian(np.zeros(F), nu)
    raise ValueError(f"prior must be 'onehot', 'flipped' or 'gaussian', got {plain(name)}")


def astype(prior: Prior, dtype: DTypeLike) -> Prior:
    """The same prior with its arrays cast to ``dtype`` (float32 simulation, float64 theory).

    Args:
        prior: any prior.
        dtype: the floating dtype.

    Returns:
        A prior of the same family with every array of dtype ``dtype``.
    """
    return jax.tree_util.tree_map(lambda x: jnp.asarray(x, dtype), prior)


FAMILIES = ("onehot", "flipped", "gaussian", "discrete")


def from_spec(spec: str | dict[str, Any]) -> Prior:
    """A prior from a table, as sweep files and stored results write it:
    ``{family = "onehot" | "flipped" | "gaussian", F, nu}`` (:func:`from_name`),
    ``{family = "discrete", support, weights}``, ``{family = "flipped", amplitude, mean}`` or
    ``{family = "gaussian", mean, cov}``. The class names of :func:`to_spec`'s output
    (``Discrete``, ``FlippedSpike``, ``Gaussian``) are read too.

    Args:
        spec: the table, a ``dict`` or its JSON string.

    Returns:
        The prior (:class:`Discrete`, :class:`FlippedSpike` or :class:`Gaussian`).

    Raises:
        ValueError: on an unknown family or unknown parameters.
    """
    if isinstance(spec, str):
        import json

        spec = json.loads(spec)
    if not isinstance(spec, dict):
        raise ValueError(f"expected a table like {{ family = 'onehot', F = 2, nu = 9.0 }}, got {plain(spec)}")
    spec = dict(spec)
    family = spec.pop("family", "onehot")
    family = {"Discrete": "discrete", "FlippedSpike": "flipped", "Gaussian": "gaussian"}.get(family, family)
    if family not in FAMILIES:
        raise ValueError(f"prior family must be one of {FAMILIES}, got {plain(family)}")
    if family == "discrete":
        out = discrete(spec.pop("support"), spec.pop("weights", None))
    elif family == "flipped" and "amplitude" in spec:
        out = flipped_spike(spec.pop("amplitude"), spec.pop("mean_", spec.pop("mean", None)))
    elif family == "gaussian" and ("mean_" in spec or "mean" in spec):
        out = gaussian(spec.pop("mean_", spec.pop("mean", None)), spec.pop("cov_", spec.pop("cov", None)))
    else:
        out = from_name(family, spec.pop("F", 2), spec.pop("nu", 1.0))
    if spec:
        raise ValueError(f"unknown prior parameters {sorted(spec)}")
    return out


def to_spec(prior: Prior) -> dict:
    """A JSON-safe description of ``prior`` that :func:`from_spec` reads back exactly.

    Args:
        prior: any prior.

    Returns:
        A ``dict`` with ``family`` and the prior's arrays as nested lists (``support``,
            ``weights``; ``mean``, ``amplitude``; or ``mean``, ``cov``).
    """
    family = {Discrete: "discrete", FlippedSpike: "flipped", Gaussian: "gaussian"}[type(prior)]
    fields = {k: np.asarray(v).tolist() for k, v in prior._asdict().items() if k != "factor"}
    return {"family": family, **{k.rstrip("_"): v for k, v in fields.items()}}
