"""`polc report`: the page of a real refinement run on the toy task (fake model, real fits,
rollouts, analyses and diagnostics), of a real experiment's outputs and of a trace, opened
in headless Chromium through the DevTools protocol: no request leaves file://, no script
error, the rounds, scores, graphs, highlighted source and diffs are in the rendered page,
the hover read-out works, and the screenshot is not blank. Bad inputs write nothing.
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest
from refine_helpers import fits_once  # noqa: F401  (module fixture)
from refine_helpers import (ANALYSIS, BROKEN, BUNDLED_CAR_RACING, FAST, GOOD, STOP, make_task, pol, revise,
                            run_loop)

from polc.cli import main
from polc.runtime.envs.metric import RETURN
from polc.runtime.refine.loop import write_config
from polc.runtime.task import load_task
from polc.runtime.refine.report import write_summary
from polc.runtime.refine.rundir import RunDir
from polc.runtime.refine.scores import mean_std
from polc.runtime.refine.scripted import Choice

ROOT = Path(__file__).resolve().parents[3]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
EVIL = "</script><script>window.__evil = 1</script><img src=x onerror=\"window.__evil = 2\">"


# ---- a small DevTools-protocol client ---------------------------------------------------------


class Browser:
    """Headless Chromium on a DevTools port of 127.0.0.1, one page; every name lookup fails
    (`--host-resolver-rules`), and every request the page makes is recorded."""

    def __init__(self, tmp: Path):
        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
             "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0", f"--user-data-dir={tmp}",
             "--host-resolver-rules=MAP * ~NOTFOUND", "--window-size=1280,1600", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.url = self._devtools_url()
        self.next_id, self.events = 0, []

    def attach(self, ws) -> None:
        """Open the page to drive on the browser's websocket `ws`."""
        self.ws = ws
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Network", "Log"):
            self.call(f"{domain}.enable", session=True)

    def _devtools_url(self) -> str:
        found: list[str] = []

        def read() -> None:
            for line in self.proc.stderr:
                m = re.search(r"DevTools listening on (ws://\S+)", line)
                if m:
                    found.append(m.group(1))
                    break
            for _ in self.proc.stderr:  # keep draining, or chromium blocks on a full pipe
                pass

        self.reader = threading.Thread(target=read, daemon=True)
        self.reader.start()
        deadline = time.monotonic() + 60
        while not found and time.monotonic() < deadline and self.proc.poll() is None:
            time.sleep(0.05)
        assert found, "chromium did not start its DevTools server"
        return found[0]

    def call(self, method: str, session: bool = False, **params):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params}
        if session:
            msg["sessionId"] = self.session
        self.ws.send(json.dumps(msg))
        while True:
            reply = json.loads(self.ws.recv(timeout=60))
            if reply.get("id") == self.next_id:
                assert "error" not in reply, (method, reply["error"])
                return reply.get("result", {})
            self.events.append(reply)

    def open(self, path: Path) -> None:
        self.events = []
        self.call("Page.navigate", session=True, url=path.resolve().as_uri())
        deadline = time.monotonic() + 60
        while not any(e.get("method") == "Page.loadEventFired" for e in self.events):
            assert time.monotonic() < deadline, "the page did not load"
            self.events.append(json.loads(self.ws.recv(timeout=60)))

    def js(self, expression: str):
        result = self.call("Runtime.evaluate", session=True, expression=expression, returnByValue=True)
        assert "exceptionDetails" not in result, result
        return result["result"].get("value")

    def problems(self) -> tuple[list[str], list[str]]:
        """(script errors and console errors, URLs requested other than file: and data:)."""
        errors = [json.dumps(e["params"])[:300] for e in self.events
                  if e.get("method") == "Runtime.exceptionThrown"
                  or (e.get("method") == "Runtime.consoleAPICalled" and e["params"]["type"] in ("error", "assert"))
                  or (e.get("method") == "Log.entryAdded" and e["params"]["entry"]["level"] == "error")]
        urls = [e["params"]["request"]["url"] for e in self.events if e.get("method") == "Network.requestWillBeSent"]
        return errors, [u for u in urls if not u.startswith(("file:", "data:"))]

    def screenshot(self):
        from PIL import Image

        data = base64.b64decode(self.call("Page.captureScreenshot", session=True, format="png")["data"])
        return Image.open(io.BytesIO(data)).convert("RGB")

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self.reader.join(timeout=30)  # it reads to the end of chromium's stderr
        self.proc.stderr.close()


