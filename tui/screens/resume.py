"""At start, for an interrupted loop: seed 003 §4.4.4's question, with the uncommitted changes."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static

from tui.screens.confirm import MODAL_CSS


def _describe(changes: tuple[str, ...] | None) -> str:
    if changes is None:
        return "reading git…"
    if not changes:
        return "No uncommitted changes."
    text = "Uncommitted changes (kept either way):\n" + "\n".join(changes[:12])
    if len(changes) > 12:
        text += f"\n… and {len(changes) - 12} more"
    return text


class ResumeScreen(ModalScreen[bool]):
    DEFAULT_CSS = (
        MODAL_CSS.format(name="ResumeScreen")
        + """
    ResumeScreen #resume-changes { max-height: 12; color: $text-muted; margin-top: 1; }
    """
    )
    BINDINGS = [
        Binding("y,enter", "answer(True)", "Resume", id="resume.yes"),
        Binding("n", "answer(False)", "Leave paused", id="resume.no"),
        Binding("escape", "answer(False)", "Leave paused", show=False),
    ]

    def __init__(self, question: str, changes: tuple[str, ...] | None) -> None:
        super().__init__()
        self.question = question
        self.changes = changes

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self.question, classes="title")
            yield Static(_describe(self.changes), id="resume-changes")
            with Horizontal():
                yield Button("Leave paused \\[n]", id="no")
                yield Button("Resume \\[Y]", id="yes", variant="primary")

    def show_changes(self, changes: tuple[str, ...]) -> None:
        """Git arrived after the prompt went up: show what is uncommitted."""
        self.changes = changes
        self.query_one("#resume-changes", Static).update(_describe(changes))

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, value: bool) -> None:
        self.dismiss(value)
