"""Minima and phase structure of the copy-head action (Spec B, section 3; ``docs/theory/copy_head.md``).

Softmax: ``S(c_G)`` (:func:`jaxattn.copyhead.action.softmax_action`) is scanned on a grid of
``c_G``; every interior grid minimum is refined by Newton's method. Its lowest minimum (the
uniform branch, ``c_G ~ 0``) and highest (the copy branch, ``c_G ~ (ln L + ln ln L)/2``) are
kept (:func:`softmax_minima`). Over a grid of ``P`` (vmapped, :func:`softmax_transition`) this
gives ``P*`` where the two exchange global rank (refined by bisection on ``S_copy - S_uniform``),
the spinodals where one of them appears or disappears, and the jump in ``c_G`` at ``P*``. Without
two minima there is no jump; ``P*`` is then the steepest point of the continuous crossover.
:func:`softmax_phase_diagram` runs this over ``(L, V)`` in one jitted call;
:func:`softmax_critical_point` finds the ``L`` where the first-order line ends (the cusp
``S' = S'' = S''' = 0``).

Linear attention (its 2-D minimum, the onsets from the Hessian at ``A = 0``, the crossover) is in
:mod:`jaxattn.copyhead.linear`; the curves against ``P`` and the summary of both are
:mod:`jaxattn.copyhead.curves`.

Public helpers run in float64 (``jax.enable_x64`` inside) and return NumPy values.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import DTypeLike
from jaxtyping import Array, Float

from jaxattn.copyhead import action, network
from jaxattn.core import checks, precision

N_C = 1024  # c_G grid points
P_BATCH = 8  # P values per lax.map step of a scan


def c_grid(L: float | Array, n_c: int = N_C, dtype: DTypeLike | None = None) -> Float[Array, " n_c"]:
    """``c_G`` from -2 to ``2 ln L + 4`` (the copy minimum sits near ``(ln L + ln ln L)/2``).

    Args:
        L: sequence length (a number or a scalar array; may be traced).
        n_c: number of grid points.
        dtype: dtype of the grid; default ``jnp.result_type(L, float)``.

    Returns:
        Evenly spaced ``c_G`` values, shape (n_c,).
    """
    dtype = dtype or jnp.result_type(L, float)
    return jnp.linspace(-2.0, 2.0 * jnp.log(L) + 4.0, n_c, dtype=dtype)


class SoftmaxMinima(NamedTuple):
    """Global minimum ``(c, S)`` and the lowest / highest local minima (``lo`` uniform branch,
    ``hi`` copy branch; the same point when there is one minimum); ``n_minima`` on the grid
    (Spec B, section 3, "Minima").

    Attributes:
        c: ``c_G`` of the global minimum, shape (*b).
        S: action at the global minimum, shape (*b).
        c_lo: ``c_G`` of the lowest local minimum (uniform branch), shape (*b).
        S_lo: action there, shape (*b).
        c_hi: ``c_G`` of the highest local minimum (copy branch), shape (*b).
        S_hi: action there, shape (*b).
        n_minima: number of interior grid minima (at least 1, as a float), shape (*b).
    """

    c: Float[Array, "*b"]
    S: Float[Array, "*b"]
    c_lo: Float[Array, "*b"]
    S_lo: Float[Array, "*b"]
    c_hi: Float[Array, "*b"]
    S_hi: Float[Array, "*b"]
    n_minima: Float[Array, "*b"]


def _newton_min(f, x, lo, hi, n_iter: int = 10):
    """Newton on ``f'`` from ``x`` kept inside ``[lo, hi]`` (a grid bracket of a minimum)."""
    d1 = jax.grad(f)
    d2 = jax.grad(d1)

    def body(_, x):
        g, H = d1(x), d2(x)
        step = jnp.where(H > 0, g / jnp.where(H > 0, H, 1.0), jnp.sign(g) * (hi - lo) / 4)
        return jnp.clip(x - step, lo, hi)

    return jax.lax.fori_loop(0, n_iter, body, x)


class SoftmaxGrid(NamedTuple):
    """The ``c_G`` grid with its ``P``-independent statistics (:func:`softmax_grid`).

    Attributes:
        c: the ``c_G`` grid, shape (n_c,).
        st: :class:`~jaxattn.copyhead.action.ActionStats` on the grid: ``s``, ``q`` shape (n_c,),
            ``u = n = n_pos`` scalars.
        G2: prior norm ``|G|^2`` on the grid, shape (n_c,).
    """

    c: Float[Array, " n_c"]
    st: action.ActionStats
    G2: Float[Array, " n_c"]


