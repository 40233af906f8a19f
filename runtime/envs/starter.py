"""Starter files for a new task: a `.pol` program that declares every observation
and action of an environment's schema (it checks against the environment, compiles,
and fits: each action is linear in every observation element), and the skeleton of a
task folder (`polc init-task`). Plain text from plain data, laid out by `polc fmt`;
no gymnasium here."""

from __future__ import annotations

import math
import re

from polc.text import bounds, brackets, number as fmt_num
from polc.fmt import format_text

from .schema import EnvSchema, Field


def _policy_name(schema: EnvSchema) -> str:
    base = schema.env_id.rsplit(":", 1)[-1].rsplit("/", 1)[-1]
    base = re.sub(r"-v\d+$", "", base)
    name = re.sub(r"[^A-Za-z0-9_]", "_", re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", base)).lower().strip("_")
    return name if name and not name[0].isdigit() else f"task_{name}"


def _quote(text: str) -> str:
    return '"' + text.replace('"', "'").replace("\n", " ") + '"'


def _type(f: Field) -> str:
    return f"real{brackets(f.shape)} {bounds(f.lo, f.hi)}".rstrip()


MAX_WEIGHTS_PER_PAIR = 64  # an observation larger than this (an image) enters by its mean


def _term(a: Field, o: Field) -> tuple[str, str, str]:
    """(the weight's shape, its doc, the term) connecting observation `o` to action `a`: one
    weight per element of each (shape action + observation), summed over the observation's
    axes, so every element of the action is linear in every element of the observation."""
    w = f"w_{a.name}_{o.name}"
    if math.prod(o.shape) > MAX_WEIGHTS_PER_PAIR:
        doc = f"{a.name}[i] per unit of the mean of {o.name}, element [i]" if a.shape else \
            f"{a.name} per unit of the mean of {o.name}"
        return brackets(a.shape), doc, f"{w} * mean({o.name})"
    term = f"{w} * {o.name}"
    if o.shape and not a.shape:
        term = f"sum({term})"
    else:
        for _ in o.shape:  # each sum drops the observation's first remaining axis
            term = f"sum({term}; axis = {len(a.shape)})"
    what = (f"{a.name} per unit of {o.name}" if not (a.shape or o.shape) else
            f"{a.name}{'[i]' if a.shape else ''} per unit of {o.name}{'[j]' if o.shape else ''}"
            + (", element [i, j]" if a.shape and o.shape else ", element [i]" if a.shape else ", element [j]"))
    return brackets(a.shape + o.shape), what, term


def starter_pol(schema: EnvSchema, env: str) -> str:
    """A program that declares `schema`'s observations and actions; each action is linear
    in every element of every observation (one weight per pair of elements, named
    w_ACTION_OBS), clipped to its range, with a learned noise std: it checks, compiles and
    fits to a demonstration (a linear baseline), and is there to be replaced by a structure.
    An observation that echoes an action is left out, with a comment saying so."""
    width = max(len(f.name) for f in schema.obs + schema.actions)
    lines = [f'policy {_policy_name(schema)} "TODO: say what the policy does, in one sentence."', "",
             f"# The observations and actions of {env} ({schema.env_id}); written by polc schema.",
             "# Each action starts linear in every observation (w_ACTION_OBS: one weight per element of",
             "# each, fitted by polc fit): replace it with a structure (latents with meaning,",
             "# sign-constrained weights, intents; docs/language.md)."]
    obs = [f for f in schema.obs if not f.echoes and not f.hidden]
    for f in schema.obs:
        if f.hidden:  # privileged: a policy that declares it does not check (E0510)
            lines.append(f"# obs {f.name} is left out: it is hidden (privileged: the expert and the trace see it, "
                         "a policy does not)")
        elif f.echoes:  # reading it invites a copy of the last action (W0509)
            lines.append(f"# obs {f.name} is left out: it echoes {', '.join(f.echoes)}, so a fit would copy the last "
                         'action (W0509; docs/environments.md, "Echo fields")')
    for f in obs:
        lines.append(f"obs {f.name.ljust(width)} : {_type(f)} {_quote(f.doc or f.name)}")
    lines.append("")
    for a in schema.actions:
        finite = math.isfinite(a.lo) and math.isfinite(a.hi)
        mid = (a.lo + a.hi) / 2 if finite else 0.0
        scale = (a.hi - a.lo) / 2 if finite else 1.0
        lines.append(f"weight b_{a.name} : real{brackets(a.shape)} = {fmt_num(mid)} "
                     f"{_quote(f'{a.name} at zero observations')}")
        terms = [f"b_{a.name}"]
        for o in obs:
            shape, doc, term = _term(a, o)
            lines.append(f"weight w_{a.name}_{o.name} : real{shape} = 0 {_quote(doc)}")
            terms.append(term)
        lines.append(f"latent lin_{a.name} = " + " + ".join(terms) + f" {_quote(f'{a.name} before clipping')}")
        mean = f"clip(lin_{a.name}, {fmt_num(a.lo)}, {fmt_num(a.hi)})" if finite else f"lin_{a.name}"
        lines += [f"weight s_{a.name} : real in [{fmt_num(scale * 1e-3)}, {fmt_num(scale)}] = {fmt_num(scale * 0.1)} "
                  f"{_quote(f'{a.name} noise std')}",
                  f"action {a.name} : {_type(a)} = {mean} ~ normal(std = s_{a.name}) {_quote(a.doc or a.name)}", ""]
    return format_text("\n".join(lines).rstrip() + "\n", "starter.pol")


def task_md(env: str, schema: EnvSchema) -> str:
    """The task description a refinement run's model reads (to fill in)."""
    obs = "\n".join(f"- `{f.describe()}`: {f.doc}" for f in schema.policy_obs())
    act = "\n".join(f"- `{f.describe()}`: {f.doc}" for f in schema.actions)
    return (f"# Task: {schema.env_id}\n\nTODO: what the task is, what good behaviour looks like, and how an "
            f"episode is scored (by default its return, higher is better).\n\n## Observations\n{obs}\n\n"
            f"## Actions\n{act}\n")


__all__ = ["starter_pol", "task_md"]
