"""What a workspace's loop is doing now, for resumption: one word and the facts behind it.

`classify` is pure: it takes the state (or the reason it could not be read) and whether its
driver lives, so every case is tested without processes. `driver_alive` is the one question
about the machine, asked with psutil because a pid alone proves nothing: the system reuses
pids, so a dead runner's pid may now be someone's editor. A driver counts as alive only when
the process at that pid runs loopdeck's runner (`loopdeck run`, `-m loop.cli … run`) or, for a
loop driven by the Stop hook, a Claude Code session (the hook records its parent, the
session's process).

The kinds:

* `none`: no loop in the workspace (a finished one is in the archive);
* `live`: running, its driver alive;
* `gone`: running (or initializing), its driver gone: a crashed runner, a closed session, a
  runner loop that names no runner (its runner killed before it took the loop);
* `paused`: paused by a person or a signal;
* `waiting`: paused for a reason that names what it waits for (an escalation, the agent's
  question, a usage limit);
* `stopping`: left in `stopping` by another tool;
* `ended`: completed, stopped or failed, still in place;
* `corrupt`: the state file cannot be read.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass

from loop.core.model import LoopState
from loop.core.policy import named
from loop.store.paths import Workspace
from loop.store.proc import alive
from loop.store.safeopen import make_parents, read_regular, write_bytes
from loop.store.state import StateError, StateStore

KINDS = ("none", "live", "gone", "paused", "waiting", "stopping", "ended", "corrupt")


@dataclass(frozen=True)
class Classification:
    kind: str
    state: LoopState | None = None
    driver_alive: bool | None = None
    """None: no driver recorded (a hook loop no session has stopped in since)."""
    error: str | None = None
    """For `corrupt`: the file, line and problem."""

    @property
    def of(self) -> str:
        """`3/10`: the iteration, out of the limit when there is one."""
        state = self.state
        if state is None:
            return "?"
        return f"{state.iteration}/{state.max_iterations}" if state.max_iterations else str(state.iteration)

    @property
    def waiting_reason(self) -> str:
        waiting = (self.state.waiting_for or {}) if self.state else {}
        kind = str(waiting.get("kind", ""))
        reason = str(waiting.get("reason", ""))
        words = {
            "escalation": "Escalated",
            "question": "The agent asked a question",
            "usage-limit": "Waiting for a usage limit to reset",
            "pause": "Paused",
        }
        text = words.get(kind, "Waiting")
        if kind == "usage-limit" and waiting.get("until"):
            text += f" (until {waiting['until']})"
        return f"{text}: {reason}" if reason else text

    @property
    def question(self) -> str | None:
        """What `loopdeck resume` asks a person, or None when there is nothing to resume."""
        if self.kind == "gone":
            return f"Found in-progress loop (iteration {self.of}). Resume? [Y/n]"
        if self.kind == "paused":
            return f"Found paused loop. Resume from iteration {self.of}? [Y/n]"
        if self.kind == "waiting":
            return f"{self.waiting_reason}\nResume the loop (iteration {self.of})? [Y/n]"
        if self.kind == "stopping":
            return "Loop was stopping. Mark complete and show summary? [Y/n]"
        if self.kind == "corrupt":
            return f"The loop's state file is corrupt ({self.error}). Recover it? [Y/n]"
        return None


def classify(state: LoopState | None, driver_alive: bool | None, error: str | None = None) -> Classification:
    """The workspace's kind, from its state and whether its driver lives."""
    if error is not None:
        return Classification("corrupt", None, None, error)
    if state is None:
        return Classification("none")
    status = state.status
    if status in ("completed", "stopped", "failed"):
        return Classification("ended", state, driver_alive)
    if status == "stopping":
        return Classification("stopping", state, driver_alive)
    if status == "paused":
        kind = "paused" if state.waiting_kind in (None, "pause") else "waiting"
        return Classification(kind, state, driver_alive)
    # running or initializing: a usage-limit wait keeps the status running, the runner sleeping
    if driver_alive is False or (driver_alive is None and not named(state.driver).in_session):
        # A runner loop names its runner's pid from the moment the runner takes it; with none
        # named, nobody drives it (resuming clears the dead runner's pid, and the runner it
        # started may have been killed before it took the loop).
        return Classification("gone", state, False)
    if state.waiting_kind == "usage-limit" and driver_alive is None:
        return Classification("waiting", state, driver_alive)
    return Classification("live", state, driver_alive)


