"""The errors loopdeck raises on purpose, so callers can tell them from bugs.

Every message names the file, the line where there is one, and what was expected: a person
reading it at 3 a.m. should know what to open and what to fix.
"""

from __future__ import annotations

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
