"""`polc generate`: one request for an initial structure, checked and repaired, recorded."""

from __future__ import annotations

import json

import pytest
from refine_helpers import BROKEN, GOOD, FakeModel, make_task, pol

from polc.cli import main
from polc.runtime.refine.converse import Caller
from polc.runtime.refine.loop import generate
from polc.runtime.task import load_task
from polc.runtime.refine.work import Settings, environment


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    return make_task(tmp_path_factory.mktemp("toy") / "task")


def test_generate_asks_once_and_repairs_what_fails_check(task, tmp_path):
    model = FakeModel(["Here is a PD controller.\n" + pol(BROKEN), pol(GOOD)])
    call = Caller(model, tmp_path, 0)
    program, text = generate(call, load_task(str(task)), environment("toy_reach", Settings()), Settings(),
                             "initial.pol")
    assert text == GOOD and program.typed.name == "reach2"
    prompt = model.prompts[0][1].text
    assert '- gap : real[2] in [-3, 3]  "target - pos, and -vel"' in prompt and "Push the point mass" in prompt
    assert "E0302" in model.prompts[1][-1].text
    assert (call.counts.calls, call.counts.repairs) == (2, 1)


def test_the_generate_command_writes_the_checked_program(task, tmp_path, capsys):
    session = tmp_path / "session"
    (session / "replies").mkdir(parents=True)
    (session / "replies" / "000.md").write_text(pol(GOOD))
    out = tmp_path / "initial.pol"
    assert main(["generate", str(task / "task.md"), "-o", str(out), "--llm", f"manual:{session}"]) == 0
    assert out.read_text() == GOOD
    record = json.loads((tmp_path / "initial.generate" / "exchanges.jsonl").read_text())
    assert record["purpose"] == "generate" and record["reply"] == pol(GOOD)
    assert 'wrote ' in capsys.readouterr().err


def test_generate_without_a_model_says_how_to_get_one(task, tmp_path, monkeypatch, capsys):
    for var in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    assert main(["generate", str(task / "task.md"), "-o", str(tmp_path / "p.pol")]) == 1
    assert "polc generate needs a model: set GEMINI_API_KEY" in capsys.readouterr().err