def softmax_grid(h: action.CopyHyper, n_c: int = N_C) -> SoftmaxGrid:
    """``c_G`` grid, ``(s, q)`` and ``|G|^2`` on it: they do not depend on ``P``, so a scan over
    ``P`` computes them once (``u = n = n_pos`` stay scalars).

    Args:
        h: hyper-parameters.
        n_c: number of grid points (:func:`c_grid`).

    Returns:
        Named tuple :class:`SoftmaxGrid` with the grid ``c``, its statistics ``st`` and ``G2``, shape (n_c,).
    """
    cg = c_grid(h.L, n_c)
    st, G2 = action.softmax_stats(cg, h)
    return SoftmaxGrid(cg, st._replace(u=h.n_pos, n=h.n_pos), G2)


def softmax_minima(
    P: Float[Array, ""], h: action.CopyHyper, n_c: int = N_C, grid: SoftmaxGrid | None = None
) -> SoftmaxMinima:
    """Local minima of ``S(c_G)`` at one ``P``: grid scan, then Newton inside each bracket
    (Spec B, section 3, "Minima"; ``S`` is (B.3b) on the softmax ansatz).

    Args:
        P: number of training sequences, scalar.
        h: hyper-parameters.
        n_c: number of grid points; ignored when ``grid`` is given.
        grid: a precomputed :func:`softmax_grid` of ``h`` (built here when ``None``).

    Returns:
        Named tuple :class:`SoftmaxMinima` of scalars: the global, lowest and highest minima and their count.
    """
    grid = softmax_grid(h, n_c) if grid is None else grid
    cg = grid.c
    n_c = cg.shape[0]
    y = action.reduced_action(grid.st, grid.G2, P, h)
    is_min = (y[1:-1] < y[:-2]) & (y[1:-1] <= y[2:])
    idx = jnp.arange(1, n_c - 1)
    n_min = jnp.sum(is_min)
    i_glob = jnp.argmin(y)
    i_lo = jnp.where(n_min > 0, jnp.min(jnp.where(is_min, idx, n_c)), i_glob)
    i_hi = jnp.where(n_min > 0, jnp.max(jnp.where(is_min, idx, -1)), i_glob)
    f = lambda c: action.softmax_action(c, P, h)  # noqa: E731

    def refine(i):
        lo, hi = cg[jnp.maximum(i - 1, 0)], cg[jnp.minimum(i + 1, n_c - 1)]
        c = _newton_min(f, cg[i], lo, hi)
        return c, f(c)

    c_lo, S_lo = refine(i_lo)
    c_hi, S_hi = refine(i_hi)
    take_hi = S_hi < S_lo
    return SoftmaxMinima(
        jnp.where(take_hi, c_hi, c_lo),
        jnp.minimum(S_lo, S_hi),
        c_lo,
        S_lo,
        c_hi,
        S_hi,
        jnp.maximum(n_min, 1).astype(y.dtype),
    )


@jax.jit
def softmax_minima_over_P(Ps: Float[Array, " nP"], h: action.CopyHyper) -> SoftmaxMinima:
    """:func:`softmax_minima` at each of ``Ps`` on one grid of ``c_G``, in one compiled program
    for every architecture and ``N`` (the hyper-parameters are inputs).

    Args:
        Ps: numbers of training sequences, shape (nP,).
        h: hyper-parameters.

    Returns:
        :class:`SoftmaxMinima` with fields of shape (nP,).
    """
    grid = softmax_grid(h)
    return jax.vmap(lambda P: softmax_minima(P, h, grid=grid))(Ps)


