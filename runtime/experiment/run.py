"""Running an experiment: every condition of the task's table, each a cached step.

    exp = Experiment(TASKS["car_racing"], FULL, "results/car_racing", llm=None)
    result = exp.run()          # -> dict, also written as results.json
    result = exp.run(lambda exp, steps: run_on_ray(exp, steps, "auto"))  # the same, on Ray (`distributed`)

`plan()` lists the steps in the order one process runs them, each naming the steps
whose results it needs (fit -> evaluations and RL runs; an RL run's high budget
continues its low budget); `rows()` makes the table from their results.

The output directory holds every artefact a step produced:

    steps/<step>.json           a finished step's numbers (written last, atomically)
    refine/                     the `polc refine` run (its own run directory)
    structures/<key>.pol        the structures that were fitted
    fit/<key>.params            IL params
    rl/<key>/seed<k>/           the `polc rl` run of a structure with training seed k
                                (RLConfig.seed: the noise of its sampled actions);
                                low.params there is the params after the low budget
    es/<key>/seed<k>/           the `polc rl --engine es` run (ESConfig.seed: its perturbations)

RL. Each run is `polc rl`'s update with the budget's Adam step (`rl_lr`, 1e-3: the
paper's 7e-3 makes a 2000-reset run collapse) and, with `rl_keep="best"`, params kept
by a held-out evaluation every `val_every` updates on `val_episodes` validation seeds
(mean actions; never the evaluation seeds): a row's params are the best checkpoint
up to its budget. The held-out episodes are not counted in the row's resets, as
`polc rl` does not count them (docs/results/rl.md says how many they are). The ES rows
(`budget.es`) are `polc rl --engine es` from the same IL params, with the same budgets,
seeds, keep best and held-out evaluation, and its own defaults otherwise.

A step whose `steps/<step>.json` exists is not run again, so an interrupted
experiment continues where it stopped (`polc experiment` with the same -o), and
nothing already computed is lost. The budget is recorded in `experiment.json`;
a rerun with another budget in the same directory is refused.

Evaluation. Every row is scored on the same unseen seeds (the environment's first
`budget.seeds` evaluation seeds) with the policy's MEAN actions, the table's main
column, and again with SAMPLED actions (its declared noise, noise seed 0), shown
beside it: RL trains the sampled policy, IL fits the mean. Each evaluation
also records the share of episodes at the environment's "solved" score (Car
Racing: 900) and, where the environment reports it, the success rate
(Meta-World's `success`). An RL row pools `budget.rl_seeds` training runs: its
mean is the mean over seeds of each seed's mean over the tracks, its std the
spread (population std) of those means across seeds, and its shares pool every
seed's episodes.
"""

from __future__ import annotations

import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from ..refine.rundir import read_json, write_json
from .plan import Budget, Row, Structure, Task


class ExperimentError(Exception):
    """The experiment cannot go on; the message says what failed and what is kept."""


@dataclass(frozen=True)
class Step:
    """One cached step: `compute(deps)` gets the results of the steps named in `deps`
    by name and returns its own (JSON-able; saved as steps/<name>.json)."""

    name: str
    what: str                 # what the progress line says it does
    deps: tuple[str, ...]
    compute: Callable[[dict], dict]


