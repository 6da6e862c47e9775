"""Output: what the agent is saying and doing in the current iteration, as it happens.

For a runner loop it follows the iteration's log (`.claude/loopdeck/iterations/<loop>/NNNN.log`); for a
hook loop, the session transcript. Each CLI's JSON (Claude Code's `json`/`stream-json` and
transcript lines, Codex's `--json` events, Gemini's `stream-json`, OpenCode's `--format json`
parts) is shown as the agent's text and its tool calls, read by that CLI's adapter
(`loop.agents`); anything else line by line.

The panel follows the loop's snapshots: each one that comes (the app reads one whenever the
loop's files change) may move it to another file (a new iteration's log) and takes the lines
added since the last look along, so that an iteration's journal lines and output lines are drawn
in one frame. Between snapshots (an agent talking for minutes), the panel's own watch on the
file (watchfiles, on the file's folder; a clock looking every 0.1 s where the folder cannot be
watched) tells it the file grew; lines it finds wait a moment
(`HOLD_S`) for the snapshot that usually follows them (the agent done, the runner journaling)
before they are drawn on their own. Only the bytes added since the last look are read, from the
end: a transcript of hundreds of MB costs what its last lines cost. A look reads at most
`TICK_BYTES`: a log written faster than that is followed by skipping ahead (and saying so), never
by falling behind. A few KB are read where the panel is (no thread for each look: a thread's
memory arena outlives the read); a larger catch-up is read in a thread worker, so a slow disk
never stalls the screen.
"""

from __future__ import annotations

import os
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.reactive import var
from textual.timer import Timer
from textual.widgets import RichLog
from textual.worker import Worker

from loop.agents import live_line
from loop.core.policy import named
from loop.store.paths import Workspace
from loop.store.state import StateStore
from loop.views.snapshot import Snapshot
from tui.watch import OUTPUT_STEP_MS, changes
from tui.widgets.clocks import Clocks
from tui.widgets.common import set_border
from tui.widgets.search import SearchInput
from tui.widgets.tail_log import TailLog

TICK_S = 0.1
"""How often the panel looks for new output between snapshots."""
HOLD_S = 0.05
"""Lines found by the clock are drawn when they have waited this long for a snapshot to take
them along (50 to 150 ms after they were written)."""
SMALL_READ = 64 * 1024
"""At most this much new is read without a thread."""
TICK_BYTES = 512 * 1024
"""At most this much is read per tick (5 MB/s followed); beyond, the panel skips to the end."""
FIRST_LOOK = 64 * 1024
"""A file met for the first time is read from its last this-many bytes."""
KEEP_LINES = 2000
SWITCH_EVERY_S = 0.5
"""The panel moves to another file (a new iteration's log) at most this often, with a snapshot
that comes once this has passed; `LATE_S` after the last move at the latest, when none comes."""
LATE_S = 2 * SWITCH_EVERY_S
QUIET_TICKS = 20
"""After this many ticks that found nothing new (2 s), the clock rests: the file is looked at
once a second (on the app's shared second), and again at every tick once it grows or the loop
moves."""
SILENT_S = 1.0
"""A newly followed file that has said nothing for this long is shown empty."""
WRITE_LINES = 100
"""At most this many lines drawn per tick (1000 a second): a log racing by is summarised."""


@dataclass(frozen=True)
class Followed:
    """The file the panel follows, and what kind of lines it holds."""

    path: str
    """A string, not a `Path`: a `Path` interns every part of its name in the interpreter's
    table for good, and every iteration's log has a name of its own (the monitor's memory grew
    with each iteration it followed)."""
    kind: str
    """`iteration log` (the runner's) or `transcript` (a hook loop's session)."""
    agent: str | None = None
    """The CLI writing it (`codex`, …), as the runner journaled the iteration; None: found out."""


