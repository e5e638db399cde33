"""jaxattn: simulate the theory of attention in JAX.

The package is one folder per model over a shared core (``docs/architecture.md``):

- :mod:`jaxattn.core`: attention activations and masks, input checks, devices, divergence
  flags, generic ``(init, step)`` kernels (full-batch optax, SGLD), sampler diagnostics,
  umbrella sampling;
- :mod:`jaxattn.engine`: the one grid engine (experiments, axes, in-memory runs, sweep files,
  the resumable store);
- :mod:`jaxattn.slm`: the single-location model: priors, sampler, network, online SGD, risk,
  Bayes, ODEs, pruning, and its experiments;
- :mod:`jaxattn.copyhead`: the copy head: task, network, Adam and SGLD grids, NUTS, the
  effective-action theory, the sampled landscape;
- :mod:`jaxattn.io`: :func:`save` and :func:`load` (a netCDF file or a sweep store).

Every other name lives in its package, under one path: ``jaxattn.slm.SLMConfig``,
``jaxattn.slm.bayes.bayes_risk``, ``jaxattn.copyhead.train``, ``jaxattn.core.attention.register_activation``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from jaxattn.version import __version__ as __version__

if TYPE_CHECKING:
    from jaxattn import copyhead, core, engine, io, slm
    from jaxattn.core.devices import use_cpu_cores
    from jaxattn.io import load, save

__all__ = ["copyhead", "core", "engine", "io", "slm", "load", "save", "use_cpu_cores"]

# imported when first used, so that `import jaxattn.cli` (and `jaxattn --help`) loads no JAX
_LAZY = {
    **{m: f"jaxattn.{m}" for m in ("copyhead", "core", "engine", "io", "slm")},
    "load": "jaxattn.io:load",
    "save": "jaxattn.io:save",
    "use_cpu_cores": "jaxattn.core.devices:use_cpu_cores",
}

# Names the top level exported before it held only the packages: each now has one path.
_MOVED = {
    **{n: "jaxattn.core.attention" for n in ("ACTIVATIONS", "attention_weights", "position_weights", "prefix_mask")},
    "register_activation": "jaxattn.core.attention",
    "full_batch": "jaxattn.core.kernels.full_batch",
    "sgld": "jaxattn.core.kernels.sgld",
    "shard_streams": "jaxattn.core.devices",
    **{n: "jaxattn.core.diagnostics" for n in ("ess", "split_rhat", "to_arviz")},
    **{n: "jaxattn.slm.network" for n in ("Arch", "MultiHead")},
    **{n: "jaxattn.slm.risk" for n in ("Bank", "RiskMinimum", "make_bank", "minimise_risk", "risk")},
    **{n: "jaxattn.slm.bayes" for n in ("BayesRisk", "bayes_estimator", "bayes_risk", "posterior")},
    **{n: "jaxattn.slm.pruning" for n in ("PruneResult", "prune_greedy")},
    **{n: "jaxattn.slm.sgd" for n in ("RunParams", "SGDConfig", "SGDState", "online_sgd")},
    **{n: "jaxattn.slm" for n in ("SLMConfig", "SLMODEConfig", "integrate", "train", "priors")},
    "measure_error": "jaxattn.slm.task",
    **{n: "jaxattn.slm.priors" for n in ("discrete", "flipped_spike", "gaussian", "onehot")},
    **{
        n: "jaxattn.copyhead"
        for n in (
            "CopyArch",
            "CopyConfig",
            "CopyParams",
            "SGLDConfig",
            "global_minimum",
            "posterior_summary",
        )
    },
    **{n: "jaxattn.copyhead.action" for n in ("CopyHyper", "exact_action", "linear_action", "reduced_action")},
    "softmax_action": "jaxattn.copyhead.action",
    **{n: "jaxattn.copyhead.linear" for n in ("linear_minimum", "linear_onsets")},
    "nuts_reference": "jaxattn.copyhead.sampling",
    **{
        n: "jaxattn.copyhead.softmax"
        for n in (
            "p_star_closed_form",
            "softmax_critical_point",
            "softmax_phase_diagram",
            "softmax_transition",
        )
    },
    "theory_summary": "jaxattn.copyhead.curves",
}
_MOVED.update(
    single_location="jaxattn.slm.task (the same module)",
    sweep="jaxattn.engine (run_sweep, load_store, load_file, parse, status)",
)


def __getattr__(name: str):
    ref = _LAZY.get(name)
    if ref is None:
        from jaxattn.core import checks

        return checks.moved("jaxattn", _MOVED)(name)
    module, _, attr = ref.partition(":")
    value = importlib.import_module(module)
    value = getattr(value, attr) if attr else value
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
