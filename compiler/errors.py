"""One constructor per kind of diagnostic.

The checking code never formats a message itself: it calls one of these, so
every message of a kind reads the same and its code is stable. Codes:
E00xx syntax, E01xx names and structure, E02xx types and shapes,
E03xx constants, ranges and weights, E04xx analysis and intents; a W prefix
marks a warning. `docs/language.md` lists them all.
"""

from __future__ import annotations

import math
import re
from typing import Iterable, Optional, Sequence

from .messages import Diagnostic, Span
from .util.text import brackets, constraint, interval, number as fmt_num  # polc.util.text: the one home of numbers, ranges


def _err(code: str, phase: str, span: Optional[Span], message: str, hint: Optional[str] = None,
         notes: Sequence[tuple[Span, str]] = ()) -> Diagnostic:
    return Diagnostic("error", code, phase, span, message, hint, tuple(notes))


def _warn(code: str, phase: str, span: Optional[Span], message: str, hint: Optional[str] = None,
          notes: Sequence[tuple[Span, str]] = ()) -> Diagnostic:
    return Diagnostic("warning", code, phase, span, message, hint, tuple(notes))


def _close_matches(name: str, candidates: Iterable[str], n: int, cutoff: float) -> list[str]:
    # difflib only on the way to an error: a valid program's `polc check` never imports it.
    import difflib

    return difflib.get_close_matches(name, list(candidates), n=n, cutoff=cutoff)


def closest(name: str, candidates: Iterable[str]) -> Optional[str]:
    found = _close_matches(name, candidates, n=1, cutoff=0.6)
    return found[0] if found else None


def plural(n: int, word: str, words: Optional[str] = None) -> str:
    """`1 axis`, `2 axes`, `0 indices`."""
    return f"{n} {word if n == 1 else (words or word + 's')}"


def fmt_shape(shape: tuple[int, ...]) -> str:
    return brackets(shape) or "scalar"


# ---- E00xx: syntax -------------------------------------------------------------


def syntax_error(span: Span, found: str, label: str, expected: Sequence[str]) -> Diagnostic:
    exp = ""
    if expected:
        shown = sorted(set(expected))
        exp = " Expected " + (shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " or " + shown[-1]) + "."
    return _err("E0001", "Syntax", span, f"{label} Found {found}.{exp}".replace("..", "."))


_CHARACTER_HINTS = {
    "&": "Boolean operators are words: `a and b`, `a or b`, `not a`.",
    "|": "Boolean operators are words: `a and b`, `a or b`, `not a`.",
    "!": "Negation is the word `not`, as in `not (x > 0)`; `!=` means not equal.",
    "'": 'Doc strings use double quotes: "like this".',
    "?": "Pol's conditional is `if c then a else b`.",
    ".": "Pol has no methods or fields: call a function, like `sum(x)`; a number needs a digit after its point.",
    "%": "Pol has no `%` operator; compute what you need with `+ - * / ^` and the builtin functions.",
    "{": "Pol has no blocks: each declaration is one `keyword name ... = expression` line.",
    "}": "Pol has no blocks: each declaration is one `keyword name ... = expression` line.",
    "\u2212": "This is a Unicode minus sign; write the ASCII `-`.",
    "\u00d7": "This is a Unicode multiplication sign; write the ASCII `*`.",
    "\u2264": "Write `<=` in ASCII.",
    "\u2265": "Write `>=` in ASCII.",
}


def bad_character(span: Span, char: str) -> Diagnostic:
    hint = _CHARACTER_HINTS.get(char)
    if hint is None and not char.isascii():
        hint = "Pol source is ASCII outside doc strings and comments; names use letters, digits and '_'."
    if hint is None:
        hint = "Names use letters, digits and '_'; comments start with '#'; doc strings use double quotes."
    return _err("E0002", "Syntax", span, f"Unexpected character {char!r}.", hint)


def unterminated_string(span: Span) -> Diagnostic:
    return _err("E0003", "Syntax", span, "This doc string is not closed on its line.",
                'Close it with a double quote: "like this".')


def bad_number(span: Span, text: str) -> Diagnostic:
    m = re.fullmatch(r"([0-9]*\.?[0-9]+|[0-9]+\.)([A-Za-z_][A-Za-z_0-9]*)", text)
    if m and re.fullmatch(r"[eE]", m.group(2)):
        hint = "An exponent needs digits, like `1e-3` or `2e5`."
    elif m and m.group(1) == "0" and m.group(2)[0] in "xXbBoO":
        hint = "Numbers are written in decimal, like `31` or `0.5`."
    elif m:
        hint = f"Write a product with `*`, like `{m.group(1)} * {m.group(2)}`; a name cannot start with a digit."
    else:
        hint = "Numbers look like `3`, `0.5`, `.25` or `1e-3`."
    return _err("E0004", "Syntax", span, f"{text!r} is not a number.", hint)


