"""The parallel loop's board: the workers, their tasks and files, the merge queue, kept in the
loop's state; and what is ready to start and who holds which file.

The data of the workers' rules (`loop.core.scheduler`), apart from the rules themselves, and
what a worker reads (its prompt, a conflict's feedback).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from loop.core.model import Command, Effects, Event, LoopState, Result
from loop.core.timeutil import parse_iso

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
MAX_CONFLICTS = 2
"""Merges of one task that conflicted before a person is asked to resolve it: the first goes
to an agent turn (the task's worker, told both sides' intent), the second to a person."""
MAX_COLLISIONS = 2
"""Merges of one task that failed the checks only beside another task's work before a person
is asked how the two fit together."""
MAX_FLAKY = 1
"""Failures of one task's merged tree that the same tree did not repeat (a flaky check) for
which its branch is queued again; the next goes back to its worker."""
BATCH = 8
"""How many approved branches the merge train lands together at most (verified once)."""
CHECKS = 2
"""How many checks the merge train runs at once by default (`--merge-checks`)."""
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
    skipped: bool = False
    """Completed by a person's skip (`metadata.skipped`), not done: counted apart."""


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
    collisions: int = 0
    """Merges of this task that failed the checks only beside another task's work."""
    beside: str | None = None
    """The task whose work this task's branch last failed beside (passing alone)."""
    flaky: int = 0
    """Failures of this task's merged tree that the same tree did not repeat."""

    def to_json(self) -> dict[str, Any]:
        obj: dict[str, Any] = {
            "name": self.name,
            "task": self.task,
            "files": list(self.files),
            "started": self.started,
            "turns": self.turns,
            "status": self.status,
        }
        for key in ("feedback", "question", "branch", "worktree", "rework", "beside"):
            if getattr(self, key) is not None:
                obj[key] = getattr(self, key)
        for key in ("stalls", "replaced", "conflicts", "collisions", "flaky"):
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
            collisions=_int(obj.get("collisions"), 0),
            beside=opt("beside"),
            flaky=_int(obj.get("flaky"), 0),
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
    batch: int = BATCH
    """How many approved branches land together at most (1: one at a time)."""
    checks: int = CHECKS
    """How many checks the merge train runs at once (a red batch's parts, a blame's probes)."""
    pr: bool = False
    """Each task a pull request (`--pr`): an approved turn waits for its host's checks and review
    (`loop.core.pulls`), as for an audit, before it may land."""
    workers: tuple[Worker, ...] = ()
    queue: tuple[str, ...] = ()
    """Workers whose approved branch waits to be merged, in order."""
    done: tuple[str, ...] = ()
    """Tasks this loop completed (merged): the state's word, put back into the graph after a crash."""
    skipped: tuple[str, ...] = ()
    """Those of `done` a person skipped: put back as skipped, not done."""
    defer_streak: int = 0
    serial: int = 0
    """The last worker number given out: names are never reused within a loop."""
    deferred: tuple[Deferral, ...] = ()
    """The last cycle's deferrals, for people."""

    def locks(self) -> dict[str, str]:
        return lock_table(self.workers)

    def active(self) -> list[Worker]:
        """The workers holding a slot: their agent runs or waits for its audit, a person or the
        loop. A branch waiting for the merge train (queued) or a turn waiting to be admitted
        (ready) holds none: its agent has ended."""
        return [w for w in self.workers if w.status not in (QUEUED, READY)]

    def free(self) -> int:
        """Slots for a turn to start in (`capacity` less the `active` workers)."""
        return max(0, self.capacity - len(self.active()))

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
            "batch": self.batch,
            "merge_checks": self.checks,
            **({"pr": True} if self.pr else {}),
            "workers": [w.to_json() for w in self.workers],
            "locks": self.locks(),
            "queue": list(self.queue),
            "done": list(self.done),
            **({"skipped": list(self.skipped)} if self.skipped else {}),
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
            batch=max(1, _int(obj.get("batch"), BATCH)),
            checks=max(1, _int(obj.get("merge_checks"), CHECKS)),
            pr=obj.get("pr") is True,
            workers=workers,
            queue=tuple(str(q) for q in obj.get("queue") or () if str(q) in names),
            done=tuple(str(d) for d in obj.get("done") or ()),
            skipped=tuple(str(d) for d in obj.get("skipped") or ()),
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
            table.setdefault(norm(name), worker.name)
    return table


def norm(path: str) -> str:
    """Two spellings of one file are one lock: `./src/a.py`, `src//a.py` and `src/a.py`."""
    parts = [p for p in path.replace("\\", "/").split("/") if p not in ("", ".")]
    return "/".join(parts)


def conflict(task: Task, locks: Mapping[str, str]) -> tuple[str, str] | None:
    """(file, worker) of the first of `task`'s files someone holds, or None."""
    for name in task.target_files:
        holder = locks.get(norm(name))
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


def as_held(tasks: Sequence[Task], board: Board) -> list[Task]:
    """The graph as the scheduler must see it: a task a worker of this loop holds is in
    progress until it is merged (Claude Code workers may mark their own task completed), and a
    task this loop completed stays completed (skipped, when a person skipped it)."""
    held = {w.task for w in board.workers}
    done = set(board.done)
    out = []
    for t in tasks:
        if t.id in held and t.status == COMPLETED:
            t = replace(t, status=IN_PROGRESS)
        elif t.id in done and (t.status != COMPLETED or t.id in board.skipped):
            t = replace(t, status=COMPLETED, skipped=t.skipped or t.id in board.skipped)
        out.append(t)
    return out


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
