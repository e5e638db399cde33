"""The sweep-file front end under random input (hypothesis): random keys, types and values in
every table. Each file either plans (a valid run) or is refused by ``jaxattn sweep run`` with exit
code 2 and an error that names each bad key, never a traceback."""

from __future__ import annotations

import json
import math
import re

from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jaxattn import engine
from jaxattn.cli import main

MODELS = ["slm_sgd", "slm_ode", "copy_adam", "copy_theory", "nonsense"]
FIELDS = ["D", "t_max", "n_records", "eta", "seed", "H", "L", "activation", "prior", "n_test", "sigma0", "P", "N"]
KEYS = FIELDS + ["zip", "range", "", "x y", "é", "block", "group", "chunk_size", "memory_budget"]


def _toml_key(k: str) -> str:
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k)


def _toml(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v)  # a TOML basic string: the same escapes
    if isinstance(v, list):
        return "[" + ", ".join(_toml(x) for x in v) + "]"
    return "{" + ", ".join(f"{_toml_key(k)} = {_toml(x)}" for k, x in v.items()) + "}"


scalars = st.one_of(
    st.integers(-10, 3000),
    st.floats(allow_nan=True, allow_infinity=True, width=32),
    st.booleans(),
    st.sampled_from(["softmax", "bayes-softmax", "linear", "2GB", "", "onehot", "x"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(["range", "linspace", "logspace", "family", "F", "nu", "x"]), inner, max_size=3),
    ),
    max_leaves=8,
)
tables = st.dictionaries(st.sampled_from(KEYS), values, max_size=4)


@st.composite
def sweep_files(draw):
    doc = {}
    if draw(st.booleans()) or True:
        doc["model"] = draw(st.one_of(st.sampled_from(MODELS), scalars))
    for name in ("fixed", "grid", "execution", "extra"):
        if draw(st.booleans()):
            doc[name] = draw(st.one_of(tables, scalars)) if name != "extra" else draw(scalars)
    lines = []
    for k, v in doc.items():
        if not isinstance(v, dict):
            lines.append(f"{_toml_key(k)} = {_toml(v)}")
    for k, v in doc.items():
        if isinstance(v, dict):
            lines.append(f"[{_toml_key(k)}]")
            lines += [f"{_toml_key(a)} = {_toml(b)}" for a, b in v.items()]
    text = "\n".join(lines) + "\n"
    if draw(st.integers(0, 9)) == 0:  # now and then, a cut or a stray character
        cut = draw(st.integers(0, len(text)))
        text = text[:cut] + draw(st.sampled_from(["", "=", "[", '"', "\n]"])) + text[cut:]
    return text


_KEY = r'(?:[A-Za-z0-9_-]+|"(?:[^"\\]|\\.)*")'
PROBLEM = re.compile(rf"^  (TOML syntax|{_KEY}(?:\.{_KEY})*): ")  # each problem names its key path


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=sweep_files())
def test_a_random_sweep_file_plans_or_is_refused_naming_its_keys(tmp_path_factory, text):
    folder = tmp_path_factory.mktemp("fuzz")
    f = folder / "s.toml"
    f.write_text(text, encoding="utf-8")
    try:
        sweep = engine.load_file(str(f))
        engine.sweep_plan(sweep)
    except ValueError as err:
        expected = err
    else:
        return  # a valid run: planned without a traceback
    r = CliRunner().invoke(main, ["sweep", "run", str(f), "--out", str(folder / "out"), "--no-progress"])
    assert r.exit_code == 2, (text, r.output, r.exception)
    assert r.exception is None or isinstance(r.exception, SystemExit), (text, r.output)
    assert "Traceback" not in r.output
    assert r.output.splitlines()[-1 if "\n  " not in r.output else 0]  # something was said
    if isinstance(expected, engine.SweepFileError):
        for line in str(expected).splitlines()[1:]:
            assert PROBLEM.match(line), (text, line)
    assert not (folder / "out").exists()  # refused before any work
