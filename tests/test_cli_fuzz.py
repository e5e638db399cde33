"""The command line under hostile input (hypothesis): every option of every command, found through
click's own tree, given NaN, infinities, huge and negative integers, empty strings, text where a
number goes, and paths that cannot be written. Each run must end in exit code 0 or in one line
``Error: ...`` with no traceback.

The work itself is not done: the engine's chunk computation is replaced by a sentinel, so a run
that reaches it has passed every check made before work (its config, its grid, its plan and its
memory estimate, its outputs); so is submitit's executor, whose jobs are the work of
``sweep submit``. The commands run in a subprocess under a 4 GB address-space cap,
so an input that would eat the machine fails the test instead."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile

import click
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
CAP = 4 * 2**30

SLM_TINY = ["--D", "8", "--seeds", "1", "--t-max", "0.5", "--n-records", "2", "--n-test", "8", "--no-progress"]
COPY_TINY = ["--L", "4", "--V", "2", "--n-test", "16", "--no-progress"]
BASE: dict[tuple[str, str], list[str]] = {
    ("slm", "train"): SLM_TINY + ["--no-ode", "--out", "", "--figure", ""],
    ("slm", "compare"): SLM_TINY + ["--figure", ""],
    ("slm", "bayes-risk"): ["--n", "1000"],
    ("slm", "prune"): SLM_TINY + ["--n-bank", "100", "--figure", ""],
    ("copy", "train"): COPY_TINY + ["--P", "20", "--seeds", "1", "--n-steps", "10", "--out", "", "--figure", ""],
    ("copy", "sample"): COPY_TINY + ["--P", "20", "--out", "", "--figure", ""],
    ("copy", "theory"): ["--L", "8", "--V", "4"],
    ("copy", "landscape"): ["--L", "4", "--V", "2", "--P", "20", "--no-progress", "--figure", ""],
    ("copy", "phase-diagram"): ["--sampled", "--L", "4", "--N", "1", "--no-progress"],
    ("sweep", "run"): ["tiny.toml", "--out", "store", "--no-progress"],
    ("sweep", "status"): ["planned"],
    ("sweep", "plot"): ["planned", "--var", "error", "--x", "seed", "--out", "fig.png"],
    ("sweep", "submit"): ["tiny.toml", "--out", "submitted", "--executor", "local", "--workers", "1", "--no-wait"],
}
"""Each command's small valid starting point; the fuzz changes one or two of its options."""

TINY_SWEEP = 'model = "slm_sgd"\n[fixed]\nD = 8\nt_max = 0.5\nn_records = 2\nn_test = 8\n[grid]\nseed = [0, 1]\n'

INTS = ["0", "-1", "1", "3", "2000000000", str(2**31), str(10**20), "-" + str(10**20), "nan", "", "x", "1.5"]
FLOATS = ["nan", "inf", "-inf", "0", "-1", "1e300", "1e-300", "0.5", "", "x"]
LISTS = ["1,2", "nan", "", ",", "0", "-1", "1e20", str(10**20), "x", "1,1", "inf", "2,nan"]
PATHS = ["", "/proc/x.nc", "/proc/x", "/proc", "{tmp}/missing/x.png", "{tmp}/x.foo", "{tmp}/text.txt", "{tmp}", "."]
WORDS = ["", "x", "nan", "random", "uniform,copy", ",", "/proc/x"]


def options(command: click.Command) -> list[click.Option]:
    return [p for p in command.params if isinstance(p, click.Option) and p.name not in ("help", "as_json")]


def values_for(option: click.Option) -> list[str]:
    """Hostile values for one option, by its type (and a few of its own choices)."""
    t = option.type
    if option.is_flag:
        return []
    if isinstance(t, click.Choice):
        return [*map(str, t.choices), "x", ""]
    name = type(t).__name__
    if name in ("OutPath", "Path"):
        return PATHS
    if t is click.INT or isinstance(t, click.types.IntParamType):
        return INTS
    if t is click.FLOAT or isinstance(t, click.types.FloatParamType):
        return FLOATS
    if option.callback is not None:
        return LISTS + WORDS
    return FLOATS + WORDS


