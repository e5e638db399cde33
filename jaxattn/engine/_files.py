"""Atomic files on a shared file system: a temporary name unique to this host and process, then a
rename into place (``os.replace`` is atomic), so a reader sees a whole file or none."""

from __future__ import annotations

import os
import secrets
import socket

HOST = socket.gethostname()


def tmp_name(path: str) -> str:
    """A temporary name beside ``path``, unique to this host and process.

    Args:
        path: The file the temporary stands for.

    Returns:
        ``.NAME.tmp-HOST-PID-RANDOM`` in ``path``'s folder.
    """
    tag = f"{HOST}-{os.getpid()}-{secrets.token_hex(3)}"
    return os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.tmp-{tag}")


def atomic_write(path: str, write) -> None:
    """``write(tmp)`` then rename ``tmp`` onto ``path``.

    Args:
        path: The file to write.
        write: Called with a temporary path to write the content to; the temporary is removed
            if it fails.
    """
    tmp = tmp_name(path)
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def create_exclusive(path: str, text: str) -> bool:
    """Write ``text`` to ``path`` whole, unless ``path`` exists (of writers racing, exactly one
    wins: :func:`exclusive_link`); returns whether this one did.

    Args:
        path: The file to create.
        text: Its content.

    Returns:
        ``True`` if this call created ``path``, ``False`` if it existed.
    """
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
    """Whether process ``pid`` of this host is running.

    Args:
        pid: A process id on this host.

    Returns:
        ``True`` if the process exists (also when it belongs to another user).
    """
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
    exclusive create and a copy (readers may then briefly see a partial file).

    Args:
        src: The whole file to put in place.
        dst: Where to put it.

    Raises:
        FileExistsError: If ``dst`` exists.
    """
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
