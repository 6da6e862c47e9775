"""Claude Code (`claude -p --output-format json`, or `stream-json`): its result object.

The runner needs more than the exit status. Print mode without a permission mode denies Bash,
Edit and Write and still exits 0 with `"subtype": "success"`: the only trace is the result's
`permission_denials`. `error_max_turns` has no `result` key but an `errors` list (exit 1); an
API error is `is_error` with `api_error_status` while its subtype can still read "success".
The result is read defensively, every key optional. Usage limits: `api_error_status` 429, or the
words Claude Code has used ("Claude AI usage limit reached|<epoch>", "You've hit your session
limit · resets 5pm (Europe/Paris)"), read by `loop.core.limits`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from loop.agents.base import TOKEN_KEYS, Adapter, Facts
from loop.agents.output import as_float, as_int, as_str, brief, json_lines, json_object, said, tool_results
from loop.core import limits

DEFAULT_COMMAND = "claude -p --output-format json --permission-mode acceptEdits --allowedTools Bash"
"""Print mode with no permission mode denies Bash, Edit and Write and still exits 0 (the denials
are only in the result's `permission_denials`): the agent could do none of its work. acceptEdits
lets it edit inside the workspace and `--allowedTools Bash` run commands, without
`bypassPermissions`, which Claude Code refuses as root unless IS_SANDBOX=1."""
BOXED_COMMAND = DEFAULT_COMMAND + """ --settings '{"sandbox": {"enabled": false}}'"""
"""Inside loopdeck's sandbox: Claude Code's own Bash sandbox (`loopdeck install --sandbox`)
would nest in it, and cannot start there as root; loopdeck's confines the turn already."""
DEFAULT_ENV = {"CLAUDE_CODE_ENABLE_TODO_TOOLS": "1"}
TRANSCRIPT_BYTES = 4 * 1024 * 1024
"""How much of a session's transcript, from its end, is read for its tools' output."""
"""Claude Code 2.1.332 offers its newer models the Task tools only with this set."""


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
    usage = obj.get("usage")
    turns = obj.get("num_turns")
    subtype = obj.get("subtype")
    return ClaudeResult(
        subtype=subtype if isinstance(subtype, str) else "unknown",
        is_error=obj.get("is_error") is True,
        text=as_str(obj.get("result")),
        denials=tuple(denials),
        errors=tuple(str(e) for e in errors) if isinstance(errors, list) else (),
        api_error_status=status if isinstance(status, int) and not isinstance(status, bool) else None,
        total_cost_usd=as_float(obj.get("total_cost_usd")),
        usage=usage if isinstance(usage, dict) else {},
        session_id=as_str(obj.get("session_id")),
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


def allow_hint(tools: Sequence[str]) -> str:
    """How to let the agent use the denied tools, for the escalation message."""
    names = " ".join(tools)
    return (
        f"Claude Code denied {', '.join(tools)}: allow them in the agent command "
        f"(`--allowedTools {names}`, or `--permission-mode acceptEdits` for Edit/Write) "
        "or in .claude/settings.json `permissions.allow`"
    )


def _plain_text(output: str) -> str | None:
    return output[-64 * 1024 :] if output.strip() else None


class Claude(Adapter):
    name = "claude"
    label = "Claude Code"
    programs = ("claude", "claude-code")
    install = "npm install -g @anthropic-ai/claude-code"
    default_command = DEFAULT_COMMAND
    boxed_command = BOXED_COMMAND
    default_env = DEFAULT_ENV

    def tool_output(self, output: str, cwd: Path, env: Mapping[str, str]) -> str | None:
        """The tool results of this turn's session, from its transcript: print mode's JSON holds
        only the final text."""
        result = parse(output)
        if result is None or not result.session_id:
            return None
        configured = env.get("CLAUDE_CONFIG_DIR") or os.path.join(env.get("HOME", ""), ".claude")
        folder = re.sub(r"[^A-Za-z0-9]", "-", str(cwd))
        path = Path(configured) / "projects" / folder / f"{result.session_id}.jsonl"
        try:
            with open(path, "rb") as f:
                f.seek(max(0, f.seek(0, os.SEEK_END) - TRANSCRIPT_BYTES))
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return None
        return "\n".join(tool_results(json_lines(text)))

    def read(
        self, output: str, exit_code: int | None, now: datetime, env: Mapping[str, str] | None = None
    ) -> Facts:
        result = parse(output)
        if result is None:  # not Claude Code's JSON (text mode, or it died before printing it)
            text = _plain_text(output)
            limited = limits.usage_limit(text, None, now) if exit_code != 0 and text else None
            return Facts(
                agent=self.name,
                text=text,
                limited=limited[0] if limited else None,
                resets_at=limited[1] if limited else None,
            )
        tokens = {key: v for key in TOKEN_KEYS if (v := as_int(result.usage.get(key))) is not None}
        detail = "; ".join(result.errors) or (result.text or "").strip()
        error = f"{result.subtype}: {detail[-300:]}" if detail else result.subtype
        limited = None
        if result.failed or exit_code != 0:
            words = "\n".join([*result.errors, result.text or ""])
            limited = limits.usage_limit(words or output, result.api_error_status, now)
        denied = tuple(result.denied_tools)
        return Facts(
            agent=self.name,
            text=result.text,
            failed=result.failed,
            error=error if result.failed else None,
            api_status=result.api_error_status,
            tokens=tokens,
            cost_usd=result.total_cost_usd,
            limited=limited[0] if limited else None,
            resets_at=limited[1] if limited else None,
            denied=denied,
            denied_hint=allow_hint(denied) if denied else None,
            session_id=result.session_id,
        )

    def live_line(self, line: str) -> str | None:
        obj = json_object(line)
        if obj is None:
            return None
        kind = obj.get("type")
        if kind == "assistant" and isinstance(obj.get("message"), dict):
            content = obj["message"].get("content")
            if isinstance(content, str):
                content = [{"type": "text", "text": content}]
            out: list[str] = []
            for block in content if isinstance(content, list) else []:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "text" and isinstance(block.get("text"), str):
                    out.append(said(block["text"]) or "")
                elif block.get("type") == "tool_use":
                    out.append(f"▸ {block.get('name', '?')} {brief(block.get('input', ''))}")
            return "\n".join(part for part in out if part)
        if (kind == "result" and ("subtype" in obj or "session_id" in obj)) or (
            kind is None and "result" in obj and "session_id" in obj
        ):
            words = [str(obj.get("subtype") or "result")]
            if isinstance(obj.get("num_turns"), int):
                words.append(f"{obj['num_turns']} turns")
            cost = as_float(obj.get("total_cost_usd"))
            if cost is not None:
                words.append(f"${cost:.2f}")
            ending = f"■ {' · '.join(words)}"
            text = as_str(obj.get("result"))
            if text and kind != "result":
                return "\n".join(part for part in (said(text), ending) if part)
            return ending
        if kind == "system" and obj.get("subtype") == "init":
            return f"● session started ({obj.get('model', '?')})"
        if kind in ("user", "system", "attachment", "summary", "queue-operation") or "sessionId" in obj:
            return ""  # tool results, user turns, a transcript's bookkeeping: not what a person follows
        return None
