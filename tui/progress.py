"""The loop's progress per iteration, read from the whole journal, a little at a time.

The snapshot holds the journal's last 300 events; the Progress view draws every iteration since
the loop began. This reader keeps only the kinds of event the series is made of
(`loop.views.progress.KINDS`) and, on each look, reads only what was appended since the last one. It
watches nothing: the app asks it on its existing refresh path (each snapshot read).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from textual.message import Message

from loop.core.model import JournalEvent
from loop.store.journal import Journal
from loop.views.progress import KINDS, Series, series

CHUNK = 8 * 1024 * 1024
"""The most one read takes at once (`Journal.read_from`'s window)."""


class ProgressReady(Message):
    """A fresh series for the Progress view and the main screen's progress panel."""

    def __init__(self, series: Series) -> None:
        super().__init__()
        self.series = series


class ProgressReader:
    """One journal's series, kept up to date by reading only what was appended. A journal that
    was replaced (a new loop) or cut shorter is read again from the start."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.events: list[JournalEvent] = []
        self.offset = 0
        self.file: tuple[int, int] | None = None
        self.last: Series = Series()
        self.lock = threading.Lock()
        """One read at a time: the app's reads run on worker threads, which may overlap."""

    def read(self) -> Series:
        with self.lock:
            return self._read()

    def _read(self) -> Series:
        try:
            info = os.stat(self.path)
        except OSError:
            self._reset()
            return self._series(changed=True)
        file = (info.st_dev, info.st_ino)
        changed = False
        if file != self.file or info.st_size < self.offset:
            self._reset()
            self.file = file
            changed = True
        journal = Journal(self.path)
        while info.st_size > self.offset:
            found = journal.read_from(self.offset, CHUNK)
            if found.offset <= self.offset:
                break  # an unfinished last line: read whole next time
            self.offset = found.offset
            new = [e for e in found.events if e.kind in KINDS]
            self.events += new
            changed = changed or bool(new)
        return self._series(changed)

    def _series(self, changed: bool) -> Series:
        if changed:
            self.last = series(self.events)
        return self.last

    def _reset(self) -> None:
        self.events = []
        self.offset = 0
        self.file = None
