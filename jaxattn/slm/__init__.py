"""The single-location model of multi-head attention (Spec A), everything of it in one place.

- the data: :mod:`~jaxattn.slm.priors` (``P_theta``), :mod:`~jaxattn.slm.task` (directions,
  sampler split into ``draw`` and ``assemble``);
- the network: :mod:`~jaxattn.slm.network` (keys and biases, prediction, order parameters,
  the oracle Bayes-softmax network);
- online SGD: :mod:`~jaxattn.slm.sgd` (an ``(init, step)`` pair, closed-form gradients);
- the theory: :mod:`~jaxattn.slm.risk` (``R(M, Q, b)`` on a bank of draws and its minima),
  :mod:`~jaxattn.slm.bayes` (posterior, estimator, Bayes risk), :mod:`~jaxattn.slm.ode` (the
  order-parameter ODEs), :mod:`~jaxattn.slm.sde` (their finite-``D`` SDE), :mod:`~jaxattn.slm.pruning`, :mod:`~jaxattn.slm.compare` (ODE against
  SGD);
- grids on the engine: :mod:`~jaxattn.slm.experiments` (:func:`train`, :func:`integrate`);
- :mod:`~jaxattn.slm.plots` and the command line :mod:`~jaxattn.slm._cli`.
"""

from jaxattn.core import checks
from jaxattn.slm import bayes, compare, experiments, network, ode, priors, pruning, risk, sde, sgd, task
from jaxattn.slm._config import SLMConfig, SLMODEConfig, SLMSDEConfig
from jaxattn.slm.experiments import SLM_ODE, SLM_SDE, SLM_SGD, integrate, train

__all__ = [
    # configs
    "SLMConfig",
    "SLMODEConfig",
    "SLMSDEConfig",
    # the experiments and their Python entry points
    "SLM_ODE",
    "SLM_SDE",
    "SLM_SGD",
    "integrate",
    "train",
    # modules
    "bayes",
    "compare",
    "experiments",
    "network",
    "ode",
    "priors",
    "pruning",
    "risk",
    "sde",
    "sgd",
    "task",
]

_MOVED = {
    "GRID_AXES": "jaxattn.slm.experiments",
    "point_keys": "jaxattn.slm.experiments",
    "measure_error": "jaxattn.slm.task",
}


__getattr__ = checks.moved("jaxattn.slm", _MOVED)
