"""One judgement of a turn: what an agent run means, the same for every driver.

A driver runs the agent and hands over what it saw (the exit status, the output, whether it
timed out or could not start); `judge` asks the CLI's adapter for the facts and decides what
the engine is told: the turn worked, failed (and why: the text the journal shows and whose
signature finds the same error repeating), or hit a usage limit (not a failure: no retry is
spent, the loop waits for the reset); its usage as the state sums it; the tools refused and how
to allow them; the agent's last words, with the completion signal and the question read from
them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from loop.agents.base import Adapter, Facts
from loop.core.model import Turn
from loop.core.signals import completion_signal, question

TEXT_CHARS = 64 * 1024


def error_signature(text: str) -> str:
    """What makes two failures "the same error": the text without its timing, last 400 chars."""
    return text.split("(timed out")[0][-400:]


@dataclass(frozen=True)
class Judgement:
    facts: Facts
    ok: bool
    """The agent did its turn: it started, ended by itself with exit 0, and its CLI did not say
    the turn failed."""
    failure: str | None = None
    """Why it did not (None when it did, or when it only hit a usage limit)."""
    text: str | None = None
    """The agent's last words (its final message, or the tail of what it printed)."""
    signal: str | None = None
    """The completion signal in those words (`ALL_TASKS_COMPLETE` or `promise`), if any."""
    question: str | None = None
    """A `<question>` to a person in those words, if any."""

    @property
    def limited(self) -> str | None:
        return self.facts.limited

    @property
    def resets_at(self) -> str | None:
        return self.facts.resets_at

    @property
    def usage(self) -> dict[str, int] | None:
        """What the state sums: token counts, the cost in millionths of a dollar, the part of it
        that is loopdeck's estimate, and a turn whose cost nobody knows (tokens, no price)."""
        return usage_of(self.facts)

    def turn(self, usage: dict[str, int] | None = None) -> Turn:
        """The engine's account of this turn (`usage`: when several attempts add up)."""
        spent = usage if usage is not None else self.usage
        if self.facts.limited is not None:
            return Turn(limited=self.facts.limited, resets_at=self.facts.resets_at, usage=spent)
        if self.failure is not None:
            return Turn(failure=self.failure, error=error_signature(self.failure), usage=spent)
        return Turn(
            usage=spent,
            denied=self.facts.denied,
            denied_hint=self.facts.denied_hint,
        )


def usage_of(facts: Facts) -> dict[str, int] | None:
    usage = {key: int(value) for key, value in facts.tokens.items() if value}
    if facts.cost_usd is not None:
        usage["cost_micro_usd"] = round(facts.cost_usd * 1_000_000)
        if facts.estimated:
            usage["estimated_cost_micro_usd"] = usage["cost_micro_usd"]
    elif usage:
        usage["unpriced_turns"] = 1
    return usage or None


def judge(
    adapter: Adapter,
    output: str | bytes,
    exit_code: int | None,
    *,
    now: datetime,
    timed_out: bool = False,
    timeout_s: float | None = None,
    start_error: str | None = None,
    env: Mapping[str, str] | None = None,
    promise: str | None = None,
    echoed: str = "",
) -> Judgement:
    """The judgement of one agent run, from what the driver saw of it.

    `start_error`: the agent could not be started; `timed_out`: the driver killed it after
    `timeout_s`; `env`: the environment it ran in (an adapter may find the CLI's own files
    through it); `promise` and `echoed` (the prompt it was given) for reading the signal."""
    text_out = output.decode("utf-8", "replace") if isinstance(output, bytes) else output
    facts = adapter.read(text_out, exit_code, now, env)
    text = facts.text
    failure: str | None = None
    if start_error is not None:
        failure = start_error
    elif facts.limited is not None:
        failure = None  # not a failure of the work: the loop waits
    elif timed_out:
        failure = f"timed out after {timeout_s:g} s" if timeout_s is not None else "timed out"
    elif facts.failed or exit_code != 0:
        status = f" (HTTP {facts.api_status})" if facts.api_status else ""
        detail = facts.error or _last(text) or ""
        failure = f"exit {exit_code}{status}" + (f": {detail[-300:]}" if detail else "")
    ok = failure is None and facts.limited is None
    return Judgement(
        facts=facts,
        ok=ok,
        failure=failure,
        text=text,
        signal=completion_signal(text, promise, echoed) if ok else None,
        question=question(text) if ok and text else None,
    )


def _last(text: str | None) -> str:
    lines = [line.strip() for line in (text or "").strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""
