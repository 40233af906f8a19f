"""The compiler's rooms import only forward; every `polc` import in the repository resolves.

Read statically from the source with test_layout.py's import graph (every import that can
run, those inside functions and the lazy re-exports of a package's `__init__` included;
importing `a.b.c` runs `a.b`'s `__init__` too). The order, as in compiler/__init__.py:

    util  ->  messages, errors  ->  frontend  ->  check  ->  analysis  ->  backend  ->  the rest
    (no polc)  (what every phase     (text to    (typed     (ranges,       (JAX, C)     (cli, fmt, graph,
               reports)              ast)        program)   directions)                 highlight, ...)

A module may import its own room and earlier ones; `polc.grammar` is data the front end
reads. test_layout.py checks that the compiler never imports the runtime (the driver, cli.py,
finds the runtime's commands by name with importlib when it is installed).
"""

from __future__ import annotations

import ast
import functools
import pathlib
import re
from typing import Iterator, Optional

import pytest

from test_layout import MODULES, ROOT, _absolute, import_graph

_graph = functools.lru_cache(maxsize=None)(import_graph)  # parsed once for this file's tests
_BY_FILE = {file: (name, is_package) for name, (file, is_package) in MODULES.items()}

ORDER = {"util": 0, "messages": 1, "errors": 1, "frontend": 2, "check": 3, "analysis": 4, "backend": 5}
TOOLS = 6  # every other module of polc: the public API, the driver, the tools over the typed program


def _room(module: str) -> Optional[int]:
    """The room of a compiler module (None outside the compiler)."""
    parts = module.split(".")
    if parts[0] != "polc" or (len(parts) > 1 and parts[1] in ("runtime", "lsp", "grammar")):
        return None
    return ORDER.get(parts[1], TOOLS) if len(parts) > 1 else TOOLS


