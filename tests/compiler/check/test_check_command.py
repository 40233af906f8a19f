"""`polc check` as a person or a tool runs it: exit codes (0 ok, 1 errors, 2 bad
usage or unreadable input, 3 internal error), --werror, --format json, and no
JAX import on the way."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from polc.check import program as check_module
from polc.cli import main
from polc.messages import ice

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = sorted((ROOT / "examples").rglob("*.pol"))
IDS = [p.relative_to(ROOT / "examples").as_posix() for p in EXAMPLES]
WARNS = ROOT / "examples" / "slip" / "round0.pol"  # an unconstrained coefficient: W0406
BROKEN = ROOT / "tests" / "golden" / "64_many_errors.pol"
CODE = re.compile(r"^\w+ (?:error|warning|note) \[([EWI]\d{4})\]", re.MULTILINE)


@pytest.fixture(autouse=True)
def _at_root(monkeypatch, cli_stderr):
    monkeypatch.chdir(ROOT)


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


@pytest.mark.parametrize("path", EXAMPLES, ids=IDS)
def test_examples_check_with_exit_0(path, capsys):
    assert main(["check", _rel(path)]) == 0
    err = capsys.readouterr().err
    assert not re.search(r"^\w+ error \[", err, re.MULTILINE)
    assert err.rstrip().endswith(")") and f"{_rel(path)}: ok (" in err


def test_the_warning_example_warns():
    """The premise of the --werror tests below: round0.pol warns and still passes."""
    assert main(["check", _rel(WARNS)]) == 0


def test_werror_turns_a_warning_into_exit_1(capsys):
    assert main(["check", _rel(WARNS), "--werror"]) == 1
    err = capsys.readouterr().err
    assert "warning [W0406]" in err and ": ok (" not in err


@pytest.mark.parametrize("path", EXAMPLES, ids=IDS)
def test_werror_passes_programs_without_warnings(path, capsys):
    code = main(["check", _rel(path), "--werror"])
    text = capsys.readouterr().err
    assert code == (1 if "warning [" in text else 0)


def test_errors_exit_1(capsys):
    assert main(["check", _rel(BROKEN)]) == 1
    assert len(CODE.findall(capsys.readouterr().err)) == 4


@pytest.mark.parametrize("path", [*EXAMPLES, WARNS, BROKEN], ids=[*IDS, "warns", "broken"])
def test_json_is_valid_and_has_the_same_codes(path, capsys):
    code_text = main(["check", _rel(path)])
    text = capsys.readouterr().err
    code_json = main(["check", _rel(path), "--format", "json"])
    out = capsys.readouterr()
    assert code_json == code_text
    assert out.err == ""  # machine output only on stdout
    diags = json.loads(out.out)
    assert isinstance(diags, list)
    assert [d["code"] for d in diags] == CODE.findall(text)
    for d in diags:
        assert set(d) >= {"severity", "code", "phase", "span", "message", "hint", "notes"}
        assert d["severity"] in ("error", "warning", "note")


def test_json_with_werror(capsys):
    assert main(["check", _rel(WARNS), "--format", "json", "--werror"]) == 1
    assert [d["code"] for d in json.loads(capsys.readouterr().out)] == ["W0406"]


def test_verbose_lists_proved_intents(capsys):
    assert main(["check", "examples/car_racing/initial.pol", "--verbose"]) == 0
    err = capsys.readouterr().err
    assert err.count("note [I0408]") == 5  # all five intents of the example hold
    assert "is proved." in err


# ---- usage errors and internal errors ----------------------------------------------------


def test_no_command_prints_help_and_exits_2(capsys):
    assert main([]) == 2
    assert "usage: polc" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["check"], ["check", "a.pol", "--format", "xml"], ["frobnicate"],
                                  ["check", "a.pol", "--no-such-flag"]])
def test_bad_usage_exits_2(argv, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert "usage: polc" in capsys.readouterr().err


def test_a_bug_in_polc_exits_3_without_a_traceback(monkeypatch, capsys):
    def broken(prog):
        raise KeyError("oops")

    monkeypatch.setattr(check_module, "check_program", broken)
    monkeypatch.delenv("POLC_DEBUG", raising=False)
    assert main(["check", "examples/door/initial.pol"]) == 3
    err = capsys.readouterr().err
    assert err.startswith("Internal compiler error: KeyError") and "Traceback" not in err
    assert "not in your program" in err


def test_an_internal_compiler_error_exits_3(monkeypatch, capsys):
    def broken(prog):
        raise ice("a typed node without a type")

    monkeypatch.setattr(check_module, "check_program", broken)
    monkeypatch.delenv("POLC_DEBUG", raising=False)
    assert main(["check", "examples/door/initial.pol"]) == 3
    assert "a typed node without a type" in capsys.readouterr().err


# ---- check stays light ---------------------------------------------------------------------


def test_check_does_not_import_jax():
    """`polc check` runs where JAX is slow to import or absent: it must never load it."""
    script = (
        "import sys\n"
        "from polc.cli import main\n"
        "code = main(['check', 'examples/car_racing/initial.pol', '--verbose'])\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('jax', 'jaxlib', 'flax', 'optax'))\n"
        "print(code, heavy)\n"
    )
    run = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "0 []"


def test_console_script_exit_codes(tmp_path):
    """The installed entry point turns main's return value into the process exit code."""
    def rc(*args: str) -> int:
        return subprocess.run([sys.executable, "-m", "polc.cli", *args], cwd=ROOT, capture_output=True,
                              timeout=120).returncode

    assert rc("check", "examples/door/initial.pol") == 0
    assert rc("check", _rel(BROKEN)) == 1
    assert rc("check", str(tmp_path / "missing.pol")) == 2


def test_written_files_get_an_ordinary_mode_not_mkstemps_0600(tmp_path):
    import os

    from polc.util.files import write_atomic

    target = tmp_path / "out.py"
    mask = os.umask(0o022)
    try:
        write_atomic(target, "x = 1\n")
    finally:
        os.umask(mask)
    assert target.read_text() == "x = 1\n"
    assert (target.stat().st_mode & 0o777) == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["out.py"]
