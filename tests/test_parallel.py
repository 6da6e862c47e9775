"""`run --workers N` end to end: a real graph folder, scripted workers as real processes, the
journal as the witness of every lock taken and freed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from textual.pilot import Pilot

from loop.demo import graph as demo_graph
from loop.demo import workspace
from loop.demo.worker import AUDIT
from loop.store.journal import Event, Journal
from loop.store.paths import Workspace
from tests.conftest import REPO
from tests.test_runner import processes_in

PY = sys.executable

TWELVE = (
    ("1", "Model", (), ("src/model.py",)),
    ("2", "Storage", ("1",), ("src/store.py",)),
    ("3", "List endpoint", ("1",), ("src/api.py",)),
    ("4", "Create endpoint", ("1",), ("src/api.py", "src/validate.py")),
    ("5", "Delete endpoint", ("2",), ("src/api.py",)),
    ("6", "Errors", ("2",), ("src/errors.py", "src/store.py")),
    ("7", "README", (), ("README.md",)),
    ("8", "Changelog", (), ("CHANGELOG.md", "README.md")),
    ("9", "Smoke test", ("3", "4", "5"), ("tests/test_smoke.py",)),
    ("10", "Config", (), ("src/config.py",)),
    ("11", "Logging", ("10",), ("src/config.py", "src/log.py")),
    ("12", "Release notes", ("8", "9", "11"), ("CHANGELOG.md",)),
)


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-home"))
    for key in ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"):
        monkeypatch.setenv(key, "t")
    for key in ("GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"):
        monkeypatch.setenv(key, "t@example.invalid")
    root = workspace.create(tmp_path / "repo", tasks=1)
    (root / "audit.py").write_text(AUDIT)
    subprocess.run(["git", "add", "audit.py"], cwd=root, check=True)
    subprocess.run(["git", "commit", "-qm", "the audit"], cwd=root, check=True)  # every worktree has it
    return Workspace(root)


def run(
    ws: Workspace, graph: Path, *extra: str, worker: tuple[str, ...] = (), timeout: float = 90
) -> subprocess.CompletedProcess[str]:
    agent = " ".join([PY, "-m", "loop.demo.worker", *worker])
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [
            PY,
            "-m",
            "loop.cli",
            "-C",
            str(ws.root),
            "run",
            "Build it",
            "--workers",
            "4",
            "--graph",
            str(graph),
            "--agent",
            agent,
            "--headless",
            *extra,
        ],
        cwd=ws.root,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def events(ws: Workspace) -> list[Event]:
    return Journal(ws.journal).read_from(0).events


def assert_locks_exclusive(evs: list[Event]) -> None:
    """Replay the journal: a worker takes its files when it starts and holds them until they
    are freed; no file is ever held by two workers at once."""
    held: dict[str, str] = {}
    for e in evs:
        if e.kind == "worker-started":
            for f in e.data["files"]:
                assert f not in held, f"{e.data['worker']} took {f} while {held.get(f)} held it"
                held[f] = e.data["worker"]
        elif e.kind == "locks-freed":
            for f in e.data["files"]:
                assert held.pop(f, None) == e.data["worker"]


def test_twelve_tasks_four_workers_with_a_rejecting_audit(repo: Workspace) -> None:
    """Twelve tasks with overlapping files, in worktrees: every task merged once into the loop's
    branch, which has every change; verification ran on the merged result; no worktree left."""
    graph = demo_graph.create(repo.root / "graph", TWELVE)
    audit = f"{PY} audit.py"
    check = f"{PY} check.py"
    done = run(
        repo,
        graph,
        "--audit",
        audit,
        "--verify-allow",
        audit,
        "--verify",
        check,
        "--verify-allow",
        check,
        worker=("--break-on", "4", "--sleep", "0.05", "0.2"),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    evs = events(repo)
    assert_locks_exclusive(evs)
    order = [e.data["task"] for e in evs if e.kind == "task-completed"]
    assert sorted(order, key=int) == [t[0] for t in TWELVE]
    finished_at = {t: i for i, t in enumerate(order)}
    position = {id(e): i for i, e in enumerate(evs)}
    starts = {e.data["task"]: position[id(e)] for e in evs if e.kind == "worker-started"}
    completes = {e.data["task"]: position[id(e)] for e in evs if e.kind == "task-completed"}
    for ident, _s, blocked_by, _f in TWELVE:
        for b in blocked_by:
            assert completes[b] < starts[ident], f"task {ident} started before {b} completed"
    assert finished_at
    rejected = [e.data["task"] for e in evs if e.kind == "audit-rejected"]
    assert rejected == ["4"]
    reruns = [e.data["task"] for e in evs if e.kind == "worker-turn"]
    assert reruns == ["4"]
    assert any(e.kind == "task-deferred" for e in evs)
    max_active = 0
    active: set[str] = set()
    for e in evs:
        if e.kind == "worker-started":
            active.add(e.data["worker"])
        elif e.kind == "locks-freed":
            active.discard(e.data["worker"])
        max_active = max(max_active, len(active))
    assert max_active <= 4
    for path in sorted(graph.glob("*.json")):
        obj = json.loads(path.read_text())
        assert obj["status"] == "completed", obj
        assert obj["owner"].startswith("worker-"), obj  # who did it stays on the task
    merged = [e.data["task"] for e in evs if e.kind == "task-merged"]
    assert sorted(merged, key=int) == [t[0] for t in TWELVE]  # each exactly once
    checks = [e.kind for e in evs if e.kind in ("verification-passed", "verification-failed", "task-merged")]
    for i, kind in enumerate(checks):  # each landing follows a verification of the merged batch that passed
        if kind == "task-merged":
            assert [k for k in checks[:i] if k != "task-merged"][-1] == "verification-passed"
    for ident, subject, _b, files in TWELVE:
        for name in files:
            assert f"task {ident}: {subject}\n" in (repo.root / name).read_text(), (ident, name)
    listed = subprocess.run(["git", "worktree", "list"], cwd=repo.root, capture_output=True, text=True)
    assert len(listed.stdout.splitlines()) == 1, listed.stdout
    branches = subprocess.run(["git", "branch"], cwd=repo.root, capture_output=True, text=True).stdout
    assert "loopdeck/" not in branches
    status = subprocess.run(["git", "status", "--porcelain"], cwd=repo.root, capture_output=True, text=True)
    assert "src/" not in status.stdout and "README" not in status.stdout  # all committed by the merges
    assert not (repo.root / ".claude" / "orchestrator-loop.local.md").exists()  # archived
    prompts = sorted((repo.root / ".claude" / "loopdeck" / "workers").glob("*.stdin"))
    assert len(prompts) == 13  # 12 tasks, one rework
    for path in prompts:
        text = path.read_text()
        own = [t for t in TWELVE if f"Your task ({t[0]}): {t[1]}" in text]
        assert len(own) == 1, text
        others = [t for t in TWELVE if t is not own[0] and demo_graph.task_json(*t)["description"] in text]
        assert others == [], f"{path.name} holds other tasks: {others}"


def test_a_deadlocked_graph_escalates_after_three_cycles(repo: Workspace) -> None:
    tasks = (
        ("1", "Chicken", ("2",), ("a.py",)),
        ("2", "Egg", ("1",), ("b.py",)),
    )
    graph = demo_graph.create(repo.root / "graph", tasks)
    done = run(repo, graph, timeout=60)
    assert done.returncode == 1, done.stdout + done.stderr
    evs = events(repo)
    escalations = [e for e in evs if e.kind == "escalation"]
    assert len(escalations) == 1
    assert escalations[0].data["kind"] == "deadlock"
    assert "Task 1 waits for 2" in escalations[0].data["reason"]
    assert "in 3 cycles in a row" in escalations[0].data["reason"]
    assert not any(e.kind == "worker-started" for e in evs)


def test_status_json_shows_workers_locks_and_the_streak(repo: Workspace) -> None:
    from loop.views.snapshot import read

    graph = demo_graph.create(
        repo.root / "graph", (("1", "Hang", (), ("a.py",)), ("2", "Wait", (), ("a.py",)))
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    agent = " ".join([PY, "-m", "loop.demo.worker", "--hang-on", "1"])
    proc = subprocess.Popen(
        [
            PY,
            "-m",
            "loop.cli",
            "-C",
            str(repo.root),
            "run",
            "--workers",
            "2",
            "--graph",
            str(graph),
            "--agent",
            agent,
        ],
        cwd=repo.root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        section: dict[str, object] = {}
        while time.monotonic() < deadline:
            snap = read(repo, with_sources=False, with_events=False)
            section = snap.to_json().get("parallel") or {}
            try:  # the graph is written after the state
                owner = json.loads((graph / "1.json").read_text()).get("owner")
            except ValueError:
                owner = None
            if section.get("workers") and section.get("deferred") and owner:
                break
            time.sleep(0.05)
        assert section["locks"] == {"a.py": "worker-1"}
        assert section["deferred"][0]["line"] == "Task 2 deferred — file conflict with worker-1 on a.py"  # type: ignore[index]
        assert json.loads((graph / "1.json").read_text())["owner"] == "worker-1"
        shown = subprocess.run(
            [PY, "-m", "loop.cli", "-C", str(repo.root), "status"], env=env, capture_output=True, text=True
        ).stdout
        assert "workers      1/2 busy" in shown and "task 1, turn 1, running (a.py)" in shown
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 143
    deadline = time.monotonic() + 10  # the hung worker died with the runner
    while processes_in(repo.root) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes_in(repo.root) == []
    assert "owner" not in json.loads((graph / "1.json").read_text())  # given back on the way out
    assert json.loads((graph / "1.json").read_text())["status"] == "pending"


def workers_loop(tmp_path: Path, second: dict[str, object]) -> Workspace:
    """A loop of two workers, the second as `second` says, written as a runner would."""
    from loop.core import scheduler
    from loop.store.state import LoopState, StateStore

    ws = Workspace(tmp_path / "project")
    ws.claude_dir.mkdir(parents=True)
    state = LoopState.new("Build it", driver="runner")
    workers = (
        scheduler.Worker("worker-1", "3", ("src/api.py",), "2026-01-09T10:00:00+00:00"),
        scheduler.Worker("worker-2", "5", ("README.md",), "2026-01-09T10:00:00+00:00", **second),  # type: ignore[arg-type]
    )
    scheduler.keep(state, scheduler.Board(graph="g", capacity=4, workers=workers, serial=2))
    StateStore(ws).write(state)
    return ws


async def on_second_worker(monitor: object, pilot: Pilot[None]) -> None:
    """The monitor's workers table focused, its cursor on the second worker."""
    from textual.widgets import DataTable

    from tui.app import LoopdeckApp
    from tui.widgets.workers import WorkersPanel

    assert isinstance(monitor, LoopdeckApp)
    panel = monitor.query_one(WorkersPanel)
    deadline = time.monotonic() + 10
    while not panel.rows and time.monotonic() < deadline:
        await pilot.pause(0.05)
    assert panel.rows == ["worker-1", "worker-2"]
    assert panel.has_class("-shown")
    table = panel.query_one(DataTable)
    table.focus()
    table.move_cursor(row=1)
    await pilot.pause()


