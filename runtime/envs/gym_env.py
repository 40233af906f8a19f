"""Any Gymnasium environment as a polc environment: `--env gym:ID` (any id
`gymnasium.make` accepts, `module:ID` included), named by a schema file or by
its own `Dict` spaces (docs/environments.md has the contract).

    spec = resolve("gym:Pendulum-v1", schema="pendulum/env.toml")
    env = spec.make()           # dict observations and dict actions in the schema's names
    spec = resolve("pendulum/env.toml")   # the same: an env.toml that names its env

`SchemaEnv` is the wrapper that turns the flat `Box` observation into the named
fields (each clipped to its declared range) and the named actions back into the
flat `Box` action (clipped to the env's bounds). An environment whose spaces are
`Dict`s of `Box`es needs no schema file: the keys are the names, the bounds the
ranges. Everything here is picklable (rollouts ship specs to worker processes).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import inspect
import json
import math
import os
import re
import sys
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

import gymnasium as gym
import numpy as np

from .errors import GymEnvError, NeedsSchema, SchemaFileError
from .finite import FiniteActions
from .metric import RETURN, Metric
from .registry import EnvSpec, add_resolver
from .schema import EnvSchema, Field
from .schema_file import FieldEntry, SchemaFile, is_pol_name, line_of_key, read_schema_file, starter_toml
from .user_code import announce_import
from .user_expert import no_expert

PREFIX = "gym:"
DEFAULT_MAX_STEPS = 1000  # an id with no TimeLimit of its own gets this one
_HUGE = 1e30  # Box bounds beyond this (e.g. float32's max) count as unbounded


@dataclass(frozen=True)
class Slot:
    """Where one named field lives: elements [start, stop) of the flat Box (None
    for a key of a Dict space), its shape, and its range."""

    name: str
    start: Optional[int]
    stop: Optional[int]
    shape: tuple[int, ...]
    lo: float
    hi: float
    doc: str
    clip: bool  # clip observations to [lo, hi] (a range narrower than the space's)
    echoes: tuple[str, ...] = ()  # the actions this observation echoes (the file's `echoes`)
    hidden: bool = False  # privileged: in the env's observation dict (expert, trace), never a policy's input


@dataclass(frozen=True)
class Layout:
    obs_dict: bool  # the env's observation space is a Dict (else a flat Box)
    act_dict: bool
    obs: tuple[Slot, ...]
    actions: tuple[Slot, ...]
    act_low: tuple[float, ...] = ()  # the flat action Box's bounds
    act_high: tuple[float, ...] = ()

    def fields(self) -> tuple[tuple[Field, ...], tuple[Field, ...]]:
        return (tuple(Field(s.name, s.shape, s.lo, s.hi, s.doc, s.echoes, s.hidden) for s in self.obs),
                tuple(Field(s.name, s.shape, s.lo, s.hi, s.doc) for s in self.actions))


# ---- names and spaces ---------------------------------------------------------------


def is_gym_name(name: str) -> bool:
    return name.startswith(PREFIX) or name.endswith(".toml")


def _bound(x: float) -> float:
    x = float(x)
    return math.copysign(math.inf, x) if abs(x) >= _HUGE else x


def _flat_box(space: gym.Space, what: str, env_id: str) -> gym.spaces.Box:
    if not isinstance(space, gym.spaces.Box) or len(space.shape) != 1:
        raise GymEnvError(f'the {what} space of "{env_id}" is {space}; polc names the components of a flat '
                          "(1-D) Box or the Box entries of a Dict space")
    return space


def _box_range(space: gym.spaces.Box, start: int, stop: int) -> tuple[float, float]:
    return _bound(np.min(space.low[start:stop])), _bound(np.max(space.high[start:stop]))


def _slot_from_entry(e: FieldEntry, space: gym.spaces.Box, path: str, kind: str, env_id: str,
                     taken: dict[int, str]) -> Slot:
    n = space.shape[0]
    if e.index is None:
        raise SchemaFileError(path, e.line, f'[{kind}.{e.name}] needs an index (an int, or [start, stop]) into '
                                            f'the flat {kind} Box of "{env_id}" (size {n})')
    start, stop = e.index
    if stop > n:
        raise SchemaFileError(path, e.line_of("index"), f'[{kind}.{e.name}] index {list(e.index) if not e.scalar else start} '
                                            f'is out of bounds: the {kind} Box of "{env_id}" has {n} components '
                                            f"(0..{n - 1})")
    for i in range(start, stop):
        if i in taken:
            raise SchemaFileError(path, e.line_of("index"), f'[{kind}.{e.name}] overlaps [{kind}.{taken[i]}] at component {i}; '
                                                "each component belongs to one field")
        taken[i] = e.name
    blo, bhi = _box_range(space, start, stop)
    lo = blo if e.lo is None else e.lo
    hi = bhi if e.hi is None else e.hi
    if kind == "actions" and (lo < blo - 1e-6 or hi > bhi + 1e-6):
        raise SchemaFileError(path, e.line_of("range"), f"[actions.{e.name}] range [{lo:g}, {hi:g}] is not inside the bounds "
                                            f'[{blo:g}, {bhi:g}] that "{env_id}" accepts')
    shape = () if e.scalar else (stop - start,)
    return Slot(e.name, start, stop, shape, lo, hi, e.doc, clip=e.lo is not None or e.hi is not None,
                echoes=e.echoes, hidden=e.hidden)


def _dict_slots(space: gym.spaces.Dict, entries: Sequence[FieldEntry], path: Optional[str], kind: str,
                env_id: str) -> tuple[Slot, ...]:
    by_name = {e.name: e for e in entries}
    for e in entries:
        if e.name not in space.spaces:
            raise SchemaFileError(path or "", e.line, f'"{env_id}" has no {kind} key "{e.name}"; its keys are '
                                                      + ", ".join(space.spaces))
        if e.index is not None:
            raise SchemaFileError(path or "", e.line_of("index"), f"[{kind}.{e.name}] has an index, but the {kind} space of "
                                                      f'"{env_id}" is a Dict: name its keys, without index')
    out = []
    for key, sub in space.spaces.items():
        if not isinstance(sub, gym.spaces.Box):
            raise GymEnvError(f'the {kind} entry "{key}" of "{env_id}" is {sub}; polc takes Box entries only')
        if not is_pol_name(key):
            raise GymEnvError(f'the {kind} key "{key}" of "{env_id}" is not a valid Pol name; wrap the env to '
                              "rename it")
        e = by_name.get(key)
        lo, hi = _bound(np.min(sub.low)), _bound(np.max(sub.high))
        if e is not None and e.lo is not None:
            if kind == "actions" and (e.lo < lo - 1e-6 or e.hi > hi + 1e-6):
                raise SchemaFileError(path or "", e.line_of("range"), f"[actions.{key}] range [{e.lo:g}, {e.hi:g}] is not "
                                                          f'inside the bounds [{lo:g}, {hi:g}] of "{env_id}"')
            lo, hi = e.lo, e.hi
        out.append(Slot(key, None, None, tuple(sub.shape), lo, hi, e.doc if e is not None else key,
                        clip=e is not None and e.lo is not None, echoes=e.echoes if e is not None else (),
                        hidden=e is not None and e.hidden))
    return tuple(out)


def _default_name(kind: str, i: int) -> str:
    return f"{'o' if kind == 'obs' else 'a'}{i}"


def starter_for(env: str, obs_space: gym.Space, act_space: gym.Space) -> str:
    """A schema file with one scalar field per component, named o0, o1, ... and a0, ..."""
    def rows(kind: str, space: gym.Space):
        if not isinstance(space, gym.spaces.Box) or len(space.shape) != 1:
            return []
        return [(_default_name(kind, i), i, _bound(space.low[i]), _bound(space.high[i]), f"component {i}")
                for i in range(space.shape[0])]

    return starter_toml(env, rows("obs", obs_space), rows("actions", act_space))


def layout_of(env_id: str, obs_space: gym.Space, act_space: gym.Space, schema: Optional[SchemaFile],
              env: str) -> Layout:
    """Match a schema file (or, with None, the spaces' own names) to the spaces."""
    path = schema.path if schema else None
    if schema is None and not (isinstance(obs_space, gym.spaces.Dict) and isinstance(act_space, gym.spaces.Dict)):
        raise NeedsSchema(
            f'"{env_id}" has a flat {"observation" if not isinstance(obs_space, gym.spaces.Dict) else "action"} '
            "space, whose components have no names: give --schema FILE.toml (or an env.toml in the task folder) "
            "naming them. A starter file, to rename and document:\n\n" + starter_for(env, obs_space, act_space))
    out = {}
    for kind, space in (("obs", obs_space), ("actions", act_space)):
        entries = getattr(schema, kind) if schema else ()
        if isinstance(space, gym.spaces.Dict):
            out[kind] = _dict_slots(space, entries, path, kind, env_id)
            continue
        box = _flat_box(space, "observation" if kind == "obs" else "action", env_id)
        taken: dict[int, str] = {}
        out[kind] = tuple(_slot_from_entry(e, box, path or "", kind, env_id, taken) for e in entries)
        if kind == "actions":
            missing = [i for i in range(box.shape[0]) if i not in taken]
            if missing:
                raise SchemaFileError(path or "", None, f'no action covers component(s) {missing} of the action Box '
                                                        f'of "{env_id}"; every action component needs a field '
                                                        "([actions.NAME] with index = ...)")
    act_low = act_high = ()
    if isinstance(act_space, gym.spaces.Box):
        act_low = tuple(float(x) for x in act_space.low)
        act_high = tuple(float(x) for x in act_space.high)
    return Layout(isinstance(obs_space, gym.spaces.Dict), isinstance(act_space, gym.spaces.Dict),
                  out["obs"], out["actions"], act_low, act_high)


# ---- the wrapper ----------------------------------------------------------------------


class SchemaEnv(gym.Wrapper):
    """Dict observations and dict actions in the schema's names; `seed` seeds the
    first reset. `last_obs` is the latest observation (a user expert reads it)."""

    def __init__(self, env: gym.Env, layout: Layout, seed: Optional[int] = None):
        super().__init__(env)
        self.layout = layout
        self._first_seed = seed
        self.observation_space = gym.spaces.Dict({
            s.name: gym.spaces.Box(s.lo, s.hi, shape=s.shape, dtype=np.float32) for s in layout.obs})
        self.action_space = gym.spaces.Dict({
            s.name: gym.spaces.Box(s.lo, s.hi, shape=s.shape, dtype=np.float32) for s in layout.actions})
        self.last_obs: Optional[dict] = None

    def observation(self, raw: Any) -> dict[str, np.ndarray]:
        out = {}
        for s in self.layout.obs:
            v = np.asarray(raw[s.name] if self.layout.obs_dict else np.asarray(raw)[s.start:s.stop], np.float32)
            v = v.reshape(s.shape)
            if s.clip:
                v = np.clip(v, s.lo, s.hi)
            out[s.name] = np.asarray(v, np.float32)
        self.last_obs = out
        return out

    def raw_action(self, action: Any) -> Any:
        """The env's own action from named actions (a raw array passes through)."""
        if not isinstance(action, Mapping):
            return np.asarray(action, self.env.action_space.dtype)
        if self.layout.act_dict:
            return {s.name: np.clip(np.asarray(action[s.name], np.float32).reshape(s.shape), s.lo, s.hi)
                    for s in self.layout.actions}
        flat = np.zeros(len(self.layout.act_low), np.float64)
        for s in self.layout.actions:
            flat[s.start:s.stop] = np.clip(np.asarray(action[s.name], np.float64).reshape(-1), s.lo, s.hi)
        flat = np.clip(flat, self.layout.act_low, self.layout.act_high)
        return flat.astype(self.env.action_space.dtype)

    def named_action(self, raw: Any) -> dict[str, np.ndarray]:
        """Named actions from the env's own action (what a raw-array expert returns)."""
        if self.layout.act_dict:
            return {s.name: np.asarray(raw[s.name], np.float32).reshape(s.shape) for s in self.layout.actions}
        flat = np.asarray(raw, np.float32).reshape(-1)
        size = int(np.prod(self.env.action_space.shape))
        if flat.size != size:  # slicing would silently take the first values of a longer array
            raise ValueError(f"the env's action array has {size} values, not {flat.size}")
        return {s.name: flat[s.start:s.stop].reshape(s.shape) for s in self.layout.actions}

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        if seed is None and self._first_seed is not None:
            seed = self._first_seed
        self._first_seed = None
        obs, info = self.env.reset(seed=seed, options=options)
        return self.observation(obs), info

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = self.env.step(self.raw_action(action))
        return self.observation(obs), float(reward), bool(terminated), bool(truncated), info


# ---- the spec -----------------------------------------------------------------------------


@dataclass(frozen=True)
class GymSource:
    """What makes the env: the gymnasium id, keyword arguments, the layout."""

    env_id: str
    kwargs: tuple[tuple[str, Any], ...]
    layout: Layout
    schema_file: Optional[str] = None


@dataclass(frozen=True)
class GymEnvSpec(EnvSpec):
    """An `EnvSpec` made from a gymnasium id and a schema (see the module docstring)."""

    source: Optional[GymSource] = None

    def make(self, seed: Optional[int] = None, render_mode: Optional[str] = None, **kw: Any) -> gym.Env:
        src = self.source
        args = {**dict(src.kwargs), "max_episode_steps": self.max_steps, **kw}
        if render_mode is not None:
            args["render_mode"] = render_mode
        return FiniteActions(SchemaEnv(_make_raw(src.env_id, args), src.layout, seed))


def importable_from_cwd() -> None:
    """`gym:module:ID` and `--expert module:fn` find modules in the working directory,
    as `python -m` would (polc's console script does not put it on sys.path)."""
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.append(os.getcwd())


def import_env_module(module: str, named_by: str = "") -> None:
    """Import the module that a `gym:MODULE:ID` names (gymnasium's own form: importing it
    registers ID), saying so first when it is not an installed package (`announce_import`)."""
    importable_from_cwd()
    announce_import(module, named_by)
    importlib.import_module(module)


def _make_raw(env_id: str, kwargs: Mapping[str, Any]) -> gym.Env:
    importable_from_cwd()
    try:
        if ":" in env_id:
            import_env_module(env_id.rpartition(":")[0], f"gym:{env_id}")
        return gym.make(env_id, **kwargs)
    except Exception as e:  # gymnasium raises many kinds (Error, ModuleNotFoundError, TypeError for kwargs)
        known = "" if ":" in env_id else " (gymnasium's ids: python -c 'import gymnasium; gymnasium.pprint_registry()')"
        raise GymEnvError(f'gymnasium cannot make "{env_id}": {type(e).__name__}: {e}{known}') from None


# A keyword argument's kind, from its default or its annotation: gymnasium.make passes any value
# on, and an env stores it unchecked, so `g = "string"` would fail only at its first step.
_KINDS = {bool: ("true or false", (bool,)), int: ("an integer", (int,)),
          float: ("a number", (int, float)), str: ("a string", (str,))}


def _kwarg_problems(env_id: str, kwargs: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(key, why) for each keyword argument whose value is not of the kind the env's
    constructor expects (as its default or its annotation says); unknown kinds pass."""
    module, _, name = env_id.rpartition(":")
    try:
        if module:
            import_env_module(module, f"gym:{env_id}")  # as gym.make would, first
        creator = gym.envs.registration.load_env_creator(gym.spec(name).entry_point)
        params = inspect.signature(creator).parameters
    except Exception:  # noqa: BLE001 - not registered, not loadable, no signature: gym.make says
        return []
    problems = []
    for key, value in kwargs.items():
        param = params.get(key)
        if param is None:
            continue
        annotation = param.annotation
        kind = type(param.default) if type(param.default) in _KINDS else (
            {"bool": bool, "int": int, "float": float, "str": str}.get(annotation, annotation))
        if kind not in _KINDS:
            continue
        said, types = _KINDS[kind]
        if not isinstance(value, types) or (kind is not bool and isinstance(value, bool)):
            default = "" if param.default is inspect.Parameter.empty else f" (its default is {param.default!r})"
            problems.append((key, f"{key} of gym:{env_id} must be {said}{default}, not {value!r:.60}"))
    return problems


def _version(layout: Layout, kwargs: Mapping[str, Any]) -> str:
    plain = dataclasses.asdict(layout)
    for slot in plain["obs"] + plain["actions"]:  # without hidden fields: the version it had before they existed
        if not slot["hidden"]:
            del slot["hidden"]
    blob = json.dumps([plain, sorted(kwargs.items(), key=lambda kv: kv[0])],
                      default=str, sort_keys=True)
    return f"gymnasium {gym.__version__}, schema {hashlib.sha256(blob.encode()).hexdigest()[:12]}"


def _portable(path: str) -> str:
    """A path relative to the working directory when the file is below it (so that a
    table shipped in a repository names it the same way from the repository's root)."""
    full = os.path.abspath(path)
    rel = os.path.relpath(full)
    return full if rel.startswith("..") else rel


def _find_env_toml(near: Optional[str]) -> Optional[str]:
    if not near:
        return None
    d = near if os.path.isdir(near) else os.path.dirname(os.path.abspath(near))
    path = os.path.join(d, "env.toml")
    return path if os.path.isfile(path) else None


def resolve(name: str, schema: Optional[str] = None, kwargs: Optional[Mapping[str, Any]] = None,
            near: Optional[str] = None, metric: Optional[str] = None) -> GymEnvSpec:
    """The spec for `gym:ID` (or for an env.toml path that names its env). The
    schema comes from `schema`, else an env.toml in `near`'s folder whose env is
    this one, else the Dict spaces; `kwargs` are added to the file's; `metric`
    (MODULE:FUNCTION, `--metric`) replaces the file's [metric]."""
    file: Optional[SchemaFile] = None
    if name.endswith(".toml"):
        file = read_schema_file(name)
        if not file.env or not file.env.startswith(PREFIX):
            raise SchemaFileError(name, None, 'it does not say which environment it describes: add '
                                              'env = "gym:ID" at the top')
        env = file.env
    else:
        env = name
        if schema is not None:
            file = read_schema_file(schema)
        else:
            found = _find_env_toml(near)
            if found:
                candidate = read_schema_file(found)
                file = candidate if candidate.env in (None, env) else None
    env_id = env[len(PREFIX):]
    if not env_id:
        raise GymEnvError('"gym:" needs an id, e.g. gym:Pendulum-v1 or gym:my_package:MyEnv-v0')
    make_kwargs = {**(file.kwargs if file else {}), **(kwargs or {})}
    for key, why in _kwarg_problems(env_id, file.kwargs if file else {}):
        raise SchemaFileError(file.path, line_of_key(file, "kwargs", key), f"[kwargs] {why}")
    for key, why in _kwarg_problems(env_id, kwargs or {}):
        raise GymEnvError(f"--env-kwargs: {why}")
    probe = _make_raw(env_id, make_kwargs)
    try:
        layout = layout_of(env_id, probe.observation_space, probe.action_space, file, env)
        limit = probe.spec.max_episode_steps if probe.spec is not None else None
        threshold = probe.spec.reward_threshold if probe.spec is not None else None
    finally:
        probe.close()
    max_steps = (file.max_steps if file and file.max_steps else None) or limit or DEFAULT_MAX_STEPS
    obs, actions = layout.fields()
    # A schema file that names its env is itself a name get() resolves: tables made
    # with it (demos, traces) then name an env that polc fit and refine can remake.
    own = file is not None and file.env == env
    schema_obj = EnvSchema(_portable(file.path) if own else env, env_id, _version(layout, make_kwargs), obs, actions)
    source = GymSource(env_id, tuple(sorted(make_kwargs.items())), layout, file.path if file else None)
    if metric is not None:
        score = _metric_from({"function": metric}, lambda why: GymEnvError(f"--metric {metric}: {why}"))
    elif file is not None and file.metric is not None:
        score = _metric_of(file)
    else:
        score = RETURN
    solved_at = file.solved_at if file is not None and file.solved_at is not None else threshold
    return GymEnvSpec(schema_obj, int(max_steps), no_expert, metric=score, solved_at=solved_at, source=source)


def _metric_of(file: SchemaFile) -> Metric:
    """The schema file's [metric]: a module-level function of the step-table columns."""
    return _metric_from(file.metric, lambda why: SchemaFileError(file.path, None, f"the [metric] {why}"))


def _metric_from(m: Mapping[str, Any], error) -> Metric:
    """A metric from a [metric] table (or `--metric MODULE:FUNCTION` as {"function": ...});
    `error(why)` is the exception to raise when its function cannot be loaded."""
    per_step = None
    if "function" in m:
        importable_from_cwd()
        module, _, name = m["function"].rpartition(":")
        try:
            if not module:
                raise ImportError("give it as MODULE:FUNCTION")
            announce_import(module, f'the metric function "{m["function"]}"')
            per_step = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError) as e:
            raise error(f'function "{m["function"]}" cannot be loaded: {type(e).__name__}: {e}') from None
    name = m.get("name", m.get("function", "return"))
    key = re.sub(r"[^A-Za-z0-9_]+", "_", name).strip("_").lower() or "metric"
    return Metric(name, key, bool(m.get("higher_is_better", True)),
                  m.get("doc", f"{m.get('reduce', 'sum')} over the steps of {name}"), per_step,
                  m.get("reduce", "sum"), m.get("unit", ""))


def starter_file(env: str, kwargs: Optional[Mapping[str, Any]] = None) -> str:
    """The starter schema file of `gym:ID` from its spaces (one field per component)."""
    probe = _make_raw(env[len(PREFIX):], dict(kwargs or {}))
    try:
        return starter_for(env, probe.observation_space, probe.action_space)
    finally:
        probe.close()


def _resolver(name: str, near: Optional[str] = None) -> Optional[EnvSpec]:
    return resolve(name, near=near) if is_gym_name(name) else None


add_resolver(_resolver)

def check_against_gym(tp: Any, env: str, schema: Optional[str] = None,
                      kwargs: Optional[Mapping[str, Any]] = None) -> list:
    """`polc check --env gym:ID --schema FILE.toml [--env-kwargs JSON] P.pol`: `tp`'s obs and
    action declarations against the env those flags make (E0508 when it cannot be made)."""
    from .errors import EnvError
    from .schema import check_program_against, env_unusable

    if not is_gym_name(env):
        return [env_unusable(env, "--schema and --env-kwargs are for gym:ID environments")]
    try:
        spec = resolve(env, schema, kwargs, near=tp.file or None)
    except EnvError as e:
        return [env_unusable(env, str(e))]
    return check_program_against(tp, spec.schema)


__all__ = ["GymEnvSpec", "GymSource", "Layout", "PREFIX", "SchemaEnv", "Slot", "check_against_gym", "is_gym_name",
           "layout_of", "resolve", "starter_file", "starter_for"]
