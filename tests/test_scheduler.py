"""The parallel loop's rules as pure functions on a fixed clock: the workers' (the scheduler)
and the loop's (the engine), composed as the drivers ask them (`loop.core.workflow`)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from loop.core import board, scheduler, workflow
from loop.core.model import Command, LoopState, Turn
from loop.core.scheduler import Board, Task, TurnEnd, Worker
from loop.sources import taskgraph as graph

NOW = datetime(2026, 1, 9, 10, 30, tzinfo=UTC)
T0 = "2026-01-09T10:00:00+00:00"


def loop(board: Board | None = None, **values: object) -> LoopState:
    state = LoopState.new("Build it", started_at=T0, **values)
    scheduler.keep(state, (board or Board(graph="g", capacity=4)))
    return state


def t(
    ident: str, *blocked: str, files: tuple[str, ...] = (), status: str = "pending", owner: str | None = None
) -> Task:
    return Task(ident, f"task {ident}", status=status, owner=owner, blocked_by=blocked, target_files=files)


def w(name: str, task: str, *files: str, **values: object) -> Worker:
    return Worker(name, task, files, T0, **values)  # type: ignore[arg-type]


def ended(state: LoopState, worker: str, facts: Turn | None = None, *, changed: bool = True, **more: object):
    """A worker's turn ended with these facts, as the driver reports it."""
    board = scheduler.board_of(state)
    task = board.worker(worker).task  # type: ignore[union-attr]
    end = TurnEnd(worker, "", str(more.get("output", "done")), changed=("a.py",) if changed else ())
    return workflow.turn(
        state,
        facts or Turn(),
        worker=worker,
        task=task,
        changed=changed,
        asked=more.get("asked"),  # type: ignore[arg-type]
        end=end,
        now=NOW,
    )


# --- the workers' rules ----------------------------------------------------------------------


def test_ready_needs_pending_no_owner_and_completed_blockers() -> None:
    tasks = [
        t("1", status="completed"),
        t("2", "1"),
        t("3", "2"),
        t("4", owner="worker-9"),
        t("5", "missing"),
        t("6", status="in_progress"),
    ]
    assert [x.id for x in scheduler.ready(tasks)] == ["2"]


def test_a_cycle_starts_up_to_capacity_and_defers_file_conflicts() -> None:
    tasks = [
        t("1", files=("src/api.py",)),
        t("2", files=("./src/api.py",)),
        t("3", files=("b",)),
        t("4"),
        t("5"),
    ]
    step = workflow.cycle(loop(Board(graph="g", capacity=3)), tasks, NOW, None)
    assert [w.task for w in step.start] == ["1", "3", "4"]
    assert [(u.task, u.status, u.owner) for u in step.updates] == [
        ("1", "in_progress", "worker-1"),
        ("3", "in_progress", "worker-2"),
        ("4", "in_progress", "worker-3"),
    ]
    deferred = [d for k, d in step.events if k == "task-deferred"]
    assert deferred[0]["line"] == "Task 2 deferred — file conflict with worker-1 on ./src/api.py"
    assert step.board.locks() == {"src/api.py": "worker-1", "b": "worker-2"}
    assert step.state.iteration == 3  # every turn started is one of the loop's iterations


def test_a_branch_waiting_for_the_merge_train_frees_its_workers_slot() -> None:
    """Two slots: one worker's branch is queued for the train, one worker runs. A new task
    starts in the queued one's slot; a rework waiting to be admitted takes a free slot first."""
    queued = w("worker-1", "1", "a.py", status=scheduler.QUEUED, branch="b1")
    running = w("worker-2", "2", "b.py", status=scheduler.RUNNING)
    board = Board(graph="g", capacity=2, workers=(queued, running), queue=("worker-1",), serial=2)
    tasks = [
        t("1", status="in_progress", owner="worker-1", files=("a.py",)),
        t("2", status="in_progress", owner="worker-2", files=("b.py",)),
        t("3", files=("c.py",)),
        t("4", files=("d.py",)),
    ]
    state = loop(board)
    assert scheduler.startable(state, tasks) == 1
    step = workflow.cycle(state, tasks, NOW, None)
    assert [x.task for x in step.start] == ["3"]

    rework = replace(queued, status=scheduler.READY)  # its merge failed: its next turn first
    state = loop(replace(board, workers=(rework, running), queue=()))
    step = workflow.cycle(state, tasks, NOW, None)
    assert [(x.name, x.task) for x in step.start] == [("worker-1", "1")]


