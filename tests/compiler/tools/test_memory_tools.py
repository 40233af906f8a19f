"""Policies with memory in the tools: `polc fmt` round-trips `state ... next ...`, `polc graph`
draws delay edges and a state machine's modes, `--emit json` lists states, the Pygments lexer and
the TextMate grammar know `state` and `next`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import polc
from polc.backend.emit import emit_json
from polc.fmt import format_text
from polc.graph import edges, to_dot, to_svg

ROOT = Path(__file__).resolve().parents[3]

FSM = """policy pick "phases"
const APPROACH = 0
const GRASP = 1
obs dist : real in [0, 2]
obs force : real in [0, 1]
state phase : real in [0, 1] = APPROACH next if phase == APPROACH and dist < 0.05 and force > 0.1 then GRASP else phase "the mode"
state grasped : bool = false next if grasped then force > 0.2 else force > 0.5
action grip : real in [0, 1] = if phase == GRASP or grasped then 1 else 0
"""


def test_fmt_round_trips_and_is_idempotent():
    once = format_text(FSM, "t.pol")
    assert format_text(once, "t.pol") == once
    assert "state phase   : real in [0, 1] = APPROACH" in once
    assert "\n    next if phase == APPROACH" in once  # a long `next` breaks onto its own line
    assert "state grasped : bool = false next if grasped then force > 0.2 else force > 0.5" in once
    a, b = polc.loads(once).typed.states, polc.loads(FSM).typed.states
    assert [(s.name, s.init, s.lo, s.hi, s.doc) for s in a] == [(s.name, s.init, s.lo, s.hi, s.doc) for s in b]


def test_graph_draws_delay_edges_and_modes():
    tp = polc.loads(FSM).typed
    delays = {(e.src, e.dst) for e in edges(tp) if e.delay}
    assert delays == {("phase", "phase"), ("dist", "phase"), ("force", "phase"), ("grasped", "grasped"),
                      ("force", "grasped")}
    dot = to_dot(tp)
    assert '"phase" -> "phase" [color="#9b6fc9", style=dotted, label="next", fontsize=9, constraint=false];' in dot
    assert "real in [0, 1] {APPROACH, GRASP}" in dot
    svg = to_svg(tp)
    assert svg.count('class="edge delay"') == 5 and "phase at the next step reads dist" in svg


def test_emit_json_lists_states_with_reads_and_modes():
    p = polc.loads(FSM)
    g = json.loads(emit_json(p.typed, p.analysis.elementwise))
    phase = next(n for n in g["nodes"] if n["name"] == "phase")
    assert phase["kind"] == "state" and phase["init"] == 0.0 and phase["range"] == [0.0, 1.0]
    assert phase["reads"] == ["dist", "force", "phase"]
    assert phase["modes"] == [{"name": "APPROACH", "value": 0.0}, {"name": "GRASP", "value": 1.0}]
    assert phase["interval"] == [0.0, 1.0]


def test_pygments_and_textmate_know_state_and_next():
    from pygments.token import Keyword, Name

    from polc.highlight import PolLexer

    toks = [(t, v) for t, v in PolLexer().get_tokens("state s : real = 0 next s + 1\nobs state : real\n") if v.strip()]
    assert toks[0] == (Keyword.Declaration, "state") and toks[1] == (Name.Variable.Instance, "s")
    assert (Keyword, "next") in toks
    assert (Name.Variable.Global, "state") in toks  # an observation may still be named `state`
    grammar = json.loads((ROOT / "editors/vscode/syntaxes/pol.tmLanguage.json").read_text())
    text = json.dumps(grammar)
    assert "keyword.declaration.state.pol" in text and "if|then|else|next" in text
    rule = next(p for p in grammar["repository"]["declaration"]["patterns"] if "state.pol" in json.dumps(p))
    pattern = re.compile(rule["match"])
    assert pattern.search("state integ : real = 0") and not pattern.search("obs state : real")


def test_lsp_hover_shows_a_states_proved_range_and_initial_value():
    from polc.lsp.document import analyze_document, hover_name

    doc = analyze_document("obs u : real in [-1, 1]\nstate leak : real = 0 next 0.9 * leak + u \"leaky sum\"\n"
                           "action a : real in [-1, 1] = clip(leak, -1, 1)\n", "t.pol")
    shown = hover_name(doc, "leak")
    assert shown.startswith("**state** `leak` : `real`")
    assert "initial value: `0`" in shown and "proved range: `[-10, 10]`" in shown and "leaky sum" in shown
