"""The copy head's posterior free-energy profile along the previous-token weight, by umbrella
sampling (``docs/theory/copy_head.md``, section 6).

The posterior of ``G`` with ``W`` integrated out exactly, projected on the previous-token weight
``a``, is sampled across the barrier by umbrella windows (:mod:`~jaxattn.copyhead.landscape._windows`)
with SGLD, MALA or HMC and replica exchange between neighbouring windows on the engine
(:mod:`~jaxattn.copyhead.landscape._experiment`, the ``copy_landscape`` experiment) and turned into
``F(a)`` by MBAR (:mod:`~jaxattn.copyhead.landscape._profiles`); the basins' probabilities, at the
sampled ``P`` and reweighted to its neighbours, give ``P*`` from sampling
(:mod:`~jaxattn.copyhead.landscape._search`). The
theory's line is :mod:`jaxattn.copyhead.profile`, its Gaussian correction
:mod:`jaxattn.copyhead.fluctuations`.
"""

from jaxattn.copyhead._config import MAP_CHAINS, MAP_SAMPLER
from jaxattn.copyhead.landscape._experiment import COPY_LANDSCAPE
from jaxattn.copyhead.landscape._phase import (
    CriticalPoint,
    PhaseMap,
    PhaseRow,
    Round,
    critical_point,
    phase_of_dataset,
    sampled_phase_diagram,
)
from jaxattn.copyhead.landscape._profiles import (
    SampledProfile,
    inverse_temperature,
    ladder_spread,
    profile_of,
    profiles_dataset,
    reweighted_log_ratio,
    reweighted_profile,
    sampled_profile,
    window_diagnostics,
)
from jaxattn.copyhead.landscape._search import (
    LinearScan,
    SoftmaxScan,
    crossing,
    curve_crossing,
    landscape,
    landscape_of_dataset,
    linear_landscape,
    scan_record,
)
from jaxattn.copyhead.landscape._windows import place_windows, posterior_target
from jaxattn.core import checks

__all__ = [
    "COPY_LANDSCAPE",
    "MAP_CHAINS",
    "MAP_SAMPLER",
    "CriticalPoint",
    "PhaseMap",
    "LinearScan",
    "PhaseRow",
    "Round",
    "SampledProfile",
    "SoftmaxScan",
    "critical_point",
    "crossing",
    "curve_crossing",
    "inverse_temperature",
    "ladder_spread",
    "landscape",
    "landscape_of_dataset",
    "linear_landscape",
    "phase_of_dataset",
    "place_windows",
    "posterior_target",
    "profile_of",
    "profiles_dataset",
    "reweighted_log_ratio",
    "reweighted_profile",
    "sampled_phase_diagram",
    "sampled_profile",
    "scan_record",
    "window_diagnostics",
]

_MOVED = {
    **{
        n: "jaxattn.copyhead.profile"
        for n in (
            "copy_strength",
            "linear_profile_action",
            "prev_weight",
            "profile_coordinate",
            "theory_action_of_c",
            "theory_action_of_order",
            "theory_barrier",
            "theory_profile",
            "theory_slope",
        )
    },
    **{n: "jaxattn.copyhead.fluctuations" for n in ("corrected_gap", "fluctuation_entropy", "p_star_corrected")},
    **{n: "jaxattn.copyhead.landscape._windows" for n in ("C_RANGE", "default_range")},
    **{n: "jaxattn.copyhead.landscape._profiles" for n in ("basin_log_ratio", "sampled_minimum")},
    "default_P": "jaxattn.copyhead.landscape._search",
    **{n: "jaxattn.copyhead.landscape._experiment" for n in ("CopyLandscape", "LandscapeStatic")},
}
__getattr__ = checks.moved("jaxattn.copyhead.landscape", _MOVED)
