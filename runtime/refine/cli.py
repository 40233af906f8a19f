"""`polc generate` and `polc refine` (registered by `polc.runtime.commands`).

    polc generate TASK.md --env car_racing -o initial.pol [--llm SPEC]
    polc refine TASK_DIR [--rounds 6] [--llm SPEC] [--llm-option KEY=VALUE]... [--feedback analysis|table|none]
                [-o runs/NAME] [--quick] [--max-tokens N] [--max-cost USD] [--prices FILE]
                [--candidates K [--ray auto|ADDRESS]] [--seed N]
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
`--candidates K` asks for K revisions per REVISE move and keeps the best (population.py);
with `--ray auto|ADDRESS` (or $POLC_RAY_ADDRESS) a round's candidates are fitted and scored on
that Ray cluster, one task each, with the local scores (polc.runtime.cluster.candidates).

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
import os
import shlex
import sys
from pathlib import Path
from typing import Any, Optional

from ..cli import ENV_HELP, UsageError, no_such_run, polc_command, sigterm_interrupts


EXIT_UNUSABLE = 4  # the run ended because the model's replies could not be used
EXIT_BUDGET = 5  # a budget (--max-tokens, --max-cost) stopped the run before a call; --resume with a larger one


def _fail(message: str) -> int:
    print(f"polc: {message}", file=sys.stderr)
    return 1


def scripted_notice(choice: Any, task_dir: str) -> str:
    from .scripted import DEFAULT_MODEL

    return (f"The LLM replies in this run are a SCRIPTED RECORDING ({choice.source}/exchanges.jsonl), written "
            "by hand for this task and played back in order: no model is called. The analyses, checks, fits, "
            "rollouts and returns are computed now, for real. To refine with a real model, set GEMINI_API_KEY "
            f"(or OPENAI_API_KEY, ANTHROPIC_API_KEY) and run `polc refine {task_dir}` (or add --llm "
            f"gemini:{DEFAULT_MODEL}, openai:MODEL, anthropic:MODEL).")


# ---- refine ----------------------------------------------------------------------------


def _new_run(args: argparse.Namespace):
    from .budget import Budget
    from .loop import load_task, write_config
    from ..io.lock import lock_directory
    from .rundir import RunDir, RunDirError, default_name
    from .scripted import choose
    from .work import Settings, quick

    if not args.task:
        raise UsageError("polc: refine needs a task folder (e.g. examples/car_racing), or --resume RUNDIR.")
    task = load_task(args.task, args.env)
    try:
        settings = Settings(rounds=args.rounds, feedback=args.feedback, rollout_episodes=args.rollout_episodes,
                            eval_episodes=args.eval_episodes, validation_episodes=args.validation_episodes,
                            candidates=args.candidates, seed=args.seed,
                            **({} if args.llm_timeout is None else {"llm_timeout": args.llm_timeout}),
                            **({} if args.max_reply_chars is None else {"max_reply_chars": args.max_reply_chars}))
    except ValueError as e:
        raise UsageError(f"polc: {e}.") from None
    if args.quick:
        settings = quick(settings)
    choice = _with_options(choose(args.llm, task.dir), args.llm_option)
    if choice.scripted:
        _verify_session(choice, settings)
    prices = _prices(args, choice)
    budget = _budget(args, Budget(), choice, prices)
    out = args.output or str(Path("runs") / default_name(task.dir))
    command = "polc " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:2] == ["refine"] else None
    try:
        RunDir.verify_new(Path(out))
        lock = lock_directory(out, "polc refine")
    except RunDirError as e:
        raise UsageError(f"polc: {e}") from None
    try:
        run = RunDir.create(out, write_config(settings, choice, task, command or f"polc refine {args.task}"))
    except RunDirError as e:
        lock.release()
        raise UsageError(f"polc: {e}") from None
    run.lock = lock
    run.update_config(llm_source=choice.source, **({"llm_options": dict(choice.options)} if choice.options else {}),
                      budget=budget.to_json(), **({"prices": list(prices.sources)} if prices is not None else {}),
                      **({"prices_file": str(Path(args.prices).resolve())} if getattr(args, "prices", None) else {}))
    return run, task, settings, choice


def _costs(args: argparse.Namespace, run: Any, choice: Any) -> tuple[Any, Any]:
    """(price table, budget) of a run: a new run's as `_new_run` checked and saved them; a
    resumed run's budget raised by this invocation's flags (refused when a budget stopped it
    and is not raised), saved back to run.json."""
    from .budget import Budget

    config = run.config
    recorded = config.get("prices_file") if getattr(args, "resume", None) else None
    prices = _prices(args, choice, recorded if isinstance(recorded, str) else None)
    try:
        old = Budget.from_json(config.get("budget") or {})
    except ValueError as e:
        raise UsageError(f"polc: the budget in {run.path / 'run.json'} cannot be used ({e}).") from None
    if not getattr(args, "resume", None):
        return prices, old
    budget = _budget(args, old, choice, prices)
    _verify_raised(run, config.get("budget_stop"), old, budget)
    run.update_config(budget=budget.to_json(), budget_stop=None,
                      **({"prices": list(prices.sources)} if prices is not None else {}),
                      **({"prices_file": str(Path(args.prices).resolve())} if getattr(args, "prices", None) else {}))
    return prices, budget


def _prices(args: argparse.Namespace, choice: Any, recorded: Any = None):
    """The price table of a run (None for a scripted or manual session: no model is paid):
    this invocation's --prices FILE, else the one the run was started with (`recorded`,
    run.json's prices_file: a resumed run keeps its prices), else polc's and the user's."""
    from ..llm.prices import PricesError, load_prices

    if choice.kind in ("scripted", "manual"):
        if getattr(args, "prices", None):
            raise UsageError(f"polc: --prices has nothing to price: {choice.spec} calls no model.")
        return None
    given = getattr(args, "prices", None)
    try:
        return load_prices(given or recorded)
    except PricesError as e:
        hint = "" if given or not recorded else (f" (the run was started with --prices {recorded}; pass "
                                                 "--prices FILE to price the rest of it)")
        raise UsageError(f"polc: {str(e).rstrip('.')}{hint}." if hint else f"polc: {e}") from None


