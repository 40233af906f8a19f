"""What `polc check` imports (issue 18): a check is run in a fresh interpreter, as the
command runs it, and `sys.modules` is read afterwards. jax and pyarrow are for compiling
and traces, lark only for reporting a syntax error (valid text goes through the
LALR tables generated from grammar/pol.lark), and numpy only for the back ends
and the counterexample search (the analysis computes with `polc.util.floats`); importing it
took about a quarter of a whole check of the Car Racing example."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
CAR_RACING = ROOT / "examples" / "car_racing" / "initial.pol"
EXAMPLES = sorted((ROOT / "examples").rglob("*.pol"))

_RUN = """
import contextlib, io, json, sys
from polc.cli import main
with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
    code = main(["check", sys.argv[1]])
print(json.dumps({"code": code, "modules": sorted(m.split(".")[0] for m in sys.modules)}))
"""


def _check_in_fresh_interpreter(path: Path) -> tuple[int, set[str]]:
    p = subprocess.run([sys.executable, "-c", _RUN, str(path)], capture_output=True, text=True, cwd=ROOT,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    return out["code"], set(out["modules"])


def test_a_clean_check_imports_neither_jax_nor_pyarrow_nor_lark_nor_numpy():
    code, modules = _check_in_fresh_interpreter(CAR_RACING)
    assert code == 0
    heavy = {"jax", "jaxlib", "pyarrow", "lark", "numpy"}
    assert not modules & heavy, modules & heavy
    # Smaller, each a millisecond or two of a 0.1 s check: OpenSSL's hashes (the generated
    # tables' grammar is compared as text), difflib (only "did you mean" suggestions need it).
    assert not modules & {"hashlib", "_hashlib", "difflib"}, modules & {"hashlib", "_hashlib", "difflib"}


@pytest.mark.parametrize("path", EXAMPLES, ids=[str(p.relative_to(ROOT / "examples")) for p in EXAMPLES])
def test_checking_any_example_imports_no_numpy(path):
    """Every example checks clean without numpy, the ones with an mlp(...) block too: the
    analysis gives an mlp's output no range of its own (its weights are unconstrained)."""
    code, modules = _check_in_fresh_interpreter(path)
    assert code == 0
    assert not modules & {"numpy", "jax", "pyarrow"}, modules & {"numpy", "jax", "pyarrow"}


@pytest.mark.parametrize("source, code", [("latent a = 1 +\n", 1),
                                          ("obs x : real in [0, 1]\naction a : real in [0, 1] = x\n", 0)])
def test_lark_is_imported_only_to_report_a_syntax_error(tmp_path, source, code):
    path = tmp_path / "p.pol"
    path.write_text(source, encoding="utf-8")
    got, modules = _check_in_fresh_interpreter(path)
    assert got == code
    assert ("lark" in modules) == (code == 1)
    assert not modules & {"jax", "pyarrow", "numpy"}


def test_polc_load_imports_no_numpy():
    """`polc.load` (parse, check, analysis) from Python, as a notebook or the language server runs it."""
    run = ("import json, sys, polc\n"
           "p = polc.load(sys.argv[1])\n"
           "print(json.dumps({'intents': len(p.analysis.intents), 'numpy': 'numpy' in sys.modules}))")
    out = subprocess.run([sys.executable, "-c", run, str(CAR_RACING)], capture_output=True, text=True, cwd=ROOT,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["intents"] > 0 and not got["numpy"]
