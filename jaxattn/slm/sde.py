"""The finite-``D`` order-parameter SDE of online SGD on the single-location model (Spec A,
section 3; derivation in ``docs/theory/single_location.md``, section 8).

One sample moves the order parameters ``y = (M, Q, b)`` by ``xi / D``, a per-sample increment
whose mean is the ODE's drift (:func:`jaxattn.slm.ode.rhs`) and whose covariance
``Sigma(y) = Cov[xi]`` is finite. Over ``D dt`` independent samples the increments add up to the
drift times ``dt`` plus a Gaussian fluctuation of covariance ``Sigma dt / D`` (a diffusion
approximation of the Markov chain), so at finite ``D``

    dy = f(y) dt + (Sigma(y) / D)^{1/2} dW_t        (Ito),

with ``f`` the ODE's right-hand side and ``W`` a standard Brownian motion in the coordinates of
``y`` (``M``, the upper triangle of ``Q``, ``b``). The per-sample increment, with ``g[h, l]`` the
per-draw score gradient of the half loss and ``chi*[l, f] = x_l . s_f / sqrt(D)``:

    xi_M[h, f]  = -eta sum_l g[h, l] chi*[l, f]
    xi_Q[h, h'] = -eta sum_l (g[h, l] chi[h', l] + g[h', l] chi[h, l]) + eta^2 sum_l g[h, l] g[h', l]
    xi_b[h]     = -eta dl/db_h

``Sigma`` is evaluated on the drift's bank: each draw's scores ``chi`` and signal projections
``chi*`` are drawn jointly, ``chi*_l = theta 1[l = 0] + u_l`` and
``chi_l = M theta 1[l = 0] + M u_l + R z_l`` with ``R R^T = Q - M M^T`` (the keys' components
outside the signal directions), ``z`` the bank's score draws and ``u`` extra standard-normal
draws of the directions (:func:`direction_draws`). A mini-batch of ``B`` at ``eta`` follows the SDE
at ``eta / B``, as for the ODE (drift ``eta / B``, covariance ``(eta / B)^2``).

Integration: ``diffrax`` Euler-Maruyama at a fixed step ``dt`` with a
:class:`diffrax.VirtualBrownianTree` per run (one key per seed), vmapped over runs; each interval
between two recording times is one solve on the same Brownian path (:func:`advance`), so the
engine steps an SDE grid record by record, as it does the ODEs. Its programs hold no host
callback (:func:`_checks_as_nan`), so they are exported and kept in JAX's persistent cache.
"""

from __future__ import annotations

import contextlib
import threading

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, PRNGKeyArray

from jaxattn.core import precision
from jaxattn.slm.network import Arch
from jaxattn.slm.ode import ODEArgs, OrderParams, rhs
from jaxattn.slm.risk import Bank, draw_loss


@precision.matmul("highest", unless_set=True)
def psd_sqrt(S: Float[Array, "d d"]) -> Float[Array, "d d"]:
    """The symmetric square root of the positive part of a symmetric matrix: ``V sqrt(max(l, 0)) V^T``
    from ``S = V diag(l) V^T``. Negative eigenvalues (rounding, or a slightly non-realisable
    ``Q - M M^T`` after a noisy step) are clipped to zero, so the root always exists.

    Args:
        S: symmetric matrix, shape ``(d, d)``.

    Returns:
        ``R``, shape ``(d, d)``, symmetric, with ``R R = S`` where ``S`` is positive semidefinite.
    """
    lam, V = jnp.linalg.eigh(0.5 * (S + S.T))
    return (V * jnp.sqrt(jnp.maximum(lam, 0.0))) @ V.T


def direction_draws(key: PRNGKeyArray, bank: Bank, F: int) -> Float[Array, "n L F"]:
    """Standard-normal draws ``u[n, l, f]`` of the tokens' projections on the signal directions
    beyond their mean, one per draw of ``bank`` (the ``chi*`` of :func:`increment_covariance`).

    Args:
        key: PRNG key.
        bank: the drift's bank, whose draws ``z`` have shape ``(n, L, H)``.
        F: number of latent directions.

    Returns:
        ``u``, shape ``(n, L, F)``, in the bank's dtype.
    """
    n, L, _ = bank.z.shape
    return jax.random.normal(key, (n, L, F), bank.z.dtype)


