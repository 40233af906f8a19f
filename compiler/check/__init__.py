"""Checking: the untyped tree to the typed program (names, shapes, ranges, elements, priors).

`check_program(ast) -> (TypedProgram, warnings)` is the entry (`program`, with the
expression rules in `expr`); `typed` is the typed tree every later phase reads.
Imports only earlier rooms (tests/project/test_import_order.py).
"""

import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach(__name__, submod_attrs={
    "program": ["check_program"],
    "typed": ["TypedProgram"],
})