def test_a_task_waiting_for_a_queued_branchs_files_is_not_a_deadlock() -> None:
    """The merge train runs beside the cycles: a task deferred on the files of a branch in
    the merge queue waits for the train, however many cycles pass."""
    queued = w("worker-1", "1", "a.py", status=scheduler.QUEUED, branch="b1")
    board = Board(graph="g", capacity=2, workers=(queued,), queue=("worker-1",), serial=1)
    tasks = [t("1", status="in_progress", owner="worker-1", files=("a.py",)), t("2", files=("a.py",))]
    state = loop(board)
    for _ in range(scheduler.DEFER_LIMIT + 2):
        step = workflow.cycle(state, tasks, NOW, None)
        assert step.needs is None and not step.start
        state = step.seal()
    assert scheduler.board_of(state).defer_streak == 0


STOP_WORKER_1 = Command("c1", T0, "stop", "cli", target="worker-1", person=True)


def test_a_green_branch_lands_only_while_it_is_queued_and_the_loop_merges() -> None:
    queued = w("worker-1", "1", "a.py", status=scheduler.QUEUED, branch="b1")
    board = Board(graph="g", capacity=2, workers=(queued,), queue=("worker-1",), serial=1)
    state = loop(board)
    assert scheduler.may_land(state, ["worker-1"])
    stopped = workflow.command(state, STOP_WORKER_1, None, NOW).seal()
    assert not scheduler.may_land(stopped, ["worker-1"])  # a person stopped it while it was checked
    state.status = "stopped"
    assert not scheduler.may_land(state, ["worker-1"])


def test_the_defer_streak_escalates_at_three_and_an_answer_resets_it() -> None:
    state = loop(Board(graph="g", capacity=4, workers=(w("worker-1", "1", "a.py"),), serial=1))
    tasks = [t("1", status="in_progress", owner="worker-1", files=("a.py",)), t("2", files=("a.py",))]
    for streak in (1, 2):
        step = workflow.cycle(state, tasks, NOW, None)
        assert step.board.defer_streak == streak and step.state.status == "running"
        state = step.seal()
    step = workflow.cycle(state, tasks, NOW, None)
    assert step.state.status == "paused"
    assert step.state.waiting_for is not None and step.state.waiting_for["escalation"] == "deadlock"
    escalation = next(d for k, d in step.events if k == "escalation")
    assert "Task 2 deferred — file conflict with worker-1 on a.py" in escalation["reason"]
    answered = workflow.command(
        step.seal(), Command("c1", "ts", "answer", "cli", reason="split it", person=True), None, NOW
    )
    assert answered.state.status == "running" and answered.board.defer_streak == 0


def test_a_dependency_deadlock_with_nobody_working_escalates() -> None:
    state = loop()
    tasks = [t("1", "2"), t("2", "1")]
    for _ in range(2):
        state = workflow.cycle(state, tasks, NOW, None).seal()
    step = workflow.cycle(state, tasks, NOW, None)
    reason = step.state.waiting_for["reason"] if step.state.waiting_for else ""
    assert "Task 1 waits for 2" in reason and "Task 2 waits for 1" in reason


def test_output_and_completion_reset_the_streak() -> None:
    state = loop(Board(graph="g", capacity=2, defer_streak=2))
    new = scheduler.output_seen(state)
    assert new is not None and scheduler.board_of(new).defer_streak == 0
    assert scheduler.output_seen(new) is None


def test_approval_outside_git_completes_and_the_owner_stays() -> None:
    state = loop(Board(graph="g", capacity=2, workers=(w("worker-1", "1", "a.py"),), serial=1), iteration=1)
    step = ended(state, "worker-1")  # no audit configured: approved by the rules themselves
    assert [(u.task, u.status, u.owner) for u in step.updates] == [("1", "completed", "worker-1")]
    assert step.board.workers == () and step.board.done == ("1",)
    done = workflow.cycle(step.seal(), [t("1", status="completed", owner="worker-1")], NOW, None)
    assert done.state.status == "completed" and done.effects.archive is not None
    assert done.effects.archive["iterations"] == 1


