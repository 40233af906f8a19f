"""The run directory of `polc refine`: everything a run produced, resumable after a crash.

    runs/<name>/
      run.json             how the run was started (task, model, feedback mode, settings)
      summary.json         per-round metrics and the totals, rewritten after every round
      exchanges.jsonl      every LLM exchange of the complete rounds, in order (replayable)
      returns.png          the paper's Figure 4 (5): the environment's metric per round
      latents.png          the paper's Figure 6: chosen latents, first round against last
      round_00/
        policy.pol         the structure of this round (after any regeneration)
        params.json        its fitted weights (polc.runtime.io.params format)
        trace.parquet      the traced rollout
        analysis_1.py      the analysis code the model wrote (analysis_2.py ... for TEST moves)
        analysis_1.txt     what it printed (or the sandbox's error)
        diagnostics.txt    polc's built-in diagnostics of the rollout
        exchanges.jsonl    this round's LLM exchanges (prompt, reply, tokens, time)
        conversation.md    the same, readable
        next.pol           the checked revision, when the move was REVISE
        metrics.json       the round's numbers (return, calls, tokens, resets, seconds, move)
        done               written last: the round is complete
        waiting            instead of done: a `manual:` session paused here for a hand-written reply

      .lock                held by the process running the run (its pid, host and start
                           time): a second `polc refine` on the directory is refused

Every file is written atomically (a temporary file beside it, fsync, `os.replace`), so no
file is ever half-written under its final name. A round counts only once its `done`
marker exists; `--resume` moves an unfinished round aside (`round_03.interrupted-1`)
and runs it again, so a kill -9 loses at most the round in progress.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any, Callable, Optional

from polc.util.files import write_atomic  # noqa: F401  (re-exported for the loop)

RUN_FORMAT = "polc-refine-run/1"
# A round a `manual:` session paused holds this file (the request it waits for); `--resume` moves
# the round aside and runs it again, as after a crash, but the report calls it a pause.
WAITING = "waiting"
_ROUND = re.compile(r"^round_(\d{2,})$")


class RunDirError(Exception):
    """The directory is not a run directory, or cannot be used as asked."""


def write_json(path: str | os.PathLike, obj: Any) -> None:
    write_atomic(path, json.dumps(obj, indent=1, ensure_ascii=False) + "\n")


def read_json(path: str | os.PathLike) -> Any:
    """The JSON in `path`; `RunDirError` naming the file when it cannot be read or parsed."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (ValueError, RecursionError) as e:  # ValueError: JSON or UTF-8
        reason = "nested too deeply" if isinstance(e, RecursionError) else "not valid JSON"
        raise RunDirError(f"{path} is damaged ({reason}); it was changed after polc wrote it.") from None
    except OSError as e:
        raise RunDirError(f"cannot read {path}: {e.strerror or e}.") from None


def default_name(task_dir: str | os.PathLike) -> str:
    """`<task folder name>-<local time>`, e.g. car_racing-2026-12-02T10-00-05."""
    return f"{Path(task_dir).resolve().name}-{time.strftime('%Y-%m-%dT%H-%M-%S')}"


