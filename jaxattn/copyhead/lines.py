"""Every theory line of the copy head's sampled phase diagram at one ``(arch, N)``, from one entry:
the reduced action's ``P*``, barrier and slope (one call to
:func:`jaxattn.copyhead.profile.reduced_lines`), the Gaussian-corrected and the large-deviation
``P*`` (one to :func:`jaxattn.copyhead.fluctuations.fluctuation_p_stars`), each ``None`` where
that theory has no answer.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from jaxattn.copyhead import action, fluctuations, network
from jaxattn.copyhead._config import LD_SAMPLES
from jaxattn.copyhead.profile import reduced_lines
from jaxattn.core import checks


@dataclass(frozen=True)
class TheoryLines:
    """The theory's lines at one ``(L, V, N)`` of softmax attention.

    Attributes:
        p_star_reduced: the reduced action's ``P*`` (``None``: no transition).
        first_order_reduced: whether the reduced action jumps there (two minima).
        a_barrier: the previous-token weight of the reduced action's barrier at its ``P*``: the
            divider of the basins whose log-odds give the sampled ``P*``.
        P: where ``barrier_reduced`` is evaluated.
        barrier_reduced: the reduced action's barrier at ``P`` in ``kT`` (0: one minimum).
        slope: ``d(S_uniform - S_copy)/dP`` at the reduced ``P*``: the theory's log-odds per
            sequence.
        p_star_corrected: the Gaussian-corrected ``P*`` nearest the reduced one (``None`` where
            the Hessian is not positive on the way).
        p_star_large_deviation: the large-deviation ``P*`` (``None``: not asked, or no zero).
        p_star_large_deviation_err: its standard error from two scrambles of the points.
        large_deviation_samples: the points per scramble it used (0: not computed).
    """

    p_star_reduced: float | None
    first_order_reduced: bool
    a_barrier: float | None
    P: float | None
    barrier_reduced: float | None
    slope: float | None
    p_star_corrected: float | None
    p_star_large_deviation: float | None
    p_star_large_deviation_err: float | None
    large_deviation_samples: int

    @property
    def best(self) -> float | None:
        """The best ``P*`` the theory has: large deviation, else corrected, else reduced."""
        for p in (self.p_star_large_deviation, self.p_star_corrected, self.p_star_reduced):
            if p is not None:
                return p
        return None


@functools.lru_cache(maxsize=256)  # pure in its arguments, and a map asks each (L, N) again on a rerun
def theory_lines(
    arch: network.CopyArch, N: float, P: float | None = None, *, large_deviation_samples: int = LD_SAMPLES
) -> TheoryLines:
    """The reduced, Gaussian-corrected and large-deviation ``P*`` at ``(arch, N)``, the reduced
    action's barrier at ``P`` and its log-odds' slope at its ``P*``: every line the sampled map
    compares with, each computed once.

    Args:
        arch: the network (softmax attention).
        N: inverse temperature (finite).
        P: where the barrier is evaluated (default: the reduced ``P*``).
        large_deviation_samples: points per scramble of the large-deviation ``P*``
            (:func:`~jaxattn.copyhead.fluctuations.p_star_large_deviation`, two scrambles, one
            pass); 0 leaves it out.

    Returns:
        :class:`TheoryLines`.

    Raises:
        ValueError: naming ``attention``, ``N``, ``P`` or ``large_deviation_samples``.
    """
    arch = arch.validate()
    if arch.attention != "softmax":
        raise ValueError(f"attention: the theory lines are softmax attention's, got {arch.attention!r}")
    N = action.check_N(N)
    if not math.isfinite(N):
        raise ValueError("N must be finite (N = inf is the MAP point, not a posterior)")
    n_ld = checks.integer("large_deviation_samples", large_deviation_samples, 0)
    if P is not None:
        P = float(checks.positive("P", P))
    red = reduced_lines(arch, N, P)
    if red is None:  # no transition of the reduced action: no line at all
        return TheoryLines(None, False, None, P, None, None, None, None, None, 0)
    corrected, ld = fluctuations.fluctuation_p_stars(arch, N, red.p_star, n_ld)
    return TheoryLines(
        p_star_reduced=red.p_star,
        first_order_reduced=red.barrier_at_star > 0,
        a_barrier=red.a_barrier,
        P=red.P,
        barrier_reduced=red.barrier,
        slope=checks.finite_or_none(red.slope),
        p_star_corrected=corrected,
        p_star_large_deviation=None if ld is None else checks.finite_or_none(ld.p_star),
        p_star_large_deviation_err=None if ld is None or ld.p_star is None else checks.finite_or_none(ld.error),
        large_deviation_samples=n_ld,
    )
