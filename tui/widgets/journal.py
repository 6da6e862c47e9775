"""Journal: a live tail of the loop's events, coloured by kind, filtered by a search.

A running loop appends events several times a second; the panel writes only the new ones
(a `RichLog` renders each line once). It redraws everything only when the journal was replaced
or truncated (the events it showed are no longer there) or when the search changes.
"""

from __future__ import annotations

from rich.cells import cell_len
from rich.style import Style
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.reactive import var

from loop.core.timeutil import log_stamp
from loop.store.journal import Event, message
from loop.views.snapshot import JOURNAL_TAIL, Snapshot
from tui.widgets.common import set_border, wrap_words
from tui.widgets.search import SearchInput
from tui.widgets.tail_log import TailLog

HANGING_MIN = 32
"""Columns a message needs beside the time and kind; a narrower journal drops the kind column
(the message and its colour say what happened) and wraps the message under itself beside the
time. 32: a worker's branch in its message (`(loopdeck/20260109T095712/2)`) keeps a line."""
KIND_WIDTH = 20

KIND_CLASS = {
    "error": "journal--error",
    "failed": "journal--error",
    "verification-failed": "journal--error",
    "agent-failed": "journal--error",
    "escalation": "journal--escalation",
    "warning": "journal--warning",
    "paused": "journal--warning",
    "stopped": "journal--warning",
    "agent-switched": "journal--warning",
    "verification-passed": "journal--good",
    "completed": "journal--good",
    "commit": "journal--good",
    "blocked": "journal--muted",
    "command-applied": "journal--command",
    "command-sent": "journal--command",
}


