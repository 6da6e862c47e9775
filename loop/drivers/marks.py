"""The workspace's progress fingerprint, a turn's start and end: did the turn change anything?

The engine finds a loop stuck from turns that changed nothing; this part only looks. Its git
look starts as a turn ends and is read later, so git runs beside the driver's own work.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path
from typing import Any

MAX_MARK_FILES = 20_000
"""Outside git, the progress fingerprint looks at this many files at most."""
_SKIP_DIRS = frozenset({".git", ".claude", "node_modules", ".venv", "venv", "__pycache__", ".mypy_cache"})


class StartedMark:
    """The workspace's progress fingerprint: git HEAD and changes, or, outside a git repository,
    the names, sizes and times of its files (so a folder without git is not "stuck" while the
    agent changes files). Its git look starts now and is read later (`result`, kept once read):
    a turn's mark starts as the turn ends, is read by the decision only when the task counts
    did not change, and otherwise just before the next agent starts, so git runs beside the
    runner's own work (the journal, the task sources, the state written)."""

    def __init__(self, root: Path) -> None:
        # Here, not at the top: ~3 ms of the runner's ~160 ms start-up (`-X importtime`), paid
        # only once a turn starts (a run refused, or ended at once, never looks).
        from loop.repo import gitstate

        self.root = root
        self.look = gitstate.Fingerprint(root)
        self.value: str | None = None

    def result(self) -> str:
        if self.value is None:
            mark = self.look.result()
            self.value = mark if mark is not None else files_mark(self.root)
        return self.value

    @property
    def head(self) -> str | None:
        """HEAD's commit as the look found it ("" before the first), None outside git; once
        read (`result`)."""
        return self.look.head

    def close(self) -> None:
        self.look.close()


def files_mark(root: Path) -> str:
    """Outside git: the names, sizes and times of the workspace's files."""
    digest = hashlib.sha256()
    seen = 0
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
        for name in sorted(files):
            with contextlib.suppress(OSError):
                info = os.stat(os.path.join(folder, name), follow_symlinks=False)
                digest.update(f"{folder}/{name}\0{info.st_size}\0{info.st_mtime_ns}\n".encode())
            seen += 1
            if seen >= MAX_MARK_FILES:
                return digest.hexdigest()
    return digest.hexdigest()


class Marks:
    """The mark the current turn started from, and the look the last turn started as it ended."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.looking: StartedMark | None = None
        """The mark of the turn that just ended, started as it ended: the next turn's start."""
        self.start: str | None = None
        """The workspace's mark when the current turn started."""
        self.start_head: str | None = None
        """HEAD when the current turn started ("" before the first commit; None outside git):
        what the turn changed is counted from it."""

    def begin(self) -> None:
        """A turn starts. After a turn that was not judged (failed, interrupted, limited) the
        start stays: what that turn changed is progress for the next one judged."""
        if self.looking is not None or self.start is None:
            look, self.looking = self.looking, None
            mark = look if look is not None else StartedMark(self.root)
            self.start = mark.result()
            self.start_head = mark.head

    def ended(self) -> None:
        """The turn is over (its checks and commit included): its look starts now."""
        self.looking = StartedMark(self.root)

    def changed(self) -> bool:
        """Did the turn that just ended change the workspace? Its mark against its start's."""
        if self.looking is None:
            self.looking = StartedMark(self.root)
        return self.start is None or self.looking.result() != self.start

    def files(self) -> dict[str, Any] | None:
        """What the turn changed in git since it started (`gitstate.changes`): files created,
        modified and deleted, lines added and removed; None outside git."""
        if self.start_head is None:
            return None
        from loop.repo import gitstate

        return gitstate.changes(self.root, self.start_head)

    def clean(self) -> bool | None:
        """Is the work all committed? None outside git."""
        from loop.repo import gitstate

        return gitstate.clean(self.root)

    def forget(self) -> None:
        """The loop waits (for a person, for a reset): what changes meanwhile is nobody's turn.
        The next turn starts from a look taken as it starts; the last turn's git process ends
        now rather than wait unread for as long as the loop does."""
        self.drop()
        self.start = None

    def drop(self) -> None:
        """A turn's mark nobody will read (the runner stops): its git process ends now."""
        look, self.looking = self.looking, None
        if look is not None:
            look.close()
