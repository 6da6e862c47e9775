"""One agent run: a child in its own process group, its output streamed to a log file.

The runner starts a fresh agent per iteration (seed 003 §4.4.2). The child gets its own process
group so that a timeout, a skip or the runner's own death takes the agent *and everything it
started* down with it; on Linux it is also told to die with the runner (PR_SET_PDEATHSIG). Its
output goes to `.claude/loopdeck/iterations/NNNN.log` as it comes, and only a bounded tail is
kept in memory, however much it prints.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shlex
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

DEFAULT_AGENT = "claude -p --output-format json --permission-mode acceptEdits --allowedTools Bash"
"""Print mode with no permission mode denies Bash, Edit and Write and still exits 0 (the denials
are only in the result's `permission_denials`): the agent could do none of its work. acceptEdits
lets it edit inside the workspace and `--allowedTools Bash` run commands, without
`bypassPermissions`, which Claude Code refuses as root unless IS_SANDBOX=1."""
DEFAULT_AGENT_ENV = {"CLAUDE_CODE_ENABLE_TODO_TOOLS": "1"}
"""Claude Code 2.1.332 offers its newer models the Task tools only with this set."""
RUNNER_ENV = {"LOOPDECK_DRIVER": "runner"}
"""Marks the runner's agent, so a Stop hook installed in the same project leaves it alone."""
TAIL_BYTES = 4 * 1024 * 1024
GRACE_S = 5.0


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def argv_for(command: str, prompt: str, prompt_file: Path) -> tuple[list[str], bool]:
    """The agent's argv, and whether the prompt goes on stdin (no `{prompt}` placeholder)."""
    argv = shlex.split(command)
    if not argv:
        raise ValueError("the agent command is empty")
    uses_stdin = True
    out = []
    for arg in argv:
        if "{prompt_file}" in arg:
            prompt_file.write_text(prompt, encoding="utf-8")
            arg = arg.replace("{prompt_file}", str(prompt_file))
            uses_stdin = False
        if "{prompt}" in arg:
            arg = arg.replace("{prompt}", prompt)
            uses_stdin = False
        out.append(arg)
    return out, uses_stdin


@dataclass
class Run:
    exit_code: int | None
    duration_s: float
    tail: bytes
    timed_out: bool = False
    interrupted: str | None = None
    """Why the runner ended the agent early (skip, complete, signal), if it did."""
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and self.interrupted is None and not self.error


def final_text(tail: bytes) -> str:
    """The agent's last words: the `result` of a `--output-format json` object, the last result
    event of stream-json, else the plain text it printed."""
    text = tail.decode("utf-8", "replace")
    lines = [line for line in text.splitlines() if line.strip()]
    for line in reversed(lines[-200:]):
        stripped = line.strip()
        if not stripped.startswith("{"):
            continue
        try:
            obj = json.loads(stripped)
        except ValueError:
            continue
        if isinstance(obj, dict) and obj.get("type") == "result" and isinstance(obj.get("result"), str):
            return str(obj["result"])
    whole = text.strip()
    if whole.startswith("{"):
        try:
            obj = json.loads(whole)
        except ValueError:
            pass
        else:
            if isinstance(obj, dict) and isinstance(obj.get("result"), str):
                return str(obj["result"])
    return text[-64 * 1024 :]


def run(
    command: str,
    prompt: str,
    cwd: Path,
    log_path: Path,
    timeout: float | None,
    interrupt: Callable[[], str | None],
    poll: float = 0.2,
    env: dict[str, str] | None = None,
) -> Run:
    """Run the agent to the end, or until `timeout`, or until `interrupt()` names a reason."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    base = dict(os.environ if env is None else env)
    if command == DEFAULT_AGENT:
        base = {**DEFAULT_AGENT_ENV, **base}
    env = {**base, **RUNNER_ENV}
    try:
        argv, uses_stdin = argv_for(command, prompt, log_path.with_suffix(".prompt.md"))
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            stdin=subprocess.PIPE if uses_stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,
            env=env,
        )
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else str(exc)
        return Run(None, 0.0, b"", error=f"cannot start the agent {command!r}: {reason}")
    tail: deque[bytes] = deque()
    size = [0]

    def pump() -> None:
        assert proc.stdout is not None
        with log_path.open("ab") as log:
            while chunk := os.read(proc.stdout.fileno(), 65536):
                log.write(chunk)
                log.flush()
                tail.append(chunk)
                size[0] += len(chunk)
                while size[0] > TAIL_BYTES and len(tail) > 1:
                    size[0] -= len(tail.popleft())

    def feed() -> None:
        assert proc.stdin is not None
        with contextlib.suppress(BrokenPipeError, OSError):
            proc.stdin.write(prompt.encode("utf-8"))
        with contextlib.suppress(OSError):
            proc.stdin.close()

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    if uses_stdin:
        threading.Thread(target=feed, daemon=True).start()
    timed_out = False
    interrupted: str | None = None
    while proc.poll() is None:
        if timeout is not None and time.monotonic() - start > timeout:
            timed_out = True
            stop_group(proc)
            break
        reason = interrupt()
        if reason:
            interrupted = reason
            stop_group(proc)
            break
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(poll)
    proc.wait()
    kill_group(proc.pid)  # whatever the agent left running in its group goes with it
    reader.join(timeout=5)
    return Run(proc.returncode, round(time.monotonic() - start, 3), b"".join(tail), timed_out, interrupted)


def stop_group(proc: subprocess.Popen[bytes], grace: float = GRACE_S) -> None:
    """SIGTERM the agent's process group, SIGKILL it after `grace` seconds."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        kill_group(proc.pid)
        proc.wait()


def kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
