"""The bundled scripted sessions (examples/car_racing/session, examples/door/session) were
written for the prompts polc sends today: when a prompt template, the task text, the initial
structure or the wording polc writes around them changes, these tests fail and say how to see
the whole difference and record the session again, so the story the replies tell is re-checked
instead of drifting. A replay matches replies by position, so without this a changed prompt
would only show as `notice:` lines in `make demo`.

They read the recordings only (no fit, no rollout): the recorded prompts must be what today's
templates produce, with every `{{placeholder}}` free to hold anything."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from polc.fmt import format_text
from polc.runtime.llm import read_exchanges
from polc.runtime.refine import context, templates
from polc.runtime.refine.record import Round
from polc.runtime.refine.work import Settings
from polc.runtime.task import load_task

ROOT = Path(__file__).resolve().parents[3]
TASKS = ("car_racing", "door")
# The templates every recorded session must show (the others appear only when a reply fails).
SHOWN = {"system", "round", "rollout", "analysis-request", "feedback", "diagnostics", "moves"}
# The number in a text polc wrote: placeholders and numbers are what may differ.
NUMBER = r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?"


def how_to_see(task: str) -> str:
    return (f"the recorded prompts of examples/{task}/session no longer match what polc sends today. See the whole "
            f"difference with `polc refine examples/{task} -o runs/check` (each differing request is a `notice:` "
            f"line and round_NN/prompt-mismatch-NNN.diff), then rewrite the replies whose story changed and record "
            f"the session again as examples/{task}/session/README.md says")


def template_pattern(name: str) -> re.Pattern:
    """Today's template `name` as a regular expression: its text literally, each placeholder any text."""
    parts = templates.PLACEHOLDER.split(templates.template(name).rstrip())
    return re.compile("".join(re.escape(p) if i % 2 == 0 else "(?:.*?)" for i, p in enumerate(parts)), re.DOTALL)


def anchors(name: str) -> list[str]:
    """The template's texts between placeholders (one line each, 15 characters or more) that no
    other template has: where it shows in a prompt, even after a part of it was reworded."""
    pieces = {ln for i, part in enumerate(templates.PLACEHOLDER.split(templates.template(name))) if i % 2 == 0
              for ln in part.splitlines() if len(ln) >= 15}
    others = "".join(templates.template(n) for n in templates.NAMES if n != name)
    return [p for p in pieces if p not in others]


def history_pattern(instance: str) -> re.Pattern:
    """One line of `context.history` as today's code writes it, its values free (the validation
    episodes' score where the round had them)."""
    validation = {"seeds": [3], "returns": [1.0], "scores": [1.0], "mean": 1.0, "std": 0.0}
    line = context.history([Round(7, False, policy_name="NAME", rollout_seeds=[1], rollout_returns=[1.0],
                                  move={"kind": "KIND"}, validation=validation)], "analysis", None, instance)
    text = re.escape(line.splitlines()[1])
    validated = re.escape(f", 1.0 ± 0.0 on the 1 validation {instance}(s)")
    assert validated in text, "context.history no longer writes the validation score as this test expects"
    for literal, free in (("7", r"\d+"), ("NAME", r'[^"]*'), (re.escape("return 1.0 on seed 1"), ".*?"),
                          (validated, rf"(?:, [^;]*? on the \d+ validation {re.escape(instance)}\(s\))?"),
                          ("KIND", r"[A-Z]+(?: \(after \d+ TEST move\(s\)\))?")):
        text = text.replace(literal, free, 1)
    return re.compile(text)


@pytest.fixture(scope="module", params=TASKS)
def session(request):
    task = request.param
    return task, read_exchanges(ROOT / "examples" / task / "session" / "exchanges.jsonl")


def test_every_recorded_prompt_is_what_todays_templates_write(session):
    task, records = session
    shown = set()
    for r in records:
        system, *turns = r["messages"]
        assert system["text"] == templates.template("system"), f"request {r['index'] + 1}, system prompt: " + \
            how_to_see(task)
        sent = turns[-1]["text"]  # the earlier turns are the requests and replies before it
        for name in templates.NAMES:
            if name != "system" and any(a in sent for a in anchors(name)):
                assert template_pattern(name).search(sent), \
                    f"request {r['index'] + 1}: prompts/{name}.md does not produce its text; " + how_to_see(task)
                shown.add(name)
    shown.add("system")
    assert SHOWN <= shown, f"no recorded prompt shows prompts/{', '.join(sorted(SHOWN - shown))}.md: " + \
        how_to_see(task)


def test_the_recorded_task_text_structure_and_history_are_todays(session):
    task, records = session
    folder = load_task(str(ROOT / "examples" / task))
    first = records[0]["messages"][-1]["text"]
    assert f"# Task\n{folder.text.rstrip()}\n\n# Round 0 " in first, f"{task}/task.md: " + how_to_see(task)
    initial = (folder.dir / "initial.pol").read_text(encoding="utf-8").rstrip()
    assert f"# Current structure\n```pol\n{initial}\n```" in first, f"{task}/initial.pol: " + how_to_see(task)
    n = Settings().validation_episodes  # recorded with the default: the validation score the model is told
    assert f"On {n} validation {folder.instance}(s) (seeds " in first, f"{n} validation episodes: " + how_to_see(task)
    line = history_pattern(folder.instance)
    rounds = [r["messages"][-1]["text"] for r in records if r["messages"][-1]["text"].startswith("# Task")]
    earlier = [ln for text in rounds for ln in text.splitlines() if ln.startswith("- Round ")]
    assert earlier, f"no recorded prompt lists earlier rounds: {how_to_see(task)}"
    for ln in earlier:
        assert line.fullmatch(ln), f"the history line {ln[:80]!r}...: " + how_to_see(task)


def test_the_replies_are_the_recorded_ones_and_their_programs_are_formatted(session):
    task, records = session
    replies = ROOT / "examples" / task / "session" / "replies"
    assert len(records) == len(list(replies.glob("*.md")))
    for r in records:
        written = (replies / f"{r['index']:03d}.md").read_text(encoding="utf-8")
        assert r["reply"] == written, f"{replies}/{r['index']:03d}.md differs from the recording: " + how_to_see(task)
        for block in re.findall(r"```pol\n(.*?)```", written, re.DOTALL):
            assert format_text(block) == block, f"{replies}/{r['index']:03d}.md: a program not as `polc fmt` writes it"


# What a prompt must never send the model to: a command it cannot run, or text it is not shown.
UNREACHABLE = ("polc analyze", "--json", "not shown", "docs/")


def test_no_recorded_prompt_points_at_what_the_model_cannot_see(session):
    task, records = session
    for r in records:
        sent = r["messages"][-1]["text"]
        for phrase in UNREACHABLE:
            assert phrase not in sent, f"request {r['index'] + 1} of {task} says {phrase!r}: " + how_to_see(task)
