"""The README's Python example runs as written, and prints the numbers its comments show."""

import contextlib
import io
import pathlib
import re

import pytest


@pytest.mark.slow  # the README's run, 45 to 90 s on 2 cores
@pytest.mark.long
def test_readme_python_example(tmp_path, monkeypatch):
    text = (pathlib.Path(__file__).parents[1] / "README.md").read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), namespace)
    ds = namespace["ds"]
    assert dict(ds["error"].sizes) == {"seed": 4, "H": 2, "L": 1, "eta": 2, "signal": 1, "time": 26}
    assert (tmp_path / "run.nc").exists()
    # each print's comment shows its value to the digits written (the draws are seeded: exact)
    shown = [m.group(1) for m in re.finditer(r"print\(.*\)\s+# ([0-9.]+)", code)]
    printed = [float(x) for x in out.getvalue().split()]
    assert len(shown) == len(printed) == 2
    for s, p in zip(shown, printed):
        digits = len(s.split(".")[1])
        assert round(p, digits) == float(s), (s, p)