def too_deep(span: Span, limit: int) -> Diagnostic:
    return _err("E0005", "Syntax", span, f"This expression nests more than {limit} levels deep.",
                "Use a reduction instead of a long chain of operators, e.g. `sum(x)` or `mean(x[0:100])`, "
                "or split it into several latents.")


def limit_exceeded(span: Span, what: str, limit: str) -> Diagnostic:
    """A size no real policy reaches: `what` says what was found, `limit` the limit it passes."""
    return _err("E0006", "Syntax", span, f"{what}; polc allows at most {limit}.",
                "Pol is for small structured policies: split the program, or reduce or index large values.")


# ---- E01xx: names and structure ---------------------------------------------


_KIND_PHRASE = {"obs": "an observation", "weight": "a weight", "latent": "a latent", "action": "an action",
                "const": "a constant"}


def _parts(name: str) -> list[str]:
    return [p for p in name.lower().split("_") if p]


def _typo_of(name: str, near: str) -> bool:
    """Whether `name` reads as a misspelling of `near`, not a new value named after it:
    `k_gas` extends `gas` (a gain for it) and `wheel_speed` is another speed than
    `target_speed`; `sllip` and `target_sped` are typos."""
    a, b = _parts(name), _parts(near)
    if "".join(a) == "".join(b):  # `targetspeed`, `Target_Speed`
        return True
    if len(a) != len(b):  # a word added or dropped: `k_gas`, `gas_max`
        return False
    differing = [(x, y) for x, y in zip(a, b) if x != y]
    import difflib

    return all(min(len(x), len(y)) <= 1 or difflib.SequenceMatcher(None, x, y).ratio() >= 0.6
               for x, y in differing)


def undefined_name(span: Span, name: str, candidates, prefer: Sequence[str] = ()) -> Diagnostic:
    """`candidates` maps each declared name to its kind ("obs", "weight", "latent", "action");
    a suggestion of a kind in `prefer` (what fits where the name is used) wins over others."""
    kinds = dict(candidates) if hasattr(candidates, "items") else {c: "" for c in candidates}
    close = [c for c in _close_matches(name, kinds, n=5, cutoff=0.6) if _typo_of(name, c)]
    if prefer:
        close.sort(key=lambda c: kinds[c] not in prefer)  # stable: closest first within each group
    near = close[0] if close else None
    msg = f'Name "{name}" is not declared.'
    declare = (f"`obs {name} : real` for an input, `weight {name} : real = 0` for a fitted constant, "
               f"or `latent {name} = ...` for a computed value")
    if near is None:
        return _err("E0101", "Semantic", span, msg, f"Declare it: {declare}.")
    what = f' ({_KIND_PHRASE[kinds[near]]})' if kinds[near] in _KIND_PHRASE else ""
    if len(name) <= 4:  # `k_p` vs `k_d`: a short name is as likely new as misspelled
        return _err("E0101", "Semantic", span, msg + f' Did you mean "{near}"?',
                    f'Did you mean "{near}"{what}? If it is a new value, declare it: {declare}.')
    return _err("E0101", "Semantic", span, msg + f' Did you mean "{near}"?',
                f'Did you mean "{near}"{what}? Write "{near}" in place of "{name}".')


def duplicate_name(span: Span, name: str, first: Span) -> Diagnostic:
    return _err("E0102", "Semantic", span, f'"{name}" is declared twice.',
                "Rename one of them; every obs, weight, latent and action needs its own name.",
                [(first, f'"{name}" was first declared here')])


KIND_WORDS = {"obs": "an observation", "weight": "a weight", "latent": "a latent", "action": "an action",
               "const": "a constant", "state": "a state"}
_KIND_NOUNS = {"obs": "observation", "weight": "weight", "latent": "latent", "action": "action",
               "const": "constant", "state": "state"}


def name_taken(span: Span, name: str, kind: str, first_kind: str, first: Span, suggestion: str) -> Diagnostic:
    """A declaration reusing the name of a declaration of another kind (a latent named like an obs)."""
    noun = _KIND_NOUNS.get(kind, kind)
    return _err("E0113", "Semantic", span,
                f'"{name}" is already the name of {KIND_WORDS.get(first_kind, first_kind)} (line {first.line}), '
                f"so this {noun} cannot have it: observations, weights, latents, actions and constants share one "
                "namespace.",
                f'Rename the {noun}, e.g. "{suggestion}", and the expressions that mean it.',
                [(first, f'the {_KIND_NOUNS.get(first_kind, first_kind)} "{name}" is declared here')])


def cycle(span: Span, path: Sequence[str], delayed: str, reader: str) -> Diagnostic:
    """An instantaneous cycle among latents and actions; `delayed` is the value the hint suggests
    reading one step late (an action in the loop if there is one), `reader` the one that reads it."""
    names = list(path) + [path[0]]
    if len(names) > 12:  # a generated 1,000-latent cycle: name its ends
        names = names[:6] + [f"... ({len(names) - 11} more) ..."] + names[-5:]
    loop = " -> ".join(names)
    return _err("E0103", "Semantic", span,
                f"These declarations depend on each other in a cycle within one step: {loop}.",
                f'To use the previous step\'s value, declare a state, e.g. `state prev_{delayed} : real = 0 next '
                f'{delayed}`, and read `prev_{delayed}` in "{reader}" instead of "{delayed}".')


