"""Parallel workers over a task graph: the workers' rules, as pure functions on a fixed clock.

`loopdeck run --workers N` keeps up to N agents busy, one per task of a dependency graph. This
module decides what concerns the *workers*: which task is ready, who holds which file (the
lock table, a hint that keeps workers off each other's files), which task waits and why, when
a turn's work is redone and with what feedback, when a worker is replaced, the merge queue's
order. Everything that concerns the *loop* (how many turns may start, what a turn's cost, limit
or refused tool means, pauses, escalations, the ending) is the engine's (`loop.core.engine`), for
this driver as for the others: where a worker rule finds that the loop needs a person (the
graph deadlocked, a task no worker can move, a merge that keeps conflicting), it says so in the
step (`Step.needs`) and the engine escalates.

A cycle:

1. ready = `pending`, no owner, every `blockedBy` task `completed`;
2. a ready task whose files overlap the lock table is deferred (and says with whom and on which
   file); tasks started in the same cycle lock too;
3. one worker per remaining ready task, up to the capacity and to what the engine admits;
4. a worker's turn ends → the engine's verdict → (audit) → approved: in a git repository the
   task's branch joins the merge queue and its locks are held until it is merged; outside git
   (`--isolation locks`) the task is completed at once. Rejected: the same task again with the
   feedback; no progress over the loop's `--stuck-after` turns: replaced.
5. the queue merges one branch at a time into the loop's branch: merged → completed; a conflict
   or a verification failure → the task again with the hunks or the failure, and after
   `MAX_CONFLICTS` conflicts a person is asked.

The deferral streak counts cycles in which nothing could start although work remains; a start,
a completion or a worker's output resets it; at `DEFER_LIMIT` the loop needs a person.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from loop.core.model import Command, Effects, Event, LoopState, Result
from loop.core.prompts import answered_prompt
from loop.core.timeutil import iso_s, parse_iso

PENDING, IN_PROGRESS, COMPLETED = "pending", "in_progress", "completed"
MAX_WORKERS = 12
DEFER_LIMIT = 3
"""Cycles in a row with nothing startable before the loop asks a person."""


def stall_turns(state: LoopState) -> int:
    """Turns in a row without progress after which a worker is replaced by a fresh one: the
    loop's `--stuck-after`, the same threshold as the runner's."""
    return max(1, state.limit("stuck_after"))


MAX_REPLACEMENTS = 2
"""A task whose workers were replaced this often needs a person: a fresh worker won't help."""
MAX_CONFLICTS = 3
"""Merges of one task that conflicted before a person is asked to resolve it."""
SECTION = "parallel"
"""The state's key holding the board (`LoopState.extra`), as one line of JSON: the state file
stays on its fast path (no PyYAML for nested maps), which the runner reads on every change."""
FEEDBACK_CHARS = 4000
WORKTREE, LOCKS = "worktree", "locks"
"""The two isolations: a git worktree and branch per task, or one shared tree and file locks."""

READY, RUNNING, AUDITING, QUEUED, QUESTION, HELD, STALLED = (
    "ready",
    "running",
    "auditing",
    "queued",
    "question",
    "held",
    "stalled",
)
"""A worker's states: its next turn waits to be admitted (every turn is one of the loop's
iterations, counted by the engine); its turn runs; its audit runs; approved, waiting in the merge queue;
waiting for a person's answer; waiting for the loop (a usage limit, a refused tool, a person);
given up on (no progress)."""


# --- the data ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Task:
    """One node of the graph, as the graph's file says (Claude Code Tasks fields)."""

    id: str
    subject: str
    description: str = ""
    status: str = PENDING
    owner: str | None = None
    blocked_by: tuple[str, ...] = ()
    target_files: tuple[str, ...] = ()


