"""Untrusted analysis code (an LLM's, or yours) run over a trace in an isolated process.

    process.py  run_analysis and its Limits; the init and harness the sandbox runs as itself
                (it is executed by path inside the sandbox, so it imports nothing of polc)
"""

import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach(__name__, submod_attrs={
    "process": ["Limits", "SandboxResult", "SandboxUnavailable", "clean_env", "run_analysis"],
})
