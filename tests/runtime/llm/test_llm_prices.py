"""The price table: polc's own (package data), a user's file overriding it model by model, bad
files refused with their name and line, and unknown models priced as unknown, never guessed."""

from __future__ import annotations

import pytest

from polc.runtime.llm.prices import Price, PricesError, load_prices, user_prices_file
from polc.runtime.refine.budget import cost_text, parse_cost, parse_tokens


@pytest.fixture(autouse=True)
def no_user_file(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))


def test_the_bundled_table_prices_the_common_models_and_says_where_from():
    from polc.runtime.llm.prices import default_prices_text

    table = load_prices()
    for spec in ("openai:gpt-5", "openai:gpt-5-mini", "openai:gpt-5-nano", "openai:gpt-4.1", "openai:gpt-4o",
                 "anthropic:claude-sonnet-4-5", "anthropic:claude-opus-4-1", "anthropic:claude-haiku-4-5",
                 "gemini:gemini-2.5-pro", "gemini:gemini-2.5-flash"):
        assert table.price(spec) is not None, spec
    header = default_prices_text()
    assert "Source:" in header and "2026-12-03" in header and "stale" in header


def test_a_cost_counts_cached_input_at_its_own_rate_and_reasoning_as_output():
    p = Price(input=1.0, output=10.0, cached_input=0.1)
    # 1,000,000 input of which 400,000 cached, 100,000 output: 0.6 + 0.04 + 1.0
    assert p.cost(1_000_000, 100_000, 400_000) == pytest.approx(1.64)
    assert Price(input=1.0, output=10.0).cost(1_000_000, 0, 400_000) == pytest.approx(1.0)  # no cache rate
    table = load_prices()
    assert table.cost("openai:gpt-5-mini", 1000, 200) == pytest.approx((1000 * 0.25 + 200 * 2.0) / 1e6)


def test_a_dated_snapshot_is_priced_as_its_model_and_an_unknown_model_is_unknown():
    table = load_prices()
    assert table.price("anthropic:claude-sonnet-4-5-20250929") == table.price("anthropic:claude-sonnet-4-5")
    assert table.price("openai:gpt-5-mini-2025-08-07") == table.price("openai:gpt-5-mini")
    assert table.price("anthropic:claude-sonnet-4-20250514") == table.price("anthropic:claude-sonnet-4-0")
    assert table.price("openai:qwen3-coder") is None and table.cost("openai:qwen3-coder", 10, 10) is None
    assert table.price("openai:gpt-5-minimal") is None  # a longer name is another model
    assert cost_text(None) == "unknown" and cost_text(0.01234) == "$0.0123" and cost_text(12.345) == "$12.35"


def test_the_user_file_overrides_model_by_model_and_respects_xdg(tmp_path, monkeypatch):
    config = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    assert user_prices_file() == config / "polc" / "prices.toml"
    (config / "polc").mkdir(parents=True)
    (config / "polc" / "prices.toml").write_text('[models."gpt-5-mini"]\ninput = 9.0\noutput = 90.0\n\n'
                                                 '[models."qwen3-coder"]\ninput = 0\noutput = 0\n')
    table = load_prices()
    assert table.price("openai:gpt-5-mini") == Price(9.0, 90.0)
    assert table.cost("openai:qwen3-coder", 1000, 1000) == 0.0
    assert table.price("openai:gpt-4o") is not None  # the rest stays polc's
    assert table.sources[-1] == str(config / "polc" / "prices.toml")
    other = tmp_path / "mine.toml"
    other.write_text('[models."gpt-5-mini"]\ninput = 1.5\noutput = 2.5\ncached_input = 0.5\n')
    assert load_prices(other).price("openai:gpt-5-mini") == Price(1.5, 2.5, 0.5)  # --prices replaces the user file
    assert load_prices(other).price("openai:qwen3-coder") is None


@pytest.mark.parametrize("text, message", [
    ('[models."x"]\ninput = 1.0\noutput = \n', r"bad\.toml is not valid TOML: .*line 3"),
    ('date = "d"\n\n[models."x"]\ninput = -1.0\noutput = 2.0\n',
     r'bad\.toml, line 3: the input price of "x" must be a number of USD per million tokens, at least 0, not -1\.0'),
    ('[models."x"]\ninput = 1.0\n', r'bad\.toml, line 1: models\."x" has no output price'),
    ('\n[models."x"]\ninput = 1.0\noutput = 2.0\ncache = 0.1\n', r'bad\.toml, line 2: models\."x" has cache, which is not'),
    ('[models."x"]\ninput = "cheap"\noutput = 2.0\n', r"must be a number of USD .* not 'cheap'"),
    ('models = 3\n', r"bad\.toml, line 1: `models` must be tables"),
])
def test_a_bad_prices_file_names_the_file_and_line(tmp_path, text, message):
    bad = tmp_path / "bad.toml"
    bad.write_text(text)
    with pytest.raises(PricesError, match=message):
        load_prices(bad)


def test_a_missing_prices_file_is_named(tmp_path):
    with pytest.raises(PricesError, match=r"the prices file .*nope\.toml does not exist"):
        load_prices(tmp_path / "nope.toml")


@pytest.mark.parametrize("text, tokens", [("400k", 400_000), ("1.5M", 1_500_000), ("250000", 250_000),
                                          ("2_000", 2000), ("10K", 10_000)])
def test_token_budgets_take_k_and_m(text, tokens):
    assert parse_tokens(text) == tokens


@pytest.mark.parametrize("text", ["lots", "0", "1.5", "-3k", "2G"])
def test_a_bad_token_budget_says_what_it_takes(text):
    with pytest.raises(ValueError, match="--max-tokens"):
        parse_tokens(text)


def test_cost_budgets_take_dollars():
    assert parse_cost("2.00") == 2.0 and parse_cost("$0.5") == 0.5
    for bad in ("free", "0", "-1", "inf"):
        with pytest.raises(ValueError, match="--max-cost"):
            parse_cost(bad)
