"""The compiler's rooms import only forward, and never the runtime; every `polc` import resolves.

Read statically from the source (every `import` and `from ... import` statement, those
inside functions too), so a lazy import cannot hide a backward edge. The order, as in
compiler/__init__.py:

    util  ->  messages, errors  ->  frontend  ->  check  ->  analysis  ->  backend  ->  the rest
    (no polc)  (what every phase     (text to    (typed     (ranges,       (JAX, C)     (cli, fmt, graph,
               reports)              ast)        program)   directions)                 highlight, ...)

A module may import its own room and earlier ones. The driver (`cli.py`) finds the
runtime's commands by name with importlib when the runtime is installed; no import
statement anywhere under compiler/ names `polc.runtime` or `polc.lsp`.
"""

from __future__ import annotations

import ast
import functools
import pathlib
import re
from typing import Iterator, Optional

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = {"polc": ROOT / "compiler", "polc.runtime": ROOT / "runtime", "polc.lsp": ROOT / "lsp",
            "polc.grammar": ROOT / "grammar"}
ORDER = {"util": 0, "messages": 1, "errors": 1, "frontend": 2, "check": 3, "analysis": 4, "backend": 5}
TOOLS = 6  # every other module of polc: the public API, the driver, the tools over the typed program


@functools.lru_cache(maxsize=None)
def _path_of(module: str) -> Optional[pathlib.Path]:
    """The file of a `polc...` module (a package's __init__.py), or None if there is none."""
    for prefix in sorted(PACKAGES, key=len, reverse=True):
        if module == prefix or module.startswith(prefix + "."):
            base = PACKAGES[prefix].joinpath(*module[len(prefix):].split(".")[1:])
            for candidate in (base / "__init__.py", base.with_suffix(".py")):
                if candidate.is_file():
                    return candidate
            return None
    return None


def _module_of(path: pathlib.Path) -> str:
    for prefix, folder in sorted(PACKAGES.items(), key=lambda kv: len(str(kv[1])), reverse=True):
        if path.is_relative_to(folder):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            return ".".join([prefix, *parts])
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)  # tests/, benchmarks/, examples/


