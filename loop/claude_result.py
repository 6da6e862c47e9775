"""What a `claude -p --output-format json` run said: the result object, read into plain fields.

The runner needs more than the exit status. Print mode without a permission mode denies Bash,
Edit and Write and still exits 0 with `"subtype": "success"`: the only trace is the result's
`permission_denials`. `error_max_turns` has no `result` key but an `errors` list (exit 1); an
API error is `is_error` with `api_error_status` while its subtype can still read "success".
This module reads one result (the `--output-format json` object, or the last `result` event of
`stream-json`) defensively, every key optional, so the runner can journal denials and escalate
naming the denied tools. Pure: no I/O.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Denial:
    """One tool call Claude Code refused for lack of permission."""

    tool_name: str
    tool_input: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ClaudeResult:
    subtype: str
    is_error: bool
    text: str | None
    """The final text (`result`); None when the run ended without one (error_max_turns)."""
    denials: tuple[Denial, ...] = ()
    errors: tuple[str, ...] = ()
    api_error_status: int | None = None
    total_cost_usd: float | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    session_id: str | None = None
    num_turns: int | None = None

    @property
    def denied_tools(self) -> list[str]:
        """The denied tools' names, each once, in the order they were first denied."""
        return list(dict.fromkeys(d.tool_name for d in self.denials))

    @property
    def failed(self) -> bool:
        """The run did not do its turn: an error, an API error or a non-success subtype."""
        return self.is_error or self.subtype != "success" or self.api_error_status is not None


def _from_object(obj: dict[str, Any]) -> ClaudeResult:
    denials = []
    for item in obj.get("permission_denials") or []:
        if isinstance(item, dict) and isinstance(item.get("tool_name"), str):
            tool_input = item.get("tool_input")
            denials.append(Denial(item["tool_name"], tool_input if isinstance(tool_input, dict) else {}))
    errors = obj.get("errors")
    status = obj.get("api_error_status")
    cost = obj.get("total_cost_usd")
    usage = obj.get("usage")
    turns = obj.get("num_turns")
    text = obj.get("result")
    session = obj.get("session_id")
    subtype = obj.get("subtype")
    return ClaudeResult(
        subtype=subtype if isinstance(subtype, str) else "unknown",
        is_error=obj.get("is_error") is True,
        text=text if isinstance(text, str) else None,
        denials=tuple(denials),
        errors=tuple(str(e) for e in errors) if isinstance(errors, list) else (),
        api_error_status=status if isinstance(status, int) and not isinstance(status, bool) else None,
        total_cost_usd=float(cost) if isinstance(cost, int | float) and not isinstance(cost, bool) else None,
        usage=usage if isinstance(usage, dict) else {},
        session_id=session if isinstance(session, str) else None,
        num_turns=turns if isinstance(turns, int) and not isinstance(turns, bool) else None,
    )


def parse(output: str | bytes) -> ClaudeResult | None:
    """The last result object in `output` (json or stream-json), or None when there is none."""
    text = output.decode("utf-8", "replace") if isinstance(output, bytes) else output
    candidates = [text.strip()] if text.strip().startswith("{") else []
    candidates += [line.strip() for line in reversed(text.splitlines()) if line.strip().startswith("{")]
    for candidate in candidates:
        try:
            obj = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(obj, dict) and obj.get("type") == "result":
            return _from_object(obj)
    return None


def allow_hint(tools: list[str]) -> str:
    """How to let the agent use the denied tools, for the escalation message."""
    names = " ".join(tools)
    return (
        f"Claude Code denied {', '.join(tools)}: allow them in the agent command "
        f"(`--allowedTools {names}`, or `--permission-mode acceptEdits` for Edit/Write) "
        "or in .claude/settings.json `permissions.allow`"
    )
