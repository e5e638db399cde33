"""What every command shares: options derived from a model's config type (one set of fields and
defaults for the Python API, sweep files and the command line), comma-separated grid lists,
choices that accept hyphens, ``--json`` output, and one-line errors instead of tracebacks."""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Iterable, Mapping
from numbers import Integral, Real
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


NETCDF_MAGIC = (b"CDF\x01", b"CDF\x02", b"CDF\x05", b"\x89HDF\r\n\x1a\n")
"""How a netCDF file (classic, 64-bit offset, CDF-5, or netCDF-4 on HDF5) begins."""

FIGURE_MAGIC = {
    ".png": (b"\x89PNG",),
    ".pdf": (b"%PDF",),
    ".jpg": (b"\xff\xd8",),
    ".jpeg": (b"\xff\xd8",),
    ".svg": (b"<?xml", b"<svg"),
    ".eps": (b"%!PS",),
    ".ps": (b"%!PS",),
}
"""How a figure file of each extension begins (formats not listed are not checked)."""


class OutPath(click.ParamType):
    """A file the command will write (``kind``: ``"netcdf"`` or ``"figure"``), or a ``"folder"``,
    checked when the options are read, before any work, and refused naming the option:
    - a path that cannot be written, found by creating and removing a probe file there (a root
      user passes every permission test, ``/proc`` included);
    - a figure in a format matplotlib cannot write;
    - an existing file of another kind (a text file given as ``--out``): it is not overwritten;
      remove it, or choose another path.

    ``""`` (write nothing) passes; a missing folder on the way is created when the file is
    written.
    """

    name = "path"

    def __init__(self, kind: str = "netcdf"):
        if kind not in ("netcdf", "figure", "folder"):
            raise ValueError(f"kind must be 'netcdf', 'figure' or 'folder', got {kind!r}")
        self.kind = kind

    def convert(self, value, param, ctx):
        if value == "":
            return value
        why = problem_writing(value, self.kind)
        if why is not None:
            self.fail(why, param, ctx)
        return value


def problem_writing(path: str, kind: str) -> str | None:
    """Why the command could not write ``path`` as a ``kind`` of :class:`OutPath`, if it could
    not (one line), else ``None``."""
    import os

    from jaxattn.core.checks import unwritable

    why = unwritable(path, kind == "folder")
    if why is not None:
        return f"cannot write {path}: {why}"
    ext = os.path.splitext(path)[1].lower()
    if kind == "figure":
        from jaxattn.plots import figure_formats

        formats = figure_formats()
        if ext.lstrip(".") not in formats:
            what = f"unknown format {ext!r}" if ext else "no extension names its format"
            return f"cannot write a figure as {path}: {what} (formats: {', '.join(sorted(formats))})"
    if kind != "folder" and os.path.isfile(path) and os.path.getsize(path) > 0:
        magic = NETCDF_MAGIC if kind == "netcdf" else FIGURE_MAGIC.get(ext)
        if magic is not None:
            with open(path, "rb") as f:
                head = f.read(16).lstrip()
            if not head.startswith(magic):
                what = "netCDF file" if kind == "netcdf" else f"{ext[1:].upper()} figure"
                return f"{path} exists and is not a {what}: not overwritten (remove it, or choose another path)"
    return None


def figure_error(path: str | None, draw: Callable[[str], Any]) -> str | None:
    """Draw a figure with ``draw(path)`` (nothing when ``path`` is empty). A failure is returned
    as one line naming the figure, not raised, so that the command still prints its summary (and
    has saved its dataset) before it exits with the error (:func:`fail_late`).

    Args:
        path: The figure's file, or ``""`` / ``None`` for none.
        draw: Draws and writes the figure to the path it is given.

    Returns:
        ``None`` if the figure was written (or none was asked for), else the error.
    """
    if not path:
        return None
    try:
        draw(path)
    except Exception as err:  # noqa: BLE001 - any failure of the figure: the results stand
        return f"could not write the figure {path}: {err}"
    return None


def fail_late(*errors: str | None) -> None:
    """Exit with the errors met after the results were saved and printed (one line each)."""
    errs = [e for e in errors if e]
    if errs:
        raise click.ClickException("; ".join(errs))


def floats(_ctx, param, value):
    """A comma-separated list of numbers."""
    if value is None:
        return None
    try:
        vals = [float(v) for v in str(value).split(",") if v.strip()]
    except ValueError as err:
        raise click.BadParameter(f"expected comma-separated numbers, got {value!r}", param=param) from err
    if not vals:
        raise click.BadParameter(f"expected at least one number, got {value!r}", param=param)
    return vals


def ints(ctx, param, value):
    """A comma-separated list of integers."""
    vals = floats(ctx, param, value)
    if vals is None:
        return None
    if not all(float(v).is_integer() for v in vals):
        raise click.BadParameter(f"expected comma-separated integers, got {value!r}", param=param)
    return [int(v) for v in vals]


def words(_ctx, _param, value):
    """A comma-separated list of names (at least one)."""
    if value is None:
        return None
    vals = [v.strip() for v in str(value).split(",") if v.strip()]
    if not vals:
        raise click.BadParameter(f"expected at least one name, got {value!r}", param=_param)
    return vals


