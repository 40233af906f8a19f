"""The page itself: one HTML file with its style, its script and its pictures inside.

Everything that comes from a file (a doc string, an analysis's output, a model's reply)
goes through `esc` (or Pygments' escaping, for highlighted source; polc.graph escapes its
SVG's text); the script is a constant of this module and reads its data only from escaped
`data-` attributes, so no embedded text can close a tag or start a script.

Charts are plain SVG drawn here (`line_chart`): a handful of lines and points per chart
needs no charting library, and a library embedded in every page would be most of its
size. The hover read-out (step and value under the pointer) is the page's only script.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import math
import re
from dataclasses import dataclass, field
from typing import Optional, Sequence

from polc.graph import PALETTE
from polc.text import number

# Series colours: the first two are matplotlib's C0 and C3, as the run's own PNGs use them.
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf", "#7f7f7f")


def esc(text: object) -> str:
    """Text for HTML content or a quoted attribute."""
    return html.escape(str(text), quote=True)


def num(x: Optional[float], digits: int = 4) -> str:
    """A table cell's number (polc.text.number with `digits` significant digits); `-` for a missing one."""
    if x is None:
        return "-"
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return str(x)
    return number(x, digits)


def png(data: bytes, alt: str) -> str:
    """An embedded PNG (a data: URL, so the page needs no file beside it)."""
    return f'<img class="figure" alt="{esc(alt)}" src="data:image/png;base64,{base64.b64encode(data).decode()}">'


