"""One immutable picture of a workspace: what `status --json` prints and the TUI draws.

Viewers never hold state of their own: they read a fresh Snapshot whenever a file changes.
Reading never fails: a corrupt state file becomes `error`, so the viewer can show it. Git is
not in here: it is slow (a subprocess), so viewers ask `gitstate.status` on their own clock.
"""

from __future__ import annotations

import itertools
import os
import threading
from dataclasses import asdict, dataclass
from typing import Any

from loop import trust
from loop.core.errors import FileProblem
from loop.core.model import Command
from loop.core.timeutil import parse_iso
from loop.sources.aggregate import Aggregate, SourceConfig, check_all
from loop.store import state as state_file  # `state_file.parse`: a test counts the parses
from loop.store.archive import latest_summary
from loop.store.control import pending
from loop.store.journal import Event, Follower
from loop.store.paths import Workspace
from loop.store.proc import alive
from loop.store.safeopen import NotRegularFile, read_regular
from loop.store.state import LoopState, StateStore, backup_of_this_loop

JOURNAL_TAIL = 300


@dataclass(frozen=True)
class LoopView:
    kind: str
    state_file: str
    status: str
    iteration: int
    max_iterations: int
    verification_mode: bool
    verification_remaining: int
    completion_promise: str
    started_at: str
    session_id: str | None
    driver: str | None
    pid: int | None
    alive: bool | None
    verify_loops: int = 4
    current_task: str | None = None
    escalated: bool = False
    prompt: str = ""
    waiting_for: dict[str, Any] | None = None
    """Why a paused loop waits for a person (kind, reason, since), as the engine recorded it."""
    usage: dict[str, int] | None = None
    """What the agent reported it used (cost in millionths of a dollar, tokens)."""
    limits: dict[str, int] | None = None
    notify: tuple[str, ...] = ()
    agents: dict[str, str] | None = None
    """The runner's agent command and its fallback's (`agent`, `fallback_agent`), as recorded."""
    loop_id: str = ""
    """Which loop this is (see `LoopState.loop_id`); "" for a loop from before loops had one."""
    last_validation: dict[str, Any] | None = None
    """The last verification run's results (`LoopState.last_validation`): when, whether the
    tests pass, the build succeeds and the tree is clean, and the test counts; None before any."""
    sandbox: str | None = None
    """The sandbox the runner's agent turns run in (`bwrap (bubblewrap 0.8.0), network on`, or
    `off: …` and why), as the last runner recorded it; None before any runner ran."""

    @classmethod
    def of(cls, workspace: Workspace, state: LoopState) -> LoopView:
        return cls.of_state(
            state,
            kind="orchestrator-loop",
            state_file=str(workspace.state),
            session_id=state.session_id,
            driver=state.driver,
            pid=state.pid,
            alive=alive(state.pid),
            agents=_agents(state),
            sandbox=_sandbox(state),
        )

    @classmethod
    def of_state(
        cls,
        state: LoopState,
        *,
        kind: str,
        state_file: str,
        session_id: str | None,
        driver: str | None,
        pid: int | None,
        alive: bool | None,
        agents: dict[str, str] | None,
        sandbox: str | None = None,
    ) -> LoopView:
        """The view of a state, wherever it lives (a file here, a workflow on a server): what
        the state says, and what its reader knows of its driver."""
        return cls(
            kind=kind,
            state_file=state_file,
            status=state.status,
            iteration=state.iteration,
            max_iterations=state.max_iterations,
            verification_mode=state.verification_mode,
            verification_remaining=state.verification_remaining,
            completion_promise=state.completion_promise,
            started_at=state.started_at,
            loop_id=state.loop_id,
            session_id=session_id,
            driver=driver,
            pid=pid,
            alive=alive,
            verify_loops=state.verify_loops,
            current_task=state.current_task,
            escalated=state.escalated,
            prompt=state.prompt,
            waiting_for=dict(state.waiting_for) if state.waiting_for else None,
            usage=dict(state.usage) or None,
            limits=dict(state.limits) or None,
            notify=tuple(state.notify),
            agents=agents,
            sandbox=sandbox,
            last_validation=dict(state.last_validation) or None,
        )

    @property
    def verification_loop(self) -> int:
        """The verification loop in progress (1-based), 0 outside verification."""
        if not self.verification_mode:
            return 0
        return max(1, self.verify_loops - self.verification_remaining)


@dataclass(frozen=True)
class StateProblem:
    path: str
    line: int | None
    problem: str
    message: str


@dataclass(frozen=True)
class Verification:
    command: str
    passed: bool
    exit_code: int | None
    duration_s: float | None
    tail: str
    iteration: int | None
    ts: str


