"""The documentation names only what exists, and keeps to the repository.

Everything here reads files and imports modules; nothing is computed.

1. **Dotted names.** Every name ``jaxattn.a.b`` (the regex ``jaxattn(\\.[A-Za-z_]\\w*)+``, not
   inside a longer word, path or URL) in ``README.md``, the ``*.md`` pages under ``docs/``, the
   ``.py``, ``.md`` and ``.sh`` files under ``scripts/`` and ``benchmarks/``, and the cells of the
   notebooks under ``notebooks/`` resolves: the longest prefix that imports as a module is
   imported (``importlib``) and the rest is taken attribute by attribute (``getattr``), so
   ``Class.method`` resolves too. A trailing ``.py`` makes the name a file name:
   ``jaxattn.copyhead.task.py`` is the module ``jaxattn.copyhead.task``. The names that are not
   objects of the package are listed, with the reason, in ``NOT_OBJECTS``. One test per distinct
   name (its id is the name); a failure lists the files, with lines, that mention it. None of
   them goes through a private (``_``-prefixed) module.

2. **The layout of ``docs/architecture.md``.** Its layout tree is its first fenced block that
   starts with ``jaxattn/``. In the tree, a token ``name/`` that starts a line names a folder, and
   a token ``name.py`` anywhere on a line names a file; either belongs to the nearest folder
   above it whose line is indented less. A token with slashes (``contrib/flax_nnx.py``) is a path
   from that folder and names the folders on it too. So ``priors.py task.py`` on the lines under
   ``slm/`` name ``slm/priors.py`` and ``slm/task.py``. Every folder of the package that holds
   Python files must be named (as ``folder/``, or on the path of a file), and every ``*.py`` file
   other than ``__init__.py``, at its path relative to ``jaxattn/``; and every folder and file
   that the tree names must exist.

3. **No issue numbers, no paths out of the repository.** No ``issue 3``, ``issues 2``,
   ``issue #5`` (the regex ``\\b[Ii]ssues? #?\\d+\\b``) in ``README.md``, ``benchmarks/README.md``,
   the pages and notebooks under ``docs/`` and ``notebooks/``, or the package's own files; and
   no pointer to ``shared/spec`` or ``../shared/`` (folders a clone of the repository does not
   have) in ``README.md`` and the documentation: the models are written out in
   ``docs/theory/single_location.md`` and ``docs/theory/copy_head.md``.
"""

from __future__ import annotations

import importlib
import json
import re
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "jaxattn"

# Dotted names in the documentation that are not objects of the package, and why.
NOT_OBJECTS = {
    # entry-point groups, under which other installed packages declare activations and models
    "jaxattn.activations",
    "jaxattn.models",
    # the module that the tutorial of docs/extend.md asks the reader to create (its new model,
    # once moved into the package)
    "jaxattn.twoloc.experiments",
}