class SoftmaxTransition(NamedTuple):
    """``P*`` (jump, or steepest crossover when ``first_order`` is false), the spinodals (lower:
    the copy minimum appears; upper: the uniform one disappears; NaN without two minima),
    ``c_G`` and the previous-token weight just below and above ``P*``, and ``jump = c_above -
    c_below`` (0 when continuous). Spec B, section 3, "Minima".

    Attributes:
        P_star: transition point ``P*``, shape (*b).
        P_spinodal_lo: lower spinodal (NaN without two minima), shape (*b).
        P_spinodal_hi: upper spinodal (NaN without two minima), shape (*b).
        first_order: 1.0 if two minima coexist somewhere on the grid, else 0.0, shape (*b).
        c_below: ``c_G`` just below ``P*``, shape (*b).
        c_above: ``c_G`` just above ``P*``, shape (*b).
        a_below: previous-token weight just below ``P*``, shape (*b).
        a_above: previous-token weight just above ``P*``, shape (*b).
        jump: ``c_above - c_below`` (0 when continuous), shape (*b).
    """

    P_star: Float[Array, "*b"] | np.ndarray
    P_spinodal_lo: Float[Array, "*b"] | np.ndarray
    P_spinodal_hi: Float[Array, "*b"] | np.ndarray
    first_order: Float[Array, "*b"] | np.ndarray
    c_below: Float[Array, "*b"] | np.ndarray
    c_above: Float[Array, "*b"] | np.ndarray
    a_below: Float[Array, "*b"] | np.ndarray
    a_above: Float[Array, "*b"] | np.ndarray
    jump: Float[Array, "*b"] | np.ndarray


def _bisect(pred, lo, hi, n_iter):
    """Bisection in ``ln P`` for the switch of a boolean ``pred`` (``pred(lo)`` true)."""

    def body(_, b):
        lo, hi = b
        mid = jnp.sqrt(lo * hi)
        ok = pred(mid)
        return jnp.where(ok, mid, lo), jnp.where(ok, hi, mid)

    return jax.lax.fori_loop(0, n_iter, body, (lo, hi))


def softmax_transition(
    Ps: Float[Array, " nP"], h: action.CopyHyper, n_c: int = N_C, n_bisect: int = 40
) -> tuple[SoftmaxTransition, SoftmaxMinima]:
    """The transition on an increasing grid ``Ps`` (traceable; vmap over hyper-parameters), and
    the minima at every grid ``P`` (Spec B, section 3, "Minima": the first-order jump at ``P*``).

    Args:
        Ps: increasing grid of ``P``, shape (nP,).
        h: hyper-parameters.
        n_c: number of ``c_G`` grid points.
        n_bisect: bisection steps (in ``ln P``) for the spinodals and ``P*``.

    Returns:
        ``(transition, minima)``: a :class:`SoftmaxTransition` of scalars and the
            :class:`SoftmaxMinima` at every grid ``P``, shape (nP,).
    """
    grid = softmax_grid(h, n_c)
    # lax.map in batches: the (batch x n_c) actions stay in cache instead of a (nP x n_c) array
    m = jax.lax.map(lambda P: softmax_minima(P, h, grid=grid), Ps, batch_size=P_BATCH)
    nP = Ps.shape[0]
    two = m.n_minima >= 2
    idx = jnp.arange(nP)
    first_order = jnp.any(two)
    i0 = jnp.min(jnp.where(two, idx, nP - 1))
    i1 = jnp.max(jnp.where(two, idx, 0))

    # spinodals: the first and last grid point with two minima, refined by bisection
    has2 = lambda P: softmax_minima(P, h, grid=grid).n_minima >= 2  # noqa: E731
    s_lo = _bisect(lambda P: ~has2(P), Ps[jnp.maximum(i0 - 1, 0)], Ps[i0], n_bisect)
    s_hi = _bisect(has2, Ps[i1], Ps[jnp.minimum(i1 + 1, nP - 1)], n_bisect)
    nan = jnp.full_like(Ps[0], jnp.nan)
    spin_lo = jnp.where(first_order & (i0 > 0), jnp.sqrt(s_lo[0] * s_lo[1]), nan)
    spin_hi = jnp.where(first_order & (i1 < nP - 1), jnp.sqrt(s_hi[0] * s_hi[1]), nan)

    # P*: between the spinodals two minima coexist and S_copy - S_uniform changes sign
    def copy_higher(P):
        mm = softmax_minima(P, h, grid=grid)
        return (mm.n_minima >= 2) & (mm.S_hi > mm.S_lo)

    lo, hi = _bisect(copy_higher, s_lo[1], s_hi[0], n_bisect)
    below, above = softmax_minima(lo, h, grid=grid), softmax_minima(hi, h, grid=grid)
    # continuous: the steepest growth of c_G in ln P
    slope = jnp.diff(m.c) / jnp.diff(jnp.log(Ps))
    j = jnp.argmax(slope)
    P_star = jnp.where(first_order, jnp.sqrt(lo * hi), jnp.sqrt(Ps[j] * Ps[j + 1]))
    c_below = jnp.where(first_order, below.c_lo, m.c[j])
    c_above = jnp.where(first_order, above.c_hi, m.c[j + 1])
    tr = SoftmaxTransition(
        P_star,
        spin_lo,
        spin_hi,
        first_order.astype(Ps.dtype),
        c_below,
        c_above,
        action.prev_weight_softmax(c_below, h.L),
        action.prev_weight_softmax(c_above, h.L),
        jnp.where(first_order, c_above - c_below, 0.0),
    )
    return tr, m


