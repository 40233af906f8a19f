"""`polc graph`: the dataflow graph as SVG (laid out by polc) and as Graphviz DOT."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

import polc
from polc import graph, layout
from polc.check import typed as T

ROOT = pathlib.Path(__file__).resolve().parents[3]
SVG = "{http://www.w3.org/2000/svg}"

# 36 names, edges over several layers, std-only reads, an action read by nothing.
BIG = """
policy big "a larger policy for the layout"
obs o1 : real
obs o2 : real
obs o3 : real[3]
obs o4 : real
obs o5 : real
obs o6 : real[2]
obs o7 : real
obs o8 : real "the last observation"
weight w1 : real >= 0 = 1
weight w2 : real >= 0 = 1
weight w3 : real = 1
weight w4 : real = 1
weight w5 : real <= 0 = -1
weight w6 : real = 1
weight w7 : real = 1
weight w8 : real in [0, 1] = 0.5
weight w9 : real = 1
weight w10 : real = 1
weight s1 : real in [0.01, 1] = 0.1
weight s2 : real in [0.01, 1] = 0.1
latent a1 = w1 * o1 + o2
latent a2 = sum(o3) * w2
latent a3 = o4 - o5 + a1
latent a4 = mean(o6) + w3 * o7
latent a5 = a2 * a3 + w4
latent a6 = a4 - o8 * w5
latent a7 = tanh(a5 + a6 * w6)
latent a8 = a1 + a7 * w7
latent a9 = relu(a3 - a6) + o1
latent a10 = a8 * w8 + a9
latent a11 = a10 - a2 * w9
latent a12 = sigmoid(a11 + o2 * w10) "squashed & <escaped>"
action u1 : real in [-1, 1] = clip(a12, -1, 1) ~ normal(std = s1)
action u2 : real in [-1, 1] = clip(a9 - a7, -1, 1) ~ normal(std = s2 + s1 * abs(a10) + a9)
action u3 : real in [0, 1] = sigmoid(a4 + o8)
action u4 : real in [0, 1] = sigmoid(a11)
"""

PROGRAMS = [pytest.param(BIG, id="big")] + [
    pytest.param(p.read_text(), id=str(p.relative_to(ROOT))) for p in sorted(ROOT.glob("examples/**/*.pol"))]


def typed(text: str) -> T.TypedProgram:
    return polc.loads(text, "x.pol", analyze=False).typed


def pairs(tp: T.TypedProgram) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """(reader, read) pairs, and the ones only an action's noise std reads."""
    all_pairs, std_only = set(), set()
    for d in tp.latents + tp.actions:
        mean = T.refs(d.expr)
        std = T.refs(d.std) if isinstance(d, T.Action) and d.std is not None else set()
        all_pairs |= {(d.name, r) for r in mean | std}
        std_only |= {(d.name, r) for r in std - mean}
    for st in tp.states:  # a state reads what its `next` expression reads (a delay edge)
        all_pairs |= {(st.name, r) for r in T.refs(st.update)}
    return all_pairs, std_only


def declared(tp: T.TypedProgram) -> set[str]:
    return {d.name for d in tp.obs + tp.weights + tp.latents + tp.actions + tp.states}


def svg_nodes(root: ET.Element) -> dict[str, ET.Element]:
    out = {}
    for g in root.iter(SVG + "g"):
        if g.get("class", "").startswith("node "):
            name = next(t for t in g.iter(SVG + "text") if t.get("class") == "name").text
            out[name] = g
    return out


def svg_edges(root: ET.Element) -> list[ET.Element]:
    group = next(g for g in root.iter(SVG + "g") if g.get("class") == "edges")
    return [p for p in group.iter(SVG + "path")]


@pytest.mark.parametrize("text", PROGRAMS)
def test_svg_is_xml_with_one_box_per_name_and_one_edge_per_pair(text):
    tp = typed(text)
    root = ET.fromstring(graph.to_svg(tp))
    assert root.tag == SVG + "svg"
    assert set(svg_nodes(root)) == declared(tp)
    all_pairs, std_only = pairs(tp)
    edges = svg_edges(root)
    assert len(edges) == len(all_pairs)
    assert sum("std" in p.get("class").split() for p in edges) == len(std_only)


@pytest.mark.parametrize("text", PROGRAMS)
def test_svg_boxes_do_not_overlap_and_fit_the_canvas(text):
    root = ET.fromstring(graph.to_svg(typed(text)))
    width, height = float(root.get("width")), float(root.get("height"))
    rects = []
    for g in svg_nodes(root).values():
        r = g.find(SVG + "rect")
        rects.append(tuple(float(r.get(k)) for k in ("x", "y", "width", "height")))
    for i, (x, y, w, h) in enumerate(rects):
        assert 0 <= x and x + w <= width and 0 <= y and y + h <= height
        for x2, y2, w2, h2 in rects[i + 1:]:
            assert x + w <= x2 or x2 + w2 <= x or y + h <= y2 or y2 + h2 <= y


def test_svg_node_style_and_tooltips():
    tp = typed(BIG)
    svg = graph.to_svg(tp)
    boxes = svg_nodes(ET.fromstring(svg))
    for name, kind in (("o1", "obs"), ("w1", "weight"), ("a1", "latent"), ("u1", "action")):
        g = boxes[name]
        assert g.get("class") == f"node {kind}"
        assert g.find(SVG + "rect").get("fill") == graph.PALETTE[kind][0]
        assert [t.text for t in g.iter(SVG + "text")][1] == graph.nodes(tp)[
            [n.name for n in graph.nodes(tp)].index(name)].label
    assert "the last observation" in boxes["o8"].find(SVG + "title").text
    assert "squashed & <escaped>" in boxes["a12"].find(SVG + "title").text
    assert "&lt;escaped&gt;" in svg


