"""`polc refine` as a library: `start(request)` begins a run, `resume(path, overrides)`
continues one; each returns an `Outcome` (its exit code, the run's rounds as `record.Round`,
and the lines `polc refine` prints at the end). `polc refine` (cli.py), `polc experiment`
(experiment/run.py) and tests call these; the CLI only parses arguments into a `Request` or
`Overrides` and prints the `Outcome`.

    start(Request(task="examples/car_racing", settings=quick(Settings()), output="runs/x"))
    resume("runs/x", Overrides(max_tokens="2M"))

What a run does, round by round, is loop.py's; this module opens or creates the run
directory (locked while it runs), checks the model, prices and budgets, and writes the
summary, the table and the figures after each round and at the end. Bad usage (a task
folder without a task.md, a budget resumed unraised) raises `UsageError` (exit 2); an error
the run stopped on is the Outcome's `code` 1 and its `stderr`.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar, Optional, Union

from ..cli import UsageError, no_such_run, polc_command, sigterm_interrupts
from .record import Round
from .work import Settings

EXIT_UNUSABLE = 4  # the run ended because the model's replies could not be used
EXIT_BUDGET = 5  # a budget (--max-tokens, --max-cost) stopped the run before a call; --resume with a larger one


@dataclass(frozen=True)
class Request:
    """A new run of task folder `task` (its task.md, demonstration and initial structure)."""

    task: str
    settings: Settings = Settings()        # as given (`work.quick(settings)` for --quick)
    env: Optional[str] = None               # default: the task's `env:` header, else the folder name
    llm: Optional[str] = None               # gemini:MODEL, openai:MODEL, ..., replay:DIR, manual:DIR
    llm_option: tuple[str, ...] = ()        # KEY=VALUE request parameters of openai: / anthropic:
    output: Optional[str] = None            # the run directory (default runs/<task>-<time>)
    max_tokens: Optional[str] = None        # budgets: "400k", "1.5M"; "2.50" dollars
    max_cost: Optional[str] = None
    prices: Optional[str] = None            # a prices TOML
    ray_address: Optional[str] = None       # score a population's candidates on this Ray cluster
    quiet: bool = False                     # no progress line
    quiet_scores: bool = False              # no unseen-seed score in the printed lines
    command: Optional[str] = None           # the command line run.json records (default `polc refine TASK`)
    resume: ClassVar[None] = None


@dataclass(frozen=True)
class Overrides:
    """What a resumed run takes from this invocation; everything else is the run's own (run.json)."""

    llm_timeout: Optional[float] = None
    max_reply_chars: Optional[int] = None
    max_tokens: Optional[str] = None        # a budget raised (a run a budget stopped needs it raised)
    max_cost: Optional[str] = None
    prices: Optional[str] = None
    ray_address: Optional[str] = None
    quiet: bool = False
    quiet_scores: bool = False


@dataclass(frozen=True)
class _Resuming(Overrides):
    resume: str = ""  # the run directory


Invocation = Union[Request, _Resuming]


@dataclass
class Outcome:
    """How a run ended: `code` is `polc refine`'s exit status (0 finished, 1 stopped on an
    error to fix, EXIT_UNUSABLE, EXIT_BUDGET, 130 interrupted)."""

    code: int = 0
    run: Optional[Path] = None
    status: str = ""                        # the run's last word ("the model chose STOP", ...)
    history: list[Round] = field(default_factory=list)  # every complete round (also of a run that stopped)
    stdout: list[str] = field(default_factory=list)      # the table, the final policy, what to run next
    stderr: list[str] = field(default_factory=list)      # why it stopped, how to continue

    def say(self, text: str = "") -> None:
        self.stdout.append(str(text))

    def err(self, text: str) -> None:
        self.stderr.append(text)

    def fail(self, message: str) -> int:
        self.err(f"polc: {message}")
        self.code = 1
        return 1


def start(request: Request) -> Outcome:
    """Refine `request.task` in a new run directory until the run ends."""
    return _run(request)


def resume(path: Union[str, os.PathLike], overrides: Overrides = Overrides()) -> Outcome:
    """Continue the run in `path` (an interrupted, paused or budget-stopped one) until it ends."""
    return _run(_Resuming(**{f: getattr(overrides, f) for f in Overrides.__dataclass_fields__}, resume=str(path)))