def fuzz(group_name: str, examples: int) -> None:
    """Run the fuzz of every command of one group (in this process; the test calls it in a
    capped subprocess). Raises on the first command-line run that ends otherwise than in rc 0
    or one error line."""
    import importlib

    from click.testing import CliRunner
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from jaxattn.cli import GROUPS
    from jaxattn.engine import _compute, _sweep

    class Reached(Exception):
        """The work was reached: every check before it passed."""

    def stop(*args, **kwargs):
        raise Reached

    _compute.compute_chunk = _sweep.compute_chunk = stop

    class Executor:  # submitit's, whose jobs are the work: reached once the jobs are asked for
        def __init__(self, **kwargs):
            pass

        def update_parameters(self, **kwargs):
            pass

        map_array = stop

    if group_name == "sweep":
        from jaxattn.engine import launch

        assert launch.submitit is not None, "the sweep group's fuzz needs submitit (the test extra)"
        launch.submitit.AutoExecutor = Executor
    module, _, attr = GROUPS[group_name][0].partition(":")
    group = getattr(importlib.import_module(module), attr)
    tmp = tempfile.mkdtemp()
    with open(os.path.join(tmp, "text.txt"), "w") as f:
        f.write("not a dataset\n")
    with open(os.path.join(tmp, "tiny.toml"), "w") as f:
        f.write(TINY_SWEEP)
    os.chdir(tmp)
    runner = CliRunner()
    if group_name == "sweep":  # a store planned, no chunk computed (the work is the sentinel)
        r = runner.invoke(group, ["run", "tiny.toml", "--out", "planned", "--no-progress"])
        assert os.path.exists(os.path.join("planned", "manifest.json")), r.output

    def case(name: str, base: list[str], command: click.Command, changes) -> None:
        args = list(base)
        for o, v in changes:
            flag = max(o.opts, key=len)
            if o.is_flag:
                args.append(flag if not (o.secondary_opts and flag in base) else o.secondary_opts[0])
            else:
                args += [flag, v.format(tmp=tmp)]
        r = runner.invoke(command, args, catch_exceptions=True)
        where = f"jaxattn {group_name} {name} {' '.join(repr(a) for a in args)}"
        if isinstance(r.exception, Reached) or r.exit_code == 0:
            return
        out = r.output
        assert isinstance(r.exception, SystemExit), f"{where}: {type(r.exception).__name__}: {r.exception}"
        assert "Traceback" not in out, f"{where}: a traceback\n{out}"
        lines = [ln for ln in out.strip().splitlines() if ln.strip()]
        errors = [ln for ln in lines if ln.startswith("Error")]
        assert len(errors) == 1 and lines[-1] == errors[0], f"{where}: not one error line\n{out}"

    for (g, name), base in BASE.items():
        if g != group_name:
            continue
        command = group.commands[name]
        opts = [(o, v) for o in options(command) for v in values_for(o)] + [
            (o, None) for o in options(command) if o.is_flag
        ]
        def bound(name=name, base=base, command=command):
            def one(changes):
                case(name, base, command, changes)

            return one

        run = given(st.lists(st.sampled_from(opts), min_size=1, max_size=2))(bound())
        settings(max_examples=examples, derandomize=True, deadline=None, database=None,
                 suppress_health_check=list(HealthCheck))(run)()


GROUP_EXAMPLES = {"slm": 60, "copy": 60, "sweep": 60}


# the copy group compiles the most (about 30 s on 2 cores): it runs with the slow checks
@pytest.mark.parametrize(
    "group", [pytest.param(g, marks=pytest.mark.slow) if g == "copy" else g for g in sorted(GROUP_EXAMPLES)]
)
def test_every_option_ends_in_a_result_or_one_error_line(group):
    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (CAP, CAP))

    env = {**os.environ, "JAXATTN_NO_CACHE": "1"}
    r = subprocess.run([sys.executable, os.path.abspath(__file__), group, str(GROUP_EXAMPLES[group])],
                       env=env, capture_output=True, text=True, timeout=600, preexec_fn=cap)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    assert json.loads(r.stdout.strip().splitlines()[-1]) == {"group": group, "ok": True}


if __name__ == "__main__":
    fuzz(sys.argv[1], int(sys.argv[2]))
    print(json.dumps({"group": sys.argv[1], "ok": True}))
