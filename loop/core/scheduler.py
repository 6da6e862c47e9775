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

The board they work on (workers, tasks, the merge queue, the lock table) is `loop.core.board`.

A cycle:

1. ready = `pending`, no owner, every `blockedBy` task `completed`;
2. a ready task whose files overlap the lock table is deferred (and says with whom and on which
   file); tasks started in the same cycle lock too;
3. one worker per remaining ready task, up to the free slots (`Board.free`: a branch waiting for
   the merge train holds none) and to what the engine admits;
4. a worker's turn ends → the engine's verdict → (audit) → approved: in a git repository the
   task's branch joins the merge queue and its locks are held until it is merged; outside git
   (`--isolation locks`) the task is completed at once. Rejected: the same task again with the
   feedback; no progress over the loop's `--stuck-after` turns: replaced.
5. the merge train lands the queue's first `Board.batch` branches together, verified once on
   the merged tree (a red batch is split by the driver down to the branches that break it):
   merged → completed; a conflict or a verification failure → the task again with the hunks or
   the failure, and after `MAX_CONFLICTS` conflicts a person is asked; a branch that passes
   alone but fails beside another task's work is told which task, and after `MAX_COLLISIONS`
   such failures a person is asked, both tasks named.

The deferral streak counts cycles in which nothing could start although work remains; a start,
a completion or a worker's output resets it; at `DEFER_LIMIT` the loop needs a person.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from loop.core.board import (
    AUDITING,
    BATCH,
    CHECKS,
    COMPLETED,
    DEFER_LIMIT,
    FEEDBACK_CHARS,
    HELD,
    IN_PROGRESS,
    LOCKS,
    MAX_COLLISIONS,
    MAX_CONFLICTS,
    MAX_FLAKY,
    MAX_REPLACEMENTS,
    MAX_WORKERS,
    PENDING,
    QUESTION,
    QUEUED,
    READY,
    RUNNING,
    SECTION,
    STALLED,
    WORKTREE,
    Board,
    Deferral,
    Step,
    Task,
    Update,
    Worker,
    as_held,
    board_of,
    conflict,
    conflict_feedback,
    elapsed,
    keep,
    lock_table,
    norm,
    ready,
    section_of,
    stall_turns,
    step_of,
    waiting,
    worker_prompt,
)
from loop.core.model import Command, LoopState
from loop.core.prompts import answered_prompt
from loop.core.timeutil import iso_s

__all__ = [
    "AUDITING",
    "BATCH",
    "CHECKS",
    "COMPLETED",
    "DEFER_LIMIT",
    "FEEDBACK_CHARS",
    "HELD",
    "IN_PROGRESS",
    "LOCKS",
    "MAX_COLLISIONS",
    "MAX_CONFLICTS",
    "MAX_REPLACEMENTS",
    "MAX_WORKERS",
    "PENDING",
    "QUESTION",
    "QUEUED",
    "READY",
    "RUNNING",
    "SECTION",
    "STALLED",
    "WORKTREE",
    "Board",
    "Deferral",
    "Step",
    "Task",
    "TurnEnd",
    "Update",
    "Worker",
    "audit_for",
    "behind_batch",
    "board_of",
    "conflict",
    "conflict_feedback",
    "cycle_due",
    "elapsed",
    "following_batch",
    "keep",
    "lock_table",
    "may_land",
    "next_batch",
    "next_merge",
    "only_asking",
    "ready",
    "section_of",
    "stall_turns",
    "step_of",
    "waiting",
    "worker_prompt",
]

PULL_REQUEST = "pull request"
"""`audit_for`'s word when the pull request is the only audit."""

_norm = norm  # the lock's spelling of a file, as `loop.core.workflow` names it


# --- a cycle ---------------------------------------------------------------------------------


def startable(state: LoopState, tasks: Sequence[Task]) -> int:
    """How many workers a cycle would start now (before the engine admits them)."""
    board = board_of(state)
    free = board.free()
    reruns = min(free, sum(1 for w in board.workers if w.status == READY))
    room = free - reruns
    locks = board.locks()
    count = 0
    for task in ready(as_held(tasks, board)):
        if count >= room:
            break
        if conflict(task, locks) is None:
            count += 1
            for name in task.target_files:
                locks.setdefault(norm(name), task.id)
    return reruns + count


