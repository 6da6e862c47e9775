"""One agent run: a child in its own process group, its output streamed to a log file.

The runner starts a fresh agent per iteration. The child gets its own process
group so that a timeout, a skip or the runner's own death takes the agent *and everything it
started* down with it; the runner's supervisor (`loop.processes.supervisor`) kills it if the
runner dies (an agent run without one asks Linux for PR_SET_PDEATHSIG instead). Its output
goes to `.claude/loopdeck/iterations/NNNN.log` as it comes, and only a bounded tail is kept in
memory, however much it prints.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import shlex
import signal
import subprocess
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from loop.agents.claude import DEFAULT_COMMAND, DEFAULT_ENV
from loop.agents.output import json_lines
from loop.core.model import RUNNER_ENV
from loop.core.redact import LineRedactor, redact
from loop.processes.sandbox import Spec, Status, take_back, unmade, wrap
from loop.store.safeopen import UnsafePath, open_append, write_bytes

DEFAULT_AGENT = DEFAULT_COMMAND
"""Claude Code in print mode, allowed to edit and run commands in the workspace (why: see
`loop.agents.claude.DEFAULT_COMMAND`; the adapters hold every CLI's default command)."""
DEFAULT_AGENT_ENV = DEFAULT_ENV
TAIL_BYTES = 4 * 1024 * 1024
GRACE_S = 5.0
LOG_LINE_BYTES = 1024 * 1024
"""A line longer than this is written to the log (redacted) without waiting for its end."""


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def child_preexec(
    preexec: Callable[[], None] | None, register: Callable[[int], None] | None
) -> Callable[[], None] | None:
    """The `preexec_fn` of a child that must die with the runner. With a supervisor to
    `register` it (the runner), none: nothing runs in the child, so Python spawns it with vfork
    instead of forking the whole runner and running Python between fork and exec (~2 ms a
    start); the supervisor's pipe and the run's marker kill it with the runner. Without one (a
    caller on its own), the child asks the kernel for SIGKILL when its parent dies
    (PR_SET_PDEATHSIG), or runs the `preexec` given."""
    if preexec is not None:
        return preexec
    if register is not None:
        return None
    return _die_with_parent


PLACEHOLDERS = ("{prompt}", "{prompt_file}")
SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "csh", "tcsh", "busybox"})
INTERPRETERS = frozenset({"python", "python3", "node", "perl", "ruby", "php", "deno", "bun"})
"""Programs whose `-c`/`-e` argument is code: a placeholder there would run the task's text."""


class AgentCommandRefused(ValueError):
    """An `--agent` template that would put the prompt (task titles, agent-written text) where
    a shell or an interpreter reads it as code."""


def _code_option(arg: str, program: str) -> bool:
    """Is `arg` the option after which `program` takes its code (`-c`, `-lc`, `-e`)?"""
    if not arg.startswith("-") or arg.startswith("--"):
        return False
    letters = arg[1:]
    if program in SHELLS:
        return "c" in letters
    return letters in ("c", "e", "-eval", "p") or letters.endswith(("c", "e"))


def check_template(command: str) -> list[str]:
    """The template's words, or AgentCommandRefused when `{prompt}`/`{prompt_file}` would be
    read as code: inside the command string of `sh -c` (any known shell, also after `env`,
    `timeout`…), or of `python -c`/`node -e`, or embedded with other text in the arguments that
    follow it. A placeholder as a whole argument after the code (`sh -c '… "$1"' sh {prompt}`)
    is a plain argument and fine. Run it at startup so a bad template fails before the loop."""
    argv = shlex.split(command)
    if not argv:
        raise AgentCommandRefused("the agent command is empty")
    for i, word in enumerate(argv):
        program = os.path.basename(word)
        if program not in SHELLS and program not in INTERPRETERS:
            continue
        for j in range(i + 1, len(argv)):
            if not _code_option(argv[j], program):
                continue
            code = argv[j + 1] if j + 1 < len(argv) else ""
            rest = argv[j + 2 :]
            for placeholder in PLACEHOLDERS:
                embedded = [a for a in rest if placeholder in a and a != placeholder]
                if placeholder in code or embedded:
                    raise AgentCommandRefused(
                        f"the agent command {command!r} puts {placeholder} inside the code that "
                        f"{program} {argv[j]} runs, so a task title such as `x$(touch y)` would "
                        f"run as a command; pass it as a separate argument instead "
                        f"(e.g. {program} -c '… \"$1\"' {program} {placeholder}) or leave it out "
                        "and read the prompt from stdin"
                    )
            break
    return argv


