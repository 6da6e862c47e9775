"""Every process an agent started, found and killed: `setsid` children and daemons included.

Killing an agent's process group misses whatever left the group: `setsid sleep 1000 &`, or a
daemon that double-forks into a session of its own. Such a process outlives the turn, and the
runner, and works on unsupervised, racing the next agent over the same files. Two things make
them findable, on any path out (a turn that ends, a timeout, the runner's own end or SIGKILL):

* every child the runner starts (agent, verification, worker, audit) carries a marker in its
  environment, `LOOPDECK_RUN=<run id>.<n>`, which everything it starts inherits: a `setsid`
  child and a daemon keep their environment. Markers nest (`outer:inner`), so a loopdeck runner
  started by an agent still has its own children found by the outer one;
* on Linux the runner is a child subreaper (`PR_SET_CHILD_SUBREAPER`): an orphan of the agent
  is reparented to the runner instead of init, so even one that cleared its environment is
  still the runner's child, found as such (`loop.processes.supervisor`).

Only processes of the same user are looked at. Elsewhere than Linux (macOS) the marker is read
with psutil and there is no subreaper: a daemon that clears its environment escapes there.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import secrets
import signal
import sys
import time
from collections.abc import Callable, Iterable, Mapping

import psutil

MARK = "LOOPDECK_RUN"
"""The environment variable that marks the processes of one run."""
ROUNDS = 20
"""A process may fork while its siblings are killed: scan again until a scan finds nothing."""
WAIT_S = 5.0
"""How long a sweep waits for what it killed to be gone (SIGKILL takes milliseconds)."""
PR_SET_CHILD_SUBREAPER, PR_GET_CHILD_SUBREAPER = 36, 37


def new_run_id() -> str:
    return secrets.token_hex(8)


def marked_env(base: Mapping[str, str], token: str) -> dict[str, str]:
    """`base` with `token` added to its marker (kept after an outer run's marker)."""
    prior = base.get(MARK)
    return {**base, MARK: f"{prior}:{token}" if prior else token}


def of_token(token: str) -> Callable[[list[str]], bool]:
    """Matches the processes of one child (its marker names exactly `token`)."""
    return lambda parts: token in parts


def of_run(run_id: str) -> Callable[[list[str]], bool]:
    """Matches the processes of every child of one run."""
    prefix = f"{run_id}."
    return lambda parts: any(part.startswith(prefix) for part in parts)


# --- the subreaper ---------------------------------------------------------------------------


def _prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def subreaper(on: bool) -> bool | None:
    """Make this process a child subreaper (or stop being one); returns whether it was one
    before, None where the system has no such thing (then nothing changed)."""
    prctl = _prctl()
    if prctl is None:
        return None
    was = ctypes.c_int(0)
    if prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(was), 0, 0, 0) != 0:
        return None
    if prctl(PR_SET_CHILD_SUBREAPER, 1 if on else 0, 0, 0, 0) != 0:
        return None
    return bool(was.value)


# --- finding ---------------------------------------------------------------------------------


def _marks(pid: int) -> list[str] | None:
    """The parts of `pid`'s marker, [] when it has none, None when it cannot be read."""
    if sys.platform.startswith("linux"):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                data = f.read()
        except OSError:
            return None
        needle = MARK.encode() + b"="
        for entry in data.split(b"\0"):
            if entry.startswith(needle):
                return entry[len(needle) :].decode("utf-8", "replace").split(":")
        return []
    try:
        value = psutil.Process(pid).environ().get(MARK)
    except psutil.Error:
        return None
    return value.split(":") if value else []


def _own_pids() -> Iterable[int]:
    """The pids of this user's processes (other users' are never touched)."""
    uid = os.getuid()
    if sys.platform.startswith("linux"):
        try:
            names = os.listdir("/proc")
        except OSError:
            names = []
        for name in names:
            if name.isdigit():
                with contextlib.suppress(OSError):
                    if os.stat(f"/proc/{name}").st_uid == uid:
                        yield int(name)
        return
    for proc in psutil.process_iter(["uids"]):
        uids = proc.info.get("uids")
        if uids is not None and uids.real == uid:
            yield proc.pid


def find(match: Callable[[list[str]], bool], among: Iterable[int] | None = None) -> set[int]:
    """This user's processes whose marker `match`es (never this process); only those `among`
    the pids given, when given (a subreaper's own subtree: see `kill`)."""
    me = os.getpid()
    found = set()
    for pid in _own_pids() if among is None else among:
        if pid == me:
            continue
        parts = _marks(pid)
        if parts and match(parts):
            found.add(pid)
    return found


