"""The errors loopdeck raises on purpose, so callers can tell them from bugs.

Every message names the file, the line where there is one, and what was expected: a person
reading it at 3 a.m. should know what to open and what to fix.
"""

from __future__ import annotations

import os
from pathlib import Path


class LoopdeckError(Exception):
    """Base of every error that is the input's fault rather than loopdeck's."""


class FileProblem(LoopdeckError):
    """A file that could not be read as what it should be."""

    def __init__(self, path: Path | str, problem: str, line: int | None = None) -> None:
        self.path = Path(path)
        self.problem = problem
        self.line = line
        where = f"{self.path}:{line}" if line is not None else str(self.path)
        super().__init__(f"{where}: {problem}")


class LockTimeout(LoopdeckError):
    """Another process held the loop lock for longer than we were willing to wait."""


_WHY = {
    "ENOSPC": "no space left on the disk",
    "EDQUOT": "the disk quota is used up",
    "EFBIG": "the file grew past its size limit",
    "EROFS": "the file system is read-only",
    "EACCES": "permission denied",
    "EPERM": "not permitted",
    "ELOOP": "is a symlink; loopdeck does not follow symlinks there",
    "EISDIR": "is a folder, expected a file",
    "ENOENT": "no such file or folder",
}


def os_problem(exc: OSError) -> str:
    """An OSError as one line for a person: which file, and what went wrong with it (for a path
    through something that is not a folder, which part is a file where a folder was expected)."""
    import errno

    name = errno.errorcode.get(exc.errno or 0, "")
    why = exc.strerror or str(exc)
    if exc.errno and why == os.strerror(exc.errno):  # the system's words: loopdeck's are plainer
        why = _WHY.get(name, why)
    if exc.filename is None:
        return why
    where = Path(os.fsdecode(exc.filename)) if isinstance(exc.filename, bytes | str) else None
    if where is None:
        return f"{exc.filename}: {why}"
    if name in ("ENOTDIR", "EEXIST"):
        blocker = _not_a_folder(where, include_self=name == "EEXIST")
        if blocker is not None:
            return f"{blocker}: is a file, expected a folder"
    if exc.filename2 is not None:
        return f"{where} -> {os.fsdecode(exc.filename2)}: {why}"
    return f"{where}: {why}"


def _not_a_folder(path: Path, include_self: bool) -> Path | None:
    """The nearest of `path`'s parents (and `path` itself when `include_self`: a folder made
    where a file is) that exists and is not a folder, else None."""
    for candidate in (path, *path.parents) if include_self else path.parents:
        try:
            if candidate.exists():
                return None if candidate.is_dir() else candidate
        except (OSError, ValueError):
            return None
    return None
