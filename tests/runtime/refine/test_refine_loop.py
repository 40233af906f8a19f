"""The round state machine on the toy task with an in-process fake model: a whole run, the
repair path, regeneration of an unfittable structure, TEST moves, and unusable replies."""

from __future__ import annotations

import json

import pytest

from refine_helpers import fits_once, task  # noqa: F401  (module fixtures)
from refine_helpers import (ANALYSIS, BROKEN, CODE, FAST, GOOD, STOP, UNFITTABLE, pol, py,
                            revise, run_loop, tokens)

from polc.runtime.llm import read_exchanges, render
from polc.runtime.refine.rundir import RunDir


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_a_run_revises_then_stops_and_keeps_every_file(task, tmp_path):
    loop, model = run_loop(task, tmp_path / "run", [ANALYSIS, revise(), ANALYSIS, STOP])
    assert [m.move_kind for m in loop.history] == ["REVISE", "STOP"]
    assert loop.history[-1].end == "the model chose STOP"
    run = RunDir.open(tmp_path / "run")
    r0, r1 = run.round_dir(0), run.round_dir(1)
    for name in ("policy.pol", "params.json", "trace.parquet", "analysis_1.py", "analysis_1.txt", "diagnostics.txt",
                 "exchanges.jsonl", "conversation.md", "next.pol", "metrics.json", "done"):
        assert (r0 / name).is_file(), name
    assert (r1 / "policy.pol").read_text() == GOOD == (r0 / "next.pol").read_text()
    assert "steps 50" in (r0 / "analysis_1.txt").read_text()
    assert not list(tmp_path.glob("run/**/*.tmp"))
    # what the model was shown: schema and analysis output, never the table itself
    first, second = render(model.prompts[0]), model.prompts[1][-1].text
    assert "- obs.gap : real[2] in [-3, 3]  target - pos, and -vel" in first and "```csv" not in first
    assert "steps 50" in second and "Built-in diagnostics" in second and "MOVE: TEST" in second
    assert "Earlier rounds of this run:\n- Round 0: structure \"reach\"" in model.prompts[2][1].text
    m0 = loop.history[0]
    assert f"With its declared weights (before fitting) the same structure scores {m0.declared_scores[0]:.4g}" \
        in first and "imitation learning" in first


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_calls_tokens_and_resets_are_counted_per_round(task, tmp_path):
    loop, model = run_loop(task, tmp_path / "run", [ANALYSIS, revise(), ANALYSIS, STOP])
    sent = [tokens(render(p)) for p in model.prompts]
    m0, m1 = loop.history
    assert (m0.llm["calls"], m1.llm["calls"]) == (2, 2)
    assert m0.llm["input_tokens"] + m1.llm["input_tokens"] == sum(sent)
    # one traced episode and the same seed with the declared weights (shown to the model) per round
    assert (m0.resets, m1.resets, m0.eval_episodes) == (2, 2, 2)
    records = [r for k in (0, 1) for r in read_exchanges(RunDir(tmp_path / "run").round_dir(k))]
    assert [r["index"] for r in records] == [0, 1, 2, 3]
    assert [r["input_tokens"] for r in records] == sent


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_a_revision_failing_check_is_repaired(task, tmp_path):
    loop, model = run_loop(task, tmp_path / "run", [ANALYSIS, revise(BROKEN), pol(GOOD), ANALYSIS, STOP])
    m0 = loop.history[0]
    assert m0.llm["repairs"] == 1 and m0.move["kind"] == "REVISE"
    repair_prompt = model.prompts[2][-1].text
    assert "does not pass `polc check` (repair 1 of at most 2)" in repair_prompt
    assert "E0302" in repair_prompt and "round_00/next.pol" in repair_prompt
    d = RunDir(tmp_path / "run").round_dir(0)
    assert (d / "next.pol").read_text() == GOOD and (d / "revision.pol").read_text() == BROKEN
    assert "E0302" in (d / "revision.check.txt").read_text()