def _budget(args: argparse.Namespace, old: Any, choice: Any, prices: Any):
    """`old` (the run's budget) with this invocation's --max-tokens / --max-cost."""
    from dataclasses import replace

    from .budget import parse_cost, parse_tokens

    try:
        budget = old
        if getattr(args, "max_tokens", None) is not None:
            budget = replace(budget, max_tokens=parse_tokens(args.max_tokens))
        if getattr(args, "max_cost", None) is not None:
            budget = replace(budget, max_cost=parse_cost(args.max_cost))
    except ValueError as e:
        raise UsageError(f"polc: {e}.") from None
    if budget.max_cost is not None and (prices is None or prices.price(choice.spec) is None):
        where = ", ".join(prices.sources) if prices is not None else "no price table: it calls no model"
        raise UsageError(f"polc: --max-cost needs the price of {choice.spec}, which is not in the price table "
                         f"({where}); add it to ~/.config/polc/prices.toml or a --prices FILE (docs/llm.md), "
                         "or bound the run with --max-tokens.")
    return budget


def _with_options(choice: Any, pairs: Any) -> Any:
    """`choice` with the `--llm-option KEY=VALUE` pairs, checked against its backend."""
    from dataclasses import replace

    if not pairs:
        return choice
    options = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not key.strip():
            raise UsageError(f"polc: --llm-option takes KEY=VALUE (e.g. seed=0), not {pair!r}.")
        options[key.strip()] = value.strip()
    if choice.kind == "openai":
        from ..llm.openai_backend import parse_options
    elif choice.kind == "anthropic":
        from ..llm.anthropic_backend import parse_options
    else:
        raise UsageError(f"polc: --llm-option applies to --llm openai:MODEL and anthropic:MODEL, not {choice.spec}.")
    try:
        parse_options(options)
    except ValueError as e:
        raise UsageError(f"polc: {e}.") from None
    return replace(choice, options=tuple(options.items()))


def _verify_session(choice: Any, settings: Any) -> None:
    from .rundir import RunDirError, read_json

    meta_file = Path(choice.source) / "session.json"
    try:
        recorded = read_json(meta_file) if meta_file.is_file() else {}
    except RunDirError as e:
        raise UsageError(f"polc: {e}") from None
    if not isinstance(recorded, dict):
        raise UsageError(f"polc: {meta_file} is not a JSON object (the settings the session was recorded with).")
    mode = recorded.get("feedback", "analysis")
    if settings.feedback != mode:
        raise UsageError(f"polc: the scripted session in {choice.source} was recorded with --feedback {mode}; "
                         f"--feedback {settings.feedback} needs a real model (set GEMINI_API_KEY, or "
                         "--llm gemini:MODEL).")


