"""Training a compiled policy with brax's PPO (`brax.training.agents.ppo.train`,
brax 0.14.2) on an MJX environment: `polc rl --engine brax`.

    result = train_brax(policy, params, "door_mjx", BraxConfig(num_envs=8, timesteps=20_000), "rl_brax/")

brax runs `evals` epochs (with `evals` > 1 it first evaluates the start
params, the curve's first point; with 1 it only evaluates at the end, which
saves compiling the evaluation a second time: brax 0.14.2 under jax 0.9.2
compiles it again for its second call); after each epoch it hands us the params
(`policy_params_fn`) and then the metrics of a deterministic evaluation on
`eval_envs` environments (`progress_fn`): return, the environment's metric
(door_mjx: the episode's minimum handle-to-goal distance, summed from its
telescoping per-step metric), training steps per second. Each point prints a
progress line and rewrites the run directory:

    rl.params            the trained policy in polc's params format (`polc eval`,
                         `polc rollout` and the tracer load it unchanged)
    log.json             config, devices, start params, one record per point
    curve.png            evaluation return and metric against timesteps
    brax_checkpoint.msgpack  the commit point, written last and atomically

Resume (`resume=True`) restores from the checkpoint the policy params, the
critic params, brax's observation-normaliser state (unused: normalisation is
off), the timesteps done and the log, then trains the rest of the budget. It
does NOT restore Adam's moments or the environments' states: brax 0.14.2's
`ppo.train` only accepts params (`restore_params`) and always builds a fresh
optimiser and fresh environments. Session k draws its keys from seed +
10_000 k, so a resumed session never replays the first one's noise: the
continuation is valid but not bit-identical to an uninterrupted run (unlike
`polc rl`'s own engine).

Multi-device: brax pmaps each epoch over `jax.local_devices()` (num_envs /
devices environments on each, gradients averaged with `pmean`); num_envs must
be a multiple of the device count. With
`XLA_FLAGS=--xla_force_host_platform_device_count=2` set before jax is
imported, a CPU shows two devices; a GPU machine uses all its GPUs.

brax and MJX broadcast ranks implicitly; polc's tests run JAX with
`jax_numpy_rank_promotion="raise"`, so training runs under
`jax.numpy_rank_promotion("allow")` (the compiled policy broadcasts explicitly
either way).
"""

from __future__ import annotations

import json
import math
import os
import time
import warnings
from dataclasses import asdict, dataclass, fields
from typing import Any, NamedTuple, Optional

import numpy as np

from ..checkpoint import other_run
from .networks import (BraxError, _brax, clip_to_policy, make_env, policy_network_factory, verify_actions,
                       verify_memoryless)

PARAMS, LOG, CURVE, CHECKPOINT = "rl.params", "log.json", "curve.png", "brax_checkpoint.msgpack"
FORMAT = 1