@dataclass(frozen=True)
class Update:
    """A change the driver writes into the graph, in its own format."""

    task: str
    status: str
    owner: str | None
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Worker:
    name: str
    task: str
    files: tuple[str, ...]
    started: str
    """When the worker took the task (ISO, seconds)."""
    turns: int = 1
    status: str = RUNNING
    feedback: str | None = None
    """What the next turn is told: the audit's rejection, a conflict, or a person's answer."""
    question: str | None = None
    stalls: int = 0
    """Turns in a row that changed nothing."""
    replaced: int = 0
    """How many workers before this one gave up on the task."""
    branch: str | None = None
    """The task's branch (worktree isolation)."""
    worktree: str | None = None
    conflicts: int = 0
    """Merges of this task that conflicted."""
    rework: str | None = None
    """Why the next turn is a rework: "conflict" (the loop's branch is taken into the worktree
    first, for the worker to resolve), "rejected", "unchanged", "failed", "verification"."""

    def to_json(self) -> dict[str, Any]:
        obj: dict[str, Any] = {
            "name": self.name,
            "task": self.task,
            "files": list(self.files),
            "started": self.started,
            "turns": self.turns,
            "status": self.status,
        }
        for key in ("feedback", "question", "branch", "worktree", "rework"):
            if getattr(self, key) is not None:
                obj[key] = getattr(self, key)
        for key in ("stalls", "replaced", "conflicts"):
            if getattr(self, key):
                obj[key] = getattr(self, key)
        return obj

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Worker:
        def opt(key: str) -> str | None:
            value = obj.get(key)
            return str(value) if value is not None else None

        return cls(
            name=str(obj.get("name", "?")),
            task=str(obj.get("task", "?")),
            files=tuple(str(f) for f in obj.get("files") or ()),
            started=str(obj.get("started", "")),
            turns=_int(obj.get("turns"), 1),
            status=str(obj.get("status", RUNNING)),
            feedback=opt("feedback"),
            question=opt("question"),
            stalls=_int(obj.get("stalls"), 0),
            replaced=_int(obj.get("replaced"), 0),
            branch=opt("branch"),
            worktree=opt("worktree"),
            conflicts=_int(obj.get("conflicts"), 0),
            rework=opt("rework"),
        )


@dataclass(frozen=True)
class Deferral:
    task: str
    reason: str
    """"file" (a lock held by `worker` on `file`) or "blocked" (waits for `waits_for`)."""
    worker: str | None = None
    file: str | None = None
    waits_for: tuple[str, ...] = ()

    def line(self) -> str:
        if self.reason == "file":
            return f"Task {self.task} deferred — file conflict with {self.worker} on {self.file}"
        waits = ", ".join(self.waits_for) or "a task that is not in the graph"
        return f"Task {self.task} waits for {waits}"

    def to_json(self) -> dict[str, Any]:
        obj: dict[str, Any] = {"task": self.task, "reason": self.reason, "line": self.line()}
        if self.worker:
            obj["worker"] = self.worker
        if self.file:
            obj["file"] = self.file
        if self.waits_for:
            obj["waits_for"] = list(self.waits_for)
        return obj


