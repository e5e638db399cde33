"""jaxattn: simulate the theory of attention in JAX.

The public API, by layer (see ``docs/architecture.md``):

- primitives: :func:`attention_weights` and the priors (:func:`onehot`, :func:`discrete`,
  :func:`flipped_spike`, :func:`gaussian`), the single-location sampler
  (:mod:`jaxattn.tasks.single_location`);
- models: :class:`MultiHead`, :class:`Arch`;
- runners: :func:`online_sgd` (an ``(init, step)`` pair), grids with :func:`train`;
- theory: :func:`risk` on a :func:`make_bank` of draws, its minima (:func:`minimise_risk`),
  :func:`bayes_risk`, :func:`posterior`, :func:`bayes_estimator`, :func:`prune_greedy`;
- copy task: :class:`CopyConfig`, :func:`full_batch` (Adam), :func:`sgld`, :func:`global_minimum`;
  its theory: :func:`exact_action`, :func:`reduced_action`, :func:`theory_summary` (``P*``, onsets);
- results: :func:`save`, :func:`load`; sweeps: :mod:`jaxattn.sweep` (grids from a TOML file,
  chunked, resumable, sharded).
"""

__version__ = "0.1.0"

from jaxattn import priors
from jaxattn.devices import shard_streams, use_cpu_cores
from jaxattn.attention import ACTIVATIONS, attention_weights, position_weights, prefix_mask
from jaxattn.models.multihead import Arch, MultiHead
from jaxattn.priors import discrete, flipped_spike, gaussian, onehot
from jaxattn.pruning import PruneResult, prune_greedy
from jaxattn.results import load, save
from jaxattn.runners.online_sgd import RunParams, SGDConfig, SGDState, online_sgd
from jaxattn.slm import SLMConfig, measure_error, train
from jaxattn.tasks import single_location
from jaxattn.theory.slm_bayes import BayesRisk, bayes_estimator, bayes_risk, posterior
from jaxattn.theory.slm_risk import Bank, RiskMinimum, make_bank, minimise_risk, risk

# --- copy task (Spec B) ---
from jaxattn.copy import CopyConfig, SGLDConfig, global_minimum, posterior_summary
from jaxattn.copy_nuts import nuts_reference
from jaxattn.models.copy import CopyArch, CopyParams
from jaxattn.runners.full_batch import full_batch
from jaxattn.runners.sgld import sgld
from jaxattn.theory.copy_action import CopyHyper, exact_action, linear_action, reduced_action, softmax_action
from jaxattn.theory.copy_linear import linear_minimum, linear_onsets
from jaxattn.theory.copy_phase import (p_star_closed_form, softmax_critical_point, softmax_phase_diagram,
                                       softmax_transition, theory_summary)

# --- sweeps (both models) ---
from jaxattn import sweep

__all__ = [
    "ACTIVATIONS", "Arch", "Bank", "BayesRisk", "MultiHead", "PruneResult", "RiskMinimum", "RunParams", "SGDConfig",
    "SGDState", "SLMConfig", "attention_weights", "bayes_estimator", "bayes_risk", "discrete",
    "flipped_spike", "gaussian", "load", "make_bank", "measure_error", "minimise_risk", "onehot", "online_sgd",
    "position_weights", "posterior", "prefix_mask", "priors", "prune_greedy", "risk", "save", "shard_streams",
    "single_location", "train", "use_cpu_cores",
    # copy task (Spec B)
    "CopyArch", "CopyConfig", "CopyParams", "SGLDConfig", "full_batch", "global_minimum", "nuts_reference",
    "posterior_summary", "sgld",
    # copy-head theory (Spec B)
    "CopyHyper", "exact_action", "linear_action", "linear_minimum", "linear_onsets", "p_star_closed_form",
    "reduced_action", "softmax_action", "softmax_critical_point", "softmax_phase_diagram", "softmax_transition",
    "theory_summary",
    # sweeps
    "sweep",
]
