"""Codex CLI (`codex exec --json`): its event stream, and the session file it keeps.

`--json` prints one event a line: `thread.started` (the thread id), `item.completed` items
(`agent_message` text, `command_execution` with its exit code, `error` warnings), then
`turn.completed` with the token usage, or `turn.failed` with the error (exit 1). Codex reports
no cost: loopdeck estimates it from the tokens (`loop.agents.prices`).

Two facts are only in the session file (`$CODEX_HOME/sessions/YYYY/MM/DD/rollout-…-<thread
id>.jsonl`, found through the thread id): the model (for the price), the usage limit's reset
as an epoch (`token_count.rate_limits`, from the server's `x-codex-*-reset-at` headers; the
stream only says "try again at 12:44 PM"), and a command the read-only sandbox refused: in the
default `read-only` sandbox the command runs and fails with "Read-only file system", and the
stream shows no `command_execution` item for it at all, only the session file's
`function_call_output` does.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from loop.agents import prices
from loop.agents.base import Adapter, Facts
from loop.agents.output import as_float, as_int, as_str, brief, json_lines, json_object, last_line, said, sub
from loop.core import limits

DEFAULT_COMMAND = "codex exec --json --sandbox workspace-write --skip-git-repo-check -- {prompt}"
"""`exec` never asks for approval; the `workspace-write` sandbox lets it edit and run commands in
the workspace (and /tmp), not elsewhere, and keeps the network off. The prompt is an argv
element after `--` (stdin is /dev/null: `codex exec` waits for the end of a piped stdin)."""
BOXED_COMMAND = (
    "codex exec --json --dangerously-bypass-approvals-and-sandbox --skip-git-repo-check -- {prompt}"
)
"""Inside loopdeck's sandbox: Codex's own would nest in it, and fails to start."""
READ_ONLY = "Read-only file system"
NESTED = "bwrap: "
"""How a command fails when Codex's own sandbox cannot start (inside loopdeck's, as root)."""
SESSION_BYTES = 32 * 1024 * 1024
"""A session file is read this far at most (a long turn's tool outputs can be large)."""
STREAM_TYPES = frozenset(
    {
        "thread.started",
        "turn.started",
        "turn.completed",
        "turn.failed",
        "item.started",
        "item.updated",
        "item.completed",
    }
)


def session_file(thread_id: str, env: Mapping[str, str], now: datetime) -> Path | None:
    """The rollout file of `thread_id`: today's and yesterday's folders first (local dates, as
    Codex names them), then any."""
    home = Path(env.get("CODEX_HOME") or Path(env.get("HOME") or Path.home()) / ".codex")
    sessions = home / "sessions"
    if not thread_id or "/" in thread_id or not sessions.is_dir():
        return None
    pattern = f"rollout-*-{thread_id}.jsonl"
    local = now.astimezone()
    for day in (local, local - timedelta(days=1)):
        folder = sessions / f"{day:%Y}" / f"{day:%m}" / f"{day:%d}"
        found = sorted(folder.glob(pattern)) if folder.is_dir() else []
        if found:
            return found[-1]
    found = sorted(sessions.glob(f"*/*/*/{pattern}"))
    return found[-1] if found else None


def _session_lines(path: Path) -> Iterator[dict[str, Any]]:
    try:
        with open(path, "rb") as f:
            data = f.read(SESSION_BYTES)
    except OSError:
        return
    yield from json_lines(data.decode("utf-8", "replace"))


class Session:
    """What Codex's session file adds to the stream: model, limit reset, sandbox refusals."""

    def __init__(self) -> None:
        self.model: str | None = None
        self.resets_at: str | None = None
        self.refused: list[str] = []
        """The commands that failed on the read-only sandbox."""

    @classmethod
    def read(cls, path: Path | None) -> Session:
        session = cls()
        if path is None:
            return session
        calls: dict[str, str] = {}
        for line in _session_lines(path):
            payload = line.get("payload")
            if not isinstance(payload, dict):
                continue
            kind = payload.get("type")
            settings = payload.get("thread_settings")
            if isinstance(settings, dict) and as_str(settings.get("model")):
                session.model = settings["model"]
            elif line.get("type") == "turn_context" and as_str(payload.get("model")):
                session.model = payload["model"]
            if kind == "function_call":
                calls[str(payload.get("call_id"))] = _command_of(payload.get("arguments"))
            elif kind == "function_call_output":
                output = str(payload.get("output", ""))
                refused = READ_ONLY in output or f"\n{NESTED}" in output
                if refused and "exited with code 0\n" not in output:
                    session.refused.append(calls.get(str(payload.get("call_id")), "a command"))
            elif kind == "token_count":
                session.resets_at = _reset(payload.get("rate_limits")) or session.resets_at
        return session


def _outputs(output: str) -> Iterator[str]:
    """The output of every command Codex ran, from its JSON stream (`aggregated_output`)."""
    for obj in json_lines(output):
        item = obj.get("item")
        if obj.get("type") == "item.completed" and isinstance(item, dict):
            text = item.get("aggregated_output")
            if isinstance(text, str):
                yield text


def _command_of(arguments: Any) -> str:
    try:
        args = json.loads(arguments) if isinstance(arguments, str) else arguments
    except ValueError:
        return "a command"
    return brief(args, 60) if args else "a command"


def _reset(rate_limits: Any) -> str | None:
    """The reset of the exhausted window (`used_percent` 100), as ISO 8601."""
    if not isinstance(rate_limits, dict):
        return None
    for key in ("primary", "secondary"):
        window = rate_limits.get(key)
        if not isinstance(window, dict):
            continue
        used = as_float(window.get("used_percent"))
        epoch = as_int(window.get("resets_at"))
        if used is not None and used >= 100 and epoch:
            return datetime.fromtimestamp(epoch, UTC).isoformat()
    return None


def allow_hint(commands: Sequence[str]) -> str:
    shown = ", ".join(f"`{c}`" for c in commands[:3])
    return (
        f"Codex ran {shown} in a sandbox of its own that refused it ({READ_ONLY}, or its sandbox "
        "could not start inside loopdeck's): run it with `--agent codex` (`--sandbox workspace-write`, "
        "and inside loopdeck's sandbox none of Codex's own) or "
        '`--dangerously-bypass-approvals-and-sandbox`, or set `sandbox_mode = "workspace-write"` '
        "in ~/.codex/config.toml"
    )


class Codex(Adapter):
    name = "codex"
    label = "Codex CLI"
    programs = ("codex",)
    install = "npm install -g @openai/codex"
    default_command = DEFAULT_COMMAND
    boxed_command = BOXED_COMMAND

    def tool_output(self, output: str, cwd: Path, env: Mapping[str, str]) -> str | None:
        """The commands' output, decoded from the JSON lines that quote it."""
        found = list(_outputs(output))
        return "\n".join(found) if found else None

    def read(
        self, output: str, exit_code: int | None, now: datetime, env: Mapping[str, str] | None = None
    ) -> Facts:
        text: str | None = None
        failure: str | None = None
        errors: list[str] = []
        completed = False
        thread = ""
        tokens = {"input_tokens": 0, "output_tokens": 0, "cache_read_input_tokens": 0}
        refused: list[str] = []
        for event in json_lines(output):
            kind = event.get("type")
            item = sub(event, "item")
            if kind == "thread.started":
                thread = str(event.get("thread_id") or "")
            elif kind == "item.completed" and item.get("type") == "agent_message":
                text = as_str(item.get("text")) or text
            elif kind == "item.completed" and item.get("type") == "command_execution":
                code = as_int(item.get("exit_code"))
                if code and READ_ONLY in str(item.get("aggregated_output", "")):
                    refused.append(brief(item.get("command", "a command"), 60))
            elif kind == "turn.completed":
                completed = True
                usage = sub(event, "usage")
                cached = as_int(usage.get("cached_input_tokens")) or 0
                tokens["input_tokens"] += max(0, (as_int(usage.get("input_tokens")) or 0) - cached)
                tokens["cache_read_input_tokens"] += cached
                tokens["output_tokens"] += as_int(usage.get("output_tokens")) or 0
            elif kind == "turn.failed":
                error = event.get("error")
                failure = as_str(error.get("message")) if isinstance(error, dict) else None
                failure = failure or "the turn failed"
            elif kind == "error" and as_str(event.get("message")):
                errors.append(event["message"])
        session = Session.read(session_file(thread, env, now) if env is not None and thread else None)
        refused += [c for c in session.refused if c not in refused]
        failed = failure is not None or (exit_code not in (0, None) and not completed)
        error = failure or (errors[-1] if errors else None) or (last_line(output) if failed else None)
        limited = None
        if failed:
            words = "\n".join([*errors, failure or ""]) or output
            found = limits.usage_limit(words, None, now)
            if found is not None:
                reset = session.resets_at or found[1] or limits.retry_in(words, now)
                limited = (found[0], reset)
        spent = {k: v for k, v in tokens.items() if v}
        cost = prices.estimate(session.model, spent) if spent else None
        return Facts(
            agent=self.name,
            text=text,
            failed=failed,
            error=error if failed else None,
            tokens=spent,
            cost_usd=cost,
            estimated=cost is not None,
            model=session.model,
            limited=limited[0] if limited else None,
            resets_at=limited[1] if limited else None,
            denied=("exec_command",) if refused else (),
            denied_hint=allow_hint(refused) if refused else None,
            session_id=thread or None,
        )

    def live_line(self, line: str) -> str | None:
        obj = json_object(line)
        if obj is None:
            return None
        kind = obj.get("type")
        if kind == "error" and isinstance(obj.get("message"), str) and "sessionID" not in obj:
            return f"! {obj['message']}"
        if kind not in STREAM_TYPES:
            return None
        item = sub(obj, "item")
        what = item.get("type")
        if kind == "thread.started":
            return "● session started"
        if kind == "turn.completed":
            usage = sub(obj, "usage")
            total = sum(v for k, v in usage.items() if k in ("input_tokens", "output_tokens") and as_int(v))
            return f"■ done · {total:,} tokens"
        if kind == "turn.failed":
            error = obj.get("error")
            return f"■ failed: {error.get('message') if isinstance(error, dict) else 'the turn failed'}"
        if kind == "item.started" and what == "command_execution":
            return f"▸ shell {brief(item.get('command', ''))}"
        if kind != "item.completed":
            return ""
        if what == "agent_message":
            return said(str(item.get("text", ""))) or ""
        if what == "command_execution":
            code = as_int(item.get("exit_code"))
            return f"  exit {code}" if code else ""
        if what == "file_change":
            changes = item.get("changes")
            paths = ", ".join(str(c.get("path")) for c in changes or [] if isinstance(c, dict))
            return f"▸ edit {brief(paths or '?')}"
        if what == "mcp_tool_call":
            return f"▸ {item.get('server', '?')}.{item.get('tool', '?')}"
        if what == "web_search":
            return f"▸ web search {brief(item.get('query', ''))}"
        if what == "error":
            return f"! {item.get('message', '')}"
        return ""
