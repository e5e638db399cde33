"""One config type per model, read the same way by the Python API, the command line and sweep files.

A model's fixed parameters are a frozen :mod:`dataclasses` dataclass with defaults and a
``validate()`` method (raising a ``ValueError`` that names the parameter). Everything else is
derived from its fields: the ``[fixed]`` table of a sweep file (:func:`from_mapping`), the
command-line options (:mod:`jaxattn.cli.common`), and the JSON stored with every result
(:func:`to_json`, :func:`from_json`). A field's ``metadata`` may hold

- ``help``: one line for ``--help`` and the docs;
- ``parse`` / ``dump``: how a field that is not a plain number, string or list (a prior) is read
  from a TOML table or JSON, and written back;
- ``cli``: ``False`` to keep a field off the command line, or the flag to use (``"--chains"``).
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from typing import Any

from jaxattn.core.checks import plain, toml_key

KINDS = ("int", "float", "bool", "str", "floats", "custom")


@dataclasses.dataclass(frozen=True)
class FieldSpec:
    """What the engine knows of one config field: its name, kind (one of :data:`KINDS`), whether
    ``None`` is allowed, the default and the field's metadata.

    Attributes:
        name: The field's name.
        kind: One of :data:`KINDS`.
        optional: Whether ``None`` is allowed.
        default: The field's default value.
        metadata: The field's metadata (``help``, ``parse``, ``dump``, ``cli``).
    """

    name: str
    kind: str
    optional: bool
    default: Any
    metadata: dict

    @property
    def help(self) -> str:
        """The field's one line of help (``""`` if none)."""
        return self.metadata.get("help", "")


def _kind(hint) -> tuple[str, bool]:
    """A type hint as ``(kind, optional)``."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        kind, _ = _kind(rest[0]) if len(rest) == 1 else ("custom", False)
        return kind, type(None) in args
    if hint is bool:
        return "bool", False
    if hint is int:
        return "int", False
    if hint is float:
        return "float", False
    if hint is str:
        return "str", False
    if typing.get_origin(hint) in (tuple, list) and args and args[0] in (float, int):
        return "floats", False
    return "custom", False


def field_specs(config_type: type) -> dict[str, FieldSpec]:
    """Every field of ``config_type`` as a :class:`FieldSpec`, in declaration order.

    Args:
        config_type: A config dataclass type.

    Returns:
        Field name -> its :class:`FieldSpec`.
    """
    hints = typing.get_type_hints(config_type)
    out = {}
    for f in dataclasses.fields(config_type):
        kind, optional = _kind(hints[f.name])
        if "parse" in f.metadata:
            kind = "custom"
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
        out[f.name] = FieldSpec(f.name, kind, optional, default, dict(f.metadata))
    return out


def check_value(spec: FieldSpec, value) -> str | None:
    """``None`` if ``value`` has the field's type, else a message (TOML and JSON values).

    Args:
        spec: The field.
        value: A TOML or JSON value.

    Returns:
        ``None`` if the value fits (always for custom fields), else ``"expected ..., got ..."``.
    """
    if value is None and spec.optional:
        return None
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    ok = {
        "bool": isinstance(value, bool),
        "int": isinstance(value, int) and not isinstance(value, bool),
        "float": number,
        "str": isinstance(value, str),
        "floats": isinstance(value, (list, tuple))
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value),
        "custom": True,
    }[spec.kind]
    if ok:
        return None
    expected = {"floats": "a list of numbers"}.get(spec.kind, spec.kind)
    return f"expected {expected}, got {plain(value)}"


def convert(spec: FieldSpec, value):
    """A checked TOML/JSON value as the field's Python value.

    Args:
        spec: The field.
        value: A value that passed :func:`check_value`.

    Returns:
        The value through the field's ``parse`` if it has one, floats as ``float``, lists of
            numbers as tuples of floats, anything else (and ``None``) unchanged.
    """
    if value is None:
        return None
    if "parse" in spec.metadata:
        return spec.metadata["parse"](value)
    if spec.kind == "float":
        return float(value)
    if spec.kind == "floats":
        return tuple(float(v) for v in value)
    return value


def from_mapping(config_type: type, mapping: dict, *, path: str = "fixed", skip=()) -> tuple[Any, list[str]]:
    """A validated config from a mapping of field values (a sweep file's ``[fixed]`` table minus
    its axis values). Returns ``(config, problems)``: ``config`` is ``None`` when there are
    problems, every one of which is reported with its path (``fixed.D: expected int, got 'x'``).

    Args:
        config_type: The config dataclass type.
        mapping: Field name -> TOML value.
        path: The prefix of the paths in the messages.
        skip: Keys of ``mapping`` to ignore (the axis values).

    Returns:
        ``(config, problems)``: the validated config and ``[]``, or ``None`` and the messages.
    """
    specs = field_specs(config_type)
    problems, kwargs = [], {}
    for key, value in mapping.items():
        if key in skip:
            continue
        if key not in specs:
            problems.append(f"{path}.{toml_key(key)}: unknown parameter (expected one of {', '.join(sorted(specs))})")
            continue
        msg = check_value(specs[key], value)
        if msg is None:
            try:
                kwargs[key] = convert(specs[key], value)
            except (ValueError, TypeError, KeyError) as err:
                msg = str(err)
        if msg is not None:
            problems.append(f"{path}.{toml_key(key)}: {msg}")
    if problems:
        return None, problems
    try:
        return config_type(**kwargs).validate(), []
    except (ValueError, TypeError) as err:
        return None, [f"{path}: {err}"]


def to_json(config) -> dict:
    """The config as JSON-safe values (custom fields through their ``dump``).

    Args:
        config: A config dataclass instance.

    Returns:
        Field name -> value (tuples as lists).
    """
    out = {}
    for name, spec in field_specs(type(config)).items():
        v = getattr(config, name)
        if "dump" in spec.metadata and v is not None:
            v = spec.metadata["dump"](v)
        elif isinstance(v, tuple):
            v = list(v)
        out[name] = v
    return out


def from_json(config_type: type, data: dict | str):
    """Inverse of :func:`to_json` (unknown keys, from other versions, are ignored).

    Args:
        config_type: The config dataclass type.
        data: The output of :func:`to_json`, as a dict or a JSON string.

    Returns:
        A ``config_type`` instance (not validated).
    """
    values: dict = json.loads(data) if isinstance(data, str) else data
    specs = field_specs(config_type)
    return config_type(**{k: convert(specs[k], v) for k, v in values.items() if k in specs})
