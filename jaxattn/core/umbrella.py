"""Umbrella sampling along an order parameter, combined with MBAR (``pymbar``): the free-energy
profile ``F(a) = -ln p(a)`` of a target ``p(theta) ~ exp(-N U(theta))`` along ``a = order(theta)``,
across barriers that plain chains do not cross (used for the copy head's first-order
transition, ``docs/theory/copy_head.md``).

Window ``k`` samples the biased target

    p_k(theta) ~ exp(-N U(theta) - (kappa_k / 2) (order(theta) - a_k)^2),

that is ``exp(-N U_k)`` with ``U_k = U + kappa_k (order - a_k)^2 / (2 N)``, by the SGLD kernel of
:mod:`jaxattn.core.kernels.sgld` on :func:`biased_potential` (the copy head's windows run on the
engine, every window and chain in one compiled program: :mod:`jaxattn.copyhead.landscape`). The windows' draws of ``a`` are then reweighted to the unbiased target
by MBAR (started from BAR between neighbouring windows, which converges where a cold start
stalls on barriers of tens of ``kT``): the reduced potential of draw ``n`` in window ``k`` is ``u_k(a_n) = kappa_k (a_n - a_k)^2 / 2``
(``N U`` is common to every window and cancels), and ``pymbar.FES`` histograms the unbiased
density on bins of ``a`` with analytical uncertainties (:func:`profile`). Draws are thinned to
independent ones first, by each window's statistical inefficiency (``pymbar.timeseries``).

Why umbrella windows, and replica exchange between them: the barrier is along one known order
parameter, and the quantity wanted is the profile along it. Windows give it directly, with errors,
at every ``a`` including the barrier top, which a tempered ensemble visits rarely (a temperature
ladder would span all ``L^2 + V^2`` parameters). Exchanging positions between neighbouring windows
(:func:`exchange_delta`, :mod:`jaxattn.core.kernels.exchange`) lets a chain stuck in a slow
direction other than ``a`` walk along the windows and come back decorrelated, at the price of
the biases only: ``N U`` is common to every window and cancels from the swap's acceptance.

pymbar's solvers run in NumPy and SciPy here (:func:`_numpy_solvers`): with JAX, which pymbar
takes whenever it is installed, they compile anew for every number of draws and switch on float64
globally. MBAR starts from BAR between neighbouring windows; where BAR finds no bound
(windows whose chains never moved), :func:`profile` and :func:`probability` raise a
``ValueError`` naming those windows, instead of pymbar's ``BoundsError`` (or, pymbar 4.0 catching
its own errors by a name its module never imports, a ``NameError``).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import sys
from collections import OrderedDict
from collections.abc import Callable
from types import ModuleType
from typing import Any, NamedTuple

import numpy as np
from jaxtyping import Array, Float

from jaxattn.core.checks import plain
from jaxattn.core.notices import route


def _pymbar():
    """pymbar, imported with its log sent to :data:`jaxattn.core.notices.DEPENDENCY_LOG` at debug level (it prints
    through Python's last-resort handler, at import, otherwise), its solvers in NumPy."""
    route("pymbar")
    import pymbar
    import pymbar.mbar
    import pymbar.mbar_solvers
    import pymbar.timeseries

    if pymbar.mbar_solvers.use_jit:
        _numpy_solvers(pymbar.mbar_solvers)
    return pymbar


def _numpy_solvers(module: ModuleType) -> None:
    """pymbar's MBAR solvers (``pymbar.mbar_solvers``) in NumPy and SciPy rather than JAX. With
    JAX, each new number of draws compiles five of its functions (about 1 s on 2 cores): most of
    a small pool's MBAR time, and of a sampled ``P*``'s analysis (a test at ``L = 32`` took 35 s
    with them and 24 s without). NumPy solves a pool of 56 windows of 600 draws faster than a cold
    JAX solve, and one of 2400 draws a window about a third slower; the free energies agree to
    1e-12 (``benchmarks/mbar_solvers.py``). pymbar takes JAX whenever it can import it and has no
    setting for it (4.0), so its module is run again with ``jax`` hidden from its imports."""
    saved = sys.modules.get("jax")
    sys.modules["jax"] = None  # pyright: ignore[reportArgumentType]  # None: `import jax` raises ImportError
    try:
        importlib.reload(module)
    finally:
        if saved is None:
            del sys.modules["jax"]
        else:
            sys.modules["jax"] = saved


class Windows(NamedTuple):
    """Harmonic bias windows on the order parameter.

    Attributes:
        centers: the windows' centres ``a_k``, shape ``(K,)``, increasing.
        spring: the spring constants ``kappa_k > 0`` (in units of the reduced potential), shape ``(K,)``.
    """

    centers: np.ndarray
    spring: np.ndarray


def windows(lo: float, hi: float, n: int, spring: float | None = None) -> Windows:
    """``n`` evenly spaced windows from ``lo`` to ``hi``. The default spring constant makes the
    bias's standard deviation ``1 / sqrt(kappa)`` equal to the spacing, so that neighbouring windows
    overlap (MBAR needs overlapping samples).

    Args:
        lo: the first centre.
        hi: the last centre (``> lo``).
        n: number of windows (``>= 2``).
        spring: the spring constant of every window (``> 0``); default ``1 / spacing^2``.

    Returns:
        :class:`Windows`.

    Raises:
        ValueError: naming ``n``, ``lo``/``hi`` or ``spring``.
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 2:
        raise ValueError(f"n must be an integer >= 2 windows, got {plain(n)}")
    if not (np.isfinite(lo) and np.isfinite(hi) and hi > lo):
        raise ValueError(f"the windows need lo < hi, got lo={plain(lo)}, hi={plain(hi)}")
    centers = np.linspace(float(lo), float(hi), int(n))
    spacing = centers[1] - centers[0]
    kappa = 1.0 / spacing**2 if spring is None else spring
    if not (np.isfinite(kappa) and kappa > 0):
        raise ValueError(f"spring must be a positive spring constant, got {plain(spring)}")
    return Windows(centers, np.full(int(n), float(kappa)))


def check_windows(w: Windows, lo: float, hi: float) -> None:
    """Check that the windows cover ``[lo, hi]``: the first centre at or below ``lo`` and the last
    at or above ``hi`` within one bias width, neighbours no further apart than three bias widths
    ``1 / sqrt(kappa)`` (beyond that their samples do not overlap), and positive springs.

    Args:
        w: the windows.
        lo: the lower end of the range the profile is wanted on.
        hi: the upper end.

    Raises:
        ValueError: naming the windows or the spring constants.
    """
    c, k = np.asarray(w.centers, float), np.asarray(w.spring, float)
    if c.ndim != 1 or c.shape != k.shape or c.size < 2:
        raise ValueError(f"windows need matching 1-D centers and spring of length >= 2, got {c.shape}, {k.shape}")
    if not np.all(np.isfinite(k)) or np.any(k <= 0):
        raise ValueError(f"spring constants must be positive, got {k.tolist()}")
    if np.any(np.diff(c) <= 0):
        raise ValueError("window centers must be strictly increasing")
    width = 1.0 / np.sqrt(k)
    if c[0] - width[0] > lo or c[-1] + width[-1] < hi:
        raise ValueError(f"windows [{c[0]:.4g}, {c[-1]:.4g}] do not cover the range [{lo:.4g}, {hi:.4g}]")
    gaps = np.diff(c) / np.maximum(width[:-1], width[1:])
    if np.any(gaps > 3.0):
        i = int(np.argmax(gaps))
        raise ValueError(
            f"windows at {c[i]:.4g} and {c[i + 1]:.4g} are {gaps[i]:.1f} bias widths apart (at most 3): "
            "their samples do not overlap; add windows or lower the spring constant"
        )


def biased_potential(
    potential_fn: Callable[[Any, Any], Array], order_fn: Callable[[Any], Array], N: float | Array
) -> Callable[[Any, Any], Array]:
    """``U_k(theta, (data, a_k, kappa_k)) = U(theta, data) + kappa_k (order(theta) - a_k)^2 / (2 N)``:
    the potential whose ``exp(-N U_k)`` is window ``k``'s target.

    Args:
        potential_fn: ``U(theta, data)``, a scalar.
        order_fn: ``a = order(theta)``, a scalar.
        N: the factor of the target ``exp(-N U)``.

    Returns:
        The biased potential, taking ``(theta, (data, center, spring))``.
    """

    def U(theta, args):
        data, center, spring = args
        return potential_fn(theta, data) + 0.5 * spring * (order_fn(theta) - center) ** 2 / N

    return U


def exchange_delta(
    order: Float[Array, " K"], centers: Float[Array, " K"], spring: Float[Array, " K"]
) -> Float[Array, " K1"]:
    """The exchange of windows ``i`` and ``i + 1`` (:func:`jaxattn.core.kernels.exchange.swap`):
    ``delta_i = u_i(a_{i+1}) + u_{i+1}(a_i) - u_i(a_i) - u_{i+1}(a_{i+1})`` with the reduced
    biases ``u_k(a) = kappa_k (a - a_k)^2 / 2``; the unbiased ``N U`` is common to both windows
    and cancels, so only the order parameters ``a_k`` of the chains now in each window enter.

    Args:
        order: the order parameter of the chain in each window, shape ``(K,)``.
        centers: the windows' centres, shape ``(K,)``.
        spring: their spring constants, shape ``(K,)``.

    Returns:
        ``delta`` per neighbouring pair, shape ``(K - 1,)``.
    """

    def u(k, a):
        return 0.5 * spring[k] * (a - centers[k]) ** 2

    lo, hi = slice(None, -1), slice(1, None)
    return u(lo, order[hi]) + u(hi, order[lo]) - u(lo, order[lo]) - u(hi, order[hi])


class WindowDraws(NamedTuple):
    """The draws of every window and chain.

    Attributes:
        a: the order parameter, shape ``(K, chains, draws)``; ``NaN`` after a chain diverged.
        diverged: whether each chain diverged, shape ``(K, chains)``.
    """

    a: Float[Array, "K C T"]
    diverged: Array


class Profile(NamedTuple):
    """A free-energy profile along the order parameter.

    Attributes:
        a: bin centres, shape ``(B,)``.
        F: ``F(a) = -ln p(a)`` relative to its lowest bin, shape ``(B,)`` (``NaN`` for empty bins).
        dF: its standard error (MBAR's analytical estimate, relative to the lowest bin), shape ``(B,)``.
        flagged: windows left out because a chain diverged, shape ``(K,)`` (boolean).
        n_independent: independent draws kept per window after thinning, shape ``(K,)``.
    """

    a: np.ndarray
    F: np.ndarray
    dF: np.ndarray
    flagged: np.ndarray
    n_independent: np.ndarray


def profile(
    draws: WindowDraws,
    w: Windows,
    bin_edges: np.ndarray,
    transform: Callable[[np.ndarray], np.ndarray] | None = None,
    shift: Float[np.ndarray, "K C T"] | None = None,
) -> Profile:
    """``F(x) = -ln p(x)`` from the windows' draws by MBAR (``pymbar.FES``, histogram on
    ``bin_edges``), for ``x = transform(a)`` of the biased coordinate ``a`` (default ``x = a``):
    a monotone ``transform`` lets the bias act on a coordinate in which the windows are evenly
    spaced while the profile is reported on another. Windows with a diverged chain are flagged
    and left out, never averaged in.

    Args:
        draws: the windows' draws.
        w: their windows.
        bin_edges: increasing bin edges of ``x``, shape ``(B + 1,)``.
        transform: ``x = transform(a)``, elementwise on NumPy arrays (default: the identity).
        shift: per draw, the reduced potential of another target relative to the sampled one,
            shape ``(K, chains, draws)``: the profile of ``exp(-N U - shift)`` from the same draws
            (default: the sampled target's).

    Returns:
        :class:`Profile` on the bins' centres.

    Raises:
        ValueError: if every window diverged, or on bad ``bin_edges``.
    """
    edges = np.asarray(bin_edges, float)
    if edges.ndim != 1 or edges.size < 2 or np.any(np.diff(edges) <= 0):
        raise ValueError("bin_edges must be an increasing 1-D array of at least 2 edges")
    if shift is None:
        a_n, u_kn, N_k, flagged, n_ind = _independent(draws, w)
        u_n = np.zeros_like(a_n)
    else:
        a_n, u_kn, N_k, flagged, n_ind, u_n = _independent(draws, w, shift)
    x_n = a_n if transform is None else np.asarray(transform(a_n), float)
    with _bar_start(draws):
        fes = _solved(u_kn, N_k)
        fes.generate_fes(np.asarray(u_n, float), x_n, fes_type="histogram", histogram_parameters={"bin_edges": edges})
        mid = 0.5 * (edges[1:] + edges[:-1])
        occupied = np.histogram(x_n, edges)[0] > 0
        res = fes.get_fes(mid[occupied], reference_point="from-lowest", uncertainty_method="analytical")
    F = np.full(mid.size, np.nan)
    dF = np.full(mid.size, np.nan)
    F[occupied], dF[occupied] = np.asarray(res["f_i"]), np.asarray(res["df_i"])
    return Profile(mid, F, dF, flagged, n_ind)


@contextlib.contextmanager
def _bar_start(draws: WindowDraws):
    """MBAR's start from BAR, with its failure named: where BAR between two windows finds no bound
    on their free-energy difference (in practice, windows whose draws never moved), a
    ``ValueError`` that names the windows whose chains are stuck. pymbar 4.0 catches BAR's
    ``ConvergenceError`` by a name ``pymbar.mbar`` never imports, so any error inside BAR arrives
    as that ``NameError``: the name is given to the module first, so that BAR's own error (a
    ``ConvergenceError`` becomes pymbar's intended zero start) is the one seen."""
    pymbar = _pymbar()
    from pymbar.utils import BoundsError, ConvergenceError

    if not hasattr(pymbar.mbar, "ConvergenceError"):
        pymbar.mbar.ConvergenceError = ConvergenceError  # pyright: ignore[reportAttributeAccessIssue]
    try:
        yield
    except BoundsError as err:
        a = np.asarray(draws.a, float)
        stuck = np.flatnonzero(np.ptp(a.reshape(a.shape[0], -1), axis=1) == 0).tolist()
        raise ValueError(
            f"MBAR cannot start: BAR found no bound between neighbouring windows (windows whose draws "
            f"never moved: {stuck or 'none'}); the chains are stuck or too short: lower the step, or raise "
            "burn_in or n_draws"
        ) from err


_SOLVES: OrderedDict[bytes, Any] = OrderedDict()
"""The last few MBAR solutions (``pymbar.FES``, its ``mbar`` inside) by a digest of their
reduced potentials: :func:`_solved`'s memory."""


def _solved(u_kn: np.ndarray, N_k: np.ndarray):
    """``pymbar.FES(u_kn, N_k)``, MBAR solved from BAR's start, once per set of reduced potentials.
    A profile, its reweighted neighbours in ``P`` and its basins' probabilities all reweight one
    pool of draws: each solve costs seconds of Newton steps on every draw, so a pool asked again
    reuses its solution (by a digest of ``u_kn`` and ``N_k``, the last 8 kept: a sampled ``P``,
    its ladders and its neighbour)."""
    u_kn, N_k = np.ascontiguousarray(u_kn, float), np.ascontiguousarray(N_k, np.int64)
    h = hashlib.blake2b(digest_size=16)
    for x in (np.asarray(u_kn.shape, np.int64), N_k, u_kn):
        h.update(x.tobytes())
    key = h.digest()
    if key in _SOLVES:
        _SOLVES.move_to_end(key)
        return _SOLVES[key]
    fes = _pymbar().FES(u_kn, N_k, verbose=False, mbar_options={"initialize": "BAR"})
    _SOLVES[key] = fes
    if len(_SOLVES) > 8:
        _SOLVES.popitem(last=False)
    return fes


def _independent(draws: WindowDraws, w: Windows, *extra: np.ndarray):
    """The windows' draws thinned to independent ones (``pymbar.timeseries``), pooled, with the
    reduced bias potentials ``u_kn`` of every kept window on every draw: ``(a_n, u_kn, N_k,
    flagged, n_independent, *extra_n)``; windows with a diverged chain are flagged and left out.
    Each of ``extra`` (leading axes ``(K, chains, draws)`` like ``draws.a``) is thinned and pooled
    the same way."""
    timeseries = _pymbar().timeseries

    a = np.asarray(draws.a, float)
    flagged = np.asarray(np.asarray(draws.diverged).any(axis=1) | ~np.isfinite(a).all(axis=(1, 2)))
    if flagged.all():
        raise ValueError("every window diverged: lower the step size")
    keep = np.flatnonzero(~flagged)
    samples, n_ind = [], np.zeros(len(w.centers), int)
    picked: list[list[np.ndarray]] = [[] for _ in extra]
    for k in keep:
        n_k = 0
        for j, c in enumerate(a[k]):
            idx = np.asarray(timeseries.subsample_correlated_data(c) if np.ptp(c) > 0 else np.arange(c.size), int)
            samples.append(c[idx])
            for e, out in zip(extra, picked):
                out.append(np.asarray(e)[k, j][idx])
            n_k += idx.size
        n_ind[k] = n_k
    a_n = np.concatenate(samples)
    centers, spring = np.asarray(w.centers)[keep], np.asarray(w.spring)[keep]
    u_kn = 0.5 * spring[:, None] * (a_n[None, :] - centers[:, None]) ** 2
    return (a_n, u_kn, n_ind[keep], flagged, n_ind, *(np.concatenate(out) for out in picked))


def probability(
    draws: WindowDraws,
    w: Windows,
    event: Callable[[np.ndarray], np.ndarray],
    shift: Float[np.ndarray, "K C T S"] | None = None,
) -> tuple[float, float] | tuple[np.ndarray, np.ndarray]:
    """The unbiased probability of ``event(a)`` (e.g. one basin of the profile), by MBAR
    (``pymbar.MBAR.compute_expectations`` of the indicator, analytical error); with ``shift``,
    also under the targets ``exp(-N U - shift_s)`` that differ from the sampled one by a known
    reduced potential recorded at every draw (the same draws reweighted).

    Args:
        draws: the windows' draws.
        w: their windows.
        event: a boolean function of the order parameter, elementwise on NumPy arrays.
        shift: per draw, the reduced potential of each other target relative to the sampled
            one, shape ``(K, chains, draws, S)``.

    Returns:
        ``(p, dp)``: the probability and its standard error, scalars, or with ``shift`` arrays of
            shape ``(S,)``, one per target.

    Raises:
        ValueError: if every window diverged.
    """
    if shift is None:
        a_n, u_kn, N_k, _, _ = _independent(draws, w)
        targets = np.zeros((1, a_n.size))
    else:
        a_n, u_kn, N_k, _, _, s_n = _independent(draws, w, shift)
        targets = np.asarray(s_n, float).T
    with _bar_start(draws):
        mbar = _solved(u_kn, N_k).mbar
        # the log of the indicator's zeros is -inf where the event is false: meant, not a fault;
        # a variance that rounds below 0 (an indicator near 0 or 1) is a NaN error, returned as such
        with np.errstate(divide="ignore", invalid="ignore"):
            res = mbar.compute_expectations(np.asarray(event(a_n), float), u_kn=targets)  # one per target
    mu, sigma = np.ravel(res["mu"]).astype(float), np.ravel(res["sigma"]).astype(float)
    if shift is None:
        return float(mu[0]), float(sigma[0])
    return mu, sigma


class Basins(NamedTuple):
    """Whether a free-energy profile has two minima separated by a barrier (:func:`two_basins`).

    Attributes:
        first_order: the barrier is significant: above ``n_sigma`` of its own standard error.
        barrier: the barrier's height above the higher of the two minima, in units of ``kT``
            (``F``'s own scale; 0 where there is one minimum).
        barrier_err: its standard error (the profile's errors at the top and at that minimum,
            added in quadrature).
        a_left: the lower-``a`` minimum (``NaN`` where there is one minimum).
        a_top: the top of the barrier (``NaN`` where there is one minimum).
        a_right: the higher-``a`` minimum (``NaN`` where there is one minimum).
    """

    first_order: bool
    barrier: float
    barrier_err: float
    a_left: float
    a_top: float
    a_right: float


def two_basins(
    a: Float[np.ndarray, " B"], F: Float[np.ndarray, " B"], dF: Float[np.ndarray, " B"], n_sigma: float = 2.0
) -> Basins:
    """The largest barrier of a one-dimensional profile ``F(a) = -ln p(a)`` (in ``kT``) between a
    minimum on each side: over every bin ``j`` as the top, ``F[j]`` minus the higher of the lowest
    ``F`` left and right of it, each a minimum of its own side (not the bin next to ``j``, which
    would make a slope, not a basin). The profile is first-order-like where that barrier exceeds
    ``n_sigma`` standard errors: the criterion asks only what the data resolve, so as a critical
    point is approached the barrier and its significance go to zero together and the report
    shows both, rather than a fixed height in ``kT`` that would call a noisy profile a jump.

    Args:
        a: the bins' centres, increasing.
        F: the profile at them (``NaN``: an empty bin, left out).
        dF: its standard errors.
        n_sigma: how many standard errors the barrier must clear.

    Returns:
        A :class:`Basins`.

    Raises:
        ValueError: If the shapes differ, ``a`` is not increasing, or ``n_sigma < 0``.
    """
    a, F, dF = (np.asarray(x, float) for x in (a, F, dF))
    if not (a.ndim == 1 and a.shape == F.shape == dF.shape):
        raise ValueError(f"a, F and dF must be 1-d of one length, got shapes {a.shape}, {F.shape}, {dF.shape}")
    if np.any(np.diff(a) <= 0):
        raise ValueError("a must be increasing")
    if not n_sigma >= 0:
        raise ValueError(f"n_sigma must be >= 0, got {plain(n_sigma)}")
    ok = np.isfinite(F) & np.isfinite(dF)
    a, F, dF = a[ok], F[ok], dF[ok]
    best = Basins(False, 0.0, 0.0, np.nan, np.nan, np.nan)
    for j in range(2, F.size - 2):
        left, right = int(np.argmin(F[:j])), j + 1 + int(np.argmin(F[j + 1 :]))
        if left == j - 1 or right == j + 1:  # the side falls away from j: no basin on it
            continue
        high = left if F[left] >= F[right] else right
        barrier = float(F[j] - F[high])
        if barrier > best.barrier:
            err = float(np.hypot(dF[j], dF[high]))
            best = Basins(barrier > n_sigma * err, barrier, err, float(a[left]), float(a[j]), float(a[right]))
    return best