class RunDir:
    """One run directory (see the module docstring)."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.lock: Any = None  # the directory's lock while a command runs the run (`polc.runtime.io.lock`)

    def unlock(self) -> None:
        if self.lock is not None:
            self.lock.release()
            self.lock = None

    # ---- creating and opening --------------------------------------------------------

    @classmethod
    def create(cls, path: str | os.PathLike, config: dict) -> "RunDir":
        """A new run directory holding `config` as run.json; refuses a directory that
        already holds a run (use --resume) or other files."""
        p = Path(path)
        cls.verify_new(p)
        p.mkdir(parents=True, exist_ok=True)
        run = cls(p)
        write_json(p / "run.json", {"format": RUN_FORMAT, **config})
        return run

    @staticmethod
    def verify_new(p: Path) -> None:
        """`RunDirError` unless `p` can hold a new run: missing, empty, or holding only the
        lock file of a run directory (`polc.runtime.io.lock`)."""
        from ..io.lock import LOCK_NAME

        if (p / "run.json").exists():
            raise RunDirError(f"{p} already holds a run; continue it with --resume {p}, or choose "
                              "another -o.")
        if p.exists() and any(f.name != LOCK_NAME for f in p.iterdir()):
            raise RunDirError(f"{p} exists and is not empty; choose another -o.")

    @classmethod
    def open(cls, path: str | os.PathLike) -> "RunDir":
        p = Path(path)
        if not (p / "run.json").is_file():
            raise RunDirError(f"{p} is not a polc refine run directory (it has no run.json).")
        run = cls(p)
        config = run.config
        if not isinstance(config, dict) or config.get("format") != RUN_FORMAT:
            raise RunDirError(f"{p / 'run.json'} is not a {RUN_FORMAT} file.")
        return run

    @property
    def config(self) -> dict:
        return read_json(self.path / "run.json")

    def update_config(self, **changes: Any) -> None:
        write_json(self.path / "run.json", {**self.config, **changes})

    # ---- rounds ------------------------------------------------------------------------

    def round_dir(self, k: int) -> Path:
        return self.path / f"round_{k:02d}"

    def is_done(self, k: int) -> bool:
        return (self.round_dir(k) / "done").is_file()

    def complete_rounds(self) -> list[int]:
        """0, 1, ... up to the first round without its done marker."""
        k = 0
        while self.is_done(k):
            k += 1
        return list(range(k))

    def begin_round(self, k: int) -> Path:
        """A fresh directory for round k; an unfinished one of an earlier attempt is moved
        aside first (never deleted: it may help to see where a crash happened)."""
        d = self.round_dir(k)
        if self.is_done(k):
            raise RunDirError(f"round {k} of {self.path} is already complete.")
        if d.exists():
            n = 1
            while (aside := d.with_name(f"{d.name}.interrupted-{n}")).exists():
                n += 1
            os.replace(d, aside)
        for later in self._round_dirs():
            if later > k and not self.is_done(later):
                shutil.rmtree(self.round_dir(later))  # cannot exist without round k; be safe
        d.mkdir(parents=True)
        return d

    def saver(self, d: Path, stem: str) -> Callable[[int, str, Any], None]:
        """The `on_attempt` of `converse.check_and_repair` for round folder `d`: attempt 0 as
        `<stem>.pol`, repair N as `<stem>.repair-N.pol`, each with its check report beside it."""
        def save(attempt: int, text: str, result: Any) -> None:
            name = f"{stem}.pol" if attempt == 0 else f"{stem}.repair-{attempt}.pol"
            self.write(str((d / name).relative_to(self.path)), text)
            if result.report:
                self.write(str((d / (name[:-4] + ".check.txt")).relative_to(self.path)), result.report)
        return save

    def finish_round(self, k: int, metrics: dict) -> None:
        """Write the round's metrics, then its done marker (last, so the round counts only
        when everything else is in place)."""
        d = self.round_dir(k)
        write_json(d / "metrics.json", metrics)
        write_atomic(d / "done", time.strftime("%Y-%m-%dT%H:%M:%S%z") + "\n")

    def collect_exchanges(self, rounds: list[int]) -> None:
        """exchanges.jsonl: the exchanges of `rounds` (the complete ones), in order, so the
        whole run replays with `--llm replay:RUN`."""
        parts = []
        for k in rounds:
            f = self.round_dir(k) / "exchanges.jsonl"
            if f.is_file():
                parts.append(f.read_text(encoding="utf-8"))
        write_atomic(self.path / "exchanges.jsonl", "".join(parts))

    def metrics(self, k: int) -> dict:
        """Round k's metrics; `RunDirError` when they are not what `finish_round` writes
        (an object counting the round's LLM calls)."""
        path = self.round_dir(k) / "metrics.json"
        m = read_json(path)
        calls = m.get("llm", {}).get("calls") if isinstance(m, dict) and isinstance(m.get("llm"), dict) else None
        if isinstance(calls, bool) or not isinstance(calls, int):
            raise RunDirError(f"{path} is not the metrics of a complete round (no count of LLM calls); "
                              f"remove {self.round_dir(k) / 'done'} to run round {k} again.")
        return m

    def _round_dirs(self) -> list[int]:
        return sorted(int(m.group(1)) for p in self.path.iterdir() if (m := _ROUND.match(p.name)))

    # ---- files -------------------------------------------------------------------------

    def write(self, relpath: str, data: str | bytes) -> Path:
        target = self.path / relpath
        write_atomic(target, data)
        return target

    def read(self, relpath: str) -> Optional[str]:
        target = self.path / relpath
        return target.read_text(encoding="utf-8") if target.is_file() else None
