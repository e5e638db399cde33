"""Sweeps beyond one process: chunk claims (exclusive, stale when their worker is dead, taken over
once), workers that start together or late, a worker killed mid-chunk, ``jax.distributed`` on
localhost, the submitit local executor, and a worker with another sweep file refused."""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest
import xla_cache
from tiny_sweep import assert_same_bits, tiny_sweep

from jaxattn import engine
from jaxattn.engine import _claims as claims
from jaxattn.engine import store

# 12 points, 6 chunks of one stream (2 points) each: about a second a chunk once compiled; the
# workers compile afresh (a cached compile could finish a chunk before a test kills its worker)
ENV = xla_cache.uncached(JAXATTN_NO_CACHE="1", XLA_FLAGS="--xla_force_host_platform_device_count=1")


def _file(tmp_path, chunk=2, name="s.toml"):
    f = tmp_path / name
    f.write_text(tiny_sweep(chunk=chunk))
    return str(f)


def _worker(f, out, *extra, env=ENV):
    cmd = [sys.executable, "-m", "jaxattn", "sweep", "run", f, "--out", out, "--no-progress", *extra]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(procs, timeout=600):
    for p in procs:
        out, err = p.communicate(timeout=timeout)
        assert p.returncode == 0, err[-3000:]


def _kill_mid_chunk(proc, out, timeout=300.0):
    """SIGKILL ``proc`` as soon as it holds a claim (it is then mid-chunk); returns the claim."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        held = next((c for c in claims.all_claims(out).values() if c.pid == proc.pid), None)
        if held is not None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            return held
        time.sleep(0.01)
    raise AssertionError(f"process {proc.pid} never claimed a chunk")


def _computed(out):
    return [e["chunk"] for e in store.read_log(out) if e.get("event") == "computed"]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """One process, uninterrupted: the dataset every multi-worker run must equal."""
    tmp = tmp_path_factory.mktemp("ref")
    f = _file(tmp)
    _finish([_worker(f, str(tmp / "one"))])
    return engine.load_store(str(tmp / "one"))


# --- claims, in one process ---------------------------------------------------------------------

def test_a_claim_is_exclusive_and_released(tmp_path):
    root = str(tmp_path)
    got = []
    barrier = threading.Barrier(8)

    def race():
        barrier.wait()
        got.append(claims.acquire(root, 3, "w"))

    threads = [threading.Thread(target=race) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    won = [c for c in got if c is not None]
    assert len(won) == 1 and won[0].chunk == 3
    assert claims.read(root, 3).token == won[0].token
    claims.release(root, won[0])
    assert claims.read(root, 3) is None and claims.acquire(root, 3, "w") is not None


def test_stale_claims_dead_process_old_heartbeat_same_worker_and_reclaim(tmp_path):
    root = str(tmp_path)
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(gone.stdout)

    def foreign(cid, pid, host=socket.gethostname(), worker="x", age=0.0):
        path = claims.claim_path(root, cid)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as fh:
            json.dump({"chunk": cid, "host": host, "pid": pid, "worker": worker, "token": f"t{cid}", "time": 0}, fh)
        os.utime(path, (time.time() - age, time.time() - age))
        return claims.read(root, cid)

    live = foreign(0, os.getppid())  # a live process of this host (pytest's parent)
    assert not claims.is_stale(live, timeout=60)
    assert claims.is_stale(foreign(1, dead_pid), timeout=60)  # its process is gone
    far = foreign(2, 1, host="elsewhere", age=10.0)  # another host: only the heartbeat tells
    assert not claims.is_stale(far, timeout=60) and claims.is_stale(far, timeout=5)
    assert claims.is_stale(foreign(3, os.getppid(), worker="2/4"), timeout=60, worker="2/4")  # requeued task
    assert claims.is_stale(live, timeout=60, reclaim=frozenset({live.token}))
    # a take-over: one taker wins, and the claim is then the taker's
    stale = claims.read(root, 1)
    took = [claims.take_over(root, stale, "me") for _ in range(2)]
    assert took[0] is not None and took[0].worker == "me" and took[1] is None
    assert claims.read(root, 1).token == took[0].token


def test_a_heartbeat_keeps_a_claim_fresh(tmp_path):
    root = str(tmp_path)
    c = claims.acquire(root, 0, "w")
    os.utime(claims.claim_path(root, 0), (time.time() - 100, time.time() - 100))
    with claims.Heartbeat(root, c, interval=0.05):
        time.sleep(0.3)
    assert claims.read(root, 0).age() < 5


def test_a_worker_with_another_sweep_file_is_refused_and_the_store_left_intact(tmp_path):
    f = _file(tmp_path)
    s = engine.load_file(f)
    out = str(tmp_path / "out")
    from jaxattn.engine._sweep import open_store, sweep_plan

    open_store(s, sweep_plan(s), out, 1)
    before = {p: open(os.path.join(out, p), "rb").read() for p in ("manifest.json", "sweep.toml")}
    other = tmp_path / "other.toml"
    other.write_text(tiny_sweep(chunk=2).replace("t_max = 6.0", "t_max = 7.0"))
    r = _cli(["sweep", "run", str(other), "--out", out, "--worker", "1/2", "--no-progress"])
    assert r.exit_code == 2 and "other fixed parameters" in r.output, r.output
    assert before == {p: open(os.path.join(out, p), "rb").read() for p in before}
    assert not os.listdir(os.path.join(out, "chunks"))


def _cli(args):
    from click.testing import CliRunner

    from jaxattn.cli import main

    return CliRunner().invoke(main, args)


def test_worker_flag_is_checked():
    for bad in ("2/2", "x", "1/0"):
        r = _cli(["sweep", "run", __file__, "--worker", bad])
        assert r.exit_code == 2 and "--worker" in r.output, r.output


# --- several processes --------------------------------------------------------------------------

@pytest.mark.slow
def test_two_workers_and_a_late_third_compute_each_chunk_once(tmp_path, reference):
    f = _file(tmp_path)
    out = str(tmp_path / "out")
    procs = [_worker(f, out, "--worker", f"{i}/3") for i in range(2)]
    time.sleep(4.0)
    procs.append(_worker(f, out, "--worker", "2/3"))
    _finish(procs)
    done = _computed(out)
    assert sorted(done) == list(range(6)), done  # every chunk, each exactly once
    assert_same_bits(engine.load_store(out), reference)
    assert not os.listdir(os.path.join(out, "claims"))  # every claim released


@pytest.mark.slow
def test_a_worker_killed_mid_chunk_is_taken_over(tmp_path, reference):
    f = _file(tmp_path, chunk=2)
    out = str(tmp_path / "out")
    victim, other = _worker(f, out, "--worker", "0/2"), _worker(f, out, "--worker", "1/2")
    held = _kill_mid_chunk(victim, out)
    assert not os.path.exists(store.chunk_path(out, held.chunk))
    _finish([other])
    log = store.read_log(out)
    done = _computed(out)
    assert sorted(done) == list(range(6)), done  # the killed chunk too, computed once
    assert all(e["pid"] == other.pid for e in log if e.get("event") == "computed")
    assert_same_bits(engine.load_store(out), reference)


def test_status_across_workers(tmp_path):
    import xarray as xr

    from jaxattn.engine._sweep import open_store, sweep_plan

    f = _file(tmp_path)
    s = engine.load_file(f)
    out = str(tmp_path / "out")
    open_store(s, sweep_plan(s), out, 1)
    store.write_chunk(out, 0, xr.Dataset({"diverged": ("point", [False, True]), "seed": ("point", [0, 0]),
                                          "eta": ("point", [0.5, 1.0])}))
    store.write_failure(out, 1, "ValueError: no")
    gone = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True).stdout)
    for cid, pid, worker in ((2, os.getppid(), "0/2"), (3, gone, "1/2")):
        path = claims.claim_path(out, cid)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as fh:
            json.dump({"chunk": cid, "host": socket.gethostname(), "pid": pid, "worker": worker, "token": "t",
                       "time": 0}, fh)
    now = time.time()
    with open(os.path.join(out, "log.jsonl"), "w") as fh:
        for t, chunk in ((now - 30, None), (now - 20, 6), (now - 10, 0)):
            e = {"time": t, "host": "h", "pid": 7, "worker": "0/2", "event": "computed" if chunk is not None else "start"}
            fh.write(json.dumps({**e, **({"chunk": chunk} if chunk is not None else {})}) + "\n")
    st = engine.status(out)
    assert (st["done"], list(st["failed"]), st["claimed"], st["stale"], st["pending"]) == ([0], [1], [2], [3], [4, 5])
    assert st["diverged"] == [{"seed": 0, "eta": 1.0}]
    assert st["seconds_left"] == pytest.approx(4 / 0.1, rel=1e-6)  # 4 chunks left, one per 10 s
    assert st["workers"]["0/2"]["computed"] == [6, 0] and st["workers"]["0/2"]["claimed"] == [2]
    assert st["workers"]["1/2"]["claimed"] == [3]
    assert json.loads(_cli(["sweep", "status", out, "--json"]).output)["stale"] == [3]
    text = _cli(["sweep", "status", out]).output
    assert "claimed: 1  stale: 1" in text and "worker 1/2" in text and "last seen" in text and "stale claim: chunk 3" in text


_DIST = r"""
import os, sys
os.environ["JAX_PLATFORMS"] = "cpu"
from jaxattn.cli import main
sys.argv = ["jaxattn", "sweep", "run", sys.argv[1], "--out", sys.argv[2], "--distributed", "--no-progress", "--json",
            *sys.argv[3:]]