def no_actions(span: Optional[Span]) -> Diagnostic:
    return _err("E0104", "Semantic", span, "The program declares no action, so the policy has no output.",
                "Declare each output with `action NAME : real in [lo, hi] = EXPR`; latents are internal values.")


def duplicate_policy(span: Span, first: Span) -> Diagnostic:
    return _err("E0105", "Semantic", span, "The program has more than one `policy` header.",
                "Keep one `policy NAME \"description\"` line.", [(first, "the first header is here")])


# Functions of other languages an LLM reaches for, and how Pol says them.
_FUNCTION_ADVICE = {
    "clamp": "Use `clip(x, lo, hi)`.", "saturate": "Use `clip(x, lo, hi)`.", "sat": "Use `clip(x, lo, hi)`.",
    "minimum": "Use `min(a, b)`.", "maximum": "Use `max(a, b)`.", "fabs": "Use `abs(x)`.",
    "pow": "Pol writes powers with `^`, like `x ^ 2`.", "power": "Pol writes powers with `^`, like `x ^ 2`.",
    "arctan2": "Use `atan2(y, x)`.", "ln": "Use `log(x)` (the natural logarithm).", "sqr": "Use `square(x)`.",
    "sgn": "Use `sign(x)`.", "signum": "Use `sign(x)`.", "average": "Use `mean(x)`.", "avg": "Use `mean(x)`.",
    "dot": "Write a dot product as `sum(a * b)`.", "hypot": "Use `norm([a, b])`.", "length": "Use `norm(x)`.",
    "select": "Use `where(c, a, b)` or `if c then a else b`.", "ifelse": "Use `if c then a else b`.",
    "logistic": "Use `sigmoid(x)`.", "expit": "Use `sigmoid(x)`.",
}


def unknown_function(span: Span, name: str, known: Iterable[str]) -> Diagnostic:
    msg = f'"{name}" is not a Pol function.'
    listing = "Functions: " + ", ".join(sorted(known)) + "."
    if name in _FUNCTION_ADVICE:
        return _err("E0106", "Semantic", span, msg, _FUNCTION_ADVICE[name])
    # A stricter cutoff than for names: `softmax` is not `softplus`.
    near = _close_matches(name, known, n=1, cutoff=0.75)
    if near:
        return _err("E0106", "Semantic", span, msg + f' Did you mean "{near[0]}"?',
                    f'Did you mean "{near[0]}"? ' + listing)
    return _err("E0106", "Semantic", span, msg, listing)


def not_a_value(span: Span, name: str, kind: str) -> Diagnostic:
    """`kind` is "function" (a builtin named without a call) or "policy" (the program's own name)."""
    if kind == "function":
        return _err("E0107", "Semantic", span, f'"{name}" is a function, not a value.',
                    f"Call it with its arguments, like `{name}(x)`.")
    return _err("E0107", "Semantic", span, f'"{name}" is the name of the policy, not a value.',
                "Use an obs, weight, latent or action here.")


def not_a_function(span: Span, name: str, kind: str) -> Diagnostic:
    article = "an" if kind[0] in "aeiou" else "a"
    return _err("E0112", "Semantic", span, f'"{name}" is {article} {kind}, not a function, so it cannot be called.',
                f"To scale by it, multiply: `{name} * (...)`.")


def bad_expect_target(span: Span, name: str, kind: str) -> Diagnostic:
    if kind == "a state":
        return _err("E0108", "Semantic", span,
                    f'A direction cannot be claimed of state "{name}": a state does not change within a step.',
                    f"Claim its range (`expect {name} in [lo, hi]`), or a direction of a latent computed from it.")
    return _err("E0108", "Semantic", span,
                f'An intent can only be stated about a latent or an action, but "{name}" is {kind}.',
                "State it about a latent computed from it, e.g. `latent x = ...` then `expect x >= 0`.")


def unused(span: Span, kind: str, name: str) -> Diagnostic:
    hint = {
        "obs": "Remove the observation or use it; an unused input often means a missing control path.",
        "weight": "Remove the weight or use it; an unused weight is never fitted.",
        "latent": "Remove the latent or use it in an action; it is still traced.",
        "constant": "Remove the constant or use it (in a shape, an index or an expression).",
        "state": "Remove the state or read it in a latent or an action; it is still traced.",
    }.get(kind)
    what = "is never used." if kind == "constant" else "is never used by any action."
    return _warn("W0109", "Semantic", span, f'The {kind} "{name}" {what}', hint)