async def test_the_monitor_shows_workers_and_keys_act_on_the_selected_one(tmp_path: Path) -> None:
    from tui.app import LoopdeckApp

    ws = workers_loop(tmp_path, {"turns": 2})
    monitor = LoopdeckApp(ws, git=False, prompts=False)
    async with monitor.run_test(size=(140, 50)) as pilot:
        await on_second_worker(monitor, pilot)
        await pilot.press("w")
        await pilot.pause()
        await pilot.press("s")  # the loop's skip: "the current task" is the selected worker's
        await pilot.pause()
    sent = [json.loads(line) for line in ws.control.read_text().splitlines()]
    assert [(c["kind"], c.get("target")) for c in sent] == [("stop", "worker-2"), ("skip", "worker-2")]


async def test_after_a_search_the_workers_keys_act_again(tmp_path: Path) -> None:
    """The search box gives the focus back where it was: the Workers panel's keys work again."""
    from tui.app import LoopdeckApp

    ws = workers_loop(tmp_path, {"turns": 2})
    monitor = LoopdeckApp(ws, git=False, prompts=False)
    async with monitor.run_test(size=(140, 50)) as pilot:
        await on_second_worker(monitor, pilot)
        await pilot.press("slash", "w", "o", "escape", "escape")  # searched, then cleared
        await pilot.pause()
        await pilot.press("slash", "w", "enter")  # searched, the filter kept
        await pilot.pause()
        await pilot.press("w")
        await pilot.pause()
    sent = [json.loads(line) for line in ws.control.read_text().splitlines()]
    assert [(c["kind"], c.get("target")) for c in sent] == [("stop", "worker-2")]


