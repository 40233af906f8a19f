"""What every runtime command shares, in the conventions of `polc.cli`: each command is
`(args) -> exit code` (0 ok, 1 a failure the user must fix, 2 bad usage or unreadable
input), messages on stderr, no tracebacks.

    env_spec(name)              the environment, or a usage error listing the known ones
    env_options(args)           a gym:ID env made from --schema / --env-kwargs for the command
    compile_policy(path)        parse, check and compile a .pol file (diagnostics -> exit 1)
    params_for(policy, path)    a params file, or the declared weights when path is None
    read_table_or_usage(path)   a Parquet table, or a usage error that says what is wrong
    writing(writer)             a table that keeps its finished episodes when stopped early
    guard(cmd)                  `Failure` -> exit 1 with its message
    runner_flags(parser)        the flags of every command that runs a policy in an env

Each part's `cli.py` imports this module; `polc.runtime.commands` registers them all.
Imported by every `polc` invocation (to register the commands), so nothing heavy at
module level: `polc check` must stay free of numpy/pyarrow/jax.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import os
import sys
import time
from pathlib import Path
from typing import Iterator, Optional

from polc.cli import UsageError, load_file as load_program

ENV_HELP = "environment: a name (car_racing), gym:ID (any gymnasium id), or the path of an env.toml"


def env_spec(name: str):
    from . import envs

    try:
        return envs.get(name)
    except KeyError:
        raise UsageError(f'polc: unknown environment "{name}"; known: {", ".join(envs.names())}, or gym:ID '
                         "(any gymnasium id, docs/environments.md).") from None


def parse_env_kwargs(text: Optional[str]) -> Optional[dict]:
    """--env-kwargs JSON as a dict (None when not given), or a usage error."""
    import json

    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as e:
        raise UsageError(f"polc: --env-kwargs is not valid JSON ({e}): {text}") from None
    if not isinstance(value, dict):
        raise UsageError(f'polc: --env-kwargs must be a JSON object of gymnasium.make arguments, e.g. '
                         f'\'{{"gravity": 9.8}}\', not {text}')
    return value


def env_options(args: argparse.Namespace):
    """The command's `gym:` environment, made from its --schema / --env-kwargs (or an
    env.toml beside its .pol file) and registered for the command's duration, so
    `env_spec(args.env)` returns it. A context manager; a no-op for other envs."""
    if not hasattr(args, "env"):  # a command that names its environment otherwise (polc schema)
        return contextlib.nullcontext()
    env = args.env
    schema, kwargs = getattr(args, "schema", None), parse_env_kwargs(getattr(args, "env_kwargs", None))
    metric = getattr(args, "metric", None)
    if not env or not (env.startswith("gym:") or env.endswith(".toml")):
        if schema is not None or kwargs is not None or metric is not None:
            raise UsageError("polc: --schema, --env-kwargs and --metric are for gym:ID environments "
                             "(docs/environments.md).")
        return contextlib.nullcontext()
    if schema is not None and not env.startswith("gym:"):
        raise UsageError(f"polc: {env} is a schema file already; give --schema only with --env gym:ID.")
    from .envs import gym_env, registry

    file = getattr(args, "file", None)
    spec = gym_env.resolve(env, schema, kwargs, near=file if isinstance(file, str) else None, metric=metric)
    return registry.using(spec, env)


def output_file(path: str) -> str:
    """`path` as an output (-o): a missing parent directory is created inside the working
    tree, and said; outside it (a typo such as /nonexistent/dir/t.parquet) it is refused, so
    no directory appears where the person did not mean one. Returns `path`."""
    parent = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(parent):
        return path
    cwd = os.path.abspath(os.getcwd())
    if os.path.commonpath([cwd, parent]) != cwd:
        raise UsageError(f"polc: cannot write '{path}': the directory {parent} does not exist (polc creates "
                         f"missing directories only inside the working directory {cwd}).")
    os.makedirs(parent, exist_ok=True)
    print(f"polc: created the directory {os.path.relpath(parent, cwd)}/ for {path}", file=sys.stderr)
    return path


def fail(message: str) -> int:
    print(f"polc: {message}", file=sys.stderr)
    return 1


def compile_policy(path: str):
    """The `.pol` file at `path` checked and lowered (`Program.compile`), registered for the
    executables kept on disk (`io/executables.py`: a warm process skips tracing its steps)."""
    from .io.executables import register

    program, text = load_program(path)
    policy = program.compile()
    register(policy, f"{program.name}\0{text}")
    return policy


def params_for(policy, path: Optional[str]):
    from .io.params import ParamsError, load_params

    if path is None:
        import jax

        return policy.init(jax.random.PRNGKey(0))
    if not os.path.exists(path):
        raise UsageError(f"polc: cannot read '{path}': no such file.")
    try:
        return load_params(path, policy)
    except ParamsError as e:
        raise Failure(str(e)) from None


RUN_MARKERS = ("run.json", "experiment.json", "results.json")  # a `polc refine` run, a `polc experiment` output


def nearest_runs(path: str, limit: int = 5) -> list[str]:
    """The run directories (`RUN_MARKERS`) nearest to a missing `path`, beside where it would be:
    those whose name starts with its name or whose task part (the name less its start time) is
    close to it, newest first (run names end in their start time); else the newest ones there."""
    import difflib
    import re

    p = Path(path)
    parent = p.parent
    while not parent.is_dir() and parent != parent.parent:
        parent = parent.parent
    try:
        runs = [d for d in parent.iterdir() if d.is_dir() and any((d / m).is_file() for m in RUN_MARKERS)]
    except OSError:
        return []
    runs.sort(key=lambda d: d.name, reverse=True)
    names = [d.name for d in runs]
    task = {n: re.sub(r"-\d{4}-\d\d-\d\dT[\d-]+$", "", n) for n in names}  # the name without its start time
    close = set(difflib.get_close_matches(p.name, set(task.values()), n=limit, cutoff=0.6))
    chosen = [n for n in names if p.name and (n.startswith(p.name) or task[n] in close)] or names
    return [str(parent / n) if str(parent) != "." else n for n in chosen[:limit]]


def no_such_run(path: str, what: str = "file or directory") -> UsageError:
    """`polc: cannot read 'runs/car_racing': no such ...; the nearest runs: ...` as a usage error."""
    near = nearest_runs(path)
    tail = f"; the nearest run directories: {', '.join(near)}" if near else ""
    return UsageError(f"polc: cannot read '{path}': no such {what}{tail}.")


def polc_command() -> str:
    """How to type polc again in this shell: `polc` when it is on PATH as this program, else
    the path this process was started by (`.venv/bin/polc` after `make demo`)."""
    import shutil

    def shown(path: str) -> str:
        rel = os.path.relpath(path)
        return rel if not rel.startswith("..") else os.path.abspath(path)

    argv0 = sys.argv[0] if sys.argv and sys.argv[0] else ""
    if argv0.endswith(os.path.join("polc", "__main__.py")):  # python -m polc
        return f"{shown(sys.executable)} -m polc"
    if os.path.basename(argv0) != "polc" or not os.path.isfile(argv0):
        return "polc"
    on_path = shutil.which("polc")
    return "polc" if on_path and os.path.samefile(on_path, argv0) else shown(argv0)


class Failure(Exception):
    """A failure the user must fix: exit code 1 with this message."""


@contextlib.contextmanager
def locked(directory: str, command: str) -> Iterator[None]:
    """`directory`'s run-directory lock held through the block (`polc.runtime.io.lock`);
    `Failure` naming the holder when another process has it."""
    from .io.lock import DirectoryLocked, lock_directory

    try:
        lock = lock_directory(directory, command)
    except DirectoryLocked as e:
        raise Failure(str(e)) from None
    with lock:
        yield


def read_table_or_usage(path: str):
    from .io.table import TableError, read_table

    try:
        return read_table(path)
    except TableError as e:
        raise UsageError(f"polc: {e}.") from None


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """SIGTERM stops the run the way Ctrl-C does, so finished episodes are kept."""
    def handler(signum, frame):
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class EpisodeProgress:
    """Progress of a command over episodes, counting their steps as they run (a vectorised
    run finishes its episodes together, so a count of finished episodes alone would sit at
    0/N and then jump to N/N). On a terminal: a live bar with the steps so far and the last
    finished episode; otherwise (a log, CI) one line every `interval` seconds on stderr.

        with episode_progress("rollout", len(seeds), quiet) as p:
            run(..., on_steps=p.steps, on_episode=lambda ep: p.episode(f"seed {ep.seed}: ..."))
    """

    def __init__(self, what: str, total: int, quiet: bool, interval: float = 10.0, stream=None):
        self.what, self.total, self.quiet, self.interval = what, total, quiet, interval
        self.stream = stream
        self.done = self.stepped = 0
        self.last = ""
        self._bar = self._task = None

    def __enter__(self) -> "EpisodeProgress":
        self.stream = self.stream or sys.stderr
        self._start = self._shown = time.monotonic()
        if not self.quiet and self.stream.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._bar = Progress(TextColumn(self.what), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[stepped]:,} steps"), TextColumn("{task.fields[last]}"),
                                 TimeElapsedColumn(), console=Console(file=self.stream), transient=True)
            self._bar.__enter__()
            self._task = self._bar.add_task(self.what, total=self.total, stepped=0, last="")
        return self

    def steps(self, n: int) -> None:
        """`n` more environment steps taken."""
        self.stepped += int(n)
        self._show()

    def episode(self, last: str = "") -> None:
        """One more episode finished; `last` says how it went."""
        self.done += 1
        self.last = last
        self._show()

    def _show(self) -> None:
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done, stepped=self.stepped, last=self.last)
            return
        now = time.monotonic()
        if self.quiet or now - self._shown < self.interval:
            return
        self._shown = now
        line = f"polc {self.what}: {self.done}/{self.total} episodes, {self.stepped:,} steps, {now - self._start:.0f} s"
        print(line + (f"; last: {self.last}" if self.last else ""), file=self.stream, flush=True)

    def __exit__(self, *exc) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)


def episode_progress(what: str, total: int, quiet: bool) -> EpisodeProgress:
    return EpisodeProgress(what, total, quiet)


@contextlib.contextmanager
def writing(writer) -> Iterator:
    """Close `writer` when the block ends normally. When it stops early (Ctrl-C,
    SIGTERM, an error) the finished episodes go to the .partial.parquet file beside
    the target, and the target is not written."""
    with sigterm_interrupts():
        try:
            yield writer
        except BaseException as e:
            kept = writer.abort()
            if kept:
                print(f"polc: stopped; the {writer.episodes} finished episode(s) are in {kept} "
                      f"({writer.path} was not written).", file=sys.stderr)
            elif writer.episodes:  # a full disk: not even the partial file could be written
                print(f"polc: stopped; the {writer.episodes} finished episode(s) could not be kept either "
                      f"({writer.path} was not written).", file=sys.stderr)
            elif isinstance(e, KeyboardInterrupt):
                print("polc: interrupted before the first episode finished; nothing written.", file=sys.stderr)
            raise
    writer.close()


def guard(func):
    """`Failure`, a policy's non-finite action (`envs.NonFiniteAction`: the episode
    has no score), and an environment the user must fix (`envs.EnvError`: a schema
    file, a gymnasium id, an expert) -> exit code 1 (2 for unusable input) with its
    message (the CLI handles the rest). A `gym:` env is made here (`env_options`), and the
    persistent compilation cache turned on (`polc.runtime.il.jaxcache`)."""
    def run(args: argparse.Namespace) -> int:
        from .il.jaxcache import enable

        enable()  # the persistent compilation cache, before anything jits (docs/performance.md)
        try:
            with env_options(args):
                return func(args)
        except Failure as e:
            return fail(str(e))
        except Exception as e:
            # loaded only on this path: gymnasium is heavy
            from .envs.errors import EnvError
            from .envs.finite import NonFiniteAction

            if isinstance(e, NonFiniteAction):
                return fail(str(e) + ".")
            if isinstance(e, EnvError):
                text = str(e)
                fail(text if "\n" in text else text.rstrip(".") + ".")  # a starter file ends the message as is
                return e.exit_code
            raise

    run.__name__ = func.__name__
    return run


def env_flags(c: argparse.ArgumentParser) -> None:
    """--schema and --env-kwargs, for a command whose --env may be gym:ID."""
    c.add_argument("--schema", metavar="FILE.toml",
                   help="for --env gym:ID: the schema file naming its observation and action components "
                        "(default: an env.toml beside the .pol file, else the env's Dict spaces)")
    c.add_argument("--env-kwargs", metavar="JSON", help="for --env gym:ID: keyword arguments of gymnasium.make")
    c.add_argument("--metric", metavar="MODULE:FUNCTION",
                   help="for --env gym:ID: the score, a function of the step-table columns giving one value per "
                        "step, summed over the episode (default: the return; a schema file's [metric] says more)")


def runner_flags(c: argparse.ArgumentParser, file_optional: bool = False) -> None:
    c.add_argument("file", nargs="?" if file_optional else None, help="the .pol policy")
    c.add_argument("--params", help="fitted params (default: the weights declared in the source)")
    c.add_argument("--env", required=True, help=ENV_HELP)
    env_flags(c)
    c.add_argument("--n-envs", type=int, default=0, help="environments stepped together (default: every episode, up to 64)")
    c.add_argument("--sample", action="store_true", help="sample the policy's noise instead of acting on means")
    c.add_argument("--noise-seed", type=int, default=0, help="key of the sampled noise (with --sample)")
    c.add_argument("-q", "--quiet", action="store_true", help="no progress bar")


__all__ = ["Failure", "UsageError", "compile_policy", "env_flags", "env_options", "env_spec", "episode_progress", "fail", "guard", "locked", "output_file",
           "load_program", "params_for", "parse_env_kwargs", "read_table_or_usage", "runner_flags", "sigterm_interrupts", "writing"]
