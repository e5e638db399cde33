"""A script's kept result is reused only by the same code with the same settings: its key holds
the package's version and a hash of its source, as the engine's store and program cache do."""

from __future__ import annotations

import json
import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))
import _options  # noqa: E402

from jaxattn.engine import cache  # noqa: E402


def test_a_kept_result_is_reused_by_the_same_code_and_settings_only(tmp_path, monkeypatch):
    out = tmp_path / "result.json"
    key = _options.result_key(n_rows=1024)
    out.write_text(json.dumps({"key": key, "p_star": 79.26}))
    assert _options.earlier(str(out), _options.result_key(n_rows=1024)) == {"key": key, "p_star": 79.26}
    assert _options.earlier(str(out), _options.result_key(n_rows=2048)) is None  # other settings
    assert _options.earlier(str(tmp_path / "none.json"), key) is None
    # the code changes: one line of one module of a copy of the package
    import jaxattn

    same, copy = tmp_path / "same" / "jaxattn", tmp_path / "edited" / "jaxattn"
    for where in (same, copy):
        shutil.copytree(os.path.dirname(jaxattn.__file__), where, ignore=shutil.ignore_patterns("__pycache__"))
    assert cache.source_hash(str(same)) == cache.source_hash()
    with open(copy / "copyhead" / "fluctuations.py", "a") as f:
        f.write("\n# an edit\n")
    edited = cache.source_hash(str(copy))
    assert edited != cache.source_hash()
    monkeypatch.setattr(cache, "source_hash", lambda top=None: edited)
    assert _options.earlier(str(out), _options.result_key(n_rows=1024)) is None
    # a result kept before results had keys is not reused either
    out.write_text(json.dumps({"n_rows": 1024, "p_star": 79.73}))
    assert _options.earlier(str(out), key) is None
