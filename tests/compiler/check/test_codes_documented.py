"""The language reference lists every diagnostic code polc can emit."""

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def test_every_diagnostic_code_is_documented():
    """Every code polc can emit, from the compiler, the runtime (the environment checks)
    or the language server, is in the table of docs/language.md."""
    codes: dict[str, str] = {}
    for part in ("compiler", "runtime", "lsp"):
        for folder, _, files in os.walk(os.path.join(ROOT, part)):
            for name in files:
                if name.endswith(".py"):
                    with open(os.path.join(folder, name), encoding="utf-8") as f:
                        for code in re.findall(r'"([EWI]\d{4})"', f.read()):
                            codes.setdefault(code, os.path.relpath(os.path.join(folder, name), ROOT))
    with open(os.path.join(ROOT, "docs", "language.md")) as f:
        docs = f.read()
    assert len(codes) > 50 and any(c.startswith("E05") for c in codes)
    missing = sorted(f"{c} ({where})" for c, where in codes.items() if f"`{c}`" not in docs)
    assert not missing, f"docs/language.md does not list {missing}"