@dataclass(frozen=True)
class Board:
    """The scheduler's state, kept in the loop state so a restarted runner sees it."""

    graph: str = ""
    capacity: int = 1
    audit: str | None = None
    audit_kind: str = "check"
    """"check" (a verification command) or "agent" (an agent command given the work)."""
    isolation: str = LOCKS
    loop_branch: str | None = None
    """The branch approved tasks merge into (worktree isolation): the workspace's at the start."""
    strategy: str = "merge"
    """How an approved branch joins the loop's: "merge" or "rebase"."""
    workers: tuple[Worker, ...] = ()
    queue: tuple[str, ...] = ()
    """Workers whose approved branch waits to be merged, in order."""
    done: tuple[str, ...] = ()
    """Tasks this loop completed (merged): the state's word, put back into the graph after a crash."""
    defer_streak: int = 0
    serial: int = 0
    """The last worker number given out: names are never reused within a loop."""
    deferred: tuple[Deferral, ...] = ()
    """The last cycle's deferrals, for people."""

    def locks(self) -> dict[str, str]:
        return lock_table(self.workers)

    def worker(self, name: str) -> Worker | None:
        return next((w for w in self.workers if w.name == name), None)

    def without(self, name: str) -> Board:
        return replace(
            self,
            workers=tuple(w for w in self.workers if w.name != name),
            queue=tuple(q for q in self.queue if q != name),
        )

    def put(self, worker: Worker) -> Board:
        others = [w for w in self.workers if w.name != worker.name]
        return replace(self, workers=(*others, worker))

    def to_json(self) -> dict[str, Any]:
        return {
            "graph": self.graph,
            "capacity": self.capacity,
            "audit": self.audit,
            "audit_kind": self.audit_kind,
            "isolation": self.isolation,
            "loop_branch": self.loop_branch,
            "strategy": self.strategy,
            "workers": [w.to_json() for w in self.workers],
            "locks": self.locks(),
            "queue": list(self.queue),
            "done": list(self.done),
            "defer_streak": self.defer_streak,
            "serial": self.serial,
            "deferred": [d.to_json() for d in self.deferred],
        }

    @classmethod
    def from_json(cls, obj: Any) -> Board:
        if not isinstance(obj, Mapping):
            return cls()
        workers = tuple(Worker.from_json(w) for w in obj.get("workers") or () if isinstance(w, Mapping))
        deferred = tuple(
            Deferral(
                str(d.get("task")),
                str(d.get("reason", "file")),
                d.get("worker"),
                d.get("file"),
                tuple(str(t) for t in d.get("waits_for") or ()),
            )
            for d in obj.get("deferred") or ()
            if isinstance(d, Mapping)
        )
        audit = obj.get("audit")
        branch = obj.get("loop_branch")
        names = {w.name for w in workers}
        return cls(
            graph=str(obj.get("graph") or ""),
            capacity=_int(obj.get("capacity"), 1),
            audit=str(audit) if audit else None,
            audit_kind="agent" if obj.get("audit_kind") == "agent" else "check",
            isolation=WORKTREE if obj.get("isolation") == WORKTREE else LOCKS,
            loop_branch=str(branch) if branch else None,
            strategy="rebase" if obj.get("strategy") == "rebase" else "merge",
            workers=workers,
            queue=tuple(str(q) for q in obj.get("queue") or () if str(q) in names),
            done=tuple(str(d) for d in obj.get("done") or ()),
            defer_streak=_int(obj.get("defer_streak"), 0),
            serial=_int(obj.get("serial"), 0),
            deferred=deferred,
        )


def section_of(state: LoopState) -> dict[str, Any] | None:
    """The board as the state holds it (JSON text, or a map in a hand-edited file)."""
    raw = state.extra.get(SECTION)
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return None
    return dict(raw) if isinstance(raw, dict) else None


def keep(state: LoopState, board: Board) -> LoopState:
    """`state` holding `board`."""
    state.extra[SECTION] = json.dumps(board.to_json(), ensure_ascii=False, separators=(",", ":"))
    return state


def board_of(state: LoopState) -> Board:
    return Board.from_json(section_of(state))


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else default


@dataclass
class Step:
    """What the driver carries out: the new state (board inside), the journal's events, the
    graph's updates, the processes to start and to end, and what the engine decided along."""

    state: LoopState
    board: Board
    events: list[Event] = field(default_factory=list)
    updates: list[Update] = field(default_factory=list)
    start: list[Worker] = field(default_factory=list)
    """Workers whose next turn the driver starts (new ones and reruns)."""
    end: list[str] = field(default_factory=list)
    """Workers whose processes the driver ends now (stopped, skipped, replaced)."""
    needs: tuple[str, str, dict[str, Any]] | None = None
    """(kind, reason, data): a worker rule found that the loop needs a person; the engine
    escalates."""
    effects: Effects = field(default_factory=Effects)
    """The engine's effects (an archive or a kept summary at an ending)."""
    applied: list[tuple[Command, str]] = field(default_factory=list)

    def seal(self) -> LoopState:
        """The state with the board written into it."""
        return keep(self.state, self.board)

    def absorb(self, result: Result) -> Step:
        """Take in the engine's decision on this step's state: its state, events and effects."""
        if result.state is not None:
            self.state = result.state
        self.events += result.events
        self.applied += result.applied
        if result.effects.archive is not None or result.effects.summary is not None:
            self.effects = result.effects
        return self


def step_of(state: LoopState) -> Step:
    return Step(state.copy(), board_of(state))


# --- readiness and locks -----------------------------------------------------------------------