@dataclass(frozen=True)
class Snapshot:
    workspace: str
    loop: LoopView | None
    error: StateProblem | None = None
    sources: Aggregate | None = None
    events: tuple[Event, ...] = ()
    verifications: tuple[Verification, ...] = ()
    durations: tuple[float, ...] = ()
    """Seconds per iteration, oldest first (the runner's agent runs, or the time between the
    hook's blocks)."""
    archive: dict[str, Any] | None = None
    """The latest archived loop's summary, when there is no live loop."""
    backup_exists: bool = False
    """With a corrupt state: a backup of the loop in this folder is there to restore (the
    backup of a loop before it is not offered: `loopdeck restore` refuses it)."""
    parallel: dict[str, Any] | None = None
    """`run --workers`: the workers, the lock table and the deferral streak, as the state has them."""
    pending: tuple[Command, ...] = ()
    """Commands queued and not applied yet, oldest first: a viewer shows them as pending."""
    unconfirmed: tuple[str, ...] = ()
    """What the loop names that nobody on this machine confirmed (`loop.trust`): while anything
    is listed, no driver runs it; a viewer says so and how to confirm it."""

    @property
    def confirmed(self) -> bool:
        return not self.unconfirmed

    @property
    def escalation(self) -> Event | None:
        """The latest escalation, unless the loop was resumed (or its limit raised) since."""
        for event in reversed(self.events):
            if event.kind == "escalation":
                return event
            if event.kind == "resumed" or (
                event.kind == "command-applied" and event.data.get("command") == "set-max-iterations"
            ):
                return None
        return None

    @property
    def question(self) -> Event | None:
        for event in reversed(self.events):
            if event.kind == "question":
                return event
            if event.kind in ("answered", "resumed"):
                return None
        return None

    def to_json(self) -> dict[str, Any]:
        obj: dict[str, Any] = {
            "workspace": self.workspace,
            "loop": _loop_json(self.loop) if self.loop else None,
            "sources": [s.to_json() for s in self.sources.sources] if self.sources else [],
            "pending_total": self.sources.pending_total if self.sources else 0,
            "uncertain": self.sources.uncertain if self.sources else False,
        }
        if self.error is not None:
            obj["error"] = asdict(self.error)
        if self.archive is not None:
            obj["last_archive"] = self.archive
        if self.parallel is not None:
            obj["parallel"] = self.parallel
        if self.loop is not None:
            obj["loop"]["confirmed"] = self.confirmed
            if self.unconfirmed:
                obj["loop"]["unconfirmed"] = list(self.unconfirmed)
        return obj


def _agents(state: LoopState) -> dict[str, str] | None:
    runner = state.extra.get("runner")
    if not isinstance(runner, dict):
        return None
    found = {
        k: runner[k] for k in ("agent", "fallback_agent") if isinstance(runner.get(k), str) and runner[k]
    }
    return found or None


def _sandbox(state: LoopState) -> str | None:
    runner = state.extra.get("runner")
    found = runner.get("sandbox") if isinstance(runner, dict) else None
    return found if isinstance(found, str) and found else None


def _loop_json(view: LoopView) -> dict[str, Any]:
    keys = (
        "kind",
        "state_file",
        "status",
        "iteration",
        "max_iterations",
        "verification_mode",
        "verification_remaining",
        "completion_promise",
        "started_at",
        "loop_id",
        "session_id",
        "driver",
        "pid",
        "alive",
        "current_task",
        "escalated",
        "waiting_for",
        "usage",
        "limits",
        "notify",
        "last_validation",
    )
    obj = {key: getattr(view, key) for key in keys}
    if view.agents:
        obj["agents"] = dict(view.agents)  # the runner's agent (and fallback) commands
    obj["notify"] = list(view.notify)
    obj["sandbox"] = view.sandbox
    if obj["completion_promise"] in ("", "null"):
        obj["completion_promise"] = None  # JSON says "none" as null, not as a placeholder string
    return obj


def _verifications(events: tuple[Event, ...]) -> tuple[Verification, ...]:
    latest: dict[str, Verification] = {}
    for event in events:
        if event.kind in ("verification-passed", "verification-failed"):
            command = str(event.data.get("command", "?"))
            latest[command] = Verification(
                command,
                event.kind == "verification-passed",
                _int(event.data.get("exit_code")),
                _float(event.data.get("duration_s")),
                str(event.data.get("tail", "")),
                event.iteration,
                event.ts,
            )
    return tuple(latest.values())


