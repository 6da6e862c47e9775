"""Gemini CLI (`gemini -p … --output-format stream-json`, or `json`): its events or its object.

`stream-json` prints one event a line, as it happens (`init`, `message` chunks, `tool_use`,
`tool_result`, and a closing `result` with per-model token counts, or `status: "error"` and the
error); `json` prints one object at the end (`response`, `stats.models.<model>.tokens`,
`stats.tools`), with errors on stderr as `{"session_id", "error": {…}}`. Both are read. Gemini
reports no cost: loopdeck estimates it from the tokens of each model (`loop.agents.prices`).

Limits: an API error ends the process with the HTTP status mod 256, so a 429 is exit **173**;
a daily quota says "You have exhausted your daily quota" and stops at once (transient 429s are
retried for about four minutes first); the reset is only in the server's message ("Please retry
in 30s."). Refusals: in `default` approval mode the shell and edit tools are not offered at all,
and a call to one ends as a `tool_result` with error type `tool_not_registered` (`json`:
`stats.tools` counts a failure with no decision).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from loop.agents import prices
from loop.agents.base import Adapter, Facts
from loop.agents.output import (
    as_int,
    as_str,
    brief,
    json_lines,
    json_object,
    last_line,
    said,
    sub,
    whole_json,
)
from loop.core import limits

DEFAULT_COMMAND = "gemini --output-format stream-json --approval-mode yolo --skip-trust --prompt={prompt}"
"""`yolo` approves every tool call (shell and edits; `auto_edit` would allow edits only), in a
workspace the person chose to run loopdeck in (`--skip-trust`: no trusted-folder prompt).
`stream-json` so the monitor shows the turn as it happens. The prompt is one argv element."""
QUOTA_EXIT = 173
"""429 mod 256: Gemini CLI exits with the HTTP status of the error that ended it."""
REFUSED = frozenset({"tool_not_registered", "policy_violation", "sandbox_expansion_required"})
"""`tool_result` error types that mean the tool was not allowed, rather than that it failed."""


def allow_hint(tools: Sequence[str]) -> str:
    return (
        f"Gemini CLI did not offer {', '.join(tools)} in its approval mode: run it with "
        "`--approval-mode yolo` (what `--agent gemini` does; `auto_edit` allows edits but not the "
        "shell), or allow the tools in a policy file (`--policy FILE`)"
    )


def _tokens(entry: Mapping[str, Any]) -> dict[str, int]:
    """One model's tokens in loopdeck's keys, from either format's shape."""
    if isinstance(entry.get("tokens"), dict):  # json: {input, prompt, candidates, cached, thoughts, …}
        raw = entry["tokens"]
        cached = as_int(raw.get("cached")) or 0
        fresh = as_int(raw.get("input"))
        if fresh is None:
            fresh = max(0, (as_int(raw.get("prompt")) or 0) - cached)
        output = (as_int(raw.get("candidates")) or 0) + (as_int(raw.get("thoughts")) or 0)
    else:  # stream-json: {input_tokens, output_tokens, cached, input}
        cached = as_int(entry.get("cached")) or 0
        fresh = as_int(entry.get("input"))
        if fresh is None:
            fresh = max(0, (as_int(entry.get("input_tokens")) or 0) - cached)
        output = as_int(entry.get("output_tokens")) or 0
    found = {"input_tokens": fresh, "output_tokens": output, "cache_read_input_tokens": cached}
    return {k: v for k, v in found.items() if v}


def _usage(stats: Any) -> tuple[dict[str, int], float | None, str | None]:
    """Tokens summed over the models, the estimated cost (None unless every model that used
    tokens has a price), and the main model (the one that used most)."""
    models = stats.get("models") if isinstance(stats, dict) else None
    total: dict[str, int] = {}
    cost: float | None = 0.0
    main, most = None, -1
    for name, entry in models.items() if isinstance(models, dict) else ():
        if not isinstance(entry, dict):
            continue
        used = _tokens(entry)
        if not used:
            continue
        for key, value in used.items():
            total[key] = total.get(key, 0) + value
        spent = prices.estimate(str(name), used)
        cost = None if spent is None or cost is None else cost + spent
        if sum(used.values()) > most:
            main, most = str(name), sum(used.values())
    return total, (cost if total else None), main


