"""Sweeps on a real SLURM cluster: one node (this machine), started by ``scripts/slurm_local.sh``
for this module. A submitit job array whose store equals one process's bit for bit; a task
cancelled (``scancel``) or requeued (``scontrol requeue``) while it holds a claim, with nothing
lost; ``srun -n 2 ... --distributed`` (JAX finds the coordinator from SLURM's variables); and the
SLURM ids that ``sweep status`` reports. Needs root and Debian's ``slurm-wlm`` and ``munge``
(``.ci/run`` installs them); skipped, with the reason, without them."""

import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import time

import pytest
import xla_cache
from tiny_sweep import assert_same_bits, tiny_sweep

from jaxattn import engine
from jaxattn.engine import _claims as claims
from jaxattn.engine import store

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "slurm_local.sh")

# 12 points, 6 chunks of 2: well under a second a chunk once compiled; 8 slower ones, 2 to 3 s a
# chunk on one core: a task stopped while it holds a claim is really stopped mid-chunk
FAST = dict(t_max=6.0)
SLOW = dict(t_max=2000.0)


def _file(tmp, kind, seeds):
    f = tmp / "s.toml"
    f.write_text(tiny_sweep(seeds=seeds, **kind))
    return str(f)


def _computed(out):
    return [(e["chunk"], e["worker"]) for e in store.read_log(out) if e.get("event") == "computed"]


def _starts(out):
    return [e for e in store.read_log(out) if e.get("event") == "start"]


def _missing():
    """Why this machine cannot run the cluster, or ``None``."""
    path = os.environ.get("PATH", "") + os.pathsep + "/usr/sbin"
    gone = [exe for exe in ("munged", "slurmctld", "slurmd", "sbatch", "srun") if shutil.which(exe, path=path) is None]
    if gone:
        return f"{', '.join(gone)} not installed (apt-get install slurm-wlm munge)"
    if os.geteuid() != 0:
        return "slurmd needs root"
    return None


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A one-node SLURM cluster for this module; the environment that reaches it."""
    why = _missing()
    if why:
        pytest.skip(why)
    d = tmp_path_factory.mktemp("slurm")
    r = subprocess.run(["bash", SCRIPT, "start", str(d)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    conf = re.search(r"^export SLURM_CONF=(.+)$", r.stdout, re.M)
    assert conf is not None, r.stdout
    # this test's SLURM_* (were it itself in a job) would point srun and sbatch at another job
    # the jobs compile afresh (a cached compile could finish a chunk before a test cancels its job)
    env = {k: v for k, v in xla_cache.uncached().items() if not k.startswith("SLURM_")}
    env.update(
        SLURM_CONF=conf.group(1),
        JAXATTN_NO_CACHE="1",
        JAX_PLATFORMS="cpu",
        XLA_FLAGS="--xla_force_host_platform_device_count=1",
    )
    yield env
    subprocess.run(["bash", SCRIPT, "stop", str(d)], capture_output=True, text=True, timeout=120)


def _run(env, *args, timeout=600):
    r = subprocess.run(
        [sys.executable, "-m", "jaxattn", *args], env=env, capture_output=True, text=True, timeout=timeout
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    return r


def _reference(env, tmp, text, seeds):
    f = _file(tmp, text, seeds)
    _run(env, "sweep", "run", f, "--out", str(tmp / "ref"), "--no-progress")
    return f, engine.load_store(str(tmp / "ref"))


@pytest.fixture(scope="module")
def fast(cluster, tmp_path_factory):
    """The fast sweep file and one process's dataset of it."""
    return _reference(cluster, tmp_path_factory.mktemp("fast"), FAST, 6)


@pytest.fixture(scope="module")
def slow(cluster, tmp_path_factory):
    """The slow sweep file and one process's dataset of it."""
    return _reference(cluster, tmp_path_factory.mktemp("slow"), SLOW, 4)


