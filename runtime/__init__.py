"""polc.runtime: running compiled policies in environments (see the runtime issues)."""
