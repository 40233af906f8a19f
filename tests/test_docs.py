"""The language reference lists every diagnostic code the compiler can emit."""

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_every_diagnostic_code_is_documented():
    with open(os.path.join(ROOT, "compiler", "errors.py")) as f:
        codes = set(re.findall(r'"([EWI]\d{4})"', f.read()))
    with open(os.path.join(ROOT, "docs", "language.md")) as f:
        docs = f.read()
    assert len(codes) > 40
    missing = sorted(c for c in codes if f"`{c}`" not in docs)
    assert not missing, f"docs/language.md does not list {missing}"
