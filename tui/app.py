"""The monitor: watch a workspace's loop live, and steer it with keys and prompts.

It decides nothing about the loop. It reads snapshots (`loop.views.snapshot`) when files change and
sends commands (`loop.store.control`); the driver applies them. Quitting never stops the loop.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from functools import partial
from pathlib import Path

from textual import on, work
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.message import Message
from textual.notifications import Notify
from textual.reactive import var
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from loop.core.errors import LoopdeckError
from loop.core.model import ACTIVE_STATUSES
from loop.core.policy import named
from loop.core.timeutil import utcnow
from loop.drivers import resume
from loop.repo import gitread
from loop.repo.gitstate import GitStatus
from loop.store import control
from loop.store.paths import Workspace
from loop.trust import key as trust_key
from loop.views.progress import Series
from loop.views.snapshot import Reader, Snapshot
from tui import actions, collector, hangup
from tui.pace import SummaryPace
from tui.progress import ProgressReader, ProgressReady
from tui.prompts import Prompts
from tui.screens.confirm import ConfirmScreen
from tui.screens.main import MainScreen
from tui.screens.number import NumberScreen
from tui.screens.progress import ProgressScreen
from tui.screens.resume import ResumeScreen
from tui.screens.text import NoteScreen, QuestionScreen, TextScreen
from tui.screens.undo import LandedRead, Landings
from tui.screens.undo import offer as offer_undo
from tui.watch import (
    FilesChanged,
    GitReady,
    SnapshotReady,
    TreeChanged,
    changes,
    interesting,
    tree_changes,
    watch_paths,
)
from tui.widgets.workers import WorkersPanel

GIT_EVERY_S = 2.0
GIT_AT_MOST_S = 1.0
"""Git is read at most once a second: a look is three `git` processes and GitPython reading
their output (~40 ms on 2,000 files); at 5 iterations a second, one a turn cost the monitor
several points of a core, and nobody reads the git panel faster than that."""
SHORT_ROWS = 30
"""The height below which the screen is short (`VERTICAL_BREAKPOINTS`)."""


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
    """Escape is a key of the registry's (`app.back`): it clears a search first, then leaves
    full screen, then goes back to the screen behind; the footer says when it does."""
    NOTIFICATION_TIMEOUT = 3
    """Notices are short, and shown top right over the least needed panels (`app.tcss`)."""
    MAX_NOTICES = 3
    """Notices on screen at once (two on a short terminal): a newer one takes the oldest's place,
    so a burst of them never stacks down over the panels and the logs."""

    snapshot: var[Snapshot | None] = var(None, init=False)
    """The workspace as last read. The app sets it when a read arrives; the main screen's
    panels follow it (`MainScreen.snapshot`)."""
    git_status: var[GitStatus | None] = var(None, init=False)
    """The repository as last read (by its own worker, on its own clock)."""
    can_go_back = False
    """Whether there is a screen behind the main one for Escape to go back to (the fleet's)."""
    summary: var[Snapshot | None] = var(None, init=False)
    """`snapshot` as the summary panels see it: every change, paced while a loop races
    (`tui.pace`); the journal and the output follow `snapshot` itself."""
    progress: var[Series] = var(Series, init=False)
    """The loop's figures per iteration, from the whole journal (`tui.progress`): the main
    screen's progress panel and the Progress view follow it."""

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
        self.tree_watched = False
        """Whether a watcher follows the working tree (git is then read when it moves)."""
        self.use_git = git
        self.prompts = prompts
        self.on_quit = on_quit
        self.git_dirty = True
        self.git_read_at = 0.0
        self.awaiting: dict[str, str] = {}
        """Commands sent and not yet applied: id → kind, so the app can say when they land."""
        self.asking = Prompts(self)
        """What the monitor asks a person (`tui.prompts`)."""
        self.watched: tuple[frozenset[Path], frozenset[Path]] | None = None
        self.snapshots_shown = 0
        self.binding_answers: tuple[bool | None, ...] | None = None
        """`check_action` for each bound action, as the footer last showed them."""
        self.found_for: Snapshot | None = None
        self.found: resume.Interrupted | None = None
        """`resume.find` for the snapshot `found_for`."""
        self.keymap: dict[str, str] = {}
        """The keymap file's rebindings (binding id → keys), as applied."""
        self.reader: Reader | None = None
        """Reads the workspace's snapshots, each only what changed since the last."""
        self.progress_reader: ProgressReader | None = None
        """Reads the journal's progress, each time only what was appended (`tui.progress`)."""
        self.landings: Landings | None = None
        """Follows the journal's landed tasks (`tui.screens.undo`): whether undo applies."""
        self.landed: tuple[str, ...] = ()
        """The landed tasks' ids, newest first, as last read."""
        self.pace = SummaryPace(self._show_summary, self.set_timer, time.monotonic)
        """When a snapshot reaches the summary panels."""
        self.settles = False
        """Whether the app freezes what it holds once its first snapshot is on screen
        (`tui.collector`): set for the monitor a person runs, never in a process that starts
        apps by the hundred (tests), whose frozen objects would never be freed."""

    def get_default_screen(self) -> Screen[None]:
        return MainScreen(id="main")

    @property
    def moot_prompts(self) -> list[str]:
        """Why each prompt closed itself (the notification says the same)."""
        return self.asking.moot

    @property
    def main(self) -> MainScreen:
        """The screen with the panels: queries go here, not to whatever modal is on top."""
        screen = self.screen_stack[0]
        assert isinstance(screen, MainScreen)
        return screen

    def watch_snapshot(self, snapshot: Snapshot | None) -> None:
        if self.screen_stack:
            self.main.snapshot = snapshot
        self.pace.offer(snapshot)

    def watch_summary(self, summary: Snapshot | None) -> None:
        if self.screen_stack:
            self.main.summary = summary

    def watch_progress(self, progress: Series) -> None:
        if self.screen_stack:
            self.main.progress = progress

    def watch_git_status(self, status: GitStatus | None) -> None:
        if self.screen_stack:
            self.main.git_status = status

    def on_mount(self) -> None:
        keymap, problem = actions.load_keymap()
        if keymap:
            self.keymap = keymap
            self.set_keymap(keymap)
        if problem:
            self.notify(problem, severity="warning", timeout=8)
        self.watch_terminal()
        self.load_snapshot()
        if self.use_git:
            self.git_dirty = False
            self.load_git()
            self.tree_watched = self.watching
            if self.watching:
                self.watch_tree()
            else:  # no watcher tells when the tree moves: a loop file's change hints at a commit
                self.set_interval(GIT_EVERY_S, self.git_tick)

    def on_notify(self, event: Notify) -> None:
        """A new notice: the oldest ones go while more than `MAX_NOTICES` would be up (two on a
        short terminal). Textual keeps no bound of its own: the collection and `_unnotify` are
        its private parts (Textual 8.2); this handler may run before or after Textual's own."""
        limit = self.MAX_NOTICES if self.size.height >= SHORT_ROWS else self.MAX_NOTICES - 1
        shown = [n for n in self._notifications if n is not event.notification]
        extra = len(shown) + 1 - limit
        for old in shown[: max(0, extra)]:
            self._unnotify(old, refresh=False)
        if extra > 0:
            self._refresh_notifications()

    def watch_terminal(self) -> None:
        """Quit when the terminal is gone, SIGHUP or none (`tui.hangup`)."""
        stdin = sys.__stdin__
        if self.is_headless or self.is_web or stdin is None:
            return
        try:
            fd = stdin.fileno()
        except (OSError, ValueError):
            return
        if os.isatty(fd):
            hangup.watch(fd, lambda: self.call_later(self.action_quit))

    def _show_summary(self, snapshot: Snapshot | None) -> None:
        self.summary = snapshot

    # --- reading ------------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="snapshot", exit_on_error=False)
    def load_snapshot(self) -> None:
        reader = self.reader
        if reader is None or reader.workspace != self.workspace:  # another folder: start afresh
            reader = self.reader = Reader(self.workspace)
        landings = self.landings
        if landings is None or landings.path != self.workspace.journal:
            landings = self.landings = Landings(self.workspace.journal)
        snapshot = reader.read()
        self.post_message(LandedRead(landings.read()))  # first: the snapshot's keys count on it
        self.post_message(SnapshotReady(snapshot))
        progress = self.progress_reader
        if progress is None or progress.path != self.workspace.journal:
            progress = self.progress_reader = ProgressReader(self.workspace.journal)
        self.post_message(ProgressReady(progress.read()))

    @work(thread=True, exclusive=True, group="git", exit_on_error=False)
    def load_git(self) -> None:
        self.post_message(GitReady(gitread.status(self.workspace.root)))

    @work(exclusive=True, group="watch", exit_on_error=False)
    async def watch_files(self, folders: frozenset[Path], files: frozenset[Path]) -> None:
        """The loop's files: their folders watched one level deep (`watch_paths`), each burst of
        changes that matter one `FilesChanged`."""
        existing = [f for f in folders if f.is_dir()]
        if not existing:
            return
        async for _paths in changes(existing, interesting(set(folders), set(files))):
            self.post_message(FilesChanged())

    @work(exclusive=True, group="git-watch", exit_on_error=False)
    async def watch_tree(self) -> None:
        """Git followed live: the working tree watched recursively (not what `.gitignore`
        ignores, not loopdeck's files), debounced; git itself is read by `load_git`'s thread.
        With no inotify watches left for the tree, git is followed on a clock."""
        try:
            async for _paths in tree_changes(self.workspace.root):
                self.post_message(TreeChanged())
        except OSError:
            self.follow_git_by_clock()

    def follow_git_by_clock(self) -> None:
        """No watcher can follow the tree (no inotify watches left for it): git is read again
        once a loop file changed, on a 2 s clock, as when the monitor does not watch."""
        if self.tree_watched:
            self.tree_watched = False
            self.set_interval(GIT_EVERY_S, self.git_tick)

    def on_workers_panel_ask(self, message: WorkersPanel.Ask) -> None:
        self.push_screen(QuestionScreen(message.question), message.answered)

    def on_tree_changed(self, message: TreeChanged) -> None:
        wait = self.git_read_at + GIT_AT_MOST_S - time.monotonic()
        if wait <= 0:
            self.read_git()
        elif not self.git_dirty:  # one read, a little later, for every change until then
            self.git_dirty = True
            self.set_timer(wait, self.git_tick)

    def on_files_changed(self, message: FilesChanged) -> None:
        # With the working tree watched, git is read when the tree moves; without, a loop file's
        # change is the hint that a commit may have happened, picked up by the 2 s tick.
        if not self.tree_watched:
            self.git_dirty = True
        self.load_snapshot()

    def on_snapshot_ready(self, message: SnapshotReady) -> None:
        if self.screen_stack:  # a worker's answer that lands while the app shuts down is dropped
            self.show_snapshot(message.snapshot)

    def on_landed_read(self, message: LandedRead) -> None:
        self.landed = message.tasks

    def on_progress_ready(self, message: ProgressReady) -> None:
        if self.screen_stack:
            self.progress = message.series

    def on_git_ready(self, message: GitReady) -> None:
        if not self.screen_stack:
            return
        self.git_status = message.status
        if isinstance(self.screen, ResumeScreen):
            self.screen.show_changes(message.status.changes)

    def git_tick(self) -> None:
        if self.git_dirty:
            self.read_git()

    def read_git(self) -> None:
        self.git_dirty = False
        self.git_read_at = time.monotonic()
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
        self.asking.close_if_moot(snapshot)
        self.report_applied(snapshot)
        self.refresh_bindings_if_changed()
        self.snapshots_shown += 1
        if self.settles and self.snapshots_shown == 1:
            self.call_after_refresh(collector.settle)
        if self.watching:
            folders, files = watch_paths(self.workspace, snapshot)
            wanted = (frozenset(folders), frozenset(files))
            if wanted != self.watched:
                self.watched = wanted
                self.watch_files(*wanted)
        if self.prompts:
            self.asking.ask(snapshot, first=previous is None)

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
        main = self.main
        answers = tuple(
            self.check_action(b.action.removeprefix("app."), ())
            if b.action.startswith("app.")
            else main.check_action(b.action, ())
            for b in main.BINDINGS
            if isinstance(b, Binding)
        )
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

    def ensure_runner(self) -> None:
        if self.snapshot is not None and resume.runner_needed(self.snapshot):
            pid = resume.start_runner(self.workspace)
            self.notify(f"runner restarted (pid {pid}) to apply it", title="loopdeck")

    # --- commands -------------------------------------------------------------------------------

    def send(
        self, kind: str, *, value: int | None = None, reason: str | None = None, target: str | None = None
    ) -> None:
        """A key's or a prompt's command to the loop (to one worker with `target`)."""
        loop = self.snapshot.loop if self.snapshot else None
        try:
            command = control.queue(
                self.workspace,
                kind,
                source="tui",
                value=value,
                reason=reason,
                target=target,
                iteration=loop.iteration if loop else None,
                key=trust_key.for_person(self.workspace.root),  # signed: a person's command
            )
        except (LoopdeckError, OSError) as exc:
            self.notify(f"{kind} not sent: {exc}", severity="error")
            return
        self.awaiting[command.id] = kind
        if loop is not None and named(loop.driver).in_session:
            self.notify(f"{kind} queued: it applies when the agent's turn ends", title="loopdeck")
        elif loop is not None and loop.alive is False:
            self.notify(f"{kind} queued: the runner is not running", title="loopdeck", severity="warning")
        else:
            self.notify(f"{kind} sent to the runner", title="loopdeck")
        self.load_snapshot()  # the command shows as pending now, not at the next file event

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("next_loop", "fleet"):
            return False  # this app watches one loop; `MonitorApp` knows others
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
        if action == "restore_backup":
            return snapshot is not None and snapshot.error is not None and snapshot.backup_exists
        if action == "undo":  # a loop of workers that landed a task, and no runner driving it
            return bool(self.landed) and not (
                loop is not None and loop.status in ACTIVE_STATUSES and loop.alive
            )
        return True

    def disabled_reason(self, action: str) -> str | None:
        """Why a key is off while a command waits to be applied (None: it is not).

        A queued pause makes `p` pointless and `r` the way to take it back; a queued stop or
        completion ends the loop, so nothing else that steers it makes sense until it lands."""
        # a command to one worker (`--worker`) steers that worker, not the loop
        pending = {c.kind for c in self.snapshot.pending if not c.target} if self.snapshot else set()
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

    def action_pause(self) -> None:
        self.send("pause", reason="from the monitor")

    def action_resume(self) -> None:
        if self.snapshot is None:
            return
        if self.snapshot.loop is not None and self.snapshot.loop.status == "paused":
            self.send("resume", reason="from the monitor")
        self.ensure_runner()

    def action_skip(self) -> None:
        """Skip the current task: in a loop of workers, the highlighted worker's (several hold
        tasks, and the loop would not know which one is meant)."""
        snapshot = self.snapshot
        target = None
        if (
            snapshot is not None
            and snapshot.parallel is not None
            and not (snapshot.loop is not None and snapshot.loop.verification_mode)
        ):
            panels = self.screen.query(WorkersPanel)
            target = panels.first().selected() if panels else None
        self.send("skip", reason="from the monitor", target=target)

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
        argv = [sys.executable, "-I", "-m", "loop.cli", "-C", str(self.workspace.root), "restore"]
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

    def action_undo(self) -> None:
        """Undo a landed task: pick, confirm, then `loopdeck undo`'s own code on a thread; the
        outcome, done or refused, is a notice (`tui.screens.undo`)."""
        offer_undo(self, self.workspace, self.load_snapshot)

    def action_progress(self) -> None:
        """The Progress view: the loop's charts per iteration, over the main screen."""
        self.push_screen(ProgressScreen())

    def action_help(self) -> None:
        keys = self.bound_keys()
        self.push_screen(TextScreen("Help", actions.help_plain(keys), renderable=actions.help_table(keys)))

    def bound_keys(self) -> dict[str, str]:
        """Binding id → keys, as bound now: the registry's, overridden by the keymap file."""
        return {**actions.DEFAULTS, **{k: v for k, v in self.keymap.items() if k in actions.IDS}}

    def action_go_back(self) -> None:
        """Escape on the main screen with nothing open: the screen behind it (none here)."""

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        """The palette: Textual's theme and screenshot, then every key of the screen in front
        that applies now (the same registry as the footer and the help). Textual's Quit, Keys
        and Maximize would repeat the monitor's own q, ? and full-screen views."""
        yield from (c for c in super().get_system_commands(screen) if c.title in ("Theme", "Screenshot"))
        seen: set[tuple[str, str]] = set()
        for active in screen.active_bindings.values():
            binding = active.binding
            if not active.enabled or binding.id is None or (binding.id, binding.action) in seen:
                continue
            seen.add((binding.id, binding.action))
            key = next((k for k in actions.KEYS if k.id == binding.id and k.action == binding.action), None)
            if key is None or not key.palette:
                continue
            node = active.node
            yield SystemCommand(key.title, key.help, partial(self.run_action, binding.action, node))

    async def action_quit(self) -> None:
        if self.on_quit is not None:
            await asyncio.to_thread(self.on_quit)
        self.exit()