async def test_the_selected_worker_stays_selected_when_the_rows_above_it_go(tmp_path: Path) -> None:
    """A worker that finished leaves the table: the cursor follows the worker it was on, not
    its row (a key would act on another worker's task)."""
    from loop.core import scheduler
    from loop.store.state import StateStore
    from tui.app import LoopdeckApp
    from tui.widgets.workers import WorkersPanel

    ws = workers_loop(tmp_path, {"turns": 2})
    monitor = LoopdeckApp(ws, git=False, prompts=False)
    async with monitor.run_test(size=(140, 50)) as pilot:
        await on_second_worker(monitor, pilot)
        panel = monitor.query_one(WorkersPanel)
        state = StateStore(ws).read()
        assert state is not None
        board = scheduler.board_of(state)
        later = scheduler.Worker("worker-3", "6", ("docs.md",), "2026-01-09T10:00:00+00:00")
        StateStore(ws).write(scheduler.keep(state, replace(board, workers=(*board.workers[1:], later))))
        deadline = time.monotonic() + 10
        while panel.rows != ["worker-2", "worker-3"] and time.monotonic() < deadline:
            await pilot.pause(0.05)
        assert panel.rows == ["worker-2", "worker-3"] and panel.selected() == "worker-2"
        await pilot.press("w")
        await pilot.pause()
    sent = [json.loads(line) for line in ws.control.read_text().splitlines()]
    assert [(c["kind"], c.get("target")) for c in sent] == [("stop", "worker-2")]