def scripted_notice(choice: Any, task_dir: str) -> str:
    from .scripted import DEFAULT_MODEL

    return (f"The LLM replies in this run are a SCRIPTED RECORDING ({choice.source}/exchanges.jsonl), written "
            "by hand for this task and played back in order: no model is called. The analyses, checks, fits, "
            "rollouts and returns are computed now, for real. To refine with a real model, set GEMINI_API_KEY "
            f"(or OPENAI_API_KEY, ANTHROPIC_API_KEY) and run `polc refine {task_dir}` (or add --llm "
            f"gemini:{DEFAULT_MODEL}, openai:MODEL, anthropic:MODEL).")


def _new_run(inv: Invocation):
    from .budget import Budget
    from ..task import load_task
    from .loop import write_config
    from ..io.lock import lock_directory
    from .rundir import RunDir, RunDirError, default_name
    from .scripted import choose

    if not inv.task:
        raise UsageError("polc: refine needs a task folder (e.g. examples/car_racing), or --resume RUNDIR.")
    task = load_task(inv.task, inv.env)
    settings = replace(inv.settings, ray_address=inv.ray_address, recovery=inv.settings.recovery or task.recovery)
    _verify_recovery(settings, task)
    choice = with_options(choose(inv.llm, task.dir), inv.llm_option)
    if choice.scripted:
        _verify_session(choice, settings)
    prices = _prices(inv, choice)
    budget = _budget(inv, Budget(), choice, prices)
    out = inv.output or str(Path("runs") / default_name(task.dir))
    command = inv.command
    try:
        RunDir.verify_new(Path(out))
        lock = lock_directory(out, "polc refine")
    except RunDirError as e:
        raise UsageError(f"polc: {e}") from None
    try:
        run = RunDir.create(out, write_config(settings, choice, task, command or f"polc refine {inv.task}"))
    except RunDirError as e:
        lock.release()
        raise UsageError(f"polc: {e}") from None
    run.lock = lock
    run.update_config(llm_source=choice.source, **({"llm_options": dict(choice.options)} if choice.options else {}),
                      budget=budget.to_json(), **({"prices": list(prices.sources)} if prices is not None else {}),
                      **({"prices_file": str(Path(inv.prices).resolve())} if getattr(inv, "prices", None) else {}))
    return run, task, settings, choice


def _costs(inv: Invocation, run: Any, choice: Any) -> tuple[Any, Any]:
    """(price table, budget) of a run: a new run's as `_new_run` checked and saved them; a
    resumed run's budget raised by this invocation's flags (refused when a budget stopped it
    and is not raised), saved back to run.json."""
    from .budget import Budget

    config = run.config
    recorded = config.get("prices_file") if getattr(inv, "resume", None) else None
    prices = _prices(inv, choice, recorded if isinstance(recorded, str) else None)
    try:
        old = Budget.from_json(config.get("budget") or {})
    except ValueError as e:
        raise UsageError(f"polc: the budget in {run.path / 'run.json'} cannot be used ({e}).") from None
    if not getattr(inv, "resume", None):
        return prices, old
    budget = _budget(inv, old, choice, prices)
    _verify_raised(run, config.get("budget_stop"), old, budget)
    run.update_config(budget=budget.to_json(), budget_stop=None,
                      **({"prices": list(prices.sources)} if prices is not None else {}),
                      **({"prices_file": str(Path(inv.prices).resolve())} if getattr(inv, "prices", None) else {}))
    return prices, budget


def _prices(inv: Invocation, choice: Any, recorded: Any = None):
    """The price table of a run (None for a scripted or manual session: no model is paid):
    this invocation's --prices FILE, else the one the run was started with (`recorded`,
    run.json's prices_file: a resumed run keeps its prices), else polc's and the user's."""
    from ..llm.prices import PricesError, load_prices

    if choice.kind in ("scripted", "manual"):
        if getattr(inv, "prices", None):
            raise UsageError(f"polc: --prices has nothing to price: {choice.spec} calls no model.")
        return None
    given = getattr(inv, "prices", None)
    try:
        return load_prices(given or recorded)
    except PricesError as e:
        hint = "" if given or not recorded else (f" (the run was started with --prices {recorded}; pass "
                                                 "--prices FILE to price the rest of it)")
        raise UsageError(f"polc: {str(e).rstrip('.')}{hint}." if hint else f"polc: {e}") from None


