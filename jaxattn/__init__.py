"""jaxattn: simulate the theory of attention in JAX.

The package is one folder per model over a shared core (``docs/architecture.md``):

- :mod:`jaxattn.core`: attention activations and masks, input checks, devices, divergence
  flags, generic ``(init, step)`` kernels (full-batch optax, SGLD);
- :mod:`jaxattn.engine`: the one grid engine (experiments, axes, in-memory runs, sweep files,
  the resumable store);
- :mod:`jaxattn.slm`: the single-location model (Spec A): priors, sampler, network, online SGD,
  risk, Bayes, ODEs, pruning, and its experiments;
- :mod:`jaxattn.copyhead`: the copy head (Spec B): task, network, Adam and SGLD grids, NUTS,
  the effective-action theory;
- :mod:`jaxattn.io`: :func:`save`, :func:`load`; :mod:`jaxattn.sweep`: sweeps from TOML files.

The names below are the most used of each, at the top level.
"""

from jaxattn import copyhead, core, engine, io, slm, sweep
from jaxattn.copyhead import (
    CopyArch,
    CopyConfig,
    CopyHyper,
    CopyParams,
    SGLDConfig,
    exact_action,
    global_minimum,
    linear_action,
    linear_minimum,
    linear_onsets,
    nuts_reference,
    p_star_closed_form,
    posterior_summary,
    reduced_action,
    softmax_action,
    softmax_critical_point,
    softmax_phase_diagram,
    softmax_transition,
    theory_summary,
)
from jaxattn.core.attention import ACTIVATIONS, attention_weights, position_weights, prefix_mask, register_activation
from jaxattn.core.devices import shard_streams, use_cpu_cores
from jaxattn.core.diagnostics import ess, split_rhat, to_arviz
from jaxattn.core.kernels.full_batch import full_batch
from jaxattn.core.kernels.sgld import sgld
from jaxattn.io import load, save
from jaxattn.slm import SLMConfig, SLMODEConfig, integrate, measure_error, priors, train
from jaxattn.slm import task as single_location
from jaxattn.slm.bayes import BayesRisk, bayes_estimator, bayes_risk, posterior
from jaxattn.slm.network import Arch, MultiHead
from jaxattn.slm.priors import discrete, flipped_spike, gaussian, onehot
from jaxattn.slm.pruning import PruneResult, prune_greedy
from jaxattn.slm.risk import Bank, RiskMinimum, make_bank, minimise_risk, risk
from jaxattn.slm.sgd import RunParams, SGDConfig, SGDState, online_sgd
from jaxattn.version import __version__ as __version__

__all__ = [
    # packages
    "copyhead",
    "core",
    "engine",
    "io",
    "slm",
    "sweep",
    # core
    "ACTIVATIONS",
    "attention_weights",
    "full_batch",
    "position_weights",
    "prefix_mask",
    "register_activation",
    "sgld",
    "shard_streams",
    "use_cpu_cores",
    "ess",
    "split_rhat",
    "to_arviz",
    # single-location model (Spec A)
    "Arch",
    "Bank",
    "BayesRisk",
    "MultiHead",
    "PruneResult",
    "RiskMinimum",
    "RunParams",
    "SGDConfig",
    "SGDState",
    "SLMConfig",
    "SLMODEConfig",
    "bayes_estimator",
    "bayes_risk",
    "discrete",
    "flipped_spike",
    "gaussian",
    "integrate",
    "make_bank",
    "measure_error",
    "minimise_risk",
    "onehot",
    "online_sgd",
    "posterior",
    "priors",
    "prune_greedy",
    "risk",
    "single_location",
    "train",
    # copy head (Spec B)
    "CopyArch",
    "CopyConfig",
    "CopyHyper",
    "CopyParams",
    "SGLDConfig",
    "exact_action",
    "global_minimum",
    "linear_action",
    "linear_minimum",
    "linear_onsets",
    "nuts_reference",
    "p_star_closed_form",
    "posterior_summary",
    "reduced_action",
    "softmax_action",
    "softmax_critical_point",
    "softmax_phase_diagram",
    "softmax_transition",
    "theory_summary",
    # results
    "load",
    "save",
]