def test_a_revision_still_failing_after_every_repair_ends_the_run(task, tmp_path):
    loop, _ = run_loop(task, tmp_path / "run", [ANALYSIS, revise(BROKEN), pol(BROKEN), pol(BROKEN)])
    (m0,) = loop.history
    assert m0.llm["repairs"] == 2 and "still fails polc check after 2 repairs" in m0.end
    assert not (RunDir(tmp_path / "run").round_dir(0) / "next.pol").exists()


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_an_unfittable_structure_is_regenerated(task, tmp_path):
    loop, model = run_loop(task, tmp_path / "run", [ANALYSIS, revise(UNFITTABLE), pol(GOOD), ANALYSIS, STOP])
    m1 = loop.history[1]
    assert m1.regenerations == 1 and m1.policy_name == "reach2"
    prompt = model.prompts[2][-1].text
    assert "could not fit this structure" in prompt and 'latent "shaped" is not finite' in prompt
    d = RunDir(tmp_path / "run").round_dir(1)
    assert (d / "unfittable-1.pol").read_text() == UNFITTABLE and (d / "policy.pol").read_text() == GOOD


def test_fitting_that_never_succeeds_ends_the_run(task, tmp_path):
    loop, _ = run_loop(task, tmp_path / "run", [ANALYSIS, revise(UNFITTABLE), pol(UNFITTABLE), pol(UNFITTABLE)])
    assert "could not be fitted after 2 regenerations" in loop.history[-1].end
    assert loop.history[-1].eval is None


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_a_test_move_runs_more_analysis_until_the_limit(task, tmp_path):
    more = CODE.replace('"steps"', '"rows"')
    loop, model = run_loop(task, tmp_path / "run", [ANALYSIS, "MOVE: TEST\nMore.\n" + py(more), STOP])
    (m0,) = loop.history
    assert m0.tests == 1 and [a["file"] for a in m0.analyses] == ["analysis_1.py", "analysis_2.py"]
    assert "rows 50" in model.prompts[2][-1].text
    assert "MOVE: TEST" not in model.prompts[2][-1].text  # max_tests = 1 was used up


def test_an_unusable_reply_goes_back_with_the_reason(task, tmp_path):
    loop, model = run_loop(task, tmp_path / "run", ["Let me think about it.", ANALYSIS, STOP])
    (m0,) = loop.history
    assert m0.llm["reply_retries"] == 1 and m0.move["kind"] == "STOP"
    assert "Your reply could not be used: it has no ```python block" in model.prompts[1][-1].text


def test_replies_that_stay_unusable_end_the_run(task, tmp_path):
    loop, _ = run_loop(task, tmp_path / "run", [ANALYSIS, "no idea", "still no idea"])
    assert "no usable reply for move in 2 tries" in loop.history[-1].end


def test_a_revision_in_the_last_round_is_fitted_and_evaluated(task, tmp_path):
    from dataclasses import replace

    loop, _ = run_loop(task, tmp_path / "run", [ANALYSIS, revise()], settings=replace(FAST, rounds=1))
    final = loop.history[-1]
    assert final.final and final.policy_name == "reach2" and final.eval is not None and final.llm["calls"] == 0
    # its rollout is shown to no one, but it and the declared weights' choose the params (keep-better): resets
    assert final.resets == 2 and final.eval_episodes == 2 and final.keep["kept"] in ("fitted", "declared")
    assert final.closed_loop["seeds"] == final.rollout_seeds
    metrics = json.loads((RunDir(tmp_path / "run").round_dir(1) / "metrics.json").read_text())
    assert metrics["end"] == "the last revision was fitted and evaluated"
    for k, m in enumerate(loop.history):  # checked here, on a run this test makes anyway
        assert_trace_records_what_polc_rollout_records(RunDir(tmp_path / "run").round_dir(k), k, m, loop.seeds)


