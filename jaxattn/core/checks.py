"""Input validation done before tracing: every error is a ``ValueError`` naming the parameter."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

INT32_MAX = 2**31 - 1
"""The largest step count or dimension the kernels' ``int32`` counters and shapes hold."""


def plain(value: Any) -> str:
    """``value`` written as a user would type it, for an error message: NumPy scalars and arrays
    as Python numbers and lists (``-5.0``, not ``np.float64(-5.0)``), strings quoted.

    Args:
        value: Any value.

    Returns:
        Its plain text.
    """

    def py(v):
        if isinstance(v, np.generic):
            return v.item()
        if isinstance(v, np.ndarray):
            return v.tolist()
        if isinstance(v, (list, tuple)):
            return type(v)(py(x) for x in v)
        return v

    return repr(py(value))


def finite_or_none(x: Any) -> float | None:
    """``x`` as a float, or ``None`` where it is missing or not finite (a result's "no number").

    Args:
        x: a number or ``None``.

    Returns:
        The float, or ``None``.
    """
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def toml_key(key: Any) -> str:
    """A key as TOML writes it in a dotted path: bare if it can be (``eta``), quoted otherwise
    (``"x y"``), so that an error's path reads back to the one key.

    Args:
        key: A table key.

    Returns:
        The key, quoted where TOML needs it.
    """
    key = str(key)
    return key if key and all(c.isascii() and (c.isalnum() or c in "_-") for c in key) else json.dumps(key)


def as_array(name: str, value: Any, ndim: int | None = None) -> np.ndarray:
    """``value`` as a finite float array, optionally of a given rank.

    Args:
        name: The parameter's name, for the error message.
        value: Anything ``np.asarray(value, dtype=float)`` accepts.
        ndim: The required number of dimensions; ``None`` accepts any.

    Returns:
        The value as a float ``np.ndarray`` (of rank ``ndim`` when given).

    Raises:
        ValueError: If ``value`` is not numeric, has the wrong rank, or is not finite.
    """
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be numeric, got {plain(value)}") from err
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimension(s), got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite, got {plain(value)}")
    return arr


