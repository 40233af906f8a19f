"""`polc generate` and `polc refine` (registered by `polc.runtime.commands`). `polc refine`
parses its arguments into a `Request` (or `Overrides` with --resume) for the library,
`entry.start` / `entry.resume`, and prints the `Outcome`; the run itself is entry.py's.

    polc generate TASK.md --env car_racing -o initial.pol [--llm SPEC]
    polc refine TASK_DIR [--rounds 6] [--llm SPEC] [--llm-option KEY=VALUE]... [--feedback analysis|table|none]
                [-o runs/NAME] [--quick] [--max-tokens N] [--max-cost USD] [--prices FILE]
                [--candidates K [--ray auto|ADDRESS]] [--seed N] [--recovery steer=0.3 [--expert FILE.py:FN]]
    polc refine --resume runs/NAME [--max-tokens N] [--max-cost USD]

Without --llm a run uses the first provider whose key is set: Gemini (gemini-2.5-flash) with
GEMINI_API_KEY or GOOGLE_API_KEY, OpenAI (gpt-5-mini) with OPENAI_API_KEY, Anthropic
(claude-sonnet-4-5) with ANTHROPIC_API_KEY; with none, the task's bundled scripted session,
saying so plainly. SPEC is
gemini:MODEL, openai:MODEL (OPENAI_API_KEY, OPENAI_BASE_URL: any OpenAI-compatible
server), anthropic:MODEL (ANTHROPIC_API_KEY), replay:DIR or manual:DIR (docs/llm.md).
Nothing heavy is imported until a command runs.

Each LLM call has one wall-clock limit over all its attempts, `--llm-timeout SECONDS`
(default 600, `polc.runtime.llm.DEFAULT_TIMEOUT`); a call that exceeds it (a provider that
never answers, or trickles its reply) stops the run, which `--resume` continues.

Budgets (budget.py): `--max-tokens` and `--max-cost` stop the run before a call that would
exceed them; the cost comes from the price table (polc.runtime.llm.prices, `--prices FILE`).
`--candidates K` asks for K revisions per REVISE move and keeps the best (candidates/);
with `--ray auto|ADDRESS` (or $POLC_RAY_ADDRESS; `Settings.ray_address`) a round's candidates are fitted and scored on
that Ray cluster, one task each, with the local scores (polc.runtime.refine.candidates.on_ray).

Exit codes: 0 the run finished (STOP, its last round, or already finished); 1 it stopped
on an error to fix (the provider, the task, the sandbox; `--resume` continues it); 2 bad
usage (a bad prices file, a budget resumed unraised); 4 (EXIT_UNUSABLE) it ended because the
model's replies could not be used (no usable reply, or programs that never passed `polc
check` or never fitted within the allowed retries): its rounds up to then, summary and
table are written as for a finished run; 5 (EXIT_BUDGET) a budget stopped it before a call:
the complete rounds, summary and table are written, and `--resume` with a larger budget
continues it. 130 interrupted. `polc generate` exits 4 on unusable replies too.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

from ..cli import ENV_HELP, UsageError
from .entry import EXIT_BUDGET, EXIT_UNUSABLE  # the exit codes are the library's
from .work import DEFAULT_VALIDATION_EPISODES


def _fail(message: str) -> int:
    print(f"polc: {message}", file=sys.stderr)
    return 1


# ---- refine ----------------------------------------------------------------------------


def cmd_refine(args: argparse.Namespace) -> int:
    """`polc refine`: the arguments as a `Request` (or `Overrides` with --resume) for the library
    (entry.py), and its `Outcome` printed."""
    from ..cluster.flags import ray_address
    from .entry import Overrides, Request, resume, start

    budget = dict(max_tokens=args.max_tokens, max_cost=args.max_cost, prices=args.prices,
                  ray_address=ray_address(args), quiet=args.quiet, quiet_scores=args.quiet_scores)
    if args.resume:
        outcome = resume(args.resume, Overrides(llm_timeout=args.llm_timeout, max_reply_chars=args.max_reply_chars,
                                                **budget))
    else:
        command = "polc " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:2] == ["refine"] else None
        outcome = start(Request(args.task, _settings(args), args.env, args.llm, tuple(args.llm_option or ()),
                                args.output, command=command, **budget))
    for line in outcome.stdout:
        print(line)
    for line in outcome.stderr:
        print(line, file=sys.stderr)
    return outcome.code


def _settings(args: argparse.Namespace) -> Any:
    """The settings polc refine's flags ask for (--quick applied)."""
    from .work import Settings, quick

    try:
        settings = Settings(rounds=args.rounds, feedback=args.feedback, rollout_episodes=args.rollout_episodes,
                            eval_episodes=args.eval_episodes, validation_episodes=args.validation_episodes,
                            candidates=args.candidates, seed=args.seed, recovery=args.recovery or "",
                            expert=args.expert or "",
                            **({} if args.llm_timeout is None else {"llm_timeout": args.llm_timeout}),
                            **({} if args.max_reply_chars is None else {"max_reply_chars": args.max_reply_chars}))
    except ValueError as e:
        raise UsageError(f"polc: {e}.") from None
    return quick(settings) if args.quick else settings