def p_star_closed_form(
    L: float | Array, V: float | Array, beta: float | Array = 1.0, sigma_G2: float | Array = 1.0, n_iter: int = 60
) -> Array:
    """Spec B's reconstruction ``P* ~ (V/(V-1)) L x(x+1) / (beta sigma_G^2)`` with the fixed
    point ``x = ln[L(x+1)]/2`` (so ``P* ~ L ln^2 L / 4``); Spec B, section 3, "Closed forms".

    Args:
        L: sequence length (number or array; broadcasts with ``V``).
        V: vocabulary size.
        beta: weight of the data term.
        sigma_G2: prior variance of ``G``.
        n_iter: fixed-point iterations for ``x``.

    Returns:
        The closed-form ``P*``, the broadcast shape of ``L`` and ``V``.
    """
    x = jnp.log(L) / 2
    for _ in range(n_iter):
        x = jnp.log(L * (x + 1)) / 2
    return V / (V - 1) * L * x * (x + 1) / (beta * sigma_G2)


def transition_of(h: action.CopyHyper, n_P: int = 400) -> SoftmaxTransition:
    """The transition of one architecture: :func:`softmax_transition` on ``n_P`` values of ``P``
    from 0.05 to 20 times the closed-form ``P*`` (:func:`p_star_closed_form`), geometric, in
    float64.

    Args:
        h: hyper-parameters (made in float64, :func:`jaxattn.copyhead.action.hyper` inside
            :func:`jaxattn.core.precision.float64`, for a float64 answer).
        n_P: ``P`` grid points.

    Returns:
        :class:`SoftmaxTransition` of NumPy scalars.
    """
    with precision.float64():
        pcf = p_star_closed_form(h.L, h.V, h.beta, h.sigma_G2)
        Ps = jnp.asarray(np.geomspace(0.05, 20.0, n_P)) * pcf
        tr, _ = _transition(Ps, h)
        return SoftmaxTransition(*(np.asarray(v) for v in tr))


_transition = jax.jit(softmax_transition)


@partial(jax.jit, static_argnames=("n_c", "n_bisect"))
def softmax_phase_diagram(
    Ls: Float[Array, " nL"],
    Vs: Float[Array, " nV"],
    x: Float[Array, " nP"],
    base: action.CopyHyper,
    n_c: int = N_C,
    n_bisect: int = 40,
) -> SoftmaxTransition:
    """:func:`softmax_transition` for every ``(L, V)`` in one compiled call; the ``P`` grid of
    each point is ``x`` times the closed-form ``P*`` (:func:`p_star_closed_form`). ``base``
    supplies ``beta, omega, sigma_G2, N`` (cyclic boundary: ``n_pos = L``). Shapes ``(nL, nV)``.

    Args:
        Ls: sequence lengths, shape (nL,).
        Vs: vocabulary sizes, shape (nV,).
        x: ``P`` grid in units of the closed-form ``P*``, increasing, shape (nP,).
        base: hyper-parameters other than ``L``, ``V``, ``n_pos``.
        n_c: number of ``c_G`` grid points.
        n_bisect: bisection steps of :func:`softmax_transition`.

    Returns:
        Named tuple :class:`SoftmaxTransition` with fields of shape (nL, nV).
    """

    def one(L, V):
        h = base._replace(L=L, V=V, n_pos=L)
        Ps = x * p_star_closed_form(L, V, base.beta, base.sigma_G2)
        return softmax_transition(Ps, h, n_c, n_bisect)[0]

    return jax.vmap(lambda L: jax.vmap(lambda V: one(L, V))(Vs))(Ls)


