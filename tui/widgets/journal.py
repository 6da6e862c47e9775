"""Journal: a live tail of the loop's events, coloured by kind, filtered by a search."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Input, Static

from loop.journal import Event, message
from loop.timeutil import log_stamp

KIND_CLASS = {
    "error": "journal--error",
    "failed": "journal--error",
    "verification-failed": "journal--error",
    "agent-failed": "journal--error",
    "escalation": "journal--escalation",
    "warning": "journal--warning",
    "paused": "journal--warning",
    "stopped": "journal--warning",
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
    JournalPanel > VerticalScroll { height: 1fr; }
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

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.events: tuple[Event, ...] = ()
        self.query_text = ""
        """The search: only events whose line contains it (case-insensitive) are shown."""

    def compose(self) -> ComposeResult:
        yield Input(placeholder="search the journal (Enter keeps it, Escape clears)", id="journal-search")
        with VerticalScroll(id="journal-scroll"):
            yield Static(id="journal-lines")

    def on_mount(self) -> None:
        self.border_title = "Journal"

    def show_events(self, events: tuple[Event, ...]) -> None:
        if events == self.events:
            return
        self.events = events
        self.redraw()

    def redraw(self) -> None:
        wanted = self.query_text.lower()
        text = Text()
        shown = 0
        for event in self.events:
            line = f"{log_stamp(event.ts)[11:19]} {event.kind:<20} {message(event)}"
            if wanted and wanted not in line.lower():
                continue
            style = self.get_component_rich_style(KIND_CLASS[event.kind]) if event.kind in KIND_CLASS else ""
            if shown:
                text.append("\n")
            text.append(line, style=style)
            shown += 1
        if not shown:
            text = Text("no events" + (f" matching {self.query_text!r}" if wanted else ""))
        self.query_one("#journal-lines", Static).update(text)
        self.border_subtitle = f"{shown} of {len(self.events)}" + (f" · /{self.query_text}" if wanted else "")
        scroll = self.query_one(VerticalScroll)
        scroll.scroll_end(animate=False)

    def start_search(self) -> None:
        self.add_class("-searching")
        self.query_one(Input).focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        self.query_text = event.value.strip()
        self.redraw()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.remove_class("-searching") if not self.query_text else None
        self.screen.set_focus(None)

    def clear_search(self) -> None:
        search = self.query_one(Input)
        search.value = ""
        self.query_text = ""
        self.remove_class("-searching")
        self.redraw()
