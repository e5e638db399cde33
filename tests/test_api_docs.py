"""Every public name has a docstring saying what it computes (the API pages of the documentation
site are generated from them by mkdocstrings; CI builds the site with ``mkdocs build --strict``)."""

import inspect
import re
import sys

import pytest

import jaxattn

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
