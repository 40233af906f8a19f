"""`polc.util.record`: the syntax trees' records behave as `dataclass(frozen=True)` would.

Every record class of `polc.frontend.ast` and `polc.check.typed` is compared with a frozen dataclass
twin of the same fields (made by `dataclasses.make_dataclass`): the same repr, equality
and hash, the same errors on assignment and deletion, and the dataclass functions
(`fields`, `replace`, `asdict`) and pickling work on it."""

from __future__ import annotations

import copy
import dataclasses
import pickle

import pytest

import polc.frontend.ast as A
import polc.check.typed as T
from polc.util.record import record

# `Span` lives in polc.messages (a message points at one); the ast re-exports it.
RECORDS = [c for mod in (A, T) for c in vars(mod).values()
           if isinstance(c, type) and c.__module__ == mod.__name__ and "_record_names" in c.__dict__] + [A.Span]


def test_every_node_class_is_a_record():
    # 30 classes in ast, 20 in typed at the time of writing; a new node class is a record too.
    dataclass_nodes = [c for mod in (A, T) for c in vars(mod).values()
                       if isinstance(c, type) and c.__module__ == mod.__name__ and dataclasses.is_dataclass(c)] + [A.Span]
    assert set(dataclass_nodes) == set(RECORDS) and len(RECORDS) >= 50


def _twin(cls):
    spec = [(f.name, f.type, dataclasses.field(default=f.default)) if f.default is not dataclasses.MISSING
            else (f.name, f.type) for f in dataclasses.fields(cls)]
    twin = dataclasses.make_dataclass(cls.__name__, spec, frozen=True)
    twin.__qualname__ = cls.__qualname__
    return twin


def _values(cls, salt):
    return [f"{f.name}-{salt}" for f in dataclasses.fields(cls)]


@pytest.mark.parametrize("cls", RECORDS, ids=lambda c: f"{c.__module__}.{c.__name__}")
def test_a_record_behaves_as_its_frozen_dataclass_twin(cls):
    twin = _twin(cls)
    a, b, twin_a = cls(*_values(cls, 1)), cls(*_values(cls, 2)), twin(*_values(cls, 1))
    assert repr(a) == repr(twin_a)
    assert a == cls(*_values(cls, 1)) and hash(a) == hash(twin_a) == hash(cls(*_values(cls, 1)))
    assert a != b and a != twin_a  # another class never compares equal, as with dataclass
    assert dataclasses.asdict(a) == dataclasses.asdict(twin_a)
    name = dataclasses.fields(cls)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError, match=f"cannot assign to field '{name}'"):
        setattr(a, name, 0)
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'other'"):
        a.other = 0
    with pytest.raises(dataclasses.FrozenInstanceError, match=f"cannot delete field '{name}'"):
        delattr(a, name)
    moved = dataclasses.replace(a, **{name: "new"})
    assert getattr(moved, name) == "new" and moved == cls(*(["new"] + _values(cls, 1)[1:]))
    assert pickle.loads(pickle.dumps(a)) == a and copy.deepcopy(a) == a


def test_keywords_defaults_and_match():
    t = T.Type("real")
    assert t.shape == () and t == T.Type(base="real", shape=())
    c = T.Constant("c", 1.0, None, A.Span("f.pol", 1, 1, 1, 2))
    assert c.type == T.Type(T.REAL)  # a default object, shared as dataclass shares it
    match A.Name("x", None):
        case A.Name(id, span):
            assert (id, span) == ("x", None)
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'span'"):
        A.Name("x")


def test_docs_and_own_methods():
    assert A.Name.__doc__ == "Name(id: str, span: Span)"  # dataclass's default, from the annotations
    assert A.Span.__doc__.startswith("A region of one source file")  # a written docstring is kept
    assert str(T.Type("real", (3,))) == "real[3]" and T.Type("real", (3,)).size == 3

    @record
    class Own:
        x: int

        def __repr__(self):
            return "own"

    assert repr(Own(1)) == "own" and Own(1) == Own(1)


def test_a_default_factory_is_refused():
    with pytest.raises(TypeError, match="a default, not a default_factory"):
        @record
        class Bad:
            x: list = dataclasses.field(default_factory=list)
