"""The processes of `run --workers`: start, watch and stop them, and nothing else.

Every worker (and every audit) is a child in its own process group, told to die with the
runner (PR_SET_PDEATHSIG) and registered with a supervisor (`loop.processes.supervisor`), its
environment marked (`loop.processes.sweep`), so a stop, a skip, a replacement, the end of its turn or the
runner's own end (SIGKILL included) takes the worker *and everything it started* down with it,
`setsid` children and daemons included. Output goes to a log file a line at a time, redacted,
through one pump thread for all of them (no reader thread per worker); the driver gets its tail
when the process ends, and the file's growth is what "the worker said something" means. Argv
only: no task or user text reaches a shell.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import selectors
import subprocess
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from loop.core.model import RUNNER_ENV
from loop.core.redact import LineRedactor, redact
from loop.processes import agent
from loop.processes.sandbox import Spec, Status, take_back, unmade, wrap
from loop.processes.supervisor import Supervisor
from loop.store.safeopen import make_parents, open_append, open_regular, write_bytes

TAIL_BYTES = 256 * 1024
MARK_BYTES = 8 * 1024 * 1024
DRAIN_S = 5.0
"""How long an ended process's output may take to reach its log: the pump reads until the
pipe's last writer is gone, and something that left the process group may hold it open."""


class Stream:
    """One process's output on its way to its log: redacted a line at a time, its raw tail
    kept for the driver (which reads the agent's last words in it)."""

    def __init__(self, fd: int, log: BinaryIO) -> None:
        self.fd = fd
        self.log = log
        self.lines = LineRedactor(agent.LOG_LINE_BYTES)
        self.tail: deque[bytes] = deque()
        self.size = 0
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.broken = False

    def take(self, chunk: bytes) -> None:
        out = self.lines.feed(chunk)
        if out and not self.broken:
            try:
                self.log.write(out)
                self.log.flush()
            except OSError:  # a full disk: the log stops here; the process goes on, as it did
                self.broken = True  # when it wrote the file itself
        with self.lock:
            self.tail.append(chunk)
            self.size += len(chunk)
            while self.size > TAIL_BYTES and len(self.tail) > 1:
                self.size -= len(self.tail.popleft())

    def finish(self) -> None:
        with contextlib.suppress(OSError):
            self.log.write(self.lines.close())
        for closing in (self.log.close, lambda: os.close(self.fd)):
            with contextlib.suppress(OSError):
                closing()
        self.done.set()

    def raw_tail(self) -> bytes:
        with self.lock:
            return b"".join(self.tail)[-TAIL_BYTES:]


