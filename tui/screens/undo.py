"""Undo a landed task from the monitor: pick one of the tasks a loop of workers landed, confirm,
then the verb's own code (`loop.cli.undo.undo_task`) runs on a worker thread and its outcome,
done or refused, is a notice. The monitor adds no rule of its own: whatever `loopdeck undo`
refuses (a runner drives the loop, the revert conflicts), the notice says in its words.

Which tasks are landed, and their titles, are `loop.views.landed`'s answers, as for the verb.
`Landings` follows the journal by what was appended, so the app can tell after each read
whether the key applies without reading the journal again.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.markup import escape
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option

from loop.core.errors import LoopdeckError
from loop.store.journal import Journal
from loop.store.paths import Workspace
from loop.views.landed import Landing, landed, landings, task_titles
from tui import actions
from tui.screens.confirm import ConfirmScreen
from tui.screens.modal import MODAL_CSS
from tui.widgets.footer import Footer

if TYPE_CHECKING:
    from textual.app import App

SHOWN = 50
"""The picker lists the newest landings only: older ones are `loopdeck undo TASK`'s."""
TITLE_CHARS = 60


@dataclass(frozen=True)
class Landed:
    """A task on the loop's branch: its id, its title (the graph's, "" when unknown), and the
    commit it landed as."""

    task: str
    title: str = ""
    sha: str = ""

    @property
    def label(self) -> str:
        return f"task {self.task} · {self.title}" if self.title else f"task {self.task}"


class LandedRead(Message):
    """The landed tasks' ids after a read of the workspace (newest first): the key applies
    while there is one."""

    def __init__(self, tasks: tuple[str, ...]) -> None:
        super().__init__()
        self.tasks = tasks


class Landings:
    """The tasks landed and not undone, as a journal says, read again only from where the last
    read stopped (a journal replaced or cut shorter is read from its start)."""

    def __init__(self, journal: Path) -> None:
        self.path = journal
        self.offset = 0
        self.file: tuple[int, int] | None = None
        self.landed: dict[str, Landing] = {}
        """Each task's last landing, undone ones included (`loop.views.landed.landings`)."""

    def read(self) -> tuple[str, ...]:
        """The landed tasks' ids, newest landing first."""
        try:
            info = os.stat(self.path)
        except OSError:
            self.offset, self.file, self.landed = 0, None, {}
            return ()
        file = (info.st_dev, info.st_ino)
        if file != self.file or info.st_size < self.offset:
            self.offset, self.file, self.landed = 0, file, {}
        journal = Journal(self.path)
        while self.offset < info.st_size:
            found = journal.read_from(self.offset)
            if found.offset <= self.offset:
                break  # an unfinished last line: read whole next time
            landings(found.events, self.landed)
            self.offset = found.offset
        return tuple(one.task for one in reversed(landed(self.landed)))


def landed_tasks(ws: Workspace) -> tuple[list[Landed], str]:
    """The landed tasks (newest first, with their graph's titles) and the branch checked out:
    what the picker and the question show. Reads files and runs git: off the screen's thread."""
    from loop.repo import worktrees

    journal = Landings(ws.journal)
    journal.read()
    titles = task_titles(ws)
    tasks = [Landed(one.task, _clip(titles.get(one.task, "")), one.sha) for one in landed(journal.landed)]
    return tasks[::-1][:SHOWN], worktrees.current_branch(ws.root) or "the branch checked out"


def _clip(title: str) -> str:
    title = " ".join(title.split())
    return title if len(title) <= TITLE_CHARS else title[: TITLE_CHARS - 1] + "…"


class UndoScreen(ModalScreen[str | None]):
    """Pick the landed task to undo: arrows and Enter, Escape cancels (None)."""

    DEFAULT_CSS = MODAL_CSS.format(name="UndoScreen") + "UndoScreen OptionList { max-height: 12; }"
    BINDINGS = actions.bindings("undo")

    def __init__(self, tasks: list[Landed]) -> None:
        super().__init__()
        self.tasks = tasks

    def compose(self) -> ComposeResult:
        yield Footer(compact=True)
        with Vertical():
            yield Label("Undo which landed task? (newest first)", classes="title")
            yield OptionList(*(Option(Text(t.label), id=t.task) for t in self.tasks), id="undo-tasks")
            yield Label("Enter to choose, Escape to cancel", id="undo-help")

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        options.highlighted = 0
        options.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)


def question(task: Landed, branch: str) -> ConfirmScreen:
    title = f" '{escape(task.title)}'" if task.title else ""  # the question is markup: a title is not
    return ConfirmScreen(
        f"Undo task {task.task}{title}?",
        f"A revert commit is added to {branch}; the task is reopened.",
        yes="Undo",
        no="Keep it",
    )


def offer(app: App[None], ws: Workspace, done: Callable[[], object]) -> None:
    """The whole exchange: list (a thread), pick, confirm, undo (a thread), a notice; `done`
    runs after the undo, done or refused (the app reads the workspace again)."""

    def listed() -> None:
        try:
            tasks, branch = landed_tasks(ws)
        except (OSError, LoopdeckError) as exc:
            app.call_from_thread(
                app.notify, f"undo: the landed tasks could not be read: {exc}", severity="error", markup=False
            )
            return
        app.call_from_thread(pick, tasks, branch)

    def pick(tasks: list[Landed], branch: str) -> None:
        if not tasks:
            app.notify(f"nothing to undo: no task of {ws.root} is landed", severity="warning", markup=False)
            return

        def picked(task: str | None) -> None:
            chosen = next((t for t in tasks if t.task == task), None)
            if chosen is not None:
                app.push_screen(question(chosen, branch), confirm_then(chosen))

        app.push_screen(UndoScreen(tasks), picked)

    def confirm_then(task: Landed) -> Callable[[bool | None], None]:
        def confirmed(yes: bool | None) -> None:
            if yes:
                app.notify(f"undoing task {task.task}…", title="loopdeck")
                app.run_worker(lambda: run(task.task), thread=True, group="undo", exit_on_error=False)

        return confirmed

    def run(task: str) -> None:
        from loop.cli.undo import undo_task
        from loop.trust.person import refuse_inside_agent

        try:
            refuse_inside_agent("Undo from the monitor")
            line = undo_task(ws, task)
        except (OSError, LoopdeckError) as exc:
            said = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            app.call_from_thread(
                app.notify, said, title="undo refused", severity="error", timeout=12, markup=False
            )
            app.call_from_thread(done)  # what refused it (a runner started) shows, and the key follows
            return
        app.call_from_thread(app.notify, line, title="loopdeck", timeout=8, markup=False)
        app.call_from_thread(done)

    app.run_worker(listed, thread=True, group="undo-list", exclusive=True, exit_on_error=False)