class Gemini(Adapter):
    name = "gemini"
    label = "Gemini CLI"
    programs = ("gemini", "gemini-cli")
    install = "npm install -g @google/gemini-cli"
    default_command = DEFAULT_COMMAND

    def read(
        self, output: str, exit_code: int | None, now: datetime, env: Mapping[str, str] | None = None
    ) -> Facts:
        chunks: list[str] = []
        names: dict[str, str] = {}
        refused: list[str] = []
        stats: Any = None
        error: str | None = None
        session: str | None = None
        streamed = False
        for event in json_lines(output):
            kind = event.get("type")
            streamed = streamed or kind in ("init", "message", "tool_use", "tool_result", "result")
            if kind == "init":
                session = as_str(event.get("session_id"))
            elif kind == "message" and event.get("role") == "assistant":
                chunks.append(str(event.get("content", "")))
            elif kind == "tool_use":
                names[str(event.get("tool_id"))] = str(event.get("tool_name", "?"))
                chunks = []  # the final text is the last model turn's
            elif kind == "tool_result":
                chunks = []
                failure = event.get("error")
                if (
                    event.get("status") == "error"
                    and isinstance(failure, dict)
                    and failure.get("type") in REFUSED
                ):
                    tool = names.get(str(event.get("tool_id")), "a tool")
                    if tool not in refused:
                        refused.append(tool)
            elif kind == "result":
                stats = event.get("stats")
                if event.get("status") == "error":
                    problem = event.get("error")
                    error = (as_str(problem.get("message")) if isinstance(problem, dict) else None) or "error"
        text = "".join(chunks) or None
        if not streamed:  # --output-format json: one object (and the error's, on stderr)
            whole = whole_json(output) or {}
            text = as_str(whole.get("response"))
            stats = whole.get("stats")
            session = as_str(whole.get("session_id"))
            problem = whole.get("error")
            if isinstance(problem, dict):
                error = as_str(problem.get("message")) or "error"
            refused = _refused_in(stats)
        tokens, cost, model = _usage(stats)
        failed = error is not None or exit_code not in (0, None)
        status = 429 if exit_code == QUOTA_EXIT else None
        limited = None
        if failed:
            found = limits.usage_limit(error or last_line(output), status, now)
            if found is not None:
                limited = (found[0], found[1] or limits.retry_in(output, now))
        return Facts(
            agent=self.name,
            text=text,
            failed=failed,
            error=(error or last_line(output) or f"exit {exit_code}") if failed else None,
            api_status=status,
            tokens=tokens,
            cost_usd=cost,
            estimated=cost is not None,
            model=model,
            limited=limited[0] if limited else None,
            resets_at=limited[1] if limited else None,
            denied=tuple(refused),
            denied_hint=allow_hint(refused) if refused else None,
            session_id=session,
        )

    def live_line(self, line: str) -> str | None:
        obj = json_object(line)
        if obj is None or "sessionID" in obj:
            return None
        kind = obj.get("type")
        if kind == "init" and "session_id" in obj:
            return f"● session started ({obj.get('model', '?')})"
        if kind == "message" and "role" in obj:
            if obj.get("role") != "assistant":
                return ""  # the prompt, echoed
            return said(str(obj.get("content", ""))) or ""
        if kind == "tool_use" and "tool_name" in obj:
            return f"▸ {obj.get('tool_name')} {brief(obj.get('parameters', ''))}"
        if kind == "tool_result" and "tool_id" in obj:
            failure = obj.get("error")
            if obj.get("status") == "error" and isinstance(failure, dict):
                return f"  ✗ {failure.get('type', 'error')}: {brief(failure.get('message', ''))}"
            return ""
        if kind == "result" and ("stats" in obj or "status" in obj):
            if obj.get("status") == "error":
                failure = obj.get("error")
                return f"■ failed: {failure.get('message') if isinstance(failure, dict) else 'error'}"
            stats = sub(obj, "stats")
            total = as_int(stats.get("total_tokens"))
            return "■ done" + (f" · {total:,} tokens" if total else "")
        return None


def _refused_in(stats: Any) -> list[str]:
    """`json` mode: tools that failed without any decision (not offered, so never run)."""
    tools = stats.get("tools") if isinstance(stats, dict) else None
    by_name = tools.get("byName") if isinstance(tools, dict) else None
    found = []
    for name, entry in by_name.items() if isinstance(by_name, dict) else ():
        if not isinstance(entry, dict):
            continue
        decisions = sub(entry, "decisions")
        if (as_int(entry.get("fail")) or 0) > 0 and not any(as_int(v) for v in decisions.values()):
            found.append(str(name))
    return found