def assert_trace_records_what_polc_rollout_records(d, k: int, m: dict, seeds: list) -> None:
    """A round's trace metadata comes from the builder `polc rollout` uses (`trace.meta.TraceMeta`):
    the structure's hash, the kind of its seeds and the environment as `polc rollout` records
    them, and which round made it."""
    from polc.runtime.cli import compile_policy
    from polc.runtime.envs import toy
    from polc.runtime.io.params import load_params, params_sha256
    from polc.runtime.io.table import read_table

    meta = read_table(str(d / "trace.parquet"), columns=[]).metadata
    assert sorted(meta) == ["actions", "env", "kind", "noise_seed", "params", "polc_version", "policy", "refine",
                            "seed_kind", "seeds"]
    assert meta["policy"]["structure_sha256"] == m.structure_sha256
    assert meta["policy"]["file"] == "policy.pol" and meta["policy"]["source"] == (d / "policy.pol").read_text()
    assert meta["env"] == {"name": "toy_reach", "id": toy.ENV_ID, "version": "1", "max_steps": 50}
    assert meta["seeds"] == seeds and meta["seed_kind"] == "training"
    assert (meta["actions"], meta["noise_seed"], meta["refine"]) == ("mean", None, {"round": k})
    saved = load_params(str(d / "params.json"), compile_policy(str(d / "policy.pol")))  # the weights kept
    assert meta["params"]["file"] == "params.json" and meta["params"]["sha256"] == params_sha256(saved)


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
@pytest.mark.parametrize("keep", ["best", "fitted"])
def test_every_round_chooses_the_weights_as_polc_fit_does(task, tmp_path, keep):
    """Without feedback nothing is shown to the model, yet keep-better still rolls out the declared
    weights on the training seeds to choose (2 resets a round); --keep fitted skips it."""
    from dataclasses import replace

    loop, _ = run_loop(task, tmp_path / "run", [revise()], settings=replace(FAST, rounds=1, keep=keep, feedback="none"))
    for m in loop.history:
        if keep == "fitted":
            assert m.keep is None and m.resets == 0 and m.eval_episodes == 3
        else:  # the toy's initial gains are too low: the fit is better and is kept
            assert m.keep["kept"] == "fitted" and m.keep["reason"].startswith("the fit is no worse in closed loop")
            assert m.resets == 2 and m.eval_episodes == 2 and m.closed_loop["seeds"] == m.rollout_seeds


def test_with_declared_puts_back_the_declared_weights_and_records_the_fit():
    import jax

    import polc
    from polc.runtime.envs import toy
    from polc.runtime.il.closed_loop import Choice
    from polc.runtime.refine.work import Fitted, with_declared

    policy = polc.loads(toy.reach_policy(), "reach.pol", analyze=False).compile()
    params = policy.init(jax.random.PRNGKey(0))
    fitted = Fitted(policy, {**params, "kp": params["kp"] * 0 - 3.0}, {"loss": "x"}, {"kp": 0.05})
    kept = with_declared(fitted, Choice("declared", "worse"))
    assert kept.weights["kp"] == pytest.approx(toy.KP) and kept.info["fitted_weights"] == {"kp": 0.05}
    assert kept.info["keep"] == {"kept": "declared", "reason": "worse"} and kept.info["loss"] == "x"


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_a_recorded_run_replays_strictly_to_the_same_results(task, tmp_path):
    from polc.runtime.refine.loop import Loop
    from polc.runtime.task import load_task
    from polc.runtime.refine.scripted import Choice
    from refine_helpers import FakeUI

    first, _ = run_loop(task, tmp_path / "first", [ANALYSIS, revise(), ANALYSIS, STOP])
    spec = f"replay:{tmp_path / 'first'}"
    second = tmp_path / "a" / "much-longer-path-for-the-second-run"  # prompts must not depend on it
    run = RunDir.create(second, {})
    again = Loop(run, load_task(str(task)), FAST, Choice(spec, "replay", str(tmp_path / "first")), FakeUI())
    again.run()
    assert [m.llm for m in again.history] == [m.llm for m in first.history]
    assert [m.eval for m in again.history] == [m.eval for m in first.history]
    assert (second / "exchanges.jsonl").read_text().count("\n") == 4


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_a_round_with_gemini_against_a_fake_server_on_localhost(task, tmp_path, monkeypatch):
    """The whole path of a real model: SDK request, reply text, the provider's token counts."""
    from dataclasses import replace

    from refine_helpers import FakeUI
    from llm_fake_server import FakeAPI
    from test_llm_gemini import ok_body

    from polc.runtime.refine.loop import Loop
    from polc.runtime.task import load_task
    from polc.runtime.refine.scripted import choose

    script = [(200, ok_body(ANALYSIS, prompt_tokens=1234, out_tokens=56), 0),
              (200, ok_body(STOP, prompt_tokens=2345, out_tokens=7, thoughts=100), 0)]
    with FakeAPI(script) as server:
        monkeypatch.setenv("GEMINI_API_KEY", "fake-key-for-a-local-server")
        monkeypatch.setenv("POLC_GEMINI_BASE_URL", server.url)
        choice = choose(None, task)
        assert choice.spec == "gemini:gemini-2.5-flash"
        loop = Loop(RunDir.create(tmp_path / "run", {}), load_task(str(task)), replace(FAST, rounds=1), choice,
                    FakeUI())
        loop.run()
    (m0,) = loop.history
    assert m0.move["kind"] == "STOP"
    assert (m0.llm["calls"], m0.llm["input_tokens"], m0.llm["output_tokens"]) == (2, 3579, 163)
    first = server.requests[0]
    assert "gemini-2.5-flash:generateContent" in first["path"]
    assert "Pol in brief" in json.dumps(first["body"]["systemInstruction"])
    assert "- obs.gap : real[2]" in json.dumps(first["body"]["contents"])


