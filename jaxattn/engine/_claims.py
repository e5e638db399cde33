"""Chunk claims: any number of workers on a shared file system share a sweep, with no coordinator.

A worker that wants to compute chunk ``c`` creates ``PATH/claims/c000012.json`` *exclusively*
(a hard link of a file it has written whole: of workers racing, exactly one succeeds, on one host
or several), holding its host, process, worker label, a random token and the time. While it
computes, a heartbeat thread touches the file (its modification time is the heartbeat). It then
writes the chunk (atomically, :mod:`jaxattn.engine._files`) and removes its claim.

A claim is *stale*, and another worker takes the chunk over, when

- its process is gone (same host: checked at once), or
- its heartbeat is older than the timeout (any host: ``--claim-timeout``), or
- it was made by another process with the same worker label (a requeued job-array task), or
- it existed when the taker started with ``--reclaim`` (after a crash: every claim then is dead).

Taking over renames the stale claim away (atomic: one taker wins) before claiming anew. A chunk
computed twice (a slow worker judged dead) is harmless: both write the same bits atomically.
"""

from __future__ import annotations

import json
import os
import secrets
import threading
import time
from dataclasses import dataclass

from jaxattn.engine._files import HOST, create_exclusive, exclusive_link, pid_alive

DEFAULT_TIMEOUT = 300.0  # seconds without a heartbeat after which a claim is stale


@dataclass(frozen=True)
class Claim:
    """Who holds a chunk: ``heartbeat`` is the claim file's modification time.

    Attributes:
        chunk: The chunk's id.
        host: The claiming worker's host name.
        pid: Its process id.
        worker: Its worker label.
        token: A random token identifying this claim.
        time: When the claim was made (seconds since the epoch).
        heartbeat: The claim file's modification time (seconds since the epoch).
    """

    chunk: int
    host: str
    pid: int
    worker: str
    token: str
    time: float
    heartbeat: float

    def age(self, now: float | None = None) -> float:
        """Seconds since the last heartbeat.

        Args:
            now: The current time; ``None`` means ``time.time()``.

        Returns:
            ``now - heartbeat``.
        """
        return (time.time() if now is None else now) - self.heartbeat


def claim_path(root: str, cid: int) -> str:
    """The claim file of a chunk.

    Args:
        root: The sweep's folder.
        cid: The chunk's id.

    Returns:
        ``root/claims/cNNNNNN.json``.
    """
    return os.path.join(root, "claims", f"c{cid:06d}.json")


def read(root: str, cid: int, path: str | None = None) -> Claim | None:
    """The claim on a chunk, read from its file.

    Args:
        root: The sweep's folder.
        cid: The chunk's id.
        path: The file to read; ``None`` means :func:`claim_path`.

    Returns:
        The ``Claim``, or ``None`` if there is none (or the file is partial or invalid).
    """
    path = path or claim_path(root, cid)
    try:
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
        return Claim(d["chunk"], d["host"], d["pid"], d["worker"], d["token"], d["time"], os.path.getmtime(path))
    except (FileNotFoundError, json.JSONDecodeError, KeyError):
        return None


def all_claims(root: str) -> dict[int, Claim]:
    """Every readable claim of a sweep.

    Args:
        root: The sweep's folder.

    Returns:
        Chunk id -> its :class:`Claim` (empty if there is no ``claims/`` folder).
    """
    d = os.path.join(root, "claims")
    out = {}
    for name in os.listdir(d) if os.path.isdir(d) else ():
        if name.startswith("c") and name.endswith(".json"):
            c = read(root, int(name[1:7]))
            if c is not None:
                out[c.chunk] = c
    return out


def acquire(root: str, cid: int, worker: str) -> Claim | None:
    """Claim chunk ``cid`` for this process, or ``None`` if someone holds it.

    Args:
        root: The sweep's folder.
        cid: The chunk's id.
        worker: This worker's label.

    Returns:
        The new :class:`Claim`, or ``None`` if the claim file already exists.
    """
    path = claim_path(root, cid)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    now = time.time()
    token = secrets.token_hex(8)
    text = json.dumps({"chunk": cid, "host": HOST, "pid": os.getpid(), "worker": worker, "token": token, "time": now})
    if not create_exclusive(path, text):
        return None
    return Claim(cid, HOST, os.getpid(), worker, token, now, os.path.getmtime(path))


def is_stale(
    claim: Claim, timeout: float, worker: str | None = None, reclaim: frozenset = frozenset(), now: float | None = None
) -> bool:
    """Whether ``claim`` may be taken over by this process (see the module's docstring);
    ``reclaim`` holds the tokens of the claims found when a ``--reclaim`` run started.

    Args:
        claim: The claim to judge.
        timeout: Seconds without a heartbeat after which a claim is stale.
        worker: This worker's label; a claim by another process with the same label is stale.
        reclaim: Tokens of claims that are stale regardless.
        now: The current time; ``None`` means ``time.time()``.

    Returns:
        ``True`` if the claim may be taken over (never for this process's own claims).
    """
    if claim.host == HOST and claim.pid == os.getpid():
        return False  # our own
    if claim.token in reclaim:
        return True
    if claim.host == HOST and not pid_alive(claim.pid):
        return True
    if worker is not None and claim.worker == worker:
        return True  # an earlier run of this worker (a requeued task)
    return claim.age(now) > timeout


def take_over(root: str, claim: Claim, worker: str) -> Claim | None:
    """Take a stale claim: rename it away (one taker wins), then claim anew.

    Args:
        root: The sweep's folder.
        claim: The stale claim, as read.
        worker: This worker's label.

    Returns:
        The new :class:`Claim`, or ``None`` if another worker won or the claim changed hands.
    """
    path = claim_path(root, claim.chunk)
    tomb = f"{path}.stale-{HOST}-{os.getpid()}-{secrets.token_hex(3)}"
    try:
        os.rename(path, tomb)
    except FileNotFoundError:
        return None
    moved = read(root, claim.chunk, tomb)
    if moved is None or moved.token != claim.token:  # it changed hands meanwhile: put it back
        try:
            exclusive_link(tomb, path)
        except FileExistsError:
            pass
        os.remove(tomb)
        return None
    os.remove(tomb)
    return acquire(root, claim.chunk, worker)


def release(root: str, claim: Claim) -> None:
    """Remove ``claim`` if it is still this one.

    Args:
        root: The sweep's folder.
        claim: The claim to remove (matched by its token).
    """
    now = read(root, claim.chunk)
    if now is not None and now.token == claim.token:
        try:
            os.remove(claim_path(root, claim.chunk))
        except FileNotFoundError:
            pass


class Heartbeat:
    """Touch a claim every ``interval`` seconds while a chunk is computed (a context manager).

    Args:
        root: The sweep's folder.
        claim: The claim to keep alive.
        interval: Seconds between touches.

    Attributes:
        path: The claim file.
        interval: Seconds between touches.
        stop: Set on exit to stop the thread.
        thread: The daemon thread that touches the file.
    """

    def __init__(self, root: str, claim: Claim, interval: float):
        self.path, self.interval = claim_path(root, claim.chunk), interval
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self.stop.wait(self.interval):
            try:
                os.utime(self.path)
            except FileNotFoundError:
                return

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()
