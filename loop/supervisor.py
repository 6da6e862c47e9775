"""No orphans, even when the runner is killed with SIGKILL.

The runner starts each agent (and each verification command) in a process group of its own,
so a timeout or a signal can kill it whole. But a runner killed with SIGKILL runs no cleanup:
its agent, and whatever the agent started, would work on unsupervised, racing the next
runner over the same files. `PR_SET_PDEATHSIG` covers only the direct child, and only on Linux.

So the runner starts one small supervisor process (`python -m loop.supervisor`) next to it,
in a session of its own (a signal to the runner's group does not reach it), holding the read
end of a pipe whose only writer is the runner. Each agent, between fork and exec, writes its
pid (= its process group) into that pipe; when the runner lets the agent go it writes `-`.
When the pipe closes, however the runner ended, the kernel tells the supervisor (end of
file), and it kills every group still registered and, found with psutil, every descendant
of those agents that left its group (a `setsid` child), then exits. This works the same on
Linux and macOS, needs no polling and costs one idle process per runner.

Registration happens in the child before exec, so a runner killed between fork and the
registration cannot leave an unregistered agent behind: the child still holds the pipe's
write end until it execs, so the supervisor cannot see the end of file before the pid.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable


class Supervisor:
    """The runner's side: start the supervisor, register children, let them go."""

    def __init__(self) -> None:
        read_end, write_end = os.pipe()  # both close-on-exec: no agent inherits the writer
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "loop.supervisor"],
            stdin=read_end,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )
        os.close(read_end)
        self.fd: int | None = write_end

    def register_self(self) -> None:  # pragma: no cover - runs in the child, before exec
        """Called between fork and exec: record this process (its group leader) as watched."""
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.write(self.fd, f"+{os.getpid()}\n".encode())

    def preexec(self, then: Callable[[], None] | None = None) -> Callable[[], None]:
        """A `preexec_fn` that registers the child, then runs `then`."""

        def hook() -> None:  # pragma: no cover - runs in the child
            self.register_self()
            if then is not None:
                then()

        return hook

    def release(self) -> None:
        """The child run is over and its group killed: forget every registered pid (a pid is
        reused later; the supervisor must not kill a stranger)."""
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.write(self.fd, b"-\n")

    def close(self) -> None:
        """The runner is done: the supervisor kills what is left and exits."""
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)


def _descendants(pids: set[int]) -> list[int]:
    import psutil

    found: list[int] = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            found.extend(child.pid for child in psutil.Process(pid).children(recursive=True))
    return found


def kill_all(pids: set[int]) -> None:
    """Kill the groups led by `pids` and every descendant of theirs."""
    tree = _descendants(pids)  # before the kill: a dead parent's children are reparented
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
    for pid in tree:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def main() -> int:  # pragma: no cover - a process of its own, tested through the runner
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # it dies when its work is done, not before
    watched: set[int] = set()
    pending = b""
    while True:
        try:
            chunk = os.read(0, 4096)
        except InterruptedError:
            continue
        if not chunk:
            break
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            if line == b"-":
                watched.clear()
            elif line.startswith(b"+") and line[1:].isdigit():
                watched.add(int(line[1:]))
    if watched:
        kill_all(watched)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