def _imports(path: pathlib.Path) -> Iterator[tuple[int, str]]:
    """(line, absolute module name) for every import in `path`, `from a import b` giving
    `a.b` when b is a module of its own and `a` otherwise."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    yield from _imports_of(tree, path)


def _imports_of(tree: ast.AST, path: pathlib.Path) -> Iterator[tuple[int, str]]:
    package = _module_of(path) if path.name == "__init__.py" else _module_of(path).rpartition(".")[0]
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            for alias in node.names:
                sub = f"{module}.{alias.name}"
                yield node.lineno, sub if module.startswith("polc") and _path_of(sub) else module


def _room(module: str) -> int:
    parts = module.split(".")
    if parts[0] != "polc" or len(parts) == 1:
        return TOOLS
    return ORDER.get(parts[1], TOOLS)


COMPILER = sorted((ROOT / "compiler").rglob("*.py"))


def test_the_rooms_are_where_the_order_says():
    rooms = {p.name for p in (ROOT / "compiler").iterdir() if p.is_dir() and not p.name.startswith("_")}
    assert rooms == {"frontend", "check", "analysis", "backend", "util"}
    for room in rooms:
        assert (ROOT / "compiler" / room / "__init__.py").is_file(), room


def _backward(path: pathlib.Path, tree: ast.AST) -> list[str]:
    """The imports of the compiler module at `path` that go backward or into the runtime."""
    me = _module_of(path)
    mine = _room(me)
    found = []
    for line, module in _imports_of(tree, path):
        if module.startswith(("polc.runtime", "polc.lsp")):
            found.append(f"{me}, line {line}: {module} (the compiler never imports the runtime or lsp)")
        elif module.startswith("polc.grammar"):
            continue  # the grammar's tables and text: data the front end reads
        elif module.startswith("polc") and _room(module) > mine:
            found.append(f"{me}, line {line}: {module} (room {_room(module)}, later than {me}'s {mine})")
    return found


def test_compiler_imports_only_forward_and_never_the_runtime():
    backward = [b for path in COMPILER for b in _backward(path, ast.parse(path.read_text(encoding="utf-8")))]
    assert not backward, "imports against the order:\n" + "\n".join(backward)


def test_util_imports_nothing_of_polc_but_util():
    for path in sorted((ROOT / "compiler" / "util").rglob("*.py")):
        outside = [m for _, m in _imports(path) if m.startswith("polc") and not m.startswith("polc.util")]
        assert not outside, f"{path.name} imports {outside}"


def _repo_python() -> list[pathlib.Path]:
    folders = ["compiler", "runtime", "lsp", "grammar", "tests", "benchmarks", "examples"]
    return sorted(p for f in folders for p in (ROOT / f).rglob("*.py"))


# An import statement at the start of a line (parenthesised names may run over lines): the
# repository-wide check parses only these, not whole files (a tenth of the time).
_IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+[\w.]+[ \t]+import[ \t]+(?:\([^)]*\)|[^\n]*)|import[ \t]+polc[^\n]*)", re.M)


def _statements(path: pathlib.Path) -> ast.Module:
    text = path.read_text(encoding="utf-8")
    body = []
    for m in _IMPORT.finditer(text):
        try:
            stmt = ast.parse(m.group(0).strip().split("#")[0] if "(" not in m.group(0) else m.group(0).strip()).body
        except SyntaxError:  # an import-looking line inside a string
            continue
        for node in stmt:
            ast.increment_lineno(node, text.count("\n", 0, m.start()))
            body.append(node)
    return ast.Module(body=body, type_ignores=[])


@functools.lru_cache(maxsize=None)
def _names(module: str) -> frozenset:
    """The names a module binds at its top level (defined, assigned, imported, or named
    for lazy_loader's `attach`)."""
    tree = ast.parse(_path_of(module).read_text(encoding="utf-8"))
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            names.update(n.id for n in ast.walk(node) if isinstance(n, ast.Name))
            if any(isinstance(c, ast.Call) for c in ast.walk(node)):  # lazy.attach(__name__, {...: [...]})
                names.update(c.value for c in ast.walk(node) if isinstance(c, ast.Constant) and isinstance(c.value, str))
    return frozenset(names)


def test_every_polc_import_in_the_repository_resolves():
    # After modules move (as they did into the rooms), an import of an old path fails here,
    # statically, before any test that would import it: `polc.typed` is `polc.check.typed` now.
    missing = []
    for path in _repo_python():
        tree = _statements(path)
        for line, module in _imports_of(tree, path):
            if (module == "polc" or module.startswith("polc.")) and _path_of(module) is None:
                missing.append(f"{path.relative_to(ROOT)}:{line}: {module}")
        for node in tree.body:  # `from polc import typed`: a module that is not there, nor a name
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("polc"):
                if _path_of(node.module) is not None:
                    missing += [f"{path.relative_to(ROOT)}:{node.lineno}: {node.module}.{a.name}" for a in node.names
                                if not _path_of(f"{node.module}.{a.name}") and a.name not in _names(node.module)]
    assert not missing, "imports of modules that do not exist:\n" + "\n".join(missing)


def test_a_backward_import_is_caught():
    # The checker itself: a front-end module importing the back end, or any module the runtime.
    parse = ROOT / "compiler" / "frontend" / "parse.py"
    tree = ast.parse("def f():\n    from ..backend import lower\n    import polc.runtime.envs\n")
    assert _backward(parse, tree) == [
        "polc.frontend.parse, line 2: polc.backend.lower (room 5, later than polc.frontend.parse's 2)",
        "polc.frontend.parse, line 3: polc.runtime.envs (the compiler never imports the runtime or lsp)"]


def test_an_old_path_is_caught(tmp_path, monkeypatch):
    old = ROOT / "tests" / "test_old_paths_example.py"
    monkeypatch.setattr(pathlib.Path, "read_text", lambda self, encoding=None: (
        "from polc import typed as T\nfrom polc.lower import lower\n" if self == old else _read(self)))
    monkeypatch.setattr(__import__(__name__), "_repo_python", lambda: [old])
    with pytest.raises(AssertionError) as e:
        test_every_polc_import_in_the_repository_resolves()
    assert "tests/test_old_paths_example.py:1: polc.typed" in str(e.value)
    assert "tests/test_old_paths_example.py:2: polc.lower" in str(e.value)


_read = pathlib.Path.read_text
