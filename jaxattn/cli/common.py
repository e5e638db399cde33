"""What every command shares: options derived from a model's config type (one set of fields and
defaults for the Python API, sweep files and the command line), comma-separated grid lists,
choices that accept hyphens, ``--json`` output, and one-line errors instead of tracebacks."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable
from typing import Any

import click


class Choice(click.Choice):
    """A choice shown with hyphens (``bayes-softmax``), as the command line spells it, that also
    accepts the underscore spelling and gives the option's own name (``bayes_softmax``);
    ``options`` may be a callable (activations registered by plugins)."""

    def __init__(self, options: Iterable[str] | Callable[[], Iterable[str]], case_sensitive: bool = True):
        names = list(options() if callable(options) else options)
        self._named = {n.replace("_", "-"): n for n in names}
        super().__init__(list(self._named), case_sensitive)

    def convert(self, value, param, ctx):
        if isinstance(value, str) and value in self._named.values():
            return value
        spelled = value.replace("_", "-") if isinstance(value, str) else value
        return self._named[str(super().convert(spelled, param, ctx))]


class OutPath(click.ParamType):
    """A file (or ``folder``) the command will write, checked when the options are read, before
    any work: a path under a file, an existing folder where a file goes, or no write permission
    is refused, naming the option. ``""`` (write nothing) passes."""

    name = "path"

    def __init__(self, folder: bool = False):
        self.folder = folder

    def convert(self, value, param, ctx):
        from jaxattn.core.checks import unwritable

        why = unwritable(value, self.folder) if value else None
        if why is not None:
            self.fail(f"cannot write {value}: {why}", param, ctx)
        return value


def floats(_ctx, param, value):
    """A comma-separated list of numbers."""
    if value is None:
        return None
    try:
        return [float(v) for v in str(value).split(",") if v.strip()]
    except ValueError as err:
        raise click.BadParameter(f"expected comma-separated numbers, got {value!r}", param=param) from err


def ints(ctx, param, value):
    """A comma-separated list of integers."""
    vals = floats(ctx, param, value)
    if vals is None:
        return None
    if not all(float(v).is_integer() for v in vals):
        raise click.BadParameter(f"expected comma-separated integers, got {value!r}", param=param)
    return [int(v) for v in vals]


def words(_ctx, _param, value):
    """A comma-separated list of names."""
    return None if value is None else [v.strip() for v in str(value).split(",") if v.strip()]


def _finite_or_none(v):
    if isinstance(v, float) and v != v:  # NaN: not JSON; null says "no value" to every reader
        return None
    if isinstance(v, list):
        return [_finite_or_none(x) for x in v]
    return v


def emit(obj: dict, as_json: bool) -> None:
    """The headline numbers: one JSON object (strict JSON: ``NaN`` is ``null``), or one
    ``key: value`` line each."""
    if as_json:
        click.echo(json.dumps({k: _finite_or_none(v) for k, v in obj.items()}))
    else:
        for k, v in obj.items():
            click.echo(f"{k}: {v}")


def clean_errors(fn):
    """Turn a ``ValueError`` from validation into a usage error naming the parameter, and a
    missing input file into a one-line error."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except FileNotFoundError as err:
            raise click.ClickException(str(err).strip('"')) from err
        except ValueError as err:
            raise click.UsageError(str(err)) from err

    return wrapper


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def config_options(config_type: type, *, skip=(), choices: dict | None = None, defaults: dict | None = None):
    """Click options for the fields of ``config_type`` (``--t-max``, ``--share-data/--no-share-data``
    ...), with the config's defaults and help texts; fields whose metadata says ``cli=False``, and
    those in ``skip``, are left out. ``choices`` maps a field to its options; ``defaults``
    overrides a default for this command only."""
    choices = choices or {}
    defaults = defaults or {}

    def decorate(fn):
        from jaxattn.engine import config as cfgs

        for spec in reversed(list(cfgs.field_specs(config_type).values())):
            cli = spec.metadata.get("cli", True)
            if spec.name in skip or cli is False or spec.kind in ("custom", "floats"):
                continue
            name = cli if isinstance(cli, str) else flag(spec.name)
            default = defaults.get(spec.name, spec.default)
            kw: dict[str, Any] = dict(default=default, help=spec.help, show_default=default is not None)
            if spec.kind == "bool":
                fn = click.option(f"{name}/--no-{name[2:]}", spec.name, **kw)(fn)
                continue
            if spec.name in choices:
                kw["type"] = Choice(choices[spec.name])
                if isinstance(default, str):
                    kw["default"] = default.replace("_", "-")  # shown as typed; converted back
            else:
                kw["type"] = {"int": int, "float": float, "str": str}[spec.kind]
            fn = click.option(name, spec.name, **kw)(fn)
        return fn

    return decorate


def config_from(config_type: type, options: dict, **extra):
    """The config of a command's options (only the fields it has), validated."""
    from jaxattn.engine import config as cfgs

    specs = cfgs.field_specs(config_type)
    kw = {k: v for k, v in options.items() if k in specs}
    kw.update(extra)
    return config_type(**kw).validate()


def axis_list(axis, default=None):
    """A comma-separated grid option for an engine axis (``--H 1,2,4``)."""
    cb = ints if axis.kind == "int" else floats if axis.kind == "float" else words
    d = axis.default if default is None else default
    return click.option(
        flag(axis.name) if axis.name.islower() else f"--{axis.name}",
        axis.name,
        callback=cb,
        default=",".join(str(x) for x in d) if isinstance(d, (list, tuple)) else str(d),
        show_default=True,
        help=f"{axis.help.rstrip('.')} (comma-separated list).",
    )
