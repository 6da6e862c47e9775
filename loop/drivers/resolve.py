"""The facts an agent turn resolving a conflict needs beyond the hunks: both sides' intent.
Ours is the task's title; theirs, the tasks (or commits) that landed the other lines on the
loop's branch since the task's branch left it (`loop.repo.landing.sides`), named by the graph's
titles. The words the agent reads are `loop.core.conflicts`'."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from loop.core.errors import LoopdeckError
from loop.core.scheduler import Worker
from loop.drivers.session import Session
from loop.repo import landing
from loop.views.landed import task_titles


def intent(
    root: Path, session: Session, worker: Worker, loop_branch: str | None, files: Sequence[str]
) -> tuple[str, list[tuple[str, str]]]:
    """(the task's title, [(task, title) of each other side]); nothing when there is no
    conflict or git cannot say (the hunks alone then go back)."""
    if not files or loop_branch is None or worker.branch is None:
        return "", []
    try:
        found = landing.sides(root, worker.branch, loop_branch, list(files))
    except LoopdeckError:
        found = []
    titles = task_titles(session.ws, session.store.read())
    theirs = [(task, titles.get(task, "") if task else subject) for task, subject in found]
    return titles.get(worker.task, ""), theirs
