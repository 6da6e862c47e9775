"""The parallel loop's decisions, composed: the engine's for the loop, the scheduler's for the
workers, as pure functions of (state, facts, now) → Step.

The driver on this machine (`loop.drivers.parallel`) carries these steps out with processes, worktrees
and files; a driver elsewhere (workers on other machines) carries out the same steps with its
own means. Keeping the composition here, and pure, is what makes the two the same loop: every
transition comes from `loop.core.engine`, every worker rule from `loop.core.scheduler`, and this module
only says in which order they are asked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from loop.core import engine, model, scheduler
from loop.core.conflicts import conflict_feedback
from loop.core.model import Aggregate, Command, LoopState, Turn, spent_of
from loop.core.scheduler import Step, Task, TurnEnd


def settle(step: Step, now: datetime) -> Step:
    """A worker rule found that the loop needs a person: the engine escalates."""
    if step.needs is not None and step.state.status == "running":
        kind, reason, data = step.needs
        step.absorb(engine.escalate(step.seal(), kind, reason, now, **data))
        step.needs = None
    return step


def cycle(state: LoopState, tasks: Sequence[Task], now: datetime, sources: Aggregate | None) -> Step:
    """A scheduling pass: the loop completes when every task is done and no worker is left;
    else the engine admits turns (each an iteration, within the limits) and the scheduler
    starts them, deferring what must wait."""
    if scheduler.finished(state, tasks):
        done = scheduler.step_of(state)
        return done.absorb(engine.finish(state, f"all {len(tasks)} tasks completed", sources, now))
    wanted = scheduler.startable(state, tasks)
    admitted, result = engine.admit(state, wanted, now)
    step = scheduler.step_of(state).absorb(result)
    return settle(scheduler.cycle(step, tasks, now, admitted, wanted), now)


def turn(
    state: LoopState,
    facts: Turn,
    *,
    worker: str,
    task: str,
    changed: bool,
    asked: str | None,
    end: TurnEnd,
    now: datetime,
) -> Step:
    """A worker's turn ended: the engine judges it for the loop (the same judgement as the
    runner's turn), the scheduler applies the verdict to the worker."""
    verdict, result = engine.worker_turn(
        state, facts, worker=worker, task=task, changed=changed, asked=asked, now=now
    )
    step = scheduler.step_of(state).absorb(result)
    return settle(scheduler.turn_ended(step, replace(end, verdict=verdict, asked=asked)), now)


def worker_turn_ended(
    state: LoopState,
    facts: Turn,
    *,
    worker: scheduler.Worker,
    output: str,
    touched: Sequence[str],
    changed: bool,
    note: str,
    asked: str | None,
    exit_code: int | None,
    duration_s: float,
    now: datetime,
) -> Step:
    """A worker's turn ended, as any driver saw it (`touched`: the files the task's branch or
    its files' marks changed; `note`: why its work cannot be taken, if the driver found a
    reason): the files it touched beyond its own journaled, the feedback it reads next (its
    failure, else the note), then the engine's judgement (`turn`)."""
    feedback = f"YOUR LAST TURN FAILED: {facts.failure}" if facts.failure else note
    end = TurnEnd(
        worker.name,
        "",
        output,
        feedback=feedback,
        exit_code=exit_code,
        duration_s=duration_s,
        changed=tuple(touched) if changed else (),
        asked=asked,
        spent=spent_of(facts.usage),
    )
    step = turn(
        state, facts, worker=worker.name, task=worker.task, changed=changed, asked=asked, end=end, now=now
    )
    outside = sorted(set(touched) - {scheduler._norm(f) for f in worker.files})
    if outside and worker.files:
        strayed = {"worker": worker.name, "task": worker.task, "files": outside[:50]}
        step.events.insert(0, ("worker-strayed", strayed))
    return step


def audited(
    state: LoopState,
    worker: str,
    approved: bool,
    feedback: str,
    now: datetime,
    validation: Mapping[str, Any] | None = None,
) -> Step:
    """The audit's word on a worker's turn; `validation`: the checks' results when they ran on
    the task's work (outside git), judged for the loop's progress."""
    step = scheduler.audited(scheduler.step_of(state), worker, approved, feedback)
    return settle(_checked(step, validation), now)


def _checked(step: Step, validation: Mapping[str, Any] | None) -> Step:
    """The step with the checks' results judged (`engine.checked`), when they ran."""
    if validation is None:
        return step
    return step.absorb(engine.checked(step.state, validation, len(step.board.done)))


def merged(state: LoopState, worker: str, sha: str | None, before: str | None = None) -> Step:
    return scheduler.merged(scheduler.step_of(state), worker, sha, before)


def merge_failed(
    state: LoopState,
    worker: str,
    why: str,
    feedback: str,
    conflict: bool,
    now: datetime,
    beside: str | None = None,
) -> Step:
    step = scheduler.merge_failed(scheduler.step_of(state), worker, why, feedback, conflict, beside)
    return settle(step, now)


def merge_ended(
    state: LoopState,
    worker: str,
    *,
    sha: str | None,
    problem: str | None = None,
    conflicts: Sequence[str] = (),
    hunks: str = "",
    failure: str | None = None,
    validation: Mapping[str, Any] | None = None,
    beside: str | None = None,
    flaky: bool = False,
    intent: tuple[str, Sequence[tuple[str, str]]] = ("", ()),
    before: str | None = None,
    now: datetime,
) -> Step:
    """A merge of a worker's branch into the loop's, as any driver saw it: a problem with the
    merge itself (the workspace, the remote) needs a person; a conflict goes back to the worker
    with its hunks; a verification that failed on the merged tree goes back with its output
    (`beside`: the task whose work it fails beside, passing alone; `flaky`: checked again, the
    same tree passed, so the branch is queued again, once); else the task is merged.
    `validation`: the checks' results on the merged tree, when they ran: the loop's progress is
    judged on them. `intent`: a conflict's two sides, the task's title and (task, title) of
    what landed the other lines (`loop.core.conflicts`). `before`: the loop's branch before a
    landing, journaled with it for `loopdeck undo`."""
    if failure is not None and flaky:
        again = scheduler.merge_flaky(scheduler.step_of(state), worker, failure)
        if again is not None:
            return again
        failure += "\n(these checks also passed once on this same tree: they may be flaky)"
    step = _merge_ended(state, worker, sha, problem, conflicts, hunks, failure, beside, now, intent, before)
    return _checked(step, validation)


