"""What a turn cost, estimated, for the CLIs that report tokens but no cost (Codex CLI, Gemini CLI).

Claude Code (`total_cost_usd`) and OpenCode (`step_finish.part.cost`) say what a turn cost;
Codex and Gemini say only how many tokens it used. For those, loopdeck *estimates* the cost and
says so ("≈$0.12 (estimated)"). The prices come from `genai-prices`, a price list maintained
apart from loopdeck (its data ships in the package: nothing is fetched), so a model released
after this release of loopdeck is priced once that package is updated. A hand-written table went
stale within months.

An estimate, not a bill: subscriptions (ChatGPT plans, Gemini Code Assist) are not billed per
token at all, and a turn's tokens are priced at the model's base rate (a CLI reports a turn's
sum, not each request's size, so long-prompt tiers are not applied). A model nobody priced gets
tokens only, never a made-up cost. A person's own prices win: `~/.config/loopdeck/prices.json`
(`$XDG_CONFIG_HOME` honoured), `{"my-model": {"input": 1.25, "cached_input": 0.125, "output":
10.0}}`, USD per million tokens.

`genai_prices` takes about a quarter of a second to import: it is imported only when a cost is
estimated (an agent turn ended), never on the Stop hook's path.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path


@dataclass(frozen=True)
class Price:
    """USD per million tokens."""

    input: float
    output: float
    cached_input: float | None = None
    """Input read from the cache; the input price when the provider has no discount."""


_DATED = re.compile(r"-(?:\d{4}-\d{2}-\d{2}|\d{8}|latest|preview(?:-\d{2}-\d{4})?)$")

_SAMPLE = 100_000
"""Tokens of each kind the library prices at once to find a per-token rate: below every
long-prompt tier (Gemini's start at 200k), so the rate is the model's base rate."""


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


def _names(model: str) -> tuple[str, ...]:
    """The names a model is looked up by: lower case, without a `provider/` prefix, then
    without a date or `-latest`/`-preview` suffix."""
    name = model.strip().lower().rsplit("/", 1)[-1]
    stripped = _DATED.sub("", name)
    return (name,) if stripped == name else (name, stripped)


def _provider(name: str) -> str | None:
    """The provider a CLI's model name belongs to (the library's id), so a name several
    providers resell is priced at its maker's list price."""
    if name.startswith("gemini"):
        return "google"
    if name.startswith(("gpt-", "codex", "o1", "o3", "o4")):
        return "openai"
    return None


@lru_cache(maxsize=64)
def _library_price(name: str) -> Price | None:
    """The model's base rates from `genai-prices`, per million tokens; None when it does not
    know the model (or is not installed)."""
    try:
        from genai_prices import Usage, calc_price
    except ImportError:  # pragma: no cover - a dependency; an estimate is never worth a failure
        return None

    def rate(**tokens: int) -> float:
        usage = Usage(**tokens)
        return float(calc_price(usage, name, provider_id=_provider(name)).total_price)

    try:
        fresh = rate(input_tokens=_SAMPLE)
        cached = rate(input_tokens=_SAMPLE, cache_read_tokens=_SAMPLE)
        output = rate(output_tokens=_SAMPLE)
    except (LookupError, ValueError):
        return None
    scale = 1_000_000 / _SAMPLE
    return Price(fresh * scale, output * scale, cached * scale)


def price_of(model: str | None) -> Price | None:
    """The model's price: the person's own first, then the library's; by its exact name, else
    without a date or `-latest`/`-preview` suffix. None for a model nobody priced."""
    if not model:
        return None
    names = _names(model)
    own = _user_prices()
    for name in names:
        if name in own:
            return own[name]
    for name in names:
        found = _library_price(name)
        if found is not None:
            return found
    return None


def estimate(model: str | None, tokens: Mapping[str, int]) -> float | None:
    """The estimated cost in USD of `tokens` (loopdeck's token keys: input without the cache's
    part) on `model`; None when the model has no price."""
    price = price_of(model)
    if price is None:
        return None
    cached = price.cached_input if price.cached_input is not None else price.input
    cost = (
        (tokens.get("input_tokens", 0) + tokens.get("cache_creation_input_tokens", 0)) * price.input
        + tokens.get("cache_read_input_tokens", 0) * cached
        + tokens.get("output_tokens", 0) * price.output
    )
    return cost / 1_000_000