def emit(obj: dict, as_json: bool, summary: dict | None = None) -> None:
    """The command's result: with ``as_json``, ``obj`` as one JSON object at full precision
    (strict JSON: ``NaN`` is ``null``); else a summary for a person (:func:`summary_lines`) of
    ``summary``, or of ``obj`` where none is given."""
    if as_json:
        from jaxattn.io import json_safe

        click.echo(json.dumps(json_safe(obj)))
    else:
        click.echo("\n".join(summary_lines(obj if summary is None else summary)))


SHOWN_VALUES = 6
"""A list longer than this is not printed, only counted (it is in ``--json`` and the dataset)."""


def summary_lines(obj: dict) -> list[str]:
    """``key: value`` lines, the values aligned: numbers to 4 significant digits, a value beside
    its ``KEY_err`` as ``value ± error`` (the value to the error's last digit), flags as yes/no,
    short lists and flat mappings inline, and arrays and mappings of them only counted."""
    rows = []
    for k, v in obj.items():
        if k.endswith("_err") and k[: -len("_err")] in obj:
            continue
        err = obj.get(f"{k}_err")
        rows.append((k, with_error(v, err) if _number(v) and _number(err) else _human(v)))
    width = max((len(k) for k, _ in rows), default=0) + 1
    return [f"{k + ':':<{width}} {text}" for k, text in rows]


def _number(v) -> bool:
    return isinstance(v, Real) and not isinstance(v, bool) and type(v).__name__ != "bool_"


def with_error(v, err) -> str:
    """``v ± err``, the error to 2 significant digits and the value to its last digit."""
    v, err = float(v), float(err)
    if not (math.isfinite(v) and math.isfinite(err)) or err <= 0:
        return f"{_human(v)} ± {_human(err)}"
    digits = max(0, 1 - math.floor(math.log10(err)))  # the error to 2 significant digits
    return f"{v:.{digits}f} ± {err:.{digits}f}"


def _human(v) -> str:
    if v is None:
        return "none"
    if isinstance(v, bool) or type(v).__name__ == "bool_":
        return "yes" if v else "no"
    if isinstance(v, Real) and not isinstance(v, Integral):
        return f"{float(v):.4g}"
    tolist = getattr(v, "tolist", None)  # a NumPy array or scalar
    if callable(tolist):
        v = tolist()
    if isinstance(v, dict):
        if any(isinstance(x, (list, tuple, dict)) for x in v.values()):  # curves: counted
            return f"{len(v)} series (in --json)"
        return ", ".join(f"{k}: {_human(x)}" for k, x in v.items()) if v else "none"
    if isinstance(v, (list, tuple)):
        if any(isinstance(x, (list, tuple)) for x in v):  # nested: counted
            n = sum(len(x) if isinstance(x, (list, tuple)) else 1 for x in v)
            return "none" if n == 0 else f"{n} values (in --json)"
        if len(v) > SHOWN_VALUES:
            return f"{len(v)} values (in --json)"
        return ", ".join(_human(x) for x in v) if v else "none"
    return str(v)


def progress_option(fn):
    """``--progress/--no-progress``: progress bars on stderr (on by default)."""
    return click.option("--progress/--no-progress", default=True, show_default=True)(fn)


FIGURE_HELP = "Figure (PNG, PDF, SVG ...; '' for none)."


def out_option(default: str, help: str = "netCDF file ('' for none).", kind: str = "netcdf", dest: str = "out"):
    """``--out``: what a command writes (a ``kind`` of :class:`OutPath`), checked before any work."""
    return click.option("--out", dest, type=OutPath(kind), default=default, show_default=True, help=help)


def figure_option(default: str, help: str = FIGURE_HELP):
    """``--figure``: the figure file, its format from its extension, checked before any work."""
    return click.option("--figure", type=OutPath("figure"), default=default, show_default=True, help=help)


def renamed(old: str, new: str):
    """A hidden option ``old`` that only says, in one line, that it is now ``new`` (the one
    spelling of its notion across commands: ``docs/index.md``, "Options")."""

    def say(ctx: click.Context, _param, value):
        if value is not None:
            raise click.UsageError(f"{old} is now {new}", ctx)

    # a name of its own: the parser keeps values by name, and the new option may keep the old one's
    name = "renamed_" + old.lstrip("-").replace("-", "_")
    return click.option(old, name, hidden=True, expose_value=False, is_eager=True, default=None, callback=say)


def clean_errors(fn):
    """Turn a ``ValueError`` from validation into a usage error naming the option as the user
    typed it (``--chains must be >= 1``, where the config says ``n_chains``), and a missing input
    file, or the engine's failed chunks, into a one-line error."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except FileNotFoundError as err:
            raise click.ClickException(str(err).strip('"')) from err
        except ValueError as err:
            raise click.UsageError(as_typed(str(err), click.get_current_context(silent=True))) from err
        except RuntimeError as err:
            from jaxattn.engine import ChunksFailed  # the engine (and jax) only once a run has failed

            if isinstance(err, ChunksFailed):
                raise click.ClickException(str(err)) from err
            raise

    return wrapper


def as_typed(message: str, ctx: click.Context | None) -> str:
    """``message`` with its leading parameter name (``n_chains must be ...``) spelled as the
    command's option (``--chains must be ...``)."""
    if ctx is None:
        return message
    word, sep, rest = message.partition(" ")
    name = word.rstrip(":,")
    for p in ctx.command.params:
        if p.name == name and isinstance(p, click.Option):
            return f"{max(p.opts, key=len)}{word[len(name) :]}{sep}{rest}"
    return message


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def config_options(config_type: type, *, skip=(), choices: dict | None = None, defaults: Mapping | None = None):
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
