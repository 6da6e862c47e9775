"""Any other agent command: its last words as text, and an exit status.

What the runner has always done for a command it does not know: the final text is the tail of
what it printed, a failed run may name a usage limit in plain words ("rate limit", "resets
5pm", "retry in 30s"), and, for a command that prints Claude Code's result object (a wrapper, a
script standing in for it), that object is read as Claude Code's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime

from loop.agents.base import Adapter, Facts
from loop.agents.claude import Claude, parse
from loop.core import limits

TAIL_CHARS = 64 * 1024


class Text(Adapter):
    name = "text"
    label = "any other command"

    def read(
        self, output: str, exit_code: int | None, now: datetime, env: Mapping[str, str] | None = None
    ) -> Facts:
        if parse(output) is not None:
            facts = Claude().read(output, exit_code, now, env)
            return replace(facts, agent=self.name)
        text = output[-TAIL_CHARS:] if output.strip() else None
        limited = None
        if exit_code not in (0, None) and text:
            found = limits.usage_limit(text, None, now)
            if found is not None:
                limited = (found[0], found[1] or limits.retry_in(found[0], now))
        return Facts(
            agent=self.name,
            text=text,
            limited=limited[0] if limited else None,
            resets_at=limited[1] if limited else None,
        )

    def live_line(self, line: str) -> str | None:
        return None if line.lstrip().startswith("{") else line.rstrip("\n")