def ready(tasks: Sequence[Task]) -> list[Task]:
    """Tasks a worker may take: pending, nobody's, every blocker completed (a blocker that is
    not in the graph is not completed: the task waits rather than run on a guess)."""
    done = {t.id for t in tasks if t.status == COMPLETED}
    return [
        t
        for t in tasks
        if t.status == PENDING and not t.owner and all(b in done for b in t.blocked_by if b != t.id)
    ]


def lock_table(workers: Iterable[Worker]) -> dict[str, str]:
    """file → the worker holding it. A worker holds its task's files from its start until its
    task is completed (merged, with worktrees), or it is stopped, across reruns."""
    table: dict[str, str] = {}
    for worker in workers:
        for name in worker.files:
            table.setdefault(_norm(name), worker.name)
    return table


def _norm(path: str) -> str:
    """Two spellings of one file are one lock: `./src/a.py`, `src//a.py` and `src/a.py`."""
    parts = [p for p in path.replace("\\", "/").split("/") if p not in ("", ".")]
    return "/".join(parts)


def conflict(task: Task, locks: Mapping[str, str]) -> tuple[str, str] | None:
    """(file, worker) of the first of `task`'s files someone holds, or None."""
    for name in task.target_files:
        holder = locks.get(_norm(name))
        if holder is not None:
            return name, holder
    return None


def waiting(tasks: Sequence[Task]) -> list[Deferral]:
    """Pending, unowned tasks that are not ready, with what they wait for."""
    status = {t.id: t.status for t in tasks}
    out = []
    for t in tasks:
        if t.status != PENDING or t.owner:
            continue
        waits = tuple(b for b in t.blocked_by if status.get(b) != COMPLETED)
        if waits:
            out.append(Deferral(t.id, "blocked", waits_for=waits))
    return out


def _as_held(tasks: Sequence[Task], board: Board) -> list[Task]:
    """The graph as the scheduler must see it: a task a worker of this loop holds is in
    progress until it is merged (Claude Code workers may mark their own task completed), and a
    task this loop completed stays completed."""
    held = {w.task for w in board.workers}
    done = set(board.done)
    out = []
    for t in tasks:
        if t.id in held and t.status == COMPLETED:
            t = replace(t, status=IN_PROGRESS)
        elif t.id in done and t.status != COMPLETED:
            t = replace(t, status=COMPLETED)
        out.append(t)
    return out


# --- a cycle ---------------------------------------------------------------------------------


def startable(state: LoopState, tasks: Sequence[Task]) -> int:
    """How many workers a cycle would start now (before the engine admits them)."""
    board = board_of(state)
    reruns = sum(1 for w in board.workers if w.status == READY)
    room = max(0, board.capacity - len(board.workers))
    locks = board.locks()
    count = 0
    for task in ready(_as_held(tasks, board)):
        if count >= room:
            break
        if conflict(task, locks) is None:
            count += 1
            for name in task.target_files:
                locks.setdefault(_norm(name), task.id)
    return reruns + count


def cycle(step: Step, tasks: Sequence[Task], now: datetime, admitted: int, wanted: int) -> Step:
    """One scheduling pass: start up to `admitted` of the `wanted` (`startable`) workers (the
    engine's count), defer what may not start, count the spin: a pass in which nothing was
    startable though work remains (not one in which the engine held the turns back)."""
    board = step.board
    if step.state.status != "running":
        return step
    tasks = _as_held(tasks, board)
    locks = board.locks()
    reruns = [w for w in board.workers if w.status == READY][:admitted]
    for worker in reruns:  # a worker's next turn goes first: its task is under way
        board = board.put(replace(worker, status=RUNNING))
        step.start.append(replace(worker, status=RUNNING))
    admitted -= len(reruns)
    room = max(0, min(admitted, board.capacity - len(board.workers)))
    deferred: list[Deferral] = []
    started: list[Worker] = []
    serial = board.serial
    for task in ready(tasks):
        clash = conflict(task, locks)
        if clash is not None:
            deferred.append(Deferral(task.id, "file", worker=clash[1], file=clash[0]))
            continue
        if len(started) >= room:
            continue
        serial += 1
        worker = Worker(f"worker-{serial}", task.id, task.target_files, iso_s(now))
        started.append(worker)
        for name in task.target_files:
            locks.setdefault(_norm(name), worker.name)
    board = replace(board, serial=serial, workers=(*board.workers, *started), deferred=tuple(deferred))
    for worker in started:
        step.updates.append(Update(worker.task, IN_PROGRESS, worker.name))
        step.events.append(
            ("worker-started", {"worker": worker.name, "task": worker.task, "files": list(worker.files)})
        )
        step.start.append(worker)
    before = set(step.board.deferred)
    for item in deferred:
        if item not in before:  # said once while it stays the same, not every cycle
            step.events.append(("task-deferred", item.to_json()))
    open_tasks = [t for t in tasks if t.status != COMPLETED]
    busy = [w for w in board.workers if w.status in (READY, RUNNING, AUDITING, QUEUED)]
    asking = any(w.status in (QUESTION, HELD) for w in board.workers)
    # Nothing ready while a worker waits for a person is waiting, not spinning: a person is asked.
    spinning = (
        not started and not reruns and bool(open_tasks) and (bool(deferred) or (not busy and not asking))
    )
    if started or reruns:
        board = replace(board, defer_streak=0)
    elif spinning and admitted >= wanted:
        board = replace(board, defer_streak=board.defer_streak + 1)
    step.board = board
    if spinning and board.defer_streak >= DEFER_LIMIT:
        step.needs = _deadlock(board, tasks)
    return step


