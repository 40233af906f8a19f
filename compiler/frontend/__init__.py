"""Front end: Pol source text to the untyped syntax tree (`ast`), with syntax errors.

`parse_program(text, file)` is the entry; `lalr` drives the LALR tables built from
grammar/pol.lark, `syntax_errors` labels what lark could not parse. Imports only
`polc.messages`, `polc.errors` and `polc.util` (tests/project/test_import_order.py).
"""

import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach(__name__, submod_attrs={
    "parse": ["parse_program", "parse_file"],
})
