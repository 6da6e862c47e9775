"""The loop's data, in one place: its state, the commands people send, what the task sources
report, and what the engine takes and gives.

Every other module speaks in these types, and this one imports nothing of the project, so the
engine (pure), the drivers, the viewers and the tests all agree on one vocabulary, and the Stop
hook, which loads it on every agent turn, pays for nothing it does not use.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

__all__ = [
    "ACTIVE_STATUSES",
    "COMMANDS",
    "DEFAULT_BLOCK_CAP",
    "DEFAULT_LIMITS",
    "DRIVERS",
    "KNOWN_KEYS",
    "MAX_ITEMS",
    "NULL",
    "RUNNER_ENV",
    "SOURCE_LABELS",
    "SOURCE_NAMES",
    "STATUSES",
    "WAITING_KINDS",
    "Aggregate",
    "Command",
    "Effects",
    "Event",
    "JournalEvent",
    "LoopState",
    "Result",
    "Settings",
    "SourceReport",
    "StopInput",
    "TaskItem",
    "Turn",
    "combine",
    "new_loop_id",
    "replace",
    "same_loop",
]

# --- the state -------------------------------------------------------------------------------

STATUSES = ("initializing", "running", "paused", "stopping", "completed", "stopped", "failed")
ACTIVE_STATUSES = frozenset({"initializing", "running", "paused", "stopping"})
DRIVERS = ("hook", "runner")
NULL = "null"
"""The state file spells "not set" as the string `"null"` (completion_promise, task_file)."""

RUNNER_ENV = {"LOOPDECK_DRIVER": "runner"}
"""In the environment of the agents `loopdeck run` starts: their Stops are the runner's turns,
and a Stop hook installed in the same project must leave them alone."""

WAITING_KINDS = ("pause", "question", "escalation", "usage-limit")
"""Why a paused loop waits: a person paused it, the agent asked something, or the loop escalated
(the `escalation` key then says which rule: max-iterations, max-cost, stuck,
repeated-failures, uncertain-sources, tasks-vanished, permission-denied), or the agent hit a
usage or rate limit (`until` says when it resets: the runner sleeps until then and goes on by
itself)."""

DEFAULT_LIMITS = {"stuck_after": 2, "same_error_after": 3, "same_task_after": 3}
"""Stuck detection: working turns without progress, the same error in a row, failures of one task."""


@dataclass(slots=True)
class LoopState:
    """One loop's state. Unknown keys ride along in `extra` and are written back untouched."""

    iteration: int = 0
    """How many times the loop has been sent back to work (+1 on every block)."""
    max_iterations: int = 100
    """Escalation threshold, never an exit; 0 = none."""
    completion_promise: str = NULL
    task_file: str = NULL
    check_tasks: bool = True
    check_github: bool = True
    github_project_id: str = ""
    started_at: str = ""
    loop_id: str = ""
    """Which loop this is: random, made with the loop. Two loops may start in the same second,
    so a backup, an archive and the iteration logs are told apart by it; "" in states written
    before loops had one (then `started_at` tells them apart)."""
    verification_mode: bool = False
    verification_remaining: int = 0
    status: str = "running"
    driver: str | None = None
    pid: int | None = None
    session_id: str | None = None
    """The Claude Code session that owns an in-session loop; Stops from others are ignored."""
    current_task: str | None = None
    verify_loops: int = 4
    verify: list[str] = field(default_factory=list)
    control_offset: int = 0
    """Byte offset in the control queue up to which every command has been applied. It lives
    here, written in the same atomic rename as the effect, so a command is applied exactly once."""
    escalated: bool = False
    """The max-iterations escalation has been raised (it is journaled once, prompted every block)."""
    consecutive_blocks: int = 0
    """Blocks in a row within one turn: Claude Code ends the turn at its block cap (default 8)."""
    transcript_path: str | None = None
    """The session transcript, recorded from the hook's input, so viewers can read its TODO list."""
    waiting_for: dict[str, Any] | None = None
    """Why a paused loop waits for a person: `{kind, reason, since}` (plus `escalation` for an
    escalation). Set and cleared by the engine only; everyone else reads it, nobody parses text."""
    stuck: dict[str, Any] = field(default_factory=dict)
    """The engine's stuck-detection counters (the task counts the last turn left, turns without
    progress, repeats of the same error and of failures on the same task), kept in the state so
    a restarted runner goes on counting."""
    limits: dict[str, int] = field(default_factory=dict)
    """The person's limits, from `start`/`run` options: `max_cost_micro_usd` (escalate when the
    agent's reported cost reaches it) and the stuck thresholds (`stuck_after`,
    `same_error_after`, `same_task_after`); missing keys take `DEFAULT_LIMITS`."""
    usage: dict[str, int] = field(default_factory=dict)
    """What the agent reported it used, summed over the loop: `cost_micro_usd` (millionths of a
    dollar: whole numbers keep the state file on its fast path) and token counts."""
    notify: list[str] = field(default_factory=list)
    """Where to tell a person when they are needed or the loop ends (desktop, a webhook URL, a
    command)."""
    last_validation: dict[str, Any] = field(default_factory=dict)
    """The last verification run's results, as the engine recorded them: `{ts, tests_pass,
    build_succeeds, git_clean, tests}` (`tests`: the summed test counts, when a command's output
    could be read). Empty until the checks first run; the next turn's progress is judged
    against it."""
    extra: dict[str, Any] = field(default_factory=dict)
    body: str = ""
    """Everything after the closing `---`, byte for byte (the prompt, with its blank lines)."""

    _order: list[str] = field(default_factory=list, repr=False, compare=False)
    _raw: dict[str, str] = field(default_factory=dict, repr=False, compare=False)
    _seen: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    _preamble: str = field(default="", repr=False, compare=False)
    _newline: str = field(default="\n", repr=False, compare=False)

    @classmethod
    def new(cls, prompt: str, **values: Any) -> LoopState:
        values.setdefault("started_at", datetime.now(UTC).replace(microsecond=0).isoformat())
        values.setdefault("loop_id", new_loop_id())
        return cls(body=f"\n{prompt.strip()}\n", **values)

    @property
    def prompt(self) -> str:
        return self.body.strip()

    @property
    def promise(self) -> str | None:
        """The completion promise, or None where the file says "null"."""
        text = self.completion_promise
        return None if text in (None, "", NULL) else str(text)

    @property
    def task_path(self) -> str | None:
        text = self.task_file
        return None if text in (None, "", NULL) else str(text)

    @property
    def active(self) -> bool:
        return self.status in ACTIVE_STATUSES

    @property
    def waiting_kind(self) -> str | None:
        return str(self.waiting_for.get("kind")) if self.waiting_for else None

    @property
    def waiting_reason(self) -> str | None:
        return str(self.waiting_for.get("reason", "")) if self.waiting_for else None

    def values(self) -> dict[str, Any]:
        """Every key as it would be written, known keys first in file order, then extras."""
        known = {key: getattr(self, key) for key in KNOWN_KEYS}
        return {**known, **self.extra}

    def copy(self) -> LoopState:
        """A copy the engine may change without touching the caller's (lists and maps too)."""
        return replace(
            self,
            verify=list(self.verify),
            extra=dict(self.extra),
            stuck=dict(self.stuck),
            waiting_for=dict(self.waiting_for) if self.waiting_for else None,
            limits=dict(self.limits),
            usage=dict(self.usage),
            notify=list(self.notify),
            last_validation=dict(self.last_validation),
        )

    def limit(self, name: str) -> int:
        return int(self.limits.get(name, DEFAULT_LIMITS.get(name, 0)))


