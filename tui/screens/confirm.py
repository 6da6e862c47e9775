"""Yes or no, with y / n / escape bound."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label

MODAL_CSS = """
{name} {{ align: center middle; }}
{name} > Vertical {{
    width: 70; height: auto; max-height: 90%; border: thick $primary; background: $surface; padding: 1 2;
}}
{name} .title {{ text-style: bold; margin-bottom: 1; width: 100%; }}
{name} Horizontal {{ height: auto; margin-top: 1; align-horizontal: right; }}
{name} Button {{ margin-left: 1; }}
"""


class ConfirmScreen(ModalScreen[bool]):
    DEFAULT_CSS = MODAL_CSS.format(name="ConfirmScreen") + "ConfirmScreen Label { width: 100%; }"
    BINDINGS = [
        Binding("y", "answer(True)", "Yes", id="confirm.yes"),
        Binding("n", "answer(False)", "No", id="confirm.no"),
        Binding("escape", "answer(False)", "Cancel", show=False),
    ]

    def __init__(self, question: str, detail: str = "", yes: str = "Yes", no: str = "No") -> None:
        super().__init__()
        self.question = question
        self.detail = detail
        self.yes, self.no = yes, no

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self.question, classes="title")
            if self.detail:
                yield Label(self.detail)
            with Horizontal():
                yield Button(f"{self.no} \\[n]", id="no")
                yield Button(f"{self.yes} \\[y]", id="yes", variant="primary")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, value: bool) -> None:
        self.dismiss(value)
