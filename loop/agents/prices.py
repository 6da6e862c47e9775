"""List prices of the models whose CLIs report tokens but no cost (Codex CLI, Gemini CLI).

Claude Code (`total_cost_usd`) and OpenCode (`step_finish.part.cost`) say what a turn cost;
Codex and Gemini say only how many tokens it used. For those, loopdeck *estimates* the cost
from this table, and says so ("≈$0.12 (estimated)"): USD per million tokens, input, input read
from the provider's cache, and output (reasoning or "thinking" tokens are billed as output).

Where the numbers come from: the providers' published API list prices, as of mid-2025
(https://openai.com/api/pricing/, https://ai.google.dev/gemini-api/docs/pricing). They are an
estimate, not a bill: subscriptions (ChatGPT plans, Gemini Code Assist) are not billed per
token at all, Gemini 2.5 Pro costs more for prompts over 200k tokens, and prices change. A
model that is not in the table gets tokens only, never a made-up cost. To correct or add
prices, write `~/.config/loopdeck/prices.json` (`$XDG_CONFIG_HOME` honoured):
`{"my-model": {"input": 1.25, "cached_input": 0.125, "output": 10.0}}`, USD per million tokens.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Price:
    """USD per million tokens."""

    input: float
    output: float
    cached_input: float | None = None
    """Input read from the cache; the input price when the provider has no discount."""


PRICES: dict[str, Price] = {
    # OpenAI (Codex CLI), https://openai.com/api/pricing/
    "gpt-5": Price(1.25, 10.00, 0.125),
    "gpt-5-codex": Price(1.25, 10.00, 0.125),
    "gpt-5-mini": Price(0.25, 2.00, 0.025),
    "gpt-5-nano": Price(0.05, 0.40, 0.005),
    "gpt-4.1": Price(2.00, 8.00, 0.50),
    "gpt-4.1-mini": Price(0.40, 1.60, 0.10),
    "o3": Price(2.00, 8.00, 0.50),
    "o4-mini": Price(1.10, 4.40, 0.275),
    "codex-mini-latest": Price(1.50, 6.00, 0.375),
    # Google (Gemini CLI), https://ai.google.dev/gemini-api/docs/pricing (prompts up to 200k tokens)
    "gemini-2.5-pro": Price(1.25, 10.00, 0.31),
    "gemini-2.5-flash": Price(0.30, 2.50, 0.075),
    "gemini-2.5-flash-lite": Price(0.10, 0.40, 0.025),
    "gemini-2.0-flash": Price(0.10, 0.40, 0.025),
}
"""Model name → price. Keep it small and dated: see the module's docstring."""

_DATED = re.compile(r"-(?:\d{4}-\d{2}-\d{2}|\d{8}|latest|preview(?:-\d{2}-\d{4})?)$")


def _user_prices() -> dict[str, Price]:
    """The person's own prices (`prices.json` in loopdeck's config folder); bad entries are skipped."""
    from loop.store.xdg import base as xdg_base

    base = xdg_base("XDG_CONFIG_HOME", ".config")  # absolute, and not a repository's folder
    try:
        raw = json.loads((Path(base) / "loopdeck" / "prices.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    found: dict[str, Price] = {}
    for name, entry in raw.items() if isinstance(raw, dict) else ():
        if not isinstance(entry, dict):
            continue
        values = [entry.get(k) for k in ("input", "output", "cached_input")]
        numbers = [
            v if isinstance(v, int | float) and not isinstance(v, bool) and v >= 0 else None for v in values
        ]
        if numbers[0] is None or numbers[1] is None:
            continue
        found[str(name).lower()] = Price(float(numbers[0]), float(numbers[1]), numbers[2])
    return found


def price_of(model: str | None, table: Mapping[str, Price] | None = None) -> Price | None:
    """The model's price: by its exact name (lower case, without a `provider/` prefix), else
    without a date or `-latest`/`-preview` suffix; None for a model nobody priced."""
    if not model:
        return None
    prices = {**PRICES, **_user_prices()} if table is None else dict(table)
    name = model.strip().lower().rsplit("/", 1)[-1]
    for candidate in (name, _DATED.sub("", name)):
        if candidate in prices:
            return prices[candidate]
    return None


def estimate(
    model: str | None, tokens: Mapping[str, int], table: Mapping[str, Price] | None = None
) -> float | None:
    """The estimated cost in USD of `tokens` (loopdeck's token keys) on `model`; None when the
    model has no price."""
    price = price_of(model, table)
    if price is None:
        return None
    cached = price.cached_input if price.cached_input is not None else price.input
    cost = (
        (tokens.get("input_tokens", 0) + tokens.get("cache_creation_input_tokens", 0)) * price.input
        + tokens.get("cache_read_input_tokens", 0) * cached
        + tokens.get("output_tokens", 0) * price.output
    )
    return cost / 1_000_000