def new_loop_id() -> str:
    """A new loop's id: 12 random hex digits, so that no two loops share one."""
    return os.urandom(6).hex()


def same_loop(started_at: str, loop_id: str, other_started_at: str, other_loop_id: str) -> bool:
    """Are these one loop? The same id when both have one; else (a state written before loops
    had ids) the same start time."""
    if loop_id and other_loop_id:
        return loop_id == other_loop_id
    return started_at == other_started_at


KNOWN_KEYS = (
    "iteration",
    "max_iterations",
    "completion_promise",
    "task_file",
    "check_tasks",
    "check_github",
    "github_project_id",
    "started_at",
    "verification_mode",
    "verification_remaining",
    "loop_id",
    "status",
    "driver",
    "pid",
    "session_id",
    "current_task",
    "verify_loops",
    "verify",
    "control_offset",
    "escalated",
    "consecutive_blocks",
    "transcript_path",
    "waiting_for",
    "stuck",
    "limits",
    "usage",
    "notify",
    "last_validation",
)


# --- commands ----------------------------------------------------------------------------------

COMMANDS = ("pause", "resume", "skip", "complete", "stop", "set-max-iterations", "answer", "say")


@dataclass(frozen=True, slots=True)
class Command:
    """One line of the control queue: what a person (CLI, monitor) asked the loop to do."""

    id: str
    ts: str
    kind: str
    source: str
    reason: str | None = None
    value: int | None = None
    end: int = 0
    """Byte offset just past this command's line: the driver's new `control_offset`."""
    target: str | None = None
    """A worker's name (`run --workers`): the command acts on that worker only."""
    person: bool = False
    """A fact the reader established, never read from the line itself: the line carries a valid
    `mac` of this user's key for this workspace, so a person's process on this machine sent it
    (`loop.store.control`). Only `pause` is applied without it (`loop.core.engine`)."""

    def to_json(self) -> dict[str, Any]:
        obj: dict[str, Any] = {"id": self.id, "ts": self.ts, "kind": self.kind, "source": self.source}
        if self.reason:
            obj["reason"] = self.reason
        if self.value is not None:
            obj["value"] = self.value
        if self.target:
            obj["target"] = self.target
        return obj