def _budget(inv: Invocation, old: Any, choice: Any, prices: Any):
    """`old` (the run's budget) with this invocation's --max-tokens / --max-cost."""
    from dataclasses import replace

    from .budget import parse_cost, parse_tokens

    try:
        budget = old
        if getattr(inv, "max_tokens", None) is not None:
            budget = replace(budget, max_tokens=parse_tokens(inv.max_tokens))
        if getattr(inv, "max_cost", None) is not None:
            budget = replace(budget, max_cost=parse_cost(inv.max_cost))
    except ValueError as e:
        raise UsageError(f"polc: {e}.") from None
    if budget.max_cost is not None and (prices is None or prices.price(choice.spec) is None):
        where = ", ".join(prices.sources) if prices is not None else "no price table: it calls no model"
        raise UsageError(f"polc: --max-cost needs the price of {choice.spec}, which is not in the price table "
                         f"({where}); add it to ~/.config/polc/prices.toml or a --prices FILE (docs/llm.md), "
                         "or bound the run with --max-tokens.")
    return budget


def with_options(choice: Any, pairs: Any) -> Any:
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


def _verify_recovery(settings: Settings, task: Any) -> None:
    """--recovery (or the task's `recovery:` header) names actions of the environment, which has
    an expert (or --expert gives one): refused before the run directory is made."""
    if not settings.recovery:
        if settings.expert:
            raise UsageError("polc: --expert records recovery laps: give --recovery too (e.g. --recovery steer=0.3).")
        return
    from .. import envs
    from ..il.recovery import Recovery

    try:
        spec = envs.get(task.env)
    except (KeyError, envs.EnvError):
        return  # the run itself says what is wrong with the environment, as without --recovery
    try:
        Recovery(settings.recovery, expert=settings.expert).resolve(spec)
    except ValueError as e:
        raise UsageError(f"polc: --recovery {settings.recovery}: {e}.") from None


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


def _resumed_run(inv: Invocation):
    """The run directory of --resume, locked, with its task, settings and model."""
    from ..io.lock import lock_directory
    from .rundir import RunDir, RunDirError

    if not os.path.exists(inv.resume):
        raise no_such_run(inv.resume, "run directory")
    try:
        run = RunDir.open(inv.resume)
    except RunDirError as e:
        raise UsageError(f"polc: {e}") from None
    run.lock = lock_directory(run.path, "polc refine")  # before anything reads run.json for good
    try:
        return _resumed(inv, run)
    except BaseException:
        run.unlock()
        raise


def _resumed(inv: Invocation, run: Any):
    from ..task import load_task
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
    given = (("llm_timeout", inv.llm_timeout), ("max_reply_chars", getattr(inv, "max_reply_chars", None)))
    limits = {k: v for k, v in given if v is not None}
    try:
        settings = replace(settings, **limits, ray_address=inv.ray_address)
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


def _run(inv: Invocation) -> Outcome:
    from ..io.lock import DirectoryLocked
    from ..llm import LLMError
    from ..task import TaskError

    from ..il.jaxcache import enable

    enable()  # the persistent compilation cache, as every command under runtime.cli's guard has it
    out = Outcome()
    try:
        run, task, settings, choice = _resumed_run(inv) if inv.resume else _new_run(inv)
    except (TaskError, LLMError, DirectoryLocked) as e:
        out.fail(str(e))
        return out
    out.run = run.path
    try:
        out.code = _refine(inv, out, run, task, settings, choice, inv.ray_address)
        return out
    finally:
        run.unlock()


