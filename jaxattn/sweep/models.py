"""What a sweep can run: one adapter per model, mapping a block of grid points to observables.

An adapter says which fixed parameters and grid axes its model takes, validates them (every
problem, with its path in the sweep file), and provides the three pieces the engine
(:mod:`jaxattn.sweep.engine`) needs:

- ``setup(fixed, axes) -> (static, shared)``: a hashable ``static`` (shapes and choices that fix
  the compiled program; shape-changing axes such as ``H``, ``L`` and ``P`` enter only through
  their maxima, so one compile serves the whole sweep) and ``shared`` arrays (replicated);
- ``params(static, points) -> pytree`` with one leading entry per point, from that point's values
  alone (keys are derived from seeds, never from positions: a point's numbers do not depend on
  which chunk, block or device computes it);
- ``block(static, shared, params) -> dict`` of observables of a block of points (traced; the
  engine vmaps nothing itself), and ``layout(static)``, the extra dimensions of each observable.

The models themselves live in their own modules; an adapter only calls them.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxattn import _checks


class Layout(NamedTuple):
    """Each observable's dimensions after the point axis, and their coordinates."""

    dims: dict[str, tuple[str, ...]]
    coords: dict[str, np.ndarray]


class Model(NamedTuple):
    name: str
    doc: str
    validate: Callable[[dict, dict], list[str]]
    setup: Callable[[dict, dict], tuple[Any, Any]]
    params: Callable[[Any, dict], Any]
    block: Callable[[Any, Any, Any], dict]
    layout: Callable[[Any], Layout]
    bytes_per_point: Callable[[Any], int]
    point_defaults: dict[str, Any]
    x64: bool = False  # traced and run in float64 (the theory models)


# --- shared validation -------------------------------------------------------------------------

def _check_fields(fixed: dict, allowed: dict[str, Any], path: str = "fixed") -> list[str]:
    """Unknown keys and values of the wrong type (by the type of the default)."""
    problems = []
    for key, value in fixed.items():
        if key not in allowed:
            problems.append(f"{path}.{key}: unknown parameter (expected one of {', '.join(sorted(allowed))})")
            continue
        default = allowed[key]
        if isinstance(default, bool):
            ok = isinstance(value, bool)
        elif isinstance(default, int):
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif isinstance(default, float):
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        elif isinstance(default, str):
            ok = isinstance(value, str)
        else:
            ok = True
        if not ok:
            problems.append(f"{path}.{key}: expected {type(default).__name__}, got {value!r}")
    return problems


def _check_axis(path: str, values, check) -> list[str]:
    problems = []
    for v in values:
        try:
            check(v)
        except (ValueError, TypeError) as err:
            problems.append(f"{path}: {err}")
            break
    return problems


def _axis_problems(axes: dict, fixed: dict, checks: dict[str, Callable]) -> list[str]:
    problems = []
    for name, values in axes.items():
        if name not in checks:
            problems.append(f"grid.{name}: not an axis of this model (axes: {', '.join(checks)})")
        else:
            problems += _check_axis(f"grid.{name}", values, checks[name])
    for name in checks:
        if name in fixed:
            problems += _check_axis(f"fixed.{name}", [fixed[name]], checks[name])
    return problems


def _values(static_defaults: dict, fixed: dict, axes: dict, name: str) -> list:
    """An axis's values, from the grid, else the fixed value, else the default."""
    if name in axes:
        return list(axes[name])
    return [fixed.get(name, static_defaults[name])]


# --- the registry ----------------------------------------------------------------------------

from jaxattn.sweep.copy_models import COPY_ADAM, COPY_SGLD, COPY_THEORY  # noqa: E402
from jaxattn.sweep.slm_models import SLM_ODE, SLM_SGD  # noqa: E402

MODELS: dict[str, Model] = {m.name: m for m in (SLM_SGD, SLM_ODE, COPY_ADAM, COPY_SGLD, COPY_THEORY)}
