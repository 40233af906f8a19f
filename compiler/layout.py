"""A small layered (Sugiyama-style) graph layout, left to right, for `graph.py`.

Given boxes with sizes, their layers (columns) and directed edges that go from
a lower layer to a higher one, `layered` returns where each box goes and a
route for each edge:

  1. an edge spanning several layers gets a dummy slot in each layer it
     crosses, so it runs between the boxes of that column, not through them;
  2. the order within each layer comes from barycentre sweeps (down, then up,
     a few times), keeping the order with the fewest crossings;
  3. vertical positions: every node is pulled toward the mean height of its
     neighbours, then overlaps are removed without changing the order by
     isotonic regression (pool adjacent violators); a few rounds;
  4. routes: an edge leaves the right side of its source and enters the left
     side of its target at ports spread along the side in the order of the
     other ends (so edges into one box do not cross there), and passes each
     dummy slot as a horizontal run.

Pure Python, no dependencies; quadratic in the edge count, which is fine for
the tens of nodes a Pol program has.
"""

from __future__ import annotations

from dataclasses import dataclass

H_GAP = 70.0  # between columns, room for the curves
V_GAP = 16.0  # between boxes in a column
DUMMY_H = 6.0  # height of a dummy slot
PORT = 7.0  # at most this far apart, the edges meeting one side of a box
SWEEPS = 6
ROUNDS = 30


@dataclass
class Box:
    x: float  # left
    y: float  # centre
    w: float
    h: float


@dataclass(frozen=True)
class Route:
    """An edge's path: `points[0]` leaves the source, `points[-1]` reaches the
    target; consecutive pairs alternate between curves across a gap between
    columns (even index to odd) and straight runs through a dummy slot."""

    src: str
    dst: str
    points: tuple[tuple[float, float], ...]


def _crossings(upper: list[str], lower: list[str], links: list[tuple[str, str]]) -> int:
    pu = {n: i for i, n in enumerate(upper)}
    pl = {n: i for i, n in enumerate(lower)}
    es = sorted((pu[a], pl[b]) for a, b in links if a in pu and b in pl)
    count = 0
    for i, (a1, b1) in enumerate(es):
        for a2, b2 in es[i + 1:]:
            if a2 > a1 and b2 < b1:
                count += 1
    return count


def _order(layers: list[list[str]], links: list[tuple[str, str]]) -> list[list[str]]:
    """Reorder each layer by barycentres of its neighbours; fewest crossings wins."""
    preds: dict[str, list[str]] = {n: [] for layer in layers for n in layer}
    succs: dict[str, list[str]] = {n: [] for layer in layers for n in layer}
    for a, b in links:
        succs[a].append(b)
        preds[b].append(a)

    def total(ls: list[list[str]]) -> int:
        return sum(_crossings(ls[i], ls[i + 1], links) for i in range(len(ls) - 1))

    def sweep(ls: list[list[str]], i: int, ref: int, nbrs: dict[str, list[str]]) -> None:
        pos = {n: k for k, n in enumerate(ls[ref])}
        keyed = []
        for k, n in enumerate(ls[i]):
            near = [pos[m] for m in nbrs[n] if m in pos]
            keyed.append((sum(near) / len(near) if near else k * len(ls[ref]) / max(1, len(ls[i])), k, n))
        ls[i] = [n for _, _, n in sorted(keyed)]

    best, best_count = [list(layer) for layer in layers], total(layers)
    current = [list(layer) for layer in layers]
    for _ in range(SWEEPS):
        for i in range(1, len(current)):
            sweep(current, i, i - 1, preds)
        for i in range(len(current) - 2, -1, -1):
            sweep(current, i, i + 1, succs)
        count = total(current)
        if count < best_count:
            best, best_count = [list(layer) for layer in current], count
    return best


