"""Reads of observations that echo an action: the copycat trap of imitation learning.

An environment may say that an observation echoes an action (Car Racing's
`steer_ind` is the front wheels' angle, which follows the previous `steer`).
On a clean demonstration such an observation predicts the action it echoes
almost perfectly, so a fit leans on it and the policy, in closed loop, copies
its own last action (causal confusion, de Haan et al. 2019; the copycat
problem, Wen et al. 2020).

The compiler knows no environment: the echoes come in as data,
`{obs name: (action names it echoes, ...)}`, from whoever has the schema
(`polc check --env`, the refinement loop). `check_echoes` returns one W0509
warning per read of an echoing observation inside an action's mean, located at
the read.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from .. import errors
from ..check import typed as T
from .deps import Deps
from ..messages import Diagnostic


def _reads_of(e: T.TExpr, name: str) -> list[T.Ref]:
    """The `Ref`s to `name` inside `e`, in source order."""
    if isinstance(e, T.Ref):
        return [e] if e.name == name else []
    out: list[T.Ref] = []
    for c in T.children(e):
        out += _reads_of(c, name)
    return out


def _weights_near(e: T.TExpr, name: str, weights: set[str]) -> list[str]:
    """The weights of the smallest sub-expression of `e` that reads `name` and a
    weight: the ones a fit would move to lean on the echo (e.g. `k_ind` in `k_ind * steer_ind`)."""
    for c in T.children(e):
        if _reads_of(c, name):
            inner = _weights_near(c, name, weights)
            if inner:
                return inner
    found = sorted(T.refs(e) & weights) if _reads_of(e, name) else []
    return found


def _feeds(tp: T.TypedProgram) -> dict[str, set[str]]:
    """node -> the actions whose mean it feeds (an action feeds itself); noise stds left out."""
    g = Deps(tp)
    nodes = {n.name for n in tp.nodes}
    feeds: dict[str, set[str]] = {}
    for a in tp.actions:
        cone = {a.name}
        for r in g.refs(a.expr):  # the mean only: a noise std that reads an echo copies nothing
            if r in nodes:
                cone |= {r} | {x for x in g.ancestors(r) if x in nodes}
        for n in cone:
            feeds.setdefault(n, set()).add(a.name)
    return feeds


def echo_reads(tp: T.TypedProgram, echoes: Mapping[str, Sequence[str]]) -> list[tuple[str, str]]:
    """(action, observation) for each action whose mean reads an observation in `echoes`."""
    feeds = _feeds(tp)
    out: list[tuple[str, str]] = []
    for a in tp.actions:
        for o, echoed in echoes.items():
            if echoed and any(a.name in feeds.get(n.name, ()) and _reads_of(n.expr, o) for n in tp.nodes):
                out.append((a.name, o))
    return out


def check_echoes(tp: T.TypedProgram, echoes: Mapping[str, Sequence[str]]) -> list[Diagnostic]:
    """W0509 at each read of an observation in `echoes` that some action's mean
    depends on (through latents, or directly). `echoes` maps an observation's
    name to the names of the actions it echoes; names the program does not
    declare are ignored."""
    declared = {o.name for o in tp.obs}
    echoing = {o: tuple(a) for o, a in echoes.items() if o in declared and a}
    if not echoing:
        return []
    feeds = _feeds(tp)
    weights = {w.name for w in tp.weights}
    order = [a.name for a in tp.actions]
    out: list[Diagnostic] = []
    for n in tp.nodes:  # dataflow order, so the warnings follow the source
        acts = feeds.get(n.name)
        if not acts:
            continue
        for obs, echoed in echoing.items():
            for ref in _reads_of(n.expr, obs):
                out.append(errors.echo_read(ref.span, obs, tuple(echoed), tuple(a for a in order if a in acts),
                                            _weights_near(n.expr, obs, weights)))
    return out


__all__ = ["check_echoes", "echo_reads"]
