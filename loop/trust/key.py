"""This user's secret key: what makes a control line a person's.

32 random bytes in the trust folder (`loop.trust.home`), mode 0600, made on first use by a
person's process. The agent's sandbox does not have that folder, so an agent cannot read the key
nor sign a line with it; a process inside an agent's session never asks for it to sign
(`for_person`). Readers (the drivers) only read it: with no key yet, no line is a person's, and
only a pause is applied.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from loop import trust
from loop.trust.person import agent_session

KEY_NAME = "control.key"
"""The key's file in the trust folder. Records there are named from a workspace's absolute path,
escaped (`%2F…`), so no record can take this name."""
KEY_BYTES = 32


def path(workspace: Path | None = None) -> Path:
    return trust.home(workspace) / KEY_NAME


def load(workspace: Path | None = None, create: bool = False) -> bytes | None:
    """The key, None when there is none (or it is not ours: another owner, other modes, another
    size). `create`: make it when missing."""
    where = path(workspace)
    key = _read(where)
    if key is not None or not create:
        return key
    where.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fresh = os.urandom(KEY_BYTES)
    tmp = where.with_name(f".{KEY_NAME}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, fresh)
    finally:
        os.close(fd)
    try:
        os.link(tmp, where)  # never over a key another process made meanwhile
    except FileExistsError:
        pass
    finally:
        os.unlink(tmp)
    return _read(where)


def _read(where: Path) -> bytes | None:
    try:
        fd = os.open(where, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if info.st_uid != os.getuid() or info.st_mode & 0o077 or info.st_size != KEY_BYTES:
            return None
        data = os.read(fd, KEY_BYTES + 1)
    finally:
        os.close(fd)
    return data if len(data) == KEY_BYTES else None


def for_person(workspace: Path | None = None) -> bytes | None:
    """The key to sign a command with, or None when this process runs inside an agent's session
    (its environment or an ancestor's carries an agent's or a loopdeck run's marks): such a
    line is queued unsigned, and only a pause of it is applied."""
    if agent_session() is not None:
        return None
    return load(workspace, create=True)


def reader(workspace: Path | None = None) -> Callable[[], bytes | None]:
    """For `loop.store.control`'s readers: the key, read when a line carries a mac."""
    return lambda: load(workspace)
