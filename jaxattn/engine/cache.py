"""JAX's persistent compilation cache, on by default for the command line and sweeps.

A sweep compiles each of its programs once; with the cache, a second process running the same
sweep (a resume, another worker, tomorrow's rerun) loads the compiled programs from disk instead
of compiling them again. The folder is ``$JAXATTN_CACHE_DIR``, else ``$XDG_CACHE_HOME/jaxattn/xla``
(``~/.cache/jaxattn/xla``); ``JAXATTN_NO_CACHE=1`` or ``--no-cache`` turns it off. A cache folder
the user already gave JAX (``jax_compilation_cache_dir``) is left as it is.
"""

from __future__ import annotations

import os

import jax


def default_dir() -> str:
    if os.environ.get("JAXATTN_CACHE_DIR"):
        return os.environ["JAXATTN_CACHE_DIR"]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "jaxattn", "xla")


def disabled() -> bool:
    return os.environ.get("JAXATTN_NO_CACHE", "").strip().lower() not in ("", "0", "false", "no")


def enable(path: str | None = None) -> str | None:
    """Turn the persistent compilation cache on (unless disabled); returns its folder."""
    if disabled():
        return None
    current = jax.config.jax_compilation_cache_dir
    if current and path is None:
        return current
    path = path or default_dir()
    try:
        os.makedirs(path, exist_ok=True)
    except OSError:
        return None  # a read-only home: run without the cache
    jax.config.update("jax_compilation_cache_dir", path)
    # every program, the small ones too: a second process then compiles nothing at all
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    return path
