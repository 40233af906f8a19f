"""`polc graph`: the dataflow graph of a checked program, as Graphviz DOT text
or as an SVG laid out here (no Graphviz binary needed).

Nodes are the declared names, styled as in the paper's Figure 2: observations
gray, weights orange, latents blue, actions green; each box shows the name and,
smaller, its type (with the declared range or constraint, and a weight's
prior, `~ normal(0.3, 0.1)`); a doc string
becomes the node's tooltip (`<title>` in SVG, `tooltip` in DOT). There is one
edge per (reader, read) pair: a latent or action reads the names in its
expression (`typed.refs`); an action also reads the names in its noise std,
and an edge that only the std needs is dashed. A state (purple) is an input of
the step, drawn in the first column; what its `next` expression reads goes
back to it as a dotted delay edge labelled `next` (below the boxes in SVG,
`constraint=false` in DOT), so the loop through the state is visible.

The SVG layout is a small Sugiyama-style layered drawing, left to right:
  1. layers: observations in layer 0; every latent or action one layer after
     the deepest thing it reads (longest path); actions that nothing reads move
     to the last layer; a weight sits one layer before its first reader.
  2. an edge spanning several layers gets a dummy node in each layer it
     crosses, so it is routed around the boxes in between.
  3. order within layers: barycentre sweeps, down and up, keeping the order
     with the fewest crossings.
  4. vertical positions: each node is pulled toward the mean height of its
     neighbours, then overlaps are removed in order by isotonic regression
     (pool adjacent violators), a few rounds.
  5. edges are cubic curves between columns and straight runs through dummy
     slots, with ports spread along a box's side, and arrowheads.
Text widths are estimated for a monospace font (0.6 em per character).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Optional, Union

from .check import typed as T
from .util.text import bounds

# fill, stroke, edge colour per kind (Figure 2's palette)
PALETTE = {
    "obs": ("#e4e4e4", "#757575", "#8a8a8a"),
    "weight": ("#fde2c4", "#dd8a2e", "#e0a060"),
    "latent": ("#d9e8fa", "#3b78c2", "#5b8fcc"),
    "action": ("#d8f0d6", "#3d9a3a", "#5aa857"),
    "state": ("#ece0f7", "#8a4fbf", "#9b6fc9"),
}
KIND_NAMES = {"obs": "observation", "weight": "weight", "latent": "latent", "action": "action", "state": "state"}


@dataclass(frozen=True)
class Node:
    name: str
    kind: str  # "obs" | "weight" | "latent" | "action"
    label: str  # type, range or constraint, mlp: the small line under the name
    doc: Optional[str]


@dataclass(frozen=True)
class Edge:
    src: str  # the name read
    dst: str  # the latent or action reading it
    std_only: bool  # read only by an action's noise std (drawn dashed)
    delay: bool = False  # read by a state's `next`: the value arrives one step later (drawn dotted, labelled)


def _label(d: Union[T.Obs, T.Weight, T.Latent, T.Action, T.State]) -> str:
    text = str(d.type)
    if isinstance(d, (T.Obs, T.Weight, T.Action, T.State)):
        text = f"{text} {bounds(d.lo, d.hi)}".rstrip()
    if isinstance(d, T.Weight) and d.prior is not None:
        text += f" ~ {d.prior}"
    if isinstance(d, (T.Latent, T.Action)):
        for m in T.mlps_in(d.expr):
            text += ", mlp(" + ", ".join(map(str, m.hidden)) + ")"
    return text


def nodes(tp: T.TypedProgram) -> list[Node]:
    """Every declared name, observations first, then weights, states, latents, actions; a state
    machine's modes (`typed.state_modes`) follow its type: `real in [0, 4] {APPROACH, GRASP}`."""
    out = []
    for kind, group in (("obs", tp.obs), ("weight", tp.weights), ("state", tp.states), ("latent", tp.latents),
                        ("action", tp.actions)):
        for d in group:
            label = _label(d)
            modes = T.state_modes(tp, d) if kind == "state" else ()
            if modes:
                label += " {" + ", ".join(n for n, _ in modes) + "}"
            out.append(Node(d.name, kind, label, d.doc))
    return out


