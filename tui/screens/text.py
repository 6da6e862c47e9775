"""Read-only text (help, a verification's output) and a free-text answer (a question)."""

from __future__ import annotations

from rich.console import RenderableType
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Markdown, Static

from tui import actions
from tui.screens.modal import MODAL_CSS
from tui.widgets.footer import Footer


class TextScreen(ModalScreen[None]):
    """Text to read, as long as it is: it scrolls (arrows, PgUp/PgDn, the mouse), with a
    scrollbar that shows, and the box's bottom edge says how much is left below."""

    DEFAULT_CSS = (
        MODAL_CSS.format(name="TextScreen")
        + """
    TextScreen > Vertical { width: 90%; height: 80%; border-subtitle-color: $accent; }
    TextScreen.-short > Vertical { height: 100%; }
    TextScreen.-short .title { margin-bottom: 0; }
    TextScreen VerticalScroll {
        height: 1fr; scrollbar-size-vertical: 1;
        scrollbar-color: $accent 70%; scrollbar-color-hover: $accent; scrollbar-background: $panel;
    }
    """
    )
    BINDINGS = actions.bindings("text")

    def __init__(
        self, title: str, body: str, markdown: bool = False, renderable: RenderableType | None = None
    ) -> None:
        """`body` is the text (Markdown with `markdown`); `renderable`, when given, is what is
        drawn instead (the help's table), `body` its plain words."""
        super().__init__()
        self.title_text = title
        self.body = body
        self.markdown = markdown
        self.renderable = renderable

    def compose(self) -> ComposeResult:
        yield Footer(compact=True)  # the prompt's keys, Escape among them
        with Vertical():
            yield Label(self.title_text, classes="title")
            with VerticalScroll():
                if self.renderable is not None:
                    yield Static(self.renderable)
                elif self.markdown:
                    yield Markdown(self.body)
                else:
                    yield Static(self.body, markup=False)

    def on_mount(self) -> None:
        scroll = self.query_one(VerticalScroll)
        scroll.focus()  # the arrows and PgUp/PgDn scroll at once
        self.watch(scroll, "scroll_y", lambda: self.show_position(), init=False)
        self.watch(scroll, "virtual_size", lambda: self.show_position(), init=False)
        self.call_after_refresh(self.show_position)

    def show_position(self) -> None:
        """`↓ 40% · PgDn, ↑↓ scroll` on the box's edge while there is more below; `end` once at
        the bottom; nothing when it all fits."""
        scroll = self.query_one(VerticalScroll)
        box = self.query_one(Vertical)
        most = scroll.max_scroll_y
        if most <= 0:
            box.border_subtitle = ""
        elif scroll.scroll_y >= most:
            box.border_subtitle = "end · ↑ PgUp to go back"
        else:
            seen = int(100 * (scroll.scroll_y + scroll.size.height) / max(1, scroll.virtual_size.height))
            box.border_subtitle = f"↓ more below ({seen}% seen) · ↑↓ PgUp PgDn scroll"

    def action_close(self) -> None:
        self.dismiss(None)


class NoteScreen(ModalScreen[str | None]):
    """A note for the agent: it goes into the next prompt, once (`loopdeck say`)."""

    DEFAULT_CSS = MODAL_CSS.format(name="NoteScreen")
    BINDINGS = actions.bindings("note")

    def compose(self) -> ComposeResult:
        yield Footer(compact=True)  # the prompt's keys, Escape among them
        with Vertical():
            yield Label("A note for the agent", classes="title")
            yield Input(placeholder="what it should know (Enter sends it; it reaches the next prompt once)")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.value.strip():
            self.dismiss(event.value.strip())

    def action_cancel(self) -> None:
        self.dismiss(None)


class QuestionScreen(ModalScreen[str | None]):
    DEFAULT_CSS = MODAL_CSS.format(name="QuestionScreen")
    BINDINGS = actions.bindings("question")

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        yield Footer(compact=True)  # the prompt's keys, Escape among them
        with Vertical():
            yield Label("The agent asks:", classes="title")
            with VerticalScroll(classes="body"):
                yield Static(self.question, markup=False)
            yield Input(placeholder="your answer (Enter sends it; it goes into the next prompt)")

    def on_mount(self) -> None:
        self.app.bell()
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.value.strip():
            self.dismiss(event.value.strip())

    def action_later(self) -> None:
        self.dismiss(None)
