"""`polc check --env NAME FILE`: a program's `obs` and `action` declarations
against an environment's published schema (the checks live in `polc.runtime.envs.schema`)."""

from __future__ import annotations

from polc.diagnostics import Diagnostic
from polc.typed import TypedProgram


def check_against_env(tp: TypedProgram, env_name: str) -> list[Diagnostic]:
    """Located diagnostics for `tp` against environment `env_name`; an unknown
    name gives one error (E0500) listing the environments polc knows."""
    from . import envs
    from .envs import schema

    if env_name not in envs.names():
        return [schema.unknown_env(env_name, envs.names())]
    return schema.check_program_against(tp, envs.get(env_name).schema)
