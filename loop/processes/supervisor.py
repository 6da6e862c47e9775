"""No orphans, even when the runner is killed with SIGKILL, and none that left the group.

The runner starts each agent (and each verification command) in a process group of its own,
so a timeout or a signal can kill it whole. But a runner killed with SIGKILL runs no cleanup:
its agent, and whatever the agent started, would work on unsupervised, racing the next
runner over the same files. `PR_SET_PDEATHSIG` covers only the direct child, and only on Linux.
And a process group misses what left it: `setsid sleep 1000 &`, a double-forked daemon; those
survive even a turn that ended normally.

So the runner starts one small supervisor process (`python -m loop.processes.supervisor RUN_ID`) next to
it, in a session of its own (a signal to the runner's group does not reach it), holding the
read end of a pipe whose only writer is the runner. Each child's pid (= its process group) is
written into that pipe as it starts; when the runner lets it go it writes `-` (or
`-PID` for one of several). When the pipe closes, however the runner ended, the kernel tells
the supervisor (end of file), and it kills every group still registered, every descendant of
those children, and every process whose environment carries this run's marker (`loop.processes.sweep`:
a `setsid` child, a daemon), then exits; a runner that ends cleanly sweeps its run itself and
says so last (`SWEPT`), which spares that scan. This works the same on Linux and macOS, needs
no polling and costs one idle process per runner.

While the runner lives, it does the same itself at the end of every child's run (`release`):
the child's marked processes, and (on Linux, where the runner is a child subreaper) the orphans
reparented to it during that run, are killed before the next turn starts.

The parallel workers register in the child before exec (`preexec`), so a runner killed between
fork and the registration cannot leave an unregistered worker behind: the child still holds the
pipe's write end until it execs, so the supervisor cannot see the end of file before the pid.
The runner's agent and checks are started without a `preexec_fn` (Python then spawns them with
vfork, not a fork of the whole runner) and registered by the runner right after (`register`):
one killed in between still leaves a child whose environment carries the run's marker, which
the supervisor kills, with its descendants, when the pipe closes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Mapping

from loop.processes import sweep


class Supervisor:
    """The runner's side: start the supervisor, mark and register children, let them go (and
    kill what they left behind)."""

    def __init__(self) -> None:
        self.run_id = sweep.new_run_id()
        """This run's marker: its children's environments carry `<run_id>.<n>`."""
        self.serial = 0
        self._tagging = threading.Lock()
        self.open: set[str] = set()
        """Markers given to children not released yet."""
        self.before: set[int] = set()
        """This process's children when the first of the open markers was given: anything
        reparented to it after that is an orphan of those children."""
        read_end, write_end = os.pipe()  # both close-on-exec: no agent inherits the writer
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-m", "loop.processes.supervisor", self.run_id],
            stdin=read_end,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )
        os.close(read_end)
        self.fd: int | None = write_end
        self.was_subreaper = sweep.subreaper(True)
        """None: no subreaper here (not Linux), nothing to restore."""

    def tag(self, env: Mapping[str, str] | None = None) -> tuple[dict[str, str], str]:
        """The environment for the next child (`env`, default this process's, with a marker
        of its own), and that marker."""
        with self._tagging:  # the merge train's checks start from several threads
            if not self.open:
                self.before = sweep.children(os.getpid())
            self.serial += 1
            token = f"{self.run_id}.{self.serial}"
            self.open.add(token)
        return sweep.marked_env(os.environ if env is None else env, token), token

    def env(self, env: Mapping[str, str] | None = None) -> dict[str, str]:
        return self.tag(env)[0]

    def register_self(self) -> None:  # pragma: no cover - runs in the child, before exec
        """Called between fork and exec: record this process (its group leader) as watched."""
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.write(self.fd, f"+{os.getpid()}\n".encode())

    def register(self, pid: int) -> None:
        """Record a child (its group leader) as watched from this side, right after it started:
        how the runner starts its agent and its checks, without a `preexec_fn` (which forces
        Python's slow fork of the whole runner; without one the child is spawned with vfork, ~2 ms
        less a turn). A runner killed before this line is written leaves the child unregistered,
        but not unfound: its environment carries this run's marker, and the supervisor kills
        every marked process and its descendants when the pipe closes."""
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.write(self.fd, f"+{pid}\n".encode())

    def preexec(self, then: Callable[[], None] | None = None) -> Callable[[], None]:
        """A `preexec_fn` that registers the child, then runs `then`."""

        def hook() -> None:  # pragma: no cover - runs in the child
            self.register_self()
            if then is not None:
                then()

        return hook

    def release(self, pid: int | None = None, token: str | None = None, keep: Iterable[int] = ()) -> None:
        """A child's run is over and its group killed: kill what it left behind, then forget
        its pid (a pid is reused later; the supervisor must not kill a stranger).

        Without `token`: every open marker (the runner's one child at a time), and the orphans
        reparented to this process since the first was given. With `token` (one of several
        children running, `keep` the others): that child's marked processes only."""
        if token is not None:
            self.open.discard(token)
            sweep.kill(sweep.of_token(token), keep=self._keep(keep), subtree=self.was_subreaper is not None)
            sweep.reap(self._keep(keep))
        elif self.open:
            tokens = set(self.open)
            self.open.clear()
            orphans = sweep.children(os.getpid()) - self.before
            sweep.kill(
                lambda parts: any(p in tokens for p in parts),
                orphans,
                self._keep(keep),
                subtree=self.was_subreaper is not None,  # nothing it started left its subtree
            )
        forget = f"-{pid}\n".encode() if pid is not None else b"-\n" if token is None else b""
        if self.fd is not None and forget:
            with contextlib.suppress(OSError):
                os.write(self.fd, forget)

    def _keep(self, keep: Iterable[int]) -> set[int]:
        return {self.proc.pid, *keep}

    def close(self, keep: Iterable[int] = ()) -> None:
        """The runner is done: kill what is left of this run (the supervisor does it again,
        and would have had the runner died), and let the supervisor exit."""
        if self.open:
            self.release(keep=keep)
        sweep.kill(sweep.of_run(self.run_id), keep=self._keep(keep))
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.write(self.fd, SWEPT)  # the sweep above was the supervisor's: not done twice
                os.close(self.fd)
            self.fd = None
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)
        if self.was_subreaper is False:
            sweep.subreaper(False)
            self.was_subreaper = None


SWEPT = b"=\n"
"""The runner's last word: it ended cleanly and swept every process of its run itself, so the
supervisor, at the end of file, need not scan the machine's processes again (which was most of
the time a finished run waited for it). A runner that dies never says it: the sweep is done."""


def kill_all(pids: set[int]) -> None:
    """Kill the groups led by `pids` and every descendant of theirs."""
    tree = sweep.descendants(pids)  # before the kill: a dead parent's children are reparented
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
    for pid in tree:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def main(argv: list[str] | None = None) -> int:  # pragma: no cover - a process of its own
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # it dies when its work is done, not before
    args = sys.argv[1:] if argv is None else argv
    run_id = args[0] if args else None
    watched: set[int] = set()
    swept = False
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
            if line == SWEPT.strip():
                swept = True
            elif line == b"-":
                watched.clear()
            elif line.startswith(b"-") and line[1:].isdigit():
                watched.discard(int(line[1:]))
            elif line.startswith(b"+") and line[1:].isdigit():
                watched.add(int(line[1:]))
                swept = False
    if watched:
        kill_all(watched)
    if run_id and not swept:
        sweep.kill(sweep.of_run(run_id))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
