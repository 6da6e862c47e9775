"""OpenCode (`opencode run --format json`): one line per finished part, no closing summary.

Each line has `type` and `sessionID`: `step_start`, `text` (`part.text`), `tool_use` (`part.tool`
and `part.state`: `status`, `input`, `output` or `error`), `step_finish` (`part.tokens`,
`part.cost` in USD: OpenCode prices its models itself), and `error` when the API gave up
(`error.data`: `message`, `statusCode`, `responseHeaders`, `responseBody`; exit 1).

Limits: OpenCode retries a 429 six times honouring `Retry-After` (a long one is waited out
silently: only the runner's iteration timeout ends that), then prints the error with the
response's headers: the reset is the longest of `retry-after` and `x-ratelimit-reset-*`.
Refusals: a permission rule that would ask is rejected in `opencode run`: the tool part ends
with "The user rejected permission to use this specific tool call." and the run stops there,
exit 0, no final text; a rule that denies removes the tool, and a call to it becomes
"Model tried to call unavailable tool 'bash'".
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any

from loop.agents.base import Adapter, Facts
from loop.agents.output import as_float, as_int, as_str, brief, json_lines, json_object, last_line, said, sub
from loop.core import limits

DEFAULT_COMMAND = "opencode run --format json -- {prompt}"
"""OpenCode's default permission rules allow edits and the shell; `run` never asks (a rule that
would is rejected). The prompt is one argv element after `--`."""
REJECTED = "rejected permission"
_UNAVAILABLE = re.compile(r"unavailable tool '([^']+)'")
_RESET_HEADERS = ("retry-after", "retry-after-ms", "x-ratelimit-reset-requests", "x-ratelimit-reset-tokens")
PARTS = frozenset(
    {"step_start", "step_finish", "text", "tool_use", "reasoning", "error", "file", "patch", "snapshot"}
)


def allow_hint(tools: Sequence[str]) -> str:
    names = ", ".join(tools)
    first = tools[0] if tools else "bash"
    return (
        f"OpenCode's permission rules ask for (or deny) {names}, and `opencode run` rejects what would "
        f'ask: run it with `--auto` (approves "ask" rules), or allow it in opencode.json '
        f'(`"permission": {{"{first}": "allow"}}`)'
    )


def _reset(headers: Any, now: datetime) -> str | None:
    """The latest reset the response's headers name (seconds, an HTTP date, or `1m30s`)."""
    if not isinstance(headers, dict):
        return None
    lowered = {str(k).lower(): str(v) for k, v in headers.items()}
    latest: datetime | None = None
    for name in _RESET_HEADERS:
        value = lowered.get(name)
        if not value:
            continue
        moment: datetime | None = None
        seconds = limits.duration_s(value)
        if seconds is not None:
            moment = now + timedelta(seconds=seconds / 1000 if name.endswith("-ms") else seconds)
        else:
            try:
                moment = parsedate_to_datetime(value).astimezone(UTC)
            except (TypeError, ValueError, IndexError):
                moment = None
        if moment is not None and (latest is None or moment > latest):
            latest = moment
    return latest.isoformat() if latest is not None else None


class OpenCode(Adapter):
    name = "opencode"
    label = "OpenCode"
    programs = ("opencode", "opencode-ai")
    install = "npm install -g opencode-ai"
    default_command = DEFAULT_COMMAND

    def read(
        self, output: str, exit_code: int | None, now: datetime, env: Mapping[str, str] | None = None
    ) -> Facts:
        text: str | None = None
        tokens = {
            "input_tokens": 0,
            "output_tokens": 0,
            "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 0,
        }
        cost: float | None = None
        refused: list[str] = []
        error: str | None = None
        status: int | None = None
        reset: str | None = None
        session: str | None = None
        for event in json_lines(output):
            if "sessionID" not in event:
                continue
            session = session or as_str(event.get("sessionID"))
            kind = event.get("type")
            part = sub(event, "part")
            if kind == "text":
                text = as_str(part.get("text")) or text
            elif kind == "tool_use":
                state = sub(part, "state")
                said_back = f"{state.get('error', '')}\n{state.get('output', '')}"
                tool = str(part.get("tool", "a tool"))
                unavailable = _UNAVAILABLE.search(said_back)
                if state.get("status") == "error" and REJECTED in said_back:
                    refused.append(tool)
                elif unavailable:
                    refused.append(unavailable.group(1))
            elif kind == "step_finish":
                used = sub(part, "tokens")
                cache = sub(used, "cache")
                tokens["input_tokens"] += as_int(used.get("input")) or 0
                tokens["output_tokens"] += (as_int(used.get("output")) or 0) + (
                    as_int(used.get("reasoning")) or 0
                )
                tokens["cache_read_input_tokens"] += as_int(cache.get("read")) or 0
                tokens["cache_creation_input_tokens"] += as_int(cache.get("write")) or 0
                spent = as_float(part.get("cost"))
                if spent is not None:
                    cost = (cost or 0.0) + spent
            elif kind == "error":
                problem = sub(event, "error")
                data = sub(problem, "data")
                error = as_str(data.get("message")) or as_str(problem.get("name")) or "error"
                status = as_int(data.get("statusCode"))
                reset = _reset(data.get("responseHeaders"), now) or limits.retry_in(
                    f"{error}\n{data.get('responseBody', '')}", now
                )
        failed = error is not None or exit_code not in (0, None)
        limited = None
        if failed:
            found = limits.usage_limit(error or last_line(output), status, now)
            if found is not None:
                limited = (found[0], reset or found[1])
        refused = list(dict.fromkeys(refused))
        return Facts(
            agent=self.name,
            text=text,
            failed=failed,
            error=(error or last_line(output) or f"exit {exit_code}") if failed else None,
            api_status=status,
            tokens={k: v for k, v in tokens.items() if v},
            cost_usd=cost,
            limited=limited[0] if limited else None,
            resets_at=limited[1] if limited else None,
            denied=tuple(refused),
            denied_hint=allow_hint(refused) if refused else None,
            session_id=session,
        )

    def live_line(self, line: str) -> str | None:
        obj = json_object(line)
        if obj is None or "sessionID" not in obj or obj.get("type") not in PARTS:
            return None
        kind = obj["type"]
        part = sub(obj, "part")
        if kind == "text":
            return said(str(part.get("text", ""))) or ""
        if kind == "tool_use":
            state = sub(part, "state")
            shown = f"▸ {part.get('tool', '?')} {brief(state.get('input', ''))}"
            if state.get("status") == "error":
                shown += f"\n  ✗ {brief(state.get('error', ''))}"
            return shown
        if kind == "step_finish" and part.get("reason") == "stop":
            used = sub(part, "tokens")
            total = as_int(used.get("total"))
            spent = as_float(part.get("cost"))
            return (
                "■ done" + (f" · {total:,} tokens" if total else "") + (f" · ${spent:.4f}" if spent else "")
            )
        if kind == "error":
            problem = sub(obj, "error")
            data = sub(problem, "data")
            return f"■ failed: {data.get('message') or problem.get('name') or 'error'}"
        return ""
