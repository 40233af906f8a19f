"""Analysis: what a typed program computes, without running it.

`analyze_program(typed) -> Analysis` is the entry (`program`): value ranges
(`intervals`, one element's rules in `element_rules`), directions of effect
(`abstract`), weight dependencies (`deps`), counterexamples searched with the
NumPy `reference` interpreter (within one step, `counterexample`, or along
`sequences` of steps), and the constraint `transforms` both the interpreter
and the back end apply. Imports only earlier rooms (tests/project/test_import_order.py).
"""

import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach(__name__, submod_attrs={
    "program": ["Analysis", "analyze_program"],
})
