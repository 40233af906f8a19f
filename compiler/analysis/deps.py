"""Who reads whom in a typed program: the cones the analysis restricts its work to.

    g = Deps(tp)
    g.reads["target"]             # names the node reads directly (its mean and its noise std)
    g.cone("target")              # the nodes target is computed from, and itself, in dataflow order
    g.downstream(cone, {"x"})     # which of those change when x does (x included)
    g.refs(expr)                  # names an expression reads, cached per node object

An intent is about one target, so deciding it needs only the target's cone,
and of that only the part downstream of what the decision changes (the
variable a direction is taken in, a weight held to one sign): everything
else keeps the value the program-wide pass gave it. Each query costs time in
proportion to the cone, not the program.
"""

from __future__ import annotations

from typing import Iterable, Union

from ..check import typed as T

Node = Union[T.Latent, T.Action]


class Deps:
    """The dependency graph of one typed program (built once, in one walk over it)."""

    def __init__(self, tp: T.TypedProgram):
        self.tp = tp
        self.order: dict[str, int] = {n.name: i for i, n in enumerate(tp.nodes)}
        self.nodes: dict[str, Node] = {n.name: n for n in tp.nodes}
        self.inputs: dict[str, T.Obs | T.Weight | T.State] = {d.name: d for d in (*tp.obs, *tp.weights, *tp.states)}
        self._refs: dict[int, frozenset[str]] = {}
        self.reads: dict[str, frozenset[str]] = {}
        for n in tp.nodes:
            reads = self.refs(n.expr)
            if isinstance(n, T.Action) and n.std is not None:
                reads = reads | self.refs(n.std)
            self.reads[n.name] = reads

    def refs(self, e: T.TExpr) -> frozenset[str]:
        """The names `e` reads (cached by node identity: the typed tree is immutable)."""
        got = self._refs.get(id(e))
        if got is not None:
            return got
        if isinstance(e, T.Ref):
            out = frozenset((e.name,))
        else:
            out = frozenset().union(*(self.refs(c) for c in T.children(e)))
        self._refs[id(e)] = out
        return out

    def ancestors(self, name: str) -> set[str]:
        """Every name `name` is computed from (obs, weights and nodes; not itself)."""
        seen: set[str] = set()
        todo = [name]
        while todo:
            for r in self.reads.get(todo.pop(), ()):
                if r not in seen:
                    seen.add(r)
                    todo.append(r)
        return seen

    def cone_of(self, targets: Iterable[str]) -> list[str]:
        """The union of the `cone`s of `targets`, in dataflow order: one traversal for all."""
        targets = list(targets)
        seen: set[str] = set()
        todo = list(targets)
        while todo:
            for r in self.reads.get(todo.pop(), ()):
                if r not in seen:
                    seen.add(r)
                    todo.append(r)
        names = {n for n in seen | set(targets) if n in self.order}
        return sorted(names, key=self.order.__getitem__)

    def cone(self, target: str) -> list[str]:
        """The nodes (latents and actions) `target` is computed from, and `target`, in dataflow order."""
        names = {n for n in self.ancestors(target) if n in self.order}
        if target in self.order:
            names.add(target)
        return sorted(names, key=self.order.__getitem__)

    def downstream(self, cone: Iterable[str], roots: Iterable[str]) -> set[str]:
        """`roots` and the nodes of `cone` (in dataflow order) that read one of them, transitively."""
        out = set(roots)
        for n in cone:
            if n not in out and not self.reads[n].isdisjoint(out):
                out.add(n)
        return out


__all__ = ["Deps"]


def mean_weights(tp: T.TypedProgram) -> set[str]:
    """The weights some action's mean depends on (through latents, other actions and
    states' updates: a weight read only where a state is updated moves the mean from the
    next step on); a weight outside it is read only by noise stds. What imitation learning
    pulls toward its declared value and what evolution strategies search."""
    exprs = {n.name: n.expr for n in tp.nodes}
    exprs.update({st.name: st.update for st in getattr(tp, "states", ())})
    seen: set[str] = set()
    todo = [a.name for a in tp.actions]
    while todo:
        name = todo.pop()
        for r in T.refs(exprs[name]) - seen:
            seen.add(r)
            if r in exprs:
                todo.append(r)
    return {w.name for w in tp.weights} & seen