class Experiment:
    """One task's experiment in `out` (see the module docstring)."""

    def __init__(self, task: Task, budget: Budget, out: str, llm: Optional[str] = None,
                 say: Callable[[str], None] = lambda s: print(s, file=sys.stderr, flush=True),
                 progress: bool = True, skip_rl: bool = False, folder: Optional[str] = None):
        from .. import envs
        from ..trace.evaluate import eval_seeds
        from ..refine.envspec import ShortEpisodes

        self.task, self.budget, self.out, self.llm = task, budget, Path(out), llm
        self.say, self.progress = say, progress
        self.rl = task.rl and not skip_rl  # skip_rl: only the expert and IL rows (RL steps are not run)
        base = self.base = envs.get(task.env)  # full episodes: what the demonstration (and recovery laps) are
        self.spec = ShortEpisodes(base, budget.max_steps) if budget.max_steps else base
        self.metric = base.metric
        self.solved_at = getattr(base, "solved_at", None)
        self.seeds = eval_seeds(base, budget.seeds)
        self.folder = Path(folder) if folder else task_folder(task)
        self.demo = self._demo_path()
        self.seconds: dict[str, float] = {}
        self._compiled: dict[str, Any] = {}  # structure key -> CompiledPolicy: one compile (and jit cache) per run
        # A step on Ray spreads its evaluation's seeds over tasks (`distributed`): spread(structure
        # or None for the expert, params, config) -> the EvalResult of every seed. None: in process.
        self.spread: Optional[Callable[[Optional[Structure], Any, Any], Any]] = None

    # ---- steps --------------------------------------------------------------------------

    def _cached(self, name: str) -> Optional[dict]:
        """The saved result of step `name`, or None when it has not finished."""
        path = self.out / "steps" / f"{name}.json"
        if not path.exists():
            return None
        try:
            done = read_json(path)
        except (OSError, ValueError) as e:
            self.say(f"polc: step '{name}' has an unreadable result ({e}); running it again.")
            return None
        self.seconds[name] = done.get("seconds", 0.0)
        return done

    def _save(self, name: str, result: dict) -> None:
        """Step `name` finished: its result saved (written last, atomically)."""
        path = self.out / "steps" / f"{name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, result)
        self.seconds[name] = result["seconds"]
        self.say(f"[{name}] done in {result['seconds']:.0f} s")

    def _step(self, name: str, what: str, compute: Callable[[], dict]) -> dict:
        """The cached result of step `name`, computing (and saving) it if needed."""
        done = self._cached(name)
        if done is not None:
            return done
        self.say(f"[{name}] {what}")
        result = self.timed(name, compute)
        self._save(name, result)
        return result

    @staticmethod
    def timed(name: str, compute: Callable[[], dict]) -> dict:
        """`compute()` with the seconds it took; a score of NaN actions fails the step."""
        t = time.monotonic()
        try:
            result = compute()
        except ValueError as e:  # a score of NaN actions is no score: the step fails, nothing is cached
            from ..envs.finite import NonFiniteAction  # only on this path: the envs import gymnasium

            if isinstance(e, NonFiniteAction):
                raise ExperimentError(f"step '{name}' failed: {e}") from None
            raise
        result["seconds"] = round(time.monotonic() - t, 1)
        return result

    def _demo_path(self) -> Path:
        from ..task import TaskError, load_task

        try:
            return Path(load_task(str(self.folder), self.task.env).demo)
        except TaskError as e:
            raise ExperimentError(str(e)) from None

    # ---- the plan -----------------------------------------------------------------------

    def plan(self) -> list[Step]:
        """Every step of the table, in the order one process runs them; each names the
        steps whose results it needs (the graph `--ray` runs)."""
        steps = [Step("expert", f"the expert on {len(self.seeds)} unseen seeds", (), self._expert)]
        if any(s.source == "refine" for s in self.task.structures):
            steps.append(Step("refine", f"the refinement loop on {self.folder}", (), self._refine))
        n = len(self.seeds)
        for s in self.task.structures:
            fit = f"fit-{s.key}"
            what = (f"the refinement loop's own fit of its last round ({s.key}.pol)" if s.source == "refine"
                    else f"imitation learning: {s.key}.pol on {self.demo}")
            steps.append(Step(fit, what, ("refine",) if s.source == "refine" else (),
                              lambda deps, s=s: self._fit(s, deps.get("refine", {}))))
            steps.append(Step(f"eval-{s.key}-il", f"evaluating {s.key} (fit/{s.key}.params) on {n} unseen seeds",
                              (fit,), lambda deps, s=s, fit=fit: self._evaluate(s, deps[fit]["params"])))
            if not self.rl:
                continue
            for engine in self._engines():
                for label, resets in (("low", self.budget.low), ("high", self.budget.high)):
                    for k in range(self.budget.rl_seeds):
                        rl = f"{engine}-{s.key}-{label}-seed{k}"  # the high budget continues the low budget's run
                        deps = (fit,) if label == "low" else (fit, f"{engine}-{s.key}-low-seed{k}")
                        steps.append(Step(rl, f"{engine.upper()} of {s.key} to {resets} resets (training seed {k})",
                                          deps, lambda deps, s=s, fit=fit, label=label, resets=resets, k=k,
                                          engine=engine: self._rl(s, deps[fit]["params"], label, resets, k, engine)))
                        steps.append(Step(f"eval-{s.key}-{engine}-{label}-seed{k}",
                                          f"evaluating {s.key} ({engine}/{s.key}/seed{k}/{label}.params) on {n} "
                                          f"unseen seeds", (rl,),
                                          lambda deps, s=s, rl=rl: self._evaluate(s, deps[rl]["params"])))
        return steps

    def _engines(self) -> tuple[str, ...]:
        """The learners of the RL rows ("rl": the paper's objective) and the ES rows ("es")."""
        return ("rl", "es") if self.budget.es else ("rl",)

    def run(self, runner: Optional[Callable[["Experiment", list], dict]] = None) -> dict:
        """Every step, in this process or by `runner(self, steps)` -> each step's result
        (`distributed.run_on_ray`: side by side on a Ray cluster; passed in, so this module
        never imports the distributed one); the results (written to results.json etc. by `report`)."""
        self._claim()
        steps = self.plan()
        if runner is None:
            results: dict[str, dict] = {}
            for step in steps:
                results[step.name] = self._step(step.name, step.what,
                                                lambda step=step: step.compute({d: results[d] for d in step.deps}))
        else:
            results = runner(self, steps)
        return self.rows(results)

    def rows(self, results: dict[str, dict]) -> dict:
        """The table's rows from every step's result."""
        e = results["expert"]["eval"]
        rows = [Row("Expert demonstration", "expert", "demo", 0, 0, 0, *_ms(e), per_seed=e["values"],
                    note="the scripted/privileged expert that made the demonstration", **_shares(e, None))]
        refinement = results.get("refine", {})
        for s in self.task.structures:
            rows.extend(self._structure_rows(s, refinement, results))
        return {"rows": rows, "refinement": refinement}

    def _claim(self) -> None:
        """Record the budget; refuse a directory that holds another experiment."""
        self.out.mkdir(parents=True, exist_ok=True)
        path = self.out / "experiment.json"
        mine = {"task": self.task.name, "env": self.task.env, "budget": self.budget.to_json(), "llm": self.llm}
        if path.exists():
            theirs = read_json(path)
            if theirs != mine:
                raise ExperimentError(
                    f"'{self.out}' holds another experiment ({theirs.get('task')}, budget "
                    f"{'quick' if theirs.get('budget', {}).get('quick') else 'full'}, llm {theirs.get('llm')}); "
                    f"continue it with the same settings or choose another -o")
            self.say(f"continuing the experiment in {self.out} (finished steps are kept)")
        else:
            write_json(path, mine)

    # ---- rows -----------------------------------------------------------------------------

    def _structure_rows(self, s: Structure, refinement: dict, results: dict[str, dict]) -> list[Row]:
        calls = refinement.get("llm_calls", 0) if s.source == "refine" else 0
        resets0 = refinement.get("resets", 0) if s.source == "refine" else 0
        params = results[f"fit-{s.key}"]["params"]
        il = results[f"eval-{s.key}-il"]
        fit = results[f"fit-{s.key}"]
        rows = [Row(f"{s.label} + IL", s.key, "IL", 1 + _recovery_demos(fit, refinement, s.source == "refine"), calls,
                    resets0, *_ms(il["mean"]), *_ms(il["sampled"]), per_seed=il["mean"]["values"], params=params,
                    note=_kept(fit, refinement, s.source == "refine"), **_shares(il["mean"], il["sampled"]))]
        if not self.rl:
            return rows
        for engine in self._engines():
            stage = engine.upper()
            for label, budget in (("low", self.budget.low), ("high", self.budget.high)):
                runs, evals, notes = [], [], []
                for k in range(self.budget.rl_seeds):
                    rl = results[f"{engine}-{s.key}-{label}-seed{k}"]
                    ev = results[f"eval-{s.key}-{engine}-{label}-seed{k}"]
                    log = [r for r in read_json(self.out / engine / s.key / f"seed{k}" / "log.json")["log"]
                           if r["resets"] <= rl["resets"]]
                    runs.append(rl)
                    evals.append(ev)
                    notes.append(reached(log, self.task.threshold, resets0, stage))
                note = notes[0] if len(notes) == 1 else "; ".join(f"seed {k}: {n}" for k, n in enumerate(notes))
                mean, sampled = pooled([e["mean"] for e in evals]), pooled([e["sampled"] for e in evals])
                rows.append(Row(f"{s.label} + {stage}, {label} ({budget} resets)", s.key, stage, 1, calls,
                                resets0 + runs[0]["resets"], *_ms(mean), *_ms(sampled), per_seed=mean["values"],
                                params=runs[0]["params"], note=note, **_shares(mean, sampled),
                                training_seeds=len(evals), seed_means=mean["seed_means"]))
        return rows

    # ---- what the steps compute -----------------------------------------------------------

    def _expert(self, deps: dict) -> dict:
        from ..trace.evaluate import evaluate_expert

        if self.spread is not None:
            return {"eval": _scores(self.spread(None, None, None))}
        return {"eval": _scores(evaluate_expert(self.spec, self.seeds))}

    def _refine(self, deps: dict) -> dict:
        """Run (or continue) the refinement loop (`refine.entry`, what `polc refine` runs) on the
        task folder; its summary, digested."""
        from dataclasses import replace

        from ..cli import UsageError
        from ..refine.entry import Request, resume, start
        from ..refine.work import Settings, quick

        run = self.out / "refine"
        if (run / "run.json").exists():
            argv = ["refine", "--resume", str(run)]
            request = None
        else:
            argv = ["refine", str(self.folder), "-o", str(run)]
            argv += ["--quick"] if self.budget.refine_quick else []
            argv += ["--llm", self.llm] if self.llm else []
            settings = quick(Settings()) if self.budget.refine_quick else Settings()
            if self.budget.recovery:
                argv += ["--recovery", self.budget.recovery]
                settings = replace(settings, recovery=self.budget.recovery)
            request = Request(str(self.folder), settings, llm=self.llm, output=str(run))  # run.json: `polc refine TASK`
        try:
            outcome = resume(run) if request is None else start(request)
        except UsageError as e:
            code, errors = 2, [str(e)]  # bad usage, as polc refine exits
        else:
            code, errors = outcome.code, outcome.stderr
            for line in outcome.stdout:
                print(line)
        for line in errors:
            print(line, file=sys.stderr)
        if code != 0:
            raise ExperimentError(f"`polc {' '.join(argv)}` failed (exit {code}); its run directory {run} is "
                                  f"kept: fix the cause and run the experiment again to continue it")
        return digest_refinement(run, self.metric)

    def _structure_file(self, s: Structure, refinement: dict) -> Path:
        """The structure's .pol, copied into the output directory as its fit starts (what was
        fitted is kept, and a structure fixed after a failed fit is the one fitted next time)."""
        dest = self.out / "structures" / f"{s.key}.pol"
        src = Path(refinement["final_policy"]) if s.source == "refine" else self.folder / s.source
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
        self._compiled.pop(s.key, None)
        return dest

    def _policy(self, s: Structure):
        if s.key not in self._compiled:
            import polc

            self._compiled[s.key] = polc.load(str(self.out / "structures" / f"{s.key}.pol")).compile()
        return self._compiled[s.key]

    def _fit(self, s: Structure, refinement: dict) -> dict:
        """IL params of `s` (relative to the output directory). The refined structure's are
        the refinement loop's own fit of its final round."""
        from ..io.params import save_params

        self._structure_file(s, refinement)
        dest = self.out / "fit" / f"{s.key}.params"
        dest.parent.mkdir(parents=True, exist_ok=True)
        if s.source == "refine":
            shutil.copyfile(refinement["final_params"], dest)
            return {"params": str(dest.relative_to(self.out)), "from": refinement["final_params"]}
        from ..il.train import FitConfig, fit, load_demos
        from ..io.table import TableError, read_table

        policy = self._policy(s)
        b = self.budget
        config = FitConfig(restarts=b.restarts, max_epochs=b.max_epochs, patience=b.patience)
        try:
            demos = read_table(str(self.demo))
        except TableError as e:  # a damaged demonstration stops the experiment, saying which file
            raise ExperimentError(f"the demonstration cannot be used: {e}") from None
        result = fit(policy, load_demos(demos, policy.program), config, progress=self.progress)
        recovery = None
        if b.recovery:  # fitted again with the recovery laps; the better of the two on training seeds
            result, recovery = self._with_recovery(policy, result, demos, config)
        check, choice = self._keep_better(policy, result.params, demos)
        info = result.info(demos=str(self.demo), keep=choice.to_json(),
                           **({"closed_loop": check.to_json()} if check is not None else {}),
                           **({"recovery": recovery} if recovery is not None else {}))
        params = result.params
        if choice.kept == "declared":  # as `polc fit`: the declared weights, the fit kept beside them
            import jax

            save_params(str(dest.with_suffix(".fitted.params")), policy, result.params, info)
            params = policy.init(jax.random.PRNGKey(0))
        save_params(str(dest), policy, params, info)
        return {"params": str(dest.relative_to(self.out)), "fit": info}

    def _with_recovery(self, policy, clean, demos, config) -> tuple[Any, dict]:
        """`Budget.recovery`: the recovery laps (recorded once as recovery.parquet in the output
        directory, on the demonstration's own seeds), a fit to them and the demonstration as one,
        and the better of it and `clean` on the closed-loop check's training seeds (both
        scored there, mean actions; never the evaluation seeds): (the FitResult kept, its record)."""
        import numpy as np

        from ..il.closed_loop import training_seeds
        from ..il.recovery import RECOVERY_FILE, Recovery, concat_demos, record_recovery
        from ..il.train import fit, load_demos
        from ..io.table import read_table
        from ..trace.evaluate import evaluate_many
        from ..trace.rollout import RolloutConfig
        from ..trace.vector import default_n_envs

        b = self.budget
        used = [s for s in (demos.metadata or {}).get("seeds") or [] if isinstance(s, int)]
        try:
            path = record_recovery(self.base, Recovery(b.recovery), used, str(self.out / RECOVERY_FILE))
        except ValueError as e:
            raise ExperimentError(f"--recovery {b.recovery}: {e}") from None
        laps = read_table(path)
        mixed = fit(policy, concat_demos([load_demos(demos, policy.program), load_demos(laps, policy.program)]),
                    config, progress=self.progress)
        seeds = training_seeds(self.spec, max(b.il_check, 1), used)
        plain, with_laps = (float(np.mean(r.values)) for r in evaluate_many(
            policy, [clean.params, mixed.params], self.spec, seeds, RolloutConfig(n_envs=default_n_envs(len(seeds)))))
        better = with_laps > plain if self.metric.higher_is_better else with_laps < plain
        record = {"demos": [RECOVERY_FILE], "perturb": b.recovery, "laps": len(laps.metadata.get("seeds") or []),
                  "seeds": seeds,
                  "clean": round(plain, 4), "with_recovery": round(with_laps, 4),
                  "kept": "with_recovery" if better else "clean"}
        return (mixed if better else clean), record

    def _keep_better(self, policy, fitted_params, demos):
        """`polc fit`'s closed-loop check and choice (`Budget.il_keep`, `Budget.il_check` training
        seeds outside the demonstration's; never the evaluation seeds): (ClosedLoop or None, Choice)."""
        from ..il.closed_loop import choose, closed_loop_check, training_seeds

        b = self.budget
        if not b.il_check:
            return None, choose(None, b.il_keep)
        used = [s for s in (demos.metadata or {}).get("seeds") or [] if isinstance(s, int)]
        check = closed_loop_check(policy, fitted_params, self.spec, training_seeds(self.spec, b.il_check, used))
        return check, choose(check, b.il_keep)

    def _evaluate(self, s: Structure, params_file: str) -> dict:
        """`s` with the params in `params_file` on the unseen seeds, mean and sampled actions."""
        from ..trace.evaluate import evaluate
        from ..io.params import load_params
        from ..trace.rollout import RolloutConfig
        from ..trace.vector import default_n_envs

        policy = self._policy(s)
        params = load_params(str(self.out / params_file), policy)
        n = default_n_envs(len(self.seeds))

        def run(config):
            if self.spread is not None:  # a step on Ray: its seeds spread over tasks
                return self.spread(s, params, config)
            return evaluate(policy, params, self.spec, self.seeds, config)

        mean = run(RolloutConfig(n_envs=n))
        sampled = None
        if all(a.std is not None for a in policy.program.actions):
            sampled = _scores(run(RolloutConfig(n_envs=n, sample=True)))
        return {"params": params_file, "mean": _scores(mean), "sampled": sampled}

    def _rl(self, s: Structure, params_file: str, label: str, resets: int, seed: int, engine: str = "rl") -> dict:
        """RL ("rl": the paper's objective; "es": evolution strategies) of `s` from its IL params
        up to `resets` with training seed `seed`; the low budget's params are kept as
        <engine>/<key>/seed<k>/low.params and the high budget continues the same run."""
        from ..io.params import load_params
        from ..rl import es
        from ..rl.train import PARAMS, RLConfig, train
        from ..trace.vector import default_n_envs

        policy = self._policy(s)
        start = load_params(str(self.out / params_file), policy)
        e = self.budget.episodes_per_update
        b = self.budget
        directory = self.out / engine / s.key / f"seed{seed}"
        if engine == "es":
            config = es.ESConfig(resets=resets, population=e, seed=seed, keep=b.rl_keep, val_every=b.val_every,
                                 val_episodes=b.val_episodes)
            result = es.train(policy, start, self.spec, config, str(directory), resume=True,
                              start={"file": params_file}, progress=self.progress)
        else:
            config = RLConfig(resets=resets, episodes_per_update=e, n_envs=default_n_envs(e), seed=seed,
                              lr=b.rl_lr, keep=b.rl_keep, val_every=b.val_every, val_episodes=b.val_episodes)
            result = train(policy, start, self.spec, config, str(directory), resume=True,
                           start={"file": params_file}, progress=self.progress)
        dest = directory / f"{label}.params"
        shutil.copyfile(directory / PARAMS, dest)
        return {"params": str(dest.relative_to(self.out)), "resets": result.log["resets"]}


