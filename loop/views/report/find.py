"""Which loop a report is about, and its events in the journal.

The journal is the one record every driver keeps (the hook, the runner, the workers, a loop on
a server that leaves one here): a loop's events are the ones from its `loop-started` to the
next loop's.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from loop.core.model import JournalEvent, same_loop
from loop.store.journal import Journal
from loop.store.paths import Workspace
from loop.views.report.model import ReportError

JOURNAL_CHUNK = 8 * 1024 * 1024


def find_archive(ws: Workspace, wanted: str) -> Path:
    """The archive folder named `wanted`: its folder name, a prefix of it, or the loop's id."""
    folder = ws.archive_dir
    try:
        names = sorted(entry.name for entry in os.scandir(folder) if entry.is_dir(follow_symlinks=False))
    except (FileNotFoundError, NotADirectoryError):
        raise ReportError(f"no archived loops in {folder}") from None
    exact = [n for n in names if n == wanted or n.rsplit("-", 1)[-1].split(".")[0] == wanted]
    found = exact or [n for n in names if n.startswith(wanted)]
    if not found:
        raise ReportError(f"no archived loop {wanted!r} in {folder} (`ls {folder}` lists them)")
    if len(found) > 1 and not exact:
        raise ReportError(f"{wanted!r} names {len(found)} archived loops in {folder}: give more of the name")
    return folder / found[-1]


def summary(folder: Path) -> dict[str, Any]:
    """An archive's `summary.json`; empty when it cannot be read."""
    try:
        data = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def last_start(ws: Workspace) -> JournalEvent | None:
    """The journal's last `loop-started`."""
    found = Journal(ws.journal).tail(1, where=lambda e: e.kind == "loop-started", budget=64 * 1024 * 1024)
    return found.events[-1] if found.events else None


def archive_is(folder: Path, start: JournalEvent) -> bool:
    """Does the archive in `folder` hold the loop that `start` began?"""
    record = summary(folder)
    return _same(start.data, str(record.get("started_at") or ""), str(record.get("loop_id") or ""))


def loop_events(ws: Workspace, started_at: str, loop_id: str, live: bool) -> tuple[list[JournalEvent], bool]:
    """The journal's events of one loop: from its `loop-started` to the next loop's. A live
    loop whose start the journal lost (cut, or older than loops with ids) gets the events since
    the journal's last start; an archived one gets none. The second value: whether its start
    was found."""
    mine: list[JournalEvent] = []
    since_last: list[JournalEvent] = []
    found = inside = False
    for event in _all_events(Journal(ws.journal)):
        if event.kind == "loop-started":
            since_last = []
            if _same(event.data, started_at, loop_id):
                found = inside = True
                mine = []
            else:
                inside = False
        if inside:
            mine.append(event)
        since_last.append(event)
    if found:
        return mine, True
    return (since_last if live else []), False


def _same(start: Mapping[str, Any], started_at: str, loop_id: str) -> bool:
    """Is the loop a `loop-started` event's data names the one started at `started_at`?"""
    return same_loop(started_at, loop_id, str(start.get("started_at") or ""), str(start.get("loop_id") or ""))


def _all_events(journal: Journal) -> Iterator[JournalEvent]:
    offset = 0
    while True:
        got = journal.read_from(offset, limit_bytes=JOURNAL_CHUNK)
        yield from got.events
        if got.offset <= offset:
            return
        offset = got.offset
