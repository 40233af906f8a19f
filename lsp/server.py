"""`polc lsp`: the language server (pygls 2 over stdio).

Every open document is checked by the compiler itself (`document.analyze_document`,
the same diagnostics as `polc check --verbose`) on open, on save and, debounced,
on change, in one worker thread so that hover and completion answer while a
check runs. Requests read the document's latest check, re-checking first when
the text has changed since (a request never answers from stale positions).

Positions: the compiler counts 1-based lines and columns in characters; LSP
counts 0-based lines and columns in the client's code units (UTF-16 unless
negotiated otherwise): `_to_client` and `_from_client` convert.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import sys
import threading
from typing import BinaryIO, Optional

from lsprotocol import types as L
from pygls import uris
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.io_ import StdoutWriter
from pygls.lsp.server import LanguageServer

from polc import __version__
from polc.frontend import ast
from polc.messages import Diagnostic
from polc.text import claim

from . import document as D
from . import framing
from .environment import Environments, runtime_installed
from .builtins import FUNCTIONS, KEYWORDS

DEBOUNCE_SECONDS = 0.2  # a check starts once typing pauses this long

SEVERITY = {"error": L.DiagnosticSeverity.Error, "warning": L.DiagnosticSeverity.Warning,
            "note": L.DiagnosticSeverity.Information}
SYMBOL_KIND = {"obs": L.SymbolKind.Field, "weight": L.SymbolKind.Constant, "latent": L.SymbolKind.Variable,
               "action": L.SymbolKind.Event, "const": L.SymbolKind.Number}
COMPLETION_KIND = {"obs": L.CompletionItemKind.Field, "weight": L.CompletionItemKind.Constant,
                   "latent": L.CompletionItemKind.Variable, "action": L.CompletionItemKind.Event,
                   "const": L.CompletionItemKind.Value}

INTERNAL = "internal-error"  # the code of a bug in polc met on some text (not a Pol diagnostic)

logger = logging.getLogger(__name__)


class PolServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("polc", __version__, text_document_sync_kind=L.TextDocumentSyncKind.Incremental)
        self.checked: dict[str, D.Document] = {}  # uri -> its latest check
        self.last_good: dict[str, D.Document] = {}  # uri -> its latest check that parsed (for completion)
        self.pending: dict[str, asyncio.Task] = {}
        self.lock = threading.Lock()
        # The environment each document's task folder names (W0509, E05xx), loaded once each.
        self.environments = Environments() if runtime_installed() else None
        # One worker: checks of one document run in order, and the compiler runs in one thread at a time.
        self.worker = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="polc-check")

    # ---- reading the client ------------------------------------------------------------------

    def start_io(self, stdin: Optional[BinaryIO] = None, stdout: Optional[BinaryIO] = None) -> None:
        """Serve on standard input and output until the client says exit. The base protocol is
        read by `framing.Framer`, not by pygls's reader: after one badly framed message that one
        stayed out of step for good, and a huge Content-Length made it allocate that much."""
        self._stop_event = threading.Event()
        self.protocol.set_writer(StdoutWriter(stdout or sys.stdout.buffer))
        try:
            asyncio.run(self.read_messages(stdin or sys.stdin.buffer))
        except BrokenPipeError:
            logger.error("polc lsp: the connection to the client is lost; shutting down.")
        except (KeyboardInterrupt, SystemExit):
            pass
        finally:
            self.shutdown()

    async def read_messages(self, stdin: BinaryIO, max_bytes: int = framing.MAX_MESSAGE_BYTES) -> None:
        framer = framing.Framer(max_bytes)
        read = getattr(stdin, "read1", stdin.read)  # what has arrived, never wait for a length
        loop = asyncio.get_running_loop()
        while not self._stop_event.is_set():
            data = await loop.run_in_executor(self.thread_pool, read, 1 << 16)
            if not data:
                return
            for event in framer.feed(data):
                if isinstance(event, framing.Problem):
                    self.framing_problem(event.text)
                else:
                    self.handle_body(event.data)

    def handle_body(self, body: bytes) -> None:
        try:
            message = json.loads(body, object_hook=self.protocol.structure_message)
        except Exception as e:  # noqa: BLE001 - not JSON, too deep, not a JSON-RPC message
            self.framing_problem(f"skipped a message that is not a JSON-RPC message "
                                 f"({type(e).__name__}: {str(e)[:120]})")
            return
        try:
            self.protocol.handle_message(message)
        except Exception as e:  # noqa: BLE001 - as pygls's own reader: say it, serve on
            logger.exception("Unable to handle message")
            self._report_server_error(e, JsonRpcException)

    def framing_problem(self, text: str) -> None:
        """Say what was wrong in the stream (stderr, and the client's log) and serve on."""
        logger.warning("polc lsp: %s", text)
        self.window_log_message(L.LogMessageParams(L.MessageType.Warning, f"polc lsp: {text}"))

    # ---- checking --------------------------------------------------------------------------

    def text_of(self, uri: str) -> str:
        return self.workspace.get_text_document(uri).source

    def file_of(self, uri: str) -> str:
        return uris.to_fs_path(uri) or uri

    def analyze(self, uri: str, text: str) -> D.Document:
        """The check of `text`: the one already made for it, else a new one (one at a time)."""
        with self.lock:
            doc = self.checked.get(uri)
            if doc is not None and doc.text == text:
                return doc
            on_disk = uris.to_fs_path(uri) is not None  # an unsaved buffer has no task folder
            doc = D.analyze_document(text, self.file_of(uri), self.environments if on_disk else None)
            self.checked[uri] = doc
            if doc.tree is not None:
                self.last_good[uri] = doc
            return doc

    def current(self, uri: str) -> D.Document:
        """The check of the document's text as it is now (re-checked here if it changed)."""
        return self.analyze(uri, self.text_of(uri))

    async def check_and_publish(self, uri: str, delay: float = 0.0) -> None:
        if delay:
            await asyncio.sleep(delay)
        text = self.text_of(uri)
        loop = asyncio.get_running_loop()
        doc = await loop.run_in_executor(self.worker, self.analyze, uri, text)
        if uri not in self.workspace.text_documents or self.text_of(uri) != text:
            return  # closed, or edited meanwhile (the check scheduled by that edit publishes)
        version = self.workspace.get_text_document(uri).version
        self.text_document_publish_diagnostics(
            L.PublishDiagnosticsParams(uri=uri, version=version, diagnostics=self.lsp_diagnostics(uri, doc)))

    def schedule(self, uri: str, delay: float) -> None:
        old = self.pending.pop(uri, None)
        if old is not None:
            old.cancel()
        self.pending[uri] = asyncio.get_running_loop().create_task(self.check_and_publish(uri, delay))

    def lsp_diagnostics(self, uri: str, doc: D.Document) -> list[L.Diagnostic]:
        lines = doc.text.split("\n")
        out = [self.lsp_diagnostic(uri, lines, d) for d in doc.diagnostics]
        if doc.internal_error is not None:
            out.append(L.Diagnostic(range=self.range(lines, None), message=doc.internal_error,
                                    severity=L.DiagnosticSeverity.Error, code=INTERNAL, source="polc"))
        return out

    def lsp_diagnostic(self, uri: str, lines: list[str], d: Diagnostic) -> L.Diagnostic:
        message = d.message + (f"\nHint: {d.hint}" if d.hint else "")
        related = [L.DiagnosticRelatedInformation(L.Location(uri, self.range(lines, s)), note)
                   for s, note in d.notes] or None
        return L.Diagnostic(range=self.range(lines, d.span), message=message, severity=SEVERITY.get(d.severity),
                            code=d.code, source="polc", related_information=related)

    # ---- positions ---------------------------------------------------------------------------

    def range(self, lines: list[str], span: Optional[ast.Span]) -> L.Range:
        if span is None:
            return L.Range(L.Position(0, 0), L.Position(0, 0))
        return L.Range(self._to_client(lines, span.line, span.column),
                       self._to_client(lines, span.end_line, span.end_column))

    def _to_client(self, lines: list[str], line: int, column: int) -> L.Position:
        text = lines[line - 1] if 0 < line <= len(lines) else ""
        chars = max(column - 1, 0)
        units = self.workspace.position_codec.client_num_units(text[:chars])
        # A span may end one past the line (a caret on the missing token at its end): kept, so
        # the editor marks the line's end as `polc check`'s caret does (LSP clamps it to the line).
        return L.Position(max(line - 1, 0), units + max(chars - len(text), 0))

    def _from_client(self, doc: D.Document, pos: L.Position) -> tuple[int, int]:
        """(1-based line, 1-based column in characters) of a client position."""
        lines = doc.text.split("\n")
        text = lines[pos.line] if pos.line < len(lines) else ""
        units, chars = 0, 0
        for c in text:
            if units >= pos.character:
                break
            units += self.workspace.position_codec.client_num_units(c)
            chars += 1
        return pos.line + 1, chars + 1


server = PolServer()


# ---- document sync: diagnostics -------------------------------------------------------------


@server.feature(L.TEXT_DOCUMENT_DID_OPEN)
async def did_open(ls: PolServer, params: L.DidOpenTextDocumentParams) -> None:
    await ls.check_and_publish(params.text_document.uri)


@server.feature(L.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: PolServer, params: L.DidChangeTextDocumentParams) -> None:
    ls.schedule(params.text_document.uri, DEBOUNCE_SECONDS)


@server.feature(L.TEXT_DOCUMENT_DID_SAVE)
def did_save(ls: PolServer, params: L.DidSaveTextDocumentParams) -> None:
    ls.schedule(params.text_document.uri, 0.0)


@server.feature(L.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: PolServer, params: L.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    task = ls.pending.pop(uri, None)
    if task is not None:
        task.cancel()
    ls.checked.pop(uri, None)
    ls.last_good.pop(uri, None)
    ls.text_document_publish_diagnostics(L.PublishDiagnosticsParams(uri=uri, diagnostics=[]))


# ---- names: hover, definition, references, rename ------------------------------------------------


def _markdown(text: str) -> L.MarkupContent:
    return L.MarkupContent(kind=L.MarkupKind.Markdown, value=text)


@server.feature(L.TEXT_DOCUMENT_HOVER)
def hover(ls: PolServer, params: L.HoverParams) -> Optional[L.Hover]:
    doc = ls.current(params.text_document.uri)
    line, col = ls._from_client(doc, params.position)
    parts = []
    intent = doc.intent_at(line, col)
    if intent is not None:
        parts.append(D.hover_intent(*intent))
    name = doc.name_at(line, col)
    word = doc.word_at(line, col)
    if name is not None:
        parts.append(D.hover_name(doc, name))
    elif word is not None and intent is None:
        text = D.hover_builtin(word[0])
        if text is not None:
            parts.append(text)
    if not parts:
        return None
    lines = doc.text.split("\n")
    rng = None
    if word is not None:
        rng = L.Range(ls._to_client(lines, line, word[1]), ls._to_client(lines, line, word[2]))
    return L.Hover(contents=_markdown("\n\n---\n\n".join(parts)), range=rng)


def _location(ls: PolServer, uri: str, doc: D.Document, span: ast.Span) -> L.Location:
    return L.Location(uri=uri, range=ls.range(doc.text.split("\n"), span))


@server.feature(L.TEXT_DOCUMENT_DEFINITION)
def definition(ls: PolServer, params: L.DefinitionParams) -> Optional[L.Location]:
    uri = params.text_document.uri
    doc = ls.current(uri)
    name = doc.name_at(*ls._from_client(doc, params.position))
    if name is None:
        return None
    return _location(ls, uri, doc, doc.symbols[name].name_span)


@server.feature(L.TEXT_DOCUMENT_REFERENCES)
def references(ls: PolServer, params: L.ReferenceParams) -> Optional[list[L.Location]]:
    uri = params.text_document.uri
    doc = ls.current(uri)
    name = doc.name_at(*ls._from_client(doc, params.position))
    if name is None:
        return None
    spans = doc.occurrences(name)
    if not params.context.include_declaration:
        spans = spans[1:]
    return [_location(ls, uri, doc, s) for s in spans]


@server.feature(L.TEXT_DOCUMENT_PREPARE_RENAME)
def prepare_rename(ls: PolServer, params: L.PrepareRenameParams) -> Optional[L.Range]:
    doc = ls.current(params.text_document.uri)
    line, col = ls._from_client(doc, params.position)
    if doc.name_at(line, col) is None:
        return None
    _, start, end = doc.word_at(line, col)
    lines = doc.text.split("\n")
    return L.Range(ls._to_client(lines, line, start), ls._to_client(lines, line, end))


@server.feature(L.TEXT_DOCUMENT_RENAME)
def rename(ls: PolServer, params: L.RenameParams) -> Optional[L.WorkspaceEdit]:
    uri = params.text_document.uri
    doc = ls.current(uri)
    name = doc.name_at(*ls._from_client(doc, params.position))
    if name is None:
        raise JsonRpcInvalidParams("Only a declared name (an obs, weight, latent or action) can be renamed.")
    why = D.valid_new_name(doc, name, params.new_name)
    if why is not None:
        raise JsonRpcInvalidParams(f"Cannot rename {name} to {params.new_name}: {why}")
    lines = doc.text.split("\n")
    edits = [L.TextEdit(range=ls.range(lines, s), new_text=params.new_name) for s in doc.occurrences(name)]
    return L.WorkspaceEdit(changes={uri: edits})


# ---- outline, completion, formatting ------------------------------------------------------------


@server.feature(L.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
def document_symbols(ls: PolServer, params: L.DocumentSymbolParams) -> list[L.DocumentSymbol]:
    doc = ls.current(params.text_document.uri)
    if doc.tree is None:
        return []
    lines = doc.text.split("\n")
    out = []
    for d in doc.tree.decls:
        if isinstance(d, ast.ExpectDecl):
            r = ls.range(lines, d.span)
            out.append(L.DocumentSymbol(name="expect " + claim(d.claim), kind=L.SymbolKind.Boolean,
                                        range=r, selection_range=r, detail="intent"))
            continue
        if isinstance(d, ast.PolicyDecl):
            out.append(L.DocumentSymbol(name=d.name, kind=L.SymbolKind.Module, range=ls.range(lines, d.span),
                                        selection_range=ls.range(lines, d.name_span), detail="policy"))
            continue
        sym = doc.symbols.get(getattr(d, "name", None))
        if sym is None or sym.decl is not d:
            continue
        out.append(L.DocumentSymbol(
            name=sym.name, kind=SYMBOL_KIND.get(sym.kind, L.SymbolKind.Variable),
            range=ls.range(lines, d.span), selection_range=ls.range(lines, sym.name_span),
            detail=f"{sym.kind} {D._ast_type(d)}".strip()))
    return out


@server.feature(L.TEXT_DOCUMENT_COMPLETION)
def completion(ls: PolServer, params: L.CompletionParams) -> L.CompletionList:
    uri = params.text_document.uri
    doc = ls.current(uri)
    known = doc if doc.tree is not None else ls.last_good.get(uri, doc)
    items = []
    for sym in known.symbols.values():
        detail = f"{sym.kind} {D._ast_type(sym.decl)}".strip()
        items.append(L.CompletionItem(label=sym.name, kind=COMPLETION_KIND.get(sym.kind), detail=detail,
                                      documentation=getattr(sym.decl, "doc", None)))
    for f in FUNCTIONS.values():
        items.append(L.CompletionItem(label=f.name, kind=L.CompletionItemKind.Function, detail=f.signature,
                                      documentation=f.doc))
    for k, what in KEYWORDS.items():
        items.append(L.CompletionItem(label=k, kind=L.CompletionItemKind.Keyword, detail=what))
    return L.CompletionList(is_incomplete=False, items=items)


@server.feature(L.TEXT_DOCUMENT_FORMATTING)
def formatting(ls: PolServer, params: L.DocumentFormattingParams) -> Optional[list[L.TextEdit]]:
    """`polc fmt`'s text as one edit; none when the text does not parse (its diagnostics say why)."""
    from polc.messages import PolError
    from polc.fmt import format_program
    from polc.frontend.parse import parse_program

    uri = params.text_document.uri
    text = ls.text_of(uri)
    try:
        formatted = format_program(parse_program(text, ls.file_of(uri)))
    except PolError:
        return None
    if formatted == text:
        return []
    n = text.count("\n")
    whole = L.Range(L.Position(0, 0), L.Position(n + 1, 0))
    return [L.TextEdit(range=whole, new_text=formatted)]


@server.feature(L.TEXT_DOCUMENT_CODE_ACTION,
                L.CodeActionOptions(code_action_kinds=[L.CodeActionKind.QuickFix]))
def code_actions(ls: PolServer, params: L.CodeActionParams) -> list[L.CodeAction]:
    """The checker's one-edit suggestions as quick fixes (did-you-mean names, a weight's sign)."""
    uri = params.text_document.uri
    doc = ls.current(uri)
    lines = doc.text.split("\n")
    out = []
    for fix in D.quick_fixes(doc, params.range.start.line + 1, params.range.end.line + 1):
        edits = [L.TextEdit(range=ls.range(lines, span), new_text=new) for span, new in fix.edits]
        out.append(L.CodeAction(title=fix.title, kind=L.CodeActionKind.QuickFix, is_preferred=True,
                                diagnostics=[ls.lsp_diagnostic(uri, lines, fix.diagnostic)],
                                edit=L.WorkspaceEdit(changes={uri: edits})))
    return out


# Observations, weights, latents and actions apart, as the paper's Figure 2 colours them.
LEGEND = L.SemanticTokensLegend(token_types=list(D.TOKEN_KINDS), token_modifiers=["declaration"])


@server.feature(L.TEXT_DOCUMENT_SEMANTIC_TOKENS_FULL, LEGEND)
def semantic_tokens(ls: PolServer, params: L.SemanticTokensParams) -> L.SemanticTokens:
    doc = ls.current(params.text_document.uri)
    lines = doc.text.split("\n")
    data: list[int] = []
    prev_line = prev_char = 0
    for span, kind, is_decl in D.name_tokens(doc):
        start = ls._to_client(lines, span.line, span.column)
        end = ls._to_client(lines, span.end_line, span.end_column)
        delta_char = start.character - prev_char if start.line == prev_line else start.character
        data += [start.line - prev_line, delta_char, end.character - start.character,
                 D.TOKEN_KINDS.index(kind), int(is_decl)]
        prev_line, prev_char = start.line, start.character
    return L.SemanticTokens(data=data)


def serve() -> int:
    """Serve LSP on standard input and output until the client says exit."""
    server.start_io()
    return 0


__all__ = ["server", "serve", "PolServer", "DEBOUNCE_SECONDS"]
