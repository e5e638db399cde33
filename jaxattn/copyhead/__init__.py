"""The copy head, everything of it in one place.

- the task and the network: :mod:`~jaxattn.copyhead.task` (sequences, the shift matrix),
  :mod:`~jaxattn.copyhead.network` (the single-head positional-attention network, its loss ``U``
  from token co-occurrence counts, its order parameters), :mod:`~jaxattn.copyhead._config`;
- grids on the engine: :mod:`~jaxattn.copyhead.experiments` (full-batch Adam, :func:`train`;
  SGLD chains, :func:`sample`; the theory's minima, :func:`theory_grid`), on the data of
  :mod:`~jaxattn.copyhead.data`;
- the theory: :mod:`~jaxattn.copyhead.action` (the effective action, exact and reduced),
  :mod:`~jaxattn.copyhead.softmax` (the first-order transition), :mod:`~jaxattn.copyhead.linear`
  (linear attention's onsets), :mod:`~jaxattn.copyhead.curves` (both against ``P``, and the
  summary), :mod:`~jaxattn.copyhead.profile` (the reduced action along the previous-token weight),
  :mod:`~jaxattn.copyhead.fluctuations` (its Gaussian correction and large deviations),
  :mod:`~jaxattn.copyhead.lines` (every theory line of the sampled map, from one entry);
- sampling: :mod:`~jaxattn.copyhead.landscape` (the posterior's profile by umbrella sampling, and
  ``P*`` from it), :mod:`~jaxattn.copyhead.sampling` (the NUTS reference);
- :mod:`~jaxattn.copyhead.plots` and the command line :mod:`~jaxattn.copyhead._cli`.
"""

from jaxattn.copyhead import (
    action,
    curves,
    data,
    experiments,
    fluctuations,
    landscape,
    linear,
    lines,
    network,
    profile,
    sampling,
    softmax,
    task,
)
from jaxattn.copyhead._config import (
    CopyConfig,
    CopyData,
    CopyLandscapeConfig,
    CopySGLDConfig,
    CopyTheoryConfig,
    SGLDConfig,
)
from jaxattn.copyhead.experiments import (
    COPY_ADAM,
    COPY_SGLD,
    COPY_THEORY,
    global_minimum,
    posterior_summary,
    sample,
    theory_grid,
    train,
)
from jaxattn.copyhead.landscape import COPY_LANDSCAPE
from jaxattn.copyhead.network import CopyArch, CopyParams
from jaxattn.core import checks

__all__ = [
    # configs and the network
    "CopyArch",
    "CopyConfig",
    "CopyData",
    "CopyLandscapeConfig",
    "CopyParams",
    "CopySGLDConfig",
    "CopyTheoryConfig",
    "SGLDConfig",
    # the experiments and their Python entry points
    "COPY_ADAM",
    "COPY_LANDSCAPE",
    "COPY_SGLD",
    "COPY_THEORY",
    "global_minimum",
    "posterior_summary",
    "sample",
    "theory_grid",
    "train",
    # modules
    "action",
    "curves",
    "data",
    "experiments",
    "fluctuations",
    "landscape",
    "linear",
    "lines",
    "network",
    "profile",
    "sampling",
    "softmax",
    "task",
]

_MOVED = {
    **{n: "jaxattn.copyhead.action" for n in ("CopyHyper", "exact_action", "linear_action", "reduced_action")},
    "softmax_action": "jaxattn.copyhead.action",
    **{n: "jaxattn.copyhead.data" for n in ("chain_key", "data_key", "init_key")},
    **{n: "jaxattn.copyhead.experiments" for n in ("INITS", "OBSERVABLES", "SAMPLE_OBSERVABLES", "STARTS")},
    "start_params": "jaxattn.copyhead.experiments._sgld",
    **{n: "jaxattn.copyhead.linear" for n in ("linear_minimum", "linear_onsets")},
    "nuts_reference": "jaxattn.copyhead.sampling",
    **{
        n: "jaxattn.copyhead.softmax"
        for n in ("p_star_closed_form", "softmax_critical_point", "softmax_phase_diagram", "softmax_transition")
    },
    **{n: "jaxattn.copyhead.curves" for n in ("softmax_curves", "theory_summary")},
}


__getattr__ = checks.moved("jaxattn.copyhead", _MOVED)