def positive(name: str, value: Any, *, allow_zero: bool = False) -> float:
    """``value`` as a float ``> 0`` (``>= 0`` with ``allow_zero``).

    Args:
        name: The parameter's name, for the error message.
        value: A finite numeric scalar.
        allow_zero: Accept ``0`` as well.

    Returns:
        The value as a Python ``float``.

    Raises:
        ValueError: If ``value`` is not a finite scalar, or is negative (or zero without
            ``allow_zero``).
    """
    x = float(as_array(name, value, ndim=0))
    if x < 0 or (x == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be {bound}, got {plain(value)}")
    return x


def integer(name: str, value: Any, minimum: int, maximum: int = INT32_MAX) -> int:
    """``value`` as an integer from ``minimum`` to ``maximum`` (a float with an integer value is
    accepted). The default maximum is what the kernels' ``int32`` counters and shapes hold.

    Args:
        name: The parameter's name, for the error message.
        value: An integer, or a float with an integer value (not a ``bool`` or ``str``).
        minimum: The smallest value accepted.
        maximum: The largest value accepted.

    Returns:
        The value as a Python ``int``.

    Raises:
        ValueError: If ``value`` is not an integer, or is out of range.
    """
    try:
        ok = not isinstance(value, (bool, str)) and float(value).is_integer()
    except (TypeError, ValueError, OverflowError):
        ok = False
    if not ok:
        raise ValueError(f"{name} must be an integer, got {plain(value)}")
    n = int(value)
    if n < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {plain(value)}")
    if n > maximum:
        bound = f"{maximum} (the kernels' int32)" if maximum == INT32_MAX else str(maximum)
        raise ValueError(f"{name} must be <= {bound}, got {plain(value)}")
    return n


def choice(name: str, value: Any, options: Sequence[str]) -> str:
    """``value`` as one of ``options``; hyphens are read as underscores (``bayes-softmax``).

    Args:
        name: The parameter's name, for the error message.
        value: The string to check.
        options: The accepted strings.

    Returns:
        The matching entry of ``options`` (``value`` itself, or with hyphens replaced).

    Raises:
        ValueError: If ``value`` is not a string or matches no option.
    """
    if isinstance(value, str):
        for v in (value, value.replace("-", "_")):
            if v in options:
                return v
    raise ValueError(f"{name} must be one of {tuple(options)}, got {plain(value)}")


def positive_list(name: str, values: Any, *, allow_zero: bool = False) -> list[float]:
    """A non-empty list of floats, each as :func:`positive`.

    Args:
        name: The parameter's name, for the error message.
        values: A number or a 1-D sequence of numbers (a scalar becomes a list of one).
        allow_zero: Accept zeros as well.

    Returns:
        The values as a list of Python ``float``.

    Raises:
        ValueError: If ``values`` is empty, not 1-D, or has an entry :func:`positive` rejects.
    """
    vals = np.atleast_1d(as_array(name, values))
    if vals.ndim != 1 or vals.size == 0:
        raise ValueError(f"{name} must be a non-empty list of numbers, got {plain(values)}")
    return [positive(name, v, allow_zero=allow_zero) for v in vals]


def integer_list(name: str, values: Any, minimum: int) -> list[int]:
    """A non-empty list of integers, each as :func:`integer`.

    Args:
        name: The parameter's name, for the error message.
        values: An integer or a 1-D sequence of integers (a scalar becomes a list of one).
        minimum: The smallest value accepted.

    Returns:
        The values as a list of Python ``int``.

    Raises:
        ValueError: If ``values`` is empty, not 1-D, or has an entry :func:`integer` rejects.
    """
    vals = np.atleast_1d(np.asarray(values, dtype=object))
    if vals.ndim != 1 or vals.size == 0:
        raise ValueError(f"{name} must be a non-empty list of integers, got {plain(values)}")
    return [integer(name, v, minimum) for v in vals.tolist()]


def moved(module: str, paths: dict[str, str]) -> Callable[[str], Any]:
    """A module's ``__getattr__`` for names that have moved: ``module.name`` raises an
    ``AttributeError`` that names the new path, one line, instead of a bare "no attribute".

    Args:
        module: The module's dotted name.
        paths: Old name -> the new path: a module (the name is appended) or a sentence. A path
            through a private module says the name is internal now.

    Returns:
        The ``__getattr__`` function.
    """

    def getattr_(name: str) -> Any:
        if name in paths:
            new = paths[name]
            where = new if " " in new else f"{new}.{name}"
            if any(part.startswith("_") for part in where.split(" ")[0].split(".")):
                raise AttributeError(f"{module}.{name} is internal now, not a public name: {where}")
            raise AttributeError(f"{module}.{name} has moved: use {where}")
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return getattr_


def unwritable(path: str, folder: bool = False) -> str | None:
    """Why ``path`` could not be written (as a file, or created as a ``folder``), if it could
    not: an empty path, an existing folder where a file goes (or the reverse), a file where a
    folder must be on the way, or a folder where a probe file cannot be created and removed.
    The probe is the test, not the permission bits, which a root user passes everywhere
    (``/proc``, a read-only mount). Nothing is left behind and no folder is created.

    Args:
        path: The file or folder to write.
        folder: Whether ``path`` is a folder (else a file).

    Returns:
        ``None`` if it can be written, else the reason (one line).
    """
    if not str(path).strip():
        return "the path is empty"
    path = os.path.abspath(path)
    if os.path.exists(path):
        if folder != os.path.isdir(path):
            return f"{path} is {'a file' if folder else 'a folder'}"
        if not folder:
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_APPEND))  # opened, not changed
            except OSError as err:
                return f"{path} cannot be written ({err.strerror or err})"
        return _probe(path if folder else os.path.dirname(path))
    above = os.path.dirname(path)
    while not os.path.exists(above):
        above = os.path.dirname(above)
    if not os.path.isdir(above):
        return f"{above} is a file, not a folder"
    return _probe(above)


def _probe(folder: str) -> str | None:
    """Why a file cannot be created (and removed) in ``folder``, if it cannot."""
    import tempfile

    try:
        fd, name = tempfile.mkstemp(prefix=".jaxattn-probe-", dir=folder)
    except OSError as err:
        return f"a file cannot be created in the folder {folder} ({err.strerror or err})"
    os.close(fd)
    try:
        os.remove(name)
    except OSError as err:
        return f"a file created in {folder} cannot be removed ({err.strerror or err})"
    return None
