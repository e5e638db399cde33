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


def _public_definitions():
    """Every public (no leading underscore) function and class defined in a jaxattn module, bar the
    command line (click commands: their docstrings are the ``--help`` text)."""
    import importlib
    import pkgutil

    seen = {}
    for info in pkgutil.walk_packages(jaxattn.__path__, "jaxattn."):
        if info.name.startswith("jaxattn.cli") or info.name.endswith((".cli", "._cli")):
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if name.startswith("_") or getattr(obj, "__module__", None) != info.name:
                continue
            if inspect.isfunction(obj) or inspect.isclass(obj):
                seen[f"{info.name}.{name}"] = obj
    return seen


_PUBLIC = _public_definitions()


def _missing_sections(obj) -> list[str]:
    doc = inspect.getdoc(obj) or ""
    if inspect.isclass(obj):
        if issubclass(obj, BaseException):
            return []
        return [] if ("Attributes:" in doc or "Args:" in doc) else ["Attributes"]
    sig = inspect.signature(obj)
    need = []
    if sig.parameters and "Args:" not in doc:
        need.append("Args")
    returns_none = sig.return_annotation in (None, "None")
    if not returns_none and "Returns:" not in doc and "Yields:" not in doc:
        need.append("Returns")
    return need


@pytest.mark.parametrize("qualname", sorted(_PUBLIC))
def test_public_definition_documents_args_and_returns(qualname):
    """Google-style ``Args:`` and ``Returns:`` (``Attributes:`` for classes), which mkdocstrings
    renders; ``mkdocs build --strict`` then fails on an argument documented but not in the
    signature."""
    missing = _missing_sections(_PUBLIC[qualname])
    assert not missing, f"{qualname}: docstring lacks {missing}"
