"""The processes of `run --workers`: start, watch and stop them, and nothing else.

Every worker (and every audit) is a child in its own process group, told to die with the
runner (PR_SET_PDEATHSIG) and registered with a supervisor (`loop.supervisor`), its
environment marked (`loop.sweep`), so a stop, a skip, a replacement, the end of its turn or the
runner's own end (SIGKILL included) takes the worker *and everything it started* down with it,
`setsid` children and daemons included. Output goes straight to a log file (no reader
thread per worker); the driver reads its tail when the process ends, and the file's growth is
what "the worker said something" means. Argv only: no task or user text reaches a shell.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from loop import agent
from loop.model import RUNNER_ENV
from loop.safeopen import make_parents, open_append, open_regular, write_bytes
from loop.supervisor import Supervisor

TAIL_BYTES = 256 * 1024
MARK_BYTES = 8 * 1024 * 1024


@dataclass
class Proc:
    name: str
    """The worker's name (an audit runs under its worker's name, `role` "audit")."""
    role: str
    popen: subprocess.Popen[bytes]
    log: Path
    started: float
    size: int = 0
    token: str = ""
    """The marker in its environment: what it leaves behind carries it."""


@dataclass(frozen=True)
class Ended:
    name: str
    role: str
    exit_code: int | None
    duration_s: float
    tail: bytes
    timed_out: bool = False
    error: str | None = None


@dataclass
class Pool:
    """The running processes, by worker name (at most one each: its turn, or its audit)."""

    procs: dict[str, Proc] = field(default_factory=dict)
    failed: list[Ended] = field(default_factory=list)
    """Processes that could not start: reported by the next `poll` as ended."""
    supervisor: Supervisor | None = None
    """Started with the first process, closed by `stop_all`: kills what the processes leave
    behind, and all of it if the runner dies."""

    def start(
        self,
        name: str,
        role: str,
        argv: list[str],
        stdin_text: str | None,
        cwd: Path,
        log: Path,
        env: dict[str, str] | None = None,
    ) -> None:
        make_parents(log)  # inside .claude/, never through a symlink
        stdin: int | object = subprocess.DEVNULL
        prompt_in = None
        if stdin_text is not None:
            feed = log.with_suffix(".stdin")
            write_bytes(feed, stdin_text.encode("utf-8"))
            prompt_in = open_regular(feed)
            stdin = prompt_in
        if self.supervisor is None:
            self.supervisor = Supervisor()
        marked, token = self.supervisor.tag(os.environ if env is None else env)
        env = {**marked, **RUNNER_ENV}  # installed hooks stay out
        try:
            with open_append(log) as out:
                popen = subprocess.Popen(
                    argv,
                    cwd=cwd,
                    stdin=stdin,  # type: ignore[arg-type]
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    preexec_fn=self.supervisor.preexec(agent._die_with_parent),
                    env=env,
                )
        except OSError as exc:
            self.supervisor.release(token=token, keep={p.popen.pid for p in self.procs.values()})
            why = f"cannot start {argv[0]!r}: {exc.strerror}"
            self.failed.append(Ended(name, role, None, 0.0, why.encode(), error=why))
            return
        finally:
            if prompt_in is not None:
                prompt_in.close()
        self.procs[name] = Proc(name, role, popen, log, time.monotonic(), token=token)

    def running(self) -> list[str]:
        return list(self.procs)

    def poll(self, timeout: float | None = None) -> list[Ended]:
        """The processes that ended since the last call (and those past `timeout`, ended)."""
        ended, self.failed = list(self.failed), []
        now = time.monotonic()
        for name, proc in list(self.procs.items()):
            code = proc.popen.poll()
            timed_out = False
            if code is None and timeout is not None and now - proc.started > timeout:
                self._stop(proc)
                code, timed_out = proc.popen.returncode, True
            if code is None:
                continue
            agent.kill_group(proc.popen.pid)  # what it left running in its group goes too
            del self.procs[name]
            self._release(proc)  # and what left its group (`setsid`, a daemon)
            ended.append(
                Ended(name, proc.role, code, round(now - proc.started, 3), _tail(proc.log), timed_out)
            )
        return ended

    def grew(self) -> bool:
        """Whether any running process wrote output since the last call."""
        grew = False
        for proc in self.procs.values():
            with contextlib.suppress(OSError):
                size = proc.log.stat().st_size
                if size > proc.size:
                    proc.size = size
                    grew = True
        return grew

    def stop(self, name: str) -> None:
        proc = self.procs.pop(name, None)
        if proc is not None:
            self._stop(proc)
            self._release(proc)

    def stop_all(self) -> None:
        """Stop every process and kill whatever any of them left (the supervisor goes too; the
        next `start` brings a new one)."""
        for name in list(self.procs):
            self.stop(name)
        if self.supervisor is not None:
            self.supervisor.close()
            self.supervisor = None

    def _release(self, proc: Proc) -> None:
        if self.supervisor is not None:
            others = {p.popen.pid for p in self.procs.values()}
            self.supervisor.release(proc.popen.pid, proc.token, keep=others)

    @staticmethod
    def _stop(proc: Proc) -> None:
        """SIGTERM the group, SIGKILL it after a short grace."""
        agent.stop_group(proc.popen, grace=2.0)
        agent.kill_group(proc.popen.pid)


def _tail(log: Path) -> bytes:
    try:
        with log.open("rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - TAIL_BYTES))
            return f.read()
    except OSError:
        return b""


def files_mark(root: Path, files: tuple[str, ...]) -> str:
    """A worker's progress fingerprint: the contents of the files its task may change (a turn
    that leaves them as they were made no progress)."""
    digest = hashlib.sha256()
    budget = MARK_BYTES
    for name in sorted(files):
        path = root / name
        digest.update(name.encode() + b"\0")
        try:
            data = path.read_bytes()[:budget] if path.is_file() else b"<missing>"
        except OSError:
            data = b"<unreadable>"
        budget = max(0, budget - len(data))
        digest.update(hashlib.sha256(data).digest())
    return digest.hexdigest()
