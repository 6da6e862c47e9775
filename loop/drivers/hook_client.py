"""The Stop hook's way to the hook server: hand this process's Stop to a child the server forks.

Claude Code starts the Stop hook on every turn of the agent. Most of what a fresh interpreter
spends on a Stop is importing loopdeck (the engine, the state's reader, the task sources: some
forty modules, with `json`, `re`, `pathlib` and `datetime` under them); the decision itself is a
few milliseconds. So a server, started by the first Stop that finds none, keeps all of that
imported and forks a child per Stop: the child takes this process's stdin, stdout and stderr
(passed as file descriptors), its working folder, environment, umask and resource limits, runs
the very `hook.main` this process would have run, and reports its exit status. What the hook
does and writes is the same either way; only the imports are paid once.

This module is imported on every Stop, before anything else of loopdeck: it uses `os`, `sys`
and the C `_socket` module only. Whatever goes wrong on the way (no server, a server of another
user, one too slow to take the Stop, one confined otherwise) the caller answers the Stop in
its own process, as it did before there was a server; the one thing never done is a Stop
answered twice: this process sends its request only to a child that is there to take it (a
client that gave up waiting sent nothing), and answers in process only when the child said
it would not run it.
"""

from __future__ import annotations

import os
import sys

ENV = "LOOPDECK_HOOK_SERVER"
"""`off`: every Stop answered in its own process and no server started (the test suite's
setting, and anyone's who would rather not have the background process)."""

TAKE_S = 2.0
"""How long a Stop waits for the server to take it before answering in its own process: a
stopped or swamped server costs a Stop two seconds at most, never the Stop."""

RUN_MARK = "LOOPDECK_RUN"
"""What marks the processes of a loopdeck run (`loop.processes.sweep.MARK`, not imported here:
this module stays on `os`, `sys` and `_socket`)."""

OFF = "off"
ABSENT = "absent"
"""No server listens: answer in process, then start one for the next Stop."""
REFUSED = "refused"
"""A server listened but did not take the Stop (its code changed on disk, confined otherwise,
too slow): answer in process, and start one (a stale server has left)."""
FOREIGN = "foreign"
"""The name is held by another user's process: answer in process, start nothing."""

TAKEN = b"+"
"""The server's child, to a client that just connected: send the request."""
RUNNING = b"y"
"""The child, having the request: it runs the Stop (anything else, or nothing: it does not)."""


def loop_folder() -> str:
    """The folder of the `loop` package this interpreter runs: part of the server's name, so that
    two installs (or two clones) never share a server."""
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def address(folder: str, executable: str, uid: int) -> bytes:
    """The server's abstract socket name (Linux): per user, per install and interpreter. An
    abstract name lives in no folder (nothing to clean up after a crash, no path-length limit);
    anyone may connect to it, so both ends check the other's user id."""
    digest = 0xCBF29CE484222325  # FNV-1a: stable across processes, no import (hashlib is 2 ms)
    for byte in f"{folder}\0{executable}".encode(errors="surrogateescape"):
        digest = ((digest ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"\0loopdeck-hook-{uid}-{digest:016x}".encode()


def confinement() -> bytes:
    """What confines this process beyond its user: its mount namespace (by inode: a server in
    another sees other files at the same paths) and its no-new-privileges and seccomp modes. A
    server confined otherwise declines the Stop: it would run it more confined than its own
    process would, or less (a sandboxed session's Stop, unsandboxed)."""
    found = []
    try:
        found.append(str(os.stat("/proc/self/ns/mnt").st_ino).encode())
        with open("/proc/self/status", "rb") as status:
            for line in status:
                if line.startswith((b"NoNewPrivs:", b"Seccomp:")):
                    found.append(line.split()[-1])
    except OSError:
        pass
    return b",".join(found)


def request(event: str) -> bytes:
    """What the server's child needs to be this process: NUL-separated fields (the event, the
    working folder, the parent's pid, the umask, the confinement, then the environment),
    behind a 4-byte length. Environment entries and paths cannot hold a NUL."""
    umask = os.umask(0o077)
    os.umask(umask)
    fields = [event.encode(), os.getcwdb(), str(os.getppid()).encode(), str(umask).encode()]
    fields.append(confinement())
    fields += [key + b"=" + value for key, value in os.environb.items()]
    body = b"\0".join(fields)
    return len(body).to_bytes(4, "big") + body


def peer_uid(creds: bytes) -> int:
    """The user id in a `SO_PEERCRED` answer (`struct ucred`: pid, uid, gid as C ints)."""
    return int.from_bytes(creds[4:8], sys.byteorder)


def ask(event: str) -> int | str:
    """Have the server answer this process's `event`: the child's exit status, or why not (one
    of the names above; then nothing ran and the caller answers in process).

    The server's child says it is there before this process sends anything: stdio handed to a
    server that never reads them would hold Claude Code's pipes open after this process left.
    """
    if sys.platform != "linux" or os.environ.get(ENV) == OFF:
        return OFF
    import _socket

    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    running = False
    try:
        # Under the timeout from the start: a server that stopped accepting (SIGSTOPped, frozen)
        # fills its queue with the Stops that gave up on it, and a blocking connect would then
        # wait for room there for ever.
        sock.settimeout(TAKE_S)
        try:
            sock.connect(address(loop_folder(), sys.executable, os.getuid()))
        except (BlockingIOError, TimeoutError):
            return REFUSED  # a server is there, its queue full
        except OSError:
            return ABSENT
        creds = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)
        if peer_uid(creds) != os.getuid():
            return FOREIGN
        if sock.recv(1) != TAKEN:
            return REFUSED
        sock.settimeout(None)
        body = request(event)
        fds = b"".join(fd.to_bytes(4, sys.byteorder) for fd in (0, 1, 2))
        sent = sock.sendmsg([body], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])
        if sent < len(body):
            sock.sendall(body[sent:])
        if sock.recv(1) != RUNNING:
            return REFUSED
        running = True
        code = sock.recv(1)
        return code[0] if code else 0
    except OSError:  # a timeout included: until the child said it runs the Stop, nothing ran
        return 0 if running else REFUSED
    finally:
        sock.close()


def start_server() -> None:
    """Start the server for the next Stop, detached (its own session, stdio on /dev/null, an
    environment of only what locates the person and their locale): this Stop's process exits
    at once, and Claude Code waits for nothing of it. Two Stops starting one at the same time
    are harmless: the second cannot take the name and leaves.

    Not from a Stop of a loopdeck run's agent (`RUN_MARK` in its environment): the runner is the
    subreaper of everything its agent starts and kills it after each turn, so a server started
    there would die, Stops of other sessions it was running with it (each lost: its client saw
    it run and answers nothing); it uses a server started elsewhere all the same."""
    if RUN_MARK in os.environ:
        return  # a process of a loopdeck run: the runner kills what its agent leaves, server and all
    launcher = os.path.join(loop_folder(), "launcher.py")
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE")
    env = {key: os.environ[key] for key in keep if key in os.environ}
    null: list[tuple[object, ...]] = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDWR, 0)]
    null += [(os.POSIX_SPAWN_DUP2, 0, 1), (os.POSIX_SPAWN_DUP2, 0, 2)]
    argv = [sys.executable, "-I", "-S", launcher, "hook-server"]
    try:  # noqa: SIM105 - contextlib would be one more import for every Stop
        os.posix_spawn(sys.executable, argv, env, file_actions=null, setsid=True)
    except OSError:
        pass  # no server: every Stop is answered in its own process, as before
