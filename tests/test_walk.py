"""How far one parameter's path wanders across files: a static walk of the calls that pass ``N``
on, from the sampled phase diagram's entry to the kernels, counts the returns to a file the walk
had left. Reading a path that returns to the same files again and again is what makes a code
base hard to follow; the map's theory sits behind one entry (``copyhead.lines``), which asks each
theory module once."""

from __future__ import annotations

import ast
from pathlib import Path

import jaxattn

PACKAGE = Path(jaxattn.__file__).parent


class _Module:
    """A module's functions (top level and methods, by name) and the names it imports."""

    def __init__(self, root: Path, name: str):
        parts = name.split(".")
        path = root.joinpath(*parts).with_suffix(".py")
        if not path.exists():
            path = root.joinpath(*parts, "__init__.py")
        self.name, self.path = name, path
        tree = ast.parse(path.read_text(encoding="utf-8"))
        self.functions: dict[str, ast.FunctionDef] = {}
        self.imports: dict[str, str] = {}  # local name -> "module" or "module:attr"
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name not in self.functions:
                self.functions[node.name] = node
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("jaxattn"):
                for a in node.names:
                    self.imports[a.asname or a.name] = f"{node.module}:{a.name}"
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith("jaxattn"):
                        self.imports[a.asname or a.name.split(".")[0]] = a.name


def walk(entry: str, params: tuple[str, ...] = ("N", "Ns"), root: Path = PACKAGE) -> list[str]:
    """The files a depth-first walk of the package's static call graph from ``entry``
    (``"module:function"``) passes through while it carries ``params``: every call into a function
    of the package is followed (each function once, in the order of the source), and a function
    that takes one of ``params`` is a visit to its file, again after each callee that visited
    any; the others are passed through. Returns the files in visiting order."""
    modules: dict[str, _Module | None] = {}

    def module(name: str) -> _Module | None:
        if name not in modules:
            try:
                modules[name] = _Module(root.parent, name)
            except (FileNotFoundError, SyntaxError):
                modules[name] = None
        return modules[name]

    def lookup(target: str | None) -> tuple[_Module, ast.FunctionDef] | None:
        """``"module:attr"`` to its function, through one re-export by a package."""
        for _ in range(2):
            if not target or ":" not in target:
                return None
            owner, attr = target.split(":")
            m = module(owner)
            if m is None:
                return None
            if attr in m.functions:
                return m, m.functions[attr]
            target = m.imports.get(attr)
        return None

    def resolve(mod: _Module, func: ast.expr) -> tuple[_Module, ast.FunctionDef] | None:
        if isinstance(func, ast.Name):
            if func.id in mod.functions:
                return mod, mod.functions[func.id]
            return lookup(mod.imports.get(func.id))
        if isinstance(func, ast.Attribute):
            if isinstance(func.value, ast.Name) and func.value.id in mod.imports:
                target = mod.imports[func.value.id]
                name = target.replace(":", ".")
                m = module(name)
                if m is not None:
                    return lookup(f"{name}:{func.attr}")
                return None
            if func.attr in mod.functions:  # a method of this module's object (self.f, obj.f)
                return mod, mod.functions[func.attr]
        return None

    def carries(fn: ast.FunctionDef) -> bool:
        args = fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs
        return any(a.arg in params for a in args)

    seen: set[tuple[str, str]] = set()
    files: list[str] = []

    def visit(mod: _Module, fn: ast.FunctionDef) -> bool:
        seen.add((mod.name, fn.name))
        here = str(mod.path.relative_to(root.parent))
        mine = carries(fn)
        if mine:
            files.append(here)
        emitted = mine
        calls = sorted((n for n in ast.walk(fn) if isinstance(n, ast.Call)), key=lambda n: (n.lineno, n.col_offset))
        for call in calls:
            found = resolve(mod, call.func)
            if found is not None and (found[0].name, found[1].name) not in seen and visit(*found):
                emitted = True
                if mine:
                    files.append(here)
        return emitted

    owner, name = entry.split(":")
    start = module(owner)
    assert start is not None and name in start.functions, entry
    visit(start, start.functions[name])
    return files


def returns(files: list[str]) -> tuple[int, int, int]:
    """``(stays, files, returns)`` of a walk: a stay is a run of visits in one file, and every
    stay beyond a file's first is a return to it."""
    stays = [f for i, f in enumerate(files) if i == 0 or files[i - 1] != f]
    return len(stays), len(set(files)), len(stays) - len(set(files))


def test_a_walk_of_N_through_the_sampled_map_returns_to_few_files():
    """From ``sampled_phase_diagram`` (the command's entry), following ``N``: the map asks its
    theory from one entry (``lines.theory_lines``), which asks each theory module once
    (``profile.reduced_lines``, then ``fluctuations.fluctuation_p_stars``), and its scans take the
    divider from it, so the walk goes map, scans, theory, map. Measured by this walk: 11 returns
    in 18 stays over 7 files (19 in 28 over 9 when ``lines`` asked the barrier, the slope and
    each fluctuation theory in turn, and the barrier went through the summary of both attentions;
    22 in 31 before that, when each row asked its theories separately). Of the 11, 3 are the
    theory profile of each sampled ``P`` (``profile`` asks ``action`` for the hyper-parameters
    and the action, which weighs its terms by ``N``), and 1 is the corrected gap's action at any
    ``G``."""
    files = walk("jaxattn.copyhead.landscape._phase:sampled_phase_diagram")
    stays, n_files, back = returns(files)
    assert back <= 11, (stays, n_files, back, files)
    assert sum(1 for i, f in enumerate(files) if f.endswith("_search.py") and (i == 0 or files[i - 1] != f)) == 1


def test_the_walk_counts_returns_on_a_planted_module(tmp_path):
    """A planted package: ``a.f`` calls ``b.g`` (which calls ``a.h``) with ``N`` and then
    ``a.h`` again: files a, b, a, b... visited as a b a b a: five stays in two files, three
    returns (``a.h`` is visited once)."""
    pkg = tmp_path / "jaxattn"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text(
        "from jaxattn.b import g\n\ndef f(N):\n    g(N)\n    h(N)\n\ndef h(N):\n    return N\n"
    )
    (pkg / "b.py").write_text("from jaxattn import a\n\ndef g(N):\n    a.h(N)\n    k(1)\n\ndef k(x):\n    return x\n")
    files = walk("jaxattn.a:f", root=pkg)  # b.k takes no N: passed through
    assert files == ["jaxattn/a.py", "jaxattn/b.py", "jaxattn/a.py", "jaxattn/b.py", "jaxattn/a.py"]
    assert returns(files) == (5, 2, 3)
