"""Other tools' loops, read-only: the files they keep, turned into one view.

People run more than one kind of loop, sometimes in the same folder: Anthropic's ralph-loop
plugin, workflow orchestrators, story and task loops. loopdeck watches them next to its own
without driving them: each adapter here reads one format into a `NeighbourLoop`, and `detect`
finds them in a workspace. Reading never raises for a bad file: the problem (file, line, what
was expected) is part of what is found, for the viewer to show.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loop.core.errors import FileProblem
from loop.formats import claude_goal, claude_task, continuous, prd_status, ralph, task_loop, workflow
from loop.formats.view import NeighbourLoop

__all__ = ["FORMATS", "Found", "NeighbourLoop", "detect", "loops_json", "read"]

OURS = "orchestrator-loop"
"""The kind of loopdeck's own loop, as `status --json` lists it next to the neighbours."""

FORMATS: dict[str, tuple[str, Callable[[Path], NeighbourLoop]]] = {
    ralph.KIND: (ralph.PATH, ralph.read),
    workflow.KIND: (workflow.PATH, workflow.read),
    continuous.KIND: (continuous.PATH, continuous.read),
    task_loop.KIND: (task_loop.PATH, task_loop.read),
    prd_status.KIND: (prd_status.PATH, prd_status.read),
    claude_task.KIND: (claude_task.PATH, claude_task.read),
}
"""kind → (path inside the workspace, reader)."""

LOCATED: dict[str, tuple[Callable[[Path], Path | None], Callable[[Path], NeighbourLoop]]] = {
    claude_goal.KIND: (claude_goal.locate, claude_goal.read),
}
"""Loops kept outside the workspace, found for it: kind → (locator, reader). Claude Code's
`/goal` lives in the newest session transcript of the folder (listed while it is active)."""


@dataclass(frozen=True)
class Found:
    """One neighbour loop file: its view, or why it could not be read."""

    kind: str
    path: Path
    loop: NeighbourLoop | None
    problem: FileProblem | None = None

    def to_json(self) -> dict[str, Any]:
        if self.loop is not None:
            return self.loop.to_json()
        assert self.problem is not None
        return {
            "kind": self.kind,
            "state_file": str(self.path),
            "status": "unreadable",
            "error": {
                "path": str(self.problem.path),
                "line": self.problem.line,
                "problem": self.problem.problem,
            },
        }


def read(kind: str, path: Path) -> Found:
    reader = FORMATS[kind][1] if kind in FORMATS else LOCATED[kind][1]
    try:
        return Found(kind, path, reader(path))
    except FileProblem as exc:
        return Found(kind, path, None, exc)
    except (ValueError, TypeError, RecursionError, MemoryError) as exc:  # a bug here must not hide the loop
        return Found(kind, path, None, FileProblem(path, f"could not be read: {type(exc).__name__}"))


def candidates(root: Path) -> list[tuple[str, Path]]:
    """The neighbour files that exist in a workspace (a few `stat` calls; for the loops kept
    elsewhere, the end of one file read). The monitor looks on every snapshot: a path is made
    for what is there only (a `Path` to each absent file interned its name anew each time)."""
    folder = os.fspath(root)
    found = [
        (kind, root / rel) for kind, (rel, _) in FORMATS.items() if os.path.isfile(os.path.join(folder, rel))
    ]
    for kind, (locate, _reader) in LOCATED.items():
        path = locate(root)
        if path is not None:
            found.append((kind, path))
    return found


def detect(root: Path) -> list[Found]:
    """Every neighbour loop in the workspace `root`, in the order of `FORMATS`, then `LOCATED`."""
    return [read(kind, path) for kind, path in candidates(root)]


def loops_json(ours: dict[str, Any] | None, found: list[Found]) -> list[dict[str, Any]]:
    """`status --json`'s `loops`: loopdeck's own loop first, then the neighbours."""
    loops = [] if ours is None else [ours]
    return loops + [f.to_json() for f in found]
