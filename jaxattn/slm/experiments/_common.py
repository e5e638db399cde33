"""What the single-location model's experiments share: their axes, the keys of a grid point
(from its own values, never from its place in the grid), the latent directions, and the layout
and masking of per-head order parameters.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float, PRNGKeyArray

from jaxattn import engine
from jaxattn.core import keys
from jaxattn.core.checks import plain
from jaxattn.engine import Layout, float_axis, int_axis
from jaxattn.slm import task
from jaxattn.slm._config import SLMConfig

GRID_AXES = ("seed", "H", "L", "eta", "signal")


HYPER = frozenset({"H", "L", "eta", "signal"})


AXES = (
    int_axis("seed", 0, 0, help="Seed of the initial keys and of the data stream."),
    int_axis("H", 2, 1, shared=True, help="Heads."),
    int_axis("L", 4, 2, shared=True, help="Sequence length."),
    float_axis("eta", 1.0, shared=True, help="Learning rate."),
    float_axis("signal", 1.0, allow_zero=True, shared=True, help="Scale of theta."),
)


def _noise(v):
    if isinstance(v, str) or float(v) not in (0.0, 1.0):
        raise ValueError(f"noise must be 0 or 1, got {plain(v)}")
    return float(v)


ODE_AXES = AXES + (
    engine.Axis(
        "noise", "float", 1.0, _noise, shared=True, help="1: online SGD (the eta^2 noise term), 0: gradient flow."
    ),
)


def point_keys(
    share_data: bool,
    seed: ArrayLike,
    H: ArrayLike,
    L: ArrayLike,
    eta: ArrayLike,
    signal: ArrayLike,
) -> tuple[PRNGKeyArray, PRNGKeyArray]:
    """The ``(init_key, data_key)`` of runs, from their own values only (never their position in
    a grid, so a run's numbers do not depend on the grid around it): ``init_key = fold_in(key(seed),
    0)`` and ``data_key = fold_in(key(seed), 1)``, then, without ``share_data``, ``H``, ``L`` and
    the float32 bits of ``eta`` and ``signal`` folded in, in that order. With ``share_data`` the
    data key depends on the seed alone: common random numbers across the other axes. All runs at
    once (:func:`jaxattn.core.keys.derive`).

    Args:
        share_data: whether the data key depends on the seed alone.
        seed: the runs' seeds (a scalar or an array).
        H: numbers of heads (broadcast against ``seed``).
        L: sequence lengths.
        eta: learning rates.
        signal: signal strengths.

    Returns:
        ``(init_key, data_key)``, PRNG keys of the broadcast shape.
    """
    data = (1,) if share_data else (1, H, L, keys.float_bits(eta), keys.float_bits(signal))
    return keys.derive(seed, 0), keys.derive(seed, *data)


def directions_and_test_key(config: SLMConfig) -> tuple[Float[Array, "F D"], PRNGKeyArray]:
    """The latent directions and the test-set key (both from ``directions_seed``).

    Args:
        config: the grid's configuration (``directions_seed``, ``D``, ``F``).

    Returns:
        ``(directions, test_key)``: the directions ``s_f`` of shape ``(F, D)``
            (:func:`jaxattn.slm.task.latent_directions`) and a PRNG key.
    """
    dkey = jax.random.key(config.directions_seed)
    return task.latent_directions(jax.random.fold_in(dkey, 0), config.D, config.F), jax.random.fold_in(dkey, 1)


def directions_bytes(config: SLMConfig) -> int:
    """The memory :func:`directions_and_test_key` takes: ``32 F D`` bytes, twice the 16 measured
    (the float32 Gaussian draw, its QR and the scaled copy; 6.3 GB at ``D = 4 10^8, F = 1``),
    for XLA's own buffers.

    Args:
        config: The configuration (``D``, ``F``).

    Returns:
        Bytes.
    """
    return 32 * config.F * config.D


def head_layout(times, H: int, F: int, last: str) -> Layout:
    """The outputs of a run that records order parameters per head: ``M``, ``Q``, ``b`` and
    ``last`` over ``time``, and ``diverged``.

    Args:
        times: the recording times.
        H: heads (the grid's largest ``H``).
        F: latent directions.
        last: the name of the scalar recorded over time (``"error"`` or ``"risk"``).

    Returns:
        The experiment's :class:`~jaxattn.engine.Layout`.
    """
    return Layout(
        dims=dict(
            M=("time", "head", "direction"),
            Q=("time", "head", "head_"),
            b=("time", "head"),
            **{last: ("time",)},
            diverged=(),
        ),
        coords=dict(time=np.asarray(times), head=np.arange(H), head_=np.arange(H), direction=np.arange(F)),
        long_names={"error": "test error |y - y_hat|^2 / D", "risk": "R(M, Q, b) along the ODE"},
    )


def masked_heads(M, Q, b, hm, bad: bool | Array = False):
    """``NaN`` on padded heads (and everywhere once ``bad``).

    Args:
        M: overlaps, ``(..., H, F)``.
        Q: overlaps, ``(..., H, H)``.
        b: biases, ``(..., H)``.
        hm: the real heads, ``(H,)``.
        bad: whether the run diverged.

    Returns:
        ``(M, Q, b)`` with ``NaN`` where a head is padded.
    """
    return (
        jnp.where(bad | ~hm[..., None], jnp.nan, M),
        jnp.where(bad | ~(hm[..., None] & hm[..., None, :]), jnp.nan, Q),
        jnp.where(bad | ~hm, jnp.nan, b),
    )
