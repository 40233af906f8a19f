"""How the checker is built (issue 36): its parts read only the tables `CheckerState` declares
(`check_expr`'s mixin used state that only the checker's `__init__` set), and the message text
they report is written in errors.py, not built with f-strings in check/."""

from __future__ import annotations

import ast as pyast
import inspect
import pathlib

import pytest

from polc.check import _consts, expr
from polc.check._state import CheckerState
from polc.frontend import ast


def _attributes_read(cls: type) -> set[str]:
    tree = pyast.parse(inspect.getsource(cls))
    return {n.attr for n in pyast.walk(tree)
            if isinstance(n, pyast.Attribute) and isinstance(n.value, pyast.Name) and n.value.id == "self"}


@pytest.mark.parametrize("part", [expr.ExprChecker, _consts.ConstChecker], ids=lambda c: c.__name__)
def test_each_part_reads_only_the_shared_state_or_its_own_methods(part):
    assert issubclass(part, CheckerState)
    state = CheckerState(ast.Program(decls=(), comments=(), file="p.pol", text=""))
    own = {name for name in vars(part) if callable(getattr(part, name))}
    shared = set(vars(state)) | {name for name in vars(CheckerState) if not name.startswith("__")}
    undeclared = _attributes_read(part) - own - shared
    assert not undeclared, f"{part.__name__} reads {sorted(undeclared)}, which CheckerState does not declare"


CHECKER = ["program.py", "expr.py", "_consts.py", "_elements.py", "_state.py"]
# f-strings that are not message text: names the checker makes up, and (until the range
# text has its one home, issue 36 part 3) a constraint written as text.
NOT_MESSAGES = {"free_name", "call_mlp", "_constraint_text"}


def _fstrings_outside_ice(path: pathlib.Path) -> list[str]:
    tree = pyast.parse(path.read_text(encoding="utf-8"))
    inside_ice = {id(s) for c in pyast.walk(tree) if isinstance(c, pyast.Call) and getattr(c.func, "id", "") == "ice"
                  for s in pyast.walk(c)}
    found = []
    for fn in pyast.walk(tree):
        if isinstance(fn, (pyast.FunctionDef, pyast.Module)) and getattr(fn, "name", None) not in NOT_MESSAGES:
            body = fn.body if isinstance(fn, pyast.Module) else [fn]
            for node in (n for b in body for n in pyast.walk(b)):
                if isinstance(node, pyast.JoinedStr) and id(node) not in inside_ice:
                    found.append(f"{path.name}:{node.lineno}")
    return sorted(set(found) - {f for f in found if _in_allowed(path, f)})


def _in_allowed(path: pathlib.Path, where: str) -> bool:
    line = int(where.rsplit(":", 1)[1])
    tree = pyast.parse(path.read_text(encoding="utf-8"))
    return any(isinstance(fn, pyast.FunctionDef) and fn.name in NOT_MESSAGES and fn.lineno <= line <= fn.end_lineno
               for fn in pyast.walk(tree))


@pytest.mark.parametrize("name", CHECKER)
def test_the_checker_builds_no_message_text(name):
    path = pathlib.Path(expr.__file__).parent / name
    assert _fstrings_outside_ice(path) == [], "message text belongs in errors.py (a phrase or a constructor)"