def finished(state: LoopState, tasks: Sequence[Task]) -> bool:
    """Every task of the graph completed (merged) and no worker left: the loop is done."""
    board = board_of(state)
    tasks = _as_held(tasks, board)
    return bool(tasks) and all(t.status == COMPLETED for t in tasks) and not board.workers


def _deadlock(board: Board, tasks: Sequence[Task]) -> tuple[str, str, dict[str, Any]]:
    why = list(board.deferred) or waiting(tasks)
    if not why:
        held = [
            f"Task {t.id} is {t.status} (owner {t.owner or 'none'})" for t in tasks if t.status != COMPLETED
        ]
        lines = held or ["nothing can start"]
    else:
        lines = [d.line() for d in why]
    reason = (
        f"no task could start in {board.defer_streak} cycles in a row: "
        + "; ".join(lines[:10])
        + ". Split tasks, reorder their dependencies, or release a file, then answer or resume."
    )
    return "deadlock", reason, {"deferred": [d.to_json() for d in why]}


def output_seen(state: LoopState) -> LoopState | None:
    """A worker said something: the loop is not spinning. The new state, or None if unchanged."""
    board = board_of(state)
    if not board.defer_streak:
        return None
    new = state.copy()
    return keep(new, replace(board, defer_streak=0))


# --- a worker's turn ends --------------------------------------------------------------------


@dataclass(frozen=True)
class TurnEnd:
    """What the driver saw of a worker's turn (and the engine made of it)."""

    worker: str
    verdict: str
    """The engine's: "approve", "rework" or "hold" (`loop.core.engine.TURN_VERDICTS`)."""
    output: str
    """The worker's final text (its last words)."""
    feedback: str = ""
    """Why it goes again (its failure, or that it changed nothing)."""
    exit_code: int | None = 0
    duration_s: float = 0.0
    changed: tuple[str, ...] = ()
    """The files its branch changed (worktrees), or None outside git."""
    asked: str | None = None


def turn_ended(step: Step, end: TurnEnd) -> Step:
    """The engine's verdict on a turn, applied to the worker: approve → its audit (or the merge
    queue, or completion outside git); rework → the same task again with the feedback, or a
    fresh worker when it keeps changing nothing; hold → it waits."""
    board = step.board
    worker = board.worker(end.worker)
    if worker is None:
        return step
    board = replace(board, defer_streak=0)  # a worker spoke: the loop is not spinning
    step.events.append(
        (
            "worker-ended",
            {
                "worker": worker.name,
                "task": worker.task,
                "turn": worker.turns,
                "exit_code": end.exit_code,
                "duration_s": end.duration_s,
            },
        )
    )
    if end.asked:
        step.board = board.put(replace(worker, status=QUESTION, question=end.asked, feedback=None))
        step.events.append(
            ("worker-question", {"worker": worker.name, "task": worker.task, "question": end.asked})
        )
        return step
    if end.verdict == "retry":  # the same turn again once turns may start (a usage limit reset)
        step.board = board.put(replace(worker, status=READY))
        return step
    if end.verdict == "hold":
        step.board = board.put(replace(worker, status=HELD))
        return step
    if end.verdict == "approve":
        step.board = board.put(replace(worker, status=AUDITING, stalls=0, rework=None))
        return step
    unchanged = not end.changed and not end.feedback
    feedback = end.feedback or "Your last turn changed no file: the task is not done yet."
    step.board = board
    return _again(
        step, worker, feedback[-FEEDBACK_CHARS:], "unchanged" if unchanged else "failed", stall=unchanged
    )


