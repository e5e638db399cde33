"""The worked example of docs/extend.md runs as written (its ```python blocks, in order)."""

import pathlib
import re

import pytest

from jaxattn.core import attention

DOC = pathlib.Path(__file__).parents[1] / "docs" / "extend.md"


@pytest.mark.slow  # long; CI runs it with the slow checks
def test_extend_doc_example_runs(tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) >= 4
    # the example registers an activation: keep the registry of the other tests untouched
    monkeypatch.setattr(attention, "_REGISTERED", dict(attention._REGISTERED))
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for i, code in enumerate(blocks):
        exec(compile(code, f"docs/extend.md[block {i}]", "exec"), namespace)
    assert "sigmoid" in attention.available_activations()
