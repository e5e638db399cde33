"""The copy head (Spec B), everything of it in one place: the task (:mod:`~jaxattn.copyhead.task`),
the single-head positional-attention network and its loss ``U``
(:mod:`~jaxattn.copyhead.network`), the configs (:mod:`~jaxattn.copyhead.config`), Adam and SGLD
grids and the theory's minima on the engine (:mod:`~jaxattn.copyhead.experiments`), the NUTS
reference (:mod:`~jaxattn.copyhead.sampling`), the effective action
(:mod:`~jaxattn.copyhead.action`), softmax's first-order transition
(:mod:`~jaxattn.copyhead.softmax`), linear attention's onsets (:mod:`~jaxattn.copyhead.linear`),
figures (:mod:`~jaxattn.copyhead.plots`) and the command line (:mod:`~jaxattn.copyhead.cli`).
"""

from jaxattn.copyhead import action, linear, network, softmax, task
from jaxattn.copyhead.action import CopyHyper, exact_action, linear_action, reduced_action, softmax_action
from jaxattn.copyhead.config import CopyConfig, CopyData, CopySGLDConfig, CopyTheoryConfig, SGLDConfig
from jaxattn.copyhead.experiments import (
    COPY_ADAM,
    COPY_SGLD,
    COPY_THEORY,
    INITS,
    OBSERVABLES,
    SAMPLE_OBSERVABLES,
    STARTS,
    chain_key,
    data_key,
    global_minimum,
    init_key,
    posterior_summary,
    sample,
    start_params,
    theory_grid,
    train,
)
from jaxattn.copyhead.linear import linear_minimum, linear_onsets
from jaxattn.copyhead.network import CopyArch, CopyParams
from jaxattn.copyhead.sampling import nuts_reference
from jaxattn.copyhead.softmax import (
    p_star_closed_form,
    softmax_critical_point,
    softmax_curves,
    softmax_phase_diagram,
    softmax_transition,
    theory_summary,
)

__all__ = [
    "COPY_ADAM",
    "COPY_SGLD",
    "COPY_THEORY",
    "CopyArch",
    "CopyConfig",
    "CopyData",
    "CopyHyper",
    "CopyParams",
    "CopySGLDConfig",
    "CopyTheoryConfig",
    "INITS",
    "chain_key",
    "data_key",
    "init_key",
    "OBSERVABLES",
    "SAMPLE_OBSERVABLES",
    "SGLDConfig",
    "STARTS",
    "action",
    "exact_action",
    "global_minimum",
    "linear",
    "linear_action",
    "linear_minimum",
    "linear_onsets",
    "network",
    "nuts_reference",
    "p_star_closed_form",
    "posterior_summary",
    "reduced_action",
    "sample",
    "softmax",
    "softmax_action",
    "softmax_critical_point",
    "softmax_curves",
    "softmax_phase_diagram",
    "softmax_transition",
    "start_params",
    "task",
    "theory_grid",
    "theory_summary",
    "train",
]