def audited(step: Step, name: str, approved: bool, feedback: str = "") -> Step:
    """The audit's word on a worker's turn (without an audit: approved). Approved → the merge
    queue (worktrees) or completed (locks); rejected → the task again with the feedback."""
    board = step.board = replace(step.board, defer_streak=0)  # an audit ending is progress
    worker = board.worker(name)
    if worker is None:
        return step
    if not approved:
        step.events.append(
            ("audit-rejected", {"worker": worker.name, "task": worker.task, "feedback": feedback[-400:]})
        )
        return _again(step, worker, feedback[-FEEDBACK_CHARS:], "rejected", stall=False)
    step.events.append(("audit-approved", {"worker": worker.name, "task": worker.task}))
    if board.isolation == WORKTREE:
        step.board = replace(board.put(replace(worker, status=QUEUED)), queue=(*board.queue, worker.name))
        step.events.append(
            ("merge-queued", {"worker": worker.name, "task": worker.task, "branch": worker.branch})
        )
        return step
    return _completed(step, worker)


def _completed(step: Step, worker: Worker) -> Step:
    board = step.board
    step.board = replace(board.without(worker.name), done=(*board.done, worker.task))
    step.updates.append(Update(worker.task, COMPLETED, worker.name))  # the owner stays: who did it
    step.events.append(
        ("locks-freed", {"worker": worker.name, "task": worker.task, "files": list(worker.files)})
    )
    step.events.append(
        ("task-completed", {"worker": worker.name, "task": worker.task, "turns": worker.turns})
    )
    return step


def merged(step: Step, name: str, sha: str | None) -> Step:
    """The queue merged the worker's branch into the loop's branch: the task is completed."""
    step.board = replace(step.board, defer_streak=0)
    worker = step.board.worker(name)
    if worker is None:
        return step
    step.events.append(
        ("task-merged", {"worker": worker.name, "task": worker.task, "branch": worker.branch, "sha": sha})
    )
    return _completed(step, worker)


def merge_failed(step: Step, name: str, why: str, feedback: str, conflict: bool) -> Step:
    """The merge conflicted (or the verification of the merged tree failed): the task goes back
    to its worker with the hunks (or the failure); a task that keeps conflicting needs a person."""
    board = step.board = replace(step.board, defer_streak=0)
    worker = board.worker(name)
    if worker is None:
        return step
    step.board = replace(board, queue=tuple(q for q in board.queue if q != name))
    conflicts = worker.conflicts + (1 if conflict else 0)
    step.events.append(
        (
            "merge-conflict" if conflict else "merge-rejected",
            {"worker": worker.name, "task": worker.task, "branch": worker.branch, "reason": why[-400:]},
        )
    )
    worker = replace(worker, conflicts=conflicts)
    if conflict and conflicts >= MAX_CONFLICTS:
        step.board = step.board.put(replace(worker, status=HELD, feedback=feedback[-FEEDBACK_CHARS:]))
        reason = (
            f"task {worker.task}: its branch {worker.branch} conflicted with the loop's branch "
            f"{conflicts} times ({why[-200:]}); merge it by hand, then resume"
        )
        step.needs = ("merge-conflict", reason, {"worker": worker.name, "task": worker.task})
        return step
    return _again(
        step, worker, feedback[-FEEDBACK_CHARS:], "conflict" if conflict else "verification", stall=False
    )


