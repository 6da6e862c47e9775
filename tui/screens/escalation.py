"""An escalation: why the loop needs a person, with the numbers, and what they can do.

Its keys are the main screen's (r resumes, p pauses, s skips, c completes, l shows the log), so a
person never has to learn two meanings for one key."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label

from tui.screens.confirm import MODAL_CSS

CHOICES = ("continue", "pause", "skip", "complete", "log")


class EscalationScreen(ModalScreen[str]):
    DEFAULT_CSS = (
        MODAL_CSS.format(name="EscalationScreen")
        + """
    EscalationScreen > Vertical { border: thick $error; width: 100; }
    EscalationScreen Button { min-width: 12; }
    EscalationScreen .title { color: $error; }
    """
    )
    BINDINGS = [
        Binding("r", "choose('continue')", "Continue", id="escalation.continue"),
        Binding("p", "choose('pause')", "Pause", id="escalation.pause"),
        Binding("s", "choose('skip')", "Skip task", id="escalation.skip"),
        Binding("c", "choose('complete')", "Force completion", id="escalation.complete"),
        Binding("l", "choose('log')", "Open log", id="escalation.log"),
        Binding("escape", "choose('dismiss')", "Later", show=False),
    ]

    def __init__(self, reason: str, numbers: str, raise_by: int) -> None:
        super().__init__()
        self.reason = reason
        self.numbers = numbers
        self.raise_by = raise_by

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label("ESCALATION: the loop needs a person", classes="title")
            yield Label(self.reason, id="escalation-reason")
            yield Label(self.numbers, id="escalation-numbers")
            with Horizontal():
                yield Button(f"Continue +{self.raise_by} \\[r]", id="continue", variant="primary")
                yield Button("Pause \\[p]", id="pause")
                yield Button("Skip task \\[s]", id="skip")
                yield Button("Complete \\[c]", id="complete", variant="error")
                yield Button("Log \\[l]", id="log")

    def on_mount(self) -> None:
        self.app.bell()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(str(event.button.id))

    def action_choose(self, choice: str) -> None:
        self.dismiss(choice)
