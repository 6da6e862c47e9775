"""Parallel workers over a task graph: every decision, as pure functions on a fixed clock.

`loopdeck run --workers N` keeps up to N agent processes busy, one per task of a dependency
graph. What may run, what must wait and why, who holds which file, when the loop is spinning
and must ask a person: all of it is decided here, from the graph and the board (the workers,
their file locks and the deferral streak), so it can be tested without a process and replayed
from the state. The driver (`loop.parallel`) only starts and watches processes, reads and
updates the graph, and carries out the steps this module returns.

A cycle:

1. ready = `pending`, no owner, every `blockedBy` task `completed`;
2. a ready task whose files overlap the lock table of the active workers is deferred (and says
   with whom and on which file); tasks started in the same cycle lock too;
3. one worker per remaining ready task, up to the capacity, owner and `in_progress` first;
4. a worker's turn ends → (audit) → approved: `completed`, locks freed; rejected: the same task
   again with the feedback, locks kept; no progress over `STALL_TURNS` turns: replaced;
   a question: that worker waits for a person, the others go on.

The deferral streak counts cycles in which nothing could start although work remains (every
ready task deferred, or nothing ready and nobody working); a start, a completion or a worker's
output resets it; at `DEFER_LIMIT` the loop pauses and escalates with the deferred tasks and why.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from loop.model import Command, Event, LoopState
from loop.signals import question
from loop.timeutil import iso_s, parse_iso

PENDING, IN_PROGRESS, COMPLETED = "pending", "in_progress", "completed"
MAX_WORKERS = 12
DEFER_LIMIT = 3
"""Cycles in a row with nothing startable before the loop asks a person."""
STALL_TURNS = 3
"""Turns in a row without progress after which a worker is replaced by a fresh one."""
MAX_REPLACEMENTS = 2
"""A task whose workers were replaced this often escalates instead: a fresh worker won't help."""
SECTION = "parallel"
"""The state's key holding the board (`LoopState.extra`), as one line of JSON: the state file
stays on its fast path (no PyYAML for nested maps), which the runner reads on every change."""
FEEDBACK_CHARS = 4000


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
    status: str = "running"
    """running | question (waiting for a person's answer; its locks kept)."""
    feedback: str | None = None
    """What the next turn is told: the audit's rejection, or a person's answer."""
    question: str | None = None
    stalls: int = 0
    """Turns in a row whose progress mark did not move."""
    mark: str | None = None
    replaced: int = 0
    """How many workers before this one gave up on the task."""

    def to_json(self) -> dict[str, Any]:
        obj: dict[str, Any] = {
            "name": self.name,
            "task": self.task,
            "files": list(self.files),
            "started": self.started,
            "turns": self.turns,
            "status": self.status,
        }
        for key in ("feedback", "question", "mark"):
            if getattr(self, key) is not None:
                obj[key] = getattr(self, key)
        if self.stalls:
            obj["stalls"] = self.stalls
        if self.replaced:
            obj["replaced"] = self.replaced
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
            status=str(obj.get("status", "running")),
            feedback=opt("feedback"),
            question=opt("question"),
            stalls=_int(obj.get("stalls"), 0),
            mark=opt("mark"),
            replaced=_int(obj.get("replaced"), 0),
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
    workers: tuple[Worker, ...] = ()
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
        return replace(self, workers=tuple(w for w in self.workers if w.name != name))

    def put(self, worker: Worker) -> Board:
        others = [w for w in self.workers if w.name != worker.name]
        return replace(self, workers=(*others, worker))

    def to_json(self) -> dict[str, Any]:
        return {
            "graph": self.graph,
            "capacity": self.capacity,
            "audit": self.audit,
            "workers": [w.to_json() for w in self.workers],
            "locks": self.locks(),
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
        return cls(
            graph=str(obj.get("graph") or ""),
            capacity=_int(obj.get("capacity"), 1),
            audit=str(audit) if audit else None,
            workers=workers,
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
    graph's updates, the processes to start and to end, and whether the loop is archived."""

    state: LoopState
    board: Board
    events: list[Event] = field(default_factory=list)
    updates: list[Update] = field(default_factory=list)
    start: list[Worker] = field(default_factory=list)
    """Workers whose next turn the driver starts (new ones and reruns)."""
    end: list[str] = field(default_factory=list)
    """Workers whose processes the driver ends now (stopped, skipped, replaced)."""
    archive: dict[str, Any] | None = None
    counted: int = 0
    """Turns in `start` already counted into the state's iteration."""

    def seal(self) -> LoopState:
        """The state with the board written into it. Every worker turn started is one of the
        loop's iterations: what the monitor, `status` and the summary count."""
        self.state.iteration += len(self.start) - self.counted
        self.counted = len(self.start)
        return keep(self.state, self.board)


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
    task is completed (or it is stopped), across reruns."""
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


# --- a cycle ---------------------------------------------------------------------------------


def cycle(state: LoopState, tasks: Sequence[Task], now: datetime) -> Step:
    """One scheduling pass: start what may start, defer what may not, count the spin."""
    state = state.copy()
    board = board_of(state)
    step = Step(state, board)
    if state.status != "running":
        return step
    if tasks and all(t.status == COMPLETED for t in tasks) and not board.workers:
        return complete(step, now, f"all {len(tasks)} tasks completed", tasks)
    held = {w.task for w in board.workers}
    # A worker (Claude Code with the shared list) may mark its own task completed: until the
    # audit approves, the task is still in progress and whatever it blocks waits.
    tasks = [replace(t, status=IN_PROGRESS) if t.id in held and t.status == COMPLETED else t for t in tasks]
    locks = board.locks()
    room = max(0, board.capacity - len(board.workers))
    candidates = ready(tasks)
    deferred: list[Deferral] = []
    started: list[Worker] = []
    serial = board.serial
    for task in candidates:
        if len(started) >= room:
            break
        clash = conflict(task, locks)
        if clash is not None:
            deferred.append(Deferral(task.id, "file", worker=clash[1], file=clash[0]))
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
    working = [w for w in board.workers if w.status == "running"]
    asking = any(w.status == "question" for w in board.workers)
    # Nothing ready while a worker waits for an answer is waiting, not spinning: a person is asked.
    spinning = not started and bool(open_tasks) and (bool(deferred) or (not working and not asking))
    if started:
        board = replace(board, defer_streak=0)
    elif spinning:
        board = replace(board, defer_streak=board.defer_streak + 1)
    step.board = board
    if spinning and board.defer_streak >= DEFER_LIMIT:
        _deadlock(step, tasks, now)
    return step


def _deadlock(step: Step, tasks: Sequence[Task], now: datetime) -> None:
    board = step.board
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
    step.events.append(
        ("escalation", {"kind": "deadlock", "reason": reason, "deferred": [d.to_json() for d in why]})
    )
    _wait(step, now, "escalation", reason, escalation="deadlock")


def _wait(step: Step, now: datetime, kind: str, reason: str, **more: Any) -> None:
    step.state.status = "paused"
    step.state.waiting_for = {"kind": kind, "reason": reason, "since": iso_s(now), **more}
    step.events.append(("paused", {"reason": reason, "waiting_for": kind}))


def complete(step: Step, now: datetime, reason: str, tasks: Sequence[Task] = ()) -> Step:
    """The loop is done: its summary says how, after how many worker turns and how long, what it
    cost, and the graph's tasks by name (not counted when the graph was not read: never a zero
    made up)."""
    state = step.state
    state.status = "completed"
    state.waiting_for = None
    step.events.append(("completed", {"reason": reason, "iterations": state.iteration}))
    started = parse_iso(state.started_at)
    left = [t.subject for t in tasks if t.status != COMPLETED]
    step.archive = {
        "outcome": "completed",
        "reason": reason,
        "completed_at": iso_s(now),
        "ended_at": iso_s(now),
        "iterations": state.iteration,
        "duration_s": round((now - started).total_seconds(), 1) if started else None,
        "pending_at_end": len(left) if tasks else None,
        "tasks": {
            "done": [t.subject for t in tasks if t.status == COMPLETED],
            "skipped": [],
            "remaining": left,
        }
        if tasks
        else None,
        "usage": dict(state.usage),
    }
    return step


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
    """What the driver saw of a worker's turn and its audit."""

    worker: str
    exit_code: int | None
    output: str
    """The worker's final text (its last words)."""
    approved: bool
    """The audit approved (without an audit: the worker exited 0)."""
    feedback: str = ""
    """The audit's output when it rejected (or the worker's own when it failed)."""
    mark: str | None = None
    """The progress mark of the worker's files after the turn."""
    duration_s: float = 0.0
    before: str | None = None
    """The mark when the turn started (None: compare with the last turn's)."""


def turn_ended(state: LoopState, tasks: Sequence[Task], end: TurnEnd, now: datetime) -> Step:
    """Approved → completed and locks freed; a question → that worker waits; rejected → the
    same task again with the feedback (locks kept), or a fresh worker when it stalls."""
    state = state.copy()
    board = board_of(state)
    step = Step(state, board)
    worker = board.worker(end.worker)
    if worker is None:
        return step
    board = replace(board, defer_streak=0)  # a worker spoke: the loop is not spinning
    step.board = board
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
    asked = question(end.output) if end.exit_code == 0 else None
    if asked:
        step.board = board.put(replace(worker, status="question", question=asked, feedback=None))
        step.events.append(
            ("worker-question", {"worker": worker.name, "task": worker.task, "question": asked})
        )
        return step
    if end.approved:
        step.board = board.without(worker.name)
        step.updates.append(Update(worker.task, COMPLETED, None))
        step.events.append(("audit-approved", {"worker": worker.name, "task": worker.task}))
        step.events.append(
            ("locks-freed", {"worker": worker.name, "task": worker.task, "files": list(worker.files)})
        )
        step.events.append(
            ("task-completed", {"worker": worker.name, "task": worker.task, "turns": worker.turns})
        )
        if tasks:
            after = [replace(t, status=COMPLETED, owner=None) if t.id == worker.task else t for t in tasks]
            if all(t.status == COMPLETED for t in after) and not step.board.workers:
                complete(step, now, f"all {len(after)} tasks completed", after)
        return step
    feedback = (end.feedback or end.output or f"exit {end.exit_code}")[-FEEDBACK_CHARS:]
    step.events.append(
        ("audit-rejected", {"worker": worker.name, "task": worker.task, "feedback": feedback[-400:]})
    )
    before = end.before if end.before is not None else worker.mark
    stalled = end.mark is not None and end.mark == before
    stalls = worker.stalls + 1 if stalled else 0
    if stalls >= STALL_TURNS:
        return _replace_worker(step, worker, feedback, now)
    rerun = replace(worker, turns=worker.turns + 1, feedback=feedback, stalls=stalls, mark=end.mark)
    step.board = board.put(rerun)
    step.events.append(("worker-turn", {"worker": worker.name, "task": worker.task, "turn": rerun.turns}))
    step.start.append(rerun)
    return step


def _replace_worker(step: Step, worker: Worker, feedback: str, now: datetime) -> Step:
    board = step.board
    if worker.replaced + 1 > MAX_REPLACEMENTS:
        reason = (
            f"task {worker.task}: {MAX_REPLACEMENTS + 1} workers in a row made no progress "
            f"over {STALL_TURNS} turns; last feedback: {feedback[-300:]}"
        )
        step.board = board.put(replace(worker, status="stalled", feedback=feedback, stalls=0))
        step.events.append(("escalation", {"kind": "stuck", "reason": reason, "worker": worker.name}))
        _wait(step, now, "escalation", reason, escalation="stuck")
        return step
    serial = board.serial + 1
    fresh = Worker(
        f"worker-{serial}",
        worker.task,
        worker.files,
        iso_s(now),
        feedback=feedback,
        replaced=worker.replaced + 1,
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
    step.start.append(fresh)
    return step


# --- people ----------------------------------------------------------------------------------


def command(state: LoopState, cmd: Command, now: datetime) -> Step:
    """A person's command: with a worker target it acts on that worker only (skip its task,
    stop it, answer its question); without, on the whole loop."""
    state = state.copy()
    board = board_of(state)
    step = Step(state, board)
    outcome = _command(step, cmd, now)
    step.events.append(
        (
            "command-applied",
            {"id": cmd.id, "command": cmd.kind, "source": cmd.source, "outcome": outcome}
            | ({"worker": cmd.target} if cmd.target else {}),
        )
    )
    return step


def _command(step: Step, cmd: Command, now: datetime) -> str:
    state, board = step.state, step.board
    if cmd.target:
        worker = board.worker(cmd.target)
        if worker is None:
            return f"no worker {cmd.target}"
        if cmd.kind == "skip":
            step.board = board.without(worker.name)
            step.end.append(worker.name)
            step.updates.append(Update(worker.task, COMPLETED, None, {"skipped": True}))
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
        if cmd.kind in ("answer", "resume") and worker.status in ("question", "stalled"):
            answer = cmd.reason or "go on"
            rerun = replace(
                worker,
                status="running",
                question=None,
                turns=worker.turns + 1,
                stalls=0,
                feedback=f"A PERSON ANSWERED YOUR QUESTION:\n{answer}",
            )
            step.board = replace(board.put(rerun), defer_streak=0)
            step.start.append(rerun)
            step.events.append(("answered", {"answer": answer, "source": cmd.source, "worker": worker.name}))
            return f"{worker.name} resumed"
        return f"{cmd.kind} does not apply to a worker"
    if cmd.kind == "pause":
        if state.status == "running":
            _wait(step, now, "pause", cmd.reason or "paused by a person")
            return "paused"
        return "already paused"
    if cmd.kind in ("resume", "answer"):
        if state.status != "paused":
            return "not paused"
        state.status = "running"
        state.waiting_for = None
        board = replace(board, defer_streak=0)
        for worker in board.workers:  # workers given up on get one more go, with the person's word
            if worker.status == "stalled":
                note = f"A PERSON LOOKED AT IT:\n{cmd.reason}" if cmd.reason else worker.feedback
                rerun = replace(worker, status="running", turns=worker.turns + 1, stalls=0, feedback=note)
                board = board.put(rerun)
                step.start.append(rerun)
        step.board = board
        if cmd.kind == "answer":
            step.events.append(("answered", {"answer": cmd.reason, "source": cmd.source}))
        step.events.append(("resumed", {}))
        return "resumed"
    if cmd.kind == "stop":
        release(step)
        state.status = "stopped"
        state.waiting_for = None
        step.events.append(("stopped", {"reason": cmd.reason or "stopped by a person"}))
        return "stopped"
    if cmd.kind == "complete":
        release(step)
        complete(step, now, cmd.reason or "completed by a person")
        return "completed"
    if cmd.kind == "set-max-iterations" and cmd.value is not None:
        state.max_iterations = cmd.value
        return f"max iterations {cmd.value}"
    return "does not apply to parallel workers (target a worker)"


def release(step: Step) -> Step:
    """Every worker ends and gives its task back to the graph (pending, no owner), so a later
    run, a person or Claude Code finds the graph as if they had not started."""
    for worker in step.board.workers:
        step.end.append(worker.name)
        step.updates.append(Update(worker.task, PENDING, None))
        step.events.append(
            ("locks-freed", {"worker": worker.name, "task": worker.task, "files": list(worker.files)})
        )
    step.board = replace(step.board, workers=())
    return step


def interrupt(state: LoopState, pause: bool, reason: str, now: datetime) -> Step:
    """SIGINT (pause) or SIGTERM (stop) to the runner: workers end, tasks go back."""
    step = release(Step(state.copy(), board_of(state)))
    if pause:
        if step.state.status == "running":
            _wait(step, now, "pause", reason)
    else:
        step.state.status = "stopped"
        step.state.waiting_for = None
        step.events.append(("stopped", {"reason": reason}))
    return step


# --- what a worker reads ---------------------------------------------------------------------


def worker_prompt(goal: str, task: Task, worker: Worker) -> str:
    """The worker's own task and nothing of the others': its subject, description and files,
    and the feedback of its last turn."""
    files = "\n".join(f"- {f}" for f in task.target_files) or "- (no files named)"
    parts = []
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


def elapsed(worker: Worker, now: datetime) -> float:
    start = parse_iso(worker.started)
    return max(0.0, (now - start).total_seconds()) if start else 0.0