def _resumed_run(args: argparse.Namespace):
    """The run directory of --resume, locked, with its task, settings and model."""
    from ..io.lock import lock_directory
    from .rundir import RunDir, RunDirError

    if not os.path.exists(args.resume):
        raise no_such_run(args.resume, "run directory")
    try:
        run = RunDir.open(args.resume)
    except RunDirError as e:
        raise UsageError(f"polc: {e}") from None
    run.lock = lock_directory(run.path, "polc refine")  # before anything reads run.json for good
    try:
        return _resumed(args, run)
    except BaseException:
        run.unlock()
        raise


def _resumed(args: argparse.Namespace, run: Any):
    from dataclasses import replace

    from .loop import load_task
    from .scripted import Choice
    from .work import Settings

    config = run.config
    kinds = {"task": str, "env": str, "llm": str, "llm_kind": str, "settings": dict}
    wrong = [k for k, t in kinds.items() if not isinstance(config.get(k), t)]
    if wrong:
        raise UsageError(f"polc: {run.path / 'run.json'} lacks a usable {', '.join(wrong)}; it cannot be resumed.")
    try:
        settings = Settings.from_json(config["settings"])
    except (TypeError, ValueError) as e:
        raise UsageError(f"polc: the settings in {run.path / 'run.json'} cannot be used ({e}).") from None
    task = load_task(config["task"], config["env"])
    # this invocation's limits; the run's settings stay as recorded
    given = (("llm_timeout", args.llm_timeout), ("max_reply_chars", getattr(args, "max_reply_chars", None)))
    limits = {k: v for k, v in given if v is not None}
    if limits:
        try:
            settings = replace(settings, **limits)
        except ValueError as e:
            raise UsageError(f"polc: {e}.") from None
    options = config.get("llm_options") or {}
    if not isinstance(options, dict):
        raise UsageError(f"polc: the llm_options in {run.path / 'run.json'} are not a JSON object.")
    return run, task, settings, Choice(config["llm"], config["llm_kind"], config.get("llm_source"),
                                       tuple((str(k), str(v)) for k, v in options.items()))


def _verify_raised(run: Any, stop: Any, old: Any, new: Any) -> None:
    """A run a budget stopped continues only with that budget raised (or lifted: never by
    passing the same exhausted one again)."""
    if not isinstance(stop, dict):
        return
    from .budget import cost_text, tokens_text

    which = stop.get("budget")
    if which == "tokens" and new.max_tokens is not None and new.max_tokens <= (old.max_tokens or 0):
        raise UsageError(f"polc: {run.path} stopped at its token budget (--max-tokens {tokens_text(old.max_tokens)}, "
                         f"{tokens_text(int(stop.get('spent', 0)))} spent); continue with a larger one, e.g. "
                         f"`polc refine --resume {run.path} --max-tokens {_raised(old.max_tokens)}`.")
    if which == "cost" and new.max_cost is not None and new.max_cost <= (old.max_cost or 0):
        raise UsageError(f"polc: {run.path} stopped at its cost budget (--max-cost {old.max_cost:g}, "
                         f"{cost_text(float(stop.get('spent', 0)))} spent); continue with a larger one, e.g. "
                         f"`polc refine --resume {run.path} --max-cost {old.max_cost * 1.5:g}`.")


def _raised(tokens: int) -> str:
    n = int(tokens * 1.5)
    return f"{n / 1e6:g}M" if n >= 1_000_000 else f"{n // 1000}k" if n >= 1000 else str(n)


def cmd_refine(args: argparse.Namespace) -> int:
    from ..io.lock import DirectoryLocked
    from ..llm import LLMError
    from .loop import TaskError

    from ..cluster.flags import ENV, ray_address
    from ..il.jaxcache import enable

    enable()  # the persistent compilation cache, as every command under runtime.cli's guard has it
    address = ray_address(args)
    if address:  # the candidates' hook reads the cluster's address from the environment
        os.environ[ENV] = address
    try:
        run, task, settings, choice = _resumed_run(args) if args.resume else _new_run(args)
    except (TaskError, LLMError, DirectoryLocked) as e:
        return _fail(str(e))
    try:
        return _refine(args, run, task, settings, choice, address)
    finally:
        run.unlock()