def mono_unrelated(span: Span, target: str, var: str) -> Diagnostic:
    if target == var:
        return _warn("W0110", "Semantic", span, f'An intent relating "{target}" to itself says nothing.',
                     f'After `in`, name a value that "{target}" is computed from.')
    return _warn("W0110", "Semantic", span,
                 f'"{target}" does not depend on "{var}", so this intent says nothing.',
                 f'After `in`, name a value that "{target}" is computed from, or compute "{target}" from "{var}".')


def bad_noise_dist(span: Span, name: str) -> Diagnostic:
    return _err("E0111", "Semantic", span, f'"{name}" is not a supported action noise.',
                "Write `~ normal(std = EXPR)`: Gaussian noise with a positive standard deviation.")


# ---- E02xx: types and shapes -----------------------------------------------------


def type_mismatch(span: Span, what: str, expected: str, found: str, hint: Optional[str] = None) -> Diagnostic:
    return _err("E0201", "Semantic", span, f"{what} must be {expected}, but this is {found}.", hint)


def shape_mismatch(span: Span, op: str, left: tuple[int, ...], right: tuple[int, ...]) -> Diagnostic:
    return _err("E0202", "Semantic", span,
                f"Cannot broadcast shapes {fmt_shape(left)} and {fmt_shape(right)} in `{op}`.",
                "Broadcasting follows NumPy: dimensions are matched from the right and must be equal or 1; "
                "index or reduce one side first, e.g. `x[0]` or `sum(x, axis = 0)`.")


def index_out_of_bounds(span: Span, index: int, size: int, axis: int) -> Diagnostic:
    return _err("E0203", "Semantic", span,
                f"Index {index} is out of bounds for axis {axis} of size {size}.",
                f"Valid indices are 0 to {size - 1}, or -1 to -{size} from the end.")


def too_many_indices(span: Span, count: int, shape: tuple[int, ...]) -> Diagnostic:
    given = plural(count, "index", "indices") + (" is" if count == 1 else " are")
    if not shape:
        return _err("E0204", "Semantic", span, f"{given} given, but the value is a scalar.",
                    "A scalar cannot be indexed; use the value itself.")
    return _err("E0204", "Semantic", span,
                f"{given} given, but the value has shape {fmt_shape(shape)} "
                f"({plural(len(shape), 'axis', 'axes')}).",
                f"Give at most {len(shape)}, one per axis from the first.")


def index_not_constant(span: Span) -> Diagnostic:
    return _err("E0205", "Semantic", span, "An index or slice bound must be an integer literal or constant.",
                "Shapes are static in Pol: write a number or a `const` (e.g. `x[0:lookahead]` after "
                "`const lookahead = 6`); to select by a condition use `where(c, a, b)`.")


def wrong_arity(span: Span, func: str, expected: str, found: int, hint: Optional[str] = None) -> Diagnostic:
    return _err("E0206", "Semantic", span,
                f"`{func}` takes {expected}, but {found} {'was' if found == 1 else 'were'} given.", hint)


def unknown_keyword(span: Span, func: str, name: str, allowed: Sequence[str]) -> Diagnostic:
    if allowed:
        return _err("E0207", "Semantic", span, f"`{func}` has no keyword argument `{name}`.",
                    "Its keyword arguments are: " + ", ".join(allowed) + ".")
    return _err("E0207", "Semantic", span, f"`{func}` takes no keyword arguments.")


def declared_type_mismatch(span: Span, name: str, declared: str, found: str) -> Diagnostic:
    hint = "Change the declared type or the expression so they agree"
    if found.count(",") + ("[" in found) > declared.count(",") + ("[" in declared):
        hint += ", e.g. index the expression (`x[0]`) or reduce it (`sum(x)`, `mean(x)`)"
    return _err("E0208", "Semantic", span,
                f'"{name}" is declared as {declared}, but its expression is {found}.', hint + ".")


def ragged_vector(span: Span, first: str, other: str, weight: Optional[str] = None,
                  latents: Sequence[tuple[str, str, Span, Optional[str]]] = ()) -> Diagnostic:
    """`weight` names the weight whose initial value is ragged, if that is where it is. `latents`:
    (name, type, declaration's name span, the name its expression is, if just a name) of each
    whole-array latent in the odd item, whose declaration likely lacks an index."""
    mlp = "to feed values of several shapes to an MLP, pass them as separate inputs: `mlp(a, b, c)`."
    notes = [(at, f'"{name}" is declared as {t}') for name, t, at, _ in latents]
    if weight is not None:
        hint = f'Give every row of the initial value of "{weight}" the same length, like `[[1, 2], [3, 4]]`.'
    elif latents:
        name, t, _, source = latents[0]
        fix = f"`latent {name} = {source}[0]`" if source else f"`latent {name} = x[0]` for an array `x`"
        hint = (f'"{name}" is a whole {t}; if it should be one element, index it where it is declared, e.g. '
                f"{fix}; " + mlp)
    else:
        hint = "A vector literal stacks values of one shape; " + mlp
    return _err("E0209", "Semantic", span,
                f"The items of a vector literal must have one type and shape, but found {first} and {other}.", hint,
                notes)


