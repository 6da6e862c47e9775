"""The loop of workers as a Temporal workflow: `loop.core.workflow`'s rules, carried out with
activities instead of processes and files.

The local driver (`loop.drivers.parallel`) asks the same pure functions what to do and carries
out each `Step` with processes, worktrees and the state file; this class carries out the same
steps with activities (a worker's turn, its audit, a merge, a fresh read of the graph) and keeps
the state, the board and the journal in the workflow itself. Temporal records every activity's
result in the workflow's history, and a crashed coordinator (the server, or the worker hosting
the workflow) replays that history through this same code to the same state: the rules take the
clock as an argument, and here the clock is `workflow.now()`, so a replay decides exactly what
the first run decided.

Deterministic by construction: no I/O, no wall clock, no randomness here. The rules' modules
pass through the sandbox (they are pure and import nothing that does I/O).

Who retries what: a turn whose worker is lost (killed, preempted, frozen past the heartbeat
timeout) is retried by Temporal on another worker; every other outcome of a turn (the agent
failed, changed nothing, asked, was refused a tool, hit a usage limit) comes back as data and
the loop's rules decide, as they do on one machine.
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError
from temporalio.exceptions import TimeoutError as TimedOut

with workflow.unsafe.imports_passed_through():
    from loop.core import engine, scheduler
    from loop.core import workflow as rules
    from loop.core.model import Command, LoopState, Turn
    from loop.core.redact import redact_obj
    from loop.core.scheduler import Step, Task, Update, Worker
    from loop.core.timeutil import iso_ms, parse_iso
    from loop.repo.worktrees import branch_for
    from loop.temporal import protocol
    from loop.temporal.protocol import (
        AuditInput,
        AuditOutput,
        Carried,
        CommandSignal,
        GraphInput,
        GraphOutput,
        LoopSpec,
        MergeInput,
        MergeOutput,
        TurnInput,
        TurnOutput,
    )

JOURNAL_CAP = 2000
"""Events the workflow keeps for its queries (the journal's tail; the history holds the rest)."""
FINAL_EVENTS = 300
"""Events of the journal's tail the workflow's result keeps (what `status` and `log` show of an
ended loop)."""
SHORT = timedelta(minutes=10)
"""How long a merge, an audit or a read of the graph may take."""
CARRIED_EVENTS = 300
"""Events of the journal's tail a run hands to the next when it continues as new (the queries
count from the loop's start all the same)."""


def _short(spec: LoopSpec) -> dict[str, Any]:
    """How an audit or a merge runs: on the loop's queue, short, its worker's liveness watched,
    retried (on another worker) only when that worker is lost."""
    return {
        "task_queue": spec.task_queue,
        "start_to_close_timeout": SHORT,
        "heartbeat_timeout": timedelta(seconds=max(spec.heartbeat_timeout_s, 30)),
        "retry_policy": RetryPolicy(maximum_attempts=spec.max_attempts),
    }


@workflow.defn(name=protocol.WORKFLOW_NAME)
class LoopWorkflow:
    def __init__(self) -> None:
        self.spec: LoopSpec | None = None
        self.state: LoopState | None = None
        self.tasks: list[Task] = []
        self.updates: dict[str, Update] = {}
        """Per task, the last status and owner the loop decided (what the local driver writes
        into the graph's file)."""
        self.journal: list[dict[str, Any]] = []
        self.inbox: list[CommandSignal] = []
        self.arrived: list[tuple[str, str, int, Any]] = []
        """(what, worker, turn, result) of activities that ended, in the order they ended."""
        self.turns: dict[str, asyncio.Task[None]] = {}
        self.merging: str | None = None
        self.refreshing = False
        self.graph_changed = False
        self.ended: dict[str, Any] | None = None
        self.background: set[asyncio.Task[None]] = set()
        """Merges and reads of the graph under way (held so they are never collected)."""
        self.attached = 0
        self.held: dict[str, tuple[str | None, int]] = {}
        """Role (`agent`, `fallback`) → until when a usage limit holds it (ISO), and the limits in
        a row that did not say when they reset: the runner's `Backend`, as data."""
        self.names: dict[str, str] = {}
        """Role → its CLI's name, as the workers' turns said it (for the journal)."""
        self.role = "agent"
        """The role of the agent the last turn started with."""
        self.outputs: dict[str, str] = {}
        """Worker → its last turn's final words, for an audit agent."""
        self.tails: dict[str, dict[str, Any]] = {}
        """Worker → its last ended turn's last lines, while it is on the board (waiting for its
        audit, its merge or a person): a monitor opened after the turn ended shows them (the
        heartbeats of a turn under way are read from the server)."""
        self.audits: dict[str, list[str]] = {}
        """Worker → the files its branch changed, while its audit is due or under way."""
        self.draining = False
        """This run continues as new once no activity is under way: nothing new starts."""
        self.refresh_wanted = False
        self.runs = 1
        self.turns_this_run = 0

    # --- people: signals and queries -----------------------------------------------------

    @workflow.signal(name="command")
    def command(self, cmd: CommandSignal) -> None:
        self.inbox.append(cmd)

    @workflow.signal(name="graph")
    def graph(self, tasks: list[dict[str, Any]]) -> None:
        """A `run` attaching to the loop hands in the graph as it reads it now."""
        self.tasks = [protocol.task_from(t) for t in tasks]
        self.graph_changed = True

    @workflow.query(name="snapshot")
    def snapshot(self, since: int = 0) -> dict[str, Any]:
        """The loop as the monitor, `status` and `log` read it: the state (with its board), the
        graph as the loop knows it, the journal's events after `since` (a count), the commands
        not yet applied, and the ending once there is one."""
        state = self.state
        count = len(self.journal)
        first = max(0, since - self.attached)
        return {
            "state": protocol.state_json(state) if state is not None else None,
            "tasks": [protocol.task_json(t) for t in self.known_tasks()],
            "events": self.journal[first:],
            "events_total": self.attached + count,
            "pending": [_signal_json(c) for c in self.inbox],
            "ended": self.ended,
            "remote": self.spec.remote if self.spec else "",
            "loop_branch": self.spec.loop_branch if self.spec else "",
            "task_queue": self.spec.task_queue if self.spec else "",
            "runs": self.runs,
            "tails": list(self.tails.values()),
        }

    # --- the loop ----------------------------------------------------------------------------

    @workflow.run
    async def run(self, spec: LoopSpec) -> dict[str, Any]:
        self.spec = spec
        if spec.carried is not None:
            self.take_over(Carried.from_json(spec.carried))
        else:
            self.state = protocol.state_from(spec.state)
            self.tasks = [protocol.task_from(t) for t in spec.tasks]
            self.record(
                [("loop-started", {"max_iterations": self.state.max_iterations, "engine": "temporal"})],
            )
        changed = True
        while self.ended is None:
            if not self.draining and self.continue_due():
                self.draining = True  # nothing new starts; what is under way ends first
            if self.draining and self.drained():
                break
            if not changed:
                try:
                    await workflow.wait_condition(
                        lambda: bool(self.inbox or self.arrived or self.graph_changed),
                        timeout=timedelta(seconds=spec.idle_s),
                    )
                    changed = True
                except TimeoutError:
                    changed = False  # idle: a cycle all the same (a deadlock is counted in cycles)
            changed = self.take_in() or changed
            if self.ended is not None:
                break
            if self.draining:
                changed = False
                continue
            self.merge_next()
            state = self.state
            assert state is not None
            if scheduler.cycle_due(state, changed, idle=not self.turns):
                step = self.apply(rules.cycle(state, self.known_tasks(), self.now(), self.sources()))
                if step.effects.archive is not None:
                    self.end("completed", str(step.effects.archive.get("reason", "completed")), step)
                    break
            changed = False
        if self.ended is None:
            await workflow.wait_condition(workflow.all_handlers_finished)
            workflow.continue_as_new(replace(spec, state={}, tasks=[], carried=self.carry().to_json()))
        for task in list(self.turns.values()):
            task.cancel()
        # the result carries the last picture too: an ended loop is read without a worker
        final = self.snapshot(max(0, self.attached + len(self.journal) - FINAL_EVENTS))
        return {**(self.ended or {}), "final": final}

    def now(self) -> datetime:
        return workflow.now()

    # --- continuing as new ---------------------------------------------------------------------

    def continue_due(self) -> bool:
        """This run's history is long enough: the server suggests a new run, it reached
        `HISTORY_EVENTS`, or it took the turns `turns_per_run` allows."""
        spec = self.spec
        assert spec is not None
        info = workflow.info()
        if spec.turns_per_run > 0 and self.turns_this_run >= spec.turns_per_run:
            return True
        return (
            info.is_continue_as_new_suggested()
            or info.get_current_history_length() >= protocol.HISTORY_EVENTS
        )

    def drained(self) -> bool:
        """No activity under way and nothing to take in: the switch loses and repeats nothing."""
        return not (self.turns or self.background or self.arrived or self.graph_changed)

    def carry(self) -> Carried:
        """Everything the next run needs (the commands not yet applied included: a signal that
        came during the switch is in `inbox`, taken in by the handler before this code ran)."""
        state = self.state
        assert state is not None
        journal = self.journal[-CARRIED_EVENTS:]
        return Carried(
            state=protocol.state_json(state),
            tasks=[protocol.task_json(t) for t in self.tasks],
            updates={task: [u.status, u.owner, dict(u.metadata)] for task, u in self.updates.items()},
            journal=journal,
            attached=self.attached + len(self.journal) - len(journal),
            inbox=[dataclasses.asdict(c) for c in self.inbox],
            held={role: [until, waits] for role, (until, waits) in self.held.items()},
            audits=dict(self.audits),
            outputs=dict(self.outputs),
            tails=dict(self.tails),
            refresh=self.refresh_wanted,
            runs=self.runs + 1,
            role=self.role,
        )

    def take_over(self, carried: Carried) -> None:
        """The last run's loop, as it handed it over; the turns and audits it had due start now
        (the board says which), merges and reads of the graph as the loop goes on."""
        self.state = protocol.state_from(carried.state)
        self.tasks = [protocol.task_from(t) for t in carried.tasks]
        self.updates = {
            task: Update(
                task,
                str(v[0]),
                v[1] if isinstance(v[1], str) else None,
                v[2] if len(v) > 2 and isinstance(v[2], dict) else {},  # a run before metadata: none
            )
            for task, v in carried.updates.items()
        }
        self.journal = list(carried.journal)
        self.attached = carried.attached
        self.inbox = [CommandSignal(**c) for c in carried.inbox]
        self.held = {role: (v[0], int(v[1])) for role, v in carried.held.items()}
        self.audits = {name: list(files) for name, files in carried.audits.items()}
        self.outputs = dict(carried.outputs)
        self.tails = dict(carried.tails)
        self.runs = carried.runs
        self.role = carried.role
        board = scheduler.board_of(self.state)
        for worker in board.workers:
            if worker.status == scheduler.RUNNING:
                self.launch(worker)
            elif worker.status == scheduler.AUDITING:
                self.start_audit(worker, self.audits.get(worker.name, []))
        if carried.refresh:
            self.refresh_graph()

    def sources(self) -> Any:
        return protocol.graph_sources(self.known_tasks(), "the task graph", iso_ms(self.now()))

    def known_tasks(self) -> list[Task]:
        return protocol.overlay(self.tasks, self.updates)

    def take_in(self) -> bool:
        """The commands, then the activities that ended, in order. True when anything did."""
        changed = False
        while self.inbox:
            signal = self.inbox.pop(0)
            self.apply_command(_command(signal))
            changed = True
            if self.over():
                return True
        if self.graph_changed:
            self.graph_changed = False
            changed = True
        while self.arrived:
            what, name, turn, result = self.arrived.pop(0)
            changed = True
            if what == "turn":
                self.on_turn(name, turn, result)
            elif what == "audit":
                self.on_audit(name, turn, result)
            elif what == "merge":
                self.on_merge(name, result)
            elif what == "graph":
                self.on_graph(result)
            if self.over():
                return True
        return changed

    def apply_command(self, cmd: Command) -> None:
        state = self.state
        assert state is not None
        step = self.apply(rules.command(state, cmd, self.sources(), self.now()))
        if step.effects.archive is not None:
            self.end("completed", str(step.effects.archive.get("reason", "forced")), step)

    def over(self) -> bool:
        state = self.state
        if self.ended is None and state is not None and state.status in ("stopped", "completed", "failed"):
            self.end(state.status, str((state.waiting_for or {}).get("reason") or state.status), None)
        return self.ended is not None

    def end(self, outcome: str, reason: str, step: Step | None) -> None:
        state = self.state
        assert state is not None
        summary = None
        if step is not None:
            summary = step.effects.archive or step.effects.summary
        self.ended = {
            "outcome": outcome,
            "reason": reason,
            "iteration": state.iteration,
            "summary": redact_obj(dict(summary or {})),
        }

    # --- carrying out a step ---------------------------------------------------------------

    def apply(self, step: Step) -> Step:
        """What the local driver does with a step, here: the state and journal first, then the
        graph (the overlay), then the workers' turns ended and started."""
        new = step.seal()
        self.state = new
        self.record(
            [("command-applied", _applied(c, o)) for c, o in step.applied] + list(step.events),
        )
        for update in step.updates:
            self.updates[update.task] = update
        for name in step.end:
            running = self.turns.pop(name, None)
            if running is not None:
                running.cancel()
        for worker in step.start:
            self.launch(worker)
        on_board = {w.name for w in step.board.workers}
        self.tails = {name: tail for name, tail in self.tails.items() if name in on_board}
        return step

    def record(self, events: list[tuple[str, dict[str, Any]]]) -> None:
        state = self.state
        ts = iso_ms(self.now())
        for kind, data in events:
            self.journal.append(
                {
                    "ts": ts,
                    "kind": kind,
                    "iteration": state.iteration if state is not None else None,
                    "data": redact_obj(dict(data)),
                }
            )
        if len(self.journal) > JOURNAL_CAP:
            drop = len(self.journal) - JOURNAL_CAP
            del self.journal[:drop]
            self.attached += drop

    def set_worker(self, worker: Worker) -> None:
        state = self.state
        assert state is not None
        self.state = scheduler.keep(state.copy(), scheduler.board_of(state).put(worker))

    # --- a worker's turn ---------------------------------------------------------------------

    def launch(self, worker: Worker) -> None:
        spec, state = self.spec, self.state
        assert spec is not None and state is not None
        if self.draining:
            return  # the board holds it as running: the next run starts its turn
        task = next((t for t in self.known_tasks() if t.id == worker.task), None)
        task = task or Task(worker.task, worker.task, target_files=worker.files)
        branch = worker.branch or branch_for(spec.loop_name, worker.task)
        if worker.branch != branch:
            worker = replace(worker, branch=branch)
            self.set_worker(worker)
        role, command, fmt, fallback = self.agent_for_turn()
        turn = TurnInput(
            workflow_id=spec.workflow_id,
            worker=worker.name,
            task=worker.task,
            turn=worker.turns,
            prompt=scheduler.worker_prompt(state.prompt, task, worker),
            remote=spec.remote,
            loop_branch=spec.loop_branch,
            branch=branch,
            agent=command,
            agent_format=fmt,
            timeout_s=spec.turn_timeout_s,
            files=list(task.target_files),
            rework=worker.rework,
            role=role,
            fallback=fallback,
            fallback_format=spec.fallback_format if fallback else None,
        )
        self.turns_this_run += 1
        self.turns[worker.name] = asyncio.create_task(self.run_turn(turn))

    # --- which agent: the first choice, or the fallback while a usage limit holds it -----------

    def until(self, role: str) -> datetime | None:
        held = self.held.get(role)
        return parse_iso(held[0]) if held and held[0] else None

    def agent_for_turn(self) -> tuple[str, str, str | None, str | None]:
        """(role, command, format, the fallback to turn to within the turn): the engine's choice
        of agent, as the runner's, on the limits the workers' turns reported."""
        spec = self.spec
        assert spec is not None
        roles = ["agent", "fallback"] if spec.fallback_agent else ["agent"]
        now = self.now()
        chosen = engine.agent_for_turn([self.until(r) for r in roles], roles.index(self.role), now)
        role = roles[chosen if chosen is not None else 0]
        if role != self.role:
            back = role == "agent"
            name, other = self.names.get(role, role), self.names.get(self.role, self.role)
            why = f"the usage limit of {name} reset" if back else f"{other} is held"
            self.record([("agent-switched", {"from": other, "to": name, "role": role, "reason": why})])
            self.role = role
        if role == "fallback":
            return role, str(spec.fallback_agent), spec.fallback_format, None
        free = spec.fallback_agent if len(roles) > 1 and chosen is not None else None
        if free is not None and (until := self.until("fallback")) is not None and now < until:
            free = None
        return role, spec.agent, spec.agent_format, free

    def on_limits(self, name: str, out: TurnOutput) -> TurnOutput:
        """The usage limits a turn met, noted (until when each agent is held); the agent that
        took the turn over journaled. A turn every agent was limited in waits for the earliest
        reset."""
        now = self.now()
        for limit in out.limits:
            role = str(limit.get("role") or "agent")
            waits = self.held.get(role, (None, 0))[1]
            until, waits = engine.limit_until(limit.get("resets_at"), waits, now)
            self.held[role] = (until.isoformat(), waits)
            self.names[role] = str(limit.get("agent") or role)
        if out.agent_name:
            self.names[out.role] = out.agent_name
        if out.limited is None:
            self.held[out.role] = (None, 0) if out.role not in self.held else (self.held[out.role][0], 0)
            if out.limits:
                last = out.limits[-1]
                held = self.held.get(str(last.get("role")), (None, 0))[0]
                self.record(
                    [
                        (
                            "agent-switched",
                            {
                                "from": str(last.get("agent") or last.get("role")),
                                "to": out.agent_name or out.role,
                                "role": out.role,
                                "reason": f"{last.get('agent')} hit a usage limit ({last.get('reason')}); "
                                f"back after {held}",
                                "until": held,
                                "worker": name,
                            },
                        )
                    ]
                )
                self.role = out.role
            return out
        if len(self.held) > 1 or (self.spec is not None and self.spec.fallback_agent):
            untils = [u for u in (self.until(r) for r in self.held) if u is not None]
            if untils:
                return replace(out, resets_at=min(untils).isoformat())
        return out

    async def run_turn(self, turn: TurnInput) -> None:
        spec = self.spec
        assert spec is not None
        try:
            result: Any = await workflow.execute_activity(
                "loopdeck.turn",
                turn,
                result_type=TurnOutput,
                task_queue=protocol.turns_queue(spec.task_queue),
                start_to_close_timeout=timedelta(seconds=spec.turn_timeout_s + 120),
                heartbeat_timeout=timedelta(seconds=spec.heartbeat_timeout_s),
                retry_policy=RetryPolicy(
                    initial_interval=timedelta(seconds=1),
                    maximum_interval=timedelta(seconds=30),
                    maximum_attempts=spec.max_attempts,
                ),
            )
        except ActivityError as exc:
            if _cancelled(exc):
                return  # its worker was stopped, skipped or replaced: nothing to hear
            cause = str(exc.cause) if exc.cause is not None else str(exc)
            lost = isinstance(exc.cause, TimedOut)  # no heartbeat, or out of time: the worker
            result = TurnOutput(
                turn.worker,
                turn.task,
                turn.turn,
                failure=(
                    f"the turn was lost on {spec.max_attempts} workers: {cause}"
                    if lost
                    else f"the turn could not be done on its worker: {cause}"
                )[-400:],
                error="worker lost" if lost else "turn failed",
            )
        except asyncio.CancelledError:
            return
        self.arrived.append(("turn", turn.worker, turn.turn, result))

    def on_turn(self, name: str, turn: int, out: TurnOutput) -> None:
        state = self.state
        assert state is not None
        worker = scheduler.board_of(state).worker(name)
        self.turns.pop(name, None)
        if out.lines is not None and turn >= int(self.tails.get(name, {}).get("turn", 0)):
            self.tails[name] = out.lines
        if worker is None or worker.turns != turn or worker.status != scheduler.RUNNING:
            return  # a turn the loop stopped waiting for (skipped, stopped, replaced)
        out = self.on_limits(name, out)
        self.outputs[name] = out.text
        facts = Turn(
            failure=out.failure,
            error=out.error,
            usage=out.usage,
            limited=out.limited,
            resets_at=out.resets_at,
            denied=tuple(out.denied),
            denied_hint=out.denied_hint,
        )
        step = self.apply(
            rules.worker_turn_ended(
                state,
                facts,
                worker=worker,
                output=out.text,
                touched=out.changed,
                changed=bool(out.changed) and not out.note,
                note=out.note,
                asked=out.question,
                exit_code=out.exit_code,
                duration_s=out.duration_s,
                now=self.now(),
            )
        )
        after = step.board.worker(name)
        if after is not None and after.status == scheduler.AUDITING:
            self.start_audit(after, list(out.changed))

    def start_audit(self, worker: Worker, changed: list[str]) -> None:
        spec, state = self.spec, self.state
        assert spec is not None and state is not None
        board = scheduler.board_of(state)
        command = scheduler.audit_for(board)
        if command is None or worker.branch is None:  # nothing to audit on: approved as it is
            self.apply(rules.audited(state, worker.name, True, "", self.now()))
            return
        self.audits[worker.name] = changed
        if self.draining:
            return  # the next run starts it (the board says the worker is auditing)
        agent = board.audit_kind == "agent"
        task = next((t for t in self.known_tasks() if t.id == worker.task), None)
        task = task or Task(worker.task, worker.task, target_files=worker.files)
        audit = AuditInput(
            remote=spec.remote,
            loop_branch=spec.loop_branch,
            branch=worker.branch,
            command=command,
            allow=list(spec.verify_allow),
            worker=worker.name,
            task=worker.task,
            files=list(worker.files),
            changed=changed,
            kind="agent" if agent else "check",
            task_json=protocol.task_json(task) if agent else None,
            output=self.outputs.get(worker.name, "") if agent else "",
        )
        self.turns[worker.name] = asyncio.create_task(self.run_audit(audit, worker.turns))

    async def run_audit(self, audit: AuditInput, turn: int) -> None:
        spec = self.spec
        assert spec is not None
        try:
            result: Any = await workflow.execute_activity(
                "loopdeck.audit",
                audit,
                result_type=AuditOutput,
                **_short(spec),
            )
        except ActivityError as exc:
            if _cancelled(exc):
                return
            result = AuditOutput(False, f"the audit could not run: {exc.cause or exc}")
        except asyncio.CancelledError:
            return
        self.arrived.append(("audit", audit.worker, turn, result))

    def on_audit(self, name: str, turn: int, out: AuditOutput) -> None:
        state = self.state
        assert state is not None
        worker = scheduler.board_of(state).worker(name)
        self.turns.pop(name, None)
        if worker is None or worker.turns != turn or worker.status != scheduler.AUDITING:
            return
        self.audits.pop(name, None)
        self.outputs.pop(name, None)
        said = "" if out.exit_code is None else f" (exit {out.exit_code})"
        feedback = f"AUDIT REJECTED YOUR WORK{said}:\n{out.output[-3000:]}"
        self.apply(rules.audited(state, name, out.approved, feedback, self.now()))

    # --- the merge queue -----------------------------------------------------------------------

    def merge_next(self) -> None:
        """One merge at a time, as locally: the queue's first branch, merged into the loop's
        branch on the remote by whichever worker takes it."""
        spec, state = self.spec, self.state
        assert spec is not None and state is not None
        worker = scheduler.next_merge(state) if self.merging is None and not self.draining else None
        if worker is None or worker.branch is None:
            return
        self.merging = worker.name
        merge = MergeInput(
            workflow_id=spec.workflow_id,
            remote=spec.remote,
            loop_branch=spec.loop_branch,
            branch=worker.branch,
            task=worker.task,
            worker=worker.name,
            message=f"loopdeck: merge task {worker.task} ({worker.branch})",
            verify=list(state.verify),
            verify_allow=list(spec.verify_allow),
            graph=spec.graph,
        )
        self.hold(asyncio.create_task(self.run_merge(merge)))

    async def run_merge(self, merge: MergeInput) -> None:
        spec = self.spec
        assert spec is not None
        try:
            result: Any = await workflow.execute_activity(
                "loopdeck.merge",
                merge,
                result_type=MergeOutput,
                **_short(spec),
            )
        except ActivityError as exc:
            result = MergeOutput(False, problem=f"the merge could not be done: {exc.cause or exc}")
        self.arrived.append(("merge", merge.worker, 0, result))

    def on_merge(self, name: str, out: MergeOutput) -> None:
        state = self.state
        assert state is not None
        self.merging = None
        worker = scheduler.board_of(state).worker(name)
        if worker is None or worker.status != scheduler.QUEUED:
            return
        self.apply(
            rules.merge_ended(
                state,
                name,
                sha=out.sha,
                problem=out.problem,
                conflicts=out.conflicts,
                hunks=out.hunks,
                failure=out.failure,
                validation=out.validation,
                now=self.now(),
            )
        )
        merged = out.problem is None and not out.conflicts and out.failure is None
        if merged and out.graph_changed:  # a worker added or changed tasks: the graph is read again
            self.refresh_graph()

    # --- the graph --------------------------------------------------------------------------

    def refresh_graph(self) -> None:
        spec = self.spec
        assert spec is not None
        if not spec.graph or self.refreshing:
            return
        if self.draining:
            self.refresh_wanted = True  # read in the next run
            return
        self.refresh_wanted = False
        self.refreshing = True
        self.hold(
            asyncio.create_task(self.run_refresh(GraphInput(spec.remote, spec.loop_branch, spec.graph)))
        )

    def hold(self, task: asyncio.Task[None]) -> None:
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    async def run_refresh(self, ask: GraphInput) -> None:
        spec = self.spec
        assert spec is not None
        try:
            result: Any = await workflow.execute_activity(
                "loopdeck.graph",
                ask,
                result_type=GraphOutput,
                task_queue=spec.task_queue,
                start_to_close_timeout=SHORT,
                retry_policy=RetryPolicy(maximum_attempts=3),
            )
        except ActivityError as exc:
            result = GraphOutput(None, problem=f"the task graph was not read again: {exc.cause or exc}")
        self.arrived.append(("graph", "", 0, result))

    def on_graph(self, out: GraphOutput) -> None:
        self.refreshing = False
        if out.problem:
            self.record([("warning", {"message": out.problem})])
        if out.tasks:
            self.tasks = [protocol.task_from(t) for t in out.tasks]


def _command(signal: CommandSignal) -> Command:
    return Command(
        id=signal.id,
        ts=signal.ts,
        kind=signal.kind,
        source=signal.source,
        reason=signal.reason,
        value=signal.value,
        target=signal.target,
        # A signal reaches the workflow only through the Temporal server, whose access is the
        # boundary here; `loopdeck` sends none of the person-only ones inside an agent's session.
        person=True,
    )


def _signal_json(signal: CommandSignal) -> dict[str, Any]:
    obj: dict[str, Any] = redact_obj(_command(signal).to_json())
    return obj


def _applied(command: Command, outcome: str) -> dict[str, Any]:
    return {"id": command.id, "command": command.kind, "source": command.source, "outcome": outcome}


def _cancelled(exc: ActivityError) -> bool:
    from temporalio.exceptions import CancelledError

    return isinstance(exc.cause, CancelledError)
