"""The environments polc knows, by name: `EnvSpec` (schema, maker, expert, metric,
seed ranges) and the registry that `get` and `names` read. The built-in environments
are added by the package (`polc.runtime.envs`); others add themselves with `add`."""

from __future__ import annotations

from dataclasses import dataclass
import contextlib
from typing import Any, Callable, Iterator, Optional, Protocol

import gymnasium as gym
import numpy as np

from polc.messages import Diagnostic
from polc.check.typed import TypedProgram

from .finite import FiniteActions
from .metric import RETURN, Metric
from .schema import EnvSchema, check_program_against, env_unusable, unknown_env

DEMO_SEEDS = range(0, 1000)
EVAL_SEEDS = range(10_000, 20_000)


class Expert(Protocol):
    """A privileged controller: `act` may read the simulator through `env.unwrapped`."""

    def reset(self) -> None: ...

    def act(self, env: gym.Env) -> dict[str, np.ndarray]: ...


@dataclass(frozen=True)
class EnvSpec:
    """An environment polc knows: its schema, how to make it, its expert, and
    how an episode is scored (`metric`: the return unless the paper says otherwise;
    `solved_at` and `success` when the environment defines them)."""

    schema: EnvSchema
    max_steps: int
    _expert: Callable[[gym.Env], Expert]
    demo_seeds: range = DEMO_SEEDS
    eval_seeds: range = EVAL_SEEDS
    metric: Metric = RETURN
    # The score at or above which an episode counts as solved (Car Racing: 900,
    # gymnasium's reward_threshold); `polc eval` reports the share of episodes there.
    solved_at: Optional[float] = None
    # The info key of a per-step success flag (Meta-World's "success"): an episode
    # succeeds when any of its steps reports it; `polc eval` reports the success rate.
    success: Optional[str] = None

    @property
    def name(self) -> str:
        return self.schema.name

    def make(self, seed: Optional[int] = None, render_mode: Optional[str] = None, **kw: Any) -> gym.Env:
        """`gymnasium.make(schema.env_id)` with its time limit; `seed` seeds the first reset().
        A non-finite action raises `NonFiniteAction` instead of stepping it (`finite.py`)."""
        return FiniteActions(gym.make(self.schema.env_id, render_mode=render_mode, seed=seed, **kw))

    def expert(self, env: gym.Env) -> Expert:
        return self._expert(env)


_REGISTRY: dict[str, EnvSpec] = {}


def add(spec: EnvSpec) -> EnvSpec:
    """Make `spec` known to `get` under its schema's name (idempotent: a name keeps its first spec)."""
    return _REGISTRY.setdefault(spec.name, spec)


def names() -> list[str]:
    """The names `get` knows."""
    return sorted(_REGISTRY)


def get(name: str, near: Optional[str] = None) -> EnvSpec:
    """The environment called `name`: a registered one, else what a resolver makes
    of the name (`gym:ID`, an env.toml path: `gym_env.py`; `near` is a file whose folder
    may hold an env.toml); KeyError listing the known names otherwise. A resolver's
    `errors.EnvError` (a bad schema file, an id gymnasium cannot make) passes through."""
    if name in _REGISTRY:
        return _REGISTRY[name]
    for resolve in _RESOLVERS:
        spec = resolve(name, near)
        if spec is not None:
            return spec
    raise KeyError(f'unknown environment "{name}"; known: {", ".join(names())}, or gym:ID') from None


# Functions (name, near) -> EnvSpec or None, tried in order for names not registered.
_RESOLVERS: list[Callable[[str, Optional[str]], Optional[EnvSpec]]] = []


def add_resolver(resolve: Callable[[str, Optional[str]], Optional[EnvSpec]]) -> None:
    """Let `get` make specs for names no one registered (idempotent)."""
    if resolve not in _RESOLVERS:
        _RESOLVERS.append(resolve)


@contextlib.contextmanager
def using(spec: EnvSpec, *aliases: str) -> Iterator[EnvSpec]:
    """`get(spec.name)` (and `get(alias)`) is `spec` inside the block (a `gym:` env
    with the command's --schema and --env-kwargs), whatever it was before."""
    keys = dict.fromkeys((spec.name,) + aliases)
    before = {k: _REGISTRY.get(k) for k in keys}
    _REGISTRY.update({k: spec for k in keys})
    try:
        yield spec
    finally:
        for k, old in before.items():
            if old is None:
                _REGISTRY.pop(k, None)
            else:
                _REGISTRY[k] = old


def check_against_env(tp: TypedProgram, env_name: str) -> list[Diagnostic]:
    """`polc check --env NAME FILE`: located diagnostics for `tp`'s `obs` and `action`
    declarations against environment `env_name`'s schema (a `gym:` env's schema from
    an env.toml beside FILE); an unknown name gives one error (E0500) listing the
    environments polc knows, an environment that cannot be loaded one (E0508) saying why."""
    schema, failed = load_schema(env_name, near=tp.file or None)
    return failed if schema is None else check_program_against(tp, schema)


def load_schema(env_name: str, near: Optional[str] = None) -> tuple[Optional[EnvSchema], list[Diagnostic]]:
    """(the schema of environment `env_name`, []), or (None, the one diagnostic saying why
    not: E0500 an unknown name, E0508 one that cannot be loaded): what `check_against_env`
    checks against, for a caller that keeps the schema (the language server)."""
    from .errors import EnvError

    try:
        return get(env_name, near=near).schema, []
    except KeyError:
        return None, [unknown_env(env_name, names())]
    except EnvError as e:
        return None, [env_unusable(env_name, str(e))]


__all__ = ["DEMO_SEEDS", "EVAL_SEEDS", "EnvSpec", "Expert", "add", "add_resolver", "check_against_env", "get", "load_schema",
           "names", "using"]
