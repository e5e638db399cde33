"""The order-parameter ODEs of online SGD on the single-location model (Spec A, section 3).

As ``D -> inf`` at ``t = samples / D``, online SGD on ``(M, Q, b)`` follows (``L = R / 2``,
``g[h, l] = d(loss)/d(chi[h, l])`` the per-sample score gradient, ``docs/theory/single_location.md``)

    dM/dt = -eta (dL/dM + 2 (dL/dQ) M)
    dQ/dt = -eta ((dL/dM) M^T + M (dL/dM)^T + 2 ((dL/dQ) Q + Q (dL/dQ))) + eta^2 E[g g^T]
    db/dt = -eta bias_lr dL/db

with ``dL/dQ`` symmetric. The last term of ``dQ/dt`` is the SGD noise; without it this is
gradient flow. Expectations are averages over a fixed :class:`~jaxattn.slm.risk.Bank`
(common random numbers), so the right-hand side is a deterministic smooth function and adaptive
step control works. A mini-batch of ``B`` samples at learning rate ``eta`` follows the same ODE
at ``eta / B`` (drift and noise both).

Integration uses ``diffrax.diffeqsolve`` (adaptive Dopri5). Each interval between two
recording times is one solve (:func:`advance`), so the engine can step an ODE grid record by
record (:mod:`jaxattn.slm.experiments._ode`, :func:`jaxattn.slm.integrate`: one compile per grid
shape) and a program holds no host callback (diffrax checks the save times of
``SaveAt(ts=...)`` with one, which keeps a program out of JAX's persistent cache).
A failed solve is reported per grid point (``ok``), never raised for the whole grid.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, PRNGKeyArray

from jaxattn.core import checks, precision
from jaxattn.slm.network import Arch
from jaxattn.slm.risk import Bank, bank_scores, draw_loss, risk


class OrderParams(NamedTuple):
    """The state of the ODEs: overlaps ``M[h, f] = k_h . s_f / D`` ``(H, F)``,
    ``Q[h, h'] = k_h . k_h' / D`` ``(H, H)`` and biases ``b`` ``(H,)`` (Spec A, section 3).

    Attributes:
        M: overlaps ``M[h, f] = k_h . s_f / D``, shape ``(H, F)``.
        Q: overlaps ``Q[h, h'] = k_h . k_h' / D``, shape ``(H, H)``.
        b: biases, shape ``(H,)``.
    """

    M: Float[Array, "H F"]
    Q: Float[Array, "H H"]
    b: Float[Array, " H"]


class ODEArgs(NamedTuple):
    """Per-point values of an ODE grid (a grid is these with a leading axis).

    Attributes:
        eta: learning rate, a scalar.
        signal: scale of the latent, ``theta -> signal * theta``, a scalar.
        noise: ``1``: online SGD (the ``eta^2`` noise term), ``0``: gradient flow; a scalar.
        head_mask: real heads, shape ``(H,)``.
        pos_mask: real positions, shape ``(L,)``.
        bias_lr: the biases' step relative to ``eta / D`` (SGD's ``bias_lr``), a scalar; ``None``
            is 1.
    """

    eta: Float[Array, ""]
    signal: Float[Array, ""]  # theta -> signal * theta
    noise: Float[Array, ""]  # 1: online SGD, 0: gradient flow
    head_mask: Bool[Array, " H"]
    pos_mask: Bool[Array, " L"]
    bias_lr: Float[Array, ""] | None = None  # None: 1 (an empty leaf, so vmapped grids need no axis)

    def bias_rate(self) -> Float[Array, ""]:
        """``eta * bias_lr``: the rate of the biases' gradient flow, ``db/dt = -eta bias_lr dL/db``.

        Returns:
            A scalar (the shape of ``eta``).
        """
        return self.eta if self.bias_lr is None else self.eta * self.bias_lr


@precision.matmul("highest", unless_set=True)
def rhs(y: OrderParams, args: ODEArgs, bank: Bank, arch: Arch, chunk: int | None = None) -> OrderParams:
    """``(dM/dt, dQ/dt, db/dt)`` at ``y``. With ``chunk``, the bank is read ``chunk`` draws at a
    time (a ``lax.scan`` that sums the chunks' contributions; the result is the same to rounding).
    Spec A, section 3: the drift of gradient flow on ``R / 2`` plus ``noise * eta^2 E[g g^T]``.

    Args:
        y: the state, ``M`` ``(H, F)``, ``Q`` ``(H, H)``, ``b`` ``(H,)``.
        args: the point's ``eta``, ``signal``, ``noise`` and masks.
        bank: the fixed draws of the expectations, at unit signal strength.
        arch: activation and head aggregation.
        chunk: draws per pass over the bank (``None``: the whole bank at once).

    Returns:
        The time derivatives as an :class:`OrderParams` ``(dM/dt, dQ/dt, db/dt)``.
    """
    hm, pm = args.head_mask, args.pos_mask
    M, Q, b = y

    def half_loss(chi, b):
        return 0.5 * draw_loss(chi, b, arch.activation, arch.aggregation, hm, pm)

    def sums(bk: Bank):
        # One pass over the draws gives the per-draw score gradients g (for the noise term) and,
        # pulled back through the linear map (M, Q) -> chi, the drift's dL/dM and dL/dQ.
        bk = Bank(bk.z, bk.theta * args.signal, bk.weight)
        chi, pullback = jax.vjp(lambda M, Q: bank_scores(M, Q, bk, hm), M, Q)
        g, g_b = jax.vmap(jax.grad(half_loss, argnums=(0, 1)), in_axes=(0, None))(chi, b)
        gM, gQ = pullback(bk.weight[:, None, None] * g)
        # SGD noise: E[sum_l g[h,l] g[h',l]]
        return gM, gQ, bk.weight @ g_b, jnp.einsum("n,nhl,nkl->hk", bk.weight, g, g)

    if chunk is None or chunk >= bank.weight.shape[0]:
        gM, gQ, gb, noise = sums(bank)
    else:
        # on a CPU a vmapped grid's per-draw arrays outgrow the caches; chunks keep them small
        def body(acc, bk):
            return jax.tree_util.tree_map(jnp.add, acc, sums(bk)), None

        zero = (jnp.zeros_like(M), jnp.zeros_like(Q), jnp.zeros_like(b), jnp.zeros_like(Q))
        (gM, gQ, gb, noise), _ = jax.lax.scan(body, zero, chunked(bank, chunk))
    gQ = 0.5 * (gQ + gQ.T)
    eta = args.eta
    dM = -eta * (gM + 2.0 * gQ @ M)
    dQ = -eta * (gM @ M.T + M @ gM.T + 2.0 * (gQ @ Q + Q @ gQ)) + args.noise * eta**2 * noise
    return OrderParams(dM, 0.5 * (dQ + dQ.T), -args.bias_rate() * gb)


def chunked(bank: Bank, chunk: int) -> Bank:
    """The bank as ``ceil(n / chunk)`` chunks of ``chunk`` draws (a leading chunk axis), padded
    with zero-weight draws, which contribute nothing to any average.

    Args:
        bank: the draws, ``n`` of them.
        chunk: draws per chunk.

    Returns:
        A :class:`~jaxattn.slm.risk.Bank` whose arrays have a leading chunk axis: ``z``
            ``(k, chunk, L, H)``, ``theta`` ``(k, chunk, F)``, ``weight`` ``(k, chunk)``.
    """
    n = bank.weight.shape[0]
    k = -(-n // chunk)
    pad = k * chunk - n

    def split(x):
        x = jnp.concatenate([x, jnp.zeros((pad, *x.shape[1:]), x.dtype)]) if pad else x
        return x.reshape(k, chunk, *x.shape[1:])

    return Bank(*(split(x) for x in bank))


def default_chunk() -> int | None:
    """Draws per chunk of :func:`rhs` in the ODE experiments (:mod:`jaxattn.slm.experiments`): 1000 on a CPU (measured best on
    a 32-point grid, ``benchmarks/slm_ode_throughput.py``), the whole bank on accelerators.

    Returns:
        ``1000`` on the CPU backend, ``None`` otherwise.
    """
    return 1000 if jax.default_backend() == "cpu" else None


def real_rms(head_mask: Bool[Array, " H"]) -> Callable[[OrderParams], Array]:
    """The step-size controller's error norm: the root mean square over the real heads' entries
    only. Diffrax's default RMS also counts a padded grid point's frozen heads, which would make
    its steps depend on the grid it is padded into.

    Args:
        head_mask: real heads, shape ``(H,)``.

    Returns:
        ``norm(y)``, a scalar, for an :class:`OrderParams` (or one like it) ``y``.
    """

    def norm(y: OrderParams) -> Array:
        m = head_mask.astype(y.b.dtype)
        w = OrderParams(jnp.broadcast_to(m[:, None], y.M.shape), m[:, None] * m[None, :], m)
        sq = sum(jnp.sum(wi * jnp.abs(yi) ** 2) for wi, yi in zip(w, y))
        n = sum(jnp.sum(wi) for wi in w)
        return jnp.sqrt(sq / n)

    return norm


@precision.matmul("highest", unless_set=True)
def advance(
    y: OrderParams,
    a: ODEArgs,
    bank: Bank,
    t0: float | Float[Array, ""],
    t1: float | Float[Array, ""],
    arch: Arch,
    rtol: float | Float[Array, ""],
    atol: float | Float[Array, ""],
    max_steps: int,
    chunk: int | None,
) -> tuple[OrderParams, Array]:
    """One point from ``t0`` to ``t1`` (adaptive Dopri5, PID controller): the state at ``t1`` and
    whether the solve succeeded (``NaN`` state once it has not). The interval is solved on its own,
    so a run is the same whether it is integrated in one call or interval by interval.

    Args:
        y: the state at ``t0``: ``M`` ``(H, F)``, ``Q`` ``(H, H)``, ``b`` ``(H,)``.
        a: the point's values (:class:`ODEArgs`).
        bank: the fixed draws of the expectations.
        t0: start time.
        t1: end time.
        arch: activation and head aggregation.
        rtol: relative tolerance of the step-size controller.
        atol: absolute tolerance of the step-size controller.
        max_steps: solver steps before the solve is reported as failed.
        chunk: draws per pass of :func:`rhs` (``None``: the whole bank).

    Returns:
        ``(y1, ok)``: the :class:`OrderParams` at ``t1`` (``NaN`` if the solve failed) and a
            boolean scalar.
    """

    def field(t, y, _):
        return rhs(y, a, bank, arch, chunk)

    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(field),
        diffrax.Dopri5(),
        t0=t0,
        t1=t1,
        dt0=None,
        y0=y,
        saveat=diffrax.SaveAt(t1=True),
        stepsize_controller=diffrax.PIDController(rtol=rtol, atol=atol, norm=real_rms(a.head_mask)),
        max_steps=max_steps,
        throw=False,
    )
    ok = sol.result == diffrax.RESULTS.successful
    return jax.tree_util.tree_map(lambda x: jnp.where(ok, x[0], jnp.nan), sol.ys), ok


@precision.matmul("highest", unless_set=True)
def risk_at(y: OrderParams, a: ODEArgs, bank: Bank, arch: Arch) -> Array:
    """``R(M, Q, b)`` of one point's state, on the bank at its signal strength (Spec A, section 3).

    Args:
        y: the state: ``M`` ``(H, F)``, ``Q`` ``(H, H)``, ``b`` ``(H,)``.
        a: the point's values (signal strength and masks).
        bank: the fixed draws, at unit signal strength.
        arch: activation and head aggregation.

    Returns:
        The risk, a scalar.
    """
    bk = Bank(bank.z, bank.theta * a.signal, bank.weight)
    return risk(y.M, y.Q, y.b, bk, arch.activation, arch.aggregation, a.head_mask, a.pos_mask)


@precision.matmul("highest", unless_set=True)
def random_initial_conditions(
    key: PRNGKeyArray, H: int, F: int, D: int, sigma0: float = 1.0, n: int = 1
) -> OrderParams:
    """``(M, Q, b)`` of ``n`` random starts ``k_h ~ N(0, sigma0^2 I_D)``, ``b = 0``, with the exact
    finite-``D`` law: ``M = sigma0 Z / sqrt(D)``, ``Q = M M^T + sigma0^2 W / D``, ``W`` Wishart
    with ``D - F`` degrees of freedom. The ``O(1/sqrt(D))`` overlaps time the escape from the
    unspecialised saddle as at that ``D``.

    Args:
        key: PRNG key of the draws.
        H: number of heads.
        F: number of latent directions.
        D: embedding dimension (``>= F``).
        sigma0: standard deviation of the keys' entries.
        n: number of starts.

    Returns:
        An :class:`OrderParams` with a leading axis of ``n``: ``M`` ``(n, H, F)``,
            ``Q`` ``(n, H, H)`` and zero ``b`` ``(n, H)``.
    """
    k1, k2 = jax.random.split(key)
    dtype = jnp.result_type(float)
    M = sigma0 * jax.random.normal(k1, (n, H, F), dtype) / np.sqrt(D)
    G = jax.random.normal(k2, (n, H, D - F), dtype)
    Q = M @ jnp.swapaxes(M, 1, 2) + sigma0**2 * G @ jnp.swapaxes(G, 1, 2) / D
    return OrderParams(M, Q, jnp.zeros((n, H), dtype))


# the grid integrator this module had: grids of the ODEs run on the engine, from any start
__getattr__ = checks.moved(
    "jaxattn.slm.ode",
    {"integrate_grid": "jaxattn.slm.integrate (start=...)", "solve": "jaxattn.slm.integrate (start=...)"},
)