def task_folder(task: Task) -> Path:
    """The task's folder: relative to the working directory, else to the checkout
    polc runs from (the examples are not installed with the package)."""
    here = Path(task.folder)
    if here.exists():
        return here
    import polc

    checkout = Path(polc.__file__).resolve().parents[1] / task.folder
    return checkout if checkout.exists() else here


def _kept(fit: dict, refinement: dict, refined: bool) -> str:
    """The IL row's note: which weights were kept and why (the loop's last round for the
    refined structure), or "" for a step cached before keep-better; with recovery laps,
    which fit (with or without them) and the recording's file."""
    if refined:
        rounds = refinement.get("rounds") or [{}]
        keep = rounds[-1].get("keep") or {}
    else:
        keep = (fit.get("fit") or {}).get("keep") or {}
    note = f"the {keep['kept']} weights: {keep['reason']}" if keep.get("kept") and keep.get("reason") else ""
    rec = _recovery_of(fit, refinement, refined)
    if rec and "clean" in rec:
        which = "with" if rec["kept"] == "with_recovery" else "without"
        note += ((("; " if note else "") + f"fitted {which} the recovery laps {', '.join(rec['demos'])} "
                  f"(--perturb {rec['perturb']}): {rec['with_recovery']:.4g} with them, {rec['clean']:.4g} "
                  "without on the training seeds"))
    return note


