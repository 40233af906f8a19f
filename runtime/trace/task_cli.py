"""`polc schema` and `polc init-task`: start a task on any Gymnasium environment.

    polc schema gym:ID [--schema F.toml] [--env-kwargs JSON] [-o initial.pol]   a starter .pol
    polc schema gym:ID --toml [-o env.toml]                                     a starter schema file
    polc init-task gym:ID -o DIR/ [--schema F.toml] [--env-kwargs JSON]         env.toml, initial.pol, task.md

The starter .pol declares every observation and action of the schema, each
action linear in the observations (it checks, compiles and fits). init-task
never overwrites a file: it stops, naming the one already there.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Optional

from .. import cli as rc
from ..cli import UsageError

# In the trace part, not beside the environments: registering a command must not import
# polc.runtime.envs (gymnasium, numpy), and every polc call registers every command.


def _spec(env: str, schema: Optional[str], kwargs: Optional[dict]):
    from ..envs import gym_env

    if gym_env.is_gym_name(env):
        if schema is not None and not env.startswith(gym_env.PREFIX):
            raise UsageError(f"polc: {env} is a schema file already; give --schema only with gym:ID.")
        return gym_env.resolve(env, schema, kwargs)
    if schema is not None or kwargs is not None:
        raise UsageError("polc: --schema and --env-kwargs are for gym:ID environments (docs/environments.md).")
    return rc.env_spec(env)


def _write(path: Optional[str], text: str) -> None:
    from polc.util.files import write_atomic

    if path in (None, "-"):
        sys.stdout.write(text)
    else:
        write_atomic(path, text)
        print(f"wrote {path}", file=sys.stderr)


def cmd_schema(args: argparse.Namespace) -> int:
    from ..envs.starter import starter_pol

    kwargs = rc.parse_env_kwargs(args.env_kwargs)
    if args.toml:
        from ..envs import gym_env

        if not args.target.startswith(gym_env.PREFIX) or args.schema is not None:
            raise UsageError("polc: --toml writes the starter schema file of a gym:ID env (without --schema).")
        _write(args.output, gym_env.starter_file(args.target, kwargs))
        return 0
    spec = _spec(args.target, args.schema, kwargs)
    _write(args.output, starter_pol(spec.schema, args.target))
    return 0


def _toml_value(key: str, value: Any) -> str:
    import json

    if isinstance(value, dict) or (isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value)):
        raise UsageError(f"polc: --env-kwargs {key!r}: init-task writes plain values and lists only; put "
                         "nested values in env.toml's [kwargs] table by hand.")
    if value is None:
        raise UsageError(f"polc: --env-kwargs {key!r}: TOML has no null; leave the argument out.")
    return f"{key} = {json.dumps(value)}"


def cmd_init_task(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..envs import gym_env
    from ..envs.schema_file import read_schema_file
    from ..envs.starter import starter_pol, task_md

    env = args.target
    if not env.startswith(gym_env.PREFIX):
        raise UsageError(f'polc: init-task starts a task on a gym:ID environment, not "{env}" (the built-in '
                         "environments have their task folders in examples/).")
    kwargs = rc.parse_env_kwargs(args.env_kwargs)
    out = Path(args.output)
    files = {n: out / n for n in ("env.toml", "initial.pol", "task.md")}
    there = [str(p) for p in files.values() if p.exists()]
    if there:
        raise UsageError(f"polc: {there[0]} exists; init-task never overwrites a file (choose another -o, or "
                         "remove it).")
    renamed = False
    if args.schema is not None:
        body = read_schema_file(args.schema).text
        gym_env.resolve(env, args.schema, kwargs)  # the file must fit the env before anything is written
        if not any(line.strip().startswith("env") and "=" in line for line in body.splitlines()):
            body = f'env = "{env}"\n' + body
    else:
        try:
            gym_env.resolve(env, None, kwargs)
            body = f'env = "{env}"\n# The spaces are Dicts: their keys are the names. Tables [obs.KEY] may give ranges and docs.\n'
        except gym_env.NeedsSchema:
            body, renamed = gym_env.starter_file(env, kwargs), True
    if kwargs:
        body = body.rstrip() + "\n\n[kwargs]\n" + "\n".join(_toml_value(k, v) for k, v in kwargs.items()) + "\n"
    out.mkdir(parents=True, exist_ok=True)
    from polc.util.files import write_atomic

    write_atomic(files["env.toml"], body)
    spec = gym_env.resolve(str(files["env.toml"]))
    write_atomic(files["initial.pol"], starter_pol(spec.schema, env))
    write_atomic(files["task.md"], task_md(env, spec.schema))
    d = str(out).rstrip("/")
    steps = [f"wrote {d}/: env.toml, initial.pol, task.md. Next:"]
    if renamed:
        steps.append(f"  rename and document the components in {d}/env.toml, then polc schema {d}/env.toml -o "
                     f"{d}/initial.pol")
    steps += [f"  polc demos {d}/env.toml --expert YOUR_EXPERT.py:act --episodes 5 -o {d}/demo.parquet",
              f"  polc fit {d}/initial.pol --demos {d}/demo.parquet -o {d}/fit.params",
              f"  polc eval {d}/initial.pol --params {d}/fit.params --env {d}/env.toml --seeds 100"]
    print("\n".join(steps), file=sys.stderr)
    return 0


def register(sub: Any) -> None:
    """Add schema and init-task to the `polc` subcommands."""
    c = sub.add_parser("schema", help="write a starter .pol (or schema file) for a gymnasium environment")
    c.add_argument("target", metavar="ENV", help="gym:ID, an env.toml, or a built-in environment name")
    rc.env_flags(c)
    c.add_argument("--toml", action="store_true", help="write the starter schema file of a gym:ID instead")
    c.add_argument("-o", "--output", help="the file to write (default: standard output)")
    c.set_defaults(func=rc.guard(cmd_schema))

    c = sub.add_parser("init-task", help="start a task folder on a gymnasium environment")
    c.add_argument("target", metavar="ENV", help="gym:ID")
    rc.env_flags(c)
    c.add_argument("-o", "--output", required=True, help="the task folder to write (new files only)")
    c.set_defaults(func=rc.guard(cmd_init_task))


__all__ = ["register"]
