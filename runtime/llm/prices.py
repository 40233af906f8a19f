"""What LLM calls cost: a price table (USD per million tokens) and the cost of a reply.

The table is package data (prices.toml beside this module: its header says where and when
the prices were taken, and that they can be stale), overridden model by model by the
user's file, ``$XDG_CONFIG_HOME/polc/prices.toml`` (``~/.config/polc/prices.toml``), or by
the file given with ``--prices FILE`` instead. A model the table does not know has no
price: its tokens are still counted, and its cost is reported as unknown, never guessed.

    table = load_prices()
    table.price("openai:gpt-5-mini")            -> Price(input=0.25, output=2.0, cached_input=0.025)
    table.cost("openai:gpt-5-mini", 1000, 200)  -> 0.00065
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional

PRICES_FILE = "prices.toml"
FIELDS = ("input", "output", "cached_input")
_SNAPSHOT = re.compile(r"^(.*?)-(\d{8}|\d{4}-\d{2}-\d{2})$")  # claude-...-20250929, gpt-...-2025-08-07


class PricesError(Exception):
    """A prices file cannot be used; str(e) names the file (and line) and what is wrong."""


@dataclass(frozen=True)
class Price:
    """USD per million tokens; `cached_input` None: cached input costs what input does."""

    input: float
    output: float
    cached_input: Optional[float] = None

    def cost(self, input_tokens: int, output_tokens: int, cached_input_tokens: Optional[int] = None) -> float:
        """USD for one call: `input_tokens` includes the `cached_input_tokens` (as providers
        report them), `output_tokens` any reasoning tokens."""
        cached = min(cached_input_tokens or 0, input_tokens)
        cached_rate = self.input if self.cached_input is None else self.cached_input
        return ((input_tokens - cached) * self.input + cached * cached_rate + output_tokens * self.output) / 1e6


def model_name(spec: str) -> str:
    """The model of a backend spec: "openai:gpt-5-mini" -> "gpt-5-mini" (a bare name stays)."""
    kind, sep, arg = spec.partition(":")
    return arg if sep and kind in ("openai", "anthropic", "gemini") else spec


class PriceTable:
    """Prices by model name; `sources` are the files they were read from, in order."""

    def __init__(self, prices: Mapping[str, Price], sources: tuple[str, ...] = ()):
        self.prices = dict(prices)
        self.sources = sources

    def price(self, spec: str) -> Optional[Price]:
        """The price of the model `spec` names (a dated snapshot as its model); None when unknown."""
        name = model_name(spec)
        if name in self.prices:
            return self.prices[name]
        m = _SNAPSHOT.match(name)
        return self.prices.get(m.group(1)) if m else None

    def cost(self, spec: str, input_tokens: int, output_tokens: int,
             cached_input_tokens: Optional[int] = None) -> Optional[float]:
        """USD for one call to `spec`, None when its price is unknown."""
        p = self.price(spec)
        return None if p is None else p.cost(input_tokens, output_tokens, cached_input_tokens)


def user_prices_file() -> Path:
    """``$XDG_CONFIG_HOME/polc/prices.toml``, ``~/.config/polc/prices.toml`` without it."""
    base = os.environ.get("XDG_CONFIG_HOME", "").strip() or str(Path.home() / ".config")
    return Path(base) / "polc" / PRICES_FILE


def default_prices_text() -> str:
    from importlib.resources import files

    return files(__package__).joinpath(PRICES_FILE).read_text(encoding="utf-8")


def load_prices(path: Optional[str | os.PathLike] = None) -> PriceTable:
    """The package's table overridden by `path` (``--prices FILE``, which must exist) or, without
    it, by the user's file when there is one. `PricesError` names a bad file and line."""
    prices = parse_prices(default_prices_text(), "polc's price table (polc/runtime/llm/prices.toml)")
    sources = ["polc/runtime/llm/prices.toml"]
    user = Path(path) if path is not None else user_prices_file()
    if path is not None or user.is_file():
        try:
            text = user.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise PricesError(f"the prices file {user} does not exist.") from None
        except (OSError, UnicodeDecodeError) as e:
            raise PricesError(f"cannot read the prices file {user}: {getattr(e, 'strerror', None) or e}.") from None
        prices.update(parse_prices(text, str(user)))
        sources.append(str(user))
    return PriceTable(prices, tuple(sources))


def parse_prices(text: str, name: str) -> dict[str, Price]:
    """The ``[models."NAME"]`` tables of a prices file (see prices.toml), aliases included."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise PricesError(f"{name} is not valid TOML: {e}.") from None
    models = data.get("models", {})
    if not isinstance(models, dict):
        raise PricesError(f"{name}, line {_line(text, 'models')}: `models` must be tables "
                          '[models."NAME"] with input = and output = prices.')
    out: dict[str, Price] = {}
    for model, entry in models.items():
        where = f"{name}, line {_line(text, model)}"
        if not isinstance(entry, dict):
            raise PricesError(f'{where}: models."{model}" must be a table with input = and output = prices '
                              "(USD per million tokens).")
        unknown = sorted(set(entry) - set(FIELDS) - {"aliases"})
        if unknown:
            raise PricesError(f'{where}: models."{model}" has {", ".join(unknown)}, which is not a price; '
                              f"use {', '.join(FIELDS)} (and aliases).")
        values = {}
        for field in FIELDS:
            if field not in entry:
                if field == "cached_input":
                    continue
                raise PricesError(f'{where}: models."{model}" has no {field} price (USD per million tokens).')
            v = entry[field]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < float("inf"):
                raise PricesError(f'{where}: the {field} price of "{model}" must be a number of USD per '
                                  f"million tokens, at least 0, not {v!r}.")
            values[field] = float(v)
        aliases = entry.get("aliases", [])
        if not (isinstance(aliases, list) and all(isinstance(a, str) for a in aliases)):
            raise PricesError(f'{where}: the aliases of "{model}" must be a list of model names.')
        price = Price(**values)
        for n in [model, *aliases]:
            out[n] = price
    return out


def _line(text: str, key: str) -> int:
    """The line where `key` (a model name, or "models") is first written: TOML's parser keeps
    no positions of values, so a value's problem is placed at its table's header."""
    for number, line in enumerate(text.splitlines(), start=1):
        if re.search(r'(^|[."\s\[])' + re.escape(key) + r'($|["\]\s.=])', line):
            return number
    return 1
