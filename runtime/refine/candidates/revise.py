"""One REVISE move as a population (`--candidates K`): the move's own revision is candidate 1;
K - 1 more are asked for with the same prompt (independent completions, each recorded as
an exchange: in one request with n = K - 1 where the backend can, `Caller.many`, and one
request each for those it did not return), each is checked and repaired as a single
revision is, then all checked ones are fitted and scored
(`score.evaluate_candidates`) and the best becomes next.pol.

The round's folder keeps every candidate (`candidate-N.pol`, its repairs and check reports)
and `candidates.json`: for each, its verdict, score, per-seed scores and fit loss, which was
chosen, and the tie-breaking order. metrics.json's `candidates` says what the population
cost beyond one revision: LLM calls and environment episodes (added to the round's resets).
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple, Optional

from ...llm import Message, completes_n
from .. import replies
from ..converse import NoUsableReply, RevisionRejected, check_and_repair
from ..rundir import write_json
from .score import Candidate, best, candidate_order, evaluate_candidates


class Outcome(NamedTuple):
    """What a population decided, for the round's record (`dialogue.Exchange`)."""

    next_policy: str      # the chosen revision's policy name
    summary: dict         # metrics.json's `candidates`: asked, checked, chosen, order, calls, resets, scores
    resets: int           # the candidates' episodes (added to the round's resets)
    seconds: float        # fitting and scoring them


class Population:
    """Candidates for the REVISE `move` that ended round `k`'s conversation `messages`
    (`move_prompt`: the request that move answered; further candidates are asked it)."""

    def __init__(self, ctx: Any, k: int, call: Any, move: replies.Move, messages: list[Message],
                 move_prompt: Optional[list[Message]] = None):
        self.ctx, self.k, self.call, self.move, self.messages = ctx, k, call, move, messages
        self.s, self.dir = ctx.settings, ctx.run.round_dir(k)
        self._prompt = list(move_prompt or messages[:-1])
        self._asked: Optional[list[str]] = None  # candidates 2..K from one request, in order

    def run(self) -> Outcome:
        K = self.s.candidates
        found: list[Candidate] = []
        records: list[dict] = []
        rejected: list[RevisionRejected] = []
        calls_before = None
        for i in range(1, K + 1):
            if i == 1:
                move, conversation = self.move, self.messages
            else:
                if calls_before is None:
                    calls_before = self.call.counts.calls  # what a single revision would have cost, so far
                move, conversation, problem = self._ask(i, K)
                if problem:
                    records.append({"index": i, "verdict": problem})
                    continue
            self.ctx.ui.phase(self.k, f"checking candidate {i} of {K}")
            saved: list[str] = []
            saver = self.ctx.run.saver(self.dir, f"candidate-{i}")

            def save(attempt: int, text: str, result: Any, saver=saver, saved=saved) -> None:
                saver(attempt, text, result)
                saved.append(f"candidate-{i}.pol" if attempt == 0 else f"candidate-{i}.repair-{attempt}.pol")

            try:
                program, text, _ = check_and_repair(self.call, conversation, move.pol, f"{self.dir.name}/next.pol",
                                                    self.ctx.task.env, self.s.max_repairs, self.s.max_reply_retries,
                                                    save)
            except RevisionRejected as e:
                rejected.append(e)
                records.append({"index": i, "file": saved[-1] if saved else None, "verdict": f"rejected: {e}"})
                continue
            except NoUsableReply as e:
                records.append({"index": i, "file": saved[-1] if saved else None, "verdict": f"unusable reply: {e}"})
                continue
            found.append(Candidate(i, text, program))
            records.append({"index": i, "file": saved[-1], "verdict": "checked", "policy_name": program.typed.name})
        if calls_before is None:
            calls_before = self.call.counts.calls
        extra_calls = self.call.counts.calls - calls_before
        if not found:
            raise rejected[0] if rejected else NoUsableReply(f"none of the {K} candidate revisions was usable")
        return self._choose(found, records, extra_calls)

    def _ask(self, i: int, K: int) -> tuple[Any, list[Message], str]:
        """Candidate i: (its move, its conversation, '' or why it is not a revision)."""
        prompt = list(self._prompt)
        if self._asked is None:
            if K > 2 and completes_n(self.call.backend):
                self.ctx.ui.phase(self.k, f"LLM: candidate revisions 2 to {K} of {K}, one request")
            self._asked = self.call.many(prompt, K - 1, [f"candidate {j} of {K}" for j in range(2, K + 1)])
        if self._asked:
            text = self._asked.pop(0)
        else:
            self.ctx.ui.phase(self.k, f"LLM: candidate revision {i} of {K}")
            text = self.call(prompt, f"candidate {i} of {K}")
        conversation = prompt + [Message("model", replies.echo(text, self.call.max_reply_chars))]
        try:
            replies.verify_size(text, self.call.max_reply_chars)
            move = replies.parse_move(text, ("REVISE", "TEST", "STOP"))
        except replies.ReplyError as e:
            return None, conversation, f"unusable reply: {e}"
        if move.kind != "REVISE":
            return None, conversation, f"not a revision (MOVE: {move.kind})"
        return move, conversation, ""

    def _choose(self, found: list[Candidate], records: list[dict], extra_calls: int) -> Outcome:
        from ..work import fit_program

        K, metric = self.s.candidates, self.ctx.metric
        order = candidate_order(self.s.seed, self.k, K)
        self.ctx.ui.phase(self.k, f"fitting and scoring {len(found)} candidate(s) on "
                                   f"{len(self.ctx.seeds)} training seed(s)")
        t = time.monotonic()
        scores = evaluate_candidates(found, self.ctx.demo, self.ctx.spec, list(self.ctx.seeds), self.s,
                                     fit=fit_program)
        seconds = round(time.monotonic() - t, 2)
        chosen = best(scores, order, metric.higher_is_better)
        by_index = {c.index: c for c in found}
        # none could be scored: the first checked one in the drawn order goes on, and the next
        # round's fit sends it back for a regeneration as it would a single revision
        pick = by_index[chosen.index] if chosen else by_index[min(by_index, key=order.index)]
        score_of = {s.index: s for s in scores}
        for r in records:
            s = score_of.get(r["index"])
            if s is not None:
                r.update(verdict=s.verdict, score=None if s.score is None else round(s.score, 4),
                         scores=[round(v, 4) for v in s.scores],
                         val_loss=None if s.val_loss is None else round(s.val_loss, 6))
            r["chosen"] = r["index"] == pick.index
        resets = sum(s.episodes for s in scores)
        write_json(self.dir / "candidates.json", {
            "asked": K, "metric": metric.key, "higher_is_better": metric.higher_is_better,
            "scored_on_seeds": list(self.ctx.seeds), "seed": self.s.seed, "order": order,
            "chosen": pick.index, "candidates": records})
        self.ctx.run.write(f"{self.dir.name}/next.pol", pick.text)
        return Outcome(pick.program.typed.name,
                       {"asked": K, "checked": len(found), "chosen": pick.index, "order": order, "calls": extra_calls,
                        "resets": resets, "scores": {str(r["index"]): r.get("score") for r in records}},
                       resets, seconds)
