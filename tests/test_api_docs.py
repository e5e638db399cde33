"""Every public name has a docstring saying what it computes; docs/api.md is up to date."""

import importlib.util
import inspect
import pathlib
import re
import sys

import pytest

import jaxattn

ROOT = pathlib.Path(__file__).parents[1]


def _documented_object(obj) -> bool:
    return inspect.isclass(obj) or inspect.isroutine(obj) or inspect.ismodule(obj)


def _defining_modules(name, obj):
    return [m for k, m in sorted(sys.modules.items())
            if k.startswith("jaxattn.") and getattr(m, name, None) is obj and m.__doc__]


@pytest.mark.parametrize("name", jaxattn.__all__)
def test_public_name_has_a_docstring(name):
    obj = getattr(jaxattn, name)
    if _documented_object(obj):
        doc = inspect.getdoc(obj) or ""
        first = doc.strip().split("\n\n")[0]
        # NamedTuples and dataclasses get "Name(field, ...)" when they have no docstring of their own
        assert not re.fullmatch(rf"{name}\(.*\)", first, re.S), f"{name}: only the generated docstring"
        assert len(first.split()) >= 4, f"{name}: docstring missing or trivial: {doc!r}"
    else:  # a constant: its module's docstring says what it is
        mods = _defining_modules(name, obj)
        assert mods, f"{name}: no defining module found"
        assert any(re.search(rf"``{name}``\s+\w+", m.__doc__) for m in mods), \
            f"{name}: not described in the docstring of {[m.__name__ for m in mods]}"


def test_api_md_is_generated_from_the_docstrings():
    spec = importlib.util.spec_from_file_location("gen_api_docs", ROOT / "scripts" / "gen_api_docs.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert (ROOT / "docs" / "api.md").read_text() == gen.render(), \
        "docs/api.md is out of date: run python scripts/gen_api_docs.py"
