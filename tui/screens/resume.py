"""At start, for an interrupted loop: the resume question, with the uncommitted changes and
what to do with them (continue with them, commit them, or stash them: never discard)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static

from tui import actions
from tui.screens.modal import MODAL_CSS
from tui.widgets.footer import Footer

GIT_WORDS = {
    "continue": "continue with them as they are",
    "commit": "commit them first",
    "stash": "stash them first (a named stash)",
}


def _describe(changes: tuple[str, ...] | None) -> str:
    """What is uncommitted, a line per file (the prompt's body, scrolled when long)."""
    if changes is None:
        return "reading git…"
    if not changes:
        return "No uncommitted changes."
    untracked = sum(1 for line in changes if line.startswith("??"))
    return (
        f"{len(changes)} uncommitted change(s): {len(changes) - untracked} modified, {untracked} untracked\n"
        + "\n".join(changes)
    )


def _choice(changes: tuple[str, ...] | None, choice: str) -> str:
    """What resuming does with them (nothing to say without uncommitted changes)."""
    if not changes:
        return ""
    return f"On resume: {GIT_WORDS[choice]}\n(c continue · m commit · s stash)"


class ResumeScreen(ModalScreen[str]):
    """Dismissed with "no", or with the git choice ("continue", "commit", "stash") for yes."""

    DEFAULT_CSS = (
        MODAL_CSS.format(name="ResumeScreen")
        + """
    ResumeScreen #resume-changes { color: $text-muted; }
    ResumeScreen #resume-choice { margin-top: 1; height: auto; }
    """
    )
    BINDINGS = actions.bindings("resume")

    def __init__(self, question: str, changes: tuple[str, ...] | None, kind: str = "paused") -> None:
        super().__init__()
        self.question = question
        self.changes = changes
        self.kind = kind
        self.git_choice = "continue"

    def compose(self) -> ComposeResult:
        word = "Mark complete" if self.kind == "stopping" else "Resume"
        yes = f"{word} {actions.key_label(self.app, 'resume.yes')}"
        yield Footer(compact=True)  # the prompt's keys, Escape among them
        with Vertical():
            yield Label(self.question, classes="title")
            with VerticalScroll(classes="body"):
                yield Static(_describe(self.changes), id="resume-changes", markup=False)
            yield Static(id="resume-choice", markup=False)
            with Horizontal(classes="buttons"):
                yield Button(f"Leave paused {actions.key_label(self.app, 'resume.no')}", id="no")
                yield Button(yes, id="yes", variant="primary")

    def show_changes(self, changes: tuple[str, ...]) -> None:
        """Git arrived after the prompt went up: show what is uncommitted."""
        self.changes = changes
        self.query_one("#resume-changes", Static).update(_describe(changes))
        self.show_choice()

    def action_git(self, choice: str) -> None:
        if self.changes:
            self.git_choice = choice
            self.show_choice()

    def on_mount(self) -> None:
        self.show_choice()

    def show_choice(self) -> None:
        """What resuming does with uncommitted work; hidden while there is none."""
        text = _choice(self.changes, self.git_choice)
        choice = self.query_one("#resume-choice", Static)
        choice.update(text)
        choice.display = bool(text)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.action_answer(event.button.id == "yes")

    def action_answer(self, value: bool) -> None:
        self.dismiss(self.git_choice if value else "no")
