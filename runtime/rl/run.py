"""What the learners of `polc rl` share about a run directory: its outputs, the
held-out choice of `keep="best"`, resuming and progress. `train` (the paper's
objective) and `es.train` (evolution strategies) each keep their own update and
call these around it, so both runs leave the same files:

    rl.params       the current params (loads in `polc eval` / `polc rollout`); with
                    keep="best" the best by the held-out evaluation, and last.params the current
    log.json        config, start params, one record per update
    curve.png       mean training return against resets
    checkpoint.npz  params, optimiser state, counters, log (`checkpoint`): the commit point

A learner's config is a frozen dataclass with `from_saved(dict)` (the config a
checkpoint recorded) and `differences(other)` (the settings a resumed run may not
change), and the fields `Validator` reads.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict
from typing import Any, Callable, Optional

from . import checkpoint as ckpt
from .heldout import Validator

PARAMS, LAST, LOG, CURVE = "rl.params", "last.params", "log.json", "curve.png"
CURVE_EVERY = 5  # updates between redraws of curve.png (and after a run's last update)


def validate(validator: Validator, state: ckpt.TrainState, meta: dict, record: dict) -> ckpt.TrainState:
    """Evaluate the new params on the held-out seeds; keep them if they beat the best so far."""
    score = validator(state.params)
    record["val_score"] = score
    meta["validations"].append({"update": state.updates, "resets": state.resets, "score": score})
    if validator.better(score, meta["kept"]["score"]):
        meta["kept"] = dict(meta["kept"], update=state.updates, score=score)
        return state._replace(best=state.params)
    return state


def start_keep_best(validator: Optional[Validator], state: ckpt.TrainState, meta: dict,
                    actions: str = "mean") -> ckpt.TrainState:
    """With keep="best", score the start params on the held-out seeds (the first candidate)."""
    if validator is None or state.best is not None:
        return state
    score = validator(state.params)
    meta["kept"] = {"update": 0, "score": score, "seeds": validator.seeds, "actions": actions}
    meta["validations"] = [{"update": 0, "resets": 0, "score": score}]
    return state._replace(best=state.params)


def resumed(directory: str, fresh: ckpt.TrainState, meta: dict, config: Any, check_start: bool,
            error: type = ValueError) -> tuple[ckpt.TrainState, dict]:
    """The checkpoint's state and meta, after checking it belongs to this policy, config
    and (when `check_start`) start params, and that the same engine wrote it (meta
    "engine"; none: the polc engine); raises `error` with the reason."""
    try:
        engine = ckpt.read_meta(directory).get("engine", "polc")
        if engine != meta.get("engine", "polc"):
            raise error(f"the run in '{directory}' was trained by --engine {engine}, not --engine "
                        f"{meta.get('engine', 'polc')}; resume it with --engine {engine} or start a new run "
                        f"in another directory")
        state, saved = ckpt.load(directory, fresh.params, fresh.opt_state)
    except ckpt.CheckpointError as e:
        raise error(str(e)) from None
    differences = type(config).from_saved(saved["config"]).differences(config)
    why = ckpt.other_run(directory, saved, meta, differences, check_start)
    if why:
        raise error(why)
    saved["config"] = asdict(config)  # the new budget
    return state, saved


def threshold(spec: Any) -> Optional[float]:
    """The environment's "solved" return for the curve's dashed line, if gymnasium knows one."""
    import gymnasium as gym

    try:
        return gym.spec(spec.schema.env_id).reward_threshold
    except Exception:  # an env not registered with gymnasium has no threshold to draw
        return None


def run_log(meta: dict, state: ckpt.TrainState) -> dict:
    """What log.json holds."""
    out = {"polc_rl": 1, "policy": meta["policy"], "file": meta["file"], "env": meta["env"],
           "start_params": meta["start_params"], "config": meta["config"], "updates": state.updates,
           "resets": state.resets, "elapsed_s": round(state.elapsed, 1), "params": PARAMS}
    if "engine" in meta:
        out["engine"] = meta["engine"]
    if "kept" in meta:  # keep="best": which update rl.params holds, and every held-out evaluation
        out.update(kept=meta["kept"], validations=meta["validations"], last_params=LAST)
    return dict(out, log=meta["updates_log"])


def write_outputs(directory: str, policy, state: ckpt.TrainState, meta: dict, solved: Optional[float],
                  curve: bool = True, title: str = "RL", label: str = "mean return (sampled actions)") -> None:
    """The params files, log and (when `curve`) the curve first, the checkpoint last: the
    checkpoint is the commit point, and a resumed run rewrites the others identically."""
    import json

    from polc.util.files import write_atomic

    from ..io.params import save_params
    from .curve import plot_curve

    os.makedirs(directory, exist_ok=True)
    log = run_log(meta, state)
    info = {"method": "rl-" + meta["engine"] if "engine" in meta else "rl", "env": meta["env"], "updates": state.updates,
            "resets": state.resets, "start_params": meta["start_params"],
            "return_mean_last_update": log["log"][-1]["return_mean"], "config": meta["config"]}
    if "kept" in meta:
        save_params(os.path.join(directory, LAST), policy, state.params, info)
        info = dict(info, kept=meta["kept"])
    save_params(os.path.join(directory, PARAMS), policy, state.best if "kept" in meta else state.params, info)
    write_atomic(os.path.join(directory, LOG), json.dumps(log, indent=1) + "\n")
    if curve:
        plot_curve(os.path.join(directory, CURVE), log["log"],
                   f"{title}: {os.path.basename(meta['file'] or meta['policy'])} on {meta['env']}", solved, label)
    ckpt.save(directory, state, meta)


class Run:
    """One run directory of a learner, around its update loop:

        run = Run(directory, policy, spec, config, engine, error=RLError)
        state, meta = run.open(state, start, resume)      # a new run's meta, or the checkpoint's
        ...                                               # each update: state, record
        state, since = run.after_update(state, meta, record, since, bar, on_update)
        log = run_log(meta, state)

    `engine` is None for the paper's objective (its checkpoints predate the name) or the
    learner's name ("es"); `config` has `resets`, `episodes_per_update`, `keep` and the
    fields `Validator` reads."""

    def __init__(self, directory: str, policy, spec: Any, config: Any, engine: Optional[str] = None,
                 error: type = ValueError, title: str = "RL", label: str = "mean return (sampled actions)"):
        self.directory, self.policy, self.spec, self.config, self.engine = directory, policy, spec, config, engine
        self.error, self.title, self.label = error, title, label
        self.validator = Validator(policy, spec, config) if config.keep == "best" else None
        self.solved = threshold(spec)

    def open(self, state: ckpt.TrainState, start: Optional[dict], resume: bool) -> tuple[ckpt.TrainState, dict]:
        """The state and meta to go on from: `state` and a new meta, or with `resume` the
        checkpoint's (refused when the directory holds a run and `resume` is off); with
        keep="best" the start params scored on the held-out seeds."""
        from ..io.params import params_sha256, structure_sha256

        tp = self.policy.program
        meta = {"policy": tp.name, "file": tp.file, "structure_sha256": structure_sha256(tp),
                "env": self.spec.schema.name, "start_params": dict(start or {}, sha256=params_sha256(state.params)),
                "config": asdict(self.config), "updates_log": []}
        if self.engine is not None:
            meta = {"engine": self.engine, **meta}
        if ckpt.exists(self.directory):
            if not resume:
                raise self.error(f"'{self.directory}' already holds an RL run ({ckpt.NAME}); pass --resume to "
                                 f"continue it or choose another output directory")
            state, meta = resumed(self.directory, state, meta, self.config,
                                  check_start=bool(start and start.get("file")), error=self.error)
        state = start_keep_best(self.validator, state, meta, self.config.val_actions)
        return state, meta

    def after_update(self, state: ckpt.TrainState, meta: dict, record: dict, since: float, bar: "Bar",
                     on_update: Optional[Callable[[dict], None]] = None) -> tuple[ckpt.TrainState, float]:
        """After an update whose timed work ended at `since`: the held-out evaluation when due
        (its time counted in the run's), the record logged, every output written, progress;
        returns the state and when the next update's timing starts."""
        if self.validator is not None and self.validator.due(state):
            state = validate(self.validator, state, meta, record)
        now = time.perf_counter()
        state = state._replace(elapsed=state.elapsed + (now - since))
        meta["updates_log"].append(record)
        c = self.config
        last = state.resets + c.episodes_per_update > c.resets
        write_outputs(self.directory, self.policy, state, meta, self.solved,
                      curve=last or state.updates % CURVE_EVERY == 0, title=self.title, label=self.label)
        bar.updated(record)
        if on_update is not None:
            on_update(record)
        return state, now

    def kept(self, state: ckpt.TrainState):
        """The params a run returns: the best held-out ones with keep="best", else the last."""
        return state.best if self.validator is not None else state.params


class Bar:
    """Progress: resets used of the budget, the last update's mean return, elapsed seconds,
    and a line per update (`describe(record)`, the learner's own words)."""

    def __init__(self, enabled: bool, budget: int, state: ckpt.TrainState, describe: Callable[[dict], str],
                 label: str = "rl resets"):
        self.enabled, self.describe = enabled, describe
        self.elapsed0, self.t0, self.progress, self.task = state.elapsed, time.perf_counter(), None, None
        if enabled:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            self.progress = Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(),
                                     TextColumn("mean return {task.fields[ret]}  elapsed {task.fields[el]}"),
                                     console=Console(stderr=True))
            self.task = self.progress.add_task("rl", total=budget, completed=state.resets, ret="-",
                                               el=self._elapsed())

    def _elapsed(self) -> str:
        s = int(self.elapsed0 + time.perf_counter() - self.t0)
        return f"{s // 60}:{s % 60:02d}"

    def episode(self, *_: Any) -> None:
        if self.enabled:
            self.progress.update(self.task, advance=1, el=self._elapsed())

    def updated(self, record: dict) -> None:
        if self.enabled:
            val = f", held-out {record['val_score']:.4g}" if "val_score" in record else ""
            self.progress.update(self.task, completed=record["resets"], ret=f"{record['return_mean']:.1f}",
                                 el=self._elapsed())
            self.progress.console.print(self.describe(record) + val, soft_wrap=True)

    def __enter__(self) -> "Bar":
        if self.enabled:
            self.progress.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self.enabled:
            self.progress.__exit__(*exc)
