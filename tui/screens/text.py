"""Read-only text (help, a verification's output) and a free-text answer (a question)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Markdown, Static

from tui import actions
from tui.screens.modal import MODAL_CSS
from tui.widgets.footer import Footer


class TextScreen(ModalScreen[None]):
    DEFAULT_CSS = (
        MODAL_CSS.format(name="TextScreen")
        + """
    TextScreen > Vertical { width: 90%; height: 80%; }
    TextScreen VerticalScroll { height: 1fr; }
    """
    )
    BINDINGS = actions.bindings("text")

    def __init__(self, title: str, body: str, markdown: bool = False) -> None:
        super().__init__()
        self.title_text = title
        self.body = body
        self.markdown = markdown

    def compose(self) -> ComposeResult:
        yield Footer(compact=True)  # the prompt's keys, Escape among them
        with Vertical():
            yield Label(self.title_text, classes="title")
            with VerticalScroll():
                yield Markdown(self.body) if self.markdown else Static(self.body, markup=False)

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
