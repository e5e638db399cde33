"""Compile once and remember it: the engine's programs kept across processes.

Two caches, one folder (``$JAXATTN_CACHE_DIR``, else ``$XDG_CACHE_HOME/jaxattn``, i.e.
``~/.cache/jaxattn``), on by default for the command line and sweeps (:func:`enable`);
``JAXATTN_NO_CACHE=1`` or ``--no-cache`` turns them off:

- ``xla/``: JAX's persistent compilation cache (the compiled executables; not on CPU with
  jaxlib older than 0.10.2, whose every load from it logs a spurious error line);
- ``programs/``: the engine's programs as ``jax.export`` artifacts (StableHLO), so that a second
  process neither traces nor lowers the experiment's code again, which JAX's cache alone cannot
  skip (measured: most of what is left of a warm start, ``benchmarks/README.md``).

An exported program is keyed by everything that determines it: the experiment (name, class),
its ``static`` (``repr``), the shapes and dtypes of the inputs, the platform JAX lowers for
(``"cuda"``, not the device's ``"gpu"``), the x64 flag, the versions of jax, jaxlib and jaxattn,
and a hash of the source of the jaxattn package, of the experiment's module and of every
registered activation, so an edited model is never served an old program. Where a source cannot
be read, nothing is stored. A stored program that cannot run here anyway (another platform,
another jax) is exported again and replaced, never an error. An exported program compiles the
same StableHLO as the jitted one, so a point's bits do not depend on the cache, cold, warm or off
(``tests/test_cache.py``).
"""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
import sys

import jax

from jaxattn.core.checks import unwritable
from jaxattn.engine._files import atomic_write

_STATE: dict[str, str | None] = {"programs": None}
_SAID: set[str] = set()  # unusable cache folders already reported


def root() -> str:
    """The cache folder: ``$JAXATTN_CACHE_DIR``, else ``$XDG_CACHE_HOME/jaxattn`` (by default
    ``~/.cache/jaxattn``).

    Returns:
        The folder's path (not created).
    """
    if os.environ.get("JAXATTN_CACHE_DIR"):
        return os.environ["JAXATTN_CACHE_DIR"]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "jaxattn")


def disabled() -> bool:
    """Whether ``JAXATTN_NO_CACHE`` turns the caches off.

    Returns:
        ``True`` if ``JAXATTN_NO_CACHE`` is set to anything but empty, ``0``, ``false`` or ``no``.
    """
    return os.environ.get("JAXATTN_NO_CACHE", "").strip().lower() not in ("", "0", "false", "no")


def enable(path: str | None = None) -> str | None:
    """Turn both caches on (unless disabled); returns their folder. A compilation-cache folder
    the user already gave JAX (``jax_compilation_cache_dir``) is kept.

    Args:
        path: The cache folder; ``None`` means :func:`root`.

    Returns:
        The folder, or ``None`` if the caches are disabled or the folder cannot be written (said
        once per process, on stderr: every run then compiles afresh).
    """
    if disabled():
        return None
    path = path or root()
    programs = os.path.join(path, "programs")
    why = unwritable(programs, folder=True)
    if why is None:
        try:
            os.makedirs(programs, exist_ok=True)
        except OSError as err:
            why = err.strerror or str(err)
    if why is not None:
        if path not in _SAID:
            _SAID.add(path)
            print(
                f"jaxattn: the compile cache {path} cannot be used ({why}); running without it, so every run "
                "compiles afresh (set JAXATTN_CACHE_DIR to a writable folder, or JAXATTN_NO_CACHE=1)",
                file=sys.stderr,
            )
        return None
    if not jax.config.jax_compilation_cache_dir and not _noisy_cpu_loads():  # pyright: ignore[reportAttributeAccessIssue]
        jax.config.update("jax_compilation_cache_dir", os.path.join(path, "xla"))
        # every program, the small ones too: a second process then compiles nothing at all
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    _STATE["programs"] = os.path.join(path, "programs")
    return path


def _noisy_cpu_loads() -> bool:
    """Whether JAX's compilation cache would print an error line per executable it loads: jaxlib
    before 0.10.2, on CPU, checks the tuning flags an x86 compile records (``+prefer-no-gather``,
    ``+prefer-no-scatter``) as if they were instruction sets the host lacks, and logs "could lead
    to execution errors such as SIGILL" at every load from the cache, on the machine that wrote it
    too (the load itself works). There ``xla/`` is left off: a run compiles afresh (``programs/``
    still spares it tracing and lowering) and its terminal shows only what jaxattn says."""
    from jaxlib import version

    return version.__version_info__[:3] < (0, 10, 2) and jax.default_backend() == "cpu"


def program_dir() -> str | None:
    """Where exported programs are kept (``None``: not kept).

    Returns:
        The ``programs/`` folder set by :func:`enable`, or ``None``.
    """
    return _STATE["programs"]


@functools.cache
def source_hash(top: str | None = None) -> str:
    """A hash of the package's source: every ``.py`` file under it, by name and content, in a
    fixed order. What the code computes is keyed by it (exported programs here; the results a
    script keeps for a rerun), so an edited package never serves an old result.

    Args:
        top: The package's folder; ``None`` means the installed jaxattn.

    Returns:
        64 hex digits.
    """
    h = hashlib.sha256()
    top = top or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
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
    """The key of one program, or ``None`` where its sources cannot be read.

    Args:
        experiment: The experiment (its class's source file, ``name`` and class name count).
        static: The experiment's static configuration (by ``repr``).
        name: The program's name within the experiment.
        signature: The shapes and dtypes of the program's inputs.
        platform: The platform JAX lowers for (``"cpu"``, ``"cuda"``, ``"rocm"``, ``"tpu"``:
            :func:`jaxattn.core.devices.lowering_platform`).
        x64: Whether float64 is enabled.

    Returns:
        A 32-hex-digit key, or ``None`` where a source cannot be read.
    """
    import inspect

    from jaxattn.core.attention import registered_activations
    from jaxattn.version import __version__

    try:
        source = inspect.getsourcefile(type(experiment))
        if source is None:
            return None
        with open(source, "rb") as fh:
            module = hashlib.sha256(fh.read()).hexdigest()
        acts = tuple((n, _code_hash(fn), agg) for n, (fn, agg) in sorted(registered_activations().items()))
    except (OSError, TypeError, AttributeError):
        return None
    import jaxlib

    blob = repr(
        (
            "jaxattn-program-v1",
            jax.__version__,
            jaxlib.__version__,  # pyright: ignore[reportPrivateImportUsage]
            __version__,
            source_hash(),
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


def load_program(key: str | None):
    """A stored ``(exported, out_treedef)``, or ``None``.

    Args:
        key: The program's :func:`fingerprint`; ``None`` loads nothing.

    Returns:
        ``(jax.export.Exported, output treedef)``, or ``None`` if the programs cache is off or
            the program is not stored (or unreadable).
    """
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


def save_program(key: str | None, exported, out_def) -> None:
    """Store an exported program under its key (atomically; silently skipped where it cannot be).

    Args:
        key: The program's :func:`fingerprint`; ``None`` stores nothing.
        exported: The ``jax.export.Exported`` program.
        out_def: The treedef of its outputs.
    """
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