async def test_the_answer_key_asks_the_selected_workers_question_and_sends_it_to_that_worker(
    tmp_path: Path,
) -> None:
    """`a` on a worker that asked: the app opens the question (the panel opens no screen of its
    own) and the answer goes to that worker by name."""
    from tui.app import LoopdeckApp
    from tui.screens.text import QuestionScreen

    ws = workers_loop(tmp_path, {"status": "question", "question": "Keep it?"})
    monitor = LoopdeckApp(ws, git=False, prompts=False)
    async with monitor.run_test(size=(140, 50)) as pilot:
        await on_second_worker(monitor, pilot)
        await pilot.press("a")
        deadline = time.monotonic() + 10
        while not isinstance(monitor.screen, QuestionScreen) and time.monotonic() < deadline:
            await pilot.pause(0.05)
        assert isinstance(monitor.screen, QuestionScreen)
        await pilot.press(*"yes", "enter")
        await pilot.pause()
    sent = [json.loads(line) for line in ws.control.read_text().splitlines()]
    assert [(c["kind"], c.get("target"), c.get("reason")) for c in sent] == [("resume", "worker-2", "yes")]


def test_an_audit_agent_and_a_task_a_worker_adds_to_the_list(repo: Workspace, tmp_path: Path) -> None:
    folder = demo_graph.create(
        tmp_path / "claude-home" / "tasks" / "team",
        (("1", "Model", (), ("m.py",)), ("2", "Api", ("1",), ("m.py",))),
    )
    audit_agent = f"{PY} audit.py"
    done = run(
        repo,
        folder,
        "--audit-agent",
        audit_agent,
        worker=("--break-on", "2", "--add-task-on", "1"),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    evs = events(repo)
    assert [e.data["task"] for e in evs if e.kind == "audit-rejected"] == ["2"]
    assert sorted(e.data["task"] for e in evs if e.kind == "task-completed") == ["1", "101", "2"]
    assert json.loads((folder / "101.json").read_text())["status"] == "completed"
    assert_locks_exclusive(evs)


@pytest.mark.parametrize("how", ["resume --worker", "answer"])
def test_a_question_pauses_that_worker_only_until_a_person_answers(repo: Workspace, how: str) -> None:
    """By name (`resume --worker W`), or with a plain `answer`, as to the question shown: it
    goes to the worker that asks."""
    graph = demo_graph.create(
        repo.root / "graph",
        (("1", "Ask", (), ("a.py",)), ("2", "Other", (), ("b.py",)), ("3", "Next", ("2",), ("c.py",))),
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    agent = " ".join([PY, "-m", "loop.demo.worker", "--ask-on", "1"])
    base = [PY, "-m", "loop.cli", "-C", str(repo.root)]
    proc = subprocess.Popen(
        [*base, "run", "--workers", "2", "--graph", str(graph), "--agent", agent],
        cwd=repo.root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            kinds = [e.kind for e in events(repo)]
            if "worker-question" in kinds and kinds.count("task-completed") == 2:
                break
            time.sleep(0.05)
        evs = events(repo)
        asked = next(e for e in evs if e.kind == "worker-question")
        assert asked.data["task"] == "1" and "keep the old format" in asked.data["question"]
        assert sorted(e.data["task"] for e in evs if e.kind == "task-completed") == ["2", "3"]
        verb = (
            ["resume", "--worker", asked.data["worker"], "--reason", "yes, keep it"]
            if how == "resume --worker"
            else ["answer", "yes,", "keep", "it"]
        )
        answer = subprocess.run(
            [*base, *verb, "--wait", "20"],
            env=env,
            capture_output=True,
            text=True,
        )
        assert answer.returncode == 0, answer.stderr
        assert "no question is pending" not in answer.stderr  # a worker's question is one
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    evs = events(repo)
    assert [e.data.get("answer") for e in evs if e.kind == "answered"] == ["yes, keep it"]
    assert sorted(e.data["task"] for e in evs if e.kind == "task-completed") == ["1", "2", "3"]
    prompts = sorted((repo.root / ".claude" / "loopdeck" / "workers").glob("worker-1.*.stdin"))
    assert "A PERSON ANSWERED YOUR QUESTION:\nyes, keep it" in prompts[-1].read_text()


AUDIT_AFTER_ALL = """import pathlib, sys, time
# The audits end only once every other worker has ended its turn.
deadline = time.monotonic() + 60
while not all(pathlib.Path(f"{n}.py").exists() for n in "bcdef") and time.monotonic() < deadline:
    time.sleep(0.02)
time.sleep(0.5)
"""


def test_turns_ending_while_a_task_waits_for_a_lock_are_not_a_deadlock(repo: Workspace) -> None:
    """Task 2 waits for the file worker-1 holds; five other workers end their turns, one by one,
    and their audits run. Workers ending turns is progress: no deadlock is reported."""
    graph = demo_graph.create(
        repo.root / "graph",
        (
            ("1", "Hang", (), ("a.py",)),
            ("2", "Wait", (), ("a.py",)),
            ("3", "B", (), ("b.py",)),
            ("4", "C", (), ("c.py",)),
            ("5", "D", (), ("d.py",)),
            ("6", "E", (), ("e.py",)),
            ("7", "F", (), ("f.py",)),
        ),
    )
    (repo.root / "audit_after_all.py").write_text(AUDIT_AFTER_ALL)
    audit = f"{PY} audit_after_all.py"  # reads the other workers' files: one shared tree
    agent = " ".join([PY, "-m", "loop.demo.worker", "--hang-on", "1", "--sleep", "0.2", "1.5"])
    # Seven slots, six workers: a slot stays free, so every pass asks whether task 2 can start.
    argv = [PY, "-m", "loop.cli", "-C", str(repo.root), "run", "Build it", "--workers", "7"]
    argv += ["--graph", str(graph), "--agent", agent, "--audit", audit, "--verify-allow", audit, "--headless"]
    argv += ["--isolation", "locks"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        argv, cwd=repo.root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            evs = events(repo) if repo.journal.exists() else []
            if sum(e.kind == "task-completed" for e in evs) == 5:
                break
            time.sleep(0.05)
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    evs = events(repo)
    assert not any(e.kind == "escalation" for e in evs), out
    assert sorted(e.data["task"] for e in evs if e.kind == "task-completed") == ["3", "4", "5", "6", "7"], out


def test_headless_a_question_nobody_can_answer_ends_the_run(repo: Workspace) -> None:
    graph = demo_graph.create(repo.root / "graph", (("1", "Ask", (), ("a.py",)),))
    done = run(repo, graph, worker=("--ask-on", "1"), timeout=60)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "a worker asks: Should 'Ask' keep the old format?" in done.stdout
    assert not any(e.kind == "escalation" for e in events(repo))
    task = json.loads((graph / "1.json").read_text())
    assert (task["status"], "owner" in task) == ("pending", False)


def test_the_demo_with_workers_runs_to_completion(tmp_path: Path) -> None:
    from tests.conftest import run_loopdeck

    env = {
        "LOOPDECK_DEMO_PACE": "0.01 0.05",
        "TMPDIR": str(tmp_path),
        "CLAUDE_CONFIG_DIR": str(tmp_path / "home"),
    }
    done = run_loopdeck("demo", "--workers", "4", "--headless", env=env, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Task 4 deferred — file conflict with worker-" in done.stdout
    assert "Audit REJECTED task 4" in done.stdout
    # a branch per task, a merge queue, and a conflict handed back and resolved by rework
    assert "queued to merge (loopdeck/" in done.stdout and "merged into the loop's branch" in done.stdout
    assert "merge CONFLICT, back to worker-" in done.stdout and "(conflict in README.md)" in done.stdout
    assert "changed files outside task 8's: README.md" in done.stdout
    assert "Loop complete: all 8 tasks completed" in done.stdout
    # The ending says what was done, by name, and how many worker turns it took (one rework).
    assert "Done:        8 task(s): Sketch the data model" in done.stdout
    assert "Remaining:   0 task(s)" in done.stdout and "Tasks:       unknown" not in done.stdout
    (summary,) = tmp_path.glob("*/project/.claude/loops/*/summary.json")
    record = json.loads(summary.read_text())
    assert record["iterations"] >= 9 and record["pending_at_end"] == 0  # 8 tasks, one reworked
    assert len(record["tasks"]["done"]) == 8 and isinstance(record["duration_s"], float)


def test_resume_goes_on_with_the_workers_after_a_kill(repo: Workspace) -> None:
    """Regression: `loopdeck resume --yes` on a killed loop of workers started a single runner
    that ran promptless turns and reported "completed … Done: 0" with tasks still owned."""
    graph = demo_graph.create(repo.root / "graph", (("1", "A", (), ("a.py",)), ("2", "B", (), ("b.py",))))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    agent = " ".join([PY, "-m", "loop.demo.worker", "--sleep", "1", "1.5"])
    base = [PY, "-m", "loop.cli", "-C", str(repo.root)]
    proc = subprocess.Popen(
        [*base, "run", "Build it", "--workers", "2", "--graph", str(graph), "--agent", agent],
        cwd=repo.root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and sum(e.kind == "worker-started" for e in events(repo)) < 2:
        time.sleep(0.05)
    proc.kill()
    proc.wait(30)
    resumed = subprocess.run([*base, "resume", "--yes"], env=env, capture_output=True, text=True, timeout=60)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    log = repo.root / ".claude" / "loopdeck" / "runner.log"
    deadline = time.monotonic() + 60  # the restarted runner ends with its summary
    while time.monotonic() < deadline and "Archive:" not in (log.read_text() if log.exists() else ""):
        time.sleep(0.1)
    evs = events(repo)
    assert sorted(e.data["task"] for e in evs if e.kind == "task-merged") == ["1", "2"]
    runner_log = log.read_text()
    assert "worker-" in runner_log and "Done:        2 task(s)" in runner_log
    for name in ("1", "2"):
        assert json.loads((graph / f"{name}.json").read_text())["status"] == "completed"


KILLED_AS_IT_NAMES_THE_GRAPH = """
import os
from loop.core.scheduler import board_of
from loop.drivers import writer

real = writer.carry_out

def carry_out(*args, **kwargs):
    done = real(*args, **kwargs)
    state = args[4].state
    if state is not None and board_of(state).graph:
        os._exit(9)  # killed the moment the state names the graph
    return done

writer.carry_out = carry_out
"""


def test_a_runner_killed_as_it_first_names_the_graph_is_run_again_by_the_same_command(
    repo: Workspace, tmp_path: Path
) -> None:
    """The graph a person gives is recorded as confirmed before the state names it: a runner
    killed right after that write left a loop the same command refused ("names what nobody on
    this machine confirmed: task graph")."""
    graph = demo_graph.create(repo.root / "graph", (("1", "A", (), ("a.py",)),))
    agent = " ".join([PY, "-m", "loop.demo.worker", "--sleep", "0", "0"])
    argv = [PY, "-m", "loop.cli", "-C", str(repo.root), "run", "Build it", "--workers", "2"]
    argv += ["--graph", str(graph), "--agent", agent, "--headless"]
    inject = tmp_path / "inject"
    inject.mkdir()
    (inject / "sitecustomize.py").write_text(KILLED_AS_IT_NAMES_THE_GRAPH)
    env = {**os.environ, "PYTHONPATH": f"{inject}{os.pathsep}{REPO}"}
    killed = subprocess.run(argv, cwd=repo.root, env=env, capture_output=True, text=True, timeout=90)
    assert killed.returncode == 9, killed.stdout + killed.stderr
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    again = subprocess.run(argv, cwd=repo.root, env=env, capture_output=True, text=True, timeout=90)
    assert "confirmed" not in again.stdout + again.stderr, again.stdout + again.stderr
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]


def test_the_demo_worker_never_empties_a_file_it_shares(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed at any moment of its turn (its runner killed, the run's processes with it), the
    worker leaves another task's line in a file both tasks write: it only appends to it. It
    used to rewrite the file on every turn, emptying it first; killed there, the next attempt
    appended to an empty file and the other task's work was merged away."""
    from loop.demo import worker

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "api.py").write_text("task 3: List\n")
    monkeypatch.chdir(tmp_path)
    prompt = tmp_path / "prompt.md"
    prompt.write_text("Your task (4): Create\n\nFiles you may change:\n- src/api.py\n")
    rewrites: list[str] = []
    real = Path.write_text

    def write_text(self: Path, data: str, *args: object, **kwargs: object) -> int:
        if self.name == "api.py":  # where a kill would leave the file empty
            rewrites.append(data)
        return real(self, data, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "write_text", write_text)
    assert worker.main(["--prompt-file", str(prompt)]) == 0
    assert rewrites == []
    assert (tmp_path / "src" / "api.py").read_text() == "task 3: List\ntask 4: Create\n"
