"""Dependencies speak through the project or not at all: their log records go to the logger
:data:`DEPENDENCY_LOG` at debug level, and what a user must know (a dependency's warning or error)
becomes one line in the project's words, said once."""

from __future__ import annotations

import logging
import sys

DEPENDENCY_LOG = "jaxattn.dependencies"
"""The logger that dependencies' own messages go to, at debug level (pymbar's banner about JAX's
64-bit mode is false here: :func:`jaxattn.core.umbrella.profile` scopes that switch; its note on
the timeseries module is general advice). ``logging.getLogger(DEPENDENCY_LOG).setLevel(logging.DEBUG)``
shows them."""


class _ToDebug(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        logging.getLogger(DEPENDENCY_LOG).debug("%s: %s", record.name, record.getMessage())


class _OneLine(logging.Handler):
    """A warning or an error, once per text, as ``jaxattn: LABEL: its first line`` on stderr."""

    def __init__(self, label: str):
        super().__init__(logging.WARNING)
        self.label, self.said = label, set()

    def emit(self, record: logging.LogRecord) -> None:
        line = next((ln.strip() for ln in record.getMessage().splitlines() if ln.strip()), "")
        if line and line not in self.said:
            self.said.add(line)
            sys.stderr.write(f"jaxattn: {self.label}: {line}\n")


def route(name: str, label: str | None = None) -> None:
    """Send the records of the logger ``name`` (and its children) to :data:`DEPENDENCY_LOG` at
    debug level instead of Python's last-resort handler; with ``label``, also say its warnings
    and errors on stderr, each text once, as one line ``jaxattn: LABEL: first line``. A stream
    handler the dependency installed on that logger itself is removed: import it first.
    Idempotent.

    Args:
        name: The dependency's logger (``"pymbar"``, ``"jax"``).
        label: How the one line names it; ``None`` for none (debug only).
    """
    log = logging.getLogger(name)
    if any(isinstance(h, _ToDebug) for h in log.handlers):
        return
    for h in list(log.handlers):  # a stream of its own (JAX before 0.9 installs one at import)
        if isinstance(h, logging.StreamHandler):
            log.removeHandler(h)
    log.addHandler(_ToDebug())
    if label is not None:
        log.addHandler(_OneLine(label))
    log.propagate = False