def _refine(args: argparse.Namespace, run: Any, task: Any, settings: Any, choice: Any, address: Any) -> int:
    """The run `run` (locked), refined until it ends; the command's exit code."""
    from polc.util.files import write_error_text

    from ..envs.errors import MetricError
    from ..llm import LLMError
    from ..io.table import TableError
    from ..sandbox.process import SandboxUnavailable
    from .budget import BudgetExhausted
    from .loop import Loop, RoundEnd, TaskError
    from .report import Progress
    from .rundir import RunDirError

    try:
        prices, budget = _costs(args, run, choice)
    except (TaskError, LLMError) as e:
        return _fail(str(e))
    notice = scripted_notice(choice, str(task.dir)) if choice.scripted else None
    ui = Progress(quiet=args.quiet, withhold_scores=args.quiet_scores)
    ui.say(f"polc refine: {'resuming ' if args.resume else ''}run {run.path} — task {task.dir}, model "
           f"{choice.spec}, feedback {settings.feedback}, up to {settings.rounds} rounds"
           + (" (quick: short episodes, few seeds)" if settings.quick else "")
           + (f", {settings.candidates} candidate revisions per REVISE" if settings.candidates > 1 else "")
           + (f", candidates scored on Ray ({address})" if address and settings.candidates > 1 else "")
           + (f", budget {budget.describe()}" if budget.max_tokens or budget.max_cost else ""))
    if notice:
        ui.say(notice)
    status = "running"
    try:
        with sigterm_interrupts(), ui:  # the round in progress is redone on --resume
            loop = Loop(run, task, settings, choice, ui, on_round=lambda lp: _after_round(run, lp, notice),
                        prices=prices, budget=budget)
            if loop.finished:
                ui.say("this run is already finished.")
            loop.run()
            status = loop.history[-1].get("end", "finished") if loop.history else "finished"
    except KeyboardInterrupt:
        print(f"polc: interrupted; the round in progress will be redone: polc refine --resume {run.path}",
              file=sys.stderr)
        return 130
    except BudgetExhausted as e:
        return _budget_stop(run, loop, notice, task, e, args.quiet_scores)
    except (LLMError, SandboxUnavailable, RoundEnd, TaskError, TableError, RunDirError, MetricError, OSError) as e:
        text = write_error_text(e) if isinstance(e, OSError) else f"polc: {e}"
        if text is None:  # not a full or read-only disk: a bug, for the CLI to report
            raise
        return _fail(f"{text[len('polc: '):]}\nThe run stopped in the round in progress; after fixing this, "
                     f"continue with `polc refine --resume {run.path}`.")
    _finish(run, loop, notice, status, task, args.quiet_scores)
    if loop.history and loop.history[-1].get("unusable_replies"):
        print(f"polc: the run ended early because the model's replies could not be used (exit "
              f"{EXIT_UNUSABLE}): {loop.history[-1]['end']}.", file=sys.stderr)
        return EXIT_UNUSABLE
    return 0


def _budget_stop(run: Any, loop: Any, notice: Any, task: Any, e: Any, withhold_scores: bool = False) -> int:
    """A budget stopped the run before a call: the complete rounds are saved with their
    summary and table, run.json says which budget, and the message says how to continue."""
    run.update_config(budget_stop=e.to_json())
    status = f"stopped by its {'token' if e.which == 'tokens' else 'cost'} budget"
    _finish(run, loop, notice, status, task, withhold_scores)
    flag = "--max-tokens" if e.which == "tokens" else "--max-cost"
    saved = (f"The complete rounds are saved in {run.path} (the round in progress is redone)" if loop.history else
             f"No round was complete yet ({run.path} keeps the run's settings; its first round is redone)")
    print(f"polc: {e}.\n{saved}; continue with a larger budget: `polc refine --resume {run.path} {flag} N` "
          f"(exit {EXIT_BUDGET}).", file=sys.stderr)
    return EXIT_BUDGET


def _after_round(run: Any, loop: Any, notice: Any) -> None:
    from .report import figure_returns, write_summary

    status = loop.history[-1].get("end") or "running"
    write_summary(run, loop.history, status, notice, loop.metric)
    figure_returns(loop.history, str(run.path / "returns.png"), f"{run.path.name}: {loop.metric.name} per round",
                   loop.metric)