def followed(workspace: Workspace, snapshot: Snapshot | None, worker: str | None = None) -> Followed | None:
    """The file showing the current iteration's output, if there is one: for a loop of workers,
    the turn of `worker` (the one selected in the workers panel; else the first running)."""
    loop = snapshot.loop if snapshot else None
    if loop is None or snapshot is None:
        return None
    if snapshot.parallel is not None:
        return worker_turn(workspace, snapshot.parallel, worker)
    if named(loop.driver).starts_agent:
        # this loop's own, never an earlier one's
        logs = workspace.iteration_logs_folder(loop.started_at, loop.loop_id)
        newest = _current_log(logs, loop.iteration, snapshot)
        if newest is None:  # not where the journal says: the newest of the folder
            try:
                with os.scandir(logs) as entries:
                    names = [e.name for e in entries if e.name.endswith(".log")]
            except OSError:
                return None
            last = max(names, key=_log_order, default=None)
            newest = None if last is None else os.path.join(logs, last)
        agent = next(
            (e.data.get("agent") for e in reversed(snapshot.events) if e.kind == "iteration-started"), None
        )
        if newest is None:
            return None
        return Followed(newest, "iteration log", agent if isinstance(agent, str) else None)
    try:
        state = StateStore(workspace).read()
    except Exception:  # a corrupt state is the error panel's to show, not this one's
        return None
    if state is not None and state.transcript_path:
        return Followed(str(state.transcript_path), "transcript", "claude")
    return None


def worker_turn(workspace: Workspace, section: dict[str, Any], name: str | None) -> Followed | None:
    """A worker's current turn, as the parallel driver logs it (`workers/<name>.<turn>.log`)."""
    workers = [w for w in section.get("workers") or [] if isinstance(w, dict)]
    chosen = next((w for w in workers if w.get("name") == name), None) or next(
        (w for w in workers if w.get("status") == "running"), workers[0] if workers else None
    )
    if chosen is None:
        return None
    worker, turns = str(chosen.get("name")), chosen.get("turns", 1)
    turn = turns if isinstance(turns, int) else 1
    path = os.path.join(workspace.private_dir, "workers", f"{worker}.{turn:02d}.log")
    return Followed(path, f"{worker} turn {turn} ·")


def _current_log(logs: str, iteration: int, snapshot: Snapshot) -> str | None:
    """The iteration's log, named as the runner names it (`0042.log`, then `0042.retry1.log`…
    for each retry or agent switch the journal shows): found with a look or two, where listing
    the folder costs a look at every log of the loop's history."""
    runs = sum(
        1 for e in snapshot.events if e.iteration == iteration and e.kind in ("retry", "agent-switched")
    )
    for n in range(runs, -1, -1):
        path = os.path.join(logs, f"{iteration:04d}.log" if n == 0 else f"{iteration:04d}.retry{n}.log")
        if os.path.isfile(path):
            return path
    return None


def _log_order(name: str) -> tuple[int, str]:
    """Iteration logs in the order they were written: `0042.log`, `0042.retry1.log`, … `10000.log`."""
    number = name.split(".", 1)[0]
    return (int(number) if number.isdigit() else -1, name)


STYLES = {"▸": "cyan", "■": "bold", "●": "dim", "!": "yellow", "  ✗": "red", "  exit": "red"}
"""The marks of the adapters' live lines (`loop.agents.base.Adapter.live_line`) and their look."""


def render_line(line: str, agent: str | None = None) -> list[Text]:
    """One line of a log or a transcript, as the lines a person reads (none for noise): read by
    the adapter of the CLI that printed it (`agent`, the iteration's, first), so Claude Code's,
    Codex's, Gemini's and OpenCode's JSON show as the agent's words and its tool calls."""
    if not line.strip():
        return []
    shown = live_line(line.rstrip("\n"), agent)
    if not shown:
        return []
    out = []
    for part in shown.splitlines():
        style = next((look for mark, look in STYLES.items() if part.startswith(mark)), None)
        out.append(Text(part, style=style) if style else Text(part))
    return out


class OutputRead:
    """Where the panel is in the file it follows: a position and an unfinished last line."""

    def __init__(self, target: Followed) -> None:
        self.target = target
        self.offset: int | None = None
        self.partial = b""
        self.skipped = 0
        """Bytes passed over since the last read (a file growing faster than a tick reads)."""

    def read(self) -> list[str]:
        """The complete lines added since the last call (may skip ahead: see `skipped`)."""
        try:
            with open(self.target.path, "rb") as handle:
                size = os.fstat(handle.fileno()).st_size
                if self.offset is None:
                    self.offset = max(0, size - FIRST_LOOK)
                    self.skipped = self.offset
                elif size < self.offset:  # truncated or replaced: start again
                    self.offset, self.partial = 0, b""
                if size - self.offset > TICK_BYTES:
                    self.skipped += size - TICK_BYTES - self.offset
                    self.offset, self.partial = size - TICK_BYTES, b""
                if size == self.offset:
                    return []
                handle.seek(self.offset)
                data = handle.read(size - self.offset)
        except OSError:
            return []
        self.offset += len(data)
        data = self.partial + data
        cut = data.rfind(b"\n")
        if cut < 0:
            self.partial = data
            return []
        self.partial = data[cut + 1 :]
        lines = data[:cut].decode("utf-8", "replace").split("\n")
        if self.skipped:  # the first line after a jump is cut in the middle
            lines = lines[1:]
        return lines