def test_labels_show_type_and_constraint():
    labels = {n.name: n.label for n in graph.nodes(typed(BIG))}
    assert labels["o3"] == "real[3]"
    assert labels["w1"] == "real >= 0"
    assert labels["w5"] == "real <= 0"
    assert labels["w8"] == "real in [0, 1]"
    assert labels["u3"] == "real in [0, 1]"
    mlp = typed("obs x : real[3]\nlatent h = mlp(x; hidden = [8, 4])\naction u : real = h")
    assert {n.name: n.label for n in graph.nodes(mlp)}["h"] == "real, mlp(8, 4)"


@pytest.mark.parametrize("text", PROGRAMS)
def test_every_edge_goes_to_a_later_layer(text):
    tp = typed(text)
    layer = graph.layers(tp)
    assert set(layer) == declared(tp)
    assert all(layer[o.name] == 0 for o in tp.obs)
    assert all(layer[e.src] < layer[e.dst] for e in graph.edges(tp) if not e.delay)
    assert all(layer[st.name] == 0 for st in tp.states)  # a delay edge goes back to its state, in column 0


def test_unread_actions_are_in_the_last_layer_and_weights_before_their_reader():
    tp = typed(BIG)
    layer = graph.layers(tp)
    last = max(layer.values())
    assert [layer[a] for a in ("u1", "u2", "u3", "u4")] == [last] * 4
    assert layer["w10"] == layer["a12"] - 1 and layer["s1"] == layer["u1"] - 1


@pytest.mark.parametrize("text", PROGRAMS)
def test_dot_lists_every_name_and_pair(text):
    tp = typed(text)
    dot = graph.to_dot(tp)
    assert dot.startswith("digraph ") and dot.rstrip().endswith("}")
    assert {m for m in re.findall(r'^  "(\w+)" \[label=', dot, re.M)} == declared(tp)
    edge_lines = re.findall(r'^  "(\w+)" -> "(\w+)" \[(.*)\];$', dot, re.M)
    all_pairs, std_only = pairs(tp)
    assert {(dst, src) for src, dst, _ in edge_lines} == all_pairs and len(edge_lines) == len(all_pairs)
    assert {(dst, src) for src, dst, attrs in edge_lines if "dashed" in attrs} == std_only


def _program(**groups) -> T.TypedProgram:
    base = dict(name="p", doc=None, obs=(), weights=(), latents=(), actions=(), intents=(), nodes=(), mlps=(),
                file="p.pol", source="")
    base.update(groups)
    return T.TypedProgram(**base)


def test_empty_and_unread_programs_still_draw():
    span = polc.frontend.parse.ast.Span("p.pol", 1, 1, 1, 2)
    real = T.Type("real")
    lonely = _program(obs=(T.Obs("o", real, float("-inf"), float("inf"), None, span),),
                      weights=(T.Weight("w", real, 0.0, float("inf"), 1.0, "unused", span),))
    for tp in (_program(), lonely):
        root = ET.fromstring(graph.to_svg(tp))
        assert set(svg_nodes(root)) == declared(tp)
        assert svg_edges(root) == []
        assert graph.to_dot(tp).count("->") == 0


def test_barycentre_ordering_removes_avoidable_crossings():
    sizes = {n: (40.0, 30.0) for n in "abcdef"}
    layer_of = {"a": 0, "b": 0, "c": 0, "d": 1, "e": 1, "f": 1}
    edges = [("a", "f"), ("b", "e"), ("c", "d")]
    boxes, routes, _, _ = layout.layered(sizes, layer_of, edges)
    # three parallel edges, no crossing: d, e, f end up in the order of c, b, a
    order0 = sorted("abc", key=lambda n: boxes[n].y)
    order1 = sorted("def", key=lambda n: boxes[n].y)
    assert [dict(edges)[n] for n in order0] == order1
    assert [r.points[0][0] for r in routes] == [boxes[a].x + boxes[a].w for a, _ in edges]


def test_long_edges_pass_through_dummy_slots():
    sizes = {"a": (40.0, 30.0), "m": (40.0, 30.0), "z": (40.0, 30.0)}
    boxes, routes, _, _ = layout.layered(sizes, {"a": 0, "m": 1, "z": 2}, [("a", "m"), ("m", "z"), ("a", "z")])
    long = routes[2]
    assert len(long.points) == 4  # leave a, enter the dummy slot in layer 1, leave it, reach z
    assert long.points[1][1] == long.points[2][1]
    m = boxes["m"]
    assert abs(long.points[1][1] - m.y) >= m.h / 2  # the slot is beside the box, not through it


def test_isotonic_keeps_order_and_spacing():
    ys = layout._isotonic([5.0, 0.0, 1.0, 20.0], [0.0, 10.0, 10.0, 10.0])
    assert all(b - a >= 10.0 - 1e-9 for a, b in zip(ys, ys[1:]))
    assert layout._isotonic([0.0, 50.0, 100.0], [0.0, 10.0, 10.0]) == [0.0, 50.0, 100.0]


def test_graph_and_fmt_do_not_import_jax():
    code = ("import sys, polc, polc.fmt, polc.graph, polc.layout, polc.check.program; "
            "polc.graph.to_svg(polc.loads(open(sys.argv[1]).read(), analyze=False).typed); "
            "assert not any(m == 'jax' or m.startswith('jax.') for m in sys.modules), 'jax imported'")
    path = ROOT / "examples" / "car_racing" / "initial.pol"
    subprocess.run([sys.executable, "-c", code, str(path)], check=True)
