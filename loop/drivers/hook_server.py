"""The hook server: loopdeck's Stop hook imported once, a child forked for each Stop (ahead of
it: `Spare`).

`hook_client` says why. The server is started by a Stop that found none (`launcher.py
hook-server`), listens on an abstract socket named for its user, install and interpreter, and
leaves after `IDLE_S` without a Stop, or at the first Stop after any of its modules changed on
disk (an upgrade: that Stop is answered in its own process by the new code, and starts a new
server). It takes Stops from its own user only, runs nothing but `hook.main`, holds no file
open, and keeps no state between Stops: each child starts from the freshly imported modules, so
a Stop answered here is the Stop a fresh process would have answered.
"""

from __future__ import annotations

import contextlib
import gc
import os
import resource
import select
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable

from loop import trust  # noqa: F401 - imported for the children, as a Stop of a live loop does
from loop.drivers import hook, hook_client, hook_entry
from loop.sources import aggregate  # noqa: F401 - the same

IDLE_S = 600.0
"""A server nobody asked for ten minutes leaves: an agent's turn rarely takes longer, and a
Stop after one pays a fresh process's imports once."""

MAX_REQUEST = 4 << 20
"""A request is a folder, a few numbers and an environment: anything larger is not a client."""

LIMITS = ("RLIMIT_FSIZE", "RLIMIT_NOFILE", "RLIMIT_AS", "RLIMIT_DATA", "RLIMIT_CPU", "RLIMIT_CORE")
"""The client's resource limits the child takes on: a Stop under a limit stays under it."""


def main(before: dict[str, tuple[int, int]] | None = None) -> int:
    """Serve Stops until idle or out of date; 0 always (nobody reads this status). `before`: the
    (mtime, size) of loopdeck's modules taken before this server imported them
    (`hook_entry.sources`): one that changed meanwhile (an upgrade under way) was perhaps
    imported old, and compared with its new self only from now on it would never be seen out of
    date, so the server leaves at once."""
    modules = loaded()  # before the name is taken: a change from here on is seen at a Stop
    if before is not None and any(before.get(path) != info for path, info in modules.items()):
        return 0
    os.chdir("/")  # hold no folder of anyone's project
    os.closerange(3, resource.getrlimit(resource.RLIMIT_NOFILE)[0])  # nor what the Stop inherited
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(hook_client.address(hook_client.loop_folder(), sys.executable, os.getuid()))
    except OSError:
        return 0  # another server has the name
    listener.listen(64)
    listener.settimeout(IDLE_S)
    gc.freeze()  # the imported objects, out of every child's collections: no copy of their pages
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children reap themselves
    spare: Spare | None = None
    busy: Spare | None = None
    """The spare answering the last Stop: the next one is forked once it has answered, so that
    making it (a fork, 8 MB made its own) never takes a core from that Stop."""
    while True:
        if busy is not None and busy.finished():
            busy = None
        if spare is None and busy is None:
            spare = Spare.start(listener)  # the next Stop's
        try:
            if busy is not None and not readable(listener, busy):
                continue  # the last Stop was answered (or is taking long): the next spare now
            conn, _ = listener.accept()
        except TimeoutError:
            return 0
        except OSError:
            continue
        try:
            client, uid, _gid = peer(conn)
            if uid != os.getuid():
                continue
            if loaded() != modules:
                listener.close()  # the name is free before the client hears anything
                return 0
            taken = spare is not None and spare.take(conn, client)
            if spare is not None and spare.done:
                busy = spare if taken else None  # it has this Stop, or it is gone
                spare = None
            if not taken and os.fork() == 0:  # no spare ready (Stops in a burst): a child of its own
                code = 0
                try:
                    listener.close()
                    for held in (spare, busy):
                        if held is not None:
                            held.pair.close()  # the server's alone: a spare sees the server leave
                    code = answer(conn, client)
                finally:
                    os._exit(code)  # whatever happened, the child never returns to this loop
        except OSError:
            continue
        finally:
            conn.close()


