"""`polc refine examples/car_racing --llm openai:fake` end to end against a fake Chat
Completions server on 127.0.0.1 that answers with the bundled scripted session's replies,
in order, and the session's token counts: the run completes, records the model's name and
the server's tokens, and its table equals the scripted run's (`polc refine
examples/car_racing` without a key) on the same settings.

Both runs use --quick (2 rounds, short episodes, 3 evaluation seeds): without it one run of
2 rounds took 1 min 41 s here, and the test needs two. The scripted run is conftest's
`bundled_car_racing_quick` (the README's command with --quick, played once per worker and
shared with test_refine_scripted and test_report)."""

from __future__ import annotations

import json

import pytest

from llm_fake_server import FakeAPI, chat_completion
from refine_helpers import BUNDLED_CAR_RACING, KEY_VARIABLES, ROOT, table_without_wall_time

from polc.runtime.llm import read_exchanges

TASK = ROOT / "examples" / "car_racing"
SETTINGS = ["--rounds", "2", "--quick", "-q"]



@pytest.mark.slow
@BUNDLED_CAR_RACING
def test_openai_with_the_scripted_replies_gives_the_scripted_table(tmp_path, monkeypatch, capsys,
                                                                   bundled_car_racing_quick):
    from polc.cli import main

    for var in (*KEY_VARIABLES, "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    scripted, _, summary = bundled_car_racing_quick  # `polc refine examples/car_racing --quick`, no key
    assert summary["settings"]["rounds"] == 2 and summary["settings"]["quick"]  # SETTINGS' rounds

    session = read_exchanges(TASK / "session" / "exchanges.jsonl")
    script = [(200, chat_completion(r["reply"], r["input_tokens"], r["output_tokens"]), 0) for r in session]
    run = tmp_path / "openai"
    with FakeAPI(script) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{fake.url}/v1")
        code = main(["refine", str(TASK), "-o", str(run), "--llm", "openai:fake", *SETTINGS])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "SCRIPTED RECORDING" not in err + out

    played = read_exchanges(scripted / "exchanges.jsonl")
    exchanges = read_exchanges(run / "exchanges.jsonl")
    assert len(fake.requests) == len(exchanges) == len(played) > 0
    assert all(r["body"]["model"] == "fake" for r in fake.requests)
    assert [e["model"] for e in exchanges] == ["openai:fake"] * len(exchanges)
    assert [(e["reply"], e["input_tokens"], e["output_tokens"]) for e in exchanges] == [
        (r["reply"], r["input_tokens"], r["output_tokens"]) for r in session[:len(exchanges)]]
    # the same prompts went to the server as to the scripted session
    assert [[m["content"] for m in r["body"]["messages"]] for r in fake.requests] == [
        [m["text"] for m in e["messages"]] for e in played]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["llm"] == "openai:fake" and not summary["scripted"]
    assert table_without_wall_time(run) == table_without_wall_time(scripted)
