"""polc.lsp: the Pol language server (`polc lsp`), driven by the compiler itself.

    document  one document's check (the diagnostics of `polc check --verbose`) and
              the index of its names: declarations, uses, hover text; no pygls here
    builtins  the signatures and docs of the builtin functions and keywords
    environment  the environment a document's task folder names (task.md `env:`, env.toml),
              its schema loaded once: what `polc check --env` adds (W0509, E05xx)
    server    the pygls 2 server on stdio: diagnostics (debounced), hover, definition,
              references, rename, document symbols, completion, formatting, quick fixes,
              semantic tokens (names by kind)

It imports the compiler (`polc`); the runtime only by name, where it is installed, for the
environments (`environment`, as `polc check --env` does); pygls is imported only by
`server`, so `polc check` never pays for it.
"""

from __future__ import annotations

from .document import Document, analyze_document, check_diagnostics


def serve() -> int:
    """Run the language server on standard input and output (`polc lsp`)."""
    from .server import serve as _serve

    return _serve()


__all__ = ["Document", "analyze_document", "check_diagnostics", "serve"]