def n_coordinates(H: int, F: int) -> int:
    """The number of SDE coordinates: ``H F`` of ``M``, ``H (H + 1) / 2`` of ``Q``, ``H`` of ``b``.

    Args:
        H: heads (padded).
        F: latent directions.

    Returns:
        ``H F + H (H + 1) / 2 + H``.
    """
    return H * F + H * (H + 1) // 2 + H


def flatten(y: OrderParams) -> Float[Array, " d"]:
    """``(M, Q, b)`` as the SDE's coordinate vector ``[M.ravel(), Q[triu], b]``.

    Args:
        y: order parameters, ``M`` ``(H, F)``, ``Q`` ``(H, H)`` symmetric, ``b`` ``(H,)``.

    Returns:
        The coordinates, shape ``(d,)`` with ``d = n_coordinates(H, F)``.
    """
    iu = np.triu_indices(y.M.shape[0])
    return jnp.concatenate([y.M.ravel(), y.Q[iu], y.b])


def unflatten(v: Float[Array, " d"], H: int, F: int) -> OrderParams:
    """The inverse of :func:`flatten`: ``Q`` rebuilt symmetric from its upper triangle.

    Args:
        v: coordinates, shape ``(d,)``.
        H: heads (padded).
        F: latent directions.

    Returns:
        :class:`~jaxattn.slm.ode.OrderParams` ``(M (H, F), Q (H, H), b (H,))``.
    """
    iu = np.triu_indices(H)
    M = v[: H * F].reshape(H, F)
    up = jnp.zeros((H, H), v.dtype).at[iu].set(v[H * F : H * F + len(iu[0])])
    Q = up + up.T - jnp.diag(jnp.diag(up))
    return OrderParams(M, Q, v[H * F + len(iu[0]) :])


@precision.matmul("highest", unless_set=True)
def increment_covariance(
    y: OrderParams, args: ODEArgs, bank: Bank, u: Float[Array, "n L F"], arch: Arch
) -> Float[Array, "d d"]:
    """``Sigma(y) = Cov[xi]``, the covariance of one sample's increment of the coordinates
    (:func:`flatten`) of ``(M, Q, b)``, averaged over the bank (module docstring).

    Args:
        y: order parameters of one run.
        args: that run's ``eta``, signal, noise switch and masks (:class:`~jaxattn.slm.ode.ODEArgs`;
            ``noise = 0`` drops the ``eta^2`` term of ``xi_Q``).
        bank: draws ``z`` ``(n, L, H)``, latents ``theta`` ``(n, F)``, weights ``(n,)``.
        u: direction draws of :func:`direction_draws`, shape ``(n, L, F)``.
        arch: activation and aggregation.

    Returns:
        ``Sigma``, shape ``(d, d)``, ``d = n_coordinates(H, F)``; zero rows and columns on padded
        heads.
    """
    hm, pm = args.head_mask, args.pos_mask
    M = jnp.where(hm[:, None], y.M, 0.0)
    valid = hm[:, None] & hm[None, :]
    R = psd_sqrt(jnp.where(valid, y.Q - M @ M.T, 0.0))
    theta = bank.theta * args.signal
    # chi*_l = theta 1[l = 0] + u_l;  chi_l = M chi*_l + R z_l (the joint law of Spec A, section 3)
    chi_star = u.at[:, 0, :].add(theta)
    chi = jnp.einsum("hf,nlf->nhl", M, chi_star) + jnp.einsum("hk,nlk->nhl", R, bank.z)
    eta = args.eta

    def xi(c, cs):
        g, g_b = jax.grad(lambda c, b: 0.5 * draw_loss(c, b, arch.activation, arch.aggregation, hm, pm), (0, 1))(c, y.b)
        dQ = -eta * (g @ c.T + c @ g.T) + args.noise * eta**2 * (g @ g.T)
        return flatten(OrderParams(-eta * g @ cs, dQ, -args.bias_rate() * g_b))

    x = jax.vmap(xi)(chi, chi_star)  # (n, d)
    centred = x - bank.weight @ x
    return jnp.einsum("n,ni,nj->ij", bank.weight, centred, centred)


_SWITCH = threading.Lock()