NAME = re.compile(r"(?<![\w./\\-])jaxattn(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
ISSUE = re.compile(r"\b[Ii]ssues? #?\d+\b")
OUTSIDE = re.compile(r"shared/spec|\.\./shared/")


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _notebook_lines(path: Path) -> list[tuple[str, str]]:
    """``(where, line)`` for every line of every cell of a notebook."""
    cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
    out = []
    for i, cell in enumerate(cells):
        src = cell.get("source", "")
        src = "".join(src) if isinstance(src, list) else src
        out += [(f"{_rel(path)}[cell {i}]:{k}", line) for k, line in enumerate(src.splitlines(), 1)]
    return out


def _text_lines(path: Path) -> list[tuple[str, str]]:
    text = path.read_text(encoding="utf-8")
    return [(f"{_rel(path)}:{k}", line) for k, line in enumerate(text.splitlines(), 1)]


def _lines(path: Path) -> list[tuple[str, str]]:
    return _notebook_lines(path) if path.suffix == ".ipynb" else _text_lines(path)


def _files(folder: str, suffixes: tuple[str, ...]) -> list[Path]:
    base = ROOT / folder
    if not base.is_dir():
        return []
    return sorted(p for p in base.rglob("*") if p.is_file() and p.suffix in suffixes and "__pycache__" not in p.parts)


def name_sources() -> list[Path]:
    """The files whose ``jaxattn.*`` names must resolve."""
    files = [ROOT / "README.md"] if (ROOT / "README.md").is_file() else []
    files += _files("docs", (".md",))
    files += _files("scripts", (".py", ".md", ".sh"))
    files += _files("benchmarks", (".py", ".md", ".sh"))
    files += _files("notebooks", (".ipynb",))
    return files


def collect_names() -> dict[str, list[str]]:
    """Each distinct dotted name -> the places (``file:line``) that mention it."""
    names: dict[str, list[str]] = defaultdict(list)
    for path in name_sources():
        for where, line in _lines(path):
            for m in NAME.finditer(line):
                name = m.group(0)
                if name.endswith(".py"):  # a file name: jaxattn.copyhead.task.py
                    name = name[: -len(".py")]
                if name not in NOT_OBJECTS:
                    names[name].append(where)
    return dict(sorted(names.items()))


def resolve(name: str) -> object:
    """Import the longest prefix of ``name`` that is a module, then ``getattr`` the rest."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        module_name = ".".join(parts[:i])
        try:
            obj = importlib.import_module(module_name)
        except ModuleNotFoundError as e:
            # this prefix is not a module; anything else that is missing is a real error
            if e.name is not None and (module_name == e.name or module_name.startswith(e.name + ".")):
                continue
            raise
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ModuleNotFoundError(f"no module {parts[0]!r}")


NAMES = collect_names()


@pytest.mark.parametrize("name", list(NAMES), ids=list(NAMES))
def test_documented_name_resolves(name: str) -> None:
    try:
        resolve(name)
        error = None
    except Exception as e:  # any failure to resolve is the finding
        error = f"{type(e).__name__}: {e}"
    if error is not None:
        places = "\n  ".join(NAMES[name])
        pytest.fail(f"{name} does not resolve ({error}); mentioned in:\n  {places}", pytrace=False)



def test_documentation_names_no_private_module() -> None:
    """The README, docs, scripts, benchmarks and notebooks use only public paths: no dotted name
    goes through a ``_``-prefixed module."""
    private = {n: w for n, w in NAMES.items() if any(p.startswith("_") for p in n.split(".")[1:])}
    assert not private, "\n".join(f"{n}: {', '.join(w)}" for n, w in private.items())

# --- docs/architecture.md against the package --------------------------------------------------

ARCHITECTURE = ROOT / "docs" / "architecture.md"
_FOLDER = re.compile(r"(?:[A-Za-z_][\w-]*/)+")
_FILE = re.compile(r"(?<![\w./-])((?:[A-Za-z_]\w*/)*[A-Za-z_]\w*\.py)\b")


def layout_tree(text: str) -> str | None:
    """The first fenced block of ``text`` that starts with ``jaxattn/``."""
    for block in re.findall(r"^```[^\n]*\n(.*?)^```", text, re.S | re.M):
        if block.lstrip().startswith("jaxattn/"):
            return block
    return None


def tree_names(tree: str) -> tuple[set[str], set[str]]:
    """``(folders, files)`` named by the tree, as paths relative to ``jaxattn/`` (rule 2)."""
    folders: set[str] = set()
    files: set[str] = set()
    stack: list[tuple[int, str]] = [(-1, "")]  # (indentation, folder path ending in "/")
    for line in tree.splitlines()[1:]:  # the first line is "jaxattn/"
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        while stack[-1][0] >= indent:
            stack.pop()
        here = stack[-1][1]
        first = line.split()[0]
        if _FOLDER.fullmatch(first):
            here = here + first
            folders.add(here.rstrip("/"))
            stack.append((indent, here))
            line = line.replace(first, " " * len(first), 1)
        for m in _FILE.finditer(line):
            path = here + m.group(1)
            files.add(path)
            folders.update(parent.as_posix() for parent in Path(path).parents if parent != Path("."))
    return folders, files


def package_names() -> tuple[set[str], set[str]]:
    """``(folders, files)`` of the package: every folder holding Python files, every ``*.py``
    file but ``__init__.py``, as paths relative to ``jaxattn/``."""
    folders: set[str] = set()
    files: set[str] = set()
    for p in PACKAGE.rglob("*.py"):
        if "__pycache__" in p.parts:
            continue
        rel = p.relative_to(PACKAGE)
        folders.update(parent.as_posix() for parent in rel.parents if parent != Path("."))
        if p.name != "__init__.py":
            files.add(rel.as_posix())
    return folders, files


def _architecture_tree() -> tuple[set[str], set[str]]:
    tree = layout_tree(ARCHITECTURE.read_text(encoding="utf-8"))
    if tree is None:
        pytest.fail("docs/architecture.md has no layout tree (a fenced block starting with 'jaxattn/')")
    return tree_names(tree)


def test_architecture_names_every_module() -> None:
    named_folders, named_files = _architecture_tree()
    folders, files = package_names()
    missing = sorted(f + "/" for f in folders - named_folders) + sorted(files - named_files)
    assert not missing, "docs/architecture.md's layout tree does not name (paths under jaxattn/):\n  " + "\n  ".join(
        missing
    )


def test_architecture_names_only_existing_modules() -> None:
    named_folders, named_files = _architecture_tree()
    gone = sorted(f + "/" for f in named_folders if not (PACKAGE / f).is_dir())
    gone += sorted(f for f in named_files if not (PACKAGE / f).is_file())
    assert not gone, "docs/architecture.md's layout tree names what does not exist under jaxattn/:\n  " + "\n  ".join(
        gone
    )


# --- issue numbers and paths out of the repository -----------------------------------------------


def doc_files() -> list[Path]:
    """README.md, benchmarks/README.md, and the pages and notebooks of docs/ and notebooks/."""
    files = [ROOT / f for f in ("README.md", "benchmarks/README.md") if (ROOT / f).is_file()]
    files += _files("docs", (".md", ".ipynb"))  # docs/notebooks is a link to notebooks/
    files += _files("notebooks", (".ipynb",))
    seen: dict[Path, Path] = {}
    for f in files:
        seen.setdefault(f.resolve(), f)
    return list(seen.values())


def _hits(files: list[Path], pattern: re.Pattern) -> list[str]:
    return [f"{where}: {line.strip()}" for path in files for where, line in _lines(path) if pattern.search(line)]


@pytest.mark.parametrize("where", ["docs", "package"])
def test_no_issue_numbers(where: str) -> None:
    files = doc_files() if where == "docs" else sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)
    hits = _hits(files, ISSUE)
    assert not hits, "issue numbers (say what the thing does instead):\n  " + "\n  ".join(hits)


def test_no_paths_out_of_the_repository() -> None:
    hits = _hits(doc_files(), OUTSIDE)
    assert not hits, "paths to folders outside the repository:\n  " + "\n  ".join(hits)
