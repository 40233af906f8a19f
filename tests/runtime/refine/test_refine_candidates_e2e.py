"""`--candidates 3` end to end: `polc refine TASK --llm openai:fake --candidates 3` against a
fake Chat Completions server on 127.0.0.1 (the real openai SDK, the real CLI) on the toy
task. The REVISE move's population is three different structures: one without damping, one
that cannot be fitted, the PD expert's. Every candidate is recorded in the round's folder
with its verdict and scores, the best scored one is kept, the extra calls are counted; and
replaying the run (`--llm replay:RUN`, strict) reproduces its table, candidates and seeds.
Candidates 2 and 3 are asked in one request with n = 2: a server that ignores n (the
first run) gets the third asked on its own; one that answers n gives both at once."""

from __future__ import annotations

import json

import pytest

from llm_fake_server import FakeAPI, chat_replies
from refine_helpers import (ANALYSIS, GOOD, KEY_VARIABLES, STOP, UNFITTABLE, fits_once, revise,  # noqa: F401
                            table_without_wall_time, task)  # fits_once, task: fixtures

from polc.runtime.llm import read_exchanges

PONLY = '''policy ponly "P control of the toy point mass, no damping"
obs gap : real[2] in [-3, 3] "target - pos, and -vel"
obs vel : real in [-3, 3]   "velocity"
weight kp : real >= 0 = 1.0 "push per unit of distance to the target"
weight s  : real in [0.01, 1] = 0.2 "noise std"
latent err = gap[0] "distance to go"
action push : real in [-1, 1] = kp * err ~ normal(std = s)
'''
# round 0: analysis code, then REVISE (candidate 1) and candidates 2 and 3 asked with the same
# prompt; round 1 (the chosen revision): analysis code, STOP
REPLIES = [ANALYSIS, revise(PONLY), revise(UNFITTABLE), revise(GOOD), ANALYSIS, STOP]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    for var in (*KEY_VARIABLES, "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))


def timeless(value):
    """`value` (metrics JSON) without its wall times ("seconds", "phases")."""
    if isinstance(value, dict):
        return {k: timeless(v) for k, v in value.items() if k not in ("seconds", "phases")}
    if isinstance(value, list):
        return [timeless(v) for v in value]
    return value



@pytest.fixture(scope="module")
def population_run(task, tmp_path_factory):
    """The run with --candidates 3: (its directory, the requests the server received, stdout)."""
    from polc.cli import main

    patch = pytest.MonkeyPatch()
    for var in KEY_VARIABLES:
        patch.delenv(var, raising=False)
    run = tmp_path_factory.mktemp("population") / "run"
    try:
        with FakeAPI(chat_replies(REPLIES)) as fake:
            patch.setenv("OPENAI_BASE_URL", f"{fake.url}/v1")
            code = main(["refine", str(task), "-o", str(run), "--llm", "openai:fake", "--candidates", "3",
                         "--quick", "-q"])
    finally:
        patch.undo()
    assert code == 0
    return run, fake.requests


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_three_candidates_are_recorded_and_the_best_is_kept(population_run):
    run, requests = population_run
    assert len(requests) == len(REPLIES)
    # candidates 2 and 3 are asked with the prompt that made candidate 1
    move_prompt = requests[1]["body"]["messages"]
    assert requests[2]["body"]["messages"] == move_prompt and requests[3]["body"]["messages"] == move_prompt
    d = run / "round_00"
    record = json.loads((d / "candidates.json").read_text())
    assert record["asked"] == 3 and record["metric"] == "return" and record["higher_is_better"]
    assert sorted(record["order"]) == [1, 2, 3]
    by_index = {c["index"]: c for c in record["candidates"]}
    assert sorted(by_index) == [1, 2, 3]
    for i, text in ((1, PONLY), (2, UNFITTABLE), (3, GOOD)):  # every candidate's program is kept
        assert (d / f"candidate-{i}.pol").read_text().strip() == text.strip()
        assert by_index[i]["file"] == f"candidate-{i}.pol"
    assert by_index[2]["verdict"].startswith("unfittable") and by_index[2]["score"] is None
    scored = {i: c["score"] for i, c in by_index.items() if c["verdict"] == "scored"}
    assert sorted(scored) == [1, 3]
    for i in scored:
        assert len(by_index[i]["scores"]) == len(record["scored_on_seeds"]) and by_index[i]["val_loss"] is not None
    assert scored[1] != scored[3]
    best = max(scored, key=scored.get)
    assert best == 3  # the PD structure beats the one without damping on the training seeds
    assert record["chosen"] == best and [c["chosen"] for c in record["candidates"]].count(True) == 1
    assert by_index[best]["chosen"]
    # the chosen revision is the next round's structure
    assert (d / "next.pol").read_text() == (d / f"candidate-{best}.pol").read_text()
    summary = json.loads((run / "summary.json").read_text())
    r0, r1 = summary["rounds"]
    chosen_name = {1: "ponly", 3: "reach2"}[best]
    assert r0["next_policy"] == chosen_name and r1["policy_name"] == chosen_name
    # what the population cost beyond one revision: two calls, the scored candidates' episodes
    pop = r0["candidates"]
    assert (pop["asked"], pop["checked"], pop["chosen"], pop["calls"]) == (3, 3, best, 2)
    assert pop["resets"] == 2 * len(record["scored_on_seeds"])
    assert r0["llm"]["calls"] == 4 and r1["llm"]["calls"] == 2
    seeds = json.loads((run / "seeds.json").read_text())
    assert seeds["candidate_order"] == {"0": record["order"]}
    assert seeds["candidates_scored_on"] == record["scored_on_seeds"] == seeds["rollout"]
    purposes = [e["purpose"] for e in read_exchanges(run / "exchanges.jsonl")]
    assert purposes[2:4] == ["candidate 2 of 3", "candidate 3 of 3"]


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_replaying_the_population_run_gives_the_same_table(population_run, task, tmp_path, capsys):
    from polc.cli import main

    run, _ = population_run
    again = tmp_path / "replayed"
    code = main(["refine", str(task), "-o", str(again), "--llm", f"replay:{run}", "--candidates", "3",
                 "--quick", "-q"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert table_without_wall_time(again) == table_without_wall_time(run)
    assert json.loads((again / "round_00" / "candidates.json").read_text()) == json.loads(
        (run / "round_00" / "candidates.json").read_text())
    assert json.loads((again / "seeds.json").read_text()) == json.loads((run / "seeds.json").read_text())
    # every round's metrics but wall times: fits, weights, scores, candidates, tokens
    assert [timeless(m) for m in json.loads((again / "summary.json").read_text())["rounds"]] == [
        timeless(m) for m in json.loads((run / "summary.json").read_text())["rounds"]]
    replayed = read_exchanges(again / "exchanges.jsonl")
    assert [e["model"] for e in replayed] == ["openai:fake"] * len(REPLIES)  # priced as the recorded model
    assert [e["reply"] for e in replayed] == REPLIES


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_a_server_answering_n_gives_candidates_2_and_3_in_one_request(population_run, task, tmp_path, capsys,
                                                                      monkeypatch):
    """The same population with the server returning both extra candidates for one request
    with n = 2: the same candidates, scores and choice; 4 replies in round 0 from 3 requests;
    and a strict replay gives the group back from its recording, with the same table."""
    from llm_fake_server import chat_choices
    from polc.cli import main

    one_at_a_time, requests_then = population_run
    assert requests_then[2]["body"]["n"] == 2 and "n" not in requests_then[3]["body"]  # that server ignored n
    script = chat_replies(REPLIES[:2]) + [chat_choices(REPLIES[2:4])] + chat_replies(REPLIES[4:])
    run = tmp_path / "run"
    with FakeAPI(script) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{fake.url}/v1")
        code = main(["refine", str(task), "-o", str(run), "--llm", "openai:fake", "--candidates", "3",
                     "--quick", "-q"])
    assert code == 0, capsys.readouterr().err
    assert len(fake.requests) == 5 and fake.requests[2]["body"]["n"] == 2
    assert json.loads((run / "round_00" / "candidates.json").read_text()) == json.loads(
        (one_at_a_time / "round_00" / "candidates.json").read_text())
    r0 = json.loads((run / "round_00" / "metrics.json").read_text())
    assert (r0["llm"]["calls"], r0["llm"]["requests"], r0["candidates"]["calls"]) == (4, 3, 2)
    records = read_exchanges(run / "exchanges.jsonl")
    assert [(r.get("choice"), r.get("choices")) for r in records[2:4]] == [(0, 2), (1, 2)]
    assert records[3]["input_tokens"] == 0  # the prompt was sent, and paid, once

    again = tmp_path / "replayed"
    assert main(["refine", str(task), "-o", str(again), "--llm", f"replay:{run}", "--candidates", "3",
                 "--quick", "-q"]) == 0, capsys.readouterr().err
    assert table_without_wall_time(again) == table_without_wall_time(run)
    assert [timeless(m) for m in json.loads((again / "summary.json").read_text())["rounds"]] == [
        timeless(m) for m in json.loads((run / "summary.json").read_text())["rounds"]]