def _slurm(env, *args):
    r = subprocess.run(list(args), env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def _submit(env, f, out, workers, *extra):
    r = _run(
        env, "sweep", "submit", f, "--out", out, "--executor", "slurm", "--workers", str(workers), "--json", *extra
    )
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["jobs"] == [f"{summary['jobs'][0].split('_')[0]}_{i}" for i in range(workers)], summary
    return summary


def _job(env, task):
    """``scontrol show job`` of one array task, as a dict (JobState, Restarts, ...)."""
    text = _slurm(env, "scontrol", "show", "job", "-o", task)
    return dict(kv.split("=", 1) for kv in text.split() if "=" in kv)


def _wait_gone(env, job, timeout=300.0):
    """Wait until no task of ``job`` is pending, running or completing."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if not _slurm(env, "squeue", "-h", "-j", job, "-o", "%i").strip():
            return
        time.sleep(0.5)
    raise AssertionError(f"job {job} still queued after {timeout} s:\n" + _slurm(env, "squeue"))


def _wait_claim(out, worker, timeout=300.0):
    """The first claim that ``worker`` holds (it is then mid-chunk)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        held = next((c for c in claims.all_claims(out).values() if c.worker == worker), None)
        if held is not None:
            return held
        time.sleep(0.05)
    raise AssertionError(f"worker {worker} never claimed a chunk")


def _result(out, task):
    """What submitit's task returned (its result pickle): ``("success", chunks)`` or an error."""
    with open(os.path.join(out, "submitit", f"{task}_0_result.pkl"), "rb") as fh:
        return pickle.load(fh)


@pytest.fixture(scope="module")
def array(cluster, fast, tmp_path_factory):
    """``jaxattn sweep submit --executor slurm --workers 4 --wait`` of the fast sweep."""
    out = str(tmp_path_factory.mktemp("array") / "out")
    return out, _submit(cluster, fast[0], out, 4, "--wait")


@pytest.mark.slow  # 40 to 60 s with its reference run: 4 tasks, 2 at a time on 2 cores
def test_a_job_array_gives_the_dataset_of_one_process(cluster, fast, array):
    out, summary = array
    assert summary["done"] == 6 and summary["pending"] == 0 and summary["failed"] == 0, summary
    assert sum(summary["computed"]) == 6, summary
    assert sorted(c for c, _ in _computed(out)) == list(range(6))  # each chunk once
    # --wait returns once every task has returned its result; SLURM marks a task COMPLETED a
    # moment later, when its process has exited
    _wait_gone(cluster, summary["jobs"][0].split("_")[0], timeout=60.0)
    for task in summary["jobs"]:
        assert _job(cluster, task)["JobState"] == "COMPLETED"
        assert _result(out, task)[0] == "success"
    assert_same_bits(engine.load_store(out), fast[1])
    assert not os.listdir(os.path.join(out, "claims"))


@pytest.mark.slow  # a few seconds (the job array of the test above)
def test_status_names_each_workers_slurm_job_and_task(cluster, array):
    out, summary = array
    array_id = summary["jobs"][0].split("_")[0]
    st = json.loads(_run(cluster, "sweep", "status", out, "--json").stdout)
    assert sorted(st["workers"]) == [f"{i}/4" for i in range(4)]
    job_ids = set()
    for label, w in st["workers"].items():
        s = w["slurm"]
        assert s["array_job_id"] == array_id and s["array_task_id"] == label.split("/")[0], (label, s)
        assert _job(cluster, f"{array_id}_{s['array_task_id']}")["JobId"] == s["job_id"]  # SLURM's own id
        job_ids.add(s["job_id"])
    assert len(job_ids) == 4


@pytest.mark.slow  # 25 to 40 s, and 20 to 35 s for the slow sweep's reference run
def test_a_task_cancelled_mid_chunk_loses_nothing(cluster, slow, tmp_path):
    f, ref = slow
    out = str(tmp_path / "out")
    summary = _submit(cluster, f, out, 2, "--no-wait")
    victim, other = summary["jobs"]
    held = _wait_claim(out, "0/2")
    _slurm(cluster, "scancel", victim)
    _wait_gone(cluster, victim.split("_")[0])
    assert _job(cluster, victim)["JobState"] == "CANCELLED"
    assert _job(cluster, other)["JobState"] == "COMPLETED" and _result(out, other)[0] == "success"
    assert not os.path.exists(os.path.join(out, "submitit", f"{victim}_0_result.pkl"))
    done = _computed(out)
    assert sorted(c for c, _ in done) == list(range(4)), done  # each chunk once, the cancelled one too
    assert (held.chunk, "1/2") in done, (held, done)  # the victim was stopped mid-chunk: the other did it
    assert_same_bits(engine.load_store(out), ref)


@pytest.mark.slow  # 30 to 55 s: the requeued task is held back 10 s (cred_expire)
def test_a_requeued_task_comes_back_and_the_sweep_finishes(cluster, slow, tmp_path):
    f, ref = slow
    out = str(tmp_path / "out")
    summary = _submit(cluster, f, out, 2, "--no-wait")
    task = summary["jobs"][0]
    _wait_claim(out, "0/2")
    _slurm(cluster, "scontrol", "requeue", task)
    _wait_gone(cluster, task.split("_")[0])
    for t in summary["jobs"]:
        assert _job(cluster, t)["JobState"] == "COMPLETED" and _result(out, t)[0] == "success"
    assert _job(cluster, task)["Restarts"] == "1"
    starts = [e for e in _starts(out) if e["worker"] == "0/2"]
    assert len(starts) == 2, starts  # the first run and the requeued one, with the same label
    assert [e.get("slurm_restart_count") for e in starts] == [None, "1"], starts
    assert {e["slurm_array_task_id"] for e in starts} == {"0"}
    st = engine.status(out)
    assert st["workers"]["0/2"]["slurm"]["restart_count"] == "1"
    assert sorted(c for c, _ in _computed(out)) == list(range(4))
    assert_same_bits(engine.load_store(out), ref)


@pytest.mark.slow  # 20 to 30 s
def test_srun_two_processes_under_jax_distributed(cluster, fast, tmp_path):
    f, ref = fast
    out = str(tmp_path / "out")
    # srun allocates 2 tasks; JAX reads SLURM_NTASKS, SLURM_PROCID and SLURM_STEP_NODELIST, and
    # takes the coordinator's port from the job id
    r = subprocess.run(
        [
            "srun",
            "-n",
            "2",
            sys.executable,
            "-m",
            "jaxattn",
            "sweep",
            "run",
            f,
            "--out",
            out,
            "--distributed",
            "--no-progress",
            "--json",
        ],
        env=cluster,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    reports = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    assert len(reports) == 2 and sum(x["computed"] for x in reports) == 6, reports
    starts = _starts(out)
    assert sorted((e["process"], e["worker"]) for e in starts) == [(0, "0/2"), (1, "1/2")], starts
    assert len({e["slurm_job_id"] for e in starts}) == 1  # one SLURM job, two processes
    assert sorted(c for c, _ in _computed(out)) == list(range(6))
    assert_same_bits(engine.load_store(out), ref)
