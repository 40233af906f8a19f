"""Budgets end to end: `polc refine TASK --llm openai:fake` against a fake Chat Completions
server on 127.0.0.1 (the real openai SDK, the real CLI), on the toy task. A token budget
and, separately, a cost budget stop the run before the call that would exceed it (exit 5,
the message names the budget, the finished round is kept), `--resume` with the same budget
is refused, and `--resume` with a raised one continues and finishes with the same table as
a run that had no budget."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llm_fake_server import FakeAPI, chat_replies
from refine_helpers import (ANALYSIS, KEY_VARIABLES, STOP, fits_once, revise, table_without_wall_time,  # noqa: F401
                            task)  # fits_once, task: fixtures

from polc.runtime.llm import read_exchanges

REPLIES = [ANALYSIS, revise(), ANALYSIS, STOP]  # round 0: analysis code, REVISE; round 1: analysis code, STOP
PRICE_IN, PRICE_OUT = 2.0, 8.0  # USD per million tokens of the fake model (a --prices file)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    for var in (*KEY_VARIABLES, "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))  # no user prices file


@pytest.fixture(scope="module")
def prices(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("prices") / "prices.toml"
    path.write_text(f'[models."fake"]\ninput = {PRICE_IN}\noutput = {PRICE_OUT}\n')
    return path


def refine(monkeypatch, capsys, replies, *args):
    """`polc refine ARGS -q` against a fake server answering `replies`: (exit code, stdout,
    stderr, the requests the server received)."""
    from polc.cli import main

    with FakeAPI(chat_replies(replies)) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{fake.url}/v1")
        code = main(["refine", *map(str, args), "-q"])
    out, err = capsys.readouterr()
    return code, out, err, fake.requests



@pytest.fixture(scope="module")
def reference(task, prices, tmp_path_factory):
    """The run without a budget: its exchanges and its table."""
    patch = pytest.MonkeyPatch()
    for var in KEY_VARIABLES:
        patch.delenv(var, raising=False)
    from polc.cli import main

    run = tmp_path_factory.mktemp("reference") / "run"
    try:
        with FakeAPI(chat_replies(REPLIES)) as fake:
            patch.setenv("OPENAI_BASE_URL", f"{fake.url}/v1")
            assert main(["refine", str(task), "-o", str(run), "--llm", "openai:fake", "--quick",
                         "--prices", str(prices), "-q"]) == 0
    finally:
        patch.undo()
    assert len(fake.requests) == len(REPLIES)
    return read_exchanges(run / "exchanges.jsonl"), table_without_wall_time(run)


def usd(record: dict) -> float:
    return (record["input_tokens"] * PRICE_IN + record["output_tokens"] * PRICE_OUT) / 1e6


def stopped_then_resumed(task, prices, tmp_path, monkeypatch, capsys, reference, flag, limit, raised, which):
    exchanges, ref_table = reference
    run = tmp_path / "run"
    code, out, err, requests = refine(monkeypatch, capsys, REPLIES, task, "-o", run, "--llm", "openai:fake",
                                      "--quick", "--prices", prices, flag, limit)
    assert code == 5, err
    # stopped before the third call (round 1's first): that call was never sent
    assert len(requests) == 2
    assert f"the {which} budget ({flag} " in err and "stops the run before its next LLM call" in err
    assert f"polc refine --resume {run} {flag} N" in err and "(exit 5)" in err
    config = json.loads((run / "run.json").read_text())
    assert config["budget_stop"]["budget"] == ("tokens" if which == "token" else "cost")
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == f"stopped by its {which} budget"
    assert [m["round"] for m in summary["rounds"]] == [0]  # the finished round is kept whole
    assert (run / "round_00" / "metrics.json").is_file() and (run / "round_00" / "next.pol").is_file()
    assert [r["reply"] for r in read_exchanges(run / "round_00" / "exchanges.jsonl")] == REPLIES[:2]
    assert table_without_wall_time(run)[0] == ref_table[0]
    assert "total" in out  # the table is printed for the rounds that finished

    # the same budget again: refused before anything runs (exit 2), saying how to raise it
    code, _, err, requests = refine(monkeypatch, capsys, [], "--resume", run)
    assert code == 2 and not requests
    assert f"stopped at its {which} budget" in err and f"--resume {run} {flag}" in err

    code, out, err, requests = refine(monkeypatch, capsys, REPLIES[2:], "--resume", run, flag, raised)
    assert code == 0, err
    # the resumed run sends exactly the prompts the unbounded run sent from round 1 on
    assert [[m["content"] for m in r["body"]["messages"]] for r in requests] == [
        [m["text"] for m in e["messages"]] for e in exchanges[2:]]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "the model chose STOP"
    assert table_without_wall_time(run) == ref_table
    assert [r["reply"] for r in read_exchanges(run / "exchanges.jsonl")] == REPLIES
    config = json.loads((run / "run.json").read_text())
    assert config["budget_stop"] is None
    return summary


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_a_token_budget_stops_before_the_call_then_resume_with_more_finishes(task, prices, reference, tmp_path,
                                                                            monkeypatch, capsys):
    exchanges, _ = reference
    spent = sum(e["input_tokens"] + e["output_tokens"] for e in exchanges[:2])
    # round 1's first call would take the run past this: its prompt alone is more than half of it
    limit = spent + exchanges[2]["input_tokens"] // 2
    assert limit < sum(e["input_tokens"] + e["output_tokens"] for e in exchanges[:3])
    summary = stopped_then_resumed(task, prices, tmp_path, monkeypatch, capsys, reference, "--max-tokens",
                                   limit, "1M", "token")
    assert summary["totals"]["input_tokens"] + summary["totals"]["output_tokens"] == sum(
        e["input_tokens"] + e["output_tokens"] for e in exchanges)
    assert json.loads((tmp_path / "run" / "run.json").read_text())["budget"] == {"max_tokens": 1_000_000,
                                                                                 "max_cost": None}


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_a_cost_budget_stops_before_the_call_then_resume_with_more_finishes(task, prices, reference, tmp_path,
                                                                           monkeypatch, capsys):
    exchanges, _ = reference
    spent = usd(exchanges[0]) + usd(exchanges[1])
    limit = spent + exchanges[2]["input_tokens"] * PRICE_IN / 1e6 / 2
    # the resumed run is priced from the --prices file the run was started with (run.json)
    summary = stopped_then_resumed(task, prices, tmp_path, monkeypatch, capsys, reference, "--max-cost",
                                   f"{limit:.8f}", "1.00", "cost")
    assert summary["totals"]["cost_usd"] == pytest.approx(sum(usd(e) for e in exchanges), abs=1e-6)
    assert "prices.toml" in summary["cost"]


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_a_budget_below_the_first_call_stops_before_any_request(task, prices, reference, tmp_path, monkeypatch,
                                                                capsys):
    exchanges, ref_table = reference
    run = tmp_path / "run"
    code, out, err, requests = refine(monkeypatch, capsys, REPLIES, task, "-o", run, "--llm", "openai:fake",
                                      "--quick", "--prices", prices, "--max-tokens", "100")
    assert code == 5 and not requests, err
    assert "0 tokens spent" in err and "No round was complete yet" in err
    summary = json.loads((run / "summary.json").read_text())
    assert summary["rounds"] == [] and summary["status"] == "stopped by its token budget"
    code, out, err, requests = refine(monkeypatch, capsys, REPLIES, "--resume", run, "--max-tokens", "1M")
    assert code == 0, err
    assert len(requests) == len(REPLIES) and table_without_wall_time(run) == ref_table