def bad_axis(span: Span, axis: int, ndim: int) -> Diagnostic:
    return _err("E0210", "Semantic", span,
                f"Axis {axis} does not exist for a value with {plural(ndim, 'axis', 'axes')}.",
                f"Use an axis from 0 to {ndim - 1}." if ndim > 1 else
                "Its only axis is 0, which is the default: leave `axis` out." if ndim else
                "A scalar has no axes: leave `axis` out, or reduce an array.")


def bad_keyword_value(span: Span, func: str, name: str, expected: str) -> Diagnostic:
    return _err("E0211", "Semantic", span, f"The `{name}` argument of `{func}` must be {expected}.")


def duplicate_keyword(span: Span, func: str, name: str) -> Diagnostic:
    return _err("E0212", "Semantic", span, f"The keyword argument `{name}` of `{func}` is given twice.")


def empty_vector(span: Span) -> Diagnostic:
    return _err("E0213", "Semantic", span, "An empty vector literal has no type.",
                "Write at least one item, e.g. `[0]`.")


def bad_dims(span: Span, dims: tuple[int, ...]) -> Diagnostic:
    return _err("E0214", "Semantic", span, f"Array dimensions must be positive, not {list(dims)}.",
                "Sizes are positive integers, like `real[3]`; a range goes after the type: `real in [0, 1]`.")


def bad_const(span: Span, name: str, why: str, hint: Optional[str] = None) -> Diagnostic:
    return _err("E0312", "Semantic", span, f'The constant "{name}" {why}.',
                hint or "A `const` is a number known before any evaluation: numbers, other constants and "
                        "`+ - * / ^`, e.g. `const lookahead = 6` or `const half = lookahead / 2`.")


def dim_not_integer(span: Span, what: str, why: str) -> Diagnostic:
    return _err("E0313", "Semantic", span, f"The dimension {what} {why}.",
                "A dimension is a positive whole number or a `const` that is one, e.g. `real[lookahead, 4]` "
                "after `const lookahead = 6`.")


def elem_range_outside(span: Span, obs: str, part: str, lo: float, hi: float, whole: str) -> Diagnostic:
    return _err("E0314", "Semantic", span,
                f'The range [{fmt_num(lo)}, {fmt_num(hi)}] of {part} is not inside the range {whole} of observation '
                f'"{obs}".',
                "A part's range narrows the observation's own range: widen the observation's range, or "
                "drop it and give every part its range.")


def elem_range_overlap(span: Span, obs: str, part: str, element: str, first: Span) -> Diagnostic:
    return _err("E0315", "Semantic", span,
                f'{part} gives element {element} of observation "{obs}" a second range.',
                "Give each element one range: split the slices so that they do not overlap.",
                [(first, "its first range is here")])


def non_real_io(span: Span, kind: str, name: str) -> Diagnostic:
    return _err("E0215", "Semantic", span, f'The {kind} "{name}" must have type real.',
                "Observations, weights and actions are real-valued; compare them to make a bool latent.")


def empty_slice(span: Span, start: int, stop: int) -> Diagnostic:
    return _err("E0216", "Semantic", span, f"The slice {start}:{stop} selects no elements.",
                "A slice `a:b` needs a < b after counting negative bounds from the end.")


def too_large(span: Span, shape: tuple[int, ...], limit: int) -> Diagnostic:
    n = math.prod(shape)
    return _err("E0217", "Semantic", span,
                f"This value would have shape {fmt_shape(shape)}, {n} elements; polc allows at most {limit} per value.",
                "Pol is for small structured policies: reduce or index large inputs, or check the sizes "
                "of the operands being broadcast together.")


# ---- the phrases checking messages are built from ------------------------------
# The checker names the value a message is about with these (`type_mismatch`'s `what`,
# `bad_const`'s `why`, a keyword's expected value), so that no message text is
# written in check/: one place to read, and to change, every sentence polc says.


def operand_of(op: str, side: Optional[str] = None) -> str:
    """`The operand of unary `-`` (side None), `The left operand of `and`` (side "left"/"right")."""
    return f"The operand of unary `{op}`" if side is None else f"The {side} operand of `{op}`"


def argument_of(func: str, i: Optional[int] = None) -> str:
    """`The argument of `abs`` (the only one), `Argument 2 of `clip`` (i counts from 0)."""
    return f"The argument of `{func}`" if i is None else f"Argument {i + 1} of `{func}`"


def mlp_input(i: int) -> str:
    return f"Input {i + 1} of `mlp`"


def condition_of(what: str) -> str:
    return f"The condition of `{what}`"


def branches_of(what: str) -> str:
    return f"Both branches of `{what}`"


def like_the_first(base: str) -> str:
    return f"{base} like the first"


def action_expression(name: str) -> str:
    return f'The expression of action "{name}"'


def noise_std_of(name: str) -> str:
    return f'The noise std of action "{name}"'


