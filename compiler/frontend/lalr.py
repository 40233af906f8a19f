"""An LALR(1) parser driven by the tables `polc.grammar.regen` generates from `pol.lark`.

    tables = Tables(pol_tables)                  # once per process
    value = tables.parse(text, reducers)         # reducers[i](children) builds rule i's value

It does what lark's LALR parser and contextual lexer do with the same tables, and
nothing else: one parser state stack, one value stack, and before each token the
lexer of the state on top (the terminals that state accepts, tried in lark's order
as one regular expression, compiled the first time a state of that set is met;
lark's keyword callbacks retype a match that equals a string terminal). Tokens are
`Token`s with lark's `type`, `value`, `line`, `column`, `end_line` and `end_column`.
Any text the tables reject raises `Reject`, and the caller parses it again with lark
itself, whose errors polc's syntax messages are made from; so this path is only ever
asked to be fast on valid programs and to agree with lark on them
(tests/compiler/frontend/test_parser_paths.py: every example, golden and generated program).

Why not lark's own standalone parser: its runtime is most of lark (a 230 KB module,
logging, pickle and 120 classes), and rebuilding its table objects from their
serialized form took 6 ms; together 18 ms of a `polc check` that lasts 100. The
tables here are the literals lark computed, so the LALR construction stays lark's.
"""

from __future__ import annotations

import re


class Reject(Exception):
    """The tables do not accept the text here (a syntax error: lark's parser will say what)."""


class Token:
    """A terminal as lark's `Token` has it: `type`, `value` and where it starts and ends
    (lines and columns 1-based, the end one past the last character)."""

    __slots__ = ("type", "value", "line", "column", "end_line", "end_column")

    def __init__(self, type_, value, line, column, end_line, end_column):
        self.type, self.value = type_, value
        self.line, self.column, self.end_line, self.end_column = line, column, end_line, end_column

    def __repr__(self) -> str:
        return f"Token({self.type!r}, {self.value!r}, {self.line}:{self.column}-{self.end_line}:{self.end_column})"


class Tables:
    """The generated module's tables, ready to parse with (`regen.tables` says what each holds)."""

    def __init__(self, module):
        self.terminals = module.TERMINALS
        self.ignore = frozenset(module.IGNORE)
        self.newline_types = frozenset(module.NEWLINE_TYPES)
        self.lexers = module.LEXERS
        self.state_lexer = module.STATE_LEXER
        self.actions = module.ACTIONS
        self.rules = module.RULES
        self.start, self.end = module.START, module.END
        self._scanners: list = [None] * len(self.lexers)
        # A rule's plan, for the caller's reducers (the tree lark's builder would make).
        self.plans = [plan for _origin, _size, plan in self.rules]

    def _scanner(self, k: int):
        names = self.lexers[k][0]
        scanner = re.compile("|".join(f"(?P<{n}>{self.terminals[n]})" for n in names))
        self._scanners[k] = scanner
        return scanner

    def tokens(self, text: str, state):
        """The tokens of `text`, each scanned by the lexer of `state()`, the parser's state then."""
        state_lexer, scanners, lexers = self.state_lexer, self._scanners, self.lexers
        ignore, newline_types = self.ignore, self.newline_types
        pos, end, line, line_start = 0, len(text), 1, 0
        while pos < end:
            k = state_lexer[state()]
            m = (scanners[k] or self._scanner(k)).match(text, pos)
            if m is None:
                raise Reject(f"no terminal of the state matches at line {line}, column {pos - line_start + 1}")
            type_, value = m.lastgroup, m.group()
            column = pos - line_start + 1
            start_line = line
            if type_ in newline_types:
                newlines = value.count("\n")
                if newlines:
                    line += newlines
                    line_start = pos + value.rindex("\n") + 1
            pos = m.end()
            if type_ in ignore:
                continue
            retype = lexers[k][1].get(type_)
            if retype:
                type_ = retype.get(value, type_)
            yield Token(type_, value, start_line, column, line, pos - line_start + 1)

    def parse(self, text: str, reducers):
        """The value the start rule's reducer builds for `text`; `Reject` where the tables refuse it."""
        actions, rules = self.actions, self.rules
        states, values = [self.start], []

        def reduce(code: int) -> None:  # by rule ~code, then take its goto
            origin, size, _ = rules[~code]
            if size:
                children = values[-size:]
                del states[-size:], values[-size:]
            else:
                children = []
            values.append(reducers[~code](children))
            states.append(actions[states[-1]][origin])

        for token in self.tokens(text, lambda: states[-1]):
            while True:
                code = actions[states[-1]].get(token.type)
                if code is None:
                    raise Reject(f"unexpected {token!r}")
                if code < 0:
                    reduce(code)
                    continue
                states.append(code)  # shift
                values.append(token)
                break
        while states[-1] != self.end:  # the end of the text: reduce up to the start rule's end state
            code = actions[states[-1]].get("$END")
            if code is None or code >= 0:
                raise Reject("unexpected end of text")
            reduce(code)
        return values[-1]
