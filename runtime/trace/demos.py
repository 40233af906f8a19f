"""Expert demonstrations: run an environment's expert and write the step table
(`polc demos ENV --episodes N --seed S [--perturb SIGMA] -o FILE`).

Episode k uses environment seed S + k; demonstration seeds must lie in the
environment's `demo_seeds` (0..999), which evaluation seeds never overlap.
Row t holds the observation the expert saw, the action it took, and the
reward / terminated / truncated that action produced (the final observation,
after which nothing acts, is not a row). Deterministic by seed.

Recovery data (DART, Laskey et al. 2017): with a `Perturbation`, the
environment is stepped with the expert's action plus Gaussian noise,
`executed = clip(expert + N(0, sigma^2), lo, hi)` independently per action
element, while the row records the expert's own action. The perturbed
trajectory drifts off the expert's path and the expert's corrections there are
what a fitted policy needs to learn to come back. Such a table has, beside
each `action.<name>` (recorded: the expert's, what `polc fit` imitates), an
`executed.<name>` column (what the environment was stepped with), and its
metadata says `"perturb": {"sigma": {action: sigma}, "noise_seed": ...}`.
The noise of episode k is drawn from `numpy.random.default_rng([noise_seed,
seed])`, so a perturbed demonstration is deterministic by seed too.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping, NamedTuple, Optional, Sequence

import numpy as np

from ..io.table import ColumnSpec, TableWriter, step_columns


class DemoEpisode(NamedTuple):
    seed: int
    ret: float
    length: int


class Perturbation(NamedTuple):
    """DART noise on the executed actions: a std per action name (in the action's
    own units; an action not named is executed as the expert chose it)."""

    sigma: Mapping[str, float]
    noise_seed: int = 0

    def meta(self) -> dict:
        return {"sigma": {k: float(v) for k, v in self.sigma.items()}, "noise_seed": int(self.noise_seed)}


def parse_perturb(text: str, action_names: Sequence[str], noise_seed: int = 0) -> Perturbation:
    """`--perturb 0.2` (every action) or `--perturb steer=0.3,gas=0.1` (the named
    ones). ValueError with a readable message otherwise."""
    def number(s: str, what: str) -> float:
        try:
            v = float(s)
        except ValueError:
            raise ValueError(f"--perturb {what}: {s!r} is not a number") from None
        if not math.isfinite(v) or v < 0:
            raise ValueError(f"--perturb {what}: the noise std must be finite and >= 0, not {s}")
        return v

    text = text.strip()
    if "=" not in text:
        v = number(text, "SIGMA")
        return Perturbation({n: v for n in action_names}, noise_seed)
    sigma: dict[str, float] = {}
    for part in text.split(","):
        name, eq, value = part.partition("=")
        name = name.strip()
        if not eq or name not in action_names:
            raise ValueError(f"--perturb takes SIGMA or NAME=SIGMA,...; {name or part!r} is not an action of the "
                             f"environment (its actions: {', '.join(action_names)})")
        if name in sigma:
            raise ValueError(f"--perturb gives the action {name!r} twice")
        sigma[name] = number(value.strip(), name)
    return Perturbation(sigma, noise_seed)


def demo_columns(schema: Any, perturbed: bool = False) -> tuple[ColumnSpec, ...]:
    """The table's columns: obs, the recorded actions, and with `perturbed` the executed ones."""
    body = [ColumnSpec("obs." + f.name, tuple(f.shape), "float32", f.doc, f.lo, f.hi) for f in schema.obs]
    body += [ColumnSpec("action." + f.name, tuple(f.shape), "float32", f.doc, f.lo, f.hi) for f in schema.actions]
    if perturbed:
        body += [ColumnSpec("executed." + f.name, tuple(f.shape), "float32",
                            f"the action the environment was stepped with: the expert's {f.name} plus DART noise, "
                            "clipped to its range", f.lo, f.hi) for f in schema.actions]
    return step_columns(body)


def _perturbed(action: Mapping[str, Any], fields: Sequence[Any], perturb: Perturbation,
               rng: np.random.Generator) -> dict[str, np.ndarray]:
    """The expert's action plus N(0, sigma^2) per element, clipped to each field's range."""
    out = {}
    for f in fields:
        a = np.asarray(action[f.name], np.float32).reshape(f.shape)
        s = float(perturb.sigma.get(f.name, 0.0))
        if s > 0:
            a = np.clip(a + rng.normal(0.0, s, size=f.shape), f.lo, f.hi).astype(np.float32)
        out[f.name] = np.asarray(a, np.float32)
    return out


def run_expert(spec: Any, seed: int, index: int = 0,
               perturb: Optional[Perturbation] = None) -> tuple[DemoEpisode, dict[str, np.ndarray]]:
    """One expert episode: its summary (the return of the executed actions) and
    its step-table columns (`executed.<name>` too when `perturb` is given)."""
    env = spec.make()
    fields = spec.schema.actions
    rng = np.random.default_rng([int(perturb.noise_seed), int(seed)]) if perturb is not None else None
    try:
        expert = spec.expert(env)
        expert.reset()
        obs, _ = env.reset(seed=seed)
        rows: dict[str, list] = {f"obs.{f.name}": [] for f in spec.schema.obs}
        rows.update({f"action.{f.name}": [] for f in fields})
        if perturb is not None:
            rows.update({f"executed.{f.name}": [] for f in fields})
        rewards, ends = [], []
        done = False
        while not done:
            action = expert.act(env)
            for f in spec.schema.obs:
                rows[f"obs.{f.name}"].append(obs[f.name])
            for f in fields:
                rows[f"action.{f.name}"].append(np.asarray(action[f.name], np.float32).reshape(f.shape))
            if perturb is not None:
                action = _perturbed(action, fields, perturb, rng)
                for f in fields:
                    rows[f"executed.{f.name}"].append(action[f.name])
            obs, reward, terminated, truncated, _ = env.step(action)
            rewards.append(reward)
            ends.append((terminated, truncated))
            done = terminated or truncated
    finally:
        env.close()
    n = len(rewards)
    e = np.asarray(ends, bool).reshape(n, 2)
    columns = {k: np.asarray(v, np.float32) for k, v in rows.items()}
    columns.update(episode=np.full(n, index, np.int32), step=np.arange(n, dtype=np.int32),
                   seed=np.full(n, seed, np.int64), reward=np.asarray(rewards, np.float32),
                   terminated=e[:, 0], truncated=e[:, 1])
    return DemoEpisode(seed, float(np.sum(np.asarray(rewards, np.float64))), n), columns


def write_demos(spec: Any, seeds: Sequence[int], writer: TableWriter,
                on_episode: Optional[Callable[[DemoEpisode], None]] = None,
                perturb: Optional[Perturbation] = None) -> list[DemoEpisode]:
    """Run the expert once per seed, writing each episode to `writer` (made with
    `demo_columns(spec.schema, perturb is not None)`); the caller closes it."""
    out = []
    for k, seed in enumerate(seeds):
        ep, columns = run_expert(spec, int(seed), k, perturb)
        writer.write_episode(columns)
        out.append(ep)
        if on_episode is not None:
            on_episode(ep)
    return out
