"""``benchmarks/run_all.py`` knows every benchmark, refuses an unknown one by name, and records
what each run printed in one dated JSON (checked here on a benchmark replaced by a stand-in
script, so that no benchmark is timed inside the tests)."""

from __future__ import annotations

import importlib.util
import json
import pathlib

import pytest

ROOT = pathlib.Path(__file__).parents[1]


def _runner():
    spec = importlib.util.spec_from_file_location("run_all", ROOT / "benchmarks" / "run_all.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_benchmark_script_is_run():
    scripts = {p.stem for p in (ROOT / "benchmarks").glob("*.py")} - {"run_all"}
    assert sorted(_runner().BENCHMARKS) == sorted(scripts)


def test_an_unknown_benchmark_is_refused_by_name(capsys):
    with pytest.raises(SystemExit) as err:
        _runner().main(["--only", "slm_throughput,nope"])
    assert err.value.code == 2
    assert "--only: unknown benchmark nope" in capsys.readouterr().err


def test_each_run_is_recorded_with_its_output_and_a_failure_is_kept(tmp_path, monkeypatch):
    mod = _runner()
    (tmp_path / "good.py").write_text("import sys\nprint('| a | b |', sys.argv[1:])\n")
    (tmp_path / "bad.py").write_text("raise SystemExit('broken: ' + 'x' * 3)\n")
    monkeypatch.setattr(mod, "HERE", str(tmp_path))
    monkeypatch.setattr(mod, "BENCHMARKS", ["good", "bad"])
    out = tmp_path / "r.json"
    assert mod.main(["--quick", "--out", str(out)]) == 1
    doc = json.loads(out.read_text())
    assert doc["quick"] is True and set(doc["machine"]) >= {"cpus", "jax", "backend"}
    good, bad = doc["results"]["good"], doc["results"]["bad"]
    assert good["returncode"] == 0 and good["stdout"] == "| a | b | ['--quick']\n"
    assert good["command"] == "python benchmarks/good.py --quick"
    assert bad["returncode"] == 1 and "broken: xxx" in bad["stderr_tail"]
