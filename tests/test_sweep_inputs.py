"""Sweep files and grids refused before any work: sized before they are built (a billion points
cost nothing to refuse), values beyond the kernels' int32 refused by key, and every problem of a
file reported at once, each under its dotted key, in one line where there is one."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from click.testing import CliRunner

from jaxattn import engine
from jaxattn.cli import main
from jaxattn.slm.experiments import SLM_SGD

BILLION = """\
model = "slm_sgd"
[grid]
seed = { range = [0, 1000000000] }
"""
BILLION_MESSAGE = (
    "grid: 1000000000 points (seed 1000000000) need about 576 GB of host memory to plan (576 bytes a "
    "point), more than the memory budget of 2 GB (memory_budget; sweep run --memory-budget); make the grid smaller or split it"
)

# the command line in a child under an address-space cap (a grid that is built would hit it, not
# eat the machine); the refusal timed from the command's start, after Python and JAX are loaded
_CHILD = textwrap.dedent(
    """
    import resource, sys, time
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
    from jaxattn.cli import main
    t0 = time.perf_counter()
    try:
        main(["sweep", "run", sys.argv[1], "--out", sys.argv[2], "--no-progress"])
    except SystemExit as e:
        code = e.code
    seconds = time.perf_counter() - t0
    # this process's own peak (VmHWM): ru_maxrss keeps the forking parent's across exec
    peak = next(int(ln.split()[1]) * 1024 for ln in open("/proc/self/status") if ln.startswith("VmHWM:"))
    print("RESULT", code, seconds, peak, file=sys.stderr)
    """
)


def _cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_a_billion_point_sweep_file_is_refused_in_seconds_with_little_memory(tmp_path):
    f = tmp_path / "big.toml"
    f.write_text(BILLION)
    r = subprocess.run(
        [sys.executable, "-c", _CHILD, str(f), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )
    code, seconds, peak = r.stderr.strip().splitlines()[-1].split()[1:]
    assert r.stderr.splitlines()[-2] == f"Error: {f}: {BILLION_MESSAGE}", r.stderr
    assert int(code) == 2
    # alone about 2 s on 2 cores, mostly loading JAX; 5.0 s in CI beside the package build. Listing
    # a billion points would take minutes and the memory cap: the bound tells the two apart
    assert float(seconds) < 20.0
    assert int(peak) < 1 << 30, f"peak memory {int(peak) / 2**30:.2f} GiB"
    assert not (tmp_path / "out").exists()


def test_grids_are_sized_before_they_are_built_in_the_python_api():
    # a range of a billion seeds: refused before a list of it exists, against the host's memory
    with pytest.raises(ValueError, match=r"^grid: 1000000000 points \(seed 1000000000\) need about 576 GB of "
                       r"host memory to plan \(576 bytes a point\), more than the [0-9.]+ [kMGT]?B of host memory "
                       r"available; make the grid smaller or split it$"):
        engine.run(SLM_SGD, seed=range(10**9))
    # 10^6 x 1000 x 2 from small dimensions: refused by the plan before its points are listed
    grid = engine.Grid((engine.Dim("seed", {"seed": tuple(range(10**6))}),
                        engine.Dim("H", {"H": tuple(range(1, 1001))}), engine.Dim("eta", {"eta": (0.5, 1.0)})))
    with pytest.raises(engine.GridError) as err:
        engine.make_plan(SLM_SGD, grid=grid, memory_budget=2 * 10**9)
    assert str(err.value) == (
        "grid: 2000000000 points (seed 1000000 x H 1000 x eta 2) need about 1.41 TB of host memory to plan "
        "(704 bytes a point), more than the memory budget of 2 GB (memory_budget; sweep run --memory-budget); make the "
        "grid smaller or split it"
    )
    # the budget is the one given; a budget below 256 MB still plans a grid of 256 MB
    with pytest.raises(ValueError, match=r"^grid: 1000000 points \(seed 1000000\) need about 576 MB .* more than the "
                       r"memory budget of 300 MB "):
        engine.Grid.from_values(SLM_SGD.axis, dict(seed=range(10**6)), memory_budget=300 * 10**6)
    assert engine.Grid.from_values(SLM_SGD.axis, dict(seed=range(4)), memory_budget=1).n_points == 4


def test_the_budget_that_sizes_a_sweep_file_is_the_option_or_the_file(tmp_path):
    text = 'model = "slm_sgd"\n[grid]\nseed = { range = [0, 1000000] }\n[execution]\nmemory_budget = "300MB"\n'
    with pytest.raises(engine.SweepFileError, match="more than the memory budget of 300 MB "):
        engine.parse(text)
    with pytest.raises(engine.SweepFileError, match="more than the memory budget of 400 MB "):
        engine.parse(text, memory_budget=400 * 10**6)  # --memory-budget, over the file's
    f = tmp_path / "s.toml"
    f.write_text(text.replace('"300MB"', '"1GB"'))
    r = _cli("sweep", "run", f, "--out", tmp_path / "out", "--memory-budget", "0.3GB")
    assert r.exit_code == 2 and "more than the memory budget of 300 MB (memory_budget; sweep run --memory-budget)" in r.output
    assert not (tmp_path / "out").exists()


def test_values_beyond_the_kernels_int32_are_refused_by_their_key(tmp_path):
    cases = {
        'model = "slm_sgd"\n[fixed]\nD = 1000000000000\n':
            "fixed.D: D must be <= 2147483647 (the kernels' int32), got 1000000000000",
        'model = "slm_sgd"\n[grid]\nseed = [0, 99999999999999999999]\n':
            "grid.seed: seed must be <= 2147483647 (the kernels' int32), got 99999999999999999999",
        'model = "copy_sgld"\n[grid.zip.c]\nchain = [1, 2147483648]\nP = [10, 20]\n':
            "grid.zip.c.chain: chain must be <= 2147483647 (the kernels' int32), got 2147483648",
    }
    for i, (text, problem) in enumerate(cases.items()):
        f = tmp_path / f"s{i}.toml"
        f.write_text(text)
        with pytest.raises(engine.SweepFileError) as err:
            engine.load_file(str(f))
        assert str(err.value) == f"{f}: {problem}"
        r = _cli("sweep", "run", f, "--out", tmp_path / "out")
        assert r.exit_code == 2 and r.output.splitlines()[-1] == f"Error: {f}: {problem}", r.output
    assert not (tmp_path / "out").exists()
    with pytest.raises(ValueError, match=r"^seed must be <= 2147483647 \(the kernels' int32\), got 2147483648$"):
        engine.run(SLM_SGD, seed=[0, 2**31])


def test_every_problem_of_a_file_is_reported_under_its_key(tmp_path):
    f = tmp_path / "bad.toml"
    f.write_text(
        'model = "slm_sgd"\n[fixed]\nD = -3\nt_max = -1.0\nprior = "onehot"\n[grid]\n'
        "seed = { range = [0, 4, 0] }\neta = [0.5, 1.0]\nH = [1, 2, 0]\n"
    )
    problems = [
        "grid.seed.range: the step must not be 0, got [0, 4, 0]",
        "fixed.prior: expected a table (prior = { ... }), got 'onehot'",
        "fixed.D: D must be >= 1, got -3",
        "fixed.t_max: t_max must be > 0, got -1.0",
        "grid.H: H must be >= 1, got 0",
    ]
    with pytest.raises(engine.SweepFileError) as err:
        engine.load_file(str(f))
    assert err.value.problems == problems
    r = _cli("sweep", "run", f, "--out", tmp_path / "out")
    assert r.exit_code == 2
    assert r.output.splitlines()[-6:] == [f"Error: {f}: 5 problems"] + [f"  {p}" for p in problems]
    # a default put in a bad value's place that disagrees with a good one is no second problem
    with pytest.raises(engine.SweepFileError) as err:
        engine.parse('model = "slm_sgd"\n[fixed]\nD = "many"\nprior = { family = "onehot", F = 300, nu = 9.0 }\n')
    assert err.value.problems == ["fixed.D: expected int, got 'many'"]
    # a problem of two fields together stays under the field it names
    with pytest.raises(engine.SweepFileError) as err:
        engine.parse('model = "slm_sgd"\n[fixed]\nD = 5\nprior = { family = "onehot", F = 10, nu = 9.0 }\n')
    assert err.value.problems == ["fixed.D: D must be >= F, got D=5, F=10"]


def test_a_binary_file_and_a_bad_budget_are_one_line_naming_what_is_wrong(tmp_path):
    f = tmp_path / "s.toml"
    f.write_bytes(b'model = "slm_sgd"\n\x89PNG\r\n')
    message = f"{f}: not a text file: byte 0x89 at offset 18 is not UTF-8 (a sweep file is TOML)"
    with pytest.raises(engine.SweepFileError, match="^" + message.replace("(", r"\(").replace(")", r"\)") + "$"):
        engine.load_file(str(f))
    r = _cli("sweep", "run", f, "--out", tmp_path / "out")
    assert r.exit_code == 2 and r.output.splitlines()[-1] == f"Error: {message}"

    f.write_text('model = "slm_sgd"\n')
    r = _cli("sweep", "run", f, "--out", tmp_path / "out", "--memory-budget", "lots")
    assert r.exit_code == 2
    assert r.output.splitlines()[-1] == (
        "Error: Invalid value for '--memory-budget': expected a size like '2GB' or '512MiB', got 'lots'"
    )
    assert not (tmp_path / "out").exists()


def test_sizes_are_read_exactly_or_refused():
    assert engine.parse_size("1.5GB") == 1_500_000_000
    assert engine.parse_size(".5 kib") == 512
    assert engine.parse_size("9" * 40 + "GB") == int("9" * 40) * 10**9  # no float on the way
    for bad in ("1e400GB", "1.2.3GB", "..GB", "2 parsecs", 2.5, None):
        with pytest.raises(ValueError, match=r"^expected a size like '2GB' or '512MiB', got "):
            engine.parse_size(bad)
    with pytest.raises(ValueError, match=r"^must be positive, got '0GB'$"):
        engine.parse_size("0GB")


def test_range_lengths_are_counted_without_building_them():
    from jaxattn.engine._axes import count_values

    problems: list[str] = []
    for args in ([5], [2, 9], [0, 10, 3], [10, 0, -3], [-7, 7, 2]):
        assert count_values("grid.seed", {"range": args}, problems) == len(range(*args)), args
    # past 2**63, where len(range(...)) overflows
    assert count_values("grid.seed", {"range": [-(10**30), 10**30, 7]}, problems) == (2 * 10**30 + 6) // 7
    assert count_values("grid.seed", {"range": [0, 10, -1]}, problems) is None
    assert problems == ["grid.seed.range: gives no values ([0, 10, -1])"]


def test_a_sweep_file_plans_the_values_it_planned_before_the_sizing():
    import numpy as np

    s = engine.parse('model = "slm_sgd"\n[grid]\nseed = { range = [10, 0, -3] }\n'
                     "L = { logspace = [2, 64, 9], integer = true }\n")
    assert s.dims[0].values["seed"] == (10, 7, 4, 1)
    assert s.dims[1].values["L"] == tuple(dict.fromkeys(int(round(x)) for x in np.geomspace(2, 64, 9)))


def test_distributed_without_a_cluster_is_one_line_before_any_work(tmp_path):
    f = tmp_path / "tiny.toml"
    f.write_text('model = "slm_sgd"\n[fixed]\nD = 8\nt_max = 0.5\n[grid]\nseed = [0, 1]\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "JAX_COORDINATOR", "JAX_NUM", "JAX_PROC"))}
    r = subprocess.run(
        [sys.executable, "-m", "jaxattn", "sweep", "run", str(f), "--out", str(tmp_path / "s"), "--distributed"],
        capture_output=True, text=True, timeout=120, env=env,
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip().splitlines()[-1] == (
        "Error: --distributed: JAX's distributed runtime did not start (coordinator_address should be defined); run "
        "it under SLURM or on a TPU pod, or set JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES and JAX_PROCESS_ID"
    )
    r = subprocess.run(
        [sys.executable, "-m", "jaxattn", "sweep", "run", str(f), "--out", str(tmp_path / "s"), "--distributed"],
        capture_output=True, text=True, timeout=120, env={**env, "JAX_PROCESS_ID": "first"},
    )
    assert r.returncode == 2 and r.stderr.strip().splitlines()[-1] == (
        "Error: --distributed: JAX_PROCESS_ID must be an integer, got 'first'"
    )
    assert not (tmp_path / "s").exists()