# --- task sources ------------------------------------------------------------------------------

MAX_ITEMS = 200
"""Reports list this many items at most: enough to name what is pending, small enough to keep
`status --json` and the hook's prompt short."""

SOURCE_NAMES = ("github", "claude_tasks", "task_file", "todos")
"""Priority order: team items first, then Claude Tasks, the checklist, the TODO list."""

SOURCE_LABELS = {
    "github": "GitHub project",
    "claude_tasks": "Claude Tasks",
    "task_file": "Task file",
    "todos": "TODO list",
    "prd": "PRD stories",
    "graph": "Task graph",
}
"""Each source's name in the words people read (prompts, the monitor, `status`)."""


@dataclass(frozen=True, slots=True)
class TaskItem:
    title: str
    status: str
    """pending | in_progress | done | skipped, or the source's own word for anything else."""
    id: str | None = None
    line: int | None = None
    blocked_by: tuple[str, ...] = ()
    owner: str | None = None
    target_files: tuple[str, ...] = ()
    url: str | None = None

    def to_json(self) -> dict[str, Any]:
        obj: dict[str, Any] = {"title": self.title, "status": self.status}
        for key in ("id", "line", "owner", "url"):
            value = getattr(self, key)
            if value is not None:
                obj[key] = value
        if self.blocked_by:
            obj["blocked_by"] = list(self.blocked_by)
        if self.target_files:
            obj["target_files"] = list(self.target_files)
        return obj


@dataclass(frozen=True, slots=True)
class SourceReport:
    name: str
    enabled: bool
    available: bool
    pending: int = 0
    in_progress: int = 0
    done: int = 0
    items: tuple[TaskItem, ...] = ()
    error: str | None = None
    """Why the source is unavailable (or disabled): shown to people as it is."""
    checked_at: str = ""
    skipped: int = 0
    detail: str | None = None
    """Where the answer came from (file, list, project), for people."""
    warnings: tuple[str, ...] = field(default=())
    """Parts of the source that were passed over (a corrupt task file, a bad line)."""
    path: str | None = None
    """The file or folder the answer is read from, when there is one (a task file, a transcript,
    a task list folder): what a viewer watches. Data, set by the source: `detail` is prose for
    people and is never parsed back into a path."""

    @property
    def open_count(self) -> int:
        return self.pending + self.in_progress

    @property
    def uncertain(self) -> bool:
        return self.enabled and not self.available

    def pending_items(self) -> list[TaskItem]:
        return [i for i in self.items if i.status in ("pending", "in_progress")]

    def to_json(self) -> dict[str, Any]:
        obj: dict[str, Any] = {
            "name": self.name,
            "enabled": self.enabled,
            "available": self.available,
            "pending": self.pending,
            "in_progress": self.in_progress,
            "done": self.done,
            "items": [item.to_json() for item in self.items],
            "error": self.error,
            "checked_at": self.checked_at,
            "skipped": self.skipped,
            "detail": self.detail,
            "warnings": list(self.warnings),
            "path": self.path,
        }
        return obj