def _recovery_of(fit: dict, refinement: dict, refined: bool) -> dict:
    """The recovery record of a row's fit (the loop's last round for the refined structure), or {}."""
    if refined:
        return ((refinement.get("rounds") or [{}])[-1].get("recovery")) or {}
    return (fit.get("fit") or {}).get("recovery") or {}


def _recovery_demos(fit: dict, refinement: dict, refined: bool) -> int:
    """The recovery laps a row's fit used (0 when it was fitted to the demonstration alone)."""
    rec = _recovery_of(fit, refinement, refined)
    if rec.get("kept") != "with_recovery":
        return 0
    return int(rec.get("laps") or 1)


def _scores(ev) -> dict:
    """An EvalResult as JSON: the metric per seed, its mean and std, the returns, and
    (where the env defines them) which episodes were solved / succeeded and their share."""
    import numpy as np

    values = np.asarray(ev.values, float)
    out = {"seeds": [int(x) for x in ev.seeds], "values": [round(float(v), 4) for v in values],
           "mean": round(float(values.mean()), 4), "std": round(float(values.std()), 4),
           "returns": [round(float(r), 2) for r in ev.returns]}
    if ev.solved is not None:
        out.update(solved=[bool(x) for x in ev.solved], solved_share=round(ev.solved_share, 4))
    if ev.successes is not None:
        out.update(successes=[bool(x) for x in ev.successes], success_rate=round(ev.success_rate, 4))
    return out