def _refine(inv: Invocation, out: Outcome, run: Any, task: Any, settings: Any, choice: Any, address: Any) -> int:
    """The run `run` (locked), refined until it ends; the command's exit code."""
    from polc.util.files import write_error_text

    from ..envs.errors import MetricError
    from ..llm import LLMError
    from ..io.table import TableError
    from ..sandbox.process import SandboxUnavailable
    from .budget import BudgetExhausted
    from ..task import TaskError
    from .loop import Loop, RoundEnd
    from .report import Progress
    from .rundir import RunDirError

    try:
        prices, budget = _costs(inv, run, choice)
    except (TaskError, LLMError) as e:
        return out.fail(str(e))
    notice = scripted_notice(choice, str(task.dir)) if choice.scripted else None
    ui = Progress(quiet=inv.quiet, withhold_scores=inv.quiet_scores)
    ui.say(f"polc refine: {'resuming ' if inv.resume else ''}run {run.path} — task {task.dir}, model "
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
            loop = Loop(run, task, settings, choice, ui, prices=prices, budget=budget)
            out.history = loop.history  # the complete rounds, also when the run stops on an error
            if loop.finished:
                ui.say("this run is already finished.")
            for _ in loop.rounds():
                _after_round(run, loop, notice)
            status = loop.history[-1].end or "finished" if loop.history else "finished"
    except KeyboardInterrupt:
        out.err(f"polc: interrupted; the round in progress will be redone: polc refine --resume {run.path}")
        return 130
    except BudgetExhausted as e:
        return _budget_stop(out, run, loop, notice, task, e, inv.quiet_scores)
    except (LLMError, SandboxUnavailable, RoundEnd, TaskError, TableError, RunDirError, MetricError, OSError) as e:
        text = write_error_text(e) if isinstance(e, OSError) else f"polc: {e}"
        if text is None:  # not a full or read-only disk: a bug, for the CLI to report
            raise
        return out.fail(f"{text[len('polc: '):]}\nThe run stopped in the round in progress; after fixing this, "
                        f"continue with `polc refine --resume {run.path}`.")
    _finish(out, run, loop, notice, status, task, inv.quiet_scores)
    if loop.history and loop.history[-1].unusable_replies:
        out.err(f"polc: the run ended early because the model's replies could not be used (exit "
                f"{EXIT_UNUSABLE}): {loop.history[-1].end}.")
        return EXIT_UNUSABLE
    return 0


def _budget_stop(out: Outcome, run: Any, loop: Any, notice: Any, task: Any, e: Any,
                 withhold_scores: bool = False) -> int:
    """A budget stopped the run before a call: the complete rounds are saved with their
    summary and table, run.json says which budget, and the message says how to continue."""
    run.update_config(budget_stop=e.to_json())
    status = f"stopped by its {'token' if e.which == 'tokens' else 'cost'} budget"
    _finish(out, run, loop, notice, status, task, withhold_scores)
    flag = "--max-tokens" if e.which == "tokens" else "--max-cost"
    saved = (f"The complete rounds are saved in {run.path} (the round in progress is redone)" if loop.history else
             f"No round was complete yet ({run.path} keeps the run's settings; its first round is redone)")
    out.err(f"polc: {e}.\n{saved}; continue with a larger budget: `polc refine --resume {run.path} {flag} N` "
            f"(exit {EXIT_BUDGET}).")
    return EXIT_BUDGET


def _after_round(run: Any, loop: Any, notice: Any) -> None:
    from .report import figure_returns, write_summary

    history = [m.to_json() for m in loop.history]
    status = loop.history[-1].end or "running"
    write_summary(run, history, status, notice, loop.metric)
    figure_returns(history, str(run.path / "returns.png"), f"{run.path.name}: {loop.metric.name} per round",
                   loop.metric)


def _finish(out: Outcome, run: Any, loop: Any, notice: Any, status: str, task: Any,
            withhold_scores: bool = False) -> None:
    from ..io.table import read_table
    from .report import figure_latents, table_text, write_summary

    out.history, out.status = list(loop.history), status
    history = [m.to_json() for m in loop.history]
    write_summary(run, history, status, notice, loop.metric)
    traced = [m.round for m in loop.history if (run.round_dir(m.round) / "trace.parquet").is_file()]
    figures = [run.path / "returns.png"]
    if traced:
        first, last = traced[0], traced[-1]
        made = figure_latents(read_table(str(run.round_dir(first) / "trace.parquet")),
                              read_table(str(run.round_dir(last) / "trace.parquet")), first, last,
                              str(run.path / "latents.png"), task.latents or None)
        if made:
            figures.append(Path(made))
    out.say(table_text(history, loop.metric, withhold_scores))
    if withhold_scores:
        out.say(f"(unseen-seed scores withheld by --quiet-scores: they are in {run.path / 'summary.json'})")
    out.say(f"\nrun ended: {status}")
    kept = [m for m in loop.history if (run.round_dir(m.round) / "policy.pol").is_file()]
    if kept:
        last = run.round_dir(kept[-1].round)
        which = "declared" if (kept[-1].keep or {}).get("kept") == "declared" else "fitted"
        out.say(f"final policy: {last / 'policy.pol'} with its {which} weights {last / 'params.json'}")
    out.say("wrote " + ", ".join(str(f) for f in [run.path / "summary.json", *figures] if f.exists()))
    if notice:
        out.say(f"\n{notice}")
    env = run.config.get("env") if isinstance(run.config, dict) else None
    final = run.round_dir(kept[-1].round) if kept else None
    out.say("\n" + next_steps(run.path, [f for f in figures if f.exists()], final, env))


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