def backward_edges(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a compiler module into a later room than its own."""
    found = []
    for module in sorted(graph):
        mine = _room(module)
        if mine is None:
            continue
        for target in sorted(graph[module]):
            theirs = _room(target)
            if theirs is not None and theirs > mine:
                found.append(f"{module} imports {target} (room {theirs}, later than its own {mine})")
    return found


def test_the_rooms_are_where_the_order_says():
    rooms = {p.name for p in (ROOT / "compiler").iterdir() if p.is_dir() and not p.name.startswith("_")}
    assert rooms == {"frontend", "check", "analysis", "backend", "util"}
    for room in rooms:
        assert ast.get_docstring(ast.parse((ROOT / "compiler" / room / "__init__.py").read_text())), room


def test_compiler_rooms_import_only_forward():
    backward = backward_edges(_graph())
    assert not backward, "imports against the order:\n" + "\n".join(backward)


def test_util_imports_nothing_of_polc_but_util():
    graph = _graph()
    outside = {m: sorted(t for t in graph[m] if t.startswith("polc") and not t.startswith("polc.util"))
               for m in graph if m.startswith("polc.util")}
    assert not {m: t for m, t in outside.items() if t}


def test_a_backward_import_is_caught():
    # The checker itself: a front-end module importing the back end (a lazy import in a
    # function counts as much as one at the top).
    graph = {"polc.frontend.parse": {"polc.backend.lower", "polc.errors"}, "polc.backend.lower": {"polc.check.typed"},
             "polc.check.typed": {"polc.frontend.ast"}}
    assert backward_edges(graph) == ["polc.frontend.parse imports polc.backend.lower (room 5, later than its own 2)"]


# ---- every polc import resolves ----------------------------------------------------------

# An import statement at the start of a line (parenthesised names may run over lines): the
# repository-wide check parses only these, not whole files (a tenth of the time).
_IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+[\w.]+[ \t]+import[ \t]+(?:\([^)]*\)|[^\n]*)|import[ \t]+polc[^\n]*)", re.M)


def _statements(text: str) -> Iterator[ast.stmt]:
    line, at = 1, 0
    for m in _IMPORT.finditer(text):
        line, at = line + text.count("\n", at, m.start()), m.start()
        statement = m.group(0).strip()
        try:
            body = ast.parse(statement if "(" in statement else statement.split("#")[0]).body
        except SyntaxError:  # an import-looking line inside a string
            continue
        for node in body:
            node.lineno = line  # only the statement's first line is reported
            yield node


@functools.lru_cache(maxsize=None)
def _names(module: str) -> frozenset:
    """The names a module binds at its top level (defined, assigned, imported, or named
    for lazy_loader's `attach` or a module `__getattr__`)."""
    tree = ast.parse(MODULES[module][0].read_text(encoding="utf-8"))
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            if node.name == "__getattr__":  # a module's lazy names (PEP 562): the strings it answers to
                names.update(c.value for c in ast.walk(node) if isinstance(c, ast.Constant) and isinstance(c.value, str))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            names.update(n.id for n in ast.walk(node) if isinstance(n, ast.Name))
            if any(isinstance(c, ast.Call) for c in ast.walk(node)):  # lazy.attach(__name__, {...: [...]})
                names.update(c.value for c in ast.walk(node) if isinstance(c, ast.Constant) and isinstance(c.value, str))
    return frozenset(names)


def _module_of(path: pathlib.Path) -> tuple[str, bool]:
    if path in _BY_FILE:
        return _BY_FILE[path]
    return ".".join(path.relative_to(ROOT).with_suffix("").parts), False  # tests/, benchmarks/, examples/


def unresolved(path: pathlib.Path, text: str) -> list[str]:
    """`file:line: module` for each polc import in `text` that names a module or a name not there."""
    module, is_package = _module_of(path)
    where = path.relative_to(ROOT)
    missing = []
    for node in _statements(text):
        if isinstance(node, ast.Import):
            missing += [f"{where}:{node.lineno}: {a.name}" for a in node.names
                        if a.name.startswith("polc") and a.name not in MODULES]
            continue
        base = _absolute(module, is_package, node.level, node.module)
        if not base.startswith("polc"):
            continue
        if base not in MODULES:
            missing.append(f"{where}:{node.lineno}: {base}")
            continue
        missing += [f"{where}:{node.lineno}: {base}.{a.name}" for a in node.names
                    if f"{base}.{a.name}" not in MODULES and a.name not in _names(base)]
    return missing


def test_every_polc_import_in_the_repository_resolves():
    # After modules move (as they did into the rooms), an import of an old path fails here,
    # statically, before any test that would import it: `polc.typed` is `polc.check.typed` now.
    folders = ["compiler", "runtime", "lsp", "grammar", "tests", "benchmarks", "examples"]
    missing = [m for f in folders for p in sorted((ROOT / f).rglob("*.py"))
               for m in unresolved(p, p.read_text(encoding="utf-8"))]
    assert not missing, "imports of modules or names that do not exist:\n" + "\n".join(missing)


def test_an_old_path_is_caught():
    text = "from polc import typed as T\nfrom polc.lower import lower\nfrom polc.check import typed, nothing\n"
    assert unresolved(ROOT / "tests" / "test_example.py", text) == [
        "tests/test_example.py:1: polc.typed", "tests/test_example.py:2: polc.lower",
        "tests/test_example.py:3: polc.check.nothing"]


def _lazy_exports(module: str) -> set[str]:
    """The names a package's `lazy.attach(..., submod_attrs={module: [names]})` exports."""
    tree = ast.parse(MODULES[module][0].read_text(encoding="utf-8"))
    return {c.value for d in ast.walk(tree) if isinstance(d, ast.Dict)
            for v in d.values for c in ast.walk(v) if isinstance(c, ast.Constant)}


def test_no_room_re_exports_a_name_its_modules_have():
    # `from . import lower` in the back end must give the module, not a lazily exported
    # function of the same name (it did once: emit's guards broke).
    for room in ORDER:
        if room in ("messages", "errors"):
            continue
        clash = {n for n in _lazy_exports(f"polc.{room}") if f"polc.{room}.{n}" in MODULES}
        assert not clash, f"polc.{room} exports {sorted(clash)}, which are also its modules"


def test_every_compiler_all_names_what_its_module_binds():
    for module, (path, _) in MODULES.items():
        if _room(module) is None:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets) \
                    and isinstance(node.value, ast.List):
                listed = {c.value for c in node.value.elts if isinstance(c, ast.Constant)}
                assert listed <= _names(module), f"{module}.__all__ names {sorted(listed - _names(module))}"
