"""Utilities with no knowledge of Pol: the compiler and the runtime both import them.

They live under `polc` (this directory is compiler/util/) because the package `polc`
is compiler/ (pyproject's package-dir); a top-level folder of its own would need
another package mapping in every install. Nothing here imports anything from `polc`
(tests/project/test_import_order.py), so `polc.runtime` can use them without pulling in a
compiler phase, and the compiler without importing the runtime.

    record  `record`, a frozen dataclass cheaper to define (the syntax trees, `Span`)
    files   writing files atomically (`write_atomic`), and write errors as one sentence
    floats  small float64 arrays in plain Python (the interval analysis, without NumPy)
"""

import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach(__name__, submod_attrs={
    "files": ["WriteFailed", "naming", "temporary_beside", "write_atomic", "write_error_text"],
})
