"""Atomic files on a shared file system: a temporary name unique to this host and process, then a
rename into place (``os.replace`` is atomic), so a reader sees a whole file or none."""

from __future__ import annotations

import os
import secrets
import socket

HOST = socket.gethostname()


def tmp_name(path: str) -> str:
    """A temporary name beside ``path``, unique to this host and process."""
    tag = f"{HOST}-{os.getpid()}-{secrets.token_hex(3)}"
    return os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.tmp-{tag}")


def atomic_write(path: str, write) -> None:
    """``write(tmp)`` then rename ``tmp`` onto ``path``."""
    tmp = tmp_name(path)
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
