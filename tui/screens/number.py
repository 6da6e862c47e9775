"""Ask for a whole number (the new max iterations)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label

from tui import actions
from tui.screens.modal import MODAL_CSS
from tui.widgets.footer import Footer


class NumberScreen(ModalScreen[int | None]):
    DEFAULT_CSS = MODAL_CSS.format(name="NumberScreen")
    BINDINGS = actions.bindings("number")

    def __init__(self, question: str, value: int) -> None:
        super().__init__()
        self.question = question
        self.value = value

    def compose(self) -> ComposeResult:
        yield Footer(compact=True)  # the prompt's keys, Escape among them
        with Vertical():
            yield Label(self.question, classes="title")
            yield Input(str(self.value), type="integer", id="number")
            yield Label("Enter to set, Escape to cancel; 0 = no limit", id="number-help")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        try:
            value = int(event.value)
        except ValueError:
            self.query_one("#number-help", Label).update("a whole number, please (0 = no limit)")
            return
        if value < 0:
            self.query_one("#number-help", Label).update("0 or more, please (0 = no limit)")
            return
        self.dismiss(value)

    def action_cancel(self) -> None:
        self.dismiss(None)
