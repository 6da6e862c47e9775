"""Questions about processes that every driver and viewer asks."""

from __future__ import annotations

import os


def alive(pid: int | None) -> bool | None:
    """Is `pid` running? None when there is no pid to ask about.

    A zombie (dead, not yet reaped) counts as gone: its loop is not being driven.
    """
    if pid is None or pid <= 0:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[-1].split()
        return not (fields and fields[0] == b"Z")
    except OSError:
        return True


SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "fish"})


def session_pid() -> int:
    """The Claude Code session running this hook: the parent, or the parent's parent when the
    parent is the shell Claude Code ran the hook command with (it exits with the hook, so its
    pid says nothing about the session). Reads /proc where there is one (the hook stays lean:
    no psutil on its path); elsewhere the parent."""
    parent = os.getppid()
    try:
        with open(f"/proc/{parent}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return parent
    name = stat[stat.find(b"(") + 1 : stat.rfind(b")")].decode(errors="replace")
    fields = stat[stat.rfind(b")") + 2 :].split()
    if name in SHELLS and len(fields) > 1 and fields[1].isdigit() and int(fields[1]) > 1:
        return int(fields[1])
    return parent
