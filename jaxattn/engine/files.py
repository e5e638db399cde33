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


def create_exclusive(path: str, text: str) -> bool:
    """Write ``text`` to ``path`` whole, unless ``path`` exists (of writers racing, exactly one
    wins: :func:`exclusive_link`); returns whether this one did."""
    tmp = tmp_name(path)
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    try:
        exclusive_link(tmp, path)
        return True
    except FileExistsError:
        return False
    finally:
        os.remove(tmp)


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` of this host is running."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def exclusive_link(src: str, dst: str) -> None:
    """Put the whole file ``src`` at ``dst`` unless ``dst`` exists (``FileExistsError``): of
    writers racing, exactly one succeeds. A hard link where the file system has them, else an
    exclusive create and a copy (readers may then briefly see a partial file)."""
    try:
        os.link(src, dst)
        return
    except FileExistsError:
        raise
    except OSError:
        pass  # no hard links here (some object-store mounts)
    fd = os.open(dst, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    with os.fdopen(fd, "wb") as out, open(src, "rb") as inp:
        out.write(inp.read())