def cycle(step: Step, tasks: Sequence[Task], now: datetime, admitted: int, wanted: int) -> Step:
    """One scheduling pass: start up to `admitted` of the `wanted` (`startable`) workers (the
    engine's count), defer what may not start, count the spin: a pass in which nothing was
    startable though work remains (not one in which the engine held the turns back)."""
    board = step.board
    if step.state.status != "running":
        return step
    tasks = as_held(tasks, board)
    locks = board.locks()
    free = board.free()
    reruns = [w for w in board.workers if w.status == READY][: min(admitted, free)]
    for worker in reruns:  # a worker's next turn goes first: its task is under way
        board = board.put(replace(worker, status=RUNNING))
        step.start.append(replace(worker, status=RUNNING))
    admitted -= len(reruns)
    room = max(0, min(admitted, free - len(reruns)))
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
            locks.setdefault(norm(name), worker.name)
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
    queued = {w.name for w in board.workers if w.status == QUEUED}
    # Nothing ready while a worker waits for a person is waiting, not spinning: a person is asked;
    # a task deferred on the files of a branch in the merge queue waits for the train to move.
    spinning = (
        not started
        and not reruns
        and bool(open_tasks)
        and not any(d.worker in queued for d in deferred)
        and (bool(deferred) or (not busy and not asking))
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
    tasks = as_held(tasks, board)
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
    spent: Mapping[str, Any] = field(default_factory=dict)
    """Its tokens and cost, when the agent said (`loop.core.model.spent_of`)."""


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
                **end.spent,
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
        if audit_for(board) is None:  # no audit configured: approved as it is
            return audited(step, worker.name, True)
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
    worker = step.board.worker(name)
    if worker is None or worker.status != AUDITING:  # a word on no audit under way: nothing
        return step
    board = step.board = replace(step.board, defer_streak=0)  # an audit ending is progress
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
    step.board = replace(
        board.without(worker.name),
        done=(*board.done, worker.task),
        skipped=tuple(t for t in board.skipped if t != worker.task),  # skipped once, done now
    )
    step.updates.append(Update(worker.task, COMPLETED, worker.name))  # the owner stays: who did it
    step.events.append(
        ("locks-freed", {"worker": worker.name, "task": worker.task, "files": list(worker.files)})
    )
    step.events.append(
        ("task-completed", {"worker": worker.name, "task": worker.task, "turns": worker.turns})
    )
    return step


def merged(step: Step, name: str, sha: str | None, before: str | None = None) -> Step:
    """The queue merged the worker's branch into the loop's branch: the task is completed.
    `before`: the loop's branch before the landing, journaled for `loopdeck undo` to trust
    (an agent can move a ref, not the journal)."""
    step.board = replace(step.board, defer_streak=0)
    worker = step.board.worker(name)
    if worker is None:
        return step
    data = {"worker": worker.name, "task": worker.task, "branch": worker.branch, "sha": sha}
    step.events.append(("task-merged", {**data, "before": before} if before else data))
    return _completed(step, worker)


def merge_flaky(step: Step, name: str, failure: str) -> Step | None:
    """The checks failed on the task's merged tree, then passed on that same tree: the failure
    may not be the task's. Its branch stays queued, `MAX_FLAKY` times; None after that (the
    failure goes back to its worker)."""
    worker = step.board.worker(name)
    if worker is None or worker.flaky >= MAX_FLAKY or name not in step.board.queue:
        return None
    step.board = step.board.put(replace(worker, flaky=worker.flaky + 1))
    data = {"worker": worker.name, "task": worker.task, "branch": worker.branch, "reason": failure[-400:]}
    step.events.append(("merge-flaky", data))
    return step


def merge_failed(
    step: Step, name: str, why: str, feedback: str, conflict: bool, beside: str | None = None
) -> Step:
    """The merge conflicted (or the verification of the merged tree failed): the task goes back
    to its worker with the hunks (or the failure); a task that keeps conflicting needs a person.
    `beside`: the task whose work it fails beside (it passes alone); the second time, a person
    is asked how the two fit together."""
    board = step.board = replace(step.board, defer_streak=0)
    worker = board.worker(name)
    if worker is None:
        return step
    step.board = replace(board, queue=tuple(q for q in board.queue if q != name))
    conflicts = worker.conflicts + (1 if conflict else 0)
    data = {"worker": worker.name, "task": worker.task, "branch": worker.branch, "reason": why[-400:]}
    if beside is not None:
        data["beside"] = beside
    step.events.append(("merge-conflict" if conflict else "merge-rejected", data))
    worker = replace(worker, conflicts=conflicts)
    if beside is not None and not conflict:
        worker = replace(worker, collisions=worker.collisions + 1, beside=beside)
        if worker.collisions >= MAX_COLLISIONS:
            step.board = step.board.put(replace(worker, status=HELD, feedback=feedback[-FEEDBACK_CHARS:]))
            reason = (
                f"task {worker.task} fails the checks beside task {beside} "
                f"({worker.collisions} times), though it passes alone: decide how tasks "
                f"{worker.task} and {beside} fit together, then resume"
            )
            step.needs = (
                "merge-collision",
                reason,
                {"worker": worker.name, "task": worker.task, "beside": beside},
            )
            return step
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
        collisions=worker.collisions,
        beside=worker.beside,
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
        step.board = replace(
            step.board, done=(*step.board.done, worker.task), skipped=(*step.board.skipped, worker.task)
        )
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
    state's word goes back into the graph. A task this loop completed is completed (skipped,
    when a person skipped it); a task owned by a worker of this loop that is not on the board
    is pending again."""
    board = step.board
    names = {w.name for w in board.workers}
    done = set(board.done)
    for task in tasks:
        lost_skip = task.id in board.skipped and not task.skipped  # its worker marked it completed
        if task.id in done and (task.status != COMPLETED or lost_skip):
            skipped = {"skipped": True} if task.id in board.skipped else {}
            step.updates.append(Update(task.id, COMPLETED, task.owner, skipped))
        elif (
            task.id not in done
            and task.status == IN_PROGRESS
            and task.owner
            and task.owner.startswith("worker-")
            and task.owner not in names
        ):
            step.updates.append(Update(task.id, PENDING, None))
    return step


# --- what the drivers ask: every driver of workers asks these before it acts ------------------


def cycle_due(state: LoopState, changed: bool, idle: bool) -> bool:
    """Does a scheduling pass run now? While the loop runs: when anything changed (a command, a
    turn or a merge that ended, the graph), or when the driver is idle (no worker's turn under
    way; a deadlock is counted in idle passes)."""
    return state.status == "running" and (changed or idle)


def next_merge(state: LoopState) -> Worker | None:
    """The worker whose branch merges next into the loop's branch: the queue's first, one at a
    time, while the loop runs or is paused (a pause holds new turns, not a merge already
    approved); None when nothing may merge now."""
    if state.status not in ("running", "paused"):
        return None
    board = board_of(state)
    if not board.queue:
        return None
    worker = board.worker(board.queue[0])
    return worker if worker is not None and worker.branch is not None else None


def may_land(state: LoopState, names: Iterable[str]) -> bool:
    """Whether branches the merge train found green may land now: the loop still merges
    (running or paused) and each is still in the queue (a person may have stopped or skipped
    its worker, or the loop, while the checks ran)."""
    if state.status not in ("running", "paused"):
        return False
    board = board_of(state)
    return all(name in board.queue for name in names)


def next_batch(state: LoopState, held: Collection[str] = ()) -> list[Worker]:
    """The workers whose branches the merge train lands next, together: the queue's first
    `Board.batch` (one at a time with a batch of 1, or with the rebase strategy), while the
    loop runs or is paused; empty when nothing may merge now. `held`: branches the driver is
    still looking into (what a failing one collides with), in the queue but out of batches."""
    if next_merge(state) is None:
        return []
    board = board_of(state)
    return _mergeable(board, held)[: _batch_size(board)]


def behind_batch(state: LoopState, held: Collection[str] = ()) -> list[Worker]:
    """The queued branches behind the next batch, which the train checks by themselves in the
    lanes its batch leaves free: one that fails alone is known a batch sooner. None with
    one-at-a-time landings (a batch of 1, or the rebase strategy), which check one branch at a
    time."""
    if next_merge(state) is None:
        return []
    board = board_of(state)
    size = _batch_size(board)
    return _mergeable(board, held)[size:] if size > 1 else []


def following_batch(state: LoopState, held: Collection[str] = ()) -> list[Worker]:
    """The batch that follows the one being checked (its branches `held`, with those looked
    into), which the train checks on top of it meanwhile. None with one-at-a-time landings."""
    return next_batch(state, held) if _batch_size(board_of(state)) > 1 else []


def _batch_size(board: Board) -> int:
    return 1 if board.strategy == "rebase" else max(1, board.batch)


def _mergeable(board: Board, held: Collection[str]) -> list[Worker]:
    """The queue's workers with a branch, in order, but those `held`."""
    found = [board.worker(name) for name in board.queue if name not in held]
    return [w for w in found if w is not None and w.branch is not None]


def audit_for(board: Board) -> str | None:
    """The audit an approved turn goes through (a command, an agent's, or with `--pr` its pull
    request's checks and review), or None: a turn with no audit configured is approved as it is
    (`audited` with approved=True)."""
    return board.audit or (PULL_REQUEST if board.pr else None)


def only_asking(step: Step, running: bool) -> str | None:
    """The question a worker asks when nothing else can move: no turn under way (`running`,
    the driver's fact) or starting, and every worker asks, waits or is given up on. None while
    anything may still move."""
    workers = step.board.workers
    if step.start or running:
        return None
    asking = [w for w in workers if w.status == QUESTION]
    if not asking or any(w.status not in (QUESTION, STALLED, HELD) for w in workers):
        return None
    return asking[0].question or ""
