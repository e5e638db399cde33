"""Where a result came from: the code (package version, git commit and a dirty flag when run from
a checkout), the libraries, the machine (backend, device kind), the precision (float64 or not,
and the precision of matrix products) and the command.

Every dataset the engine returns carries it as the JSON attribute ``provenance``, and every sweep
store in its manifest; ``jaxattn info PATH`` prints it.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from importlib import metadata

LIBRARIES = ("jax", "jaxlib", "diffrax", "optax", "blackjax", "numpyro", "equinox", "xarray", "numpy")


@functools.lru_cache(maxsize=1)
def _git() -> dict:
    """The commit and dirty flag of the checkout the package was imported from (``{}`` if none)."""
    # the folder holding the jaxattn package (engine/ -> jaxattn/ -> the checkout)
    top = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if not os.path.exists(os.path.join(top, ".git")):
        return {}
    try:
        commit = subprocess.run(
            ["git", "-C", top, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = (
            subprocess.run(
                ["git", "-C", top, "status", "--porcelain", "--untracked-files=no"],
                capture_output=True,
                text=True,
                timeout=10,
                check=True,
            ).stdout.strip()
            != ""
        )
    except (OSError, subprocess.SubprocessError):
        return {}
    return {"git_commit": commit, "git_dirty": dirty}


@functools.lru_cache(maxsize=1)
def _libraries() -> dict:
    out = {}
    for name in LIBRARIES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def _program() -> str:
    arg0 = sys.argv[0] if sys.argv and sys.argv[0] else "python"
    if arg0.endswith(os.path.join("jaxattn", "__main__.py")):
        return "jaxattn"  # python -m jaxattn
    return os.path.basename(arg0) if arg0 != "-c" else "python -c"


def collect(x64: bool | None = None, matmul_precision: str | None = None) -> dict:
    """The provenance of a result computed now, in this process (``x64`` and ``matmul_precision``:
    the precision it ran at; default JAX's global settings).

    Args:
        x64: Whether the result was computed in float64; ``None`` reads JAX's ``jax_enable_x64``.
        matmul_precision: The precision of its matrix products
            (:data:`~jaxattn.core.precision.MATMUL_PRECISIONS`); ``None`` reads JAX's
            ``jax_default_matmul_precision`` (``"default"`` where it is unset).

    Returns:
        A dict: ``jaxattn`` (version), ``git_commit`` and ``git_dirty`` (from a checkout),
            ``libraries`` (versions), ``backend``, ``device_kind``, ``n_devices``, ``n_processes``,
            ``x64``, ``matmul_precision``, ``command`` and ``python``.
    """
    import jax

    from jaxattn.version import __version__

    dev = jax.devices()[0]
    return {
        "jaxattn": __version__,
        **_git(),
        "libraries": _libraries(),
        "backend": jax.default_backend(),
        "device_kind": dev.device_kind,
        "n_devices": jax.device_count(),
        "n_processes": jax.process_count(),
        "x64": bool(jax.config.jax_enable_x64) if x64 is None else bool(x64),  # pyright: ignore[reportAttributeAccessIssue]
        "matmul_precision": (
            str(jax.config.jax_default_matmul_precision or "default")  # pyright: ignore[reportAttributeAccessIssue]
            if matmul_precision is None
            else matmul_precision
        ),
        "command": " ".join([_program(), *sys.argv[1:]]),
        "python": sys.version.split()[0],
    }


SLURM_IDS = {
    "slurm_job_id": "SLURM_JOB_ID",
    "slurm_array_job_id": "SLURM_ARRAY_JOB_ID",
    "slurm_array_task_id": "SLURM_ARRAY_TASK_ID",
    "slurm_restart_count": "SLURM_RESTART_COUNT",
}


def slurm_ids() -> dict[str, str]:
    """This process's SLURM job, array job, array task and restart count (those set; ``{}``
    outside SLURM), so that a store's log says which job computed what.

    Returns:
        ``slurm_job_id``, ``slurm_array_job_id``, ``slurm_array_task_id`` and
            ``slurm_restart_count``, each where its variable is set.
    """
    return {k: os.environ[v] for k, v in SLURM_IDS.items() if os.environ.get(v)}


def as_attr(x64: bool | None = None, matmul_precision: str | None = None) -> str:
    """:func:`collect` as a JSON string (netCDF attributes hold strings and numbers only).

    Args:
        x64: As in :func:`collect`.
        matmul_precision: As in :func:`collect`.

    Returns:
        The JSON text.
    """
    return json.dumps(collect(x64, matmul_precision))


def of(attrs: dict) -> dict:
    """The provenance recorded in a dataset's or a store's attributes (``{}`` if none).

    Args:
        attrs: The attributes (``provenance`` a JSON string or a mapping).

    Returns:
        The provenance as a dict, ``{}`` if there is none.
    """
    raw = attrs.get("provenance")
    if raw is None:
        return {}
    return json.loads(raw) if isinstance(raw, str) else dict(raw)