def edges(tp: T.TypedProgram) -> list[Edge]:
    """One edge per (reader, read) pair, readers in dependency order."""
    out = []
    order = {n.name: i for i, n in enumerate(nodes(tp))}
    for d in tp.nodes:
        mean = T.refs(d.expr)
        std = T.refs(d.std) if isinstance(d, T.Action) and d.std is not None else set()
        for src in sorted(mean | std, key=lambda s: order.get(s, len(order))):
            out.append(Edge(src, d.name, src not in mean))
    for st in tp.states:  # the loop: what `next` reads reaches the state one step later
        for src in sorted(T.refs(st.update), key=lambda s: order.get(s, len(order))):
            out.append(Edge(src, st.name, False, delay=True))
    return out


# ---- DOT ----------------------------------------------------------------------------


def _dot_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _html(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def to_dot(tp: T.TypedProgram) -> str:
    """Graphviz DOT text for the dataflow graph (`dot -Tsvg` draws it)."""
    ns, es = nodes(tp), edges(tp)
    read = {e.src for e in es}
    lines = [f"digraph {_dot_str(tp.name)} {{"]
    graph_attrs = "rankdir=LR, nodesep=0.25, ranksep=0.6, fontname=monospace"
    if tp.doc:
        graph_attrs += f", tooltip={_dot_str(tp.doc)}"
    lines += [f"  graph [{graph_attrs}];",
              '  node [shape=box, style="rounded,filled", fontname=monospace, fontsize=11, penwidth=1.4];',
              "  edge [arrowsize=0.7];"]
    for n in ns:
        fill, stroke, _ = PALETTE[n.kind]
        label = f'<<b>{_html(n.name)}</b><br/><font point-size="9">{_html(n.label)}</font>>'
        attrs = f'label={label}, fillcolor="{fill}", color="{stroke}"'
        attrs += f", tooltip={_dot_str(n.doc or KIND_NAMES[n.kind] + ' ' + n.name)}"
        lines.append(f"  {_dot_str(n.name)} [{attrs}];")
    obs = " ".join(_dot_str(n.name) + ";" for n in ns if n.kind in ("obs", "state"))
    outs = " ".join(_dot_str(n.name) + ";" for n in ns if n.kind == "action" and n.name not in read)
    if obs:
        lines.append(f"  {{ rank=min; {obs} }}")
    if outs:
        lines.append(f"  {{ rank=max; {outs} }}")
    kinds = {n.name: n.kind for n in ns}
    for e in es:
        attrs = f'color="{PALETTE[kinds.get(e.src, "latent")][2]}"' + (", style=dashed" if e.std_only else "")
        if e.delay:  # drawn back to the state, without pulling it to the right
            attrs += ', style=dotted, label="next", fontsize=9, constraint=false'
        lines.append(f"  {_dot_str(e.src)} -> {_dot_str(e.dst)} [{attrs}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


# ---- SVG ----------------------------------------------------------------------------

NAME_PX, LABEL_PX = 13.0, 10.0  # font sizes
CHAR = 0.6  # monospace advance, in em
BOX_H, PAD = 40.0, 10.0
PORT = 7.0  # vertical spacing of the edges meeting one side of a box (boxes grow to keep it)
FONT = "DejaVu Sans Mono, Menlo, Consolas, monospace"


def layers(tp: T.TypedProgram) -> dict[str, int]:
    """The column of every name: observations 0; a latent or action one after
    the deepest non-weight it reads; unread actions last; a weight one before
    its first reader (0 when nothing reads it)."""
    es = [e for e in edges(tp) if not e.delay]  # a state is an input of the step, like an observation
    reads: dict[str, set[str]] = {}
    for e in es:
        reads.setdefault(e.dst, set()).add(e.src)
    weights = {w.name for w in tp.weights}
    layer = {o.name: 0 for o in (*tp.obs, *tp.states)}
    for d in tp.nodes:  # dependency order
        layer[d.name] = 1 + max((layer[r] for r in reads.get(d.name, ()) if r not in weights), default=0)
    read = {e.src for e in es}
    last = max(layer.values(), default=0)
    for a in tp.actions:
        if a.name not in read:
            layer[a.name] = max(last, layer[a.name])
    for w in tp.weights:
        readers = [layer[e.dst] for e in es if e.src == w.name]
        layer[w.name] = min(readers) - 1 if readers else 0
    return layer


def _esc(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def _box_w(n: Node) -> float:
    return max(len(n.name) * NAME_PX * CHAR, len(n.label) * LABEL_PX * CHAR) + 2 * PAD


def _path(points: tuple[tuple[float, float], ...]) -> str:
    (x0, y0), rest = points[0], points[1:]
    d = [f"M{x0:.1f},{y0:.1f}"]
    prev = points[0]
    for i, (x, y) in enumerate(rest):
        if i % 2 == 0:  # across a gap between columns: a horizontal-tangent curve
            mid = (prev[0] + x) / 2
            d.append(f"C{mid:.1f},{prev[1]:.1f} {mid:.1f},{y:.1f} {x:.1f},{y:.1f}")
        else:  # through a dummy slot
            d.append(f"L{x:.1f},{y:.1f}")
        prev = (x, y)
    return " ".join(d)


def _legend(y: float) -> tuple[list[str], float]:
    """The key to colours and line styles, one row at height `y`; and its width."""
    out, x = [f'<g class="legend" transform="translate(20,{y:.1f})">'], 0.0
    for kind in ("obs", "weight", "latent", "action"):
        fill, stroke, _ = PALETTE[kind]
        out.append(f'<rect x="{x:.1f}" y="0" width="14" height="14" rx="3" fill="{fill}" stroke="{stroke}"/>')
        out.append(f'<text x="{x + 20:.1f}" y="11">{KIND_NAMES[kind]}</text>')
        x += 20 + len(KIND_NAMES[kind]) * 11 * CHAR + 18
    out.append(f'<path d="M{x:.1f},7 h26" class="edge" stroke="#777" marker-end="url(#arrow-latent)"/>')
    out.append(f'<text x="{x + 32:.1f}" y="11">reads</text>')
    x += 32 + 5 * 11 * CHAR + 18
    out.append(f'<path d="M{x:.1f},7 h26" class="edge std" stroke="#777" marker-end="url(#arrow-latent)"/>')
    out.append(f'<text x="{x + 32:.1f}" y="11">noise std reads</text>')
    out.append("</g>")
    return out, 20 + x + 32 + len("noise std reads") * 11 * CHAR + 20


def to_svg(tp: T.TypedProgram) -> str:
    """A self-contained SVG drawing of the dataflow graph (see the module docstring)."""
    from .layout import layered

    ns, all_edges = nodes(tp), edges(tp)
    es = [e for e in all_edges if not e.delay]
    delays = [e for e in all_edges if e.delay]
    kinds = {n.name: n.kind for n in ns}
    head = 44.0
    fan_out, fan_in = Counter(e.src for e in es), Counter(e.dst for e in es)
    sizes = {n.name: (_box_w(n), max(BOX_H, PORT * (max(fan_in[n.name], fan_out[n.name]) - 1) + 16)) for n in ns}
    boxes, routes, width, height = layered(sizes, layers(tp),
                                           [(e.src, e.dst) for e in es], top=head)
    loop_y = height + 6.0  # delay edges run below the boxes, back to their state
    height += 22.0 * bool(delays) + 12.0 * len(delays)
    legend, legend_w = _legend(height)
    width = max(width, legend_w, 40 + len(tp.name) * 15 * CHAR)
    height += 34.0
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
           f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="{FONT}">',
           f"<title>{_esc(tp.name + (': ' + tp.doc if tp.doc else ''))}</title>",
           "<style>",
           f".name {{ font-size: {NAME_PX:.0f}px; font-weight: bold; fill: #1d1d1d; }}",
           f".label {{ font-size: {LABEL_PX:.0f}px; fill: #4a4a4a; }}",
           ".edge { fill: none; stroke-width: 1.4; stroke-opacity: 0.85; }",
           ".std { stroke-dasharray: 5 3; }",
           ".delay { stroke-dasharray: 2 3; }",
           ".legend text { font-size: 11px; fill: #333; }",
           ".heading { font-size: 15px; font-weight: bold; fill: #1d1d1d; }",
           "</style>", "<defs>"]
    for kind, (_, _, colour) in PALETTE.items():
        out.append(f'<marker id="arrow-{kind}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
                   f'markerHeight="7" orient="auto"><path d="M0,1 L9,5 L0,9 z" fill="{colour}"/></marker>')
    out += ["</defs>", f'<rect width="{width:.0f}" height="{height:.0f}" fill="white"/>',
            f'<text class="heading" x="20" y="30">{_esc(tp.name)}'
            + (f"<title>{_esc(tp.doc)}</title>" if tp.doc else "") + "</text>"]
    out.append('<g class="edges">')
    for e, r in zip(es, routes):
        kind = kinds.get(e.src, "latent")
        cls = "edge std" if e.std_only else "edge"
        what = "noise std of " if e.std_only else ""
        out.append(f'<path class="{cls}" d="{_path(r.points)}" stroke="{PALETTE[kind][2]}" '
                   f'marker-end="url(#arrow-{kind})"><title>{_esc(what + e.dst)} reads {_esc(e.src)}</title></path>')
    for i, e in enumerate(delays):
        a, b = boxes[e.src], boxes[e.dst]
        y = loop_y + 12.0 * i
        x0, y0, x1, y1 = a.x + a.w / 2 + 4, a.y + a.h / 2, b.x + b.w / 2 - 4, b.y + b.h / 2
        out.append(f'<path class="edge delay" d="M{x0:.1f},{y0:.1f} C{x0:.1f},{y:.1f} {x1:.1f},{y:.1f} '
                   f'{x1:.1f},{y1:.1f}" stroke="{PALETTE["state"][2]}" marker-end="url(#arrow-state)">'
                   f"<title>{_esc(e.dst)} at the next step reads {_esc(e.src)}</title></path>")
        out.append(f'<text class="label" x="{(x0 + x1) / 2:.1f}" y="{y - 2:.1f}" text-anchor="middle">next</text>')
    out.append("</g>")
    out.append('<g class="nodes">')
    for n in ns:
        b = boxes[n.name]
        fill, stroke, _ = PALETTE[n.kind]
        tip = f"{KIND_NAMES[n.kind]} {n.name} : {n.label}" + (f"\n{n.doc}" if n.doc else "")
        cx, top = b.x + b.w / 2, b.y - b.h / 2
        out += [f'<g class="node {n.kind}" id="{_esc(n.kind + "-" + n.name)}">',
                f"<title>{_esc(tip)}</title>",
                f'<rect x="{b.x:.1f}" y="{top:.1f}" width="{b.w:.1f}" height="{b.h:.1f}" rx="6" '
                f'fill="{fill}" stroke="{stroke}" stroke-width="1.6"/>',
                f'<text class="name" x="{cx:.1f}" y="{b.y - 3:.1f}" text-anchor="middle">{_esc(n.name)}</text>',
                f'<text class="label" x="{cx:.1f}" y="{b.y + 11:.1f}" text-anchor="middle">{_esc(n.label)}</text>',
                "</g>"]
    out.append("</g>")
    out += legend
    out.append("</svg>")
    return "\n".join(out) + "\n"


__all__ = ["Node", "Edge", "nodes", "edges", "to_dot", "to_svg", "PALETTE"]
