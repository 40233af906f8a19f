"""Untrusted analysis code (an LLM's, or yours) run over a trace in an isolated process.

    process.py  run_analysis and its Limits: the caller's side (starts the sandbox, enforces
                the wall clock and the output limit, builds every sentence polc says about it)
    inside.py   init and the harness, the sandbox's inside, with its seccomp filter (executed
                by path inside the sandbox, so it imports nothing of polc)

What is allowed and why: docs/sandbox.md.
"""

import lazy_loader as lazy

__getattr__, __dir__, __all__ = lazy.attach(__name__, submod_attrs={
    "process": ["Limits", "SandboxResult", "SandboxUnavailable", "SandboxWarning", "clean_env",
                "run_analysis"],
})