def pooled(runs: list) -> Optional[dict]:
    """Several training seeds' `_scores` on the same tracks as one: `mean` is the mean
    over seeds of each seed's mean, `std` the spread (population std) of those means
    (the track std when there is one seed), `values` the per-track mean over seeds,
    and the solved/success shares pool every seed's episodes."""
    import numpy as np

    if any(r is None for r in runs):
        return None
    if len(runs) == 1:
        return {**runs[0], "seed_means": [runs[0]["mean"]]}
    means = np.asarray([r["mean"] for r in runs], float)
    out = {"seeds": runs[0]["seeds"], "values": [round(float(v), 4) for v in np.mean([r["values"] for r in runs], 0)],
           "mean": round(float(means.mean()), 4), "std": round(float(means.std()), 4),
           "seed_means": [round(float(m), 4) for m in means], "track_stds": [r["std"] for r in runs]}
    for key, share in (("solved", "solved_share"), ("successes", "success_rate")):
        if all(key in r for r in runs):
            out[share] = round(float(np.mean([r[key] for r in runs])), 4)
    return out


def _ms(scores: Optional[dict]) -> tuple[Optional[float], Optional[float]]:
    return (None, None) if scores is None else (scores["mean"], scores["std"])


def _shares(mean: Optional[dict], sampled: Optional[dict]) -> dict:
    """Row keyword arguments: the solved share and success rate of both action modes."""
    get = lambda d, k: None if d is None else d.get(k)  # noqa: E731
    return {"solved_share": get(mean, "solved_share"), "success_rate": get(mean, "success_rate"),
            "sampled_solved_share": get(sampled, "solved_share"), "sampled_success_rate": get(sampled, "success_rate")}