def test_with_worktrees_an_approved_branch_waits_in_the_merge_queue_holding_its_locks() -> None:
    board = Board(graph="g", capacity=2, isolation="worktree", loop_branch="main", serial=1)
    state = loop(replace(board, workers=(w("worker-1", "1", "a.py", branch="loopdeck/L/1"),)))
    step = ended(state, "worker-1")
    assert step.board.queue == ("worker-1",) and step.board.locks() == {"a.py": "worker-1"}
    again = workflow.audited(step.seal(), "worker-1", True, "", NOW)  # a late or repeated word
    assert again.board.queue == ("worker-1",) and again.events == []
    assert ("merge-queued", {"worker": "worker-1", "task": "1", "branch": "loopdeck/L/1"}) in step.events
    merged = workflow.merged(step.seal(), "worker-1", "abc123")
    assert merged.board.queue == () and merged.board.workers == () and merged.board.done == ("1",)
    assert [k for k, _ in merged.events] == ["task-merged", "locks-freed", "task-completed"]


def test_a_conflict_goes_back_to_the_worker_with_its_hunks_then_to_a_person() -> None:
    board = Board(graph="g", capacity=2, isolation="worktree", loop_branch="main", serial=1)
    worker = w("worker-1", "1", "a.py", branch="loopdeck/L/1", status="queued")
    state = loop(replace(board, workers=(worker,), queue=("worker-1",)))
    feedback = scheduler.conflict_feedback(["a.py"], "<<<<<<< HEAD\nx\n=======\ny\n>>>>>>> b\n")
    step = workflow.merge_failed(state, "worker-1", "conflict in a.py", feedback, True, NOW)
    again = step.board.workers[0]
    assert (again.status, again.rework, again.conflicts, again.turns) == ("ready", "conflict", 1, 2)
    assert "MERGE CONFLICT" in (again.feedback or "") and "- a.py" in (again.feedback or "")
    assert step.board.queue == ()
    state = step.seal()
    for _ in range(2):
        state = workflow.merge_failed(
            scheduler.keep(state, replace(scheduler.board_of(state), queue=("worker-1",))),
            "worker-1",
            "conflict in a.py",
            feedback,
            True,
            NOW,
        ).seal()
    assert state.status == "paused" and (state.waiting_for or {}).get("escalation") == "merge-conflict"


def test_a_rework_runs_only_when_the_engine_admits_it() -> None:
    """Every turn is an iteration: a rerun waits for its admission like a new worker."""
    state = loop(Board(graph="g", capacity=2, workers=(w("worker-1", "1", "a.py"),), serial=1), iteration=3)
    step = ended(state, "worker-1", changed=False)
    assert step.start == [] and step.board.workers[0].status == "ready"
    limited = step.seal().copy()
    limited.max_iterations = 3
    held = workflow.cycle(limited, [t("1", status="in_progress", owner="worker-1")], NOW, None)
    assert held.start == [] and held.state.status == "paused"
    assert (held.state.waiting_for or {}).get("escalation") == "max-iterations"
    go = workflow.cycle(step.seal(), [t("1", status="in_progress", owner="worker-1")], NOW, None)
    assert [x.name for x in go.start] == ["worker-1"] and go.state.iteration == 4


def test_a_turn_that_changes_nothing_is_never_approved_and_stalls_replace_the_worker() -> None:
    """`--stuck-after 3` turns that change nothing replace the worker (the runner's threshold)."""
    state = loop(Board(graph="g", capacity=2, workers=(w("worker-1", "1", "a.py"),), serial=1))
    state.limits = {"stuck_after": 3}
    for turn in (2, 3):
        step = ended(state, "worker-1", changed=False)
        assert step.board.workers[0].turns == turn and step.board.workers[0].status == "ready"
        assert "changed no file" in (step.board.workers[0].feedback or "")
        state = scheduler.keep(
            step.seal(), replace(step.board, workers=(replace(step.board.workers[0], status="running"),))
        )
    step = ended(state, "worker-1", changed=False)
    assert [k for k, _ in step.events][-3:] == ["worker-replaced", "locks-freed", "worker-started"]
    assert step.board.workers[0].name == "worker-2" and step.updates[0].owner == "worker-2"


def test_the_same_audit_rejection_again_and_again_counts_as_no_progress() -> None:
    state = loop(
        Board(graph="g", capacity=2, workers=(w("worker-1", "1", "a.py", status="auditing"),), serial=1)
    )
    for _ in range(3):  # the first rejection is news; two more the same (--stuck-after 2) are not
        step = workflow.audited(state, "worker-1", False, "REJECTED: same", NOW)
        worker = step.board.workers[0]
        state = scheduler.keep(
            step.seal(), replace(step.board, workers=(replace(worker, status="auditing"),))
        )
    assert any(k == "worker-replaced" for k, _ in step.events)


