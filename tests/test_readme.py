"""The README's Python example runs as written."""

import pathlib
import re


def test_readme_python_example(tmp_path, monkeypatch):
    text = (pathlib.Path(__file__).parents[1] / "README.md").read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)
    ds = namespace["ds"]
    assert dict(ds["error"].sizes) == {"seed": 4, "H": 2, "L": 1, "eta": 2, "signal": 1, "time": 26}
    assert (tmp_path / "run.nc").exists()