def argv_for(command: str, prompt: str, prompt_file: Path) -> tuple[list[str], bool]:
    """The agent's argv, and whether the prompt goes on stdin (no `{prompt}` placeholder).

    `{prompt}` and `{prompt_file}` are argv values, never shell text: `check_template` refuses
    a template that would hand them to a shell. The prompt file is written without following
    a symlink in its place. The prompt is redacted, wherever it goes (a file kept with the
    logs, an argv any local user can list): what it is built from (the loop's prompt, answers,
    notes) is kept redacted, and so the agent is told the same in every form."""
    argv = check_template(command)
    prompt = redact(prompt)
    uses_stdin = True
    out = []
    for arg in argv:
        if "{prompt_file}" in arg:
            write_bytes(prompt_file, prompt.encode("utf-8", "replace"))
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
    """The agent's last words: its final message as its CLI prints it (Claude Code's `result`,
    Codex's last `agent_message`, Gemini's response, OpenCode's last text part: the adapter of
    whichever CLI printed the output, `loop.agents.detect`), else the plain text it printed."""
    text = tail.decode("utf-8", "replace")
    from loop import agents
    from loop.core.timeutil import utcnow

    adapter = agents.detect(text)
    if adapter.name not in ("claude", "text"):
        said = adapter.read(text, 0, utcnow()).text
        if said is not None:
            return said
    lines = [line for line in text.splitlines() if line.strip()]
    for obj in reversed(list(json_lines("\n".join(lines[-200:])))):
        if obj.get("type") == "result" and isinstance(obj.get("result"), str):
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
    preexec: Callable[[], None] | None = None,
    register: Callable[[int], None] | None = None,
    sandbox: tuple[Spec, Status] | None = None,
) -> Run:
    """Run the agent to the end, or until `timeout`, or until `interrupt()` names a reason.

    `register`: the runner's supervisor, told the agent's pid the moment it started (see
    `child_preexec`); else `preexec` runs in the child before exec. `sandbox`: the turn runs
    in it (`loop.processes.sandbox.wrap`): its argv and environment wrapped after they are
    made."""
    start = time.monotonic()
    log: BinaryIO | None = None
    base = dict(os.environ if env is None else env)
    if command == DEFAULT_AGENT:
        base = {**DEFAULT_AGENT_ENV, **base}
    env = {**base, **RUNNER_ENV}
    try:
        log = open_append(log_path)  # its folder made and checked; a planted symlink fails the start
        argv, uses_stdin = argv_for(command, prompt, log_path.with_suffix(".prompt.md"))
        absent: list[Path] = []
        if sandbox is not None:
            spec, status = sandbox
            own = DEFAULT_AGENT_ENV if command == DEFAULT_AGENT else {}
            argv, env = wrap(argv, spec, env, status, {**own, **RUNNER_ENV})
            absent = unmade(spec, env) if status.on else []
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            stdin=subprocess.PIPE if uses_stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
            preexec_fn=child_preexec(preexec, register),
        )
        if register is not None:
            register(proc.pid)
    except (OSError, ValueError, UnsafePath) as exc:
        if log is not None:
            log.close()
        why = str(exc.strerror) if isinstance(exc, OSError) and exc.strerror else str(exc)
        return Run(None, 0.0, b"", error=f"cannot start the agent {command!r}: {why}")
    assert log is not None and proc.stdout is not None
    streams = _Streams(proc, log, redact(prompt).encode("utf-8") if uses_stdin else None)
    timed_out = False
    interrupted: str | None = None
    ended = _exit_signal(proc.pid)
    try:
        look = start  # when the timeout and `interrupt()` are looked at next
        while proc.poll() is None:
            now = time.monotonic()
            if now >= look:
                if timeout is not None and now - start > timeout:
                    timed_out = True
                    _stop(proc, streams, ended)
                    break
                reason = interrupt()
                if reason:
                    interrupted = reason
                    _stop(proc, streams, ended)
                    break
                look = now + poll
            streams.step(ended, max(0.0, look - now))  # woken by output, or the moment it ends
    finally:
        if ended is not None:
            os.close(ended)
    proc.wait()
    kill_group(proc.pid)  # whatever the agent left running in its group goes with it
    streams.drain(READ_AFTER_END_S)
    tail = streams.tail()
    if absent and sandbox is not None:
        taken = take_back(sandbox[0], absent)
        if taken:
            tail += ("\n" + "\n".join(taken) + "\n").encode()
            with contextlib.suppress(OSError), open_append(log_path) as again:
                again.write(redact("\n".join(taken) + "\n").encode())
    return Run(proc.returncode, round(time.monotonic() - start, 3), tail, timed_out, interrupted)


