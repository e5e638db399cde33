"""The worked example of docs/extend.md runs as written: its blocks titled with a file name are
written into a folder (the new model's package), the other ```python blocks run in order."""

import pathlib
import re
import sys

import pytest

from jaxattn.core import attention
from jaxattn.engine import _registry as registry

DOC = pathlib.Path(__file__).parents[1] / "docs" / "extend.md"


def doc_blocks():
    return re.findall(r'```python(?: title="([^"]+)")?\n(.*?)```', DOC.read_text(), re.S)


def test_the_new_model_is_the_size_the_doc_says():
    """The two-location model's files are as long as the page says: a model costs about 130 lines."""
    lines = sum(len(code.splitlines()) for name, code in doc_blocks() if name)
    said = re.search(r"three files, (\d+) lines in all", DOC.read_text())
    assert said is not None and int(said.group(1)) == lines and lines <= 140, lines


@pytest.mark.slow  # long; CI runs it with the slow checks
def test_extend_doc_example_runs(tmp_path, monkeypatch):
    blocks = doc_blocks()
    files = [(name, code) for name, code in blocks if name]
    assert {n for n, _ in files} >= {"twoloc/__init__.py", "twoloc/task.py", "twoloc/experiments.py"}
    for name, code in files:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(code)
    # the example registers an activation and an experiment: keep the other tests' registries
    monkeypatch.setattr(attention, "_REGISTERED", dict(attention._REGISTERED))
    monkeypatch.setattr(registry, "_REGISTERED", dict(registry._REGISTERED))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    try:
        for i, (name, code) in enumerate(blocks):
            if not name:
                exec(compile(code, f"docs/extend.md[block {i}]", "exec"), namespace)
    finally:
        for m in [m for m in sys.modules if m == "twoloc" or m.startswith("twoloc.")]:
            del sys.modules[m]
    assert "sigmoid" in attention.available_activations()
    assert "twoloc_sgd" in registry.names()
