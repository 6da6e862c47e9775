"""Carrying out what the engine decided: the only module that writes the loop's state file,
the task file's skip marks and the archive.

Every driver calls `carry_out` while holding the loop lock: the state written (or archived),
the task file marked for each skip, every command and event journaled, in that order. Two
writes are not decisions of the engine and are documented exceptions, kept here too so that
every write of the state has one home: `start` (a new loop, or one replacing an old) and
`restore_backup` (a person putting the last good copy back; the engine still decides which
queued commands that copy must not apply again).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from loop.core import engine
from loop.core.events import TURN_KINDS
from loop.core.model import LoopState, Result, same_loop
from loop.drivers import notify
from loop.store import control
from loop.store.archive import archive, move_logs
from loop.store.journal import Event, Journal
from loop.store.paths import Workspace
from loop.store.state import StateError, StateStore, current_loop

if TYPE_CHECKING:  # annotations only: the Stop hook does not pay for typing
    from typing import Any


def carry_out(
    ws: Workspace,
    store: StateStore,
    journal: Journal,
    before: LoopState,
    result: Result,
    now: datetime,
    end: int | None = None,
    bad: list[control.BadLine] | None = None,
    echo: Callable[[Event], None] | None = None,
) -> None:
    """Write `result` (under the caller's loop lock). `end` is how far the control queue was
    read for this decision: the state records it, so those commands are never applied again."""
    new = result.state
    if new is not None:
        if result.offset is not None:
            new.control_offset = result.offset
        elif end is not None:
            new.control_offset = end
        _effects(ws, store, new, result)
    iteration = new.iteration if new is not None else before.iteration
    for line in bad or []:
        event = journal.append("warning", iteration, {"message": control.bad_line_message(store, line)})
        if echo:
            echo(event)
    for command, outcome in result.applied:
        control.journal_applied(journal, iteration, command, outcome)
    for kind, data in result.events:
        # an event about the turn that just ended carries that turn's number, not the next one's
        at = before.iteration if kind in TURN_KINDS else iteration
        event = journal.append(kind, at, data, now=now)
        if echo:
            echo(event)
    if (new or before).notify:
        due = notify.messages(result.events, ws.root.name, iteration)
        if due:  # only the targets a person here confirmed for this loop are ever told anything
            from loop import trust

            notify.send_detached(ws.root, trust.confirmed_targets(ws, new or before), due)


def _effects(ws: Workspace, store: StateStore, new: LoopState, result: Result) -> None:
    effects = result.effects
    if effects.skip_tasks and new.task_path:
        from loop.sources.task_file import mark_current, resolve

        skipped = []
        for _ in range(effects.skip_tasks):
            try:
                item = mark_current(resolve(ws.root, new.task_path))
            except (OSError, ValueError) as exc:
                result.events.append(("warning", {"message": f"skip failed: {exc}"}))
                break
            if item is None:
                break
            skipped.append(("task-skipped", {"task": item.title, "line": item.line}))
        result.events[:0] = skipped
    if effects.archive is not None:
        store.write(new)
        folder = archive_completed(ws, new, effects.archive)
        result.events.append(("archived", {"folder": str(folder)}))
        return
    store.write(new)
    if effects.summary is not None:
        folder = archive_ending(ws, new, str(effects.summary.get("outcome", new.status)), effects.summary)
        result.events.append(("summary-kept", {"folder": str(folder)}))


def finish_archive(ws: Workspace, journal: Journal, state: LoopState) -> None:
    """Archive a loop the state file says is completed but that was never moved to its archive
    (a driver killed between writing the state and archiving it)."""
    summary = {"reason": "completed; archived when the next run started (the last one was interrupted)"}
    folder = archive_completed(ws, state, summary)
    journal.append("archived", state.iteration, {"folder": str(folder)})


def archive_completed(ws: Workspace, state: LoopState, summary: dict[str, Any]) -> Path:
    """A finished loop leaves the live state file for its archive folder, summary beside it.
    The archive keeps its own, wholly redacted copy (the live file keeps the commands and
    notification targets the loop needs as given), and the live file and its backup go."""
    folder = archive(ws, state, "completed", summary, reuse=True)
    move_logs(ws, state, folder)
    # its backup is of a loop that ended: restored, it would bring that loop back to life (it
    # goes first: a crash before the state goes leaves a completed state, archived again later)
    ws.backup.unlink(missing_ok=True)
    os.unlink(ws.state)
    return folder


def archive_ending(ws: Workspace, state: LoopState, how: str, summary: dict[str, Any]) -> Path:
    """Keep a summary of a run that ended without completing (stopped, escalated, failed)."""
    return archive(ws, state, how, summary, reuse=True)


# --- the two writes the engine does not decide ------------------------------------------------


PROMPT_KEPT = 16_000
"""Characters of the prompt the journal's `loop-started` keeps: enough to rebuild a state."""


def started_data(state: LoopState, **more: Any) -> dict[str, Any]:
    """What the journal's `loop-started` keeps of a new loop: which loop it is (`started_at`,
    `loop_id`, what a restore and a rebuild check the backup against) and what a state rebuilt from the
    journal needs (the prompt, the task file, the checks, the limits)."""
    data: dict[str, Any] = {
        "max_iterations": state.max_iterations,
        "started_at": state.started_at,
        "prompt": state.prompt[:PROMPT_KEPT],
        "promise": state.promise,
        "task_file": state.task_file,
        "check_tasks": state.check_tasks,
        "check_github": state.check_github,
        "verify": list(state.verify),
    }
    if state.loop_id:
        data["loop_id"] = state.loop_id
    if state.github_project_id:
        data["github_project"] = state.github_project_id
    if state.limits:
        data["limits"] = dict(state.limits)
    return {**data, **more}


def start(
    ws: Workspace,
    store: StateStore,
    journal: Journal,
    state: LoopState,
    *,
    force: bool = False,
    before: Callable[[], None] | None = None,
) -> None:
    """Write a new loop's state (under the caller's loop lock). An active loop in the way is an
    error unless `force`, which archives it; a corrupt file is moved aside, never deleted.
    `before`: called once nothing refuses the loop, just before it is written (a person's
    confirmation is recorded there: a process killed after the write lost no confirmation)."""
    store.checked(state)  # a state that would not read back is refused before anything is archived
    replace_corrupt = False
    try:
        old = store.read()
    except StateError as exc:
        if not force:
            from loop.core.errors import LoopdeckError

            raise LoopdeckError(
                f"{exc}\nThe existing state file is corrupt; fix it, or pass --force to move "
                "it aside and start a new loop"
            ) from None
        old, replace_corrupt = None, True
    if old is not None:
        if old.active and not force:
            from loop.core.errors import LoopdeckError

            raise LoopdeckError(
                f"a loop is already {old.status} in {ws.root} (iteration {old.iteration}); "
                "pass --force to archive it and start a new one"
            )
        folder = archive(ws, old, "replaced by a new loop" if old.active else old.status)
        if not same_loop(old.started_at, old.loop_id, state.started_at, state.loop_id):
            move_logs(ws, old, folder)
        journal.append("warning", old.iteration, {"message": f"previous loop archived in {folder}"})
    if before is not None:
        before()
    store.write(state, replace_corrupt=replace_corrupt)


def restore_backup(ws: Workspace, now: datetime) -> LoopState:
    """Put the last good state back (the current file is moved aside, never deleted), without
    re-applying a command the newer state had already applied."""
    store = StateStore(ws)
    journal = Journal(ws.journal)
    with store.locked():
        backup = store.read_backup()
        if backup is None:
            raise StateError(ws.backup, "no backup to restore")
        queued, _bad, _end = control.read_since(ws.control, backup.control_offset)
        applied = control.applied_ids(journal, within=max(500, 2 * len(queued)))
        result = engine.restore(backup, queued, applied, current_loop(ws, journal))
        if result.state is None:
            raise StateError(ws.backup, result.system_message or "not the loop in this folder")
        store.restore_backup()
        carry_out(ws, store, journal, backup, result, now)
        return result.state


def rebuild_from_journal(ws: Workspace, now: datetime) -> tuple[LoopState, list[str]]:
    """Replace a corrupt state with one rebuilt from the journal (and the backup's prompt and
    settings, when it reads): the corrupt file is moved aside as `….corrupt-<time>`, never
    deleted; the engine decides what the events mean. Returns the state and what was rebuilt."""
    store = StateStore(ws)
    journal = Journal(ws.journal)
    with store.locked():
        try:
            base = store.read_backup()
        except StateError:
            base = None
        current = current_loop(ws, journal)
        if (
            base is not None
            and current is not None
            and not same_loop(base.started_at, base.loop_id, *current)
        ):
            base = None  # the backup of a loop before this one: nothing of it is this loop's
        events = journal.read_from(0, limit_bytes=64 * 1024 * 1024).events
        queued, _bad, _end = control.read_since(ws.control, 0)
        applied = control.applied_ids(journal, within=max(500, 2 * len(queued)), budget=64 * 1024 * 1024)
        result, report = engine.rebuild(base, events, queued, applied)
        assert result.state is not None
        store.write(result.state, replace_corrupt=True)
        carry_out(ws, store, journal, result.state, result, now)
        return result.state, report
