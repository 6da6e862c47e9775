"""An escalation: why the loop needs a person, with the numbers, and what they can do.

Its keys are the main screen's (r resumes, p pauses, s skips, c completes, l shows the log), so a
person never has to learn two meanings for one key."""

from __future__ import annotations

from functools import partial

from textual.app import ComposeResult
from textual.containers import Grid, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static

from tui import actions
from tui.screens.modal import MODAL_CSS
from tui.widgets.footer import Footer

CHOICES = ("continue", "pause", "skip", "complete", "log")


class EscalationScreen(ModalScreen[str]):
    DEFAULT_CSS = (
        MODAL_CSS.format(name="EscalationScreen")
        + """
    EscalationScreen > Vertical { border: thick $error; width: 100; }
    EscalationScreen .title { color: $error; }
    EscalationScreen #choices {
        layout: grid; grid-size: 5; grid-rows: 3; grid-gutter: 0 1; height: auto; margin-top: 1;
    }
    EscalationScreen.-narrow #choices { grid-size: 3; }
    EscalationScreen #choices Button { width: 100%; min-width: 0; margin: 0; }
    """
    )
    BINDINGS = actions.bindings("escalation")

    def __init__(self, reason: str, numbers: str, raise_by: int) -> None:
        super().__init__()
        self.reason = reason
        self.numbers = numbers
        self.raise_by = raise_by

    def compose(self) -> ComposeResult:
        yield Footer(compact=True)  # the prompt's keys, Escape among them
        with Vertical():
            yield Label("ESCALATION: the loop needs a person", classes="title")
            with VerticalScroll(classes="body"):
                yield Static(self.reason, id="escalation-reason", markup=False)
                yield Static(self.numbers, id="escalation-numbers", markup=False)
            with Grid(id="choices"):
                key = partial(actions.key_label, self.app)
                yield Button(
                    f"Continue +{self.raise_by} {key('loop.resume')}", id="continue", variant="primary"
                )
                yield Button(f"Pause {key('loop.pause')}", id="pause")
                yield Button(f"Skip task {key('loop.skip')}", id="skip")
                yield Button(f"Complete {key('loop.complete')}", id="complete", variant="error")
                yield Button(f"Log {key('view.journal')}", id="log")

    def on_mount(self) -> None:
        self.app.bell()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(str(event.button.id))

    def action_choose(self, choice: str) -> None:
        self.dismiss(choice)