class OutputPanel(Vertical):
    """The current iteration's output, following the tail unless the person scrolls up."""

    DEFAULT_CSS = """
    OutputPanel { border: round $primary 50%; height: 1fr; min-height: 5; }
    OutputPanel #output-search { display: none; height: 3; }
    OutputPanel.-searching #output-search { display: block; }
    OutputPanel > RichLog { height: 1fr; background: transparent; }
    """
    ALLOW_MAXIMIZE = True

    snapshot: var[Snapshot | None] = var(None, init=False)
    """The workspace as last read (bound to the app's): which loop, which iteration."""
    worker: var[str | None] = var(None, init=False)
    """In a loop of workers, the one selected in the workers panel: its turn is shown."""
    target: var[Followed | None] = var(None)
    """The file followed; a change starts the panel afresh."""
    query_text: var[str] = var("", init=False)
    """The search: only lines containing it (case-insensitive) are shown."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.reader: OutputRead | None = None
        self.lines: deque[Text] = deque(maxlen=KEEP_LINES)
        self.lines_read = 0
        """Lines taken from the file in all: for tests and the bench."""
        self.reading: Worker[None] | None = None
        self.ticker: Timer | None = None
        """The panel's clock where the file cannot be watched (started then, stopped with the
        panel), paused while nothing is followed."""
        self.watching = False
        """Whether the file followed is watched rather than looked at on a clock."""
        self.drawn_width = 0
        """The width the lines were wrapped at."""
        self.switched_at = 0.0
        self.switch_due = False
        """When the panel last moved to another file, and whether a move waits for a snapshot."""
        self.quiet = 0
        """Ticks in a row that found the file as it was (any change of the loop resets it)."""
        self.grown_at: float | None = None
        """When the clock found the file grown (its lines wait `HOLD_S` for a snapshot)."""
        self.fresh = False
        """A new file is followed and none of its lines shown yet: the last file's stay until
        they come (or until `SILENT_S` has passed)."""
        self.looked: tuple[object, ...] | None = None
        """What `target` was last worked out from: the folder is listed (or the state read) again
        only when the loop moves to another iteration or session, not on every snapshot."""
        self.reads_in_thread = 0
        """Reads handed to a thread worker (a large catch-up): for tests."""

    def compose(self) -> ComposeResult:
        yield SearchInput(placeholder="search the output (Enter keeps it, Escape clears)", id="output-search")
        yield TailLog(id="output-lines", wrap=True, max_lines=KEEP_LINES, auto_scroll=True)

    def on_mount(self) -> None:
        self.border_title = "Output"
        self.clocks = Clocks()
        self.watching = True
        self.watch_target(self.target)

    def follow_by_clock(self) -> None:
        """No watch to be had (no folder, no inotify watches left): the file is looked at on a
        clock, every `TICK_S` while it grows, once a second while it is silent."""
        self.watching = False
        if self.ticker is None:
            self.ticker = self.clocks.every(self, TICK_S, self.tick, wanted=lambda: self.target is not None)
            self.clocks.every_second(self, self.tick)  # a file silent for long, looked at now and then

    @work(exclusive=True, group="output-watch", exit_on_error=False)
    async def watch_writes(self, target: Followed) -> None:
        """The followed file's folder watched until the panel follows another: each burst of
        writes to the file is looked at once (`grown`)."""
        name, folder = target.path, os.path.dirname(target.path)
        try:
            async for _paths in changes(
                [folder], lambda change, path: path in (name, folder), step_ms=OUTPUT_STEP_MS
            ):
                self.look()
        except OSError:  # no folder (yet), no watches left
            self.follow_by_clock()

    def watch_snapshot(self, snapshot: Snapshot | None) -> None:
        self.quiet = 0
        if self.ticker is not None and self.target is not None:
            self.clocks.resume(self.ticker)  # the loop moved: its output may follow
        loop = snapshot.loop if snapshot is not None else None
        self.display = loop is not None  # a finished loop has no output to follow
        if snapshot is None or loop is None:
            self.looked = None
            self.target = None
            return
        attempt = next((e.data.get("attempt") for e in reversed(snapshot.events) if e.kind == "retry"), None)
        switched = sum(1 for e in snapshot.events if e.kind == "agent-switched")  # another agent: another log
        turns = None
        if snapshot.parallel is not None:  # a worker's turn: another worker or turn, another log
            turns = tuple((w.get("name"), w.get("turns")) for w in snapshot.parallel.get("workers") or [])
        key = (
            snapshot.workspace,
            self.worker,
            turns,
            loop.driver,
            loop.session_id,
            loop.iteration,
            loop.started_at,
            loop.loop_id,
            attempt,
            switched,
        )
        if key != self.looked or self.target is None:
            wait = self.switched_at + SWITCH_EVERY_S - time.monotonic()
            if self.target is not None and wait > 0:
                # Iterations faster than a person reads: the file followed now is kept a moment
                # (its lines still come), and the newest one taken by the first snapshot that
                # comes once the moment is over, in that snapshot's frame. The loop gone quiet,
                # a timer takes it.
                if not self.switch_due:
                    self.switch_due = True
                    self.set_timer(wait + LATE_S - SWITCH_EVERY_S, self._switch_late)
                self.catch_up()
                return
            self.switch_due = False
            self.looked = key
            self.switched_at = time.monotonic()
            locate = getattr(self.app, "followed_output", None)  # a monitor reading elsewhere
            if callable(locate):
                target = locate(snapshot, self.worker)
            else:
                target = followed(Workspace(Path(snapshot.workspace)), snapshot, self.worker)
            if target != self.target:
                self.target = target  # `watch_target` reads its first lines
                return
        self.catch_up()

    def watch_worker(self) -> None:
        """Another worker selected: its turn at once (a person's choice waits for nothing)."""
        self.switched_at = 0.0
        self.watch_snapshot(self.snapshot)

    def _switch_late(self) -> None:
        if self.switch_due:
            self.watch_snapshot(self.snapshot)

    def watch_target(self, target: Followed | None) -> None:
        self.reader = OutputRead(target) if target is not None else None
        self.grown_at = None
        if self.ticker is not None:  # nothing followed, nothing to look for: the clock rests
            self.clocks.resume(self.ticker) if target is not None else self.ticker.pause()
        if self.watching:  # on mount and after
            if target is None:
                self.workers.cancel_group(self, "output-watch")
            else:
                self.watch_writes(target)
                self.set_timer(SILENT_S, lambda: self.silent(target))
        if target is None:
            self.start_afresh(None)
            return
        # The new file's first lines replace the last file's in one frame, not a cleared panel
        # then its lines a frame later (a loop at five iterations a second: ten frames a second
        # of the panel for nothing); a file that stays silent is shown as such after a moment.
        self.fresh = True
        self.catch_up()

    def start_afresh(self, target: Followed | None) -> None:
        """The panel emptied for `target` (the file followed now, or None)."""
        if target is not None and (self.reader is None or self.reader.target is not target):
            return  # another file is followed since
        self.fresh = False
        self.lines.clear()
        log = self.query_one(RichLog)
        log.clear()
        if target is None:
            set_border(self, subtitle="")
            log.write(Text("waiting for the agent's output", style="dim"))
            return
        if not os.path.exists(target.path):
            log.write(Text("no output from this turn yet", style="dim"))
        set_border(self, subtitle=f"{target.kind} {os.path.basename(target.path)}")

    def silent(self, target: Followed) -> None:
        """`SILENT_S` after the panel moved to `target`: shown empty if it said nothing yet."""
        if self.fresh and self.reader is not None and self.reader.target is target:
            self.start_afresh(target)

    def tick(self) -> None:
        """The panel's clock: lines written between snapshots (an agent at work) are drawn once
        they have waited `HOLD_S` for a snapshot to take them along."""
        reader = self.reader
        if reader is None:
            return
        if self.fresh and time.monotonic() - self.switched_at >= SILENT_S:
            self.start_afresh(reader.target)  # the new file said nothing for a while: shown empty
        self.look()

    def look(self) -> None:
        """Whether the file grew (a stat); lines written between snapshots (an agent at work) are
        drawn once they have waited `HOLD_S` for a snapshot to take them along."""
        reader = self.reader
        if reader is None:
            return
        if self.reading is not None and not self.reading.is_finished:
            return  # one read at a time: a look that finds the last one still going lets it finish
        try:  # a stat is cheap; a read per idle tick is not
            size: int | None = os.stat(reader.target.path).st_size
        except OSError:
            size = None  # not there (yet): nothing to read
        if size is None or size == reader.offset:
            self.grown_at = None
            self.quiet += 1
            if self.quiet >= QUIET_TICKS and self.ticker is not None:
                self.ticker.pause()  # silent for a while (a paused loop): the slow clock looks
            return
        self.quiet = 0
        if self.ticker is not None:
            self.clocks.resume(self.ticker)
        if self.grown_at is None:  # the snapshot that usually follows takes these lines into its frame
            self.grown_at = time.monotonic()
            self.set_timer(HOLD_S, self._held)
            return
        if time.monotonic() - self.grown_at >= HOLD_S:
            self.catch_up()

    def _held(self) -> None:
        """`HOLD_S` after the clock found new lines: drawn now if no snapshot took them."""
        if self.grown_at is not None:
            self.catch_up()

    def catch_up(self) -> None:
        """The lines added to the file since the last look, drawn in the frame being made: read
        here when they are a few KB, else in a thread worker (drawn when it is done)."""
        reader = self.reader
        if reader is None or (self.reading is not None and not self.reading.is_finished):
            return
        self.grown_at = None
        try:
            size = os.stat(reader.target.path).st_size
        except OSError:
            return
        if reader.offset is not None and size == reader.offset:
            return
        if reader.offset is None:
            pending = min(size, FIRST_LOOK)
        else:
            pending = size - reader.offset if size > reader.offset else size  # shorter: read again
        if pending <= SMALL_READ:
            lines = reader.read()
            if lines:
                self.add_lines(reader, lines)
            return
        self.reads_in_thread += 1
        self.reading = self.read(reader)

    @work(thread=True, group="output", exit_on_error=False)
    def read(self, reader: OutputRead) -> None:
        lines = reader.read()
        if lines:
            self.app.call_from_thread(self.add_lines, reader, lines)

    def add_lines(self, reader: OutputRead, raw: list[str]) -> None:
        if reader is not self.reader:
            return  # a read of a file no longer followed
        if self.fresh:
            self.start_afresh(reader.target)
        notes = []
        if reader.skipped:
            notes.append(Text(f"… {reader.skipped // 1024} KB skipped", style="dim"))
            reader.skipped = 0
        wanted = self.query_text.lower()
        self.lines_read += len(raw)
        shown = []
        for line in raw:
            for text in render_line(line, reader.target.agent):
                self.lines.append(text)
                if not wanted or wanted in text.plain.lower():
                    shown.append(text)
        if len(shown) > WRITE_LINES:  # nobody reads faster than this: the search still has them
            passed = len(shown) - WRITE_LINES
            notes.append(Text(f"… {passed} lines passed by (search finds them)", style="dim"))
            shown = shown[-WRITE_LINES:]
        # In one go: it follows its tail (unless the person scrolled up) with one scroll.
        self.query_one(TailLog).write_texts(notes + shown)

    def watch_query_text(self, text: str) -> None:
        self.rewrite()

    def on_resize(self, event: events.Resize) -> None:
        """Lines are wrapped when written: a new width (full screen, a resized terminal) wraps
        them all again."""
        if event.size.width != self.drawn_width:
            if self.drawn_width and self.lines:
                self.rewrite()
            self.drawn_width = event.size.width

    def rewrite(self) -> None:
        wanted = self.query_text.lower()
        self.query_one(TailLog).clear().write_texts(
            [line for line in self.lines if not wanted or wanted in line.plain.lower()]
        )

    def start_search(self) -> None:
        self.add_class("-searching")
        self.query_one(SearchInput).open()

    @property
    def searching(self) -> bool:
        """A search is open or filters the output: Escape clears it before anything else."""
        return bool(self.query_text) or self.has_class("-searching")

    def clear_search(self) -> None:
        search = self.query_one(SearchInput)
        search.value = ""
        self.query_text = ""
        self.remove_class("-searching")
        if search.has_focus:
            search.give_back()
        self.screen.refresh_bindings()

    @on(SearchInput.Changed, "#output-search")
    def search_changed(self, event: SearchInput.Changed) -> None:
        self.query_text = event.value

    @on(SearchInput.Kept)
    @on(SearchInput.Submitted)
    def keep_search(self) -> None:
        """The filter stays; the box goes when it is empty, and the keys go back to the screen."""
        if not self.query_text:
            self.remove_class("-searching")
        self.query_one(SearchInput).give_back()
        self.screen.refresh_bindings()

    @on(SearchInput.Cleared)
    def search_cleared(self) -> None:
        self.clear_search()
