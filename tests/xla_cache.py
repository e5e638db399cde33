"""XLA's persistent compilation cache in one folder for a whole test run: its workers, and the
processes its tests start, read a program another test compiled (a fifth of the default run's
time on 2 cores), as a user's runs do. No size limit: with one, JAX locks the folder and scans
it on every write, which made the default run half again slower.

A process whose compiles are counted, whose own program cache is checked, or which a test kills
mid-chunk (a cached compile can finish the chunk first) starts from :func:`uncached`, and
compiles as on a fresh machine."""

import os
import shutil
import tempfile

VARS = ("JAX_COMPILATION_CACHE_DIR", "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS")
_OWNER = "JAXATTN_TESTS_XLA_CACHE_OWNER"


def share() -> None:
    """Point this process and the ones it starts at the run's folder, made here if none is set
    (before JAX is imported: it reads the variables then)."""
    if not os.environ.get("JAX_COMPILATION_CACHE_DIR"):
        os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="jaxattn-tests-xla-")
        os.environ[_OWNER] = str(os.getpid())
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")


def remove() -> None:
    """Remove the folder, from the process that made it."""
    if os.environ.get(_OWNER) == str(os.getpid()):
        shutil.rmtree(os.environ["JAX_COMPILATION_CACHE_DIR"], ignore_errors=True)


def uncached(**extra: str) -> dict[str, str]:
    """``os.environ`` without the run's cache, and ``extra``."""
    return {**{k: v for k, v in os.environ.items() if k not in VARS}, **extra}