# Updates averaged before a threshold counts as reached: 5 updates are 100 training
# episodes on 5 tracks, so one easy track does not count as reaching it.
SMOOTH = 5


def first_reached(log: list, threshold: Optional[float], smooth: int = SMOOTH) -> Optional[int]:
    """Resets at the first update where the mean training return of the last `smooth`
    updates is at least `threshold` (None: never, or no threshold). A run of fewer
    updates (a quick run) is averaged over all of them."""
    smooth = min(smooth, len(log))
    if threshold is None or not log:
        return None
    returns = [r["return_mean"] for r in log]
    for i in range(smooth - 1, len(log)):
        if sum(returns[i - smooth + 1:i + 1]) / smooth >= threshold:
            return log[i]["resets"]
    return None


def reached(log: list, threshold: Optional[float], before: int = 0, learner: str = "RL") -> str:
    """The table's note on an RL or ES run (`learner`); `before` resets (refinement) are added to the count."""
    if threshold is None:
        return ""
    first = first_reached(log, threshold)
    window = min(SMOOTH, len(log))
    what = f"mean training return over {window} update{'s' if window != 1 else ''}"
    if first is None:
        last = sum(r["return_mean"] for r in log[-SMOOTH:]) / max(1, len(log[-SMOOTH:]))
        return f"{what} never reached {threshold:g} (last {last:.1f})"
    extra = f" ({first} of {learner} + {before} of refinement)" if before else ""
    return f"{what} first reached {threshold:g} after {first + before} resets{extra}"


