"""A demonstrator the user writes: `--expert FILE.py:FUNCTION` or
`--expert MODULE:FUNCTION`, a callable

    act(obs: dict[str, np.ndarray]) -> dict[str, float | np.ndarray]   # in the schema's names
                                      or np.ndarray                     # the env's own action array

called once per step on the observation the policy would see (a class with
`reset()` and `__call__` works too: `reset()` is called at the start of every
episode). It drives a `gym:` environment (the `SchemaEnv` wrapper keeps the
latest observation). Any exception it raises becomes an `ExpertError` naming
the expert, the seed and the step; the run keeps its finished episodes.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from typing import Any, Callable, Mapping

import numpy as np

from .errors import ExpertError


def no_expert(env: Any) -> Any:
    raise ExpertError("this environment has no built-in expert; give one with --expert FILE.py:FUNCTION "
                      "(a function of the observation dict that returns the action dict)")


def load_callable(ref: str) -> Callable:
    """`path/to/file.py:name` or `package.module:name` -> the object."""
    target, sep, attr = ref.rpartition(":")
    if not sep or not target or not attr:
        raise ExpertError(f'--expert takes FILE.py:FUNCTION or MODULE:FUNCTION, not "{ref}"')
    if target.endswith(".py"):
        if not os.path.isfile(target):
            raise ExpertError(f"cannot read the expert '{target}': no such file")
        name = "polc_user_" + os.path.splitext(os.path.basename(target))[0]
        spec = importlib.util.spec_from_file_location(name, os.path.abspath(target))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # so that pickling/dataclasses inside it work
        try:
            spec.loader.exec_module(module)
        except Exception as e:
            raise ExpertError(f"the expert file '{target}' failed to load: {type(e).__name__}: {e}") from None
    else:
        if os.getcwd() not in sys.path and "" not in sys.path:  # as `python -m` would
            sys.path.append(os.getcwd())
        try:
            module = importlib.import_module(target)
        except Exception as e:
            raise ExpertError(f"cannot import the expert module '{target}': {type(e).__name__}: {e}") from None
    obj = getattr(module, attr, None)
    if obj is None or not callable(obj):
        raise ExpertError(f"'{target}' has no function '{attr}'")
    return obj


class UserExpert:
    """The `Expert` protocol over a user's callable of the observation."""

    def __init__(self, ref: str):
        self.ref = ref
        self.fn = load_callable(ref)
        self.step = 0

    def reset(self) -> None:
        self.step = 0
        reset = getattr(self.fn, "reset", None)
        if callable(reset):
            reset()

    def act(self, env: Any) -> dict[str, np.ndarray]:
        try:
            obs = env.get_wrapper_attr("last_obs")
            names = [f for f in env.get_wrapper_attr("layout").actions]
        except AttributeError:
            raise ExpertError(f"--expert {self.ref} drives gym: environments; this one has its own expert "
                              "(polc demos without --expert)") from None
        try:
            out = self.fn(dict(obs))
        except Exception as e:
            raise ExpertError(f"the expert {self.ref} raised {type(e).__name__}: {e} (at step {self.step} of the "
                              "episode)") from None
        self.step += 1
        if not isinstance(out, Mapping):
            try:
                return env.get_wrapper_attr("named_action")(out)
            except Exception as e:
                raise ExpertError(f"the expert {self.ref} returned {type(out).__name__} {out!r:.80} ({e}); return "
                                  "a dict of the schema's action names, or the env's action array") from None
        missing = [s.name for s in names if s.name not in out]
        if missing:
            raise ExpertError(f"the expert {self.ref} returned no action {', '.join(map(repr, missing))} (it "
                              f"returned {', '.join(map(repr, out)) or 'nothing'})")
        try:
            return {s.name: np.asarray(out[s.name], np.float32).reshape(s.shape) for s in names}
        except (ValueError, TypeError) as e:
            raise ExpertError(f"the expert {self.ref} returned an action of the wrong shape: {e}") from None


class UserExpertFactory:
    """`EnvSpec._expert` for a user's expert: picklable by its reference."""

    def __init__(self, ref: str):
        self.ref = ref
        load_callable(ref)  # fail now, before any episode runs

    def __call__(self, env: Any) -> UserExpert:
        return UserExpert(self.ref)


__all__ = ["UserExpert", "UserExpertFactory", "load_callable", "no_expert"]