@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed (scripts/system-deps.sh installs it); CI must run these tests")
        pytest.skip("chromium is not installed (apt-get install chromium, or scripts/system-deps.sh)")
    tmp = Path(tempfile.mkdtemp(prefix="polc-report-chromium-"))
    from websockets.sync.client import connect

    b = Browser(tmp)
    try:
        with connect(b.url, max_size=None, open_timeout=30) as ws:
            b.attach(ws)
            yield b
    finally:
        b.close()
    shutil.rmtree(tmp, ignore_errors=True)


# ---- a real run on the toy task ---------------------------------------------------------------


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """Round 0 revises (a broken revision, then its repair), round 1 stops; summary.json as
    `polc refine` writes it."""
    root = tmp_path_factory.mktemp("report")
    task = make_task(root / "task")
    loop, _ = run_loop(task, root / "run", [ANALYSIS, revise(BROKEN), pol(GOOD), ANALYSIS, STOP])
    run = RunDir(root / "run")
    run.update_config(**write_config(FAST, Choice("fake:model", "fake"), load_task(str(task)), "polc refine task"))
    write_summary(run, [m.to_json() for m in loop.history], "the model chose STOP", None, loop.metric)
    return root / "run"


def report(*args: str) -> int:
    return main(["report", *map(str, args)])


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_the_page_of_a_run_renders_offline_with_every_round(run_dir, browser, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    # text a model or an analysis wrote may hold markup: it must show as text, never run
    (run / "round_00" / "analysis_1.txt").write_text(EVIL)
    doc = "</script><script>window.__evil = 3</script><b>bold</b>"  # a doc string of a .pol: in source and graph
    pol1 = run / "round_01" / "policy.pol"
    pol1.write_text(pol1.read_text().replace('"distance to go"', f'"{doc}"'))
    out = tmp_path / "run.html"
    assert report(run, "-o", out) == 0
    browser.open(out)
    errors, external = browser.problems()
    assert errors == [] and external == []
    assert browser.js("document.body.dataset.ready") == "yes"  # the page's script ran to its end
    assert browser.js("window.__evil === undefined")
    assert EVIL in browser.js("document.getElementById('round-0').innerText")
    assert doc in browser.js("document.querySelector('#round-1 pre.pol').innerText")
    assert doc in browser.js("document.querySelector('#round-1 div.graph svg').textContent")  # a node's tooltip
    assert browser.js("document.querySelectorAll('b').length") == 0
    summary = json.loads((run / "summary.json").read_text())
    text = browser.js("document.body.innerText")
    for m in summary["rounds"]:
        assert browser.js(f"!!document.getElementById('round-{m['round']}')")
        assert mean_std(m["eval"]["mean"], m["eval"]["std"], RETURN) in text
    assert browser.js("document.querySelectorAll('div.graph svg').length") == 2  # a dataflow graph per round
    assert browser.js("!!document.getElementById('r01-latent-err')")  # its nodes, ids prefixed per round
    assert browser.js("document.querySelectorAll('pre.pol .kd').length") > 10  # highlighted declarations
    # round 1's diff: the gains the model revised, removed and added
    added = browser.js("[...document.querySelectorAll('#round-1 pre.diff .add')].map(e => e.innerText)")
    assert any("weight kp" in a and "1.0" in a for a in added)
    assert any("weight kp" in d and "0.3" in d for d in
               browser.js("[...document.querySelectorAll('#round-1 pre.diff .del')].map(e => e.innerText)"))
    assert "revision.pol: polc check said" in text and "REVISE" in text and "It reaches the target." in text
    # hovering the score chart reads out a round and its score
    browser.js("""(() => { const svg = document.querySelector('#scores svg.chart'); const b = svg.getBoundingClientRect();
        svg.dispatchEvent(new MouseEvent('mousemove', {clientX: b.right - 30, clientY: b.top + 60, bubbles: true})); })()""")
    tip = browser.js("document.getElementById('tip').textContent")
    last = summary["rounds"][-1]
    assert tip.startswith(f"round {last['round']}") and mean_std(last["eval"]["mean"], last["eval"]["std"], RETURN) in tip
    shot = browser.screenshot()
    assert len(shot.getcolors(1 << 16) or range(1 << 16)) > 50  # text, boxes and colours, not a blank page


def test_only_the_pages_own_script_runs_even_if_markup_escaped(browser, tmp_path):
    # An escaping bug would put a script of someone else's into the page: the CSP names the
    # page's own script by its hash (no 'unsafe-inline'), so the browser refuses the other one.
    from polc.runtime.report.page import SCRIPT_HASH, document

    page = document("t", "s", [("a", "A", "<script>window.__evil = 1</script>"
                                          "<img src=x onerror=\"window.__evil = 2\">")])
    assert f"script-src '{SCRIPT_HASH}'" in page and "script-src 'unsafe-inline'" not in page
    out = tmp_path / "csp.html"
    out.write_text(page)
    browser.open(out)
    assert browser.js("document.body.dataset.ready") == "yes"  # the page's own script ran
    assert browser.js("window.__evil === undefined")
    refused = [e for e in browser.events if e.get("method") == "Log.entryAdded"
               and "Content Security Policy" in e["params"]["entry"]["text"]]
    assert refused  # and the browser said why the other one did not


def test_a_weight_fitted_onto_its_bound_is_marked_pinned(run_dir, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    params = json.loads((run / "round_01" / "params.json").read_text())
    params["weights"]["kd"] = 0.001  # kd >= 0, declared 0.5: 0.2% of the way back to it
    (run / "round_01" / "params.json").write_text(json.dumps(params))
    assert report(run, "-o", tmp_path / "p.html") == 0
    page = (tmp_path / "p.html").read_text()
    assert page.count('class="pinned"') == 1 and "pinned: kd at its lower bound 0" in page


def test_a_missing_or_damaged_file_of_a_round_is_said_on_the_page(run_dir, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    (run / "round_01" / "params.json").unlink()
    (run / "round_00" / "metrics.json").write_text("{not json")
    (run / "round_01" / "trace.parquet").write_bytes(b"PAR1 not really")
    (run / "summary.json").unlink()
    (run / "round_01" / "done").unlink()
    (run / "round_01" / "policy.pol").write_text(BROKEN)  # hand-edited after the run
    assert report(run, "-o", tmp_path / "m.html") == 0
    page = (tmp_path / "m.html").read_text()
    assert "Round 1 did not finish (no done marker)" in page
    assert f"{run / 'round_01' / 'policy.pol'} does not pass polc check" in page and "E0302" in page
    assert f"{run / 'round_01' / 'params.json'} is missing: no fit." in page
    assert f"{run / 'round_00' / 'metrics.json'} is not valid JSON" in page
    assert "round 0 has no metrics." in page
    assert "summary.json is missing" in page
    assert "is not a readable Parquet table" in page
    assert 'id="round-1"' in page and page.count('<div class="graph">') == 1  # round 0's graph; round 1 has none


def test_the_page_of_a_trace_shows_its_columns_returns_and_latents(run_dir, browser, tmp_path):
    from polc.runtime.io.table import read_table

    trace = run_dir / "round_01" / "trace.parquet"
    out = tmp_path / "trace.html"
    assert report(trace, "--policy", run_dir / "round_01" / "policy.pol", "-o", out) == 0
    browser.open(out)
    assert browser.problems() == ([], [])
    text = browser.js("document.body.innerText")
    table = read_table(str(trace))
    ret = float(table.column("reward").astype("float64").sum())
    assert "distance to go" in text and "target - pos, and -vel" in text  # the columns' docs
    assert f"{ret:.6g}" in text  # the episode's return
    assert browser.js("document.querySelectorAll('#latents svg.chart').length") >= 1
    assert browser.js("document.querySelectorAll('div.graph svg').length") == 1
    # hovering a latent's plot at its left edge reads out step 0 and the value logged there
    err = [c for c in table.columns if c == "latent.err"]
    tip = browser.js("""(() => { const svg = [...document.querySelectorAll('#latents svg.chart')]
          .find(s => s.textContent.includes('latent.err')); const b = svg.getBoundingClientRect();
        const left = b.left + (+svg.dataset.left) * b.width / svg.viewBox.baseVal.width;
        svg.dispatchEvent(new MouseEvent('mousemove', {clientX: left + 1, clientY: b.top + 80, bubbles: true}));
        return document.getElementById('tip').textContent; })()""")
    step, line = tip.split("\n")
    assert step == "step 0" and line.startswith("trace (episode 0): ")
    assert float(line.rsplit(" ", 1)[1]) == pytest.approx(float(table.column(err[0])[0]), rel=1e-3)


def test_the_page_of_an_experiment_sets_table_1_beside_the_paper(browser, tmp_path):
    """docs/results/car_racing holds a full `polc experiment car_racing` output (measured)."""
    out = tmp_path / "exp.html"
    assert report(ROOT / "docs" / "results" / "car_racing", "-o", out) == 0
    browser.open(out)
    assert browser.problems() == ([], [])
    results = json.loads((ROOT / "docs" / "results" / "car_racing" / "results.json").read_text())
    rows = browser.js("[...document.querySelectorAll('#table tbody tr')].map(r => [...r.cells].map(c => c.innerText))")
    by_method = {r[0]: r for r in rows}
    for r in results["rows"]:
        assert f"{r['mean']:.1f} ± {r['std']:.1f}" in by_method[r["method"]]
    assert by_method["Refined structure + IL"][-1] == "882.0 ± 29.3"  # the paper's, FACTS.md
    assert by_method["MLP + RL, high (2000 resets)"][-1] == "850.2 ± 101.4"
    text = browser.js("document.body.innerText")
    assert "148 (140 of RL + 8 of refinement)" in text  # resets to 900, from the RL rows
    assert browser.js("document.querySelectorAll('img.figure').length") == 2  # rounds.png, rl_curves.png


@pytest.mark.slow
@BUNDLED_CAR_RACING
def test_the_page_of_the_bundled_car_racing_session(browser, tmp_path, bundled_car_racing_quick):
    """The README's `polc refine examples/car_racing` (--quick), then its page."""
    run, _, summary = bundled_car_racing_quick
    out = tmp_path / "car_racing.html"
    assert report(run, "-o", out) == 0
    browser.open(out)
    assert browser.problems() == ([], [])
    for m in summary["rounds"]:
        section = browser.js(f"document.getElementById('round-{m['round']}').innerText")
        assert mean_std(m["eval"]["mean"], m["eval"]["std"], RETURN) in section
    assert browser.js("document.querySelectorAll('div.graph svg').length") == len(summary["rounds"])
    # a weight marked pinned for every weight polc's diagnostics found on its bound
    warned = sum(f.read_text().count(" sits on its ") for f in run.glob("round_*/diagnostics.txt"))
    assert browser.js("document.querySelectorAll('.pinned').length") == warned
    assert browser.js("document.querySelectorAll('#latents svg.chart').length") >= 1
    assert len(browser.screenshot().getcolors(1 << 16) or range(1 << 16)) > 50


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_an_experiments_rl_curves_are_drawn_from_its_rl_logs(run_dir, browser, tmp_path):
    """The RL logs of a real `polc rl` run (the toy task's round 1, two updates) under an
    experiment's rl/refined/seed0: its curve, after the refinement's resets."""
    exp = tmp_path / "exp"
    shutil.copytree(ROOT / "docs" / "results" / "car_racing", exp)
    (exp / "rl_curves.png").unlink()
    rl = exp / "rl" / "refined" / "seed0"
    assert main(["rl", str(run_dir / "round_01" / "policy.pol"), "--params", str(run_dir / "round_01" / "params.json"),
                 "--env", "toy_reach", "-o", str(rl), "--n-envs", "1", "--episodes-per-update", "4", "--resets", "10",
                 "-q"]) == 0
    log = json.loads((rl / "log.json").read_text())["log"]
    offset = json.loads((exp / "results.json").read_text())["refinement"]["resets"]
    out = tmp_path / "exp.html"
    assert report(exp, "-o", out) == 0
    browser.open(out)
    assert browser.problems() == ([], [])
    series = browser.js("JSON.parse(document.querySelector('#rl svg.chart').dataset.series)")
    assert [s["name"] for s in series] == ["Refined structure"]
    assert series[0]["x"] == [r["resets"] + offset for r in log]
    assert series[0]["y"] == pytest.approx([r["return_mean"] for r in log])


# ---- bad input: a clear error, nothing written ---------------------------------------------------


@pytest.fixture
def kept(tmp_path):
    out = tmp_path / "out.html"
    out.write_text("an earlier page")
    return out


def _refused(capsys, kept, code: int, *args, message: str) -> None:
    assert report(*args, "-o", kept) == code
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err, err
    assert kept.read_text() == "an earlier page"
    assert not list(kept.parent.glob(".out.html.*"))


def test_bad_inputs_are_refused_and_write_nothing(run_dir, tmp_path, kept, capsys):
    _refused(capsys, kept, 2, tmp_path / "nowhere", message=f"cannot read '{tmp_path / 'nowhere'}'")
    empty = tmp_path / "empty"
    empty.mkdir()
    _refused(capsys, kept, 1, empty, message="is neither a refinement run (no run.json) nor an experiment")
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    (run / "summary.json").write_text('{"rounds": 3}')
    _refused(capsys, kept, 1, run, message="summary.json' has no list of rounds")
    (run / "summary.json").write_text("[1, 2")
    _refused(capsys, kept, 1, run, message="summary.json' is not valid JSON")
    (run / "run.json").write_text('{"format": "something else"}')
    _refused(capsys, kept, 1, run, message="is not a polc-refine-run/1 file")
    damaged = tmp_path / "damaged.parquet"
    data = bytearray((run_dir / "round_00" / "trace.parquet").read_bytes())
    data[len(data) // 3] ^= 0xFF
    damaged.write_bytes(bytes(data))
    _refused(capsys, kept, 1, damaged, message=f"'{damaged}'")
    exp = tmp_path / "exp"
    exp.mkdir()
    (exp / "results.json").write_text('{"rows": [{"method": "x"}]}')
    _refused(capsys, kept, 1, exp, message="results.json' has no list of rows")
    _refused(capsys, kept, 1, run_dir / "round_00" / "trace.parquet", "--policy", run_dir / "round_00" / "revision.pol",
             message="Semantic error")


@pytest.mark.slow  # 1.5 s or more: left to the full suite (make test-fast runs the tests below it)
def test_an_output_that_is_not_html_is_a_usage_error(run_dir, tmp_path, capsys):
    assert report(run_dir, "-o", tmp_path / "page.png") == 2
    assert "polc report writes one .html file" in capsys.readouterr().err
    assert not (tmp_path / "page.png").exists()