@dataclass(frozen=True, slots=True)
class Aggregate:
    sources: tuple[SourceReport, ...]
    pending_total: int
    uncertain: bool
    checked_at: str = field(default="")

    def by_name(self, name: str) -> SourceReport | None:
        return next((s for s in self.sources if s.name == name), None)

    @property
    def unavailable(self) -> list[SourceReport]:
        return [s for s in self.sources if s.uncertain]

    @property
    def with_pending(self) -> list[SourceReport]:
        return [s for s in self.sources if s.enabled and s.available and s.open_count]

    def to_json(self) -> dict[str, Any]:
        return {
            "sources": [s.to_json() for s in self.sources],
            "pending_total": self.pending_total,
            "uncertain": self.uncertain,
        }


def combine(reports: list[SourceReport], now: str = "") -> Aggregate:
    order = {name: index for index, name in enumerate(SOURCE_NAMES)}
    ordered = tuple(sorted(reports, key=lambda r: order.get(r.name, len(order))))
    total = sum(r.open_count for r in ordered if r.enabled and r.available)
    uncertain = any(r.uncertain for r in ordered)
    return Aggregate(ordered, total, uncertain, now)


# --- what the engine takes -------------------------------------------------------------------

DEFAULT_BLOCK_CAP = 8


def spent_of(usage: Mapping[str, int] | None) -> dict[str, Any]:
    """What a turn used, as the journal says it: its tokens and its cost in dollars (and whether
    that is loopdeck's estimate), when the agent reported them."""
    usage = usage or {}
    data: dict[str, Any] = {}
    tokens = {k: v for k, v in usage.items() if k.endswith("_tokens")}
    if tokens:
        data["tokens"] = tokens
    if "cost_micro_usd" in usage:
        data["cost_usd"] = round(usage["cost_micro_usd"] / 1_000_000, 6)
        if usage.get("estimated_cost_micro_usd"):
            data["estimated"] = True
    return data


@dataclass(frozen=True, slots=True)
class Turn:
    """What the runner saw of one agent run: the facts, gathered by the driver; the engine
    draws the conclusions (stuck, failing, asking)."""

    failure: str | None = None
    """The agent could not start or failed on every attempt: why. None when it ran."""
    interrupted: str | None = None
    """The run was ended early (a skip or completion arrived, or a signal)."""
    error: str | None = None
    """The signature of this turn's error (agent failure or failed verification), compared
    across turns to find the same error repeating."""
    changed: bool | None = None
    """Did the workspace change during the turn (git HEAD and changes, or its files' names,
    sizes and times outside git)? None when the decision does not need it (`needs_look`): the
    task counts moved, which is progress whatever the workspace shows, or the turn is not one
    judged for progress (failed, interrupted, limited, a review or verification turn)."""
    usage: dict[str, int] | None = None
    """What the agent reported using this turn (`cost_micro_usd`, token counts), if it says."""
    limited: str | None = None
    """The agent hit a usage or rate limit: what it said. Not a failure: the loop waits."""
    resets_at: str | None = None
    """When that limit resets (ISO 8601), when the agent said; else the engine backs off."""
    denied: tuple[str, ...] = ()
    """Tools the agent was refused for lack of permission (it may still exit 0): it cannot do
    the work it is asked, and a person must allow them."""
    denied_hint: str | None = None
    """How to allow them, in the agent CLI's own terms."""
    unresolved: tuple[str, ...] = ()
    """Files a merge left with conflicts, found when the work was to be committed: nothing is
    committed over them."""
    refused: str | None = None
    """What the sandbox refused the agent this turn, as one line for its next prompt (loopdeck's
    files, git's config, folders outside the workspace): expected, and said so."""
    files: Mapping[str, Any] | None = None
    """What the turn changed, from git: `created`, `modified`, `deleted` (files) and `added`,
    `removed` (lines), with `paths` (at most 50); None when unknown (outside git)."""