# --- the loop's rules, for workers as for every driver -------------------------------------------


def test_a_workers_cost_counts_and_the_budget_escalates() -> None:
    state = loop(Board(graph="g", capacity=2, workers=(w("worker-1", "1", "a.py"),), serial=1))
    state.limits = {"max_cost_micro_usd": 100_000}
    step = ended(state, "worker-1", Turn(usage={"cost_micro_usd": 4_200_000}))
    assert step.state.usage["cost_micro_usd"] == 4_200_000
    assert step.state.status == "paused" and (step.state.waiting_for or {}).get("escalation") == "max-cost"
    assert workflow.cycle(step.seal(), [t("2")], NOW, None).start == []


def test_refused_tools_are_never_approved_and_escalate_naming_them() -> None:
    state = loop(Board(graph="g", capacity=2, workers=(w("worker-1", "1", "a.py"),), serial=1))
    step = ended(state, "worker-1", Turn(denied=("Bash", "Edit"), denied_hint="allow them"))
    assert step.board.workers[0].status == "held"
    assert step.state.status == "paused" and "Bash, Edit" in (step.state.waiting_for or {}).get("reason", "")


def test_a_usage_limit_makes_every_worker_wait_and_spends_no_turn() -> None:
    state = loop(Board(graph="g", capacity=3, workers=(w("worker-1", "1", "a.py"),), serial=1), iteration=1)
    resets = (NOW + timedelta(hours=1)).isoformat()
    step = ended(state, "worker-1", Turn(limited="usage limit reached", resets_at=resets))
    assert step.state.iteration == 0 and step.board.workers[0].status == "ready"  # the same turn, later
    assert (step.state.waiting_for or {}).get("kind") == "usage-limit"
    tasks = [t("1", status="in_progress", owner="worker-1"), t("2"), t("3")]
    assert workflow.cycle(step.seal(), tasks, NOW, None).start == []  # nobody starts before the reset
    later = workflow.cycle(step.seal(), tasks, NOW + timedelta(hours=2), None)
    assert [x.task for x in later.start] == ["1", "2", "3"] and later.start[0].turns == 1
    assert any(k == "limit-lifted" for k, _ in later.events)


def test_the_same_error_from_workers_escalates() -> None:
    state = loop(Board(graph="g", capacity=2, workers=(w("worker-1", "1", "a.py"),), serial=1))
    for _ in range(3):
        step = ended(state, "worker-1", Turn(failure="exit 1: boom", error="exit 1: boom"))
        worker = step.board.workers[0]
        state = scheduler.keep(step.seal(), replace(step.board, workers=(replace(worker, status="running"),)))
    assert step.state.status == "paused" and "same error" in (step.state.waiting_for or {}).get("reason", "")


def test_a_question_pauses_that_worker_only() -> None:
    state = loop(Board(graph="g", capacity=2, workers=(w("worker-1", "1", "a.py"),), serial=1))
    step = ended(state, "worker-1", asked="SQLite?")
    assert step.state.status == "running" and step.board.workers[0].status == "question"
    assert ("question", {"question": "SQLite?", "worker": "worker-1", "task": "1"}) in step.events
    answered = workflow.command(
        step.seal(),
        Command("c", "ts", "answer", "tui", reason="yes", target="worker-1", person=True),
        None,
        NOW,
    )
    assert (
        answered.board.workers[0].feedback
        == "A PERSON ANSWERED YOUR QUESTION:\nyes\n(The question was: SQLite?)"
    )
    assert answered.board.workers[0].status == "ready"


def test_loop_commands_mean_the_same_for_workers() -> None:
    state = loop(Board(graph="g", capacity=2, workers=(w("worker-1", "1", "a.py"),), serial=1), iteration=5)
    bumped = workflow.command(
        state, Command("m", "ts", "set-max-iterations", "cli", value=7, person=True), None, NOW
    )
    assert bumped.state.max_iterations == 7
    paused = workflow.command(state, Command("p", "ts", "pause", "cli", person=True), None, NOW)
    assert paused.state.status == "paused" and workflow.cycle(paused.seal(), [t("2")], NOW, None).start == []
    stopped = workflow.command(state, Command("s", "ts", "stop", "cli", person=True), None, NOW)
    assert stopped.state.status == "stopped" and stopped.end == ["worker-1"]
    assert stopped.effects.summary is not None and stopped.effects.summary["iterations"] == 5
    forced = workflow.command(state, Command("c", "ts", "complete", "cli", person=True), None, NOW)
    assert forced.state.status == "completed" and forced.effects.archive is not None


