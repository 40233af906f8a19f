"""Re-check latency in the language server: what an edit of a .pol file costs
before the editor shows the new diagnostics (issue 15: under 30 ms for the Car
Racing example in a warm process).

    .venv/bin/python benchmarks/bench_lsp.py [--runs 30] [--json out.json]

Rows (median of `--runs`, each run on a different edit of the text, so no
check is answered from the server's cache):
  * `polc.loads`: parse, check and analyse in a warm process (the compiler alone);
  * `analyze_document`: what the server runs per edit (the phases of `polc.loads`,
    each once, and the name index), in wall time and in this thread's CPU time (on a
    loaded machine the wall time is mostly waiting for a core);
  * `... + the task's environment`: the same with the environment examples/car_racing/task.md
    names (`lsp/environment.py`: its schema loaded once, before timing; the first load is printed);
  * `hover over stdio, no edit`: the round trip of a request alone (the text is checked);
  * `didChange + hover over stdio`: a real `polc lsp` process: an edit, then a
    hover request, which re-checks the new text before it answers; the time from
    sending the edit to the hover's answer (the debounce does not apply: a
    request never answers from stale text).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

import common


def edits(text: str, n: int) -> list[str]:
    """`n` different valid edits: one weight's initial value changed."""
    return [text.replace("= 0.8 ", f"= 0.{(i % 9) + 1}{i // 9} ", 1) for i in range(n)]


def time_in_process(fn, texts: list[str], clock=time.perf_counter) -> list[float]:
    fn(texts[0] + "\n")  # warm: the parser is built and every module imported
    out = []
    for t in texts:
        t0 = clock()
        fn(t)
        out.append(clock() - t0)
    return out


async def time_server(texts: list[str]) -> tuple[list[float], list[float]]:
    from lsprotocol import types as L
    from pygls import uris
    from pygls.lsp.client import LanguageClient

    client = LanguageClient("bench", "1")
    polc = Path(sys.executable).with_name("polc")
    cmd = [str(polc), "lsp"] if polc.exists() else [sys.executable, "-m", "polc.cli", "lsp"]
    await client.start_io(*cmd)
    await client.initialize_async(L.InitializeParams(capabilities=L.ClientCapabilities()))
    uri = uris.from_fs_path(str(common.CAR_RACING))
    client.text_document_did_open(L.DidOpenTextDocumentParams(L.TextDocumentItem(uri, "pol", 1, texts[0] + "\n")))
    where = L.Position(0, 2)
    await client.text_document_hover_async(L.HoverParams(L.TextDocumentIdentifier(uri), where))
    idle = []  # the round trip alone: a hover on text already checked
    for _ in texts:
        t0 = time.perf_counter()
        await client.text_document_hover_async(L.HoverParams(L.TextDocumentIdentifier(uri), where))
        idle.append(time.perf_counter() - t0)
    out = []
    for version, t in enumerate(texts, start=2):
        t0 = time.perf_counter()
        client.text_document_did_change(L.DidChangeTextDocumentParams(
            L.VersionedTextDocumentIdentifier(version, uri), [L.TextDocumentContentChangeWholeDocument(t)]))
        await client.text_document_hover_async(L.HoverParams(L.TextDocumentIdentifier(uri), where))
        out.append(time.perf_counter() - t0)
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return idle, out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=30, help="edits timed per row")
    ap.add_argument("--json", help="also write the raw results here")
    args = ap.parse_args(argv)
    print(common.header("bench_lsp: re-check latency of polc lsp after an edit (Car Racing)"))
    import polc
    from polc.lsp import analyze_document

    from polc.lsp.environment import Environments

    texts = edits(common.CAR_RACING.read_text(encoding="utf-8"), args.runs)
    envs = Environments()
    t0 = time.perf_counter()
    analyze_document(texts[0], str(common.CAR_RACING), envs)  # the one load of the schema (imports gymnasium)
    first_env_check = time.perf_counter() - t0
    load = common.LoadMeter()
    idle, edited = asyncio.run(time_server(texts))
    samples = {
        "polc.loads (warm)": time_in_process(lambda t: polc.loads(t, "initial.pol"), texts),
        "analyze_document (warm)": time_in_process(lambda t: analyze_document(t, "initial.pol"), texts),
        # CPU time of this thread: what the re-check costs, whatever else the machine runs
        "analyze_document, CPU time": time_in_process(lambda t: analyze_document(t, "initial.pol"), texts,
                                                      time.thread_time),
        # the same with the environment its task folder names (the server's: W0509, E05xx), schema kept
        "... + the task's environment, CPU time": time_in_process(
            lambda t: analyze_document(t, str(common.CAR_RACING), envs), texts, time.thread_time),
        "hover over stdio, no edit": idle,
        "didChange + hover over stdio": edited,
    }
    busy = load.busy_cores()
    rows = [[name, common.fmt_time(statistics.median(s)), common.spread(s)] for name, s in samples.items()]
    print(f"median of {args.runs} edits each; python {sys.version.split()[0]}; the first check with the "
          f"environment (loading its schema) {common.fmt_time(first_env_check)}")
    if busy is not None:
        print(f"machine load while timing: {busy:.2f} of {os.cpu_count()} cores busy")
    print(common.table(["what", "median", "iqr"], rows))
    common.write_json(args.json, {"machine": common.machine(), "busy_cores": busy, "samples_s": samples,
                                  "median_s": {k: statistics.median(v) for k, v in samples.items()}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
