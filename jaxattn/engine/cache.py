"""Compile once and remember it: the engine's programs kept across processes.

Two caches, one folder (``$JAXATTN_CACHE_DIR``, else ``$XDG_CACHE_HOME/jaxattn``, i.e.
``~/.cache/jaxattn``), on by default for the command line and sweeps (:func:`enable`);
``JAXATTN_NO_CACHE=1`` or ``--no-cache`` turns them off:

- ``xla/``: JAX's persistent compilation cache (the compiled executables);
- ``programs/``: the engine's programs as ``jax.export`` artifacts (StableHLO), so that a second
  process neither traces nor lowers the experiment's code again, which JAX's cache alone cannot
  skip (measured: most of what is left of a warm start, ``benchmarks/README.md``).

An exported program is keyed by everything that determines it: the experiment (name, class),
its ``static`` (``repr``), the shapes and dtypes of the inputs, the platform, the x64 flag, the
versions of jax, jaxlib and jaxattn, and a hash of the source of the jaxattn package, of the
experiment's module and of every registered activation, so an edited model is never served an
old program. Where a source cannot be read, nothing is stored. An exported program compiles the
same StableHLO as the jitted one, so a point's bits do not depend on the cache, cold, warm or off
(``tests/test_cache.py``).
"""

from __future__ import annotations

import functools
import hashlib
import os
import pickle

import jax

from jaxattn.engine.files import atomic_write

_STATE = {"programs": None}


def root() -> str:
    if os.environ.get("JAXATTN_CACHE_DIR"):
        return os.environ["JAXATTN_CACHE_DIR"]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "jaxattn")


def disabled() -> bool:
    return os.environ.get("JAXATTN_NO_CACHE", "").strip().lower() not in ("", "0", "false", "no")


def enable(path: str | None = None) -> str | None:
    """Turn both caches on (unless disabled); returns their folder. A compilation-cache folder
    the user already gave JAX (``jax_compilation_cache_dir``) is kept."""
    if disabled():
        return None
    path = path or root()
    try:
        os.makedirs(os.path.join(path, "programs"), exist_ok=True)
    except OSError:
        return None  # a read-only home: run without the caches
    if not jax.config.jax_compilation_cache_dir:
        jax.config.update("jax_compilation_cache_dir", os.path.join(path, "xla"))
        # every program, the small ones too: a second process then compiles nothing at all
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    _STATE["programs"] = os.path.join(path, "programs")
    return path


def program_dir() -> str | None:
    """Where exported programs are kept (``None``: not kept)."""
    return _STATE["programs"]


@functools.cache
def _package_hash() -> str:
    h = hashlib.sha256()
    top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the jaxattn package
    for d, dirs, files in sorted(os.walk(top)):
        dirs.sort()
        for f in sorted(files):
            if f.endswith(".py"):
                with open(os.path.join(d, f), "rb") as fh:
                    h.update(f.encode() + fh.read())
    return h.hexdigest()


def _code_hash(fn) -> str:
    """The code of a function (its bytecode, constants, names and closure values)."""
    code = fn.__code__
    cells = tuple(repr(c.cell_contents) for c in (fn.__closure__ or ()))
    return repr((code.co_code, code.co_consts, code.co_names, cells))


def fingerprint(experiment, static, name: str, signature: tuple, platform: str, x64: bool) -> str | None:
    """The key of one program, or ``None`` where its sources cannot be read."""
    import inspect

    from jaxattn.core.attention import registered_activations
    from jaxattn.version import __version__

    try:
        with open(inspect.getsourcefile(type(experiment)), "rb") as fh:
            module = hashlib.sha256(fh.read()).hexdigest()
        acts = tuple((n, _code_hash(fn), agg) for n, (fn, agg) in sorted(registered_activations().items()))
    except (OSError, TypeError, AttributeError):
        return None
    import jaxlib

    blob = repr(
        (
            "jaxattn-program-v1",
            jax.__version__,
            jaxlib.__version__,
            __version__,
            _package_hash(),
            module,
            acts,
            experiment.name,
            type(experiment).__qualname__,
            repr(static),
            name,
            signature,
            platform,
            x64,
        )
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def load_program(key: str):
    """A stored ``(exported, out_treedef)``, or ``None``."""
    d = program_dir()
    if d is None or key is None:
        return None
    path = os.path.join(d, key + ".bin")
    try:
        with open(path, "rb") as fh:
            blob, out_def = pickle.load(fh)
        return jax.export.deserialize(bytearray(blob)), out_def
    except (OSError, EOFError, pickle.UnpicklingError, ValueError, TypeError, AttributeError, ImportError):
        return None


def save_program(key: str, exported, out_def) -> None:
    d = program_dir()
    if d is None or key is None:
        return

    def write(tmp):
        with open(tmp, "wb") as fh:
            pickle.dump((bytes(exported.serialize()), out_def), fh)

    try:
        atomic_write(os.path.join(d, key + ".bin"), write)
    except (OSError, pickle.PicklingError, ValueError, TypeError):
        pass  # an unpicklable tree or a full disk: the program is simply not kept