def _finish(run: Any, loop: Any, notice: Any, status: str, task: Any, withhold_scores: bool = False) -> None:
    from ..io.table import read_table
    from .report import figure_latents, table_text, write_summary

    history = loop.history
    write_summary(run, history, status, notice, loop.metric)
    traced = [m["round"] for m in history if (run.round_dir(m["round"]) / "trace.parquet").is_file()]
    figures = [run.path / "returns.png"]
    if traced:
        first, last = traced[0], traced[-1]
        made = figure_latents(read_table(str(run.round_dir(first) / "trace.parquet")),
                              read_table(str(run.round_dir(last) / "trace.parquet")), first, last,
                              str(run.path / "latents.png"), task.latents or None)
        if made:
            figures.append(Path(made))
    print(table_text(history, loop.metric, withhold_scores))
    if withhold_scores:
        print(f"(unseen-seed scores withheld by --quiet-scores: they are in {run.path / 'summary.json'})")
    print(f"\nrun ended: {status}")
    kept = [m for m in history if (run.round_dir(m["round"]) / "policy.pol").is_file()]
    if kept:
        last = run.round_dir(kept[-1]["round"])
        which = "declared" if (kept[-1].get("keep") or {}).get("kept") == "declared" else "fitted"
        print(f"final policy: {last / 'policy.pol'} with its {which} weights {last / 'params.json'}")
    print("wrote " + ", ".join(str(f) for f in [run.path / "summary.json", *figures] if f.exists()))
    if notice:
        print(f"\n{notice}")
    env = run.config.get("env") if isinstance(run.config, dict) else None
    final = run.round_dir(kept[-1]["round"]) if kept else None
    print("\n" + next_steps(run.path, [f for f in figures if f.exists()], final, env))


def next_steps(path: Path, figures: list, final: Optional[Path], env: Optional[str]) -> str:
    """What to run after a run, with its real directory (a run's name carries its start time):
    its report, where the plots are, and the final structure's evaluation on 100 unseen seeds."""
    polc, q = polc_command(), lambda p: shlex.quote(str(p))
    lines = ["next:", f"  {polc} report {q(path)} -o {q(path / 'report.html')}"
                      "   # one offline page: every round's source, diff, weights, analysis and plots"]
    if figures:
        lines.append(f"  the plots: {', '.join(str(f) for f in figures)}")
    if final is not None and env:
        lines.append(f"  {polc} eval {q(final / 'policy.pol')} --params {q(final / 'params.json')} --env {q(env)} "
                     "--seeds 100   # the final structure on 100 unseen seeds")
    return "\n".join(lines)


# ---- generate --------------------------------------------------------------------------


def cmd_generate(args: argparse.Namespace) -> int:
    from ..llm import LLMError, check_timeout
    from .converse import Caller, NoUsableReply, RevisionRejected
    from .loop import Task, generate
    from .rundir import write_atomic
    from .scripted import choose, open_backend
    from .work import environment, Settings

    path = Path(args.task)
    if not path.is_file():
        raise UsageError(f"polc: cannot read '{args.task}': no such file.")
    raw = path.read_text(encoding="utf-8")
    header, text = _front_matter(raw)
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
        choice = _with_options(choose(args.llm, path.parent), args.llm_option)
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


def _front_matter(raw: str) -> tuple[dict, str]:
    import re

    m = re.match(r"---\n(.*?)\n---\n", raw, re.DOTALL)
    if not m:
        return {}, raw
    header = {}
    for line in m.group(1).splitlines():
        key, _, value = line.partition(":")
        header[key.strip()] = value.strip()
    return header, raw[m.end():]


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
    c.add_argument("--quick", action="store_true", help="2 rounds, episodes cut at 300 steps (a shorter limit of the environment kept), 3 eval seeds, a short fit")
    c.add_argument("--rollout-episodes", type=int, default=2, help="traced episodes per round (training seeds)")
    c.add_argument("--eval-episodes", type=int, default=10, help="evaluation episodes per round (unseen seeds)")
    c.add_argument("--validation-episodes", type=int, default=0, metavar="N",
                   help="untraced episodes per round on N validation seeds (neither the traced training seeds nor "
                        "the evaluation's); the model is told their mean, spread and worst two (counted as resets)")
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
