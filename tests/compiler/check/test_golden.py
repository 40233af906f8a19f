"""Golden diagnostics: one bad program per file under tests/golden/, its full
`polc check` output beside it, diffed whole.

    pytest tests/compiler/check/test_golden.py                   # compare
    pytest tests/compiler/check/test_golden.py --update-golden   # rewrite the .expected files (like `dune promote`)

A program may start with a line `# check-args: ARGS` to pass extra options
to `polc check` (e.g. `--verbose`). Paths are relative to the repository root,
as a person would type them.
"""

from __future__ import annotations

import inspect
import json
import re
import shlex
import typing
from pathlib import Path

import pytest

from polc.frontend import ast
from polc import errors
from polc.cli import main
from polc.messages import Diagnostic

ROOT = Path(__file__).resolve().parents[3]
GOLDEN = Path(__file__).resolve().parents[2] / "golden"
CASES = sorted(GOLDEN.glob("*.pol"))
CODE = re.compile(r"^\w+ (?:error|warning|note) \[([EWI]\d{4})\]", re.MULTILINE)


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _extra_args(path: Path) -> list[str]:
    first = path.read_text(encoding="utf-8").split("\n", 1)[0]
    return shlex.split(first.split(":", 1)[1]) if first.startswith("# check-args:") else []


def _check(path: Path, capsys, *more: str) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of `polc check` on `path`, run in-process from the repository root."""
    code = main(["check", _rel(path), *_extra_args(path), *more])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_there_are_enough_goldens():
    assert len(CASES) >= 45


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_golden(path, request, capsys, monkeypatch, cli_stderr):
    monkeypatch.chdir(ROOT)
    code, out, err = _check(path, capsys)
    text = out + err
    expected = path.with_suffix(".expected")
    if request.config.getoption("--update-golden"):
        expected.write_text(text, encoding="utf-8")
    else:
        assert expected.exists(), f"no {expected.name}: run pytest with --update-golden"
        assert text == expected.read_text(encoding="utf-8")
    assert "Traceback" not in text and "Internal compiler error" not in text
    assert code == (1 if re.search(r"^\w+ error \[", text, re.MULTILINE) else 0)
    assert CODE.search(text), "a golden program must produce at least one diagnostic"


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_json_has_the_same_content(path, capsys, monkeypatch, cli_stderr):
    """`--format json` carries what the text shows: code, position, sentence, hint."""
    monkeypatch.chdir(ROOT)
    code_text, _, text = _check(path, capsys)
    code_json, out, err = _check(path, capsys, "--format", "json")
    assert code_json == code_text
    assert err == ""
    diags = json.loads(out)
    if code_text == 0:  # drop the closing "FILE: ok (...)" line
        text, ok = text.rstrip("\n").rsplit("\n", 1)
        assert ok.startswith(_rel(path) + ": ok (")
    blocks = re.split(r"\n\n(?=\w+ (?:error|warning|note) \[)", text.strip())
    assert [d["code"] for d in diags] == CODE.findall(text)
    assert len(blocks) == len(diags)
    for d, block in zip(diags, blocks):
        heading, *lines = block.split("\n")
        assert f"[{d['code']}]" in heading
        if d["span"] is not None:
            s = d["span"]
            assert f"'{s['file']}', line {s['line']}, column {s['column']}" in heading
        assert d["message"] in lines
        if d["hint"]:
            assert f"Hint: {d['hint']}" in lines


# ---- every diagnostic kind has a golden ---------------------------------------------------

_SPAN = ast.Span("t.pol", 1, 1, 1, 2)


def _dummy(annotation) -> object:
    """A plausible argument for a constructor parameter, from its annotation."""
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
    if "Span" in text:
        return _SPAN
    if text.startswith(("Iterable", "Sequence", "list")):
        return ["x", "y"]
    if text.startswith("tuple"):
        return (1, 2)
    if text == "int":
        return 2
    if text == "float":
        return 1.0
    return "x"


def constructors() -> dict[str, str]:
    """Every public constructor in `errors` that returns a Diagnostic, with the code it emits."""
    out = {}
    for name, fn in inspect.getmembers(errors, inspect.isfunction):
        if name.startswith("_") or fn.__module__ != errors.__name__:
            continue
        hints = typing.get_type_hints(fn, globalns=vars(errors))
        if hints.get("return") is not Diagnostic:
            continue
        params = inspect.signature(fn).parameters
        args = {p: _dummy(inspect.signature(fn).parameters[p].annotation) for p in params
                if params[p].default is inspect.Parameter.empty}
        diag = fn(**args)
        assert isinstance(diag, Diagnostic) and diag.message.strip(), name
        out[name] = diag.code
    return out


def _golden_codes() -> set[str]:
    return {c for p in GOLDEN.glob("*.expected") for c in CODE.findall(p.read_text(encoding="utf-8"))}


def test_introspection_finds_the_constructors():
    found = constructors()
    assert found["undefined_name"] == "E0101" and found["syntax_error"] == "E0001"
    assert len(found) >= 40


def test_every_constructor_has_a_golden():
    missing = {name: code for name, code in constructors().items() if code not in _golden_codes()}
    assert not missing, f"no golden program produces {missing}"


def test_every_golden_code_has_a_constructor():
    assert _golden_codes() <= set(constructors().values())


def test_codes_are_unique_per_constructor():
    codes = list(constructors().values())
    assert len(codes) == len(set(codes))


@pytest.mark.parametrize("source,name,suggests", [
    ("obs slip : real\naction a : real = sllip", "sllip", "slip"),
    ("obs target_speed : real\naction a : real = targetspeed", "targetspeed", "target_speed"),
    ("obs speed : real\naction gas : real = k_gas * speed", "k_gas", None),  # a new gain, not the action
    ("obs v : real\nlatent target_speed = 2 * v\naction a : real = wheel_speed - target_speed", "wheel_speed", None),
    ("obs wheel_speed : real\nlatent wheel_sped = wheel_speed\naction a : real = wheel_sped\n"
     "expect a increasing in wheel_spee", "wheel_spee", "wheel_speed"),  # an intent's variable is an input
])
def test_did_you_mean_is_in_the_hint_and_only_for_a_typo(source, name, suggests):
    from polc import PolError, loads

    with pytest.raises(PolError) as e:
        loads(source)
    d = next(d for d in e.value.diagnostics if d.code == "E0101")
    if suggests is None:
        assert "Did you mean" not in d.message and d.hint.startswith("Declare it") and f"`weight {name}" in d.hint
    else:
        assert d.message.endswith(f'Did you mean "{suggests}"?') and d.hint.startswith(f'Did you mean "{suggests}"')
