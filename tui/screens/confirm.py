"""Yes or no, with y / n / escape bound."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static

from tui import actions
from tui.screens.modal import MODAL_CSS
from tui.widgets.footer import Footer


class ConfirmScreen(ModalScreen[bool]):
    DEFAULT_CSS = MODAL_CSS.format(name="ConfirmScreen")
    BINDINGS = actions.bindings("confirm")

    def __init__(self, question: str, detail: str = "", yes: str = "Yes", no: str = "No") -> None:
        super().__init__()
        self.question = question
        self.detail = detail
        self.yes, self.no = yes, no

    def compose(self) -> ComposeResult:
        yield Footer(compact=True)  # the prompt's keys, Escape among them
        with Vertical():
            yield Label(self.question, classes="title")
            if self.detail:
                with VerticalScroll(classes="body"):
                    yield Static(self.detail, markup=False)
            with Horizontal(classes="buttons"):
                yield Button(f"{self.no} {actions.key_label(self.app, 'confirm.no')}", id="no")
                yield Button(
                    f"{self.yes} {actions.key_label(self.app, 'confirm.yes')}", id="yes", variant="primary"
                )

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, value: bool) -> None:
        self.dismiss(value)
