"""Carrying out an engine decision: the one place where the drivers touch files for it.

Both drivers call `commit_decision` while holding the loop lock: state written (or archived),
the task file marked for a skip, every command and event journaled, in that order.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime

from loop import control, engine
from loop.archive import archive
from loop.journal import Event, Journal
from loop.paths import Workspace
from loop.state import LoopState, StateStore


def commit_decision(
    ws: Workspace,
    store: StateStore,
    journal: Journal,
    before: LoopState,
    result: engine.Result,
    end: int,
    bad: list[control.BadLine],
    now: datetime,
    echo: Callable[[Event], None] | None = None,
) -> None:
    new = result.state
    if new is not None:
        new.control_offset = end
        _carry_out(ws, store, new, result)
    iteration = new.iteration if new is not None else before.iteration
    for line in bad:
        event = journal.append("warning", iteration, {"message": control.bad_line_message(store, line)})
        if echo:
            echo(event)
    for command, outcome in result.applied:
        control.journal_applied(journal, iteration, command, outcome)
    for kind, data in result.events:
        event = journal.append(kind, iteration, data, now=now)
        if echo:
            echo(event)


def _carry_out(ws: Workspace, store: StateStore, new: LoopState, result: engine.Result) -> None:
    effects = result.effects
    if effects.skip_task and new.task_path:
        from loop.sources.task_file import mark_current, resolve

        try:
            item = mark_current(resolve(ws.root, new.task_path))
        except (OSError, ValueError) as exc:
            result.events.append(("warning", {"message": f"skip failed: {exc}"}))
        else:
            if item is not None:
                result.events.insert(0, ("task-skipped", {"task": item.title, "line": item.line}))
    if effects.archive is not None:
        store.write(new)
        folder = archive(ws, new, "completed", effects.archive)
        os.replace(ws.state, folder / "state.md")
        result.events.append(("archived", {"folder": str(folder)}))
        return
    store.write(new)
