"""At start, for an interrupted loop: the resume question, with the uncommitted changes and
what to do with them (continue with them, commit them, or stash them: never discard)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static

from tui.screens.confirm import MODAL_CSS

GIT_WORDS = {
    "continue": "continue with them as they are",
    "commit": "commit them first",
    "stash": "stash them first (a named stash)",
}


def _describe(changes: tuple[str, ...] | None, choice: str) -> str:
    if changes is None:
        return "reading git…"
    if not changes:
        return "No uncommitted changes."
    untracked = sum(1 for line in changes if line.startswith("??"))
    text = (
        f"{len(changes)} uncommitted change(s): {len(changes) - untracked} modified, {untracked} untracked\n"
        + "\n".join(changes[:12])
    )
    if len(changes) > 12:
        text += f"\n… and {len(changes) - 12} more"
    text += f"\n\nOn resume: {GIT_WORDS[choice]}  ([c] continue · [m] commit · [s] stash)"
    return text


class ResumeScreen(ModalScreen[str]):
    """Dismissed with "no", or with the git choice ("continue", "commit", "stash") for yes."""

    DEFAULT_CSS = (
        MODAL_CSS.format(name="ResumeScreen")
        + """
    ResumeScreen #resume-changes { max-height: 16; color: $text-muted; margin-top: 1; }
    """
    )
    BINDINGS = [
        Binding("y,enter", "answer(True)", "Resume", id="resume.yes"),
        Binding("n", "answer(False)", "Leave paused", id="resume.no"),
        Binding("escape", "answer(False)", "Leave paused", show=False),
        Binding("c", "git('continue')", "Keep changes", show=False),
        Binding("m", "git('commit')", "Commit changes", show=False),
        Binding("s", "git('stash')", "Stash changes", show=False),
    ]

    def __init__(self, question: str, changes: tuple[str, ...] | None, kind: str = "paused") -> None:
        super().__init__()
        self.question = question
        self.changes = changes
        self.kind = kind
        self.git_choice = "continue"

    def compose(self) -> ComposeResult:
        yes = "Mark complete \\[Y]" if self.kind == "stopping" else "Resume \\[Y]"
        with Vertical():
            yield Label(self.question, classes="title")
            yield Static(_describe(self.changes, self.git_choice), id="resume-changes")
            with Horizontal():
                yield Button("Leave paused \\[n]", id="no")
                yield Button(yes, id="yes", variant="primary")

    def show_changes(self, changes: tuple[str, ...]) -> None:
        """Git arrived after the prompt went up: show what is uncommitted."""
        self.changes = changes
        self.query_one("#resume-changes", Static).update(_describe(changes, self.git_choice))

    def action_git(self, choice: str) -> None:
        if self.changes:
            self.git_choice = choice
            self.query_one("#resume-changes", Static).update(_describe(self.changes, choice))

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.action_answer(event.button.id == "yes")

    def action_answer(self, value: bool) -> None:
        self.dismiss(self.git_choice if value else "no")