def _cusp(z, h):
    """``(S', S'', S''')`` in ``c`` at ``z = (c, ln P, L)`` (all zero at the critical point)."""
    c, lP, L = z
    hh = h._replace(L=L, n_pos=L)
    f = lambda c: action.softmax_action(c, jnp.exp(lP), hh) / jnp.exp(lP)  # noqa: E731
    d1 = jax.grad(f)
    d2 = jax.grad(d1)
    return jnp.stack([d1(c), d2(c), jax.grad(d2)(c)])


class CriticalPoint(NamedTuple):
    """End of the softmax first-order line (:func:`softmax_critical_point`), the cusp
    ``S' = S'' = S''' = 0`` in ``c`` (Spec B, section 5: for ``L <= 16`` the jump disappears).

    Attributes:
        L: critical sequence length (real).
        P: critical number of sequences.
        c: ``c_G`` there.
        residual: largest of ``|S'|``, ``|S''|``, ``|S'''|`` (of ``S / P``, in ``c``) there.
    """

    L: float
    P: float
    c: float
    residual: float


def softmax_critical_point(
    arch: network.CopyArch, N: float = 1.0, L_bracket: tuple[float, float] = (4.0, 64.0), n_P: int = 2000
) -> CriticalPoint:
    """Where the first-order line ends (cyclic boundary, real ``L``): bisection in ``L`` on
    whether two minima coexist somewhere on a fine ``P`` grid (``n_P`` points from 0.3 to 3 times
    the closed-form ``P*``), then Newton on the cusp conditions ``dS/dc = d2S/dc2 = d3S/dc3 = 0``
    in ``(c, ln P, L)`` from the last first-order point. ``residual`` is the largest of the three
    (over ``P``) there; the bisection's point is returned if Newton does not converge.

    Args:
        arch: the network (softmax; its ``L`` is replaced by the real ``L`` searched, cyclic).
        N: inverse temperature.
        L_bracket: ``(lo, hi)``: the transition is continuous at ``lo`` and first order at ``hi``.
        n_P: number of ``P`` grid points per transition.

    Returns:
        Named tuple :class:`CriticalPoint` with ``L``, ``P``, ``c`` and the cusp ``residual``.

    Raises:
        ValueError: if ``L_bracket`` does not bracket the end of the first-order line.
    """
    with precision.float64():
        h0 = action.hyper(arch, N)
        x = jnp.geomspace(0.3, 3.0, n_P)

        @jax.jit
        def transition(L):
            h = h0._replace(L=L, n_pos=L)
            return softmax_transition(x * p_star_closed_form(L, h.V, h.beta, h.sigma_G2), h, 512, 30)[0]

        lo, hi = L_bracket  # continuous at lo, first order at hi
        if float(transition(jnp.float64(hi)).first_order) < 0.5 or float(transition(jnp.float64(lo)).first_order) > 0.5:
            raise ValueError(f"L_bracket={L_bracket} does not bracket the end of the first-order line")
        for _ in range(30):
            mid = np.sqrt(lo * hi)
            if float(transition(jnp.float64(mid)).first_order) > 0.5:
                hi = mid
            else:
                lo = mid
        tr = transition(jnp.float64(hi))
        z = jnp.array([(float(tr.c_below) + float(tr.c_above)) / 2, float(np.log(tr.P_star)), hi])
        F = jax.jit(lambda z: _cusp(z, h0))
        J = jax.jit(jax.jacfwd(lambda z: _cusp(z, h0)))
        zn = z
        for _ in range(50):
            zn = zn - jnp.linalg.solve(J(zn), F(zn))
        res = float(jnp.max(jnp.abs(F(zn))))
        if not (np.all(np.isfinite(np.asarray(zn))) and res < 1e-8 and lo * 0.8 < float(zn[2]) < hi * 1.2):
            zn, res = z, float(jnp.max(jnp.abs(F(z))))
        return CriticalPoint(float(zn[2]), float(np.exp(zn[1])), float(zn[0]), res)


_MOVED = {
    **{
        n: "jaxattn.copyhead.linear"
        for n in ("LinearMinimum", "LinearOnsets", "kind_of", "linear_crossover", "linear_minimum", "linear_onsets")
    },
    **{n: "jaxattn.copyhead.curves" for n in ("softmax_curves", "linear_curves", "theory_summary")},
}
__getattr__ = checks.moved("jaxattn.copyhead.softmax", _MOVED)
