"""Back end: the typed program to something that runs: JAX (`lower`), a Python
module, HLO or JSON (`emit`), C99 (`emit_c`).

Imports only earlier rooms (tests/test_import_order.py); jax only on the way in
to `lower`, never for `polc check`.
"""

import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach(__name__, submod_attrs={
    "lower": ["CompiledPolicy", "lower"],
    "emit_c": ["emit_c"],
})