# ---- generate --------------------------------------------------------------------------


def cmd_generate(args: argparse.Namespace) -> int:
    from ..llm import LLMError, check_timeout
    from .converse import Caller, NoUsableReply, RevisionRejected
    from .entry import with_options
    from ..task import Task, front_matter
    from .loop import generate
    from .rundir import write_atomic
    from .scripted import choose, open_backend
    from .work import environment, Settings

    path = Path(args.task)
    if not path.is_file():
        raise UsageError(f"polc: cannot read '{args.task}': no such file.")
    raw = path.read_text(encoding="utf-8")
    header, text = front_matter(raw)
    env = args.env or header.get("env")
    if not env:
        raise UsageError("polc: generate needs --env NAME (e.g. --env car_racing).")
    try:
        timeout = check_timeout(args.llm_timeout) if args.llm_timeout is not None else Settings().llm_timeout
        max_reply = Settings(**({} if args.max_reply_chars is None else {"max_reply_chars": args.max_reply_chars}))
    except ValueError as e:
        raise UsageError(f"polc: {e}.") from None
    try:
        if args.llm is None:
            from .scripted import has_key

            if not has_key():
                raise LLMError("polc generate needs a model: set GEMINI_API_KEY (or GOOGLE_API_KEY, OPENAI_API_KEY, "
                               "ANTHROPIC_API_KEY), or pass "
                               "--llm gemini:MODEL, openai:MODEL, anthropic:MODEL, replay:DIR or manual:DIR.")
        choice = with_options(choose(args.llm, path.parent), args.llm_option)
        spec = environment(env, Settings())
        record = Path(args.output).with_suffix(".generate")
        record.mkdir(parents=True, exist_ok=True)
        call = Caller(open_backend(choice, timeout=timeout), record, 0,
                      lambda s: print(f"notice: {s}", file=sys.stderr), max_reply_chars=max_reply.max_reply_chars)
        task = Task(path.parent, text, env, path, None)

        def save(attempt: int, pol: str, result: Any) -> None:
            name = "generated.pol" if attempt == 0 else f"generated.repair-{attempt}.pol"
            write_atomic(record / name, pol)
            if result.report:
                write_atomic(record / (name[:-4] + ".check.txt"), result.report)

        program, pol = generate(call, task, spec, Settings(max_repairs=args.max_repairs), str(args.output), save)
    except KeyError as e:
        raise UsageError(f"polc: {e.args[0]}.") from None
    except LLMError as e:
        return _fail(str(e))
    except (NoUsableReply, RevisionRejected) as e:
        _fail(f"{e}; nothing written to {args.output} (the exchanges are in {record}).")
        return EXIT_UNUSABLE
    write_atomic(args.output, pol)
    c = call.counts
    print(f"wrote {args.output}: policy \"{program.typed.name}\", {len(program.typed.nodes)} nodes, "
          f"{len(program.typed.weights)} weights; {c.calls} LLM call(s) ({c.repairs} repair(s)), "
          f"{c.input_tokens:,} input / {c.output_tokens:,} output tokens; exchanges in {record}", file=sys.stderr)
    return 0


# ---- registration --------------------------------------------------------------------


