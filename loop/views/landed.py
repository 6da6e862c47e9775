"""What a loop of workers landed and what its tasks are called, read one way by everyone who
asks: `loopdeck undo`, the monitor's undo, and a conflict's agent turn (the two sides' titles).

A task is landed while its last `task-merged` event is not followed by a `task-undone` for it.
The `task-merged` event records the landed commit (`sha`) and where the loop's branch was just
before the landing (`before`). The journal is loopdeck's file, out of the agents' reach, so an
undo trusts `before`; the backup ref in git (`loop.repo.landing.backup`), which an agent could
plant or move, is only checked against it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from loop.core import scheduler
from loop.core.errors import LoopdeckError
from loop.core.model import JournalEvent, LoopState
from loop.sources import taskgraph
from loop.store import archive
from loop.store.paths import Workspace
from loop.store.state import StateStore
from loop.store.statetext import parse

MERGED, UNDONE = "task-merged", "task-undone"


@dataclass(frozen=True)
class Landing:
    """A task's last landing: the commit it landed as and where the loop's branch was before
    ("" when the journal does not say)."""

    task: str
    sha: str = ""
    before: str = ""
    undone: str = ""
    """When it was undone (the `task-undone` event's time); "" while it stays landed."""


def landings(events: Iterable[JournalEvent], found: dict[str, Landing] | None = None) -> dict[str, Landing]:
    """Task id → its last landing, undone ones included, in the order of each task's last
    event (adding `events` to `found`, so a reader can go on from where it stopped)."""
    found = {} if found is None else found
    for event in events:
        if event.kind not in (MERGED, UNDONE) or event.data.get("task") is None:
            continue
        task = str(event.data["task"])
        last = found.pop(task, None)
        if event.kind == MERGED:
            data = event.data
            found[task] = Landing(task, str(data.get("sha") or ""), str(data.get("before") or ""))
        else:
            found[task] = replace(last or Landing(task), undone=event.ts)
    return found


def undone(events: Sequence[JournalEvent]) -> list[Landing]:
    """The tasks `loopdeck undo` took back since the last loop started, that no run landed
    again: that loop's summary counted them done."""
    start = max((i for i, e in enumerate(events) if e.kind == "loop-started"), default=0)
    return [one for one in landings(events[start:]).values() if one.undone]


def landed(found: dict[str, Landing]) -> list[Landing]:
    """The landings not undone, oldest first."""
    return [one for one in found.values() if not one.undone]


def loop_graph(ws: Workspace, state: LoopState | None = None) -> Path | None:
    """The loop's task graph: the live loop's (`state`, when read already), else the latest
    archived loop's; None when neither names a graph that is there."""
    for candidate in _states(ws, state):
        if scheduler.SECTION in candidate.extra:
            name = scheduler.board_of(candidate).graph
            if name and Path(name).exists():
                return Path(name)
    return None


def task_titles(ws: Workspace, state: LoopState | None = None) -> dict[str, str]:
    """Task titles by id, from the loop's graph (`loop_graph`); none when it cannot be read."""
    graph = loop_graph(ws, state)
    if graph is None:
        return {}
    try:
        return {task.id: task.subject for task in taskgraph.read(graph)}
    except (OSError, LoopdeckError, ValueError):
        return {}


def _states(ws: Workspace, state: LoopState | None) -> Iterable[LoopState]:
    """The live loop's state, then the latest archived one's, each read only when needed."""
    if state is None:
        with contextlib.suppress(OSError, LoopdeckError, ValueError):
            state = StateStore(ws).read()
    if state is not None:
        yield state
    folder = archive.latest(ws)
    archived = None
    if folder is not None:
        with contextlib.suppress(OSError, LoopdeckError, ValueError):
            archived = parse((folder / "state.md").read_bytes(), folder / "state.md")
    if archived is not None:
        yield archived