def _again(step: Step, worker: Worker, feedback: str, why: str, stall: bool) -> Step:
    """The same task once more: its worker's next turn, told why (or a fresh worker after
    `--stuck-after` turns that changed nothing)."""
    repeated = why in ("rejected", "verification", "failed") and feedback == worker.feedback
    stalls = worker.stalls + 1 if stall or repeated else 0  # the same rejection again moves nothing
    if stalls >= stall_turns(step.state):
        return _replace_worker(step, worker, feedback)
    rerun = replace(
        worker,
        status=READY,
        turns=worker.turns + 1,
        feedback=feedback,
        stalls=stalls,
        rework=why,
        question=None,
    )
    step.board = step.board.put(rerun)
    step.events.append(
        ("worker-turn", {"worker": worker.name, "task": worker.task, "turn": rerun.turns, "why": why})
    )
    return step


def _replace_worker(step: Step, worker: Worker, feedback: str) -> Step:
    board = step.board
    if worker.replaced + 1 > MAX_REPLACEMENTS:
        reason = (
            f"task {worker.task}: {MAX_REPLACEMENTS + 1} workers in a row made no progress "
            f"over {stall_turns(step.state)} turns; last feedback: {feedback[-300:]}"
        )
        step.board = board.put(replace(worker, status=STALLED, feedback=feedback, stalls=0))
        step.needs = ("stuck", reason, {"worker": worker.name})
        return step
    serial = board.serial + 1
    fresh = Worker(
        f"worker-{serial}",
        worker.task,
        worker.files,
        worker.started,
        status=READY,
        feedback=feedback,
        replaced=worker.replaced + 1,
        branch=worker.branch,  # the task's branch is the task's: the fresh worker goes on from it
        worktree=worker.worktree,
        conflicts=worker.conflicts,
    )
    step.board = replace(board.without(worker.name), serial=serial).put(fresh)
    step.updates.append(Update(worker.task, IN_PROGRESS, fresh.name))
    step.events.append(
        (
            "worker-replaced",
            {"worker": worker.name, "by": fresh.name, "task": worker.task, "turns": worker.turns},
        )
    )
    step.events.append(
        ("locks-freed", {"worker": worker.name, "task": worker.task, "files": list(worker.files)})
    )
    step.events.append(
        ("worker-started", {"worker": fresh.name, "task": fresh.task, "files": list(fresh.files)})
    )
    return step


# --- people ----------------------------------------------------------------------------------


def command(step: Step, cmd: Command) -> Step:
    """A person's command to one worker (`--worker NAME`): skip its task, stop it, answer its
    question. Commands to the whole loop are the engine's; `after_loop_command` does what they
    mean for the workers."""
    outcome = _command(step, cmd)
    step.events.append(
        (
            "command-applied",
            {
                "id": cmd.id,
                "command": cmd.kind,
                "source": cmd.source,
                "outcome": outcome,
                "worker": cmd.target,
            },
        )
    )
    return step


def _command(step: Step, cmd: Command) -> str:
    board = step.board
    worker = board.worker(cmd.target or "")
    if worker is None:
        return f"no worker {cmd.target}"
    if cmd.kind == "skip":
        step.board = board.without(worker.name)
        step.end.append(worker.name)
        step.updates.append(Update(worker.task, COMPLETED, worker.name, {"skipped": True}))
        step.board = replace(step.board, done=(*step.board.done, worker.task))
        step.events.append(("task-skipped", {"task": worker.task, "worker": worker.name}))
        step.events.append(
            ("locks-freed", {"worker": worker.name, "task": worker.task, "files": list(worker.files)})
        )
        return f"task {worker.task} skipped"
    if cmd.kind == "stop":
        step.board = board.without(worker.name)
        step.end.append(worker.name)
        step.updates.append(Update(worker.task, PENDING, None))
        step.events.append(("worker-stopped", {"worker": worker.name, "task": worker.task}))
        step.events.append(
            ("locks-freed", {"worker": worker.name, "task": worker.task, "files": list(worker.files)})
        )
        return f"{worker.name} stopped; task {worker.task} back in the graph"
    if cmd.kind in ("answer", "resume") and worker.status in (QUESTION, STALLED, HELD):
        answer = cmd.reason or "go on"
        rerun = replace(
            worker,
            status=READY,
            question=None,
            turns=worker.turns + 1,
            stalls=0,
            feedback=answered_prompt(answer, worker.question),
        )
        step.board = replace(board.put(rerun), defer_streak=0)
        step.events.append(("answered", {"answer": answer, "source": cmd.source, "worker": worker.name}))
        return f"{worker.name} resumed"
    return f"{cmd.kind} does not apply to a worker"