@dataclass(frozen=True, slots=True)
class StopInput:
    """What a driver knows when the agent tries to stop (or, for the runner, ends a turn)."""

    last_text: str | None
    session_id: str | None = None
    transcript_path: str | None = None
    stop_hook_active: bool = False
    block_cap: int | None = DEFAULT_BLOCK_CAP
    """Claude Code's consecutive-block cap; None or 0 = no cap."""
    ralph_active: bool = False
    driver: str = "hook"
    verification_failure: str | None = None
    """Verification commands failed after this turn (their output): the work is not done,
    whatever the agent said or the sources show."""
    tool_round: bool = False
    """The agent ran a tool since the last block (Claude Code then restarts its block count)."""
    transcript_size: int | None = None
    """The transcript's size at this Stop: where the next Stop's look for a tool round starts."""
    verified: bool = False
    """The driver ran the verification commands for this decision and every one passed."""
    turn: Turn | None = None
    """The runner's account of the agent run that just ended (None for the hook, and for the
    runner's first decision)."""
    session_pid: int | None = None
    """The hook's parent: the Claude Code session process that drives an in-session loop, so
    resumption can tell a closed session (gone) from a live one."""
    unconfirmed: tuple[str, ...] = ()
    """What the loop names that no person on this machine confirmed (its prompt, commands,
    notification targets, paths): while anything is listed, nothing of the loop is driven."""
    design_changed: str | None = None
    """The loop's design file (its path) when it differs from the one the loop started with:
    the contract changed under the loop, so a person decides."""
    validation: Mapping[str, Any] | None = None
    """The verification commands' results as data, when the driver ran them for this decision:
    per command, the summed test counts, `tests_pass`, `build_succeeds`, `git_clean` and `ts`.
    None when no check ran."""


@dataclass(frozen=True, slots=True)
class Settings:
    """Options given to `run` or `start` for an existing loop: applied by the engine, so a new
    limit re-arms the escalation exactly as the `set-max-iterations` command does."""

    max_iterations: int | None = None
    limits: dict[str, int] | None = None
    """Limits to set (max cost, stuck thresholds); the keys given replace the recorded ones."""
    notify: list[str] | None = None
    verify: list[str] | None = None
    verify_allow: list[str] | None = None
    driver: str | None = None
    pid: int | None = None
    runner: dict[str, Any] | None = None
    """The runner's own options, recorded so a later `run` continues with them."""


# --- what the engine gives -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Effects:
    """What the driver must do beyond writing the new state and the events."""

    archive: dict[str, Any] | None = None
    """Archive the loop with this summary (and remove the live state file)."""
    skip_tasks: int = 0
    """Mark this many current tasks of the task file skipped (`- [-]`), one per applied skip."""
    summary: dict[str, Any] | None = None
    """Keep this summary of an ending that leaves the state in place (stopped, failed) in the
    loop's archive folder, so every ending, by either driver, leaves one."""


Event = tuple[str, dict[str, Any]]
"""An event the engine asks the driver to journal: (kind, data)."""


@dataclass(frozen=True, slots=True)
class JournalEvent:
    """One line of the journal, as read back."""

    ts: str
    kind: str
    iteration: int | None = None
    data: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"ts": self.ts, "kind": self.kind, "iteration": self.iteration, "data": dict(self.data)}


@dataclass(slots=True)
class Result:
    action: str
    """"block" (the agent works on, with `reason` as its prompt) or "allow" (it may stop)."""
    state: LoopState | None
    """The state to write (None: leave the file alone)."""
    reason: str | None = None
    """For a block: the prompt the agent reads next."""
    system_message: str | None = None
    events: list[Event] = field(default_factory=list)
    applied: list[tuple[Command, str]] = field(default_factory=list)
    effects: Effects = field(default_factory=Effects)
    offset: int | None = None
    """The control queue offset the state records once this result is carried out (None: the
    state's own, unchanged)."""

    @property
    def blocked(self) -> bool:
        return self.action == "block"

    @property
    def escalation(self) -> dict[str, Any] | None:
        """The escalation this decision raised, if any."""
        return next((data for kind, data in self.events if kind == "escalation"), None)