def std_shape(shape: tuple[int, ...]) -> str:
    """What an action noise's std must be for an action of `shape`."""
    return "a scalar" if not shape else f"of shape {fmt_shape(shape)} or broadcast to it"


def std_shape_hint(shape: tuple[int, ...]) -> str:
    return ("Give one std for the whole action, or one per element." if shape else
            "A scalar action has one std: index or reduce it, e.g. `x[0]` or `mean(x)`.")


NOT_HINT = "Compare first, e.g. `not (x > 0)`."
AND_OR_HINT = "Compare first, e.g. `x > 0 and y > 0`."
BOOL_TO_REAL_HINT = "Turn a condition into a number with `if c then 1 else 0`."
CONST_READS_HINT = ("A constant is known before any evaluation; make it a `latent` to "
                    "compute it from observations or weights.")
NOT_FINITE_HINT = "Check for a division by zero or an overflow."


def comparison_hint(example: str) -> str:
    return f"Write a comparison, e.g. `{example} > 0`."


def value_dimensions(ndim: int) -> str:
    return f"This value has {ndim} dimensions"


def dimensions(n: int) -> str:
    return f"{n} dimensions"


def layer_sizes(most: int) -> str:
    return f"a list of layer sizes from 1 to {most}, like [64, 64]"


def integer_from_1(most: int) -> str:
    return f"an integer from 1 to {most}"


def one_of(names: Iterable[str]) -> str:
    """`` `tanh` or `relu` ``: the values a keyword takes."""
    return " or ".join(f"`{a}`" for a in names)


def const_reads(name: str, kind: str) -> str:
    """Why a `const` cannot read `name`, a value of `kind`."""
    return f'reads "{name}", {KIND_WORDS[kind]}'


def not_finite(v: float) -> str:
    return f"is not a finite number (it is {fmt_num(v)})"


def not_a_constant(kind: str) -> str:
    return f"is {KIND_WORDS[kind]}, not a constant"


def not_whole(v: float) -> str:
    return f"is {fmt_num(v)}, not a whole number"


def quoted(name: str) -> str:
    return f'"{name}"'


def a_kind(kind: str) -> str:
    """`an obs`, `a weight`: a kind with its article, as `bad_expect_target` names it."""
    return f"an {kind}" if kind == "obs" else f"a {kind}"


def interval_text(lo: float, hi: float) -> str:
    return f"[{fmt_num(lo)}, {fmt_num(hi)}]"


def part_index(items) -> str:
    """`[0, 2:4]`: the indices of an observation's part, an int or a (start, stop) pair each."""
    return "[" + ", ".join(str(i) if isinstance(i, int) else f"{i[0]}:{i[1]}" for i in items) + "]"


def part_named(index: str) -> str:
    return f"part {index}"


def the_part(index: str) -> str:
    return f"The part {index}"


def prior_arguments(params: Sequence[str]) -> str:
    """`2 arguments, `mu, sigma``: what a prior family takes."""
    return f"{plural(len(params), 'argument')}, `" + ", ".join(params) + "`"


def write_it_like(example: str) -> str:
    return f"Write it like `~ {example}`."


def prior_suggestion(name: str, hi: float) -> str:
    """How to make a non-negative prior fit a weight whose constraint allows negative values."""
    if hi <= 0:
        return (f'"{name}" is never positive: give it `~ normal(mu, sigma)` (support: all reals), or declare '
                f"`{name} : real >= 0` and subtract it where it is used.")
    return (f"Declare `weight {name} : real >= 0` (and start above 0), or give it `~ normal(mu, sigma)`, "
            "whose support is all reals.")


# ---- E03xx: constants, ranges, weights ---------------------------------------------


def empty_range(span: Span, lo: float, hi: float) -> Diagnostic:
    if lo > hi:
        hint = f"Write the lower bound first: `in [{fmt_num(hi)}, {fmt_num(lo)}]`."
    else:
        hint = "The lower bound must be strictly below the upper bound."
    return _err("E0301", "Semantic", span,
                f"The range [{fmt_num(lo)}, {fmt_num(hi)}] is empty or a single point.", hint)


def init_outside(span: Span, name: str, value: float, constraint: str, suggestion: float) -> Diagnostic:
    return _err("E0302", "Semantic", span,
                f'The initial value {fmt_num(value)} of weight "{name}" is not strictly inside its constraint {constraint}.',
                "Weights are fitted in an unconstrained space where the boundary is never reached; "
                f"start strictly inside, e.g. `= {suggestion:.3g}`.")


def init_shape(span: Span, name: str, declared: tuple[int, ...], found: tuple[int, ...]) -> Diagnostic:
    return _err("E0303", "Semantic", span,
                f'The initial value of weight "{name}" has shape {fmt_shape(found)}, '
                f"but the weight is declared {fmt_shape(declared)}.",
                "Give one number (used for every element) or a literal of the declared shape.")


