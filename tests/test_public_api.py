"""The public API: one name per thing. The top level holds the core, the engine, ``io`` and the
two model namespaces; each namespace's ``__all__`` imports, names no private module, and a name
that moved says where it went, in one line."""

import ast
import importlib
import inspect
import os
from pathlib import Path

import pytest

import jaxattn

NAMESPACES = ["jaxattn", "jaxattn.slm", "jaxattn.copyhead", "jaxattn.engine", "jaxattn.core"]


def test_top_level_is_the_packages_and_io():
    assert set(jaxattn.__all__) == {"copyhead", "core", "engine", "io", "slm", "load", "save", "use_cpu_cores"}
    assert jaxattn.load is jaxattn.io.load and jaxattn.save is jaxattn.io.save


@pytest.mark.parametrize("namespace", NAMESPACES)
def test_all_imports_and_holds_no_private_module(namespace):
    mod = importlib.import_module(namespace)
    names = getattr(mod, "__all__", [n for n in vars(mod) if not n.startswith("_")])
    assert len(names) == len(set(names)), "a name listed twice"
    for name in names:
        assert not name.startswith("_"), name
        obj = getattr(mod, name)  # every listed name imports
        if inspect.ismodule(obj):
            assert not any(part.startswith("_") for part in obj.__name__.split(".")), obj.__name__
            assert obj.__name__.startswith("jaxattn."), obj.__name__


def test_model_namespaces_are_short():
    assert len(jaxattn.slm.__all__) <= 25 and len(jaxattn.copyhead.__all__) <= 35


@pytest.mark.parametrize(
    ("path", "new"),
    [
        ("jaxattn.SLMConfig", "jaxattn.slm.SLMConfig"),
        ("jaxattn.bayes_risk", "jaxattn.slm.bayes.bayes_risk"),
        ("jaxattn.register_activation", "jaxattn.core.attention.register_activation"),
        ("jaxattn.sweep", "jaxattn.engine (run_sweep"),
        ("jaxattn.copyhead.theory_summary", "jaxattn.copyhead.curves.theory_summary"),
        ("jaxattn.copyhead.softmax.linear_onsets", "jaxattn.copyhead.linear.linear_onsets"),
        ("jaxattn.copyhead.landscape.copy_strength", "jaxattn.copyhead.profile.copy_strength"),
        ("jaxattn.copyhead.experiments.data_key", "jaxattn.copyhead.data.data_key"),
        ("jaxattn.slm.measure_error", "jaxattn.slm.task.measure_error"),
        ("jaxattn.slm.ode.integrate_grid", "jaxattn.slm.integrate (start=...)"),
    ],
)
def test_a_moved_name_says_where_it_went(path, new):
    module, name = path.rsplit(".", 1)
    with pytest.raises(AttributeError) as e:
        getattr(importlib.import_module(module), name)
    msg = str(e.value)
    assert msg.startswith(f"{path} has moved: use {new}") and "\n" not in msg
    # the new path exists
    target = new.split(" ")[0]
    mod, attr = target.rsplit(".", 1)
    assert getattr(importlib.import_module(mod), attr) is not None


def test_a_name_that_became_internal_says_so():
    with pytest.raises(AttributeError) as e:
        jaxattn.copyhead.landscape.default_P  # noqa: B018
    msg = str(e.value)
    assert msg == (
        "jaxattn.copyhead.landscape.default_P is internal now, not a public name: "
        "jaxattn.copyhead.landscape._search.default_P"
    )
    assert callable(jaxattn.copyhead.landscape._search.default_P)


def test_every_name_the_architecture_page_calls_internal_is_out_of_all():
    """The page's examples of names that became internal (``X`` is "internal now") are not
    exported, and say so when used (the page once named one that ``__all__`` exported)."""
    import re

    text = open(os.path.join(os.path.dirname(__file__), "..", "docs", "architecture.md")).read()
    named = re.findall(r'`([\w.]+)` is "internal now"', " ".join(text.split()))
    assert named
    for path in named:
        module, name = f"jaxattn.{path}".rsplit(".", 1)
        mod = importlib.import_module(module)
        assert name not in mod.__all__, path
        with pytest.raises(AttributeError, match="is internal now"):
            getattr(mod, name)


def test_an_unknown_name_is_a_plain_attribute_error():
    with pytest.raises(AttributeError, match="has no attribute 'nonsense'"):
        jaxattn.nonsense  # noqa: B018


def test_engine_run_is_the_function_and_its_module_is_reachable():
    from jaxattn.engine import _compute as compute

    assert jaxattn.engine.run is compute.run and callable(jaxattn.engine.run)
    assert compute.compute_chunk is not None


def _imported_modules(tree: ast.AST) -> list[str]:
    """Every module an import statement names, ``from a import b`` as ``a`` and ``a.b``."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out += [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
    return out


def test_private_modules_stay_in_their_package():
    """A ``_``-prefixed module is its package's internals: only modules of that package (or of
    its subpackages) import it, so no private module crosses between core, engine, the models
    and the command line."""
    package = Path(jaxattn.__file__).parent
    crossings = []
    for path in package.rglob("*.py"):
        rel = path.relative_to(package.parent).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        importer = ".".join(parts if rel.name == "__init__" else parts[:-1])
        for name in _imported_modules(ast.parse(path.read_text(encoding="utf-8"))):
            segs = name.split(".")
            if segs[0] != "jaxattn":
                continue
            for i, seg in enumerate(segs):
                if seg.startswith("_") and not seg.startswith("__"):
                    owner = ".".join(segs[:i])
                    if importer != owner and not importer.startswith(owner + "."):
                        crossings.append(f"{'.'.join(rel.parts)} imports {name}")
                    break
    assert not crossings, "\n".join(crossings)
