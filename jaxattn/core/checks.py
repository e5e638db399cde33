"""Input validation done before tracing: every error is a ``ValueError`` naming the parameter."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def as_array(name: str, value, ndim: int | None = None) -> np.ndarray:
    """``value`` as a finite float array, optionally of a given rank."""
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be numeric, got {value!r}") from err
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimension(s), got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return arr


def positive(name: str, value, *, allow_zero: bool = False) -> float:
    """``value`` as a float ``> 0`` (``>= 0`` with ``allow_zero``)."""
    x = float(as_array(name, value, ndim=0))
    if x < 0 or (x == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be {bound}, got {value!r}")
    return x


def integer(name: str, value, minimum: int) -> int:
    """``value`` as an integer ``>= minimum`` (a float with an integer value is accepted)."""
    try:
        ok = not isinstance(value, (bool, str)) and float(value).is_integer()
    except (TypeError, ValueError, OverflowError):
        ok = False
    if not ok:
        raise ValueError(f"{name} must be an integer, got {value!r}")
    n = int(value)
    if n < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}")
    return n


def choice(name: str, value, options: Sequence[str]) -> str:
    """``value`` as one of ``options``; hyphens are read as underscores (``bayes-softmax``)."""
    if isinstance(value, str):
        for v in (value, value.replace("-", "_")):
            if v in options:
                return v
    raise ValueError(f"{name} must be one of {tuple(options)}, got {value!r}")


def positive_list(name: str, values, *, allow_zero: bool = False) -> list[float]:
    """A non-empty list of floats, each as :func:`positive`."""
    vals = np.atleast_1d(as_array(name, values))
    if vals.ndim != 1 or vals.size == 0:
        raise ValueError(f"{name} must be a non-empty list of numbers, got {values!r}")
    return [positive(name, v, allow_zero=allow_zero) for v in vals]


def integer_list(name: str, values, minimum: int) -> list[int]:
    """A non-empty list of integers, each as :func:`integer`."""
    vals = np.atleast_1d(np.asarray(values, dtype=object))
    if vals.ndim != 1 or vals.size == 0:
        raise ValueError(f"{name} must be a non-empty list of integers, got {values!r}")
    return [integer(name, v, minimum) for v in vals.tolist()]
