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