@dataclass(frozen=True)
class BraxConfig:
    num_envs: int = 8                 # environments stepped together (split over the devices)
    timesteps: int = 20_000           # budget of environment steps (brax rounds up to whole epochs)
    episode_length: int = 500
    evals: int = 10                   # progress points (brax epochs); each writes outputs and a checkpoint
    unroll_length: int = 10           # steps per PPO trajectory segment
    minibatches: int = 4              # SGD steps per batch; a batch is num_envs x minibatches segments
    updates_per_batch: int = 2        # passes over each batch
    learning_rate: float = 3e-5             # measured on door_mjx: 3e-4 and 1e-4 diverged, 1e-5 crawled
    entropy_cost: float = 0.0         # the noise std is a policy weight: no entropy bonus by default
    discounting: float = 0.97
    clipping_epsilon: float = 0.2
    eval_envs: int = 16               # deterministic evaluation episodes per progress point
    value_hidden: tuple[int, ...] = (64, 64)
    seed: int = 0

    RESUMABLE = ("timesteps",)  # what a resumed run may change

    @property
    def steps_per_training_step(self) -> int:
        """Environment steps per PPO batch: num_envs x minibatches x unroll_length."""
        return self.num_envs * self.minibatches * self.unroll_length

    def verify(self, devices: int) -> None:
        """Raise `ValueError` naming the first bad setting."""
        for name in ("num_envs", "episode_length", "evals", "unroll_length", "minibatches", "updates_per_batch",
                     "eval_envs"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1 (got {getattr(self, name)})")
        if self.timesteps < 0:
            raise ValueError(f"the timesteps budget must be >= 0 (got {self.timesteps})")
        if self.num_envs % devices:
            raise ValueError(f"--num-envs {self.num_envs} must be a multiple of the {devices} devices JAX sees "
                             f"(brax gives each device num_envs / devices environments)")
        if not (self.learning_rate > 0 and math.isfinite(self.learning_rate)):
            raise ValueError(f"the learning rate must be positive (got {self.learning_rate})")
        if not 0.0 <= self.discounting <= 1.0:
            raise ValueError(f"the discount must lie in [0, 1] (got {self.discounting})")

    def differences(self, other: "BraxConfig") -> list[str]:
        return [f"{f.name} {getattr(self, f.name)} -> {getattr(other, f.name)}" for f in fields(self)
                if f.name not in self.RESUMABLE and getattr(self, f.name) != getattr(other, f.name)]


def config_from_json(doc: dict) -> BraxConfig:
    return BraxConfig(**dict(doc, value_hidden=tuple(doc["value_hidden"])))


class BraxResult(NamedTuple):
    params: Any       # the trained policy params (unconstrained), or the start params if nothing ran
    log: dict         # what log.json holds
    directory: str


# ---- checkpoint ---------------------------------------------------------------------


def _templates(policy, params, obs_size: int, config: BraxConfig):
    """(normalizer, policy, value) pytrees of the right structure, for restoring."""
    import jax
    import jax.numpy as jnp
    from brax.training.acme import running_statistics, specs

    networks = _brax()[1]
    value = networks.make_value_network(obs_size, hidden_layer_sizes=config.value_hidden)
    normalizer = running_statistics.init_state(specs.Array((obs_size,), jnp.dtype("float32")))
    return normalizer, params, value.init(jax.random.PRNGKey(0))


def save_checkpoint(directory: str, trio, meta: dict) -> None:
    """`brax_checkpoint.msgpack`: (normalizer, policy, value) params and the meta (JSON), atomically."""
    from flax import serialization

    from polc.util.files import write_atomic

    import jax

    params = jax.tree.map(np.asarray, serialization.to_state_dict(tuple(trio)))
    write_atomic(os.path.join(directory, CHECKPOINT),
                 serialization.msgpack_serialize({"params": params, "meta": json.dumps(meta)}))


def load_checkpoint(directory: str, templates) -> tuple[tuple, dict]:
    from flax import serialization

    path = os.path.join(directory, CHECKPOINT)
    try:
        with open(path, "rb") as f:
            body = serialization.msgpack_restore(f.read())
        meta = json.loads(body["meta"])
        trio = serialization.from_state_dict(tuple(templates), body["params"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise BraxError(f"cannot read the checkpoint '{path}': {e}") from None
    if meta.get("format") != FORMAT:
        raise BraxError(f"'{path}' is not a brax checkpoint of format {FORMAT}")
    return trio, meta


def exists(directory: str) -> bool:
    return os.path.exists(os.path.join(directory, CHECKPOINT))


def saved_config(directory: str) -> BraxConfig:
    """The config of the run in `directory` (for the CLI's resume checks)."""
    from flax import serialization

    with open(os.path.join(directory, CHECKPOINT), "rb") as f:
        return config_from_json(json.loads(serialization.msgpack_restore(f.read())["meta"])["config"])


# ---- the run ------------------------------------------------------------------------


def _record(total: int, metrics: dict, metric_key: Optional[str], elapsed: float) -> dict:
    r = lambda x: float(f"{float(x):.6g}")  # noqa: E731
    rec = {"timesteps": int(total), "return_mean": r(metrics.get("eval/episode_reward", np.nan)),
           "return_std": r(metrics.get("eval/episode_reward_std", np.nan))}
    if metric_key:
        rec["metric_mean"] = r(metrics.get(f"eval/episode_{metric_key}", np.nan))
        rec["metric_std"] = r(metrics.get(f"eval/episode_{metric_key}_std", np.nan))
    for k in ("sps", "policy_loss", "v_loss", "entropy_loss"):
        if f"training/{k}" in metrics:
            rec[k] = r(metrics[f"training/{k}"])
    rec["elapsed_s"] = round(elapsed, 1)
    return rec


def train_brax(policy, params, env: Any, config: BraxConfig, directory: str, resume: bool = False,
               start: Optional[dict] = None, progress: bool = False, schema: Any = None,
               metric: Any = None) -> BraxResult:
    """Train with brax's PPO in `directory` until `config.timesteps` are spent (module
    docstring). `env` is a name in `networks.BRAX_ENVS` (schema and metric from the
    registry) or a brax Env with its `schema` (and optional `metric`). Raises `BraxError`."""
    import jax

    from ...io.params import params_sha256, structure_sha256

    tp = policy.program
    verify_memoryless(tp)
    spec_schema, spec_metric, env_name = _resolve(env, schema, metric)
    verify_actions(tp, spec_schema)
    devices = jax.local_device_count()
    try:
        config.verify(devices)
    except ValueError as e:
        raise BraxError(str(e)) from None
    obs_size = sum(f.size for f in spec_schema.obs)
    meta = {"format": FORMAT, "policy": tp.name, "file": tp.file, "structure_sha256": structure_sha256(tp),
            "env": env_name, "start_params": dict(start or {}, sha256=params_sha256(params)),
            "config": asdict(config), "devices": devices, "timesteps": 0, "sessions": 0, "elapsed_s": 0.0,
            "log": []}
    restore = None
    if exists(directory):
        if not resume:
            raise BraxError(f"'{directory}' already holds a brax run ({CHECKPOINT}); pass --resume to continue "
                            f"it or choose another output directory")
        restore, meta = _resumed(directory, _templates(policy, params, obs_size, config), meta, config,
                                 check_start=bool(start and start.get("file")))
    remaining = config.timesteps - meta["timesteps"]
    if remaining <= 0:
        return BraxResult(restore[1] if restore else params, _log(meta), directory)
    brax_env = clip_to_policy(make_env(env) if isinstance(env, str) else env, policy, spec_schema)
    run = _Run(policy, config, meta, directory, spec_metric, progress)
    with jax.numpy_rank_promotion("allow"):
        final = run.train(brax_env, spec_schema, params, restore, remaining)
    return BraxResult(final, _log(meta), directory)


def _resolve(env: Any, schema: Any, metric: Any):
    if isinstance(env, str):
        from ...envs import get

        try:
            spec = get(env)
        except KeyError as e:
            raise BraxError(str(e.args[0])) from None
        return spec.schema, spec.metric, env
    if schema is None:
        raise BraxError("a brax Env given as an object needs its schema")
    return schema, metric, schema.name


def _resumed(directory: str, templates, meta: dict, config: BraxConfig, check_start: bool):
    """The checkpoint's (normalizer, policy, value) and meta, after checking it belongs
    to this policy, environment, settings and (when `check_start`) start params."""
    trio, saved = load_checkpoint(directory, templates)
    why = other_run(directory, saved, meta, config_from_json(saved["config"]).differences(config), check_start)
    if why:
        raise BraxError(why)
    saved["config"] = asdict(config)  # the new budget
    saved["devices"] = meta["devices"]
    return trio, saved


def _log(meta: dict) -> dict:
    keep = ("policy", "file", "env", "start_params", "config", "devices", "timesteps", "sessions", "elapsed_s",
            "log")
    return {"polc_rl_brax": 1, **{k: meta[k] for k in keep}, "params": PARAMS}


class _Run:
    """One session of `ppo.train` with its callbacks writing the run directory."""

    def __init__(self, policy, config: BraxConfig, meta: dict, directory: str, metric: Any, progress: bool):
        self.policy, self.config, self.meta, self.directory = policy, config, meta, directory
        self.metric = metric if metric is not None and not metric.is_return else None
        self.done0 = meta["timesteps"]
        self.elapsed0 = meta["elapsed_s"]
        self.t0 = time.perf_counter()
        self.latest = None  # (normalizer, policy, value) handed over by policy_params_fn
        self.console = None
        if progress:
            from rich.console import Console

            self.console = Console(stderr=True)

    def train(self, env, schema, params, restore, remaining: int):
        _, _, _, ppo, _ = _brax()
        c = self.config
        evals = max(1, min(c.evals, remaining // c.steps_per_training_step))
        self.meta["sessions"] += 1  # counted from the start: the checkpoints of this session say so
        factory = policy_network_factory(self.policy, schema, params, c.value_hidden)
        self.say(f"brax PPO on {self.meta['env']}: {remaining:,} timesteps in {evals} epochs, "
                 f"{c.num_envs} envs on {self.meta['devices']} device(s); compiling (a few minutes on a CPU)...")
        with warnings.catch_warnings():
            # brax 0.14.2 replicates its state with jax.device_put_replicated, which jax 0.9
            # deprecates (and 0.10 removes: why jax is pinned below 0.10).
            warnings.filterwarnings("ignore", message="jax.device_put_replicated is deprecated",
                                    category=DeprecationWarning)
            _, trio, _ = self._ppo(ppo, env, factory, evals, restore, remaining)
        return trio[1]

    def _ppo(self, ppo, env, factory, evals: int, restore, remaining: int):
        c = self.config
        return ppo.train(
            environment=env, num_timesteps=remaining, num_envs=c.num_envs, episode_length=c.episode_length,
            num_evals=evals + 1 if evals > 1 else 1, num_eval_envs=c.eval_envs, deterministic_eval=True,
            learning_rate=c.learning_rate, entropy_cost=c.entropy_cost, discounting=c.discounting,
            unroll_length=c.unroll_length, batch_size=c.num_envs, num_minibatches=c.minibatches,
            num_updates_per_batch=c.updates_per_batch, clipping_epsilon=c.clipping_epsilon,
            normalize_observations=False, num_resets_per_eval=1, network_factory=factory,
            seed=c.seed + 10_000 * (self.meta["sessions"] - 1), restore_params=restore, restore_value_fn=True,
            progress_fn=self.on_progress, policy_params_fn=self.on_params)

    def say(self, text: str) -> None:
        if self.console is not None:
            self.console.print(text, soft_wrap=True, highlight=False)

    def on_params(self, step: int, make_policy, trio) -> None:
        self.latest = trio

    def on_progress(self, step: int, metrics: dict) -> None:
        elapsed = self.elapsed0 + time.perf_counter() - self.t0
        total = self.done0 + int(step)
        if step == 0 and self.meta["log"]:
            return  # a resumed session's first evaluation repeats the checkpoint's last point
        rec = _record(total, metrics, self.metric.key if self.metric else None, elapsed)
        self.meta["log"].append(rec)
        line = f"timesteps {total:,}/{self.config.timesteps:,}  return {rec['return_mean']:.1f} ± {rec['return_std']:.1f}"
        if self.metric is not None:
            line += f"  {self.metric.name} {rec['metric_mean']:.4g}{' ' + self.metric.unit if self.metric.unit else ''}"
        if "sps" in rec:
            line += f"  {rec['sps']:,.0f} steps/s"
        self.say(line + f"  elapsed {int(elapsed) // 60}:{int(elapsed) % 60:02d}")
        if step == 0:
            return
        self.meta["timesteps"], self.meta["elapsed_s"] = total, round(elapsed, 1)
        self.write(self.latest)

    def write(self, trio) -> None:
        """The params file, log and curve first, the checkpoint last (the commit point)."""
        from polc.util.files import write_atomic

        from ...io.params import save_params

        os.makedirs(self.directory, exist_ok=True)
        meta = self.meta
        info = {"method": "rl-brax", "env": meta["env"], "timesteps": meta["timesteps"],
                "start_params": meta["start_params"], "config": meta["config"]}
        save_params(os.path.join(self.directory, PARAMS), self.policy, trio[1], info)
        write_atomic(os.path.join(self.directory, LOG), json.dumps(_log(meta), indent=1) + "\n")
        plot_curve(os.path.join(self.directory, CURVE), meta["log"], self.metric,
                   f"brax PPO: {os.path.basename(meta['file'] or meta['policy'])} on {meta['env']}")
        save_checkpoint(self.directory, trio, meta)


def plot_curve(path: str, records: list, metric: Any, title: str) -> None:
    """Evaluation return (and the metric, when the environment has one) against timesteps."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from ...plot.figures import save_png

    x = np.asarray([r["timesteps"] for r in records], float)
    panels = [("return_mean", "return_std", "return (deterministic evaluation)")]
    if metric is not None:
        panels.append(("metric_mean", "metric_std", f"{metric.name}" + (f" ({metric.unit})" if metric.unit else "")))
    fig = Figure(figsize=(7, 2.6 * len(panels) + 0.8), dpi=110)
    canvas = FigureCanvasAgg(fig)
    for i, (mean_k, std_k, label) in enumerate(panels):
        ax = fig.add_subplot(len(panels), 1, i + 1)
        mean = np.asarray([r[mean_k] for r in records], float)
        std = np.asarray([r[std_k] for r in records], float)
        ax.fill_between(x, mean - std, mean + std, alpha=0.25)
        ax.plot(x, mean, marker="o", markersize=3)
        ax.set_ylabel(label, fontsize=8)
        ax.grid(alpha=0.3)
        if i == 0:
            ax.set_title(title)
    fig.axes[-1].set_xlabel("environment steps")
    fig.tight_layout()
    save_png(canvas, path)