def test_worker_commands_skip_and_stop() -> None:
    state = loop(
        Board(
            graph="g", capacity=2, workers=(w("worker-1", "1", "a.py"), w("worker-2", "2", "b.py")), serial=2
        )
    )
    skip = workflow.command(
        state, Command("c", "ts", "skip", "tui", target="worker-1", person=True), None, NOW
    )
    assert skip.end == ["worker-1"] and skip.updates[0].status == "completed"
    stop = workflow.command(
        skip.seal(), Command("d", "ts", "stop", "tui", target="worker-2", person=True), None, NOW
    )
    assert stop.end == ["worker-2"] and (stop.updates[0].status, stop.updates[0].owner) == ("pending", None)
    assert stop.board.workers == ()


def test_a_skip_that_names_no_worker_skips_the_only_ones_task_and_among_several_says_so() -> None:
    """ "The current task" of a loop of workers: the only worker's, else nobody's (which?)."""
    one = loop(Board(graph="g", capacity=2, workers=(w("worker-1", "1", "a.py"),), serial=1))
    skip = workflow.command(one, Command("c", "ts", "skip", "cli", person=True), None, NOW)
    assert skip.end == ["worker-1"] and ("task-skipped", {"task": "1", "worker": "worker-1"}) in skip.events
    two = loop(
        Board(
            graph="g", capacity=2, workers=(w("worker-1", "1", "a.py"), w("worker-2", "2", "b.py")), serial=2
        )
    )
    why = workflow.unaimed(two, "skip", None)
    assert (
        why
        == "2 workers hold tasks, worker-1 (task 1), worker-2 (task 2): skip one's task with --worker NAME"
    )
    none = workflow.command(two, Command("c", "ts", "skip", "cli", person=True), None, NOW)
    assert none.end == [] and none.board == scheduler.board_of(two) and none.updates == []
    assert none.events == [
        (
            "command-applied",
            {"id": "c", "command": "skip", "source": "cli", "outcome": f"nothing done: {why}"},
        )
    ]
    assert workflow.unaimed(two, "skip", "worker-2") is None and workflow.unaimed(two, "pause", None) is None
    verifying = loop(scheduler.board_of(two), verification_mode=True)
    assert workflow.unaimed(verifying, "skip", None) is None  # a verification loop is skipped


def test_a_task_nobody_could_move_escalates_and_resume_gives_it_another_go() -> None:
    worker = w("worker-3", "1", "a.py", stalls=2, replaced=2)
    state = loop(Board(graph="g", capacity=2, workers=(worker,), serial=3))
    step = ended(state, "worker-3", changed=False)
    assert step.state.status == "paused" and (step.state.waiting_for or {}).get("escalation") == "stuck"
    assert step.board.workers[0].status == "stalled" and step.start == []
    resumed = workflow.command(
        step.seal(), Command("r", "ts", "resume", "cli", reason="mock the clock", person=True), None, NOW
    )
    assert resumed.state.status == "running"
    assert resumed.board.workers[0].feedback == "A PERSON LOOKED AT IT:\nmock the clock"
    assert resumed.board.workers[0].status == "ready"


def test_waiting_for_an_answer_is_not_spinning() -> None:
    asking = w("worker-1", "1", "a.py", status="question", question="?")
    state = loop(Board(graph="g", capacity=2, workers=(asking,), serial=1))
    tasks = [t("1", status="in_progress", owner="worker-1", files=("a.py",)), t("2", "1")]
    for _ in range(4):
        step = workflow.cycle(state, tasks, NOW, None)
        state = step.seal()
    assert step.state.status == "running" and step.board.defer_streak == 0


def test_a_task_its_worker_marked_completed_blocks_until_it_is_done() -> None:
    state = loop(Board(graph="g", capacity=2, workers=(w("worker-1", "1", "a.py"),), serial=1))
    tasks = [t("1", status="completed", owner="worker-1", files=("a.py",)), t("2", "1", files=("b.py",))]
    step = workflow.cycle(state, tasks, NOW, None)
    assert step.start == [] and step.state.status == "running"


def test_after_a_crash_the_states_word_goes_back_into_the_graph() -> None:
    """The state is written before the graph: a task the state says was completed is completed
    in the graph again, and one a lost worker owned is pending again (never run twice)."""
    state = loop(Board(graph="g", capacity=2, done=("1",), serial=3))
    tasks = [
        t("1", status="in_progress", owner="worker-1"),
        t("2", status="in_progress", owner="worker-2"),
        t("3"),
    ]
    step = scheduler.reconcile(scheduler.step_of(state), tasks)
    assert [(u.task, u.status) for u in step.updates] == [("1", "completed"), ("2", "pending")]
    cycle = workflow.cycle(state, tasks, NOW, None)
    assert "1" not in {x.task for x in cycle.start}


