"""What every agent adapter gives the loop: the facts of one turn, read from the CLI's output.

A turn ends with an exit status and whatever the CLI printed (its JSON lines, or text). What
that means for the loop (did the agent do its turn, what did it say, what did it cost, did it
hit a usage limit and when does that reset, were its tools refused and how to allow them) is
different in every CLI: Claude Code prints one result object, Codex a stream of events, Gemini
a result line with per-model statistics, OpenCode one line per finished part. An `Adapter`
reads one CLI's shapes into the same `Facts`; `loop.agents.turn.judge` turns those into the
engine's `Turn`. Adapters are pure apart from what they are handed (Codex's session file is
found through the environment it gets).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

TOKEN_KEYS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
"""The token counts a turn reports, in Claude Code's names (input excludes what was read from the
cache): every adapter maps its CLI's counts onto these, so the loop's sums mean one thing."""


@dataclass(frozen=True)
class Facts:
    """One turn as the CLI told it. Every field is optional: a CLI that does not say leaves it."""

    agent: str
    """The adapter that read it: `claude`, `codex`, `gemini`, `opencode` or `text`."""
    text: str | None = None
    """The agent's last words (its final message), where the signal and questions are read."""
    failed: bool = False
    """The CLI says the turn failed (an API error, an error result), whatever its exit status."""
    error: str | None = None
    """What the CLI said went wrong, in its words."""
    api_status: int | None = None
    """The HTTP status of the API error that ended the turn, when the CLI says."""
    tokens: Mapping[str, int] = field(default_factory=dict)
    """Token counts under `TOKEN_KEYS`."""
    cost_usd: float | None = None
    """What the turn cost: reported by the CLI, or estimated from `loop.agents.prices`."""
    estimated: bool = False
    """The cost is loopdeck's estimate from the tokens (the CLI reports tokens only)."""
    model: str | None = None
    limited: str | None = None
    """The turn hit a usage or rate limit: what the CLI said."""
    resets_at: str | None = None
    """When that limit resets (ISO 8601), when the CLI says; else the loop backs off."""
    denied: tuple[str, ...] = ()
    """Tools the CLI refused or its sandbox blocked this turn."""
    denied_hint: str | None = None
    """How to allow them, in the CLI's own terms."""
    session_id: str | None = None

    @property
    def total_tokens(self) -> int:
        return sum(self.tokens.values())


class Adapter:
    """One agent CLI: how to run it unattended, and how to read what it printed."""

    name = "text"
    label = "any other command"
    programs: tuple[str, ...] = ()
    """Program names (argv[0]'s base name) that mean this CLI when a full command is given."""
    install = ""
    """The command that installs the CLI, for the one line a missing executable gets."""
    default_command = ""
    """What `--agent NAME` runs: the prompt as `{prompt}` (an argv element) or on stdin."""
    default_env: Mapping[str, str] = {}
    """Environment the default command needs (applied only to it)."""
    boxed_command = ""
    """The default command when loopdeck's sandbox holds the turn, if it differs: a CLI's own
    sandbox cannot start inside another (as root, bubblewrap cannot nest), and loopdeck's
    confines the turn already."""

    def tool_output(self, output: str, cwd: Path, env: Mapping[str, str]) -> str | None:
        """What the agent's tools printed this turn, where the CLI's own output leaves it out or
        quotes it (what the sandbox refused is read there); None: the output shows it as is."""
        return None

    def read(
        self, output: str, exit_code: int | None, now: datetime, env: Mapping[str, str] | None = None
    ) -> Facts:
        """The facts of a turn from the CLI's combined output (stdout and stderr) and exit code."""
        return Facts(agent=self.name, text=output[-64 * 1024 :] if output.strip() else None)

    def live_line(self, line: str) -> str | None:
        """One line of the iteration log as a person reads it, or None for bookkeeping. Lines
        that start `▸ ` are tool calls, `■ ` a turn's ending, `● ` the start; the rest is what the
        agent said (several lines when it said several). A line this CLI did not print: None."""
        return None

    def allow_hint(self, tools: Sequence[str]) -> str:
        return f"allow {', '.join(tools)} in the agent's own settings"
