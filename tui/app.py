"""The monitor: watch a workspace's loop live, and steer it with keys and prompts.

It decides nothing about the loop. It reads snapshots (`loop.views.snapshot`) when files change and
sends commands (`loop.store.control`); the driver applies them. Quitting never stops the loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path

from textual import events, on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.reactive import var
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static
from textual.worker import Worker, WorkerState

from loop.core.errors import LoopdeckError
from loop.core.timeutil import utcnow
from loop.drivers import resume
from loop.repo.gitstate import GitStatus
from loop.store import control
from loop.store.paths import Workspace
from loop.views.snapshot import Reader, Snapshot
from tui import actions
from tui.pace import SummaryPace
from tui.screens.confirm import ConfirmScreen
from tui.screens.escalation import EscalationScreen
from tui.screens.number import NumberScreen
from tui.screens.resume import ResumeScreen
from tui.screens.text import NoteScreen, QuestionScreen, TextScreen
from tui.watch import (
    DEBOUNCE_MS,
    GIT_DEBOUNCE_MS,
    FilesChanged,
    GitReady,
    SnapshotReady,
    TreeChanged,
    interesting,
    tree_filter,
    watch_paths,
)
from tui.widgets.common import relative
from tui.widgets.git import GitPanel
from tui.widgets.iteration import IterationPanel
from tui.widgets.journal import JournalPanel
from tui.widgets.output import OutputPanel
from tui.widgets.sources import SourcesPanel
from tui.widgets.status_bar import StatusBar
from tui.widgets.verification import VerificationPanel
from tui.widgets.workers import WorkersPanel

GIT_EVERY_S = 2.0
WATCH_STEP_MS = 20
"""How often the file watcher's thread wakes to hand over what it saw: a change reaches the
screen 20 to 40 ms later; a shorter step costs an idle monitor half a per cent of a core."""
GIT_WATCH_STEP_MS = 300
"""The working tree's watcher wakes less often: git is read 300 ms after a burst anyway (a
step of 100 ms was a third of what an idle monitor cost)."""
RAISE_BY = 20


class ErrorPanel(Static):
    """A corrupt state file: where, what, and how to get the loop back."""

    DEFAULT_CSS = """
    ErrorPanel { display: none; border: thick $error; background: $error 15%; padding: 1 2; height: auto; }
    ErrorPanel.-shown { display: block; }
    """

    snapshot: var[Snapshot | None] = var(None, init=False)
    """The workspace as last read (bound to the app's)."""
    problem: var[str] = var("", init=False)
    """What the panel says ("" when the state file reads fine: the panel is hidden)."""

    def watch_snapshot(self, snapshot: Snapshot | None) -> None:
        error = snapshot.error if snapshot is not None else None
        if snapshot is None or error is None:
            self.problem = ""
            return
        restore = "  Press b to restore the backup." if snapshot.backup_exists else ""
        self.problem = (
            f"The loop's state file is corrupt and was left as it is.\n\n"
            f"file: {relative(error.path, snapshot.workspace)}\n"
            f"line: {error.line or '-'}\n"
            f"problem: {error.problem}\n\n{restore}"
        )

    def watch_problem(self, problem: str) -> None:
        self.update(problem)
        self.set_class(bool(problem), "-shown")


class Restored(Message):
    """`loopdeck restore` ended: whether it put the backup back, and its one line."""

    def __init__(self, ok: bool, line: str) -> None:
        super().__init__()
        self.ok = ok
        self.line = line


class LoopdeckApp(App[None]):
    """The monitor for one workspace."""

    TITLE = "loopdeck"
    CSS_PATH = "app.tcss"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (100, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (30, "-tall")]
    ESCAPE_TO_MINIMIZE = False
    """Escape clears a search; `o` and `l` leave full screen (the keys that entered it)."""
    BINDINGS = actions.bindings()
    """Made from the one registry (`tui.actions`), like the help and the palette."""

    snapshot: var[Snapshot | None] = var(None, init=False)
    """The workspace as last read. The app sets it when a read arrives; every panel is bound
    to it and works out, and redraws, only the part it shows."""
    git_status: var[GitStatus | None] = var(None, init=False)
    """The repository as last read (by its own worker, on its own clock)."""
    summary: var[Snapshot | None] = var(None, init=False)
    """`snapshot` as the summary panels see it: every change, paced while a loop races
    (`tui.pace`); the journal and the output follow `snapshot` itself."""

    def __init__(
        self,
        workspace: Workspace,
        *,
        clock: Callable[[], datetime] = utcnow,
        watch: bool = True,
        git: bool = True,
        prompts: bool = True,
        on_quit: Callable[[], None] | None = None,
    ) -> None:
        super().__init__()
        self.workspace = workspace
        self.clock = clock
        """What "now" is: tests and screenshots fix it."""
        self.watching = watch
        self.use_git = git
        self.prompts = prompts
        self.on_quit = on_quit
        self.git_dirty = True
        self.awaiting: dict[str, str] = {}
        """Commands sent and not yet applied: id → kind, so the app can say when they land."""
        self.seen_escalations: set[str] = set()
        self.seen_questions: set[str] = set()
        self.seen_unconfirmed: set[tuple[str, ...]] = set()
        """What the monitor already asked a person to confirm (asked once per distinct list)."""
        self.asked_resume = False
        self.watched: tuple[frozenset[Path], frozenset[Path]] | None = None
        self.snapshots_shown = 0
        self.binding_answers: tuple[bool | None, ...] | None = None
        """`check_action` for each bound action, as the footer last showed them."""
        self.found_for: Snapshot | None = None
        self.found: resume.Interrupted | None = None
        """`resume.find` for the snapshot `found_for`."""
        self.moot_prompts: list[str] = []
        """Why each prompt closed itself (the notification says the same)."""
        self.keymap: dict[str, str] = {}
        """The keymap file's rebindings (binding id → keys), as applied."""
        self.reader: Reader | None = None
        """Reads the workspace's snapshots, each only what changed since the last."""
        self.pace = SummaryPace(self._show_summary, self.set_timer, time.monotonic)
        """When a snapshot reaches the summary panels."""

    # --- layout --------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        snapshot = LoopdeckApp.snapshot
        summary = {"snapshot": LoopdeckApp.summary}
        yield StatusBar(id="status-bar").data_bind(**summary)
        yield ErrorPanel(id="error-panel").data_bind(snapshot)
        with Horizontal(id="panels"):
            with Vertical(id="left"):
                yield SourcesPanel(id="sources").data_bind(**summary)
                yield IterationPanel(id="iteration").data_bind(**summary)
            with Vertical(id="right"):
                yield VerificationPanel(id="verification").data_bind(**summary)
                yield GitPanel(id="git").data_bind(status=LoopdeckApp.git_status)
        yield WorkersPanel(id="workers").data_bind(**summary)
        with Horizontal(id="logs"):
            yield JournalPanel(id="journal").data_bind(snapshot)
            yield OutputPanel(id="output").data_bind(snapshot)
        yield Footer(compact=True)

    def on_resize(self, event: events.Resize) -> None:
        """On a narrow terminal the footer's palette hint gives its room to the keys (quit
        last among them); ctrl+p still opens the palette, and the help says so."""
        self.query_one(Footer).show_command_palette = event.size.width >= 100

    @property
    def main(self) -> Screen[object]:
        """The screen with the panels: queries go here, not to whatever modal is on top."""
        return self.screen_stack[0]

    def on_mount(self) -> None:
        keymap, problem = actions.load_keymap()
        if keymap:
            self.keymap = keymap
            self.set_keymap(keymap)
        if problem:
            self.notify(problem, severity="warning", timeout=8)
        self.load_snapshot()
        if self.use_git:
            self.git_dirty = False
            self.load_git()
            self.set_interval(GIT_EVERY_S, self.git_tick)
            if self.watching:
                self.watch_tree()

    def watch_snapshot(self, snapshot: Snapshot | None) -> None:
        self.pace.offer(snapshot)

    def _show_summary(self, snapshot: Snapshot | None) -> None:
        self.summary = snapshot

    # --- reading ------------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="snapshot", exit_on_error=False)
    def load_snapshot(self) -> None:
        from loop.views.snapshot import Reader

        reader = self.reader
        if reader is None or reader.workspace != self.workspace:  # another folder: start afresh
            reader = self.reader = Reader(self.workspace)
        self.post_message(SnapshotReady(reader.read()))

    @work(thread=True, exclusive=True, group="git", exit_on_error=False)
    def load_git(self) -> None:
        from loop.repo.gitstate import status

        self.post_message(GitReady(status(self.workspace.root)))

    @work(exclusive=True, group="watch", exit_on_error=False)
    async def watch_files(self, folders: frozenset[Path], files: frozenset[Path]) -> None:
        from tui import inotify

        existing = [f for f in folders if f.is_dir()]
        if not existing:
            return
        accept = interesting(set(folders), set(files))
        if inotify.available():  # the kernel's events on the event loop: nothing runs idle
            try:
                watch = inotify.Watch(existing)
            except OSError:
                pass  # no watches left: watchfiles can poll
            else:
                async with watch:
                    async for paths in watch.changes():
                        if any(accept(None, path) for path in paths):
                            self.post_message(FilesChanged())
                return
        from watchfiles import awatch

        async for _changes in awatch(
            *(str(f) for f in existing),
            watch_filter=accept,
            debounce=DEBOUNCE_MS,
            step=WATCH_STEP_MS,
            recursive=False,
        ):
            self.post_message(FilesChanged())

    @work(exclusive=True, group="git-watch", exit_on_error=False)
    async def watch_tree(self) -> None:
        """Git followed live: the working tree watched recursively (not what `.gitignore`
        ignores, not loopdeck's files), debounced; git itself is read by `load_git`'s thread."""
        from watchfiles import awatch

        async for _changes in awatch(
            self.workspace.root,
            watch_filter=tree_filter(self.workspace.root),
            debounce=GIT_DEBOUNCE_MS,
            step=GIT_WATCH_STEP_MS,
        ):
            self.post_message(TreeChanged())

    def on_tree_changed(self, message: TreeChanged) -> None:
        self.git_dirty = False
        self.load_git()

    def on_files_changed(self, message: FilesChanged) -> None:
        # With the working tree watched, git is read when the tree moves; without, a loop file's
        # change is the hint that a commit may have happened, picked up by the 2 s tick.
        if not self.watching:
            self.git_dirty = True
        self.load_snapshot()

    def on_snapshot_ready(self, message: SnapshotReady) -> None:
        if self.screen_stack:  # a worker's answer that lands while the app shuts down is dropped
            self.show_snapshot(message.snapshot)

    def on_git_ready(self, message: GitReady) -> None:
        if not self.screen_stack:
            return
        self.git_status = message.status
        if isinstance(self.screen, ResumeScreen):
            self.screen.show_changes(message.status.changes)

    def git_tick(self) -> None:
        if self.git_dirty:
            self.git_dirty = False
            self.load_git()

    @on(Worker.StateChanged)
    def worker_failed(self, event: Worker.StateChanged) -> None:
        """Every worker error ends here: a notification, never a traceback."""
        if event.state == WorkerState.ERROR and event.worker.error is not None:
            error = event.worker.error
            self.notify(f"{event.worker.group}: {type(error).__name__}: {error}", severity="error", timeout=8)

    # --- drawing -------------------------------------------------------------------------------

    def show_snapshot(self, snapshot: Snapshot) -> None:
        """One value set, the panels follow; then what only the app can do: prompts, the keys
        on offer, the files to watch."""
        previous = self.snapshot
        self.snapshot = snapshot
        self.close_modal_if_moot(snapshot)
        self.report_applied(snapshot)
        self.refresh_bindings_if_changed()
        self.snapshots_shown += 1
        if self.watching:
            folders, files = watch_paths(self.workspace, snapshot)
            wanted = (frozenset(folders), frozenset(files))
            if wanted != self.watched:
                self.watched = wanted
                self.watch_files(*wanted)
        if self.prompts:
            self.prompt_if_needed(snapshot, first=previous is None)

    def interrupted(self, snapshot: Snapshot) -> resume.Interrupted | None:
        """Whether the snapshot's loop waits to be resumed, asked once per snapshot: the answer
        looks at the driver's process, and the keys on offer ask it on every read."""
        if self.found_for is not snapshot:
            self.found_for, self.found = snapshot, resume.find(snapshot)
        return self.found

    def refresh_bindings_if_changed(self) -> None:
        """Refresh the footer only when `check_action`'s answers change: a refresh recomposes
        the footer, and one per snapshot (several a second while a loop runs) grew the monitor
        by thousands of widgets an hour."""
        actions = {
            binding.action
            for cls in type(self).__mro__
            for binding in getattr(cls, "BINDINGS", ())
            if isinstance(binding, Binding)
        }  # a subclass's own keys count too
        answers = tuple(self.check_action(action, ()) for action in sorted(actions))
        if answers != self.binding_answers:
            self.binding_answers = answers
            self.refresh_bindings()

    def report_applied(self, snapshot: Snapshot) -> None:
        for event in snapshot.events:
            if event.kind == "command-applied":
                kind = self.awaiting.pop(str(event.data.get("id")), None)
                if kind is not None:
                    outcome = event.data.get("outcome") or "done"
                    self.notify(f"{kind} applied: {outcome}", title="loopdeck")

    # --- prompts --------------------------------------------------------------------------------

    def prompt_if_needed(self, snapshot: Snapshot, first: bool) -> None:
        if len(self.screen_stack) > 1:
            return
        if first and not self.asked_resume:
            self.asked_resume = True
            found = self.interrupted(snapshot) if snapshot.escalation is None else None
            if found is not None:
                # Git is read by its worker, never here: the prompt fills in when it arrives.
                changes = self.git_status.changes if self.git_status is not None else None
                if not self.use_git:
                    changes = None
                self.push_screen(ResumeScreen(found.question, changes, found.kind), self.resume_answer)
                return
        loop = snapshot.loop
        if loop is not None and snapshot.unconfirmed and snapshot.unconfirmed not in self.seen_unconfirmed:
            self.seen_unconfirmed.add(snapshot.unconfirmed)
            listed = "\n".join(f"  {line}" for line in snapshot.unconfirmed)
            detail = (
                f"{listed}\n\nConfirmed, loopdeck runs its commands, sends its prompt to the agent and "
                "notifies its targets, in this folder. Nothing of it runs until then."
            )
            title = "This loop names what nobody on this machine confirmed"
            self.push_screen(ConfirmScreen(title, detail, yes="Confirm", no="Not now"), self.trust_answer)
            return
        escalation = snapshot.escalation
        if escalation is not None and escalation.data.get("kind") == "unconfirmed" and snapshot.confirmed:
            self.seen_escalations.add(escalation.ts)  # confirmed meanwhile: nothing to ask
        if escalation is not None and escalation.ts not in self.seen_escalations and snapshot.loop:
            self.seen_escalations.add(escalation.ts)
            loop = snapshot.loop
            pending = snapshot.sources.pending_total if snapshot.sources else 0
            numbers = (
                f"iteration {loop.iteration} of {loop.max_iterations or '∞'} · {pending} task(s) pending"
                f" · status {loop.status} · driver {loop.driver or '-'}"
            )
            reason = str(escalation.data.get("reason", "escalated"))
            kind = escalation.data.get("kind")
            if kind:
                reason = f"{kind}: {reason}"
            self.push_screen(EscalationScreen(reason, numbers, RAISE_BY), self.escalation_answer)
            return
        question = snapshot.question
        if question is not None and question.ts not in self.seen_questions:
            self.seen_questions.add(question.ts)
            self.push_screen(QuestionScreen(str(question.data.get("question", ""))), self.question_answer)

    def trust_answer(self, yes: bool | None) -> None:
        """A person at the monitor confirms the loop (never from inside an agent's session)."""
        if not yes:
            return
        from loop import trust
        from loop.store.state import StateError, StateStore
        from loop.trust.person import agent_session

        why = agent_session()
        if why is not None:
            self.notify(f"not confirmed: this monitor runs inside {why}", severity="error")
            return
        try:
            state = StateStore(self.workspace).read()
            if state is None:
                return
            trust.record(self.workspace, state, "monitor")
        except (OSError, StateError) as exc:
            self.notify(f"not confirmed: {exc}", severity="error")
            return
        self.notify("confirmed on this machine", title="loopdeck")
        if (state.waiting_for or {}).get("escalation") == "unconfirmed":
            self.send("resume", reason="confirmed in the monitor")
            self.ensure_runner()
        else:
            self.load_snapshot()

    def resume_answer(self, answer: str | None) -> None:
        """The answer: `no`, or the git choice for yes (used only when there is uncommitted work)."""
        if self.snapshot is None:
            return
        yes = answer not in (None, "no")
        dirty = self.use_git and self.git_status is not None and bool(self.git_status.changes)
        done = (
            resume.resume(self.workspace, self.snapshot, git=answer if dirty else None)
            if yes
            else resume.pause(self.workspace, self.snapshot)
        )
        self.notify(done, title="loopdeck")

    def escalation_answer(self, choice: str | None) -> None:
        loop = self.snapshot.loop if self.snapshot else None
        if loop is None or choice in (None, "dismiss"):
            return
        if choice == "continue":
            if loop.max_iterations and loop.iteration >= loop.max_iterations:
                self.send(
                    "set-max-iterations", value=loop.iteration + RAISE_BY, reason="continue after escalation"
                )
            self.send("resume", reason="continue after escalation")
            self.ensure_runner()
        elif choice == "pause":
            if loop.status != "paused":  # a runner's escalation has paused it already
                self.send("pause", reason="escalation")
        elif choice == "skip":
            self.send("skip", reason="escalation")
            if loop.status == "paused":
                self.send("resume", reason="after skipping the task")
            self.ensure_runner()
        elif choice == "complete":
            self.send("complete", reason="forced after escalation")
            self.ensure_runner()
        elif choice == "log":
            self.action_toggle_journal()

    def question_answer(self, answer: str | None) -> None:
        if answer:
            self.send("answer", reason=answer)
            self.ensure_runner()

    def ensure_runner(self) -> None:
        if self.snapshot is not None and resume.runner_needed(self.snapshot):
            pid = resume.start_runner(self.workspace)
            self.notify(f"runner restarted (pid {pid}) to apply it", title="loopdeck")

    # --- commands -------------------------------------------------------------------------------

    def send(self, kind: str, *, value: int | None = None, reason: str | None = None) -> None:
        loop = self.snapshot.loop if self.snapshot else None
        try:
            command = control.queue(
                self.workspace,
                kind,
                source="tui",
                value=value,
                reason=reason,
                iteration=loop.iteration if loop else None,
            )
        except (LoopdeckError, OSError) as exc:
            self.notify(f"{kind} not sent: {exc}", severity="error")
            return
        self.awaiting[command.id] = kind
        if loop is not None and loop.driver in (None, "hook"):
            self.notify(f"{kind} queued: it applies when the agent's turn ends", title="loopdeck")
        elif loop is not None and loop.alive is False:
            self.notify(f"{kind} queued: the runner is not running", title="loopdeck", severity="warning")
        else:
            self.notify(f"{kind} sent to the runner", title="loopdeck")
        self.load_snapshot()  # the command shows as pending now, not at the next file event

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if self.disabled_reason(action) is not None:
            return None  # shown greyed out: it would contradict a command still on its way
        snapshot = self.snapshot
        loop = snapshot.loop if snapshot else None
        if action == "pause":
            return loop is not None and loop.status in ("running", "initializing")
        if action == "resume":
            return loop is not None and (
                loop.status == "paused"
                or (
                    snapshot is not None
                    and self.interrupted(snapshot) is not None
                    and loop.status != "stopped"
                )
            )
        if action in ("skip", "complete", "stop", "set_max", "say"):
            return loop is not None and loop.status in ("running", "paused", "initializing", "stopping")
        if action == "toggle_output":
            return loop is not None  # a finished loop has no output panel
        if action == "restore_backup":
            return snapshot is not None and snapshot.error is not None and snapshot.backup_exists
        return True

    def disabled_reason(self, action: str) -> str | None:
        """Why a key is off while a command waits to be applied (None: it is not).

        A queued pause makes `p` pointless and `r` the way to take it back; a queued stop or
        completion ends the loop, so nothing else that steers it makes sense until it lands."""
        pending = {c.kind for c in self.snapshot.pending} if self.snapshot else set()
        if not pending:
            return None
        ending = pending & {"stop", "complete"}
        if ending and action in ("pause", "resume", "skip", "complete", "stop", "set_max"):
            return f"a {sorted(ending)[0]} is pending"
        if action == "pause" and "pause" in pending:
            return "a pause is pending"
        if action == "resume" and "resume" in pending:
            return "a resume is pending"
        if action == "skip" and "skip" in pending:
            return "a skip is pending"
        return None

    def close_modal_if_moot(self, snapshot: Snapshot) -> None:
        """A modal about a loop that has moved on says so and goes: answering it would steer a
        loop that is no longer in the state the question described."""
        screen = self.screen
        loop = snapshot.loop
        ended = loop is None or loop.status in ("completed", "failed", "stopped")
        why = None
        if isinstance(screen, EscalationScreen) and (ended or snapshot.escalation is None):
            why = "the loop ended" if ended else "the loop was resumed"
            screen.dismiss("dismiss")
        elif isinstance(screen, QuestionScreen) and (ended or snapshot.question is None):
            why = "the loop ended" if ended else "the question was answered"
            screen.dismiss(None)
        elif isinstance(screen, ConfirmScreen | NumberScreen) and ended:
            why = "the loop ended"
            screen.dismiss(None)
        if why is not None:
            self.moot_prompts.append(why)
            self.notify(f"That prompt no longer applies: {why}.", title="loopdeck", severity="warning")

    def action_pause(self) -> None:
        self.send("pause", reason="from the monitor")

    def action_resume(self) -> None:
        if self.snapshot is None:
            return
        if self.snapshot.loop is not None and self.snapshot.loop.status == "paused":
            self.send("resume", reason="from the monitor")
        self.ensure_runner()

    def action_skip(self) -> None:
        self.send("skip", reason="from the monitor")

    def action_complete(self) -> None:
        pending = self.snapshot.sources.pending_total if self.snapshot and self.snapshot.sources else 0

        def answer(yes: bool | None) -> None:
            if yes:
                self.send("complete", reason="forced from the monitor")
                self.ensure_runner()

        self.push_screen(
            ConfirmScreen(
                f"Force completion? {pending} task{'s' if pending != 1 else ''} remain",
                "The loop is archived as complete, whatever is left.",
            ),
            answer,
        )

    def action_stop(self) -> None:
        def answer(yes: bool | None) -> None:
            if yes:
                self.send("stop", reason="from the monitor")

        self.push_screen(
            ConfirmScreen("Stop the loop?", "It is kept (status stopped); `loopdeck run` continues it."),
            answer,
        )

    def action_say(self) -> None:
        def said(note: str | None) -> None:
            if note:
                self.send("say", reason=note)

        self.push_screen(NoteScreen(), said)

    def action_set_max(self) -> None:
        loop = self.snapshot.loop if self.snapshot else None
        if loop is None:
            return

        def answer(value: int | None) -> None:
            if value is not None:
                self.send("set-max-iterations", value=value, reason="from the monitor")

        self.push_screen(
            NumberScreen(f"Max iterations (now {loop.max_iterations or 'none'})", loop.max_iterations), answer
        )

    def action_restore_backup(self) -> None:
        """The monitor never writes the state: it asks `loopdeck restore` to, as a person at a
        terminal would."""
        self.restore_in_background()

    @work(thread=True, exclusive=True, group="restore", exit_on_error=False)
    def restore_in_background(self) -> None:
        import subprocess
        import sys

        argv = [sys.executable, "-m", "loop.cli", "-C", str(self.workspace.root), "restore"]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as exc:
            self.post_message(Restored(False, str(exc)))
            return
        said = (done.stdout or done.stderr).strip().splitlines()[-1:] or ["no answer"]
        self.post_message(
            Restored(done.returncode == 0, said[0].removeprefix("loopdeck: ").removeprefix("error: "))
        )

    def on_restored(self, message: Restored) -> None:
        if not message.ok:
            self.notify(f"restore failed: {message.line}", severity="error")
            return
        self.notify(message.line, title="loopdeck")
        self.load_snapshot()

    def action_toggle_journal(self) -> None:
        screen = self.screen
        if screen.maximized is not None:
            screen.minimize()
        else:
            screen.maximize(self.main.query_one(JournalPanel), container=False)

    def action_search(self) -> None:
        if self.screen.maximized is self.main.query_one(OutputPanel):
            self.main.query_one(OutputPanel).start_search()
        else:
            self.main.query_one(JournalPanel).start_search()

    def action_clear_search(self) -> None:
        self.main.query_one(JournalPanel).clear_search()
        self.main.query_one(OutputPanel).clear_search()

    def action_help(self) -> None:
        self.push_screen(TextScreen("Help", actions.help_markdown(self.bound_keys()), markdown=True))

    def bound_keys(self) -> dict[str, str]:
        """Binding id → keys, as bound now: the registry's, overridden by the keymap file."""
        return {a.id: self.keymap.get(a.id, a.key) for a in actions.ACTIONS}

    def action_toggle_output(self) -> None:
        screen = self.screen
        if screen.maximized is not None:
            screen.minimize()
        else:
            screen.maximize(self.main.query_one(OutputPanel), container=False)

    @on(DataTable.RowSelected, "#verification-table")
    def show_verification_output(self, event: DataTable.RowSelected) -> None:
        panel = self.main.query_one(VerificationPanel)
        if 0 <= event.cursor_row < len(panel.results):
            result = panel.results[event.cursor_row]
            verdict = "PASSED" if result.passed else "FAILED"
            body = result.tail or "(no output)"
            self.push_screen(TextScreen(f"$ {result.command} · {verdict} (exit {result.exit_code})", body))

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for action in actions.ACTIONS:
            if action.palette and self.check_action(action.name, ()):
                yield SystemCommand(action.title, action.help, getattr(self, f"action_{action.name}"))

    async def action_quit(self) -> None:
        if self.on_quit is not None:
            await asyncio.to_thread(self.on_quit)
        self.exit()


BINDING_ACTIONS = tuple(binding.action for binding in LoopdeckApp.BINDINGS if isinstance(binding, Binding))
"""The actions the footer shows keys for: the ones whose `check_action` answer it reflects."""