READ_AFTER_END_S = 5.0
"""How long the output is read after the agent ended and its group was killed: a process that
left the group (`setsid`) may hold it open; the supervisor kills that one."""


class _Streams:
    """The agent's pipes, served from the runner's own thread: the prompt written as the pipe
    takes it, the output streamed to the log a line at a time, redacted (a secret split across
    two reads is still whole in a line, a private key across two is dropped to its end), and the
    raw tail kept for the runner to read. One `select` serves them and the agent's end: no
    thread to start (and to hand the interpreter to) per turn."""

    def __init__(self, proc: subprocess.Popen[bytes], log: BinaryIO, prompt: bytes | None) -> None:
        assert proc.stdout is not None
        self.proc = proc
        self.log = log
        self.out: int | None = proc.stdout.fileno()
        self.lines = LineRedactor(LOG_LINE_BYTES)
        self.chunks: deque[bytes] = deque()
        self.size = 0
        self.prompt = memoryview(prompt) if prompt is not None else None
        self.sent = 0
        if self.prompt is not None:
            assert proc.stdin is not None
            os.set_blocking(proc.stdin.fileno(), False)
            self._send()  # a prompt that fits in the pipe is written at once

    def step(self, ended: int | None, wait: float) -> None:
        """Wait at most `wait` seconds for output, room for the prompt or the agent's end
        (`ended`, its pidfd); serve what is ready."""
        readable = [fd for fd in (self.out, ended) if fd is not None]
        writable = [self.proc.stdin.fileno()] if self.prompt is not None and self.proc.stdin else []
        if self.out is None and ended is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(wait)  # nothing to select on: the portable wait
            return
        ready, room, _ = select.select(readable, writable, [], wait)
        if room:
            self._send()
        if self.out is not None and self.out in ready:
            self._read()

    def drain(self, seconds: float) -> None:
        """After the agent's end: the rest of its output, for at most `seconds`; then the log
        is finished and closed."""
        self._close_stdin()
        deadline = time.monotonic() + seconds
        while self.out is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.out], [], [], left)[0]:
                break
            self._read()
        with contextlib.suppress(OSError), self.log:
            self.log.write(self.lines.close())
        with contextlib.suppress(OSError):
            if self.proc.stdout is not None:
                self.proc.stdout.close()
        self.out = None

    def tail(self) -> bytes:
        return b"".join(self.chunks)

    def _read(self) -> None:
        assert self.out is not None
        try:
            chunk = os.read(self.out, 65536)
        except OSError:
            chunk = b""
        if not chunk:
            self.out = None  # end of output (the agent, and all that held the pipe, closed it)
            return
        done = self.lines.feed(chunk)
        if done:
            with contextlib.suppress(OSError):
                self.log.write(done)
                self.log.flush()
        self.chunks.append(chunk)
        self.size += len(chunk)
        while self.size > TAIL_BYTES and len(self.chunks) > 1:
            self.size -= len(self.chunks.popleft())

    def _send(self) -> None:
        """Write what the pipe takes of the prompt now; the stdin is closed once it is all in
        (or the agent closed its end)."""
        assert self.prompt is not None and self.proc.stdin is not None
        try:
            while self.sent < len(self.prompt):
                self.sent += os.write(self.proc.stdin.fileno(), self.prompt[self.sent :])
        except BlockingIOError:
            return
        except OSError:  # the agent does not read its stdin (a broken pipe): nothing more to say
            pass
        self._close_stdin()

    def _close_stdin(self) -> None:
        self.prompt = None
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()


def _stop(
    proc: subprocess.Popen[bytes], streams: _Streams, ended: int | None, grace: float = GRACE_S
) -> None:
    """`stop_group`, reading the output meanwhile: an agent that prints as it shuts down is not
    blocked on a full pipe until its SIGKILL."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while proc.poll() is None:
        left = deadline - time.monotonic()
        if left <= 0:
            kill_group(proc.pid)
            proc.wait()
            return
        streams.step(ended, min(left, 0.05))


def _exit_signal(pid: int) -> int | None:
    """A descriptor that becomes readable when the child `pid` ends (Linux's pidfd), None where
    there is none. `Popen.wait(timeout)` sleeps in growing steps (up to 50 ms) between looks:
    with a fast agent, that was a third of the runner's time per iteration spent after the
    agent had already ended. The child is not reaped before `proc.wait`, so its pid is its own."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        return int(opener(pid))
    except OSError:
        return None


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
