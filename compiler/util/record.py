"""`record`: the frozen dataclass of polc's two syntax trees (`ast`, `typed`), cheaper to define.

`dataclass(frozen=True)` compiles six methods per class with `exec` (`__init__`,
`__repr__`, `__eq__`, `__hash__` and the two frozen guards) and, for a class without a
docstring, builds one from `inspect.signature`. For the 52 node classes of `ast` and
`typed` that was 35 ms, two thirds of `import polc` and a quarter of a `polc check`
process (docs/performance.md, "polc check").

A `record` is a dataclass whose fields, `dataclasses.fields`, `replace`, `asdict`,
`is_dataclass` and `match` patterns behave as a frozen dataclass's do, and whose
instances behave the same too: built by keyword or position with the declared
defaults, immutable (assigning or deleting any attribute raises
`dataclasses.FrozenInstanceError`), equal when of the same class with equal fields in
order, hashed as the tuple of their fields, shown as `Name(field=value, ...)`. Only
`__init__` is compiled per class (one `exec`, as dataclass writes it for a frozen
class); the other methods are the shared functions below, which read a class's fields
through one `operator.attrgetter`. A class without a docstring gets dataclass's default
one, `Name(field: type, ...)`, from its annotations as written. Records do not inherit
from records (none of polc's do; dataclass's rules for that are not repeated here).
"""

from __future__ import annotations

import dataclasses
from operator import attrgetter

_set = object.__setattr__


def _fields_of(self):
    return type(self)._record_fields(self)


def _eq(self, other):
    if other.__class__ is self.__class__:
        return _fields_of(self) == _fields_of(other)
    return NotImplemented


def _hash(self):
    return hash(_fields_of(self))


def _repr(self):
    names = type(self)._record_names
    return f"{type(self).__qualname__}({', '.join(f'{n}={getattr(self, n)!r}' for n in names)})"


def _setattr(self, name, value):
    raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")


def _delattr(self, name):
    raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")


def _init(cls, fields):
    """`cls.__init__`, as dataclass writes it for a frozen class (defaults are the declared objects)."""
    scope = {"__set": _set}
    params, body = ["self"], []
    for f in fields:
        if f.default is not dataclasses.MISSING:
            scope[f"__default_{f.name}"] = f.default
            params.append(f"{f.name}=__default_{f.name}")
        elif f.default_factory is not dataclasses.MISSING:
            raise TypeError(f"{cls.__name__}.{f.name}: a record's fields take a default, not a default_factory")
        else:
            params.append(f.name)
        body.append(f"  __set(self, {f.name!r}, {f.name})")
    source = f"def __init__({', '.join(params)}):\n" + ("\n".join(body) or "  pass") + "\n"
    exec(source, scope)
    init = scope["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    return init


def record(cls):
    """`@record` where `@dataclass(frozen=True)` would be, with the behaviour the module docstring lists."""
    if cls.__doc__ is None:
        cls.__doc__ = f"{cls.__name__}({', '.join(f'{n}: {t}' for n, t in cls.__annotations__.items())})"
    cls = dataclasses.dataclass(init=False, repr=False, eq=False)(cls)
    fields = dataclasses.fields(cls)
    names = tuple(f.name for f in fields)
    # A tuple for every class, however many fields, as dataclass compares and hashes.
    if len(names) > 1:
        fields_of = attrgetter(*names)
    else:
        fields_of = (lambda self, get=attrgetter(*names): (get(self),)) if names else (lambda self: ())
    cls._record_fields, cls._record_names = staticmethod(fields_of), names
    methods = {"__init__": _init(cls, fields), "__eq__": _eq, "__hash__": _hash, "__repr__": _repr,
               "__setattr__": _setattr, "__delattr__": _delattr}
    for name, method in methods.items():
        if name not in cls.__dict__:  # a class's own method wins, as with dataclass
            setattr(cls, name, method)
    return cls


__all__ = ["record"]
