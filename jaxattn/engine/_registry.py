"""Experiments by name: the built-in ones (as ``module:attribute`` references, imported when
first asked for, so the engine imports no model), those added with :func:`register`, and those
other installed packages declare under the entry-point group ``jaxattn.models``."""

from __future__ import annotations

import importlib

from jaxattn.engine._experiment import Experiment

BUILTIN = {
    "slm_sgd": "jaxattn.slm.experiments:SLM_SGD",
    "slm_ode": "jaxattn.slm.experiments:SLM_ODE",
    "slm_sde": "jaxattn.slm.experiments:SLM_SDE",
    "copy_adam": "jaxattn.copyhead.experiments:COPY_ADAM",
    "copy_sgld": "jaxattn.copyhead.experiments:COPY_SGLD",
    "copy_theory": "jaxattn.copyhead.experiments:COPY_THEORY",
    "copy_landscape": "jaxattn.copyhead.landscape:COPY_LANDSCAPE",
}
ENTRY_POINT_GROUP = "jaxattn.models"

_REGISTERED: dict[str, Experiment | str] = {}


def register(experiment: Experiment | str, name: str | None = None) -> None:
    """Make an experiment (or a ``"module:attribute"`` reference to one) usable by name in sweep
    files and from the command line.

    Args:
        experiment: The experiment, or a ``"module:attribute"`` reference imported when first
            asked for.
        name: The name to register it under; ``None`` means ``experiment.name`` (a reference
            needs one).

    Raises:
        ValueError: If there is no name, or it is a built-in experiment's.
    """
    if isinstance(experiment, Experiment):
        name = name or experiment.name
    if not name:
        raise ValueError("register needs a name for a reference")
    if name in BUILTIN:
        raise ValueError(f"{name!r} is a built-in experiment and cannot be replaced")
    _REGISTERED[name] = experiment


def _entry_points() -> dict[str, str]:
    from importlib.metadata import entry_points

    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name not in BUILTIN}


def names() -> list[str]:
    """Every experiment's name: built-in, registered, then from entry points.

    Returns:
        The names, without repeats.
    """
    out = list(BUILTIN) + [n for n in _REGISTERED if n not in BUILTIN]
    return out + [n for n in _entry_points() if n not in out]


def _resolve(ref: str) -> Experiment:
    module, _, attr = ref.partition(":")
    obj = getattr(importlib.import_module(module), attr)
    if not isinstance(obj, Experiment):
        raise TypeError(f"{ref} is not a jaxattn experiment (got {type(obj).__name__})")
    return obj


def get(name: str) -> Experiment:
    """The experiment registered under ``name`` (a ``KeyError`` naming the known ones).

    Args:
        name: The experiment's name.

    Returns:
        The ``Experiment`` (a reference is imported and kept).

    Raises:
        KeyError: If no experiment has that name.
    """
    ref = BUILTIN.get(name) or _REGISTERED.get(name) or _entry_points().get(name)
    if ref is None:
        raise KeyError(f"unknown experiment {name!r} (known: {', '.join(names())})")
    exp = _resolve(ref) if isinstance(ref, str) else ref
    if name not in BUILTIN:
        _REGISTERED[name] = exp
    return exp