def after_loop_command(step: Step, kinds: Iterable[str], reason: str | None) -> Step:
    """What the engine's decision on a whole-loop command means for the workers: a stop or a
    forced completion ends them all (their tasks back in the graph); a resume gives workers
    that waited for the loop (held, given up on) another go, with the person's word."""
    kinds = list(kinds)
    if step.state.status in ("stopped", "completed"):
        return release(step)
    if "resume" in kinds or "answer" in kinds:
        board = replace(step.board, defer_streak=0)
        for worker in board.workers:
            if worker.status in (STALLED, HELD):
                note = f"A PERSON LOOKED AT IT:\n{reason}" if reason else worker.feedback
                rerun = replace(worker, status=READY, turns=worker.turns + 1, stalls=0, feedback=note)
                board = board.put(rerun)
        step.board = board
    return step


def release(step: Step) -> Step:
    """Every worker ends and gives its task back to the graph (pending, no owner), so a later
    run, a person or Claude Code finds the graph as if they had not started; a task's branch
    and worktree stay, and a later worker on the task goes on from them."""
    for worker in step.board.workers:
        step.end.append(worker.name)
        step.updates.append(Update(worker.task, PENDING, None))
        step.events.append(
            ("locks-freed", {"worker": worker.name, "task": worker.task, "files": list(worker.files)})
        )
    step.board = replace(step.board, workers=(), queue=())
    return step


def reconcile(step: Step, tasks: Sequence[Task]) -> Step:
    """After a crash the graph may disagree with the state (the state is written first): the
    state's word goes back into the graph. A task this loop completed is completed; a task
    owned by a worker of this loop that is not on the board is pending again."""
    board = step.board
    names = {w.name for w in board.workers}
    done = set(board.done)
    for task in tasks:
        if task.id in done and task.status != COMPLETED:
            step.updates.append(Update(task.id, COMPLETED, task.owner))
        elif (
            task.id not in done
            and task.status == IN_PROGRESS
            and task.owner
            and task.owner.startswith("worker-")
            and task.owner not in names
        ):
            step.updates.append(Update(task.id, PENDING, None))
    return step


# --- what a worker reads ---------------------------------------------------------------------


def worker_prompt(goal: str, task: Task, worker: Worker, refused: str | None = None) -> str:
    """The worker's own task and nothing of the others': its subject, description and files,
    the feedback of its last turn, and `refused`: the one line saying what the sandbox refused
    that turn (the runner's agent is told the same by the engine)."""
    files = "\n".join(f"- {f}" for f in task.target_files) or "- (no files named)"
    parts = [f"{refused}\n"] if refused else []
    if worker.feedback:
        parts.append(f"{worker.feedback.strip()}\n")
    parts.append(
        f"You are {worker.name}, one of several workers on this project: {goal.strip()}\n\n"
        f"Your task ({task.id}): {task.subject}\n\n"
        f"{task.description.strip() or '(no description)'}\n\n"
        f"Files you may change (other workers hold the rest):\n{files}\n\n"
        "Work on this task only. When it is done, end your answer with a short summary of "
        "what you changed. If you cannot go on without a person, ask with "
        "<question>…</question>."
    )
    return "\n".join(parts)


def conflict_feedback(files: Sequence[str], hunks: str) -> str:
    """What a worker reads when its branch conflicted with the loop's: the files and hunks."""
    names = "\n".join(f"- {f}" for f in files)
    return (
        "MERGE CONFLICT: your branch conflicts with work merged into the loop's branch since you "
        f"started. The loop's branch is now merged into yours; resolve the conflict markers "
        f"(<<<<<<< ======= >>>>>>>) in these files, keeping the intent of both sides:\n{names}\n\n"
        f"The conflicting hunks:\n{hunks.strip()[-FEEDBACK_CHARS // 2 :]}"
    )


def elapsed(worker: Worker, now: datetime) -> float:
    start = parse_iso(worker.started)
    return max(0.0, (now - start).total_seconds()) if start else 0.0