def test_a_skip_the_graph_missed_in_a_crash_comes_back_skipped_not_done() -> None:
    """The state holds the skip, the graph still has the worker's task in progress (the runner
    was killed between the two writes): the task goes back into the graph skipped, and is
    counted so meanwhile."""
    state = loop(Board(graph="g", capacity=2, workers=(w("worker-1", "1", "a.py"),), serial=1))
    skip = workflow.command(
        state, Command("c", "ts", "skip", "tui", target="worker-1", person=True), None, NOW
    )
    after = Board.from_json(skip.board.to_json())  # as the next run reads it
    assert after.skipped == ("1",) and after.done == ("1",)
    tasks = [t("1", status="in_progress", owner="worker-1"), t("2")]
    step = scheduler.reconcile(scheduler.step_of(skip.seal()), tasks)
    assert [(u.task, u.status, dict(u.metadata)) for u in step.updates] == [
        ("1", "completed", {"skipped": True})
    ]
    assert [x.skipped for x in board.as_held(tasks, after)] == [True, False]
    marked = [t("1", status="completed", owner="worker-1"), t("2")]  # its worker marked it done first
    step = scheduler.reconcile(scheduler.step_of(skip.seal()), marked)
    assert [(u.task, u.status, dict(u.metadata)) for u in step.updates] == [
        ("1", "completed", {"skipped": True})
    ]
    assert [x.skipped for x in board.as_held(marked, after)] == [True, False]


def test_the_prompt_holds_only_its_own_task() -> None:
    task = Task("7", "Add login", "Use sessions.", target_files=("src/auth.py",))
    text = scheduler.worker_prompt("Build it", task, w("worker-3", "7", "src/auth.py"))
    assert "Your task (7): Add login" in text and "- src/auth.py" in text and "Use sessions." in text


def test_graph_round_trip_in_json_yaml_and_a_folder(tmp_path: Path) -> None:
    from loop.demo import graph as demo

    folder = demo.create(tmp_path / "list")
    (tmp_path / "g.json").write_text(
        '{"tasks": [{"id": 1, "subject": "a", "extra": 5, "metadata": {"target_files": ["x"]}}]}'
    )
    (tmp_path / "g.yaml").write_text("- id: 1\n  subject: a\n  blockedBy: []\n  target_files: [x]\n")
    for path in (folder, tmp_path / "g.json", tmp_path / "g.yaml"):
        tasks = graph.read(path)
        assert tasks[0].id == "1" and tasks[0].status == "pending"
        graph.write(path, [scheduler.Update("1", "in_progress", "worker-1")])
        again = graph.read(path)[0]
        assert (again.status, again.owner) == ("in_progress", "worker-1")
        graph.write(path, [scheduler.Update("1", "completed", None)])
        assert graph.read(path)[0].owner is None
    assert '"extra": 5' in (tmp_path / "g.json").read_text()
    assert graph.read(folder)[3].target_files == ("src/api.py", "src/validate.py")


def test_a_skipped_task_is_counted_skipped_not_done_until_it_is_done(tmp_path: Path) -> None:
    from loop.sources.graph import of_tasks

    path = tmp_path / "g.json"
    path.write_text('[{"id": "1", "subject": "a"}, {"id": "2", "subject": "b", "status": "completed"}]')
    graph.write(path, [scheduler.Update("1", "completed", "worker-1", {"skipped": True})])
    counted = of_tasks(graph.read(path), "now", "g")
    assert (counted.done, counted.skipped) == (1, 1)
    assert [(i.title, i.status) for i in counted.items] == [("a", "skipped"), ("b", "done")]
    graph.write(path, [scheduler.Update("1", "pending", None, {"note": "again"})])  # opened again
    assert not graph.read(path)[0].skipped
    graph.write(path, [scheduler.Update("1", "completed", "worker-2", {"skipped": True})])
    graph.write(path, [scheduler.Update("1", "pending", None)])  # opened again, then done
    graph.write(path, [scheduler.Update("1", "completed", "worker-3")])
    assert not graph.read(path)[0].skipped and of_tasks(graph.read(path), "now", "g").done == 2