class Spare:
    """A child forked before its Stop comes, its memory made its own while nothing waits.

    A child forked at the Stop copies each page of the server the Stop touches, one fault at a
    time (Python writes every object it uses: its reference count): about 600 faults, 2 ms of a
    7 ms Stop. A spare takes them all at once beforehand (`own_pages`), then waits for the
    server to hand it a Stop's connection; the server forks the next spare once that Stop is
    answered (the spare's end of their pair closes as it leaves), not beside it.
    Forked from the same freshly imported server as any child, it answers the Stop any child
    would. It leaves when the server does (its end of the pair closes)."""

    def __init__(self, pid: int, pair: socket.socket) -> None:
        self.pid = pid
        self.pair = pair
        self.ready = False
        self.started = time.monotonic()
        self.handed: float | None = None
        """When it was handed its Stop: it holds its end of the pair until it has answered."""

    @classmethod
    def start(cls, listener: socket.socket) -> Spare | None:
        try:
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        except OSError:
            return None
        try:
            pid = os.fork()
        except OSError:
            ours.close()
            theirs.close()
            return None
        if pid == 0:
            code = 0
            try:
                listener.close()
                ours.close()
                code = cls.wait(theirs)
            finally:
                os._exit(code)
        theirs.close()
        return cls(pid, ours)

    @staticmethod
    def wait(pair: socket.socket) -> int:
        """In the spare: own the pages, say so, then answer the Stop handed over, if one is."""
        own_pages()
        try:
            pair.sendall(READY)
            data, fds, _flags, _addr = socket.recv_fds(pair, 32, 1)
        except OSError:
            return 0
        if len(fds) != 1:
            return 0  # the server left: no Stop comes
        try:
            client = int(data)
        except ValueError:
            os.close(fds[0])
            return 0
        with socket.socket(fileno=fds[0]) as conn:
            return answer(conn, client)

    @property
    def done(self) -> bool:
        """Handed its Stop, or found gone: of no more use to the server."""
        return self.handed is not None or self.pair.fileno() < 0

    def finished(self) -> bool:
        """Has the spare handed a Stop answered it (its end of the pair closed as it left), or
        taken longer than a Stop does (one that waits for a person's answer)?"""
        try:
            if self.pair.recv(1, socket.MSG_DONTWAIT):
                return False  # nothing is said after READY: not an end
        except BlockingIOError:
            if self.handed is not None and time.monotonic() - self.handed < BUSY_S:
                return False
        except OSError:
            pass
        self.pair.close()
        return True

    def take(self, conn: socket.socket, client: int) -> bool:
        """Hand the Stop on `conn` to this spare if it is ready; False (and the spare kept for
        a later Stop) if it is still owning its pages; False (and it closed) if it is gone."""
        try:
            if not self.ready:
                said = self.pair.recv(1, socket.MSG_DONTWAIT)
                if said != READY:
                    raise OSError("the spare left")
                self.ready = True
            socket.send_fds(self.pair, [str(client).encode()], [conn.fileno()])
            self.handed = time.monotonic()
        except BlockingIOError:
            if time.monotonic() - self.started > STUCK_S:  # stopped, or stalled: a new one
                with contextlib.suppress(OSError):
                    os.kill(self.pid, signal.SIGKILL)
                self.pair.close()
            return False
        except OSError:
            self.pair.close()
            return False
        return True


def readable(listener: socket.socket, busy: Spare) -> bool:
    """Wait for the next Stop or the busy spare's end, whichever comes first (at most `BUSY_S`):
    True when a Stop waits to be accepted."""
    timeout = max(0.0, BUSY_S - (time.monotonic() - (busy.handed or 0.0)))
    ready, _, _ = select.select([listener, busy.pair], [], [], timeout)
    return listener in ready


READY = b"r"
BUSY_S = 1.0
"""How long the next spare waits for the last Stop to be answered: longer, that Stop waits for
something else (a person's answer), and the next one is forked beside it."""
STUCK_S = 5.0
"""A spare not ready this long after it was forked (stopped, or its memory stalled) is replaced."""


def own_pages() -> bool:
    """Make the private writable pages of this process its own copies now (Linux 5.14's
    `MADV_POPULATE_WRITE`), so that the Stop this spare answers faults on none of them. Only the
    regions mostly in use: one mostly untouched (a reservation, a thread's stack) would be made
    real memory for nothing. False when the kernel cannot (the pages are then copied as they are
    touched, as in any child)."""
    if _madvise is None:
        return False
    try:
        with open("/proc/self/smaps", "rb") as smaps:
            lines = smaps.read().splitlines()
    except OSError:
        return False
    regions: list[tuple[int, int]] = []
    writable = False
    for line in lines:
        fields = line.split()
        if not fields:
            continue
        if b"-" in fields[0] and len(fields) >= 2 and not fields[0].endswith(b":"):
            start, _, end = fields[0].partition(b"-")
            writable = fields[1] == b"rw-p"
            low, high = int(start, 16), int(end, 16)
        elif writable and fields[0] == b"Rss:" and len(fields) >= 2:
            if int(fields[1]) * 1024 * 2 >= high - low:
                regions.append((low, high))
            writable = False
    worked = False
    for low, high in regions:
        worked = _madvise(low, high - low, MADV_POPULATE_WRITE) == 0 or worked
    return worked


