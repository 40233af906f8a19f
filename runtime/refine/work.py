"""The non-LLM work of a refinement round: check, fit, traced rollout, evaluation.

Each function does one phase with the settings of the run and returns plain results;
the round state machine (loop.py) decides what happens next.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, NamedTuple, Optional, Sequence

from ..llm.base import DEFAULT_TIMEOUT
from .replies import DEFAULT_MAX_REPLY_CHARS

FEEDBACK_MODES = ("analysis", "table", "none")
MIN_REPLY_CHARS = 1000  # the smallest reply-size limit: a short program with its prose fits
UNSAVED = ("ray_address",)  # settings of one invocation: a resumed run takes them from its own flags
# Validation episodes per round by default: the model's one view of how the policy does beyond its
# two traced training seeds (issue 37), at 4 resets and 1-2 s a round on Car Racing (docs/llm.md).
DEFAULT_VALIDATION_EPISODES = 4
# Settings a run.json written before they existed lacks: the value such a run had, not today's default.
BEFORE_SAVED = {"validation_episodes": 0}
OPTIONAL = ("recovery", "expert")  # saved only when given: run.json of a run without them is as it was


@dataclass(frozen=True)
class Settings:
    """How a run refines. `rounds` counts the rounds that end in a move of the model; a
    revision made in the last of them is fitted and evaluated in one more, final round."""

    rounds: int = 6
    feedback: str = "analysis"       # analysis | table | none (the paper's ablation)
    rollout_episodes: int = 2        # traced episodes per round, on training seeds (resets)
    eval_episodes: int = 10          # untraced episodes per round on unseen seeds (not resets)
    # untraced episodes per round on validation seeds, their scores shown (resets)
    validation_episodes: int = DEFAULT_VALIDATION_EPISODES
    max_steps: Optional[int] = None  # episode limit, only ever shortening the environment's own; None: the environment's
    restarts: int = 3                # imitation learning: restarts, epochs, patience
    max_epochs: int = 2000
    patience: int = 100
    max_repairs: int = 5             # a revision failing `polc check` goes back this many times
    max_regenerations: int = 5       # a structure that cannot be fitted is replaced this many times
    max_tests: int = 2               # TEST moves per round before REVISE or STOP is required
    max_reply_retries: int = 3       # unusable replies sent back with the reason, per request
    max_reply_chars: int = DEFAULT_MAX_REPLY_CHARS  # a longer reply is cut, unusable, and sent back by its beginning only
    n_envs: int = 0                  # environments stepped at once; 0: every episode (up to 64)
    analysis_cpu_seconds: int = 60
    analysis_wall_seconds: float = 120.0
    output_chars: int = 6000         # how much the analysis is asked to print ...
    feedback_chars: int = 12000      # ... and how much of it is sent back
    llm_timeout: float = DEFAULT_TIMEOUT  # seconds for one LLM call, all its attempts together
    quick: bool = False
    candidates: int = 1              # revisions asked for per REVISE move; the best is kept (1: the paper's loop)
    seed: int = 0                    # the fit's seed and the candidates' order (seeds.json records every seed)
    keep: str = "best"               # polc fit --keep: best (declared weights when the fit is worse on the training seeds) | fitted
    # --recovery: DART recovery laps (`polc demos --perturb` text, "steer=0.3") recorded once on the
    # demonstration's seeds; each round fits with and without them and keeps the better on the
    # training seeds. "": off (the default, and what runs before it saved: absent from run.json).
    recovery: str = ""
    expert: str = ""                 # --expert FILE.py:FUNCTION that records them ("": the environment's own)
    # the Ray cluster a population's candidates are fitted and scored on (--ray, $POLC_RAY_ADDRESS);
    # None: in this process. Where the run is, not how it refines: never saved in run.json (UNSAVED).
    ray_address: Optional[str] = None

    def __post_init__(self) -> None:
        if self.feedback not in FEEDBACK_MODES:
            raise ValueError(f"feedback must be one of {', '.join(FEEDBACK_MODES)}, not {self.feedback!r}")
        if self.validation_episodes < 0:
            raise ValueError(f"--validation-episodes must be 0 or more, not {self.validation_episodes}")
        if self.rounds < 1 or self.rollout_episodes < 1 or self.eval_episodes < 1:
            raise ValueError("rounds, rollout episodes and eval episodes must be at least 1")
        if self.max_reply_chars < MIN_REPLY_CHARS:
            raise ValueError(f"--max-reply-chars must be at least {MIN_REPLY_CHARS}, not {self.max_reply_chars}")
        if self.candidates < 1:
            raise ValueError(f"--candidates must be at least 1, not {self.candidates}")
        if self.keep not in ("best", "fitted"):
            raise ValueError(f"keep must be best or fitted, not {self.keep!r}")
        if not (0 < self.llm_timeout < math.inf):
            raise ValueError(f"the LLM time limit must be a positive number of seconds, not {self.llm_timeout}")

    def to_json(self) -> dict:
        return {k: v for k, v in asdict(self).items()
                if k not in UNSAVED and not (k in OPTIONAL and v == "")}

    @classmethod
    def from_json(cls, data: dict) -> "Settings":
        """Settings saved by `to_json` (unknown keys ignored); ValueError naming a value of the
        wrong type (run.json is read back on --resume)."""
        values = {k: v for k, v in BEFORE_SAVED.items() if k not in data}
        for f in fields(cls):
            if f.name not in data or f.name in UNSAVED:
                continue
            v, default = data[f.name], f.default
            if default is None:  # Optional[int]
                ok = v is None or (isinstance(v, int) and not isinstance(v, bool))
            elif isinstance(default, bool):
                ok = isinstance(v, bool)
            elif isinstance(default, int):
                ok = isinstance(v, int) and not isinstance(v, bool)
            elif isinstance(default, float):
                ok = isinstance(v, (int, float)) and not isinstance(v, bool)
            else:
                ok = isinstance(v, type(default))
            if not ok:
                want = ("an integer or null" if default is None else "true or false" if isinstance(default, bool)
                        else "an integer" if isinstance(default, int) else "a number" if isinstance(default, float)
                        else "a string")
                raise ValueError(f"setting {f.name} is {json.dumps(v)[:40]}, not {want}")
            values[f.name] = v
        return cls(**values)


# Fewer, shorter episodes and a short fit: the whole loop in about a minute. Returns of cut
# episodes are not comparable with full ones (a lap takes about 600-900 steps). max_steps
# cuts longer episodes only: an environment whose own limit is shorter (Reacher-v5: 50)
# keeps it (`environment`).
QUICK = dict(rollout_episodes=1, eval_episodes=3, max_steps=300, restarts=1, max_epochs=300, patience=30,
             quick=True)
QUICK_ROUNDS = 2
QUICK_VALIDATION_EPISODES = 2  # at most: fewer than the 3 evaluation seeds, as the default's 4 are fewer than 10


def quick(settings: Settings) -> Settings:
    """`settings` cut down for --quick (at most QUICK_ROUNDS rounds and QUICK_VALIDATION_EPISODES
    validation episodes a round; `--validation-episodes 0` stays off)."""
    return replace(settings, rounds=min(settings.rounds, QUICK_ROUNDS),
                   validation_episodes=min(settings.validation_episodes, QUICK_VALIDATION_EPISODES), **QUICK)


class FitFailed(Exception):
    """The structure could not be fitted (non-finite loss, divergence, missing columns)."""


class Checked(NamedTuple):
    program: Any          # polc.Program, or None when the check failed
    report: str           # rendered diagnostics: the errors, or the warnings of a passing program
    errors: int
    warnings: int


def check(text: str, file: str, env: str) -> Checked:
    """`polc check --env ENV` of a program text: errors stop it; warnings are reported."""
    import polc
    from polc.messages import render_all

    from ..envs import check_against_env

    try:
        program = polc.loads(text, file)
    except polc.PolError as e:
        diags = list(e.diagnostics)
        return Checked(None, render_all(diags, text), sum(d.is_error for d in diags),
                       sum(not d.is_error for d in diags))
    diags = list(program.warnings) + check_against_env(program.typed, env)
    errors = sum(d.is_error for d in diags)
    return Checked(None if errors else program, render_all(diags, text) if diags else "", errors,
                   len(diags) - errors)


def environment(env: str, settings: Settings):
    """The environment `env`, its episodes cut at `settings.max_steps` when that is shorter
    than its own limit (never lengthened: --quick's 300 leaves Reacher-v5's 50 alone)."""
    from .. import envs
    from .envspec import ShortEpisodes

    spec = envs.get(env)
    if settings.max_steps and settings.max_steps < spec.max_steps:
        return ShortEpisodes(spec, settings.max_steps)
    return spec


def rollout_seeds(spec: Any, demo_seeds: Sequence[int], n: int) -> list[int]:
    """The first `n` training seeds (the environment's demonstration range) that the
    demonstration itself did not use: tracks the structure was not fitted on, but never
    the unseen evaluation seeds."""
    used = set(int(s) for s in demo_seeds)
    return [s for s in spec.demo_seeds if s not in used][:n]


def validation_seeds(spec: Any, demo_seeds: Sequence[int], rollout: Sequence[int], n: int) -> list[int]:
    """The next `n` seeds of the environment's demonstration range after the traced rollout's:
    neither the demonstration's, nor the training seeds the model sees traced, nor the unseen
    evaluation seeds (a range of their own, 10000.. for the bundled environments)."""
    used = set(int(s) for s in demo_seeds) | set(int(s) for s in rollout)
    return [s for s in spec.demo_seeds if s not in used][:n]


def evaluate_on(fitted: "Fitted", spec: Any, seeds: Sequence[int], settings: Settings):
    """Untraced episodes of the fitted policy on `seeds`: an `EvalResult`."""
    from ..trace.evaluate import evaluate

    return evaluate(fitted.policy, fitted.params, spec, seeds, rollout_config(settings, len(seeds), trace=False))


class Fitted(NamedTuple):
    policy: Any
    params: dict
    info: dict       # FitResult.info(): losses, restarts, seconds
    weights: dict    # name -> constrained value (float or nested list)


def fit_program(program: Any, demo: Any, settings: Settings, more: Sequence[Any] = ()) -> Fitted:
    """Imitation learning of `program` on the demonstration table `demo` (and the tables in
    `more`, fitted as one with it: recovery laps); `FitFailed` with the reason when no
    restart produced finite weights."""
    import numpy as np

    from ..il.recovery import concat_demos
    from ..il.train import FitConfig, FitError, fit, load_demos

    policy = program.compile()
    config = FitConfig(restarts=settings.restarts, max_epochs=settings.max_epochs, patience=settings.patience,
                       seed=settings.seed)
    try:
        demos = load_demos(demo, policy.program)
        if more:
            demos = concat_demos([demos] + [load_demos(t, policy.program) for t in more])
        result = fit(policy, demos, config)
    except FitError as e:
        raise FitFailed(str(e)) from None
    constrained = policy.constrain(result.params)
    weights = {}
    for w in policy.program.weights:
        value = np.asarray(constrained[w.name], np.float64)
        if not np.all(np.isfinite(value)):
            raise FitFailed(f'the fitted weight "{w.name}" is not finite ({value.tolist()})')
        weights[w.name] = value.tolist()
    if not math.isfinite(result.best.val_loss):
        raise FitFailed(f"the best validation loss is {result.best.val_loss}")
    return Fitted(policy, result.params, result.info(), weights)


def rollout_config(settings: Settings, n: int, trace: bool):
    from ..trace.rollout import RolloutConfig

    from ..trace.vector import default_n_envs

    n_envs = settings.n_envs or default_n_envs(n)
    return RolloutConfig(n_envs=max(1, min(n_envs, n)), trace=trace)


def metric_of(spec: Any):
    """The environment's metric (`polc.runtime.envs.metric.Metric`): the return unless its
    spec names another (the door: the min handle-to-target distance, lower is better)."""
    from ..envs.metric import RETURN

    return getattr(spec, "metric", RETURN)


class Traced(NamedTuple):
    returns: list[float]  # per traced episode, in seed order
    scores: list[float]   # the environment's metric per traced episode (the returns for the return)
    successes: Optional[list[bool]] = None  # the env's success flag per episode, where it reports one


def traced_rollout(fitted: Fitted, spec: Any, seeds: Sequence[int], path: str, meta: dict,
                   settings: Settings) -> Traced:
    """Run one traced episode per seed into the Parquet trace `path`; their returns and
    the environment's metric of each, scored from the same step table."""
    import numpy as np

    from dataclasses import replace as _replace

    from ..io.table import TableWriter
    from ..trace.evaluate import SuccessLog
    from ..trace.rollout import TraceLayout, rollout

    metric = metric_of(spec)
    scores = np.zeros(len(seeds))

    def done(ep: Any) -> None:
        scores[ep.index] = metric.of_episode(ep.columns)
        writer.write_episode(ep.columns)

    key = getattr(spec, "success", None)
    log = SuccessLog(spec, key) if key else None  # the door's flag is read in this process
    config = rollout_config(settings, len(seeds), trace=True)
    writer = TableWriter(path, TraceLayout(fitted.policy.program, spec.schema).columns(), meta)
    try:
        result = rollout(fitted.policy, fitted.params, spec if log is None else log, seeds,
                         config if log is None else _replace(config, asynchronous=False), done)
    except BaseException:
        writer.abort()
        raise
    writer.close()
    return Traced([float(r) for r in result.returns], [float(v) for v in scores],
                  None if log is None else [bool(x) for x in log.of(seeds)])


def declared_scores(fitted: Fitted, spec: Any, seeds: Sequence[int], settings: Settings) -> list[float]:
    """The environment's metric per seed with the structure's declared weights (before
    fitting), mean actions, untraced: beside the fitted policy's on the same training seeds
    it says whether imitation learning helped (`polc fit`'s closed-loop check)."""
    import jax

    from ..trace.evaluate import evaluate

    declared = fitted.policy.init(jax.random.PRNGKey(0))
    result = evaluate(fitted.policy, declared, spec, list(seeds), rollout_config(settings, len(seeds), trace=False))
    return [float(v) for v in result.values]


def keep_choice(fitted_scores: Sequence[float], declared: Sequence[float], seeds: Sequence[int], metric: Any,
                env: str, keep: str):
    """`polc fit`'s choice (`il.closed_loop.choose`) from the loop's own rollouts of the fitted
    and the declared weights on the same training seeds: (ClosedLoop, Choice)."""
    import numpy as np

    from ..il.closed_loop import ClosedLoop, choose

    check = ClosedLoop(env, tuple(int(x) for x in seeds), np.asarray(declared, float),
                       np.asarray(fitted_scores, float), "return" if metric.is_return else metric.key,
                       metric.higher_is_better)
    return check, choose(check, keep)


def with_declared(fitted: Fitted, choice: Any) -> Fitted:
    """`fitted` with the structure's declared weights in place of the fit (the choice recorded)."""
    import jax
    import numpy as np

    params = fitted.policy.init(jax.random.PRNGKey(0))
    constrained = fitted.policy.constrain(params)
    weights = {w.name: np.asarray(constrained[w.name], np.float64).tolist() for w in fitted.policy.program.weights}
    return Fitted(fitted.policy, params, {**fitted.info, "keep": choice.to_json(), "fitted_weights": fitted.weights},
                  weights)


def training_scores(fits: Sequence[Fitted], spec: Any, seeds: Sequence[int], settings: Settings) -> list[list[float]]:
    """The environment's metric per seed of each fit of one structure on `seeds` (training
    seeds), mean actions, untraced, in one set of environments (`evaluate_many`)."""
    from ..trace.evaluate import evaluate_many

    results = evaluate_many(fits[0].policy, [f.params for f in fits], spec, list(seeds),
                            rollout_config(settings, len(seeds), trace=False))
    return [[float(v) for v in r.values] for r in results]


def evaluate_returns(fitted: Fitted, spec: Any, settings: Settings):
    """The environment's metric (and the return) over the first `eval_episodes` unseen
    evaluation seeds: an `EvalResult`."""
    from ..trace.evaluate import eval_seeds, evaluate

    seeds = eval_seeds(spec, settings.eval_episodes)
    return evaluate(fitted.policy, fitted.params, spec, seeds,
                    rollout_config(settings, len(seeds), trace=False))


def fmt_weights(weights: dict) -> str:
    """`k_look = 0.1442, v_max = 1.079, gains = [0.1, 0.2]` with 4 significant digits."""
    def num(v: Any) -> str:
        return f"[{', '.join(num(x) for x in v)}]" if isinstance(v, list) else f"{v:.4g}"

    return ", ".join(f"{k} = {num(v)}" for k, v in weights.items())
