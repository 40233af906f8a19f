"""The layout stays what docs say it is: no import cycle among polc's own modules
(imports inside functions count; so do the lazy re-exports of a package's
`__init__`), and the compiler (with the language server beside it) never imports
the runtime.

The graph is computed from the source with `ast`, not by importing anything.
Importing `a.b.c` runs the `__init__` of `a` and `a.b` first, so an edge goes to
every package on the way that the importer is not itself inside. Imports under
`if TYPE_CHECKING:` never run and are left out.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Import name -> source folder, as pyproject.toml's package-dir maps them (most specific first).
PACKAGES = (("polc.runtime", ROOT / "runtime"), ("polc.grammar", ROOT / "grammar"), ("polc.lsp", ROOT / "lsp"),
            ("polc", ROOT / "compiler"))


def _modules() -> dict[str, tuple[Path, bool]]:
    """Every module: name -> (file, is a package's __init__)."""
    found: dict[str, tuple[Path, bool]] = {}
    for prefix, folder in PACKAGES:
        for path in folder.rglob("*.py"):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            name = ".".join([prefix] + (parts[:-1] if is_package else parts))
            found.setdefault(name, (path, is_package))
    return found


MODULES = _modules()


def _absolute(module: str, is_package: bool, level: int, name: str | None) -> str:
    if level == 0:
        return name or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_nodes(tree: ast.AST):
    """Every import statement that can run (anywhere: module level or inside functions)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "attach":
            yield node  # lazy_loader.attach(__name__, submod_attrs={...})
        stack.extend(ast.iter_child_nodes(node))


def _targets(module: str, is_package: bool, node: ast.AST) -> set[str]:
    if isinstance(node, ast.Import):
        return {a.name for a in node.names}
    if isinstance(node, ast.Call):  # lazy re-exports: the package imports each named submodule
        out = set()
        for kw in node.keywords:
            if kw.arg == "submod_attrs" and isinstance(kw.value, ast.Dict):
                out |= {f"{module}.{k.value}" for k in kw.value.keys if isinstance(k, ast.Constant)}
        return out
    base = _absolute(module, is_package, node.level, node.module)
    return {f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names}


def _ancestors(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def import_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, (path, is_package) in MODULES.items():
        inside = set(_ancestors(module)) | ({module} if is_package else set())
        edges: set[str] = set()
        for node in _import_nodes(ast.parse(path.read_text(encoding="utf-8"))):
            for target in _targets(module, is_package, node):
                for t in _ancestors(target) + [target]:
                    if t in MODULES and t != module and t not in inside:
                        edges.add(t)
        graph[module] = edges
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as a path [a, b, ..., a], or None; iterative DFS (no recursion limit)."""
    WHITE, GREY, BLACK = 0, 1, 2
    color = dict.fromkeys(graph, WHITE)
    for start in sorted(graph):
        if color[start] != WHITE:
            continue
        path, iters = [start], [iter(sorted(graph[start]))]
        color[start] = GREY
        while path:
            nxt = next(iters[-1], None)
            if nxt is None:
                color[path.pop()] = BLACK
                iters.pop()
            elif color[nxt] == GREY:
                return path[path.index(nxt):] + [nxt]
            elif color[nxt] == WHITE:
                color[nxt] = GREY
                path.append(nxt)
                iters.append(iter(sorted(graph[nxt])))
    return None


def test_the_graph_sees_function_level_and_lazy_imports():
    graph = import_graph()
    # function-level: the analyze command imports the report only when it runs
    assert "polc.runtime.diagnostics.report" in graph["polc.runtime.diagnostics.cli"]
    # lazy re-export of a package's names
    assert "polc.runtime.il.train" in graph["polc.runtime.il"]
    # importing a submodule runs its package's __init__ first
    assert "polc.runtime.io" in graph["polc.runtime.trace.rollout"]


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle_among_polc_modules():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_compiler_never_imports_the_runtime():
    graph = import_graph()
    compiler = [m for m in graph if not m.startswith("polc.runtime")]
    wrong = {m: sorted(t for t in graph[m] if t.startswith("polc.runtime")) for m in compiler}
    assert not {m: t for m, t in wrong.items() if t}


@pytest.mark.parametrize("package", sorted(m for m, (_, pkg) in MODULES.items() if pkg and m.startswith("polc.runtime.")))
def test_every_runtime_part_names_its_modules(package):
    """Each part's __init__ says what its modules are for (its docstring)."""
    path, _ = MODULES[package]
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    assert doc, f"{path.relative_to(ROOT)} has no docstring"


def test_the_runtime_top_level_holds_only_the_cli_glue():
    top = sorted(p.name for p in (ROOT / "runtime").glob("*.py"))
    assert top == ["__init__.py", "cli.py", "commands.py"]