def _libc_madvise() -> Callable[[int, int, int], int] | None:
    """libc's `madvise`, looked up once by the server: every spare has it without a lookup."""
    try:
        import ctypes

        madvise = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError, ImportError):
        return None
    madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    madvise.restype = ctypes.c_int
    return madvise


MADV_POPULATE_WRITE = 23
_madvise = _libc_madvise() if sys.platform == "linux" else None


def loaded() -> dict[str, tuple[int, int]]:
    """`hook_entry.stamps` of every loopdeck module this server imported: a change is an upgrade."""
    folder = hook_client.loop_folder()
    files = (getattr(module, "__file__", None) for module in list(sys.modules.values()))
    return hook_entry.stamps(path for path in files if isinstance(path, str) and path.startswith(folder))


def peer(conn: socket.socket) -> tuple[int, int, int]:
    """The connecting process's pid, uid and gid, as the kernel tells them."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
    pid, uid, gid = (int.from_bytes(creds[n : n + 4], sys.byteorder) for n in (0, 4, 8))
    return pid, uid, gid


def answer(conn: socket.socket, client: int) -> int:
    """In the child: take the client's request, become its process, run its Stop."""
    try:
        conn.sendall(hook_client.TAKEN)
        fields, fds = receive(conn)
        event, cwd, parent, umask, confined = fields[:5]
        if event != b"stop" or confined != hook_client.confinement():
            for fd in fds:
                os.close(fd)
            return 0  # not said to run: the client answers it itself
        conn.sendall(hook_client.RUNNING)
        become(fds, cwd, int(umask), fields[5:], client)
        threading.Thread(target=leave_with, args=(conn,), daemon=True).start()
        code = hook.main(event="stop", parent=int(parent))
    except (OSError, ValueError):
        return 0
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError):
            stream.flush()
    with contextlib.suppress(OSError):
        conn.sendall(bytes([code & 0xFF]))
    return code


def leave_with(conn: socket.socket) -> None:
    """In the child, beside the Stop: leave the moment the client does. The client sends
    nothing after its request, so the connection ends only when the client ends, answered or
    killed (Claude Code's timeout, an interrupt); a killed client's Stop would have died with
    it, and Claude Code waits for the pipes this child holds."""
    with contextlib.suppress(OSError):
        conn.recv(1)
    os._exit(0)


def receive(conn: socket.socket) -> tuple[list[bytes], list[int]]:
    """The request's fields and the three descriptors (stdin, stdout, stderr) sent with it."""
    data, fds, _flags, _addr = socket.recv_fds(conn, 1 << 16, 3)
    if len(fds) != 3:
        for fd in fds:
            os.close(fd)
        raise ValueError("a request without its three descriptors")
    while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
        if len(data) >= 4 and int.from_bytes(data[:4], "big") > MAX_REQUEST:
            raise ValueError("a request larger than any client sends")
        more = conn.recv(1 << 16)
        if not more:
            raise ValueError("a request cut short")
        data += more
    fields = data[4 : 4 + int.from_bytes(data[:4], "big")].split(b"\0")
    if len(fields) < 5:
        raise ValueError("a request without its fields")
    return fields, fds


def become(fds: list[int], cwd: bytes, umask: int, environ: list[bytes], client: int) -> None:
    """This child takes on the client's stdio, folder, umask, environment and limits."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the Stop may wait for what it runs
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    os.umask(umask)
    with contextlib.suppress(OSError):  # a folder gone: the Stop names its own, as in process
        os.chdir(cwd)
    os.environ.clear()
    for entry in environ:
        key, sep, value = entry.partition(b"=")
        if sep and key:
            os.environb[key] = value
    for name in LIMITS:
        which = getattr(resource, name, None)
        if which is None:
            continue
        with contextlib.suppress(OSError, ValueError):  # one it cannot take on: the server's stays
            resource.prlimit(0, which, resource.prlimit(client, which))