class JournalPanel(Vertical):
    DEFAULT_CSS = """
    JournalPanel { border: round $primary 50%; height: 1fr; min-height: 6; }
    JournalPanel #journal-search { display: none; height: 3; }
    JournalPanel.-searching #journal-search { display: block; }
    JournalPanel > RichLog { height: 1fr; background: transparent; }
    JournalPanel > .journal--error { color: $error; }
    JournalPanel > .journal--escalation { color: $error; text-style: bold reverse; }
    JournalPanel > .journal--warning { color: $warning; }
    JournalPanel > .journal--good { color: $success; }
    JournalPanel > .journal--muted { color: $text-muted; }
    JournalPanel > .journal--command { color: $accent; }
    """
    ALLOW_MAXIMIZE = True
    COMPONENT_CLASSES = {
        "journal--error",
        "journal--escalation",
        "journal--warning",
        "journal--good",
        "journal--muted",
        "journal--command",
    }

    snapshot: var[Snapshot | None] = var(None, init=False)
    """The workspace as last read (bound to the app's): its journal's tail is shown."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.events: tuple[Event, ...] = ()
        self.matches: list[bool] = []
        """For each of `events`, whether the search lets it through."""
        self.query_text = ""
        """The search: only events whose line contains it (case-insensitive) are shown."""
        self.redraws = 0
        self.lines_written = 0
        """Counts for tests and benches: full redraws, and event lines written in all."""
        self.placeholder = False
        self.width = 0

    def compose(self) -> ComposeResult:
        yield SearchInput(
            placeholder="search the journal (Enter keeps it, Escape clears)", id="journal-search"
        )
        yield TailLog(id="journal-lines", wrap=True, max_lines=JOURNAL_TAIL, auto_scroll=True)

    def on_mount(self) -> None:
        self.border_title = "Journal"

    def on_resize(self, event: events.Resize) -> None:
        """A line is wrapped when it is written: a new width (or the first one known, after
        lines written before it) wraps everything again."""
        if event.size.width != self.width:
            self.width = event.size.width
            if self.events:
                self.redraw()

    def watch_snapshot(self, snapshot: Snapshot | None) -> None:
        if snapshot is not None:
            self.show_events(snapshot.events)

    def show_events(self, events: tuple[Event, ...]) -> None:
        if events == self.events:
            return
        added = appended(self.events, events)
        if added is None or self.placeholder:
            self.events = events
            self.redraw()
            return
        dropped = len(self.events) + len(added) - len(events)
        self.events = events
        self.matches = self.matches[dropped:]
        self.write_events(added)
        self.show_count()

    def write_events(self, events: tuple[Event, ...]) -> None:
        """The events' lines, those the search wants, added to the log in one go (one scroll)."""
        log = self.query_one(TailLog)
        width = log.scrollable_content_region.width
        wanted = self.query_text.lower()
        texts = []
        for event in events:
            stamp = f"{log_stamp(event.ts)[11:19]} "
            kind = f"{event.kind:<{KIND_WIDTH}} "
            body = message(event)
            match = not wanted or wanted in (stamp + kind + body).lower()
            self.matches.append(match)
            if match:
                look = KIND_CLASS.get(event.kind)
                style = self.get_component_rich_style(look) if look is not None else ""
                head = stamp + kind if width - len(stamp + kind) >= HANGING_MIN else stamp
                texts.append(self.hanging(head, body, width, style))
        # Written at the log's width: left to measure itself, a line is cut to the console's
        # width, which can be narrower than the log (a headless console is 80 wide).
        log.write_texts(texts, width=width if width > 0 else None)
        self.lines_written += len(texts)

    def hanging(self, head: str, body: str, width: int, style: Style | str) -> Text:
        """An event's line with its message wrapped under itself, clear of the time (and kind)
        columns; plain when even that leaves the message too little room."""
        room = width - len(head)
        if room < 12 or len(head) + cell_len(body) <= width:
            return Text(head + body, style=style)
        lines = wrap_words(body, room, room)  # a branch or a path breaks after a `/`
        return Text(head + ("\n" + " " * len(head)).join(lines), style=style)

    def redraw(self) -> None:
        """Everything again: a new journal, or a new search."""
        self.redraws += 1
        log = self.query_one(TailLog)
        log.clear()
        self.matches = []
        self.placeholder = False
        self.write_events(self.events)
        if not any(self.matches):
            log.write(Text("no events" + (f" matching {self.query_text!r}" if self.query_text else "")))
            self.placeholder = True
        self.show_count()

    def show_count(self) -> None:
        shown = sum(self.matches)
        wanted = self.query_text
        set_border(self, subtitle=f"{shown} of {len(self.events)}" + (f" · /{wanted}" if wanted else ""))

    def start_search(self) -> None:
        self.add_class("-searching")
        self.query_one(SearchInput).open()

    def on_input_changed(self, event: SearchInput.Changed) -> None:
        self.query_text = event.value.strip()
        self.redraw()

    def on_search_input_kept(self, event: SearchInput.Kept) -> None:
        self.keep_search()

    def on_input_submitted(self, event: SearchInput.Submitted) -> None:
        self.keep_search()

    def on_search_input_cleared(self, event: SearchInput.Cleared) -> None:
        self.clear_search()

    def keep_search(self) -> None:
        """The filter stays (shown in the border); the box goes when it is empty, and the keys
        go back to the screen."""
        if not self.query_text:
            self.remove_class("-searching")
        self.query_one(SearchInput).give_back()
        self.screen.refresh_bindings()

    @property
    def searching(self) -> bool:
        """A search is open or filters the journal: Escape clears it before anything else."""
        return bool(self.query_text) or self.has_class("-searching")

    def clear_search(self) -> None:
        search = self.query_one(SearchInput)
        was = self.query_text
        search.value = ""
        self.query_text = ""
        self.remove_class("-searching")
        if search.has_focus:
            search.give_back()
        if was:
            self.redraw()
        self.screen.refresh_bindings()


def appended(old: tuple[Event, ...], new: tuple[Event, ...]) -> tuple[Event, ...] | None:
    """The events `new` adds after `old`, when `new` is `old`'s window moved forward (the journal
    grew); None when it is not (the journal was replaced or truncated): redraw then."""
    if not old:
        return None
    last = old[-1]
    for j in range(len(new) - 1, -1, -1):
        if new[j] == last:
            overlap = min(j + 1, len(old))
            if new[j + 1 - overlap : j + 1] == old[len(old) - overlap :]:
                return new[j + 1 :]
            return None
    return None