def init_not_constant(span: Span, name: str) -> Diagnostic:
    return _err("E0304", "Semantic", span,
                f'The initial value of weight "{name}" must be a number or a vector literal of numbers.',
                "Weights start from constants; compute derived values in a latent.")


def infinite_init(span: Span, name: str) -> Diagnostic:
    return _err("E0305", "Semantic", span, f'The initial value of weight "{name}" must be finite.',
                "Write a finite number, e.g. `1e3`; a weight is fitted from where it starts.")


def state_init_not_constant(span: Span, name: str) -> Diagnostic:
    return _err("E0316", "Semantic", span,
                f'The initial value of state "{name}" must be a constant: a number, `true`, `false`, a constant\'s '
                "name or a vector literal of them.",
                "A state starts every episode from the same value; compute what depends on observations or "
                "weights in its `next` expression.")


def state_init_invalid(span: Span, name: str, problem: str, hint: str) -> Diagnostic:
    """A constant initial value of a state that does not fit it: not finite, outside the range, of
    another shape or type (`problem` says which, one clause)."""
    return _err("E0317", "Semantic", span, f'The initial value of state "{name}" {problem}.', hint)


def state_init_shape_phrase(shape: tuple, declared: tuple) -> tuple[str, str]:
    """`state_init_invalid`'s problem and hint for an initial value of another shape."""
    return (f"has shape {fmt_shape(shape)}, but the state is declared {fmt_shape(declared)}",
            "Give one value (used for every element) or a literal of the declared shape.")


def state_init_not_finite_phrase() -> tuple[str, str]:
    """`state_init_invalid`'s problem and hint for a NaN or infinite initial value."""
    return "must be finite", "Write a finite number; every episode starts from it."


def state_init_outside_phrase(x: float, lo: float, hi: float) -> tuple[str, str]:
    """`state_init_invalid`'s problem and hint for an initial value outside the state's range."""
    where = interval(lo, hi) if lo > -math.inf and hi < math.inf else constraint(lo, hi)
    return (f"is {fmt_num(x)}, outside its declared range {where}",
            f"Start inside the range, e.g. `= {fmt_num(min(max(x, lo), hi))}`.")


def state_update_type(span: Span, name: str, declared: str, found: str) -> Diagnostic:
    return _err("E0218", "Semantic", span,
                f'The `next` expression of state "{name}" is {found}, but the state is declared {declared}.',
                "The value carried to the next step must have the state's type and shape (or broadcast to it); "
                "change the declaration or the expression.")


def range_on_bool(span: Span, name: str) -> Diagnostic:
    return _err("E0306", "Semantic", span, f'"{name}" is bool, so it cannot have a numeric range.',
                f"State the intent about a real value, e.g. the latent the condition compares, "
                f"or `latent {name}_f = if {name} then 1 else 0`.")


def unknown_prior(span: Span, name: str, known: Sequence[str]) -> Diagnostic:
    listing = "Prior families: " + ", ".join(f"`{k}`" for k in known) + "."
    near = closest(name, known)
    if near:
        return _err("E0307", "Semantic", span, f'"{name}" is not a prior family. Did you mean "{near}"?',
                    f'Did you mean "{near}"? ' + listing)
    return _err("E0307", "Semantic", span, f'"{name}" is not a prior family.', listing)


def prior_not_constant(span: Span, family: str, arg: str) -> Diagnostic:
    return _err("E0308", "Semantic", span, f"The `{arg}` argument of the prior `{family}` must be a number.",
                "Prior arguments are numeric constants, like `~ normal(0.3, 0.1)`; a prior is fixed "
                "before fitting, so it cannot read an observation or another weight.")


def prior_scale_not_positive(span: Span, family: str, arg: str, value: float) -> Diagnostic:
    return _err("E0309", "Semantic", span,
                f"The `{arg}` of the prior `{family}` must be positive, but it is {fmt_num(value)}.",
                f"Give a positive `{arg}`, e.g. `1`; a wide prior is a large `{arg}`"
                + (", a small `rate`." if arg == "rate" else "."))


def prior_support(span: Span, name: str, family: str, support: str, constraint: str,
                  suggestion: str) -> Diagnostic:
    """The weight's constraint allows values outside the support of its prior; `constraint`
    reads after "the weight is": "unconstrained" or "constrained >= -1"."""
    return _err("E0310", "Semantic", span,
                f'The prior `{family}` of weight "{name}" has support {support}, but the weight is '
                f"{constraint}, so it can take values where the prior has no density.",
                suggestion)


def init_outside_prior(span: Span, name: str, value: float, family: str, support: str,
                       suggestion: str) -> Diagnostic:
    return _err("E0311", "Semantic", span,
                f'The initial value {fmt_num(value)} of weight "{name}" is outside the support {support} '
                f"of its prior `{family}`.", suggestion)


# ---- E04xx: analysis and intents ---------------------------------------------------