def _proc_children(pid: int) -> set[int] | None:
    """The children of `pid` as Linux lists them per thread (`/proc/PID/task/TID/children`): a
    few small reads, where psutil reads the `stat` of every process on the machine. None where
    the kernel does not list them (then psutil answers)."""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return set() if os.path.exists("/proc/self/task") else None
    found: set[int] = set()
    for tid in threads:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                found.update(int(word) for word in f.read().split())
        except FileNotFoundError:
            if tid == str(pid) and os.path.isdir(f"/proc/{pid}/task/{tid}"):
                return None  # the thread is there, its list is not: a kernel without them
        except (OSError, ValueError):
            continue
    return found


_LISTED: list[bool] = []
"""Whether this kernel lists children (`_proc_children`), once known."""


def _listed_children(pid: int) -> set[int] | None:
    if not sys.platform.startswith("linux") or _LISTED == [False]:
        return None
    found = _proc_children(pid)
    if not _LISTED:
        _LISTED.append(found is not None or not os.path.isdir(f"/proc/{pid}"))
    return found


def children(pid: int) -> set[int]:
    """The direct children of `pid` (orphans included, when it is a subreaper)."""
    found = _listed_children(pid)
    if found is not None:
        return found
    try:
        return {child.pid for child in psutil.Process(pid).children()}
    except psutil.Error:
        return set()


def descendants(pids: Iterable[int]) -> set[int]:
    """Every descendant of `pids` (not `pids` themselves)."""
    found: set[int] = set()
    todo = list(pids)
    while todo:
        pid = todo.pop()
        listed = _listed_children(pid)
        if listed is None:
            with contextlib.suppress(psutil.Error):
                found.update(child.pid for child in psutil.Process(pid).children(recursive=True))
            continue
        fresh = listed - found
        found |= fresh
        todo.extend(fresh)
    return found


# --- killing ---------------------------------------------------------------------------------


def gone(pid: int) -> bool:
    """Dead, or a zombie (reaped here when it is this process's child)."""
    with contextlib.suppress(ChildProcessError, OSError):
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return True
    try:
        zombie = psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.Error:
        return True
    if zombie:  # it died between the two looks: reaped now when it is ours (an orphan the runner
        with contextlib.suppress(ChildProcessError, OSError):  # adopted), not left to outlive it
            os.waitpid(pid, os.WNOHANG)
    return zombie


def kill(
    match: Callable[[list[str]], bool] | None,
    also: Iterable[int] = (),
    keep: Iterable[int] = (),
    wait: float = WAIT_S,
    subtree: bool = False,
) -> set[int]:
    """SIGKILL every process whose marker `match`es, the processes `also` names, and all their
    descendants (never `keep`, never this process); scan again until nothing is found, then
    wait (at most `wait` seconds) until they are gone. Returns the pids killed.

    `subtree`: this process is a child subreaper, so every process its children started is
    still below it (an orphan is reparented to it, not to init): the markers are looked for
    among its descendants only, not in every process on the machine."""
    spare = {os.getpid(), *keep}
    killed: set[int] = set()
    extra = set(also)
    for _ in range(ROUNDS):
        among = descendants({os.getpid()}) if subtree else None
        found = (find(match, among) if match is not None else set()) | extra
        found |= descendants(found)
        found -= spare | killed  # a process with SIGKILL pending never forks again
        if not found:
            break
        for pid in found:
            with contextlib.suppress(psutil.Error):
                psutil.Process(pid).send_signal(signal.SIGKILL)  # refuses a pid reused meanwhile
        killed |= found
        extra = set()
    deadline = time.monotonic() + wait
    waiting = set(killed)
    while waiting and time.monotonic() < deadline:
        waiting = {pid for pid in waiting if not gone(pid)}
        if waiting:
            time.sleep(0.01)
    return killed


def reap(keep: Iterable[int] = ()) -> None:
    """Reap this process's zombie children but `keep`: orphans reparented to a subreaper that
    ended on their own (their marker can no longer be read), so they do not pile up over a
    night of turns. `keep` names the children whose `subprocess.Popen` still waits for them."""
    spare = set(keep)
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process().children():
            if child.pid in spare:
                continue
            with contextlib.suppress(psutil.Error, ChildProcessError, OSError):
                if child.status() == psutil.STATUS_ZOMBIE:
                    os.waitpid(child.pid, os.WNOHANG)