main()
"""


def _distributed(f, out, extra=()):
    with socket.socket() as s:
        s.bind(("localhost", 0))
        port = s.getsockname()[1]
    procs = []
    for i in range(2):
        env = {**ENV, "JAX_COORDINATOR_ADDRESS": f"localhost:{port}", "JAX_NUM_PROCESSES": "2",
               "JAX_PROCESS_ID": str(i)}
        procs.append(subprocess.Popen([sys.executable, "-c", _DIST, f, out, *extra], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    return procs


@pytest.mark.slow
def test_jax_distributed_on_localhost_gives_the_same_dataset(tmp_path, reference):
    f = _file(tmp_path)
    out = str(tmp_path / "out")
    _finish(_distributed(f, out))
    assert sorted(_computed(out)) == list(range(6))
    assert {e["process"] for e in store.read_log(out) if e.get("event") == "start"} == {0, 1}
    assert_same_bits(engine.load_store(out), reference)


@pytest.mark.slow
def test_jax_distributed_survives_a_process_killed_mid_chunk(tmp_path, reference):
    f = _file(tmp_path)
    out = str(tmp_path / "out")
    p0, p1 = _distributed(f, out, ("--claim-timeout", "20"))
    _kill_mid_chunk(p1, out)
    _finish([p0])  # recoverability on: the coordinator's process goes on and takes the chunk over
    assert sorted(_computed(out)) == list(range(6))
    assert_same_bits(engine.load_store(out), reference)


@pytest.mark.slow
def test_submitit_local_executor_with_two_workers(tmp_path, reference):
    pytest.importorskip("submitit")
    f = _file(tmp_path)
    out = str(tmp_path / "out")
    r = subprocess.run([sys.executable, "-m", "jaxattn", "sweep", "submit", f, "--out", out, "--executor", "local",
                        "--workers", "2", "--time", "20", "--json"], env=ENV, capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["done"] == 6 and sum(summary["computed"]) == 6, summary
    assert sorted(_computed(out)) == list(range(6))
    assert_same_bits(engine.load_store(out), reference)