SLACK_S = 1.0
"""Clock slack between a process's start time and a file's modification time."""


def driver_alive(state: LoopState, written_at: float | None = None) -> bool | None:
    """Does the process the state names still drive the loop? None when none is named.
    `written_at`: when the state file was last written (its mtime)."""
    if state.pid is None or state.pid <= 0:
        return None
    return is_driver(state.pid, state.driver, written_at)


def is_driver(pid: int, driver: str | None, written_at: float | None = None) -> bool:
    """Is `pid` alive and still the process that drives the loop, not some other program the
    pid was given to since? Either its command line is a driver's (`looks_like_driver`), or it
    started before the state naming it was last written: a reused pid belongs to a process
    started after its previous owner died, so after that owner's last write. A zombie counts as
    gone."""
    import psutil  # ~20 ms (`-X importtime`): the Stop hook imports this module, never asks this

    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        started = proc.create_time()
        argv = proc.cmdline()
        name = proc.name()
    except psutil.AccessDenied:
        return True  # alive, someone else's: never take it for gone
    except psutil.Error:
        return False
    if looks_like_driver(argv, name, driver):
        return True
    return written_at is not None and started <= written_at + SLACK_S


def looks_like_driver(argv: list[str], name: str, driver: str | None) -> bool:
    """The command-line test behind `is_driver`, pure for tests."""
    words = [os.path.basename(arg.rstrip("/")) for arg in argv]  # not Path: it interns every part
    if not named(driver).in_session:
        ours = any(w.startswith("loopdeck") for w in words) or ("-m" in argv and "loop.cli" in argv)
        return ours and "run" in argv
    # a hook loop: its Claude Code session (a `claude` binary, or node running its cli)
    return "claude" in name.lower() or any("claude" in arg.lower() for arg in argv[:3])


def state_written_at(ws: Workspace) -> float | None:
    try:
        return ws.state.stat().st_mtime
    except OSError:
        return None


def read(ws: Workspace) -> Classification:
    """Classify a workspace from its files and processes."""
    try:
        state = StateStore(ws).read()
    except StateError as exc:
        return classify(None, None, str(exc))
    if state is None:
        return classify(None, None)
    return classify(state, driver_alive(state, state_written_at(ws)))


STOP_WAITS = "stop-waits"
"""The file (in `.claude/loopdeck/`) a Stop writes while it waits for a person's answer: its
pid and until when. A command sent meanwhile is taken by that Stop at once."""


@contextlib.contextmanager
def stop_waits(ws: Workspace, until: float) -> Iterator[None]:
    """Mark, while the block runs, that this process (a Stop) waits for a person's command
    until `until` (epoch seconds). Best effort: a marker that cannot be written only makes
    `loopdeck answer` say the answer waits for the next Stop."""
    path = ws.private_dir / STOP_WAITS
    with contextlib.suppress(OSError):
        make_parents(path)
        write_bytes(path, f"{os.getpid()} {until:.3f}\n".encode())
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            path.unlink()


def stop_waiting(ws: Workspace, now: float | None = None) -> bool:
    """Does a Stop wait for a person's command right now (`stop_waits`): its process alive
    and its wait not over?"""
    try:
        pid_text, until_text = read_regular(ws.private_dir / STOP_WAITS, 64).decode().split()
        pid, until = int(pid_text), float(until_text)
    except (OSError, ValueError, UnicodeDecodeError):
        return False
    if (now if now is not None else time.time()) >= until or pid <= 0:
        return False
    return bool(alive(pid))