def test_the_diagnostics_text_does_not_depend_on_where_the_run_is(task, tmp_path):
    import shutil

    import polc
    from polc.runtime.io.params import load_params
    from polc.runtime.refine.loop import builtin_diagnostics
    from polc.runtime.refine.work import Fitted

    run_loop(task, tmp_path / "run", [ANALYSIS, STOP])
    d = RunDir(tmp_path / "run").round_dir(0)
    program = polc.loads((d / "policy.pol").read_text(), "round_00/policy.pol")
    policy = program.compile()
    fitted = Fitted(policy, load_params(str(d / "params.json"), policy), {}, {})
    deep = tmp_path / ("a-much-longer-directory-name" * 3) / "round_00"
    deep.mkdir(parents=True)
    shutil.copy(d / "trace.parquet", deep / "trace.parquet")
    texts = [builtin_diagnostics(program, str(p / "trace.parquet"), fitted, str(task / "demo.parquet"))
             for p in (d, deep)]
    assert texts[0] == texts[1]
    assert texts[0].rstrip() == (d / "diagnostics.txt").read_text().rstrip()
    assert texts[0].startswith('Diagnostics of policy reach on trace.parquet:') and "demo.parquet" in texts[0]
    assert str(tmp_path) not in texts[0]


def test_the_model_is_told_when_the_declared_weights_were_kept():
    import types

    from polc.runtime.envs.metric import RETURN
    from polc.runtime.refine.dialogue import Dialogue

    from polc.runtime.refine.record import Round

    ctx = types.SimpleNamespace(metric=RETURN, spec=types.SimpleNamespace(schema=types.SimpleNamespace(name="toy")),
                                task=types.SimpleNamespace(instance="track"))
    m = Round(0, False, rollout_seeds=[1, 2], rollout_returns=[500.0, 540.0], declared_scores=[500.0, 540.0],
              closed_loop={"fitted": -83.0}, keep={"kept": "declared", "reason": "worse"})
    text = Dialogue._closed_loop_text(types.SimpleNamespace(m=m, ctx=ctx))
    assert text.startswith("With its declared weights (before fitting) the same structure scores 520 on average on "
                           "these tracks, fitted -83, so imitation learning made this structure WORSE")
    assert text.endswith("; the declared weights were kept, and the trace and the scores above are theirs")
    m.keep = None
    text = Dialogue._closed_loop_text(types.SimpleNamespace(m=m, ctx=ctx))
    assert "fitted 520, so imitation learning did not make it worse" in text and "kept" not in text

