"""The parallel scheduler's rules as pure functions on a fixed clock."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from loop import graph, scheduler
from loop.model import Command, LoopState
from loop.scheduler import Board, Task, TurnEnd, Worker

NOW = datetime(2026, 1, 9, 10, 30, tzinfo=UTC)


def loop(board: Board | None = None) -> LoopState:
    state = LoopState.new("Build it", started_at="2026-01-09T10:00:00+00:00")
    scheduler.keep(state, (board or Board(graph="g", capacity=4)))
    return state


def t(
    ident: str, *blocked: str, files: tuple[str, ...] = (), status: str = "pending", owner: str | None = None
) -> Task:
    return Task(ident, f"task {ident}", status=status, owner=owner, blocked_by=blocked, target_files=files)


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
    step = scheduler.cycle(loop(Board(graph="g", capacity=3)), tasks, NOW)
    assert [w.task for w in step.start] == ["1", "3", "4"]
    assert [(u.task, u.status, u.owner) for u in step.updates] == [
        ("1", "in_progress", "worker-1"),
        ("3", "in_progress", "worker-2"),
        ("4", "in_progress", "worker-3"),
    ]
    deferred = [d for k, d in step.events if k == "task-deferred"]
    assert deferred[0]["line"] == "Task 2 deferred — file conflict with worker-1 on ./src/api.py"
    assert step.board.locks() == {"src/api.py": "worker-1", "b": "worker-2"}
    assert step.board.defer_streak == 0
    section = scheduler.section_of(step.seal())
    assert section is not None and section["workers"][0]["started"] == "2026-01-09T10:30:00+00:00"


def test_the_defer_streak_escalates_at_three_and_an_answer_resets_it() -> None:
    busy = Worker("worker-1", "1", ("a.py",), "2026-01-09T10:00:00+00:00")
    state = loop(Board(graph="g", capacity=4, workers=(busy,), serial=1))
    tasks = [t("1", status="in_progress", owner="worker-1", files=("a.py",)), t("2", files=("a.py",))]
    for streak in (1, 2):
        step = scheduler.cycle(state, tasks, NOW)
        assert step.board.defer_streak == streak and step.state.status == "running"
        state = step.seal()
    step = scheduler.cycle(state, tasks, NOW)
    assert step.state.status == "paused"
    assert step.state.waiting_for is not None and step.state.waiting_for["escalation"] == "deadlock"
    escalation = next(d for k, d in step.events if k == "escalation")
    assert "Task 2 deferred — file conflict with worker-1 on a.py" in escalation["reason"]
    state = step.seal()
    answered = scheduler.command(state, Command("c1", "ts", "answer", "cli", reason="split it"), NOW)
    assert answered.state.status == "running" and answered.board.defer_streak == 0


def test_output_and_completion_reset_the_streak() -> None:
    state = loop(Board(graph="g", capacity=2, defer_streak=2))
    new = scheduler.output_seen(state)
    assert new is not None and scheduler.board_of(new).defer_streak == 0
    assert scheduler.output_seen(new) is None


def test_a_dependency_deadlock_with_nobody_working_escalates() -> None:
    state = loop()
    tasks = [t("1", "2"), t("2", "1")]
    for _ in range(2):
        state = scheduler.cycle(state, tasks, NOW).seal()
    step = scheduler.cycle(state, tasks, NOW)
    reason = step.state.waiting_for["reason"] if step.state.waiting_for else ""
    assert "Task 1 waits for 2" in reason and "Task 2 waits for 1" in reason


def test_approval_completes_frees_locks_and_completes_the_loop() -> None:
    worker = Worker("worker-1", "1", ("a.py",), "2026-01-09T10:00:00+00:00")
    state = loop(Board(graph="g", capacity=2, workers=(worker,), serial=1, defer_streak=1))
    tasks = [t("1", status="in_progress", owner="worker-1", files=("a.py",))]
    step = scheduler.turn_ended(state, tasks, TurnEnd("worker-1", 0, "done", True), NOW)
    assert [(u.task, u.status, u.owner) for u in step.updates] == [("1", "completed", None)]
    assert step.board.workers == () and step.board.defer_streak == 0
    assert step.state.status == "completed" and step.archive is not None


def test_rejection_reruns_with_feedback_and_a_stall_replaces_the_worker() -> None:
    worker = Worker("worker-1", "1", ("a.py",), "2026-01-09T10:00:00+00:00", mark="m")
    state = loop(Board(graph="g", capacity=2, workers=(worker,), serial=1))
    tasks = [t("1", status="in_progress", owner="worker-1", files=("a.py",)), t("2")]
    moved = TurnEnd("worker-1", 0, "", False, "tests fail", mark="n", before="m")
    step = scheduler.turn_ended(state, tasks, moved, NOW)
    rerun = step.start[0]
    assert (rerun.name, rerun.turns, rerun.feedback, rerun.stalls) == ("worker-1", 2, "tests fail", 0)
    assert step.board.locks() == {"a.py": "worker-1"}
    for turn in (3, 4):  # two turns that change nothing: still the same worker
        step = scheduler.turn_ended(step.seal(), tasks, TurnEnd("worker-1", 1, "", False, "x", mark="n"), NOW)
        assert step.start[0].name == "worker-1" and step.start[0].turns == turn
    step = scheduler.turn_ended(step.seal(), tasks, TurnEnd("worker-1", 1, "", False, "again", mark="n"), NOW)
    assert [k for k, _ in step.events][-3:] == ["worker-replaced", "locks-freed", "worker-started"]
    assert step.start[0].name == "worker-2" and step.updates[0].owner == "worker-2"
    assert step.board.locks() == {"a.py": "worker-2"}


def test_a_question_pauses_that_worker_only() -> None:
    worker = Worker("worker-1", "1", ("a.py",), "2026-01-09T10:00:00+00:00")
    state = loop(Board(graph="g", capacity=2, workers=(worker,), serial=1))
    tasks = [t("1", status="in_progress", owner="worker-1", files=("a.py",))]
    step = scheduler.turn_ended(
        state, tasks, TurnEnd("worker-1", 0, "<question>SQLite?</question>", True), NOW
    )
    assert step.state.status == "running" and step.board.workers[0].status == "question"
    answered = scheduler.command(
        step.seal(), Command("c", "ts", "answer", "tui", reason="yes", target="worker-1"), NOW
    )
    assert answered.start[0].feedback == "A PERSON ANSWERED YOUR QUESTION:\nyes"


def test_worker_commands_skip_and_stop() -> None:
    w1 = Worker("worker-1", "1", ("a.py",), "2026-01-09T10:00:00+00:00")
    w2 = Worker("worker-2", "2", ("b.py",), "2026-01-09T10:00:00+00:00")
    state = loop(Board(graph="g", capacity=2, workers=(w1, w2), serial=2))
    skip = scheduler.command(state, Command("c", "ts", "skip", "tui", target="worker-1"), NOW)
    assert skip.end == ["worker-1"] and skip.updates[0].status == "completed"
    stop = scheduler.command(skip.seal(), Command("d", "ts", "stop", "tui", target="worker-2"), NOW)
    assert stop.end == ["worker-2"] and (stop.updates[0].status, stop.updates[0].owner) == ("pending", None)
    assert stop.board.workers == ()


def test_the_prompt_holds_only_its_own_task() -> None:
    task = Task("7", "Add login", "Use sessions.", target_files=("src/auth.py",))
    worker = Worker("worker-3", "7", ("src/auth.py",), "")
    text = scheduler.worker_prompt("Build it", task, worker)
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


def test_a_task_nobody_could_move_escalates_and_resume_gives_it_another_go() -> None:
    worker = Worker("worker-3", "1", ("a.py",), "2026-01-09T10:00:00+00:00", stalls=2, mark="m", replaced=2)
    state = loop(Board(graph="g", capacity=2, workers=(worker,), serial=3))
    tasks = [t("1", status="in_progress", owner="worker-3", files=("a.py",))]
    step = scheduler.turn_ended(state, tasks, TurnEnd("worker-3", 1, "", False, "still red", mark="m"), NOW)
    assert step.state.status == "paused" and step.state.waiting_for is not None
    assert step.state.waiting_for["escalation"] == "stuck" and step.board.workers[0].status == "stalled"
    assert step.start == []
    resumed = scheduler.command(
        step.seal(), Command("r", "ts", "resume", "cli", reason="mock the clock"), NOW
    )
    assert resumed.state.status == "running"
    assert resumed.start[0].feedback == "A PERSON LOOKED AT IT:\nmock the clock"


def test_waiting_for_an_answer_is_not_spinning() -> None:
    asking = Worker("worker-1", "1", ("a.py",), "2026-01-09T10:00:00+00:00", status="question", question="?")
    state = loop(Board(graph="g", capacity=2, workers=(asking,), serial=1))
    tasks = [t("1", status="in_progress", owner="worker-1", files=("a.py",)), t("2", "1")]
    for _ in range(4):
        step = scheduler.cycle(state, tasks, NOW)
        state = step.seal()
    assert step.state.status == "running" and step.board.defer_streak == 0


def test_a_task_its_worker_marked_completed_blocks_until_the_audit_approves() -> None:
    worker = Worker("worker-1", "1", ("a.py",), "2026-01-09T10:00:00+00:00")
    state = loop(Board(graph="g", capacity=2, workers=(worker,), serial=1))
    tasks = [t("1", status="completed", owner="worker-1", files=("a.py",)), t("2", "1", files=("b.py",))]
    step = scheduler.cycle(state, tasks, NOW)
    assert step.start == [] and step.state.status == "running"