@contextlib.contextmanager
def _checks_as_nan():
    """diffrax's runtime checks traced as equinox's ``"nan"`` mode (a failed check makes its value
    ``NaN``) instead of its ``"raise"`` mode, a host callback. A program with a callback cannot be
    exported, and JAX's persistent cache leaves it out: every process compiled the SDE afresh.

    The checks are that the step has the interval's sign and that the Brownian tree is read
    inside its range; both hold by construction in :func:`advance`, and a ``NaN`` marks the point
    failed. equinox reads ``EQX_ON_ERROR`` once, at import, into its errors module and offers no
    other switch: the module's value is set for the trace and restored (left alone where a
    version has no such value)."""
    import equinox._errors as errors

    with _SWITCH:
        old = getattr(errors, "EQX_ON_ERROR", None)
        if old is None:
            yield
            return
        setattr(errors, "EQX_ON_ERROR", "nan")  # noqa: B010 - a module value equinox does not export
        try:
            yield
        finally:
            setattr(errors, "EQX_ON_ERROR", old)  # noqa: B010


@precision.matmul("highest", unless_set=True)
def advance(
    y: OrderParams,
    args: ODEArgs,
    bank: Bank,
    u: Float[Array, "n L F"],
    key: PRNGKeyArray,
    t0,
    t1,
    t_end: float,
    D: int,
    dt: float,
    arch: Arch,
    max_steps: int,
    chunk: int | None = None,
) -> tuple[OrderParams, Bool[Array, ""]]:
    """One run of the SDE from ``t0`` to ``t1`` (Euler-Maruyama at step ``dt``) on the Brownian path
    of ``key`` over ``[0, t_end]``, so that consecutive intervals continue one path.

    Args:
        y: order parameters at ``t0``.
        args: the run's :class:`~jaxattn.slm.ode.ODEArgs` (``eta`` already divided by the batch).
        bank: the drift's and the covariance's bank.
        u: direction draws (:func:`direction_draws`), shape ``(n, L, F)``.
        key: the run's Brownian key.
        t0: start of the interval.
        t1: end of the interval (``t0 <= t1 <= t_end``).
        t_end: end of the whole path (the last recording time).
        D: embedding dimension (the noise is ``(Sigma / D)^{1/2} dW``).
        dt: Euler-Maruyama step.
        arch: activation and aggregation.
        max_steps: bound on the steps of the interval (static).
        chunk: draws per pass of the drift (:func:`jaxattn.slm.ode.rhs`).

    Returns:
        ``(y, ok)``: the state at ``t1`` (``NaN`` if the solve failed or left the finite numbers)
        and whether it succeeded.
    """
    H, F = y.M.shape
    d = n_coordinates(H, F)
    scale = 1.0 / np.sqrt(D)

    def drift(t, v, _):
        return flatten(rhs(unflatten(v, H, F), args, bank, arch, chunk))

    def diffusion(t, v, _):
        return scale * psd_sqrt(increment_covariance(unflatten(v, H, F), args, bank, u, arch))

    with _checks_as_nan():
        brownian = diffrax.VirtualBrownianTree(0.0, t_end, tol=dt / 2, shape=(d,), key=key)
        terms = diffrax.MultiTerm(diffrax.ODETerm(drift), diffrax.ControlTerm(diffusion, brownian))
        sol = diffrax.diffeqsolve(
            terms,
            diffrax.Euler(),
            t0=t0,
            t1=t1,
            dt0=dt,
            y0=flatten(y),
            saveat=diffrax.SaveAt(t1=True),
            max_steps=max_steps,
            adjoint=diffrax.ForwardMode(),
            throw=False,
        )
    assert sol.ys is not None  # SaveAt(t1=True)
    v = sol.ys[0]
    ok = (sol.result == diffrax.RESULTS.successful) & jnp.all(jnp.isfinite(v))
    return unflatten(jnp.where(ok, v, jnp.nan), H, F), ok


def max_interval_steps(times, dt: float) -> int:
    """Steps of the longest interval between consecutive recording times (from ``t = 0``) at
    step ``dt``, plus a margin: the static ``max_steps`` of :func:`advance`.

    Args:
        times: increasing recording times, ``>= 0``.
        dt: Euler-Maruyama step.

    Returns:
        The bound, an ``int``.
    """
    gaps = np.diff(np.concatenate([[0.0], np.asarray(times, float)]))
    return int(np.ceil(gaps.max(initial=0.0) / dt)) + 2