class Pump:
    """One thread moving every process's output into its log, started with the first and
    ending with the last. Streams are handed to it (and taken back) through a queue and a
    wake-up pipe: only the thread touches the selector."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: deque[tuple[str, Stream]] = deque()
        self._thread: threading.Thread | None = None
        self._selector: selectors.BaseSelector | None = None
        self._wake: tuple[int, int] = (-1, -1)
        self._streams = 0

    def add(self, stream: Stream) -> None:
        with self._lock:
            if self._selector is None:
                self._selector = selectors.DefaultSelector()
                self._wake = os.pipe()
                os.set_blocking(self._wake[0], False)
                self._selector.register(self._wake[0], selectors.EVENT_READ, None)
            self._queue.append(("add", stream))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="loopdeck-output", daemon=True)
                self._thread.start()
        self._poke()

    def drop(self, stream: Stream) -> None:
        """Stop reading `stream` (its process is gone but something holds its pipe open)."""
        with self._lock:
            self._queue.append(("drop", stream))
        self._poke()

    def _poke(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self._wake[1], b"x")

    def _run(self) -> None:
        selector = self._selector
        assert selector is not None
        while True:
            with self._lock:
                self._take_queue(selector)
                if not self._streams:
                    self._thread = None
                    return
            for key, _events in selector.select():
                stream = key.data
                if stream is None:
                    with contextlib.suppress(OSError):
                        os.read(self._wake[0], 4096)
                    continue
                try:
                    chunk = os.read(stream.fd, 65536)
                except OSError:
                    chunk = b""
                try:
                    if chunk:
                        stream.take(chunk)
                        continue
                except Exception:  # never expected: stop reading this one, keep pumping the others
                    pass
                self._close(selector, stream)

    def _take_queue(self, selector: selectors.BaseSelector) -> None:
        while self._queue:
            what, stream = self._queue.popleft()
            if what == "add":
                try:
                    selector.register(stream.fd, selectors.EVENT_READ, stream)
                except (OSError, ValueError):
                    stream.finish()
                    continue
                self._streams += 1
            elif not stream.done.is_set():
                self._close(selector, stream)

    def _close(self, selector: selectors.BaseSelector, stream: Stream) -> None:
        with contextlib.suppress(KeyError, ValueError):
            selector.unregister(stream.fd)
            self._streams -= 1
        stream.finish()


@dataclass
class Proc:
    name: str
    """The worker's name (an audit runs under its worker's name, `role` "audit")."""
    role: str
    popen: subprocess.Popen[bytes]
    log: Path
    started: float
    stream: Stream
    size: int = 0
    token: str = ""
    """The marker in its environment: what it leaves behind carries it."""
    box: Spec | None = None
    """Its sandbox, when it ran in one; `absent`: what it must not have made there."""
    absent: list[Path] = field(default_factory=list)


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
    pump: Pump = field(default_factory=Pump)

    def start(
        self,
        name: str,
        role: str,
        argv: list[str],
        stdin_text: str | None,
        cwd: Path,
        log: Path,
        env: dict[str, str] | None = None,
        sandbox: tuple[Spec, Status] | None = None,
    ) -> None:
        """Start a process for worker `name` (`role`: its turn, or its audit), its output to
        `log`; in `sandbox` when one is given (`loop.processes.sandbox`: `cwd` writable)."""
        make_parents(log)  # inside .claude/, never through a symlink
        stdin: int | object = subprocess.DEVNULL
        prompt_in = None
        if stdin_text is not None:
            feed = log.with_suffix(".stdin")
            write_bytes(feed, redact(stdin_text).encode("utf-8"))  # kept with the logs: redacted
            prompt_in = open_regular(feed)
            stdin = prompt_in
        if self.supervisor is None:
            self.supervisor = Supervisor()
        marked, token = self.supervisor.tag(os.environ if env is None else env)
        env = {**marked, **RUNNER_ENV}  # installed hooks stay out
        absent: list[Path] = []
        try:
            if sandbox is not None:
                argv, env = wrap(argv, sandbox[0], env, sandbox[1], RUNNER_ENV)
                absent = unmade(sandbox[0], env) if sandbox[1].on else []
            out = open_append(log)
        except OSError as exc:
            if prompt_in is not None:
                prompt_in.close()
            self._cannot_start(name, role, argv, exc, token)
            return
        read_end, write_end = os.pipe()
        try:
            popen = subprocess.Popen(
                argv,
                cwd=cwd,
                stdin=stdin,  # type: ignore[arg-type]
                stdout=write_end,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=self.supervisor.preexec(agent._die_with_parent),
                env=env,
            )
        except OSError as exc:
            os.close(read_end)
            out.close()
            self._cannot_start(name, role, argv, exc, token)
            return
        finally:
            os.close(write_end)
            if prompt_in is not None:
                prompt_in.close()
        stream = Stream(read_end, out)
        self.pump.add(stream)
        box = sandbox[0] if sandbox is not None and absent else None
        self.procs[name] = Proc(
            name, role, popen, log, time.monotonic(), stream, token=token, box=box, absent=absent
        )

    def _cannot_start(self, name: str, role: str, argv: list[str], exc: OSError, token: str) -> None:
        if self.supervisor is not None:
            self.supervisor.release(token=token, keep={p.popen.pid for p in self.procs.values()})
        why = f"cannot start {argv[0]!r}: {exc.strerror}"
        self.failed.append(Ended(name, role, None, 0.0, why.encode(), error=why))

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
            self._drain(proc)
            tail = proc.stream.raw_tail()
            if proc.box is not None and proc.absent:
                taken = take_back(proc.box, proc.absent)
                if taken:
                    tail += ("\n" + "\n".join(taken) + "\n").encode()
            ended.append(Ended(name, proc.role, code, round(now - proc.started, 3), tail, timed_out))
        return ended

    def _drain(self, proc: Proc) -> None:
        """Wait until the process's output is all in its log (or give up on what still holds
        its pipe after DRAIN_S)."""
        if not proc.stream.done.wait(DRAIN_S):
            self.pump.drop(proc.stream)
            proc.stream.done.wait(DRAIN_S)

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
            self._drain(proc)

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