def std_not_positive(span: Span, action: str, interval: str) -> Diagnostic:
    return _err("E0401", "Analysis", span,
                f'The noise std of action "{action}" is not provably positive: it lies in {interval}.',
                "Make it positive by construction, e.g. `softplus(x) + 0.01`, `exp(x)`, "
                "or a weight constrained `in [0.01, 1]`.")


def division_by_zero(span: Span, interval: str) -> Diagnostic:
    return _warn("W0402", "Analysis", span, f"The divisor may be zero: it lies in {interval}.",
                 "Keep it away from zero, e.g. `x / (1 + abs(y))` or `x / max(y, 0.01)`.")


def domain_warning(span: Span, func: str, interval: str, needs: str) -> Diagnostic:
    return _warn("W0403", "Analysis", span,
                 f"The argument of `{func}` lies in {interval}, but `{func}` needs {needs}.",
                 f"Guard it, e.g. `{func}(max(x, 0.001))` or `{func}(1 + abs(x))`.")


def state_unbounded(span: Span, name: str, found: str) -> Diagnostic:
    return _warn("W0411", "Analysis", span,
                 f'State "{name}" can grow without bound from step to step (the analysis only bounds it to {found}).',
                 f'Saturate it: declare a range (`state {name} : real in [lo, hi] = ...`), clip its `next` '
                 "expression, or let it leak (`next 0.9 * " + name + " + ...`).")


def action_range_exceeded(span: Span, action: str, found: str, declared: str) -> Diagnostic:
    return _warn("W0404", "Analysis", span,
                 f'Action "{action}" may take values in {found}, outside its declared range {declared}; '
                 "it will be clipped.",
                 "If clipping is intended, write it with `clip(...)` so the intent is explicit.")


def intent_refuted(span: Span, claim: str, witness: str) -> Diagnostic:
    return _err("E0405", "Analysis", span, f"The intent `{claim}` is false: {witness}.",
                "Change the structure or the weight constraints so the intent holds for every allowed weight.")


def intent_depends_on_sign(span: Span, claim: str, weight: str, constraint: str) -> Diagnostic:
    return _warn("W0406", "Analysis", span,
                 f'The intent `{claim}` holds only if weight "{weight}" keeps one sign, '
                 "and its sign is not constrained.",
                 f"Declare `weight {weight} : {constraint}` so fitting cannot flip it.")


def intent_unknown(span: Span, claim: str, why: str) -> Diagnostic:
    return _warn("W0407", "Analysis", span, f"Could not prove or refute the intent `{claim}`: {why}.",
                 "Split the computation into latents whose signs are declared or constrained, "
                 "so each step can be checked.")


def power_domain(span: Span, interval: str) -> Diagnostic:
    return _warn("W0409", "Analysis", span,
                 f"The base of `^` lies in {interval}, but a negative base needs a whole-number constant "
                 "exponent: any other exponent gives NaN.",
                 "Keep the base non-negative, e.g. `max(x, 0) ^ y` or `abs(x) ^ y`, "
                 "or use a whole-number exponent such as `x ^ 2`.")


def float32_range(span: Span, text: str, what: str) -> Diagnostic:
    return _warn("W0410", "Analysis", span, f"`{text}` {what}.",
                 "Policies compute in float32 (largest value about 3.4e38, smallest normal 1.2e-38): "
                 "rescale the constant or bound the operands, e.g. with `clip(x, lo, hi)`.")


def intent_proved_info(span: Span, claim: str) -> Diagnostic:
    """Not an error or warning: used by `polc check --verbose` to list proved intents."""
    return Diagnostic("note", "I0408", "Analysis", span, f"The intent `{claim}` is proved.")


def echo_read(span: Span, obs: str, echoed: Sequence[str], actions: Sequence[str],
              weights: Sequence[str]) -> Diagnostic:
    """W0509: an action's mean reads an observation that the environment says echoes an action."""
    def names(xs: Sequence[str]) -> str:
        q = [f'"{x}"' for x in xs]
        return q[0] if len(q) == 1 else ", ".join(q[:-1]) + " and " + q[-1]

    own = [a for a in echoed if a in actions]
    what = ("its own previous value" if own == list(actions) and len(actions) == 1
            else f"the action{'s' if len(echoed) > 1 else ''} {names(echoed)}")
    several = len(actions) > 1
    msg = (f"The action{'s' if several else ''} {names(actions)} {'depend' if several else 'depends'} on the "
           f'observation "{obs}", which echoes {what}: on a clean demonstration it predicts the action '
           "almost perfectly, so imitation learning can fit the policy to copy its last action (causal "
           "confusion), and in closed loop its errors compound.")
    lever = (f"constrain {names(weights)} (a narrow range such as `real in [-0.1, 0.1]`, or a prior "
             "`~ normal(0, 0.05)`)" if weights else "read it only through a weight with a narrow range")
    acts = ", ".join(f"{a}=0.2" for a in (own or echoed))
    return _warn("W0509", "Environment", span, msg,
                 f'Drop the read of "{obs}", {lever}, or fit with recovery demonstrations '
                 f"(`polc demos --perturb {acts}`).")
