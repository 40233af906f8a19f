"""Back end: the typed program to something that runs: JAX (`lower`), a Python
module, HLO or JSON (`emit`), C99 (`emit_c`).

Imports only earlier rooms (tests/project/test_import_order.py); jax only on the way in
to `lower`, never for `polc check`. The entry points keep their modules' names
(`polc.backend.lower.lower`, `polc.backend.emit_c.emit_c`), so they are not re-exported
here: `from polc.backend import lower` is the module.
"""

import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach(__name__, submod_attrs={
    "lower": ["CompiledPolicy"],
})
