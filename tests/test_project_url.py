"""One project URL: declared in ``pyproject.toml`` (``[project.urls]``) and used as it is by the
docs site, the README's Colab links and the notebooks' install cells, which work as committed (no
placeholder to edit) and pin nothing that Colab's JAX would break."""

from __future__ import annotations

import json
import pathlib
import re
import tomllib

ROOT = pathlib.Path(__file__).parents[1]
URL = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]["Homepage"]


def test_every_place_uses_the_declared_project_url():
    assert re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+", URL)
    assert f"repo_url: {URL}\n" in (ROOT / "mkdocs.yml").read_text()
    readme = (ROOT / "README.md").read_text()
    slug = URL.removeprefix("https://github.com/")
    for name in ("single_location", "copy_head"):
        colab = f"https://colab.research.google.com/github/{slug}/blob/main/notebooks/{name}.ipynb"
        assert colab in readme, name
        cells = json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text())["cells"]
        assert colab in "".join(cells[0]["source"]), name  # the badge
        install = "".join(cells[1]["source"])
        assert f'REPO_URL = "{URL}"' in install, name
        assert "OWNER" not in install and "raise" not in install, name
        assert '"pip", "install"' in install and "git+{REPO_URL}" in install, name
        assert not re.search(r"\bjax(lib)?[=<>!~]", install), name  # Colab's own jax stays
