"""One judgement of an agent's turn, for every driver: the facts the engine decides on.

A turn is more than its exit status. Claude Code in print mode exits 0 with its tools refused
(`permission_denials`), reports its cost, and says "usage limit reached" on a 429; a turn that
timed out or could not start failed; a worker that asked a question waits for a person. The
runner (one agent per iteration) and the parallel driver (a worker per task) read a turn here,
the same way, into a `Turn` for the engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from loop import agent, claude_result, limits
from loop.model import Turn


@dataclass(frozen=True)
class Judged:
    turn: Turn
    text: str
    """The agent's final words (what it said last)."""
    failure: str | None = None
    """Why the turn failed, in one line (None when it did its turn)."""


def usage_of(said: claude_result.ClaudeResult) -> dict[str, int] | None:
    """What the agent reported using, as the state sums it (cost in millionths of a dollar)."""
    usage: dict[str, int] = {}
    if said.total_cost_usd is not None:
        usage["cost_micro_usd"] = round(said.total_cost_usd * 1_000_000)
    for key in ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"):
        value = said.usage.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            usage[key] = value
    return usage or None


def error_signature(text: str) -> str:
    """What makes two failures "the same error": the text without its timing, last 400 chars."""
    return text.split("(timed out")[0][-400:]


def judge(
    tail: bytes,
    exit_code: int | None,
    now: datetime,
    *,
    timed_out: float | None = None,
    error: str | None = None,
) -> Judged:
    """The facts of one finished agent run: its output's tail, how it exited (None: it could not
    start, `error` says why), whether it timed out (after how many seconds)."""
    said = claude_result.parse(tail)  # None: the agent does not speak Claude Code's JSON
    text = said.text if said is not None and said.text is not None else agent.final_text(tail)
    usage = usage_of(said) if said is not None else None
    failed = (
        error is not None or timed_out is not None or exit_code != 0 or (said is not None and said.failed)
    )
    if failed and error is None and timed_out is None:
        words = "\n".join([*said.errors, said.text or ""]) if said is not None else agent.final_text(tail)
        limited = limits.usage_limit(words, said.api_error_status if said else None, now)
        if limited is not None:
            return Judged(Turn(limited=limited[0], resets_at=limited[1], usage=usage), text)
    if failed:
        if error is not None:
            why = error
        elif timed_out is not None:
            why = f"timed out after {timed_out:g} s"
        elif said is not None and said.failed:
            detail = "; ".join(said.errors) or (said.text or "").strip() or said.subtype
            status = f" (HTTP {said.api_error_status})" if said.api_error_status else ""
            why = f"exit {exit_code}, {said.subtype}{status}: {detail[-300:]}"
        else:
            last = agent.final_text(tail).strip().splitlines()[-1:] or [""]
            why = f"exit {exit_code}: {last[0][-300:]}"
        return Judged(Turn(failure=why, error=error_signature(why), usage=usage), text, why)
    denied = tuple(said.denied_tools) if said is not None else ()
    hint = claude_result.allow_hint(list(denied)) if denied else None
    return Judged(Turn(usage=usage, denied=denied, denied_hint=hint), text)