def table(header: Sequence[str], rows: Sequence[Sequence[str]], cls: str = "grid", raw: bool = False) -> str:
    """An HTML table; cells are escaped unless `raw` (the caller built them with `esc`)."""
    cell = (lambda c: c) if raw else esc
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{cell(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def pre(text: str, cls: str = "out") -> str:
    return f'<pre class="{cls}">{esc(text)}</pre>'


def missing(what: str) -> str:
    """A visible note where a part of the page could not be drawn, saying why."""
    return f'<p class="missing">{esc(what)}</p>'


def details(summary: str, body: str, open_: bool = False) -> str:
    return f'<details{" open" if open_ else ""}><summary>{esc(summary)}</summary>{body}</details>'


def inline_svg(svg: str, prefix: str) -> str:
    """An SVG drawn by polc (the dataflow graph) placed in the page: its ids get `prefix`,
    so two graphs on one page do not share arrowheads or node ids."""
    svg = re.sub(r'\bid="', f'id="{prefix}-', svg)
    svg = svg.replace("url(#", f"url(#{prefix}-").replace('href="#', f'href="#{prefix}-')
    return f'<div class="graph">{svg}</div>'


# ---- charts ----------------------------------------------------------------------------


@dataclass
class Series:
    """One line (or points) of a chart; `tips` label each point in the hover read-out."""

    name: str
    x: Sequence[float]
    y: Sequence[float]
    err: Optional[Sequence[float]] = None   # ± bars
    dots: Sequence[Sequence[float]] = ()    # extra values per x (each seed's score), drawn as small dots
    tips: Optional[Sequence[str]] = None
    line: bool = True
    dashed: bool = False


@dataclass
class Chart:
    title: str
    xlabel: str
    ylabel: str
    series: list[Series] = field(default_factory=list)
    hlines: list[tuple[float, str]] = field(default_factory=list)  # reference lines: (y, label)
    xticks: Optional[Sequence[tuple[float, str]]] = None
    width: int = 720
    height: int = 300


def _finite(v: Sequence[float]) -> list[float]:
    return [float(a) for a in v if a is not None and math.isfinite(float(a))]


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.ceil(lo / step) * step
    out, t = [], start
    while t <= hi + step * 1e-9:
        out.append(round(t, 12))
        t += step
    return out


def line_chart(c: Chart) -> str:
    """An SVG chart. Hovering shows, for the x under the pointer, each series' value there
    (the script reads the series from the `data-series` attribute)."""
    legend_h = 18 if len(c.series) > 1 else 0  # a row of series names under the axis label
    left, right, top, bottom = 64, 16, 28, 44 + legend_h
    w, h = c.width, c.height + legend_h
    xs = [x for s in c.series for x in _finite(s.x)]
    ys = [y for s in c.series for y in _finite(s.y)]
    for s in c.series:
        if s.err is not None:
            ys += _finite([y + e for y, e in zip(s.y, s.err)]) + _finite([y - e for y, e in zip(s.y, s.err)])
        ys += [v for d in s.dots for v in _finite(d)]
    ys += [y for y, _ in c.hlines if math.isfinite(y)]
    if not xs or not ys:
        return missing(f"{c.title}: no finite values to plot.")
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(ys), max(ys)
    xpad = 0.5 if x1 == x0 else (x1 - x0) * (0.04 if len(set(xs)) <= 20 else 0.0)  # few points: off the frame
    x0, x1 = x0 - xpad, x1 + xpad
    pad = (y1 - y0) * 0.06 or (abs(y0) * 0.1 or 1.0)
    y0, y1 = y0 - pad, y1 + pad

    def px(x: float) -> float:
        return left + (x - x0) / (x1 - x0) * (w - left - right)

    def py(y: float) -> float:
        return top + (y1 - y) / (y1 - y0) * (h - top - bottom)

    out = [f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
           f'data-x0="{x0!r}" data-x1="{x1!r}" data-left="{left}" data-right="{w - right}" '
           f'data-xlabel="{esc(c.xlabel)}" data-series="{esc(_series_json(c.series))}">',
           f'<text x="{left}" y="16" class="ctitle">{esc(c.title)}</text>']
    for t in _ticks(y0, y1):
        out.append(f'<line x1="{left}" x2="{w - right}" y1="{py(t):.1f}" y2="{py(t):.1f}" class="gridline"/>'
                   f'<text x="{left - 6}" y="{py(t) + 4:.1f}" class="tick" text-anchor="end">{esc(num(t))}</text>')
    xticks = c.xticks if c.xticks is not None else [(t, num(t)) for t in _ticks(x0, x1) if x0 <= t <= x1]
    for t, label in xticks:
        out.append(f'<text x="{px(t):.1f}" y="{h - bottom + 16}" class="tick" text-anchor="middle">{esc(label)}</text>')
    out.append(f'<rect x="{left}" y="{top}" width="{w - left - right}" height="{h - top - bottom}" class="frame"/>')
    out.append(f'<text x="{(left + w - right) / 2:.0f}" y="{h - 6 - legend_h}" class="axis" text-anchor="middle">'
               f'{esc(c.xlabel)}</text>')
    out.append(f'<text transform="translate(14 {(top + h - bottom) / 2:.0f}) rotate(-90)" class="axis" '
               f'text-anchor="middle">{esc(c.ylabel)}</text>')
    for y, label in c.hlines:
        out.append(f'<line x1="{left}" x2="{w - right}" y1="{py(y):.1f}" y2="{py(y):.1f}" class="ref"/>'
                   f'<text x="{w - right - 4}" y="{py(y) - 4:.1f}" class="tick" text-anchor="end">{esc(label)}</text>')
    for i, s in enumerate(c.series):
        color = COLORS[i % len(COLORS)]
        pts = [(px(x), py(y)) for x, y in zip(s.x, s.y) if y is not None and math.isfinite(y)]
        if s.line and len(pts) > 1:
            d = " ".join(f"{a:.1f},{b:.1f}" for a, b in pts)
            dash = ' stroke-dasharray="6 4"' if s.dashed else ""
            out.append(f'<polyline points="{d}" fill="none" stroke="{color}" stroke-width="1.6"{dash}/>')
        for x, vals in zip(s.x, s.dots):
            out += [f'<circle cx="{px(x):.1f}" cy="{py(v):.1f}" r="2.2" class="dot"/>' for v in _finite(vals)]
        if s.err is not None:
            for x, y, e in zip(s.x, s.y, s.err):
                if y is not None and e is not None and math.isfinite(y) and math.isfinite(e):
                    out.append(f'<line x1="{px(x):.1f}" x2="{px(x):.1f}" y1="{py(y - e):.1f}" y2="{py(y + e):.1f}" '
                               f'stroke="{color}" stroke-width="1.4"/>')
        if not s.line or len(pts) <= 60:
            out += [f'<circle cx="{a:.1f}" cy="{b:.1f}" r="3.5" fill="{color}"/>' for a, b in pts]
    out.append(_legend(c.series, left, h - 6))
    out.append('<line class="cursor" x1="0" x2="0" y1="{}" y2="{}" visibility="hidden"/>'.format(top, h - bottom))
    out.append("</svg>")
    return '<figure class="chart">' + "".join(out) + "</figure>"


def _legend(series: Sequence[Series], x: float, y: float) -> str:
    if len(series) < 2:
        return ""
    out = []
    for i, s in enumerate(series):
        out.append(f'<rect x="{x:.0f}" y="{y - 9}" width="10" height="10" fill="{COLORS[i % len(COLORS)]}"/>'
                   f'<text x="{x + 14:.0f}" y="{y}" class="tick">{esc(s.name)}</text>')
        x += 34 + 6.2 * len(s.name)  # 11 px text: about 6 px a character
    return "".join(out)


def _series_json(series: Sequence[Series]) -> str:
    """What the hover read-out needs: per series its name, x, y and point labels."""
    def clean(v: Sequence[float]) -> list:
        return [float(a) if a is not None and math.isfinite(float(a)) else None for a in v]

    return json.dumps([{"name": s.name, "x": clean(s.x), "y": clean(s.y), "tips": list(s.tips) if s.tips else None,
                        "color": COLORS[i % len(COLORS)]} for i, s in enumerate(series)], separators=(",", ":"))


# ---- the document ----------------------------------------------------------------------

CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #1d1d1d; background: #fafafa; }
header.top { background: #24324a; color: #fff; padding: 14px 24px; }
header.top h1 { margin: 0; font-size: 20px; }
header.top p { margin: 4px 0 0; color: #d6deea; }
main { padding: 8px 24px 40px; max-width: 1200px; }
section { background: #fff; border: 1px solid #ddd; border-radius: 6px; padding: 8px 16px 12px; margin: 14px 0; }
h2 { font-size: 17px; margin: 8px 0; } h3 { font-size: 15px; margin: 12px 0 6px; }
nav.toc a { margin-right: 12px; }
table.grid { border-collapse: collapse; margin: 6px 0; font-size: 13px; }
table.grid th, table.grid td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; vertical-align: top; }
table.grid th { background: #eef1f5; }
table.grid td.numcell { text-align: right; font-variant-numeric: tabular-nums; }
pre { background: #f4f4f4; border: 1px solid #e0e0e0; padding: 8px; overflow-x: auto; font-size: 12px; max-height: 480px; }
pre.pol .kd, pre.pol .k { color: #7b2fa8; font-weight: bold; } pre.pol .kt { color: #00709a; }
pre.pol .kc, pre.pol .ow { color: #7b2fa8; } pre.pol .sd, pre.pol .se { color: #a15c00; }
pre.pol .c1 { color: #6a7a6a; font-style: italic; } pre.pol .mf { color: #a02020; } pre.pol .nb { color: #1f5fb0; }
pre.pol .nn { font-weight: bold; } pre.pol .err { color: #c00; text-decoration: underline wavy #c00; }
"""
# A declared name in the colour of its kind in the dataflow graph (the paper's Figure 2);
# the Pygments classes of polc.highlight.DECLARED: obs, weight, latent, action.
CSS += "".join(f"pre.pol .{cls} {{ color: {PALETTE[kind][1]}; font-weight: bold; }}\n"
               for cls, kind in (("vg", "obs"), ("no", "weight"), ("nv", "latent"), ("nf", "action")))
CSS += """
pre.diff .add { background: #dff5df; display: block; } pre.diff .del { background: #fbe0e0; display: block; }
pre.diff .hunk { color: #6060a0; display: block; } pre.diff .ctx { display: block; }
pre.pol .ln { color: #999; user-select: none; }
.missing { color: #a33; background: #fff3f3; border-left: 3px solid #c33; padding: 4px 8px; }
.notice { background: #fff7d6; border-left: 3px solid #d9a400; padding: 4px 8px; }
.pinned, .outside { color: #a33; font-weight: bold; }
.kept { color: #2a7a2a; font-weight: bold; }
.move { font-weight: bold; }
img.figure { max-width: 100%; border: 1px solid #eee; }
div.graph { overflow-x: auto; }
figure.chart { margin: 6px 0; }
svg.chart .ctitle { font-size: 13px; font-weight: bold; }
svg.chart .tick { font-size: 11px; fill: #444; } svg.chart .axis { font-size: 12px; fill: #222; }
svg.chart .gridline { stroke: #e6e6e6; } svg.chart .frame { fill: none; stroke: #999; }
svg.chart .ref { stroke: #777; stroke-dasharray: 4 3; } svg.chart .dot { fill: #888; fill-opacity: 0.6; }
svg.chart .cursor { stroke: #555; stroke-width: 1; }
#tip { position: fixed; pointer-events: none; background: rgba(30,30,30,0.92); color: #fff; font-size: 12px;
       padding: 4px 7px; border-radius: 4px; white-space: pre; display: none; z-index: 10; }
"""

# The hover read-out: for the x under the pointer, the nearest point of every series.
SCRIPT = """
(function () {
  var tip = document.getElementById('tip');
  function fmt(v) { return v === null ? '-' : (Math.abs(v) >= 1e4 || (v !== 0 && Math.abs(v) < 1e-3)) ? v.toExponential(3) : String(+v.toPrecision(4)); }
  document.querySelectorAll('svg.chart[data-series]').forEach(function (svg) {
    var series = JSON.parse(svg.getAttribute('data-series'));
    var x0 = +svg.dataset.x0, x1 = +svg.dataset.x1, left = +svg.dataset.left, right = +svg.dataset.right;
    var cursor = svg.querySelector('.cursor');
    svg.addEventListener('mousemove', function (ev) {
      var box = svg.getBoundingClientRect();
      var sx = (ev.clientX - box.left) * (svg.viewBox.baseVal.width / box.width);
      if (sx < left || sx > right) { tip.style.display = 'none'; cursor.setAttribute('visibility', 'hidden'); return; }
      var x = x0 + (sx - left) / (right - left) * (x1 - x0), lines = [], at = null;
      series.forEach(function (s) {
        var best = -1, dist = Infinity;
        for (var i = 0; i < s.x.length; i++) {
          if (s.y[i] === null) continue;
          var d = Math.abs(s.x[i] - x);
          if (d < dist) { dist = d; best = i; }
        }
        if (best < 0) return;
        if (at === null) at = s.x[best];
        lines.push(s.name + ': ' + (s.tips ? s.tips[best] : fmt(s.y[best])));
      });
      if (at === null) return;
      var cx = left + (at - x0) / (x1 - x0) * (right - left);
      cursor.setAttribute('x1', cx); cursor.setAttribute('x2', cx); cursor.setAttribute('visibility', 'visible');
      tip.textContent = svg.dataset.xlabel + ' ' + fmt(at) + '\\n' + lines.join('\\n');
      tip.style.display = 'block'; tip.style.left = (ev.clientX + 14) + 'px'; tip.style.top = (ev.clientY + 10) + 'px';
    });
    svg.addEventListener('mouseleave', function () { tip.style.display = 'none'; cursor.setAttribute('visibility', 'hidden'); });
  });
  document.body.setAttribute('data-ready', 'yes');
})();
"""

# The CSP source of SCRIPT (the exact text between <script> and </script>): see document()
SCRIPT_HASH = "sha256-" + base64.b64encode(hashlib.sha256(SCRIPT.encode("utf-8")).digest()).decode("ascii")


def document(title: str, subtitle: str, sections: Sequence[tuple[str, str, str]]) -> str:
    """The whole page: `sections` are (anchor id, heading, HTML body)."""
    toc = " ".join(f'<a href="#{esc(a)}">{esc(hd)}</a>' for a, hd, _ in sections)
    body = "".join(f'<section id="{esc(a)}"><h2>{esc(hd)}</h2>{b}</section>' for a, hd, b in sections)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            # the page may load nothing from anywhere: only its own inline style, data: images and
            # the one script whose hash this names, so markup that escaped by a bug could not run
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data:; "
            f"style-src 'unsafe-inline'; script-src '{SCRIPT_HASH}'\">"
            f"<title>{esc(title)}</title><style>{CSS}</style></head><body>"
            f'<header class="top"><h1>{esc(title)}</h1><p>{esc(subtitle)}</p></header>'
            f'<main><nav class="toc">{toc}</nav>{body}</main><div id="tip"></div>'
            f"<script>{SCRIPT}</script></body></html>\n")


class ReportError(Exception):
    """The input is not something a report can be made of; the message says which file and why."""
