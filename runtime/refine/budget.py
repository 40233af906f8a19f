"""A run's token and cost budgets (`--max-tokens`, `--max-cost`) and the meter that keeps them.

Before every LLM call the meter estimates what the call will take: the prompt's tokens
(its characters at the ratio of tokens to characters the provider has counted so far in
this run, 1 token per 4 characters before the first reply) plus the largest of the recent
replies' output tokens (times n for a request of n replies), priced at the model's rates
(cached input not assumed). When what was spent plus that estimate would exceed a budget,
the call is not made: `BudgetExhausted` stops the run before it, the run directory keeps
every complete round, and `--resume` with a raised budget redoes the round in progress. What was spent counts every exchange
the run paid for, those of rounds that were interrupted and redone included.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from ..llm import Message, Reply, render

CHARS_PER_TOKEN = 4.0  # before a provider has counted any prompt of this run
RECENT = 5  # how many of the last replies the estimate of the next one looks at
_TOKENS = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmM]?)\s*$")


def parse_tokens(text: str) -> int:
    """`400k` -> 400000, `1.5M` -> 1500000, `25000` -> 25000; ValueError saying what is wrong."""
    m = _TOKENS.match(str(text).replace("_", "").replace(",", ""))
    if not m:
        raise ValueError(f"--max-tokens takes a number of tokens such as 400k, 1.5M or 250000, not {text!r}")
    value = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6}[m.group(2).lower()]
    if value < 1 or value != math.floor(value):
        raise ValueError(f"--max-tokens must be a whole number of tokens, at least 1, not {text!r}")
    return int(value)


def parse_cost(text: str) -> float:
    """`2.00` or `$2` -> 2.0 (USD); ValueError saying what is wrong."""
    raw = str(text).strip().lstrip("$").strip()
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"--max-cost takes an amount in USD such as 2.00, not {text!r}") from None
    if not (0 < value < math.inf):
        raise ValueError(f"--max-cost must be a positive amount in USD, not {text!r}")
    return value


def tokens_text(n: int) -> str:
    return f"{n:,}"


def cost_text(usd: Optional[float]) -> str:
    """`$0.0123` below a dollar, `$12.34` above; `unknown` for None."""
    if usd is None:
        return "unknown"
    return f"${usd:.4f}" if usd < 1 else f"${usd:,.2f}"


@dataclass(frozen=True)
class Budget:
    """At most `max_tokens` tokens (input + output) and `max_cost` USD over the whole run."""

    max_tokens: Optional[int] = None
    max_cost: Optional[float] = None

    def to_json(self) -> dict:
        return {"max_tokens": self.max_tokens, "max_cost": self.max_cost}

    @classmethod
    def from_json(cls, data: Any) -> "Budget":
        """A budget saved by `to_json` (run.json); ValueError when it is not one."""
        if not isinstance(data, dict):
            raise ValueError("the budget is not a JSON object")
        t, c = data.get("max_tokens"), data.get("max_cost")
        if t is not None and (isinstance(t, bool) or not isinstance(t, int) or t < 1):
            raise ValueError(f"max_tokens is {json.dumps(t)[:40]}, not a number of tokens")
        if c is not None and (isinstance(c, bool) or not isinstance(c, (int, float)) or not 0 < c < math.inf):
            raise ValueError(f"max_cost is {json.dumps(c)[:40]}, not an amount in USD")
        return cls(t, None if c is None else float(c))

    def describe(self) -> str:
        parts = ([f"{tokens_text(self.max_tokens)} tokens"] if self.max_tokens else []) + \
                ([cost_text(self.max_cost)] if self.max_cost else [])
        return " and ".join(parts) or "none"


class BudgetExhausted(Exception):
    """The next call would exceed a budget; `which` is "tokens" or "cost"."""

    def __init__(self, message: str, which: str, limit: float, spent: float, estimate: float):
        super().__init__(message)
        self.which, self.limit, self.spent, self.estimate = which, limit, spent, estimate

    def to_json(self) -> dict:
        return {"budget": self.which, "limit": self.limit, "spent": self.spent, "next_call_estimate": self.estimate}


class Meter:
    """Prices each reply (`prices`, a `polc.runtime.llm.prices.PriceTable`, or None: no costs
    at all, as for a scripted session) and refuses a call that would exceed `budget`.
    `spent_tokens` / `spent_cost` are what the run spent before this meter, `recent` the
    output tokens of its last replies."""

    def __init__(self, prices: Any, budget: Budget = Budget(), model: str = "", spent_tokens: int = 0,
                 spent_cost: float = 0.0, recent: Sequence[int] = ()):
        self.prices, self.budget, self.model = prices, budget, model
        self.spent_tokens, self.spent_cost = spent_tokens, spent_cost
        self.recent = list(recent)[-RECENT:]
        self._chars = 0  # prompt characters and the input tokens the provider counted for them
        self._counted = 0
        if budget.max_cost is not None and self.price_of(model) is None:
            where = ", ".join(prices.sources) if prices is not None else "no price table"
            raise ValueError(f"--max-cost needs the price of {model}, which is not in the price table ({where}); "
                             "add it to ~/.config/polc/prices.toml or a --prices FILE (docs/llm.md), or use "
                             "--max-tokens")

    def price_of(self, model: str):
        return None if self.prices is None else self.prices.price(model)

    def cost(self, model: str, reply: Reply) -> Optional[float]:
        """USD of `reply` from `model` (None: unknown, or no price table)."""
        if self.prices is None:
            return None
        return self.prices.cost(model, reply.input_tokens, reply.output_tokens, reply.cached_input_tokens)

    def estimate(self, messages: Sequence[Message]) -> tuple[int, int]:
        """(input, output) tokens the call with `messages` is expected to take."""
        chars = len(render(messages))
        ratio = self._counted / self._chars if self._chars and self._counted else 1 / CHARS_PER_TOKEN
        return math.ceil(chars * ratio), max(self.recent, default=0)

    def check(self, messages: Sequence[Message], n: int = 1) -> None:
        """`BudgetExhausted` when the call with `messages` (asking for `n` replies: the prompt
        once, `n` replies' output) would exceed a budget."""
        b = self.budget
        if b.max_tokens is None and b.max_cost is None:
            return
        est_in, est_out = self.estimate(messages)
        est_out *= n
        if b.max_tokens is not None and self.spent_tokens + est_in + est_out > b.max_tokens:
            raise BudgetExhausted(
                f"the token budget (--max-tokens {tokens_text(b.max_tokens)}) stops the run before its next LLM "
                f"call: {tokens_text(self.spent_tokens)} tokens spent, and the call is estimated at "
                f"{tokens_text(est_in + est_out)}", "tokens", b.max_tokens, self.spent_tokens, est_in + est_out)
        price = self.price_of(self.model)
        if b.max_cost is not None and price is not None:
            est = price.cost(est_in, est_out)
            if self.spent_cost + est > b.max_cost:
                raise BudgetExhausted(
                    f"the cost budget (--max-cost {b.max_cost:g}) stops the run before its next LLM call: "
                    f"{cost_text(self.spent_cost)} spent, and the call is estimated at {cost_text(est)}",
                    "cost", b.max_cost, round(self.spent_cost, 6), round(est, 6))

    def record(self, messages: Sequence[Message], reply: Reply, cost: Optional[float]) -> None:
        self.spent_tokens += reply.input_tokens + reply.output_tokens
        self.spent_cost += cost or 0.0
        self.recent = (self.recent + [reply.output_tokens])[-RECENT:]
        if reply.input_tokens:
            self._chars += len(render(messages))
            self._counted += reply.input_tokens


def spent_in(exchange_files: Sequence[Path], prices: Any) -> tuple[int, float, list[int]]:
    """(tokens, USD, output tokens in order) of the exchanges in `exchange_files` (the rounds
    a run paid for): what a resumed run's meter starts from."""
    from ..llm import read_exchanges

    tokens, usd, outputs = 0, 0.0, []
    for f in exchange_files:
        if not f.is_file():
            continue
        for r in read_exchanges(f):
            tokens += r["input_tokens"] + r["output_tokens"]
            outputs.append(r["output_tokens"])
            if prices is not None:
                usd += prices.cost(r.get("model", ""), r["input_tokens"], r["output_tokens"],
                                   r.get("cached_input_tokens")) or 0.0
    return tokens, usd, outputs