def digest_refinement(run: Path, metric: Any) -> dict:
    """What the experiment needs from a `polc refine` run directory: the final structure
    and its params, LLM calls and resets, and the metric per round."""
    summary = read_json(run / "summary.json")
    rounds = [r for r in summary.get("rounds", []) if r.get("eval")]
    if not rounds:
        raise ExperimentError(f"the refinement run {run} evaluated no round; see {run}/summary.json")
    last = rounds[-1]["round"]
    final = run / f"round_{last:02d}"
    for name in ("policy.pol", "params.json"):
        if not (final / name).exists():
            raise ExperimentError(f"the refinement run's last evaluated round has no {name} ({final})")
    totals = summary.get("totals", {})
    return {
        "run": str(run), "llm": summary.get("llm"), "scripted": bool(summary.get("scripted")),
        "notice": summary.get("notice"), "status": summary.get("status"),
        "llm_calls": int(totals.get("llm_calls", 0)), "resets": int(totals.get("resets", 0)),
        "final_round": last, "final_policy": str(final / "policy.pol"), "final_params": str(final / "params.json"),
        "rounds": [{"round": r["round"], "mean": r["eval"]["mean"], "std": r["eval"]["std"],
                    "seeds": r["eval"].get("seeds"), "move": (r.get("move") or {}).get("kind"),
                    "structure_sha256": r.get("structure_sha256"), "keep": r.get("keep"),
                    **({"recovery": r["recovery"]} if r.get("recovery") else {})} for r in rounds],
        "metric": metric.key,
    }


__all__ = ["Experiment", "ExperimentError", "digest_refinement"]