def _merge_ended(
    state: LoopState,
    worker: str,
    sha: str | None,
    problem: str | None,
    conflicts: Sequence[str],
    hunks: str,
    failure: str | None,
    beside: str | None,
    now: datetime,
    intent: tuple[str, Sequence[tuple[str, str]]] = ("", ()),
    before: str | None = None,
) -> Step:
    if problem is not None:
        return escalate(state, "merge-failed", problem, now)
    if conflicts:
        feedback = conflict_feedback(conflicts, hunks, *intent)
        return merge_failed(state, worker, "conflict in " + ", ".join(conflicts), feedback, True, now)
    if failure is not None and beside is not None:
        feedback = (
            f"YOUR BRANCH PASSES THE CHECKS ALONE BUT FAILS THEM BESIDE TASK {beside}, whose work is "
            "on the loop's branch (your branch was not merged). Change your work so that both fit:\n"
            f"{failure}"
        )
        return merge_failed(state, worker, f"fails beside task {beside}", feedback, False, now, beside)
    if failure is not None:
        feedback = (
            "VERIFICATION FAILED WITH YOUR WORK ON TOP OF THE LOOP'S BRANCH (your branch was not merged):\n"
            f"{failure}"
        )
        return merge_failed(state, worker, "verification failed", feedback, False, now)
    return merged(state, worker, sha, before)


def asking(state: LoopState) -> list[str]:
    """The workers of a loop that ask a person a question, in the board's order (none for a
    loop without workers)."""
    if scheduler.SECTION not in state.extra:
        return []
    return [w.name for w in scheduler.board_of(state).workers if w.status == scheduler.QUESTION]


def aimed(state: LoopState, cmd: Command) -> Command:
    """The worker a command that names none is for, when the loop's state says it: an answer
    while a worker asks and the loop itself does not goes to that worker (the first asking: a
    person answers the question they were shown, from wherever they are); a skip in a loop of
    one worker skips its task."""
    if cmd.target or scheduler.SECTION not in state.extra:
        return cmd
    if cmd.kind == "answer" and state.waiting_kind != "question":
        who = asking(state)
        if who:
            return model.replace(cmd, target=who[0])
    workers = scheduler.board_of(state).workers
    if cmd.kind == "skip" and not state.verification_mode and len(workers) == 1:
        return model.replace(cmd, target=workers[0].name)
    return cmd


def unaimed(state: LoopState, kind: str, target: str | None) -> str | None:
    """Why a command of `kind` to `target` (None: no worker named) does nothing in this loop of
    workers (None: it does something): a skip while several workers hold tasks (which task is
    the current one?)."""
    if target or kind != "skip" or state.verification_mode or scheduler.SECTION not in state.extra:
        return None
    workers = scheduler.board_of(state).workers
    if len(workers) < 2:
        return None
    held = ", ".join(f"{w.name} (task {w.task})" for w in workers)
    return f"{len(workers)} workers hold tasks, {held}: skip one's task with --worker NAME"


def command(state: LoopState, cmd: Command, sources: Aggregate | None, now: datetime) -> Step:
    """A person's command: to one worker, the scheduler's; to the whole loop, the engine's,
    then what it means for the workers. One that names no worker may be aimed at one (`aimed`),
    or do nothing but say why (`unaimed`)."""
    cmd = aimed(state, cmd)
    if engine.refusal(cmd) is not None:  # the engine's one rule, for a worker's command too
        return scheduler.step_of(state).absorb(engine.refuse(state, cmd))
    why = unaimed(state, cmd.kind, cmd.target)
    if why is not None:
        step = scheduler.step_of(state)
        data = {"id": cmd.id, "command": cmd.kind, "source": cmd.source, "outcome": f"nothing done: {why}"}
        step.events.append(("command-applied", data))
        return step
    if cmd.target:
        return scheduler.command(scheduler.step_of(state), cmd)
    step = scheduler.step_of(state).absorb(engine.commands(state, [cmd], sources, now))
    return scheduler.after_loop_command(step, [cmd.kind], cmd.reason)


def unconfirmed(state: LoopState, listed: Sequence[str], now: datetime) -> Step | None:
    """The loop's file names values nobody here confirmed: a running loop waits for a person
    (the engine's rule, as for the runner); None when there is nothing to change."""
    result = engine.hold_unconfirmed(state, listed, now)
    return scheduler.step_of(state).absorb(result) if result.state is not None else None


def escalate(state: LoopState, kind: str, reason: str, now: datetime) -> Step:
    return scheduler.step_of(state).absorb(engine.escalate(state, kind, reason, now))


def interrupt(state: LoopState, pause: bool, reason: str, now: datetime) -> Step:
    """SIGINT (pause) or SIGTERM (stop) to the driver: the engine decides, the workers end and
    give their tasks back."""
    return scheduler.release(scheduler.step_of(state).absorb(engine.interrupt(state, pause, reason, now)))


def headless_end(state: LoopState) -> Step:
    """Nobody is watching and the loop waits for a person: the workers end, tasks given back."""
    return scheduler.release(scheduler.step_of(state))