def _durations(events: tuple[Event, ...]) -> tuple[float, ...]:
    runs = [_float(e.data.get("duration_s")) for e in events if e.kind == "iteration-completed"]
    found = tuple(d for d in runs if d is not None)
    if found:
        return found[-30:]
    stamps = [parse_iso(e.ts) for e in events if e.kind == "blocked"]
    moments = [m for m in stamps if m is not None]
    return tuple((b - a).total_seconds() for a, b in itertools.pairwise(moments))[-30:]


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def read(workspace: Workspace, *, with_sources: bool = True, with_events: bool = True) -> Snapshot:
    """The workspace as it is now (one look: `status`, the fleet's rows)."""
    return Reader(workspace).read(with_sources=with_sources, with_events=with_events)


class Reader:
    """Snapshots of one workspace, one after another, each reading only what changed since the
    last: the journal's new lines (not its last 300 again), the state parsed again only when its
    bytes changed, the task file parsed once per change (`loop.sources.task_file`). A viewer
    reads at every change of any loop file, several times an iteration; with a reader, what a
    snapshot costs does not grow with the iterations, logs or archived loops behind it."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.journal = Follower(workspace.journal, JOURNAL_TAIL)
        self.state_bytes: bytes | None = None
        self.state: LoopState | None = None
        self.derived: tuple[tuple[Event, ...], tuple[Verification, ...], tuple[float, ...]] | None = None
        """The verifications and durations worked out from the events they came from."""
        self.lock = threading.Lock()
        """One read at a time: a viewer's worker threads may overlap."""
        self.ours: tuple[tuple[float, int, float, int], bool] | None = None
        """Whether the backup is of this loop, for the state and backup files as they were."""

    def _ours(self) -> bool:
        """With a corrupt state: is the backup of the loop in this folder (what a restore
        takes)? Worked out again only when either file changed: a monitor reads every second."""
        try:
            state, backup = os.stat(self.workspace.state), os.stat(self.workspace.backup)
        except OSError:
            return False
        key = (state.st_mtime, state.st_size, backup.st_mtime, backup.st_size)
        if self.ours is None or self.ours[0] != key:
            self.ours = key, backup_of_this_loop(self.workspace)
        return self.ours[1]

    def read(self, *, with_sources: bool = True, with_events: bool = True) -> Snapshot:
        with self.lock:
            return self._read(with_sources, with_events)

    def _read(self, with_sources: bool, with_events: bool) -> Snapshot:
        workspace = self.workspace
        root = str(workspace.root)
        events = self.journal.read() if with_events else ()
        backup = workspace.backup.exists()
        try:
            state = self._state()
        except FileProblem as exc:
            problem = StateProblem(str(exc.path), exc.line, exc.problem, str(exc))
            return Snapshot(root, None, problem, events=events, backup_exists=backup and self._ours())
        if state is None:
            return Snapshot(
                root, None, events=events, archive=_latest_archive(workspace), backup_exists=backup
            )
        sources = check_all(SourceConfig.from_state(workspace, state)) if with_sources else None
        verifications, durations = self._derived(events)
        return Snapshot(
            root,
            LoopView.of(workspace, state),
            sources=sources,
            events=events,
            verifications=verifications,
            durations=durations,
            backup_exists=backup,
            parallel=_parallel(state),
            pending=_pending(workspace, state),
            unconfirmed=tuple(trust.unconfirmed(workspace, state)),
        )

    def _state(self) -> LoopState | None:
        """The state, parsed again only when the file's bytes changed (StateError as `read`)."""
        store = StateStore(self.workspace)
        try:
            data = read_regular(store.path, state_file.MAX_STATE_BYTES + 1)
        except (FileNotFoundError, IsADirectoryError, NotRegularFile, NotADirectoryError, OSError):
            self.state_bytes = self.state = None
            return store.read()  # no file (None), or the error as a reader of the state says it
        if data != self.state_bytes or self.state is None:
            self.state_bytes, self.state = None, None
            self.state = state_file.parse(data, store.path)
            self.state_bytes = data
        return self.state

    def _derived(self, events: tuple[Event, ...]) -> tuple[tuple[Verification, ...], tuple[float, ...]]:
        if self.derived is None or self.derived[0] is not events:
            self.derived = (events, _verifications(events), _durations(events))
        return self.derived[1], self.derived[2]


def _parallel(state: LoopState) -> dict[str, Any] | None:
    # Here, not at the top: ~7 ms (`-X importtime`, the task board's rules) that `loopdeck log`,
    # `sources` and a folder with no loop never use.
    from loop.core.scheduler import section_of

    return section_of(state)


def _pending(workspace: Workspace, state: LoopState) -> tuple[Command, ...]:
    try:
        return tuple(pending(workspace, state))
    except (OSError, ValueError):
        return ()


def _latest_archive(workspace: Workspace) -> dict[str, Any] | None:
    found = latest_summary(workspace)
    if found is None:
        return None
    folder, data = found
    return {**data, "folder": str(folder)}