def _isotonic(targets: list[float], seps: list[float]) -> list[float]:
    """Positions closest (least squares) to `targets` with y[i] - y[i-1] >= seps[i]."""
    offsets, acc = [], 0.0
    for i, s in enumerate(seps):
        acc += s if i else 0.0
        offsets.append(acc)
    blocks: list[list[float]] = []  # [mean, count]
    for t, o in zip(targets, offsets):
        blocks.append([t - o, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            m2, c2 = blocks.pop()
            m1, c1 = blocks.pop()
            blocks.append([(m1 * c1 + m2 * c2) / (c1 + c2), c1 + c2])
    z = [m for m, c in blocks for _ in range(int(c))]
    return [zi + o for zi, o in zip(z, offsets)]


def layered(sizes: dict[str, tuple[float, float]], layer_of: dict[str, int], edges: list[tuple[str, str]],
            margin: float = 20.0, top: float = 0.0) -> tuple[dict[str, Box], list[Route], float, float]:
    """Lay out boxes (`sizes`: name -> (width, height)) in columns `layer_of`.
    Every edge (src, dst) must go to a higher layer. Returns the boxes, one
    route per edge (in the order given), and the drawing's width and height
    (boxes start at `top` + `margin`)."""
    n_layers = max(layer_of.values(), default=-1) + 1
    layers: list[list[str]] = [[] for _ in range(n_layers)]
    for name in sizes:  # the caller's order is the initial order
        layers[layer_of[name]].append(name)
    size = dict(sizes)
    links: list[tuple[str, str]] = []
    chains: list[list[str]] = []
    for k, (a, b) in enumerate(edges):
        chain = [a]
        for layer in range(layer_of[a] + 1, layer_of[b]):
            d = f"\0{k}.{layer}"  # never a Pol name
            layers[layer].append(d)
            size[d] = (0.0, DUMMY_H)
            chain.append(d)
        chain.append(b)
        links += list(zip(chain, chain[1:]))
        chains.append(chain)
    layers = _order(layers, links)

    col_w = [max([size[n][0] for n in layer] + [24.0]) for layer in layers]
    col_x = [margin + sum(col_w[:i]) + H_GAP * i for i in range(n_layers)]
    nbrs: dict[str, list[str]] = {n: [] for n in size}
    for a, b in links:
        nbrs[a].append(b)
        nbrs[b].append(a)

    def gap(a: str, b: str) -> float:
        g = V_GAP if not (a.startswith("\0") or b.startswith("\0")) else V_GAP / 2
        return (size[a][1] + size[b][1]) / 2 + g

    y: dict[str, float] = {}
    for layer in layers:
        acc = 0.0
        for i, n in enumerate(layer):
            acc += gap(layer[i - 1], n) if i else 0.0
            y[n] = acc
    for r in range(ROUNDS):
        order = range(n_layers) if r % 2 == 0 else range(n_layers - 1, -1, -1)
        for li in order:
            layer = layers[li]
            if not layer:
                continue
            targets = [sum(y[m] for m in nbrs[n]) / len(nbrs[n]) if nbrs[n] else y[n] for n in layer]
            seps = [gap(layer[i - 1], n) if i else 0.0 for i, n in enumerate(layer)]
            for n, v in zip(layer, _isotonic(targets, seps)):
                y[n] = v

    low = min((y[n] - size[n][1] / 2 for n in size), default=0.0)
    shift = top + margin - low
    boxes = {}
    for li, layer in enumerate(layers):
        for n in layer:
            w, h = size[n]
            boxes[n] = Box(col_x[li] + (col_w[li] - w) / 2, y[n] + shift, w, h)
    width = (col_x[-1] + col_w[-1] + margin) if n_layers else 2 * margin
    height = max((b.y + b.h / 2 for b in boxes.values()), default=top) + margin
    routes = _routes(chains, boxes, col_x, col_w, layer_of)
    return {n: b for n, b in boxes.items() if not n.startswith("\0")}, routes, width, height


def _routes(chains: list[list[str]], boxes: dict[str, Box], col_x: list[float], col_w: list[float],
            layer_of: dict[str, int]) -> list[Route]:
    """Points of every edge, with ports spread along the sides of the boxes."""
    outs: dict[str, list[int]] = {}
    ins: dict[str, list[int]] = {}
    for k, chain in enumerate(chains):
        outs.setdefault(chain[0], []).append(k)
        ins.setdefault(chain[-1], []).append(k)

    def ports(name: str, ks: list[int], other) -> dict[int, float]:
        b = boxes[name]
        ks = sorted(ks, key=lambda k: (boxes[other(k)].y, k))
        step = min(PORT, (b.h - 12) / max(1, len(ks) - 1)) if len(ks) > 1 else 0.0
        return {k: b.y + (i - (len(ks) - 1) / 2) * step for i, k in enumerate(ks)}

    out_y: dict[int, float] = {}
    in_y: dict[int, float] = {}
    for name, ks in outs.items():
        out_y.update(ports(name, ks, lambda k: chains[k][1]))
    for name, ks in ins.items():
        in_y.update(ports(name, ks, lambda k: chains[k][-2]))
    routes = []
    for k, chain in enumerate(chains):
        a, b = boxes[chain[0]], boxes[chain[-1]]
        pts = [(a.x + a.w, out_y[k])]
        for d in chain[1:-1]:
            li = layer_of[chain[0]] + len(pts) // 2 + 1
            pts += [(col_x[li], boxes[d].y), (col_x[li] + col_w[li], boxes[d].y)]
        pts.append((b.x, in_y[k]))
        routes.append(Route(chain[0], chain[-1], tuple(pts)))
    return routes


__all__ = ["Box", "Route", "layered"]
