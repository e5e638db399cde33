"""The Gaussian fluctuations of ``G`` around the softmax ansatz: the Laplace correction of the
reduced action along ``c_G``, and the ``P*`` it gives (``docs/theory/copy_head.md``, section 6).

The reduced action keeps ``G`` on the ansatz ``c S + c_1 11^T``; the posterior integrates over
the other ``L^2 - 1`` directions too. Their Gaussian integral, ``(1/2) ln det' H``
(:func:`fluctuation_entropy`), added to the reduced action, gives the corrected gap between the
basins (:func:`corrected_gap`) and its zero, the corrected ``P*`` (:func:`p_star_corrected`).

Where that Hessian is not positive (small ``N``), the variational Gaussian free energy along
``c`` needs none: the best Gaussian ``q(G)`` with its mean on the ansatz, by the KL divergence
(:func:`variational_profile`), the basins' log-odds it gives (:func:`variational_log_odds`) and
their zero, the variational ``P*`` (:func:`p_star_variational`).

Neither is exact, and the reduced action allows an answer that is: it sees ``G`` only through
sums over the loss rows, ``s = sum_l a_l`` and ``q = sum_l q_l``, and its prior is a sum over rows
too. So the posterior's profile along ``a = s / n_pos`` is a large-deviation (Cramer) problem for
the mean of ``n_pos`` independent rows drawn from the prior, tilted by the action
(:func:`large_deviation_profile`), with the basins' log-odds (:func:`large_deviation_log_odds`)
and their zero (:func:`p_star_large_deviation`).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxattn.copyhead import action, network
from jaxattn.copyhead.profile import copy_strength, theory_action_of_c, theory_barrier, weight_logits
from jaxattn.core import checks, precision


def fluctuation_entropy(arch: network.CopyArch, P: float, N: float, c: float) -> float:
    """``(1/2) ln det' H(c)``: the Gaussian integral over the ``L^2 - 1`` directions of ``G``
    orthogonal to the ansatz at ``G = c S + c_1 11^T`` (:func:`jaxattn.copyhead.action.softmax_logits`),
    with ``H`` the Hessian of the reduced action (B.3b evaluated at any ``G``,
    :func:`jaxattn.copyhead.action.reduced_action_of_G`) projected off the ansatz's tangent.
    ``S(c) + fluctuation_entropy(c)`` is the Laplace approximation of ``F(c)`` to the marginal
    posterior along ``c``; the reduced action alone keeps ``G`` on the ansatz (float64).

    Args:
        arch: the network (softmax attention).
        P: number of training sequences.
        N: inverse temperature.
        c: the copy strength.

    Returns:
        ``(1/2) sum ln lambda`` over the projected Hessian's eigenvalues (the tangent's omitted);
            ``NaN`` where one is not positive (the ansatz point is a saddle of the action in
            ``G``, and the Gaussian approximation does not exist).
    """
    with precision.float64():
        ev = np.asarray(_projected_hessian_spectrum(arch)(jnp.float64(c), jnp.float64(P), jnp.float64(N)))
    return float(0.5 * np.sum(np.log(ev))) if ev.min() > 0 else float("nan")


@functools.cache
def _projected_hessian_spectrum(arch: network.CopyArch):
    """The eigenvalues of the reduced action's Hessian in ``G`` projected off the ansatz's
    tangent (the tangent itself given eigenvalue 1), jitted once per architecture."""
    L = arch.L

    def spectrum(c, P, N):
        G0 = action.softmax_logits(c, L, arch.cyclic).ravel()
        H = jax.hessian(lambda g: action.reduced_action_of_G(g.reshape(L, L), P, arch, N))(G0)
        d = jax.jacfwd(lambda x: action.softmax_logits(x, L, arch.cyclic).ravel())(c)
        d = d / jnp.linalg.norm(d)
        proj = jnp.eye(L * L, dtype=c.dtype) - jnp.outer(d, d)
        return jnp.linalg.eigvalsh(proj @ H @ proj + jnp.outer(d, d))

    return jax.jit(spectrum)


def corrected_gap(arch: network.CopyArch, P: float, N: float, c_barrier: float) -> tuple[float, float]:
    """``F_copy - F_uniform`` of the reduced action with and without the Gaussian fluctuations
    (:func:`fluctuation_entropy`), at its lowest point on either side of ``c_barrier`` within
    ``c`` in ``[-0.5, 3]``.

    Args:
        arch: the network (softmax attention).
        P: number of training sequences.
        N: inverse temperature.
        c_barrier: the dividing copy strength (the barrier at the theory's ``P*``).

    Returns:
        ``(gap_reduced, gap_corrected)``: negative when the copy basin is the lower.
    """
    c = np.linspace(-0.5, 3.0, 701)
    S = theory_action_of_c(arch, P, N, c)
    iu = int(np.argmin(np.where(c < c_barrier, S, np.inf)))
    ic = int(np.argmin(np.where(c > c_barrier, S, np.inf)))
    gap = float(S[ic] - S[iu])
    return gap, gap + fluctuation_entropy(arch, P, N, c[ic]) - fluctuation_entropy(arch, P, N, c[iu])


def p_star_corrected(arch: network.CopyArch, N: float, bracket: tuple[float, float]) -> float:
    """The ``P`` at which the Gaussian-corrected gap (:func:`corrected_gap`) vanishes, by Brent's
    method (``scipy.optimize.brentq``) on ``bracket``.

    Args:
        arch: the network (softmax attention).
        N: inverse temperature.
        bracket: ``(P_lo, P_hi)`` with gaps of opposite signs.

    Returns:
        The corrected ``P*``.
    """
    return _corrected_zero(_corrected_gap_in_P(arch, N), *bracket)


def _corrected_gap_in_P(arch: network.CopyArch, N: float):
    """The corrected gap as a function of ``P`` alone, split at the reduced action's barrier, each
    ``P`` computed once (a root search asks its bracket's ends again)."""
    c_bar = float(copy_strength(np.asarray(theory_barrier(arch, N)[1]), arch.L))
    return _remembered(lambda P: corrected_gap(arch, P, N, c_bar)[1])


def _corrected_zero(gap, lo: float, hi: float) -> float:
    """Brent's method on the corrected gap between ``lo`` and ``hi``, to 0.05 sequences."""
    from scipy.optimize import brentq

    return float(brentq(gap, lo, hi, xtol=0.05))  # pyright: ignore[reportArgumentType]


def p_star_corrected_near(
    arch: network.CopyArch, N: float, P0: float, step: float = 0.02, max_factor: float = 2.0
) -> float | None:
    """The Gaussian-corrected ``P*`` nearest ``P0``: the corrected gap (:func:`corrected_gap`) is
    evaluated at ``P0`` and at ``P`` growing (gap positive: the uniform basin still lower) or
    shrinking (negative) by ``step`` relative steps, until it changes sign; Brent's method then
    solves inside that bracket, as in :func:`p_star_corrected`.

    Args:
        arch: the network (softmax attention).
        N: inverse temperature.
        P0: where to start (the reduced action's ``P*``, or a sampled one).
        step: the relative step of the scan.
        max_factor: the scan stops at ``P0 * max_factor`` upward or ``P0 / max_factor`` downward.

    Returns:
        The corrected ``P*``, or ``None`` where the correction does not exist on the way: a
            Hessian eigenvalue that is not positive makes the gap ``NaN`` before it changes sign
            (at ``N = 1``, ``L = 32``, ``V = 4``, above ``P ~ 540``), or no sign change within
            ``max_factor``.
    """
    gap = _corrected_gap_in_P(arch, N)
    Ps, gaps = [float(P0)], [gap(float(P0))]
    if not np.isfinite(gaps[0]):
        return None
    up = gaps[0] > 0
    while np.isfinite(gaps[-1]) and (gaps[-1] > 0) == up and gaps[-1] != 0:
        nxt = Ps[-1] * (1 + step) if up else Ps[-1] / (1 + step)
        if not P0 / max_factor <= nxt <= P0 * max_factor:
            return None
        Ps.append(nxt)
        gaps.append(gap(nxt))
    if not np.isfinite(gaps[-1]):
        return None
    if gaps[-1] == 0:
        return Ps[-1]
    lo, hi = sorted(Ps[-2:])
    try:  # the correction needs a positive Hessian at both minima inside the bracket too
        return _corrected_zero(gap, lo, hi)
    except ValueError:
        return None


def _remembered(f):
    """``f`` of one float, each value computed once (a root search asks its bracket's ends again)."""
    seen: dict[float, float] = {}

    def once(x: float) -> float:
        if x not in seen:
            seen[x] = f(x)
        return seen[x]

    return once


# --- the variational Gaussian along c -----------------------------------------------------------


def variational_profile(
    arch: network.CopyArch, P: float, N: float, c: np.ndarray, n_samples: int = 256, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """``F_q(c) = min_q (E_q[S] - H(q))``: the Gibbs-Bogoliubov bound on ``-ln`` of the marginal
    posterior of the copy strength, with ``S`` the reduced action at any ``G`` (B.3b,
    :func:`jaxattn.copyhead.action.reduced_action_of_G`) and ``q`` a Gaussian over ``G`` whose
    mean is the ansatz ``G_0(c) = c S - (c/L) 11^T`` and whose covariance lives on the ``L^2 - 1``
    directions orthogonal to the ansatz's tangent (``docs/theory/copy_head.md``, section 6).

    The family: the loss rows of ``G - G_0`` are independent and alike, each with a covariance
    ``Sigma`` symmetric in the non-previous entries, as the action is (it sees a row through its
    previous-token entry and the others alike), of four numbers (not every such covariance: the
    others' common mode has at least ``s_o^2`` of variance given ``x_prev``):
    ``x_prev = s_p xi_0``, ``x_other = s_o xi_k + lam xi_0 + kap zeta``
    with standard normals ``xi, zeta``; then the tangent component is removed. So
    ``H(q) = (n_pos ln det Sigma + ln(u^T Sigma^-1 u)) / 2`` up to a constant, ``u`` the row's
    unit tangent, and ``E_q |G|^2`` is exact; the data part of ``E_q[S]`` is a Monte Carlo mean
    over ``n_samples`` draws fixed by ``seed`` (the same draws at every ``c``, ``P`` and ``N``, so
    the profile is smooth in each). Unlike the Laplace correction (:func:`fluctuation_entropy`) it
    needs no positive Hessian; without data it holds the prior exactly.

    Args:
        arch: the network (softmax attention).
        P: number of training sequences, ``> 0``.
        N: inverse temperature, ``> 0`` and finite.
        c: copy strengths, shape ``(n,)``.
        n_samples: Monte Carlo draws of ``G`` for the data part, ``>= 1``.
        seed: the draws' seed.

    Returns:
        ``(F, theta)``: ``F_q(c)`` up to a constant common to every ``c``, ``P`` and ``N`` of one
            ``arch`` (shape ``(n,)``), and the fitted ``(ln s_p, ln s_o, lam, ln kap)`` (shape
            ``(n, 4)``).

    Raises:
        ValueError: naming ``attention``, ``P``, ``N``, ``c`` or ``n_samples``.
    """
    from scipy.optimize import minimize

    P, N, c = _variational_checks(arch, P, N, c)
    n_samples = checks.integer("n_samples", n_samples, 1)
    with precision.float64():
        fn = _variational_objective(arch, n_samples)
        n = int(network.n_loss_positions(arch))
        k0, ko, kz = jax.random.split(jax.random.PRNGKey(int(seed)), 3)
        draws = (  # drawn once: every c and every step of the fit sees the same ones
            jax.random.normal(k0, (n_samples, n), jnp.float64),
            jax.random.normal(ko, (n_samples, n, arch.L - 1), jnp.float64),
            jax.random.normal(kz, (n_samples, n), jnp.float64),
        )
        P64, N64 = jnp.float64(P), jnp.float64(N)
        # the prior, with a small common mode (kap = 0 is a stationary point by the sign symmetry)
        theta = np.array([0.5 * np.log(arch.sigma_G2 / N)] * 2 + [0.0, 0.5 * np.log(arch.sigma_G2 / N) - 3])
        F, thetas = [], []

        def value_and_grad(t, c64):
            return tuple(np.asarray(v, float) for v in fn(jnp.asarray(t), c64, P64, N64, draws))

        for ci in c:  # each c warm-started from its neighbour's fit
            res = minimize(
                value_and_grad,
                theta,
                args=(jnp.float64(ci),),
                jac=True,
                method="L-BFGS-B",
                options=dict(ftol=1e-13, gtol=1e-9),
            )
            theta = res.x
            F.append(float(res.fun))
            thetas.append(theta)
    return np.asarray(F), np.asarray(thetas)


def _variational_checks(
    arch: network.CopyArch, P: float, N: float, c, what: str = "the variational profile"
) -> tuple[float, float, np.ndarray]:
    """The small-``N`` theories' arguments checked, each ``ValueError`` naming its parameter."""
    arch = arch.validate()
    if arch.attention != "softmax":
        raise ValueError(f"attention must be 'softmax' for {what}, got {checks.plain(arch.attention)}")
    P = checks.positive("P", P)
    N = action.check_N(N)
    if not np.isfinite(N):
        raise ValueError(f"N must be finite for {what} (at N = inf it is the reduced action)")
    c = checks.as_array("c", c, ndim=1)  # finite
    if c.size == 0:
        raise ValueError("c must be a non-empty list of finite numbers, got []")
    return P, N, c.astype(float)


@functools.cache
def _variational_objective(arch: network.CopyArch, n_samples: int):
    """``(F, dF/dtheta)`` of :func:`variational_profile` at one ``c``, jitted once per
    architecture and number of draws (``c``, ``P``, ``N`` and the draws are inputs)."""
    L = arch.L
    n = int(network.n_loss_positions(arch))
    e0 = jnp.zeros(L).at[0].set(1.0)  # the row's frame: its previous token first
    u = (e0 - 1.0 / L) / jnp.sqrt(1.0 - 1.0 / L)

    def objective(theta, c, P, N, draws):
        h = action.hyper(arch, 1.0, jnp.float64)._replace(N=N)
        xi0, xio, zeta = draws
        sp, so, lam, kap = jnp.exp(theta[0]), jnp.exp(theta[1]), theta[2], jnp.exp(theta[3])
        x = jnp.concatenate([(sp * xi0)[..., None], so * xio + (lam * xi0 + kap * zeta)[..., None]], -1)
        x = x - (jnp.einsum("mlk,k->m", x, u) / n)[:, None, None] * u  # off the tangent
        A = jax.nn.softmax(c * (e0 - 1.0 / L) + x, axis=-1)
        st = action.ActionStats(
            A[..., 0].sum(-1), jnp.sum(A**2, axis=(-1, -2)), jnp.full(n_samples, n), jnp.full(n_samples, n)
        )
        data = jnp.mean(action.reduced_action(st, jnp.zeros(n_samples), P, h))
        factor = jnp.zeros((L, L + 1)).at[0, 0].set(sp).at[1:, 0].set(lam)
        factor = factor.at[1:, 1:L].set(so * jnp.eye(L - 1)).at[1:, L].set(kap)
        cov = factor @ factor.T
        # E|G|^2 = |G_0|^2 + tr(projected covariance), exactly
        G2 = n * c**2 * (L - 1) / L + n * jnp.trace(cov) - u @ cov @ u
        entropy = 0.5 * (n * jnp.linalg.slogdet(cov)[1] + jnp.log(u @ jnp.linalg.solve(cov, u)))
        return data + N * G2 / (2 * arch.sigma_G2) - entropy

    return jax.jit(jax.value_and_grad(objective))


def variational_log_odds(
    arch: network.CopyArch,
    P: float,
    N: float,
    c_barrier: float,
    spacing: float = 0.1,
    n_samples: int = 256,
    seed: int = 0,
) -> float:
    """``ln(p_copy / p_uniform)`` from the variational profile (:func:`variational_profile`):
    ``e^{-F_q(c)}`` integrated (:func:`basin_masses`) on either side of ``c_barrier`` over a grid
    of ``c`` from ``c = -1`` to ``ln(L - 1) + 4`` (previous-token weight 0.98).

    Args:
        arch: the network (softmax attention).
        P: number of training sequences.
        N: inverse temperature (finite).
        c_barrier: the copy strength dividing the basins.
        spacing: the grid's spacing in ``c``.
        n_samples: Monte Carlo draws per ``c``.
        seed: the draws' seed.

    Returns:
        The basins' log-odds (positive: the copy basin holds more of the posterior).
    """
    spacing = checks.positive("spacing", spacing)
    c = np.arange(-1.0, np.log(arch.L - 1) + 4 + spacing / 2, spacing)
    F, _ = variational_profile(arch, P, N, c, n_samples, seed)
    low, high = basin_masses(c, np.exp(-(F - F.min())), c_barrier)
    return float(np.log(high) - np.log(low))


def p_star_variational(
    arch: network.CopyArch, N: float, P0: float | None = None, n_samples: int = 256, seed: int = 0, xtol: float = 0.5
) -> float | None:
    """The ``P`` at which the variational basins' log-odds (:func:`variational_log_odds`, split at
    the reduced action's barrier) vanish: secant steps from ``P0`` and ``1.1 P0`` until the
    log-odds change sign (each step at most a quarter of ``P``), then Brent's method.

    Args:
        arch: the network (softmax attention).
        N: inverse temperature (finite).
        P0: where to start; default the reduced action's ``P*``.
        n_samples: Monte Carlo draws per ``c``.
        seed: the draws' seed.
        xtol: Brent's tolerance on ``P``.

    Returns:
        The variational ``P*``, or ``None`` when 20 steps find no change of sign.
    """
    P_red, a_bar = theory_barrier(arch, N)
    c_bar = float(copy_strength(np.asarray(a_bar), arch.L))
    P0 = checks.positive("P0", P_red if P0 is None else P0)

    def lo(P):
        return variational_log_odds(arch, P, N, c_bar, n_samples=n_samples, seed=seed)

    return _zero_in_P(lo, P0, xtol)


def _zero_in_P(log_odds, P0: float, xtol: float, first: float = 0.1) -> float | None:
    """The zero of a basins' log-odds curve in ``P``, which rise with ``P``: secant steps from
    ``P0`` and ``(1 +- first) P0`` (towards the zero) until it changes sign (a step at most a
    quarter of ``P``; the longest such step towards the zero when the secant's slope is not
    positive; at least ``xtol``, so that a secant closing in from one side brackets the zero), then
    Brent's method on the last bracket; ``None`` after 20 steps, or at once where a step leaves
    the curve unchanged to rounding (log-odds that do not depend on ``P``, as with no data term)."""
    from scipy.optimize import brentq

    log_odds = _remembered(log_odds)
    y0 = log_odds(P0)
    P1 = (1 - first if y0 > 0 else 1 + first) * P0
    Ps, ys = [P0, P1], [y0, log_odds(P1)]
    for _ in range(20):
        if ys[-1] == 0 or np.sign(ys[-1]) != np.sign(ys[-2]):
            break
        if Ps[-1] == Ps[-2]:  # the secant landed on the zero to the last bit
            return Ps[-1]
        if abs(ys[-1] - ys[-2]) <= 1e-12 * (1 + abs(ys[-1])):  # flat: no zero anywhere
            return None
        slope = (ys[-1] - ys[-2]) / (Ps[-1] - Ps[-2])
        # the log-odds rise with P (more data favours copying): a secant step where the slope
        # agrees, else the longest step towards the zero
        step = -ys[-1] / slope if slope > 0 else np.sign(-ys[-1]) * np.inf
        step = float(np.clip(step, -0.25 * Ps[-1], 0.25 * Ps[-1]))
        Ps.append(Ps[-1] + (step if abs(step) >= xtol else float(np.sign(step)) * xtol))
        ys.append(log_odds(Ps[-1]))
    else:
        return None
    if ys[-1] == 0:
        return Ps[-1]
    lo, hi = sorted(Ps[-2:])
    return float(brentq(log_odds, lo, hi, xtol=xtol))  # pyright: ignore[reportArgumentType]


# --- large deviations of the row statistics -----------------------------------------------------


def large_deviation_profile(
    arch: network.CopyArch, P: float, N: float, a: np.ndarray, n_samples: int = 1024, seed: int = 0
) -> np.ndarray:
    """``F(a) = -ln p(a)``, the reduced action's posterior (B.3b at any ``G``) projected on the
    mean previous-token weight ``a = s / n_pos``, from the large deviations of the rows
    (``docs/theory/copy_head.md``, section 6).

    Under the prior ``N(0, sigma^2 / N)`` the loss rows are independent, and the action is
    ``S = N |G|^2 / (2 sigma^2) + Phi(s, q)`` with ``s = sum_l a_l``, ``q = sum_l q_l`` (``a_l``
    the row's previous-token weight, ``q_l = |A_l|^2``). So ``p(a) ~ int dq' e^{-Phi(n a, n q')}
    rho_n(a, q')`` with ``rho_n`` the prior density of the rows' means ``(a, q')``. Cramer's theorem
    with its Gaussian prefactor gives ``rho_n ~ n / (2 pi sqrt(det C)) e^{-n I(a, q')}``, where
    ``I(x) = sup_lam (lam . x - Lambda(lam))``, ``Lambda(lam) = ln E_row[e^{lam_1 a_l + lam_2 q_l}]``
    and ``C`` is the covariance of ``(a_l, q_l)`` under the tilted row law; the ``q'`` integral is
    done by Laplace's method. The saddle solves ``E_lam[a_l] = a``, ``lam_2 = -dPhi/dq`` (Newton's
    method, warm-started along the grid of ``a``). The row expectation integrates the previous
    logit on a grid of 384 points (the tilt moves it far into the prior's tail) and the other
    ``L - 1`` logits by ``n_samples`` scrambled Sobol points (they enter through ``sum e^g`` and
    ``sum e^{2g}``, which the tilt moves little). The approximations: Cramer's (its first
    correction along ``a`` is complete where ``Phi`` is linear in ``q``; its curvature in ``q``
    leaves terms of order ``1/n_pos``), and the data average of the reduced action.

    Args:
        arch: the network (softmax attention).
        P: number of training sequences, ``> 0``.
        N: inverse temperature, ``> 0`` and finite.
        a: mean previous-token weights, increasing, in ``(0, 1)``, shape ``(n,)``.
        n_samples: quasi-Monte Carlo points of a row's other logits, ``>= 1`` (a power of 2 keeps
            the Sobol sequence balanced).
        seed: the points' scrambling seed.

    Returns:
        ``F(a)`` up to a constant common to every ``a`` and ``P`` at one ``N``, shape ``(n,)``;
            ``NaN`` where the saddle has no positive curvature in ``q'`` or Newton's method did
            not converge.

    Raises:
        ValueError: naming ``attention``, ``L`` (at least 3), ``P``, ``N``, ``a`` or ``n_samples``.
    """
    P, N, _ = _variational_checks(arch, P, N, [0.0], "the large-deviation profile")
    if arch.L < 3:  # with one other logit q_l is a function of a_l, and the law of (a_l, q_l) degenerate
        raise ValueError(f"L must be >= 3 for the large-deviation profile, got {arch.L}")
    a = checks.as_array("a", a, ndim=1)
    if a.size == 0 or not (np.all((a > 0) & (a < 1)) and np.all(np.diff(a) > 0)):
        raise ValueError(f"a must be increasing numbers in (0, 1), got {checks.plain(a.tolist())}")
    n_samples = checks.integer("n_samples", n_samples, 1)
    with precision.float64():
        table, scan = _large_deviation_program(arch, n_samples)
        X, logw = table(jnp.float64(N), jnp.asarray(_normal_points(n_samples, arch.L - 1, int(seed))))
        F, residual = scan(X, logw, jnp.asarray(a, jnp.float64), jnp.float64(P), jnp.float64(N))
    F = np.asarray(F, float)
    return np.where(np.asarray(residual) < 1e-8, F, np.nan)


@functools.cache
def _large_deviation_program(arch: network.CopyArch, n_samples: int):
    """``(table, scan)`` of :func:`large_deviation_profile`, jitted once per architecture and
    number of draws: ``table(N, z)`` the row law's points, ``(a_l, q_l)`` as two rows, and their
    log-weights;
    ``scan(X, logw, a, P, N)`` the profile and Newton's last residual at each ``a``."""
    L, J = arch.L, 384
    n = float(network.n_loss_positions(arch))

    def table(N, z):
        sd = jnp.sqrt(arch.sigma_G2 / N)
        gp = jnp.linspace(-8 * sd, 8 * sd + jnp.log(L) + 5, J)  # the previous logit: a quadrature
        lw = -(gp**2) / (2 * sd**2)
        go = sd * z  # the others: quasi-Monte Carlo
        Z1, Z2 = jnp.exp(go).sum(-1), jnp.exp(2 * go).sum(-1)
        E = jnp.exp(gp)[:, None]
        a_l = E / (E + Z1)
        q_l = (E**2 + Z2) / (E + Z1) ** 2
        logw = jnp.broadcast_to(lw[:, None] - jax.scipy.special.logsumexp(lw) - jnp.log(n_samples), a_l.shape)
        return jnp.stack([a_l.ravel(), q_l.ravel()]), logw.ravel()

    def scan(X, logw, a_grid, P, N):
        h = action.hyper(arch, 1.0, jnp.float64)._replace(N=N)

        def phi(sq):  # the action less the prior, at the rows' sums (s, q)
            nn = jnp.full_like(sq[0], n)
            return action.reduced_action(action.ActionStats(sq[0], sq[1], nn, nn), jnp.float64(0.0), P, h)

        def weights(lam, shift):
            # e^(log-weight - shift): the exponential is the cost of a pass over the rows (a
            # matrix-vector product over them is nearly free beside it), so one per pass
            return jnp.exp(logw + lam[0] * X[0] + lam[1] * X[1] - shift)

        # the rows' statistics and their squares, (6, rows): one product with the weights gives
        # the tilted mass and raw moments of a Newton step
        features = jnp.stack([jnp.ones_like(X[0]), X[0], X[1], X[0] ** 2, X[0] * X[1], X[1] ** 2])

        def solve(lam, shift, a):
            """``Lambda(lam)`` and the saddle's equations at ``lam``, their residual and Jacobian
            (``d mu / d lam`` is the tilted covariance), from one pass over the rows. The weights
            are scaled by ``e^-shift``, ``Lambda`` where the step began: a step moves a
            log-weight by at most 40 (``|step| <= 20``, statistics in ``(0, 1]``), far from
            overflow, and the largest weight stays above ``e^-40 / rows``."""
            m = jnp.matmul(features, weights(lam, shift), precision=jax.lax.Precision.HIGHEST)
            mu = m[1:3] / m[0]
            c = m[3:] / m[0] - jnp.array([mu[0] ** 2, mu[0] * mu[1], mu[1] ** 2])
            cov = jnp.array([[c[0], c[1]], [c[1], c[2]]])
            g, H = jax.grad(phi)(n * mu), jax.hessian(phi)(n * mu)
            r = jnp.array([mu[0] - a, lam[1] + g[1]])
            J = jnp.stack([cov[0], jnp.array([0.0, 1.0]) + n * H[1] @ cov])
            return shift + jnp.log(m[0]), r, J

        def at(start, a):
            def newton(carry):
                lam, Lam, r, J, k = carry
                step = jnp.linalg.solve(J, -r)
                lam = lam + step * jnp.minimum(1.0, 20.0 / jnp.max(jnp.abs(step)))
                return lam, *solve(lam, Lam, a), k + 1

            def going(carry):
                return (jnp.max(jnp.abs(carry[2])) > 1e-11) & (carry[4] < 40)

            lam0, Lam0 = start
            lam, Lam, r, _, _ = jax.lax.while_loop(going, newton, (lam0, *solve(lam0, Lam0, a), 0))
            # the profile's terms from central moments at the saddle (two passes, not the raw
            # moments: the covariance's determinant and the cumulants lose no digits)
            w = weights(lam, Lam)
            w = w / w.sum()
            mu = jnp.stack([w @ X[0], w @ X[1]])
            d, d1 = X[0] - mu[0], X[1] - mu[1]
            c01 = w @ (d * d1)
            cov = jnp.array([[w @ d**2, c01], [c01, w @ d1**2]])
            H = jax.hessian(phi)(n * mu)
            curv = n**2 * H[1, 1] + n * jnp.linalg.inv(cov)[1, 1]
            F = phi(n * mu) + n * (lam @ mu - Lam) + 0.5 * jnp.linalg.slogdet(cov)[1] + 0.5 * jnp.log(curv)
            # the saddle point's first correction along a: (rho4 / 8 - 5 rho3^2 / 24) / n
            m2, m3, m4 = w @ d**2, w @ d**3, w @ d**4
            F = F - jnp.log1p(((m4 / m2**2 - 3) / 8 - 5 * m3**2 / m2**3 / 24) / n)
            err = jnp.max(jnp.abs(r))
            # a point where Newton's method failed must not start the next one from its garbage
            return jax.lax.cond(err < 1e-8, lambda: (lam, Lam), lambda: start), (F, jnp.where(curv > 0, err, jnp.inf))

        # outward from the prior's mean (zero tilt): up the grid from there, then down from it,
        # each warm-started from its neighbour
        mean = jnp.exp(logw - jax.scipy.special.logsumexp(logw)) @ X[0]
        m = a_grid.size
        k = jnp.clip(jnp.searchsorted(a_grid, mean), 0, m - 1)
        j = jnp.arange(m)
        order = jnp.where(j < m - k, k + j, m - 1 - j)

        zero = (jnp.zeros(2, jnp.float64), jnp.float64(0.0))  # no tilt: Lambda(0) = 0, the weights' sum

        def step(start, jj):
            start = jax.lax.cond(jj == m - k, lambda: zero, lambda: start)  # the turn: back to the mean
            return at(start, a_grid[order[jj]])

        F, err = jax.lax.scan(step, zero, j)[1]
        return jnp.zeros(m).at[order].set(F), jnp.zeros(m).at[order].set(err)

    return jax.jit(table), jax.jit(scan)


@functools.cache
def _normal_points(n: int, d: int, seed: int) -> np.ndarray:
    """``n`` scrambled Sobol points of the standard normal in ``d`` dimensions (``scipy.stats.qmc``;
    the error of a smooth mean falls nearly as ``1/n``, against ``1/sqrt(n)`` for random draws)."""
    from scipy.stats import norm, qmc

    u = qmc.Sobol(d, scramble=True, rng=np.random.default_rng(seed)).random(n)
    return norm.ppf(np.clip(u, 1e-12, 1 - 1e-12))


def large_deviation_log_odds(
    arch: network.CopyArch, P: float, N: float, a_barrier: float, n_a: int = 200, n_samples: int = 1024, seed: int = 0
) -> float:
    """``ln(p_copy / p_uniform)`` from the large-deviation profile
    (:func:`large_deviation_profile`): ``e^{-F(a)}`` integrated (:func:`basin_masses`) on either
    side of ``a_barrier`` over ``n_a`` points equally spaced in ``ln(a / (1 - a))`` from
    ``a = 0.2 / L`` to 0.99.

    Args:
        arch: the network (softmax attention).
        P: number of training sequences.
        N: inverse temperature (finite).
        a_barrier: the previous-token weight dividing the basins.
        n_a: points of the grid of ``a``.
        n_samples: quasi-Monte Carlo points of a row's other logits.
        seed: the points' scrambling seed.

    Returns:
        The basins' log-odds (positive: the copy basin holds more of the posterior).

    Raises:
        ValueError: where the profile is ``NaN`` somewhere on the grid (naming the ``a``).
    """
    n_a = checks.integer("n_a", n_a, 8)
    x = weight_logits(arch.L, n_a)
    a = 1 / (1 + np.exp(-x))
    F = large_deviation_profile(arch, P, N, a, n_samples, seed)
    ok = np.isfinite(F)
    # a tail with no saddle (a tilt too far for Newton's method) may be left out where the profile
    # has already risen 20 above its minimum on the way there, and is still rising (it holds less
    # than e^-20), and an upper tail only beyond the barrier (the copy basin is never cut)
    lo, hi = (np.flatnonzero(ok)[[0, -1]]) if ok.any() else (0, -1)
    inner = np.zeros_like(ok)
    inner[lo : hi + 1] = True
    low_cut = lo > 0 and not (F[lo] > F[ok].min() + 20 and F[lo] > F[lo + 1])
    high_cut = hi < a.size - 1 and not (F[hi] > F[ok].min() + 20 and F[hi] > F[hi - 1] and a[hi] > a_barrier)
    edges_high = ok.sum() > 1 and not (low_cut or high_cut)
    if not (ok[inner].all() and edges_high):
        bad = a[~ok]
        raise ValueError(f"the large-deviation profile has no saddle at a = {bad.min():.4g}..{bad.max():.4g} (P = {P})")
    F = np.where(ok, F, np.inf)
    dens = np.exp(-(F - F[ok].min())) * a * (1 - a)  # da = a (1 - a) dx
    low, high = basin_masses(x, dens, float(np.log(a_barrier / (1 - a_barrier))))
    return float(np.log(high) - np.log(low))


def basin_masses(x: np.ndarray, density: np.ndarray, divider: float) -> tuple[float, float]:
    """The masses of a density below and above ``divider``, by the trapezoid rule on the grid
    ``x`` split exactly at the divider: the density there is interpolated linearly within its
    cell, so the two masses add up to the trapezoid rule over the whole grid, and the cell that
    straddles the divider is shared between them rather than left out.

    Args:
        x: The grid, increasing.
        density: The density at ``x`` (non-negative; ``0`` where it vanishes).
        divider: Where the basins meet, inside the grid.

    Returns:
        ``(below, above)``.

    Raises:
        ValueError: If the divider is not inside the grid.
    """
    from scipy.integrate import trapezoid

    x, density = np.asarray(x, float), np.asarray(density, float)
    if not x[0] < divider < x[-1]:
        raise ValueError(f"divider must lie inside the grid ({x[0]:.6g}, {x[-1]:.6g}), got {divider:.6g}")
    j = int(np.searchsorted(x, divider))  # x[j - 1] < divider <= x[j]
    at = float(np.interp(divider, x[j - 1 : j + 1], density[j - 1 : j + 1]))
    below = trapezoid(np.r_[density[:j], at], np.r_[x[:j], divider])
    above = trapezoid(np.r_[at, density[j:]], np.r_[divider, x[j:]])
    return float(below), float(above)


class LargeDeviationPStar(NamedTuple):
    """The large-deviation ``P*`` (:func:`p_star_large_deviation`) with its own error.

    Attributes:
        p_star: The mean over the scrambles of their ``P*`` at ``n_samples`` (``None`` where a
            scramble's search found no change of sign).
        error: The standard error of that mean, from the spread of the independent scrambles.
        n_samples: The quasi-Monte Carlo points of a row's other logits it ended at.
        converged: Whether the mean moved by less than ``rtol`` of itself on the last doubling
            of ``n_samples`` and ``error`` is below ``rtol`` of it.
        scrambles: Each scramble's ``P*`` at ``n_samples``; where one found no change of sign, those
            up to it, that one ``NaN`` (the later ones are not searched).
        path: ``(n_samples, mean P*, error)`` at each number of points tried.
    """

    p_star: float | None
    error: float
    n_samples: int
    converged: bool
    scrambles: tuple[float, ...]
    path: tuple[tuple[int, float, float], ...]


def p_star_large_deviation(
    arch: network.CopyArch,
    N: float,
    P0: float | None = None,
    n_samples: int = 512,
    seed: int = 0,
    rtol: float = 1e-3,
    n_scrambles: int = 4,
    max_samples: int = 1 << 14,
) -> LargeDeviationPStar:
    """The ``P`` at which the large-deviation basins' log-odds (:func:`large_deviation_log_odds`,
    split at the reduced action's barrier) vanish, converged in the row samples, with its error.

    Each of ``n_scrambles`` independent scramblings of the Sobol points (seeds ``seed``,
    ``seed + 1``, ...) gives a ``P*`` by the secant-then-Brent search of
    :func:`p_star_variational` (to ``rtol / 20`` of ``P``); their mean is the estimate and the
    standard error of the mean its error. The points per scramble start at ``n_samples`` and
    double (each search warm-started at its last ``P*``) until the mean moves by less than
    ``rtol`` of itself and the error is below ``rtol`` of it, or until ``max_samples``:
    ``converged`` says which.

    Args:
        arch: the network (softmax attention).
        N: inverse temperature (finite).
        P0: where to start; default the reduced action's ``P*``.
        n_samples: the first number of quasi-Monte Carlo points of a row's other logits.
        seed: the first scramble's seed.
        rtol: the relative tolerance of the estimate (its move on a doubling, and its error).
        n_scrambles: independent scramblings, ``>= 2``.
        max_samples: the most points per scramble.

    Returns:
        A :class:`LargeDeviationPStar`.

    Raises:
        ValueError: naming ``P0``, ``n_samples``, ``rtol``, ``n_scrambles`` or ``max_samples``.
    """
    n = checks.integer("n_samples", n_samples, 1)
    rtol = checks.positive("rtol", rtol)
    k = checks.integer("n_scrambles", n_scrambles, 2)
    top = checks.integer("max_samples", max_samples, n)
    if P0 is not None:
        checks.positive("P0", P0)
    P_red, a_bar = theory_barrier(arch, N)
    P0 = P_red if P0 is None else float(P0)
    starts, path, last = [P0] * k, [], None
    while True:
        found: list[float | None] = []
        for j, start in enumerate(starts):
            if found and found[-1] is None:  # one scramble without a zero leaves the mean without one
                break
            # warm where the zero is near: a doubling's scramble from its own last zero, a first
            # pass's later scrambles from the first one's (they differ by about the error)
            warm = last is not None
            if not warm and j > 0 and found[0] is not None:
                start, warm = found[0], True
            found.append(
                _zero_in_P(
                    lambda P, j=j, n=n: large_deviation_log_odds(arch, P, N, a_bar, n_samples=n, seed=seed + j),
                    start,
                    xtol=rtol / 20 * start,
                    first=rtol if warm else 0.1,
                )
            )
        zeros = [float(f) for f in found if f is not None]
        if len(zeros) < len(found):
            return LargeDeviationPStar(
                None, float("nan"), n, False, tuple(np.nan if f is None else f for f in found), tuple(path)
            )
        P_star = float(np.mean(zeros))
        error = float(np.std(zeros, ddof=1) / np.sqrt(k))
        path.append((n, P_star, error))
        done = last is not None and abs(P_star - last) < rtol * P_star and error < rtol * P_star
        if done or 2 * n > top:
            return LargeDeviationPStar(P_star, error, n, done, tuple(zeros), tuple(path))
        starts, last, n = zeros, P_star, 2 * n


def fluctuation_p_stars(
    arch: network.CopyArch, N: float, P0: float, large_deviation_samples: int
) -> tuple[float | None, LargeDeviationPStar | None]:
    """The ``P*`` of the theories beyond the reduced action at ``(arch, N)``: the Gaussian-corrected
    one nearest ``P0`` (:func:`p_star_corrected_near`) and the large-deviation one
    (:func:`p_star_large_deviation`, two scrambles of ``large_deviation_samples`` points, one pass).

    Args:
        arch: the network (softmax attention).
        N: inverse temperature (finite).
        P0: the reduced action's ``P*``.
        large_deviation_samples: points per scramble; 0 leaves the large-deviation ``P*`` out.

    Returns:
        ``(corrected, large_deviation)``, ``None`` where a theory has no answer or was left out.
    """
    n = checks.integer("large_deviation_samples", large_deviation_samples, 0)
    ld = p_star_large_deviation(arch, N, n_samples=n, max_samples=n, n_scrambles=2) if n else None
    return p_star_corrected_near(arch, N, P0), ld