def register(sub: Any) -> None:
    """Add `generate` and `refine` to the `polc` subcommands."""
    c = sub.add_parser("generate", help="ask an LLM for an initial structured policy (checked and repaired)")
    c.add_argument("task", help="the task description (Markdown), e.g. examples/car_racing/task.md")
    c.add_argument("--env", help=ENV_HELP + " (default: the task's `env:` header)")
    c.add_argument("-o", "--output", required=True, help="the .pol file to write")
    c.add_argument("--llm", help="gemini:MODEL, openai:MODEL, anthropic:MODEL, replay:DIR or manual:DIR "
                                 "(default: gemini with a key; docs/llm.md)")
    c.add_argument("--max-repairs", type=int, default=5, help="repairs of a program failing polc check")
    _timeout_flag(c)
    c.set_defaults(func=cmd_generate)

    c = sub.add_parser("refine", help="the refinement loop: fit, roll out, analyse with an LLM, revise",
                       epilog="exit codes: 0 finished; 1 stopped on an error (continue with --resume); 2 bad "
                              f"usage; {EXIT_UNUSABLE} ended because the model's replies could not be used; "
                              f"{EXIT_BUDGET} a budget stopped it (--resume with a larger one); 130 interrupted")
    c.add_argument("task", nargs="?", help="task folder with task.md, demo.parquet and initial.pol")
    c.add_argument("--rounds", type=int, default=6, help="rounds that end in a move of the model")
    c.add_argument("--llm", help="gemini:MODEL, openai:MODEL (OPENAI_BASE_URL: any OpenAI-compatible server), "
                                 "anthropic:MODEL, replay:DIR (a recorded run, strictly) or manual:DIR (you write "
                                 "each reply as DIR/replies/NNN.md) (default: gemini-2.5-flash with GEMINI_API_KEY, "
                                 "gpt-5-mini with OPENAI_API_KEY, claude-sonnet-4-5 with ANTHROPIC_API_KEY, "
                                 "else the task's scripted session)")
    c.add_argument("--feedback", choices=("analysis", "table", "none"), default="analysis",
                   help="what the model sees of a rollout: its own analysis, the whole table, or nothing")
    c.add_argument("-o", "--output", help="the run directory (default: runs/<task>-<time>)")
    c.add_argument("--resume", metavar="RUNDIR", help="continue an interrupted run")
    c.add_argument("--quick", action="store_true", help="2 rounds, episodes cut at 300 steps (a shorter limit of the environment kept), 3 eval seeds, at most 2 validation seeds, a short fit")
    c.add_argument("--rollout-episodes", type=int, default=2, help="traced episodes per round (training seeds)")
    c.add_argument("--eval-episodes", type=int, default=10, help="evaluation episodes per round (unseen seeds)")
    c.add_argument("--validation-episodes", type=int, default=DEFAULT_VALIDATION_EPISODES, metavar="N",
                   help="untraced episodes per round on N validation seeds (the training range's next seeds: neither "
                        "the demonstration's, the traced training seeds nor the evaluation's); the model is told their "
                        f"mean, spread and worst two; counted as resets (default {DEFAULT_VALIDATION_EPISODES}; 0: off)")
    c.add_argument("--env", help=ENV_HELP + " (default: the task's `env:` header, else the folder name)")
    c.add_argument("-q", "--quiet", action="store_true", help="no progress line")
    c.add_argument("--quiet-scores", action="store_true",
                   help="print nothing the model may not see: no unseen-seed score or success rate on the console "
                        "(for a blind --llm manual: session; summary.json keeps them)")
    c.add_argument("--max-tokens", metavar="N", help="stop before a call that would take the run past N tokens "
                                                     "(input + output; 400k, 1.5M)")
    c.add_argument("--max-cost", metavar="USD", help="stop before a call that would take the run past USD dollars "
                                                     "(needs the model's price)")
    c.add_argument("--prices", metavar="FILE", help="a prices TOML overriding polc's table (default: "
                                                    "~/.config/polc/prices.toml when it exists; docs/llm.md)")
    c.add_argument("--candidates", type=int, default=1, metavar="K",
                   help="revisions asked for per REVISE move; each is checked, fitted and scored, the best kept")
    c.add_argument("--seed", type=int, default=0, help="the fit's seed and the candidates' tie-breaking order")
    c.add_argument("--recovery", metavar="SIGMA|NAME=SIGMA,...",
                   help="record DART recovery laps once (the expert on the demonstration's seeds, its executed actions "
                        "perturbed as `polc demos --perturb` does, e.g. steer=0.3) into the run directory; each round "
                        "fits with and without them and keeps the better on the training seeds (default: the task's "
                        "`recovery:` header, else off)")
    c.add_argument("--expert", metavar="FILE.py:FUNCTION",
                   help="with --recovery: the expert that records them (default: the environment's own)")
    from ..cluster.flags import add_ray_flags

    add_ray_flags(c, workers=False)  # with --candidates K >= 2: one Ray task per candidate
    _timeout_flag(c)
    c.set_defaults(func=cmd_refine)


def _timeout_flag(c: Any) -> None:
    c.add_argument("--llm-option", action="append", metavar="KEY=VALUE",
                   help="a request parameter of openai:/anthropic: models, repeatable: openai takes "
                        "temperature, top_p, seed, max_completion_tokens, reasoning_effort; anthropic max_tokens")
    c.add_argument("--llm-timeout", type=float, metavar="SECONDS",
                   help="wall-clock limit of one LLM call over all its attempts (default 600); a call "
                        "that exceeds it stops the run")
    c.add_argument("--max-reply-chars", type=int, metavar="N",
                   help="the longest usable model reply (default 100000 characters): a longer one is recorded "
                        "cut, sent back as unusable with the reason, and not repeated whole")
