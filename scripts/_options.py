"""The command line that every script shares: ``--quick`` (a smoke test: the smallest sizes that
still go through every code path; its numbers mean nothing) and ``--out-dir`` (where figures and
JSON go, so that a smoke test leaves docs/figures alone). ``.ci/scripts_quick`` runs them all.

Scripts run as ``python scripts/NAME.py``, which puts this folder on ``sys.path``: they
``import _options`` and call :func:`parse` once, at import, so that their size constants can
read ``quick``.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable

FIGURES = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "figures"))


def parse(doc: str, extra: Callable[[argparse.ArgumentParser], None] | None = None) -> argparse.Namespace:
    """The options of a script whose module docstring is ``doc`` (shown by ``--help``); ``extra``
    adds the script's own. Creates ``out_dir``."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke test: tiny sizes, every code path, meaningless numbers")
    ap.add_argument("--out-dir", default=FIGURES, help="folder of the figures and JSON (default: docs/figures)")
    if extra is not None:
        extra(ap)
    opt = ap.parse_args()
    os.makedirs(opt.out_dir, exist_ok=True)
    return opt


def result_key(**settings) -> dict:
    """What determines a script's result: its ``settings``, the package's version and a hash of
    its source (:func:`jaxattn.engine.cache.source_hash`), as the engine's store and program
    cache key theirs. Stored with the result as ``"key"``."""
    from jaxattn.engine.cache import source_hash
    from jaxattn.version import __version__

    return {"jaxattn": __version__, "source": source_hash(), **settings}


def earlier(path: str, key: dict) -> dict | None:
    """The JSON result kept at ``path`` if it was computed under ``key`` (the same settings by the
    same code, :func:`result_key`), else ``None``: a rerun after any change computes afresh."""
    if not os.path.exists(path):
        return None
    with open(path) as f:
        kept = json.load(f)
    return kept if kept.get("key") == key else None
