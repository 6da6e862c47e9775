"""The monitor's main situations, built as real workspaces with a fixed clock, for screenshots
(`python tools/screenshots.py` writes every SVG in `screenshots/`) and the snapshot tests.
A development tool: it writes state files and git repositories, so it is not in the package.

Every scenario is a real folder: a git repo with fixed dates, a state file, a journal and a
task file written through loopdeck's own modules, so the pictures show what users will see.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script from a clone

from loop import trust
from loop.core import scheduler
from loop.core.model import Result
from loop.core.timeutil import iso_s
from loop.demo import graph as demo_graph
from loop.drivers import writer
from loop.repo.gitargv import git_argv
from loop.sources import taskgraph
from loop.store.journal import Journal
from loop.store.paths import Workspace
from loop.store.state import LoopState, StateStore
from tools.driving import NOW, app_for, laid_out, ready, settle, steady, tables_measured

__all__ = [  # what the tests build on: the scenarios, and the driving helpers they share
    "NOW",
    "SCENARIOS",
    "app_for",
    "laid_out",
    "ready",
    "settle",
    "steady",
    "tables_measured",
]

SIZE = (120, 40)
TODO = """# Todo API

- [x] Sketch the data model
- [x] Add the storage layer
- [~] Expose the list endpoint
- [ ] Expose the create endpoint
- [ ] Validate input
"""
DONE = [line[6:] for line in TODO.splitlines() if line.startswith("- [")]
"""The task file's titles, in its order: what the completed loop's summary names as done."""
GIT_ENV = {
    "GIT_AUTHOR_NAME": "loopdeck",
    "GIT_AUTHOR_EMAIL": "demo@loopdeck.invalid",
    "GIT_COMMITTER_NAME": "loopdeck",
    "GIT_COMMITTER_EMAIL": "demo@loopdeck.invalid",
    "GIT_AUTHOR_DATE": "2026-01-09T10:00:00+00:00",
    "GIT_COMMITTER_DATE": "2026-01-09T10:00:00+00:00",
}


def _git(root: Path, *args: str) -> None:
    subprocess.run(git_argv(*args), cwd=root, check=True, capture_output=True, env={**os.environ, **GIT_ENV})


def _repo(root: Path, todo: str = TODO) -> Workspace:
    (root / ".claude").mkdir(parents=True, exist_ok=True)
    (root / "TODO.md").write_text(todo)
    (root / ".gitignore").write_text(".claude/\n")
    _git(root, "init", "-q", "-b", "main")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "Start the todo API")
    (root / "api.py").write_text("# the list endpoint, in progress\n")
    (root / "notes.md").write_text("open questions\n")
    return Workspace(root)


def _state(ws: Workspace, done: int = 0, *, confirmed: bool = True, **values: object) -> LoopState:
    """The loop's state, begun `done` iterations' worth of time before NOW; `confirmed`: started
    by a person on this machine (else as a clone would bring it)."""
    state = LoopState.new(
        "Build the todo API described in TODO.md",
        started_at=_started(done).isoformat(),
        task_file="TODO.md",
        check_github=False,
        check_tasks=False,
        verify=["pytest -q"],
        max_iterations=50,
    )
    store, journal = StateStore(ws), Journal(ws.journal)
    earlier = store.read() if store.exists() else None
    if earlier is not None:  # a later moment of the same loop: its id too
        state.loop_id = earlier.loop_id
    for key, value in values.items():
        setattr(state, key, value)
    if store.exists():  # a later moment of the same loop
        writer.carry_out(ws, store, journal, state, Result("allow", state), NOW)
    else:
        writer.start(ws, store, journal, state)
    if confirmed:
        trust.record(ws, state, "start")
    return state


def _took(n: int) -> int:
    """Iteration n's agent run, in seconds: varied, so the sparkline has a shape."""
    return 40 + (n * 17) % 50


def _started(iterations: int) -> datetime:
    """When a loop that ran `iterations` iterations up to NOW began: the clock and the counts
    tell one story (an iteration is its run plus a 2 s pause between runs)."""
    return NOW - timedelta(seconds=sum(_took(n) + 2 for n in range(1, iterations + 1)) + 5)


def _events(
    ws: Workspace, iterations: int, *, verify_fail_at: int | None = None, judged: bool = False
) -> list[str]:
    """The journal of `iterations` iterations, each verified and committed; returns the commits.
    `judged`: each turn also costs something and is judged (`progress`: the tasks and the tests
    of `FAILING`, as the engine records them)."""
    journal = Journal(ws.journal)
    at = _started(iterations)
    journal.append("loop-started", 0, {"max_iterations": 50}, now=at)
    commits = []
    for n in range(1, iterations + 1):
        at += timedelta(seconds=2)
        journal.append("iteration-started", n, {"max_iterations": 50}, now=at)
        at += timedelta(seconds=_took(n))
        passed = n != verify_fail_at
        journal.append(
            "verification-passed" if passed else "verification-failed",
            n,
            {
                "command": "pytest -q",
                "exit_code": 0 if passed else 1,
                "duration_s": 2.4,
                "tail": "12 passed in 2.31s"
                if passed
                else "FAILED tests/test_api.py::test_create - 1 failed",
            },
            now=at,
        )
        completed: dict[str, object] = {"duration_s": _took(n)}
        if judged:
            completed["cost_usd"] = round(0.04 + (n * 7) % 10 / 100, 2)
        journal.append("iteration-completed", n, completed, now=at)
        if judged:
            journal.append("progress", n, _judged(n), now=at)
        sha = _commit(ws.root, n)
        commits.append(sha)
        journal.append("commit", n, {"sha": sha}, now=at)
    return commits


FAILING = (10, 9, 9, 7, 6, 6, 4, 2, 1, 0)
"""Tests failing after each iteration of the progress scenario (ten tests in all): stuck a turn
twice on the way down, as real loops are."""
DONE_BY = (0, 0, 1, 1, 1, 1, 2, 2, 2, 2)
"""Tasks done after each iteration of the progress scenario (five in all)."""


def _judged(n: int) -> dict[str, object]:
    """Iteration n's `progress` event, as the engine journals it."""
    failing, done = FAILING[min(n, len(FAILING)) - 1], DONE_BY[min(n, len(DONE_BY)) - 1]
    before = FAILING[n - 2] if 1 < n <= len(FAILING) else failing
    return {
        "tasks": {"open": 5 - done, "done": done},
        "tests": {"passed": 10 - failing, "failed": failing, "reader": "junit"},
        "tests_pass": failing == 0,
        "build_succeeds": None,
        "git_clean": True,
        "moved": ["fewer-failing", "more-passing"] if failing < before else [],
    }


def _commit(root: Path, n: int) -> str:
    """One commit per iteration, as `loopdeck run --commit` makes them."""
    (root / "progress.md").write_text(f"iteration {n} done\n")
    _git(root, "add", "progress.md")
    _git(root, "commit", "-q", "-m", f"loopdeck: iteration {n}")
    out = subprocess.run(
        git_argv("rev-parse", "HEAD"),
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, **GIT_ENV},
    )
    return out.stdout.strip()


OUTPUT = [
    {"type": "system", "subtype": "init", "model": "claude-sonnet-4-5"},
    {
        "type": "assistant",
        "message": {"content": [{"type": "text", "text": "The list endpoint is next in TODO.md."}]},
    },
    {
        "type": "assistant",
        "message": {"content": [{"type": "tool_use", "name": "Read", "input": {"file_path": "api.py"}}]},
    },
    {"type": "user", "message": {"content": [{"type": "tool_result", "content": "..."}]}},
    {
        "type": "assistant",
        "message": {"content": [{"type": "text", "text": "I'll add GET /todos with paging."}]},
    },
    {
        "type": "assistant",
        "message": {"content": [{"type": "tool_use", "name": "Edit", "input": {"file_path": "api.py"}}]},
    },
    {
        "type": "assistant",
        "message": {
            "content": [
                {"type": "tool_use", "name": "Bash", "input": {"command": "pytest -q tests/test_api.py"}}
            ]
        },
    },
    {
        "type": "assistant",
        "message": {
            "content": [{"type": "text", "text": "3 passed. Marking the task in progress; paging next."}]
        },
    },
]


def _iteration_log(ws: Workspace, n: int) -> None:
    """The runner's log of iteration n, as claude's stream-json writes it."""
    state = StateStore(ws).read()
    # the loop's own folder
    logs = ws.iteration_logs(state.started_at, state.loop_id) if state else ws.iteration_logs("")
    logs.mkdir(parents=True, exist_ok=True)
    (logs / f"{n:04d}.log").write_text("".join(json.dumps(line) + "\n" for line in OUTPUT))


def _worker_log(ws: Workspace, name: str, turn: int, file: str) -> None:
    """A worker's turn as the parallel driver logs it (claude's stream-json)."""
    lines = [
        OUTPUT[0],
        {
            "type": "assistant",
            "message": {"content": [{"type": "text", "text": f"{name}: my task edits {file}."}]},
        },
        {
            "type": "assistant",
            "message": {"content": [{"type": "tool_use", "name": "Edit", "input": {"file_path": file}}]},
        },
    ]
    folder = ws.private_dir / "workers"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.{turn:02d}.log").write_text("".join(json.dumps(line) + "\n" for line in lines))


def running(root: Path) -> Workspace:
    ws = _repo(root)
    _state(
        ws,
        11,
        iteration=12,
        status="running",
        driver="runner",
        pid=os.getpid(),
        current_task="Expose the list endpoint",
    )
    _events(ws, 11, verify_fail_at=9)  # the 12th is under way
    _iteration_log(ws, 12)
    return ws


def progress(root: Path) -> Workspace:
    """A running loop whose turns report their tests: ten failing at first, none after ten
    turns (the main screen's progress panel; `g` opens the charts)."""
    ws = _repo(root)
    _state(
        ws,
        10,
        iteration=11,
        status="running",
        driver="runner",
        pid=os.getpid(),
        current_task="Expose the list endpoint",
    )
    _events(ws, 10, judged=True)
    _iteration_log(ws, 11)
    return ws


def verification(root: Path) -> Workspace:
    ws = _repo(root, TODO.replace("[ ]", "[x]").replace("[~]", "[x]"))
    _state(
        ws,
        16,
        iteration=17,
        status="running",
        driver="runner",
        pid=os.getpid(),
        verification_mode=True,
        verification_remaining=2,
    )
    _events(ws, 16)
    Journal(ws.journal).append("verification-loop", 17, {"loop": 2, "of": 4}, now=NOW - timedelta(seconds=20))
    return ws


def escalation(root: Path) -> Workspace:
    ws = _repo(root)
    _state(
        ws,
        50,
        iteration=51,
        status="paused",
        driver="runner",
        pid=os.getpid(),
        escalated=True,
        current_task="Expose the list endpoint",
    )
    _events(ws, 50)
    Journal(ws.journal).append(
        "escalation",
        51,
        {
            "kind": "max-iterations",
            "reason": "50 iterations reached with 3 task(s) pending",
            "max_iterations": 50,
            "pending_total": 3,
        },
        now=NOW - timedelta(seconds=30),
    )
    return ws


def resume_prompt(root: Path) -> Workspace:
    ws = _repo(root)
    _state(ws, 11, iteration=12, max_iterations=100, status="running", driver="runner", pid=_dead_pid())
    _events(ws, 11)
    return ws


def unconfirmed(root: Path) -> Workspace:
    """A loop that came with a clone: the monitor asks a person to confirm it before anything runs."""
    ws = _repo(root)
    _state(ws, 0, confirmed=False, notify=["cmd:notify-team"])
    return ws


def corrupt(root: Path) -> Workspace:
    ws = _repo(root)
    _state(ws, 12, iteration=12)
    _state(ws, 12, iteration=13)  # so the backup holds a good copy
    text = ws.state.read_text().replace("iteration: 13", 'iteration: "thirteen"')
    ws.state.write_text(text)
    _events(ws, 12)
    return ws


def completed(root: Path) -> Workspace:
    ws = _repo(root, TODO.replace("[ ]", "[x]").replace("[~]", "[x]"))
    state = _state(ws, 21, iteration=21, status="completed", driver="runner")
    commits = _events(ws, 21, verify_fail_at=9)
    reason = "every task done, verified 4 times"
    writer.archive_completed(
        ws,
        state,
        {
            "outcome": "completed",
            "reason": reason,
            "iterations": 21,
            "commits": commits,
            "pending_at_end": 0,
            "tasks": {"done": DONE, "skipped": [], "remaining": []},
            "usage": {"cost_micro_usd": 4_870_000, "input_tokens": 1_204_332, "output_tokens": 88_410},
            "duration_s": (NOW - _started(21)).total_seconds(),
        },
    )
    Journal(ws.journal).append("completed", 21, {"reason": reason}, now=NOW)
    return ws


def workers(root: Path) -> Workspace:
    """A loop of four workers over a task graph, in worktrees: one approved and queued to merge,
    one reworking a conflict, one deferred on a file another holds."""
    ws = _repo(root)
    folder = demo_graph.create(ws.claude_dir / "loopdeck" / "demo-tasks")

    taskgraph.write(
        folder,
        [
            scheduler.Update("1", "completed", "worker-1"),
            scheduler.Update("5", "completed", "worker-2"),
            scheduler.Update("2", "in_progress", "worker-4"),
            scheduler.Update("3", "in_progress", "worker-5"),
            scheduler.Update("8", "in_progress", "worker-3"),
        ],
    )
    branch = "loopdeck/20260109T095712"
    board = _workers_board(folder, branch)
    state = _state(
        ws,
        7,
        iteration=7,
        status="running",
        driver="runner",
        pid=os.getpid(),
        task_file="null",
        verify=["python check.py"],
    )
    scheduler.keep(state, board)
    for name, turn, task in (("worker-3", 2, "CHANGELOG.md"), ("worker-5", 1, "src/api.py")):
        _worker_log(ws, name, turn, task)
    writer.carry_out(ws, StateStore(ws), Journal(ws.journal), state, Result("allow", state), NOW)

    trust.record(ws, state, "run")
    _workers_journal(ws, branch)
    return ws


def _workers_board(folder: Path, branch: str) -> scheduler.Board:
    """The workers' board: three at work in worktrees, one queued to merge, one task deferred."""
    return scheduler.Board(
        graph=str(folder),
        capacity=4,
        audit="python audit.py",
        isolation="worktree",
        loop_branch="main",
        workers=(
            scheduler.Worker(
                "worker-3",
                "8",
                ("CHANGELOG.md",),
                iso_s(NOW - timedelta(seconds=140)),
                turns=2,
                status="running",
                branch=f"{branch}/8",
                conflicts=1,
                rework="conflict",
            ),
            scheduler.Worker(
                "worker-4",
                "2",
                ("src/store.py",),
                iso_s(NOW - timedelta(seconds=110)),
                status="queued",
                branch=f"{branch}/2",
            ),
            scheduler.Worker(
                "worker-5",
                "3",
                ("src/api.py",),
                iso_s(NOW - timedelta(seconds=65)),
                status="running",
                branch=f"{branch}/3",
            ),
        ),
        queue=("worker-4",),
        done=("1", "5"),
        serial=5,
        deferred=(scheduler.Deferral("4", "file", "worker-5", "src/api.py"),),
    )


def _workers_journal(ws: Workspace, branch: str) -> None:
    """What the workers' journal shows: merges, a conflict sent back, a deferral, an audit."""
    journal = Journal(ws.journal)
    at = NOW - timedelta(minutes=3)
    for kind, data in (
        ("worker-started", {"worker": "worker-3", "task": "8", "files": ["CHANGELOG.md"]}),
        ("merge-queued", {"worker": "worker-2", "task": "5", "branch": f"{branch}/5"}),
        ("task-merged", {"worker": "worker-2", "task": "5", "branch": f"{branch}/5", "sha": "4be1c0de"}),
        ("worker-strayed", {"worker": "worker-3", "task": "8", "files": ["README.md"]}),
        ("merge-queued", {"worker": "worker-3", "task": "8", "branch": f"{branch}/8"}),
        (
            "merge-conflict",
            {"worker": "worker-3", "task": "8", "branch": f"{branch}/8", "reason": "conflict in README.md"},
        ),
        ("worker-turn", {"worker": "worker-3", "task": "8", "turn": 2, "why": "conflict"}),
        (
            "task-deferred",
            {
                "task": "4",
                "reason": "file",
                "worker": "worker-5",
                "file": "src/api.py",
                "line": "Task 4 deferred — file conflict with worker-5 on src/api.py",
            },
        ),
        ("audit-approved", {"worker": "worker-4", "task": "2"}),
        ("merge-queued", {"worker": "worker-4", "task": "2", "branch": f"{branch}/2"}),
    ):
        at += timedelta(seconds=15)
        journal.append(kind, 7, data, now=at)


RALPH = """---
active: true
iteration: 7
session_id: 11111111-2222-3333-4444-555555555555
max_iterations: 20
completion_promise: "DONE"
started_at: "2026-01-09T10:30:00Z"
---

Build the todo API described in TODO.md. Output <promise>DONE</promise> when every box is ticked
and the tests pass.
"""


def ralph_loop(root: Path) -> Workspace:
    """A folder where Anthropic's ralph-loop plugin runs: watched read-only."""
    ws = _repo(root)
    ws.ralph_state.write_text(RALPH)
    _fix_time(ws.ralph_state, NOW - timedelta(seconds=95))
    return ws


def fleet(root: Path) -> Workspace:
    """Five workspaces below one folder, in five different states (no loop files of its own:
    `app_for` opens the fleet view on it)."""
    progress(root / "api")  # its tests failing, drawn as a sparkline
    escalation(root / "billing")
    ralph_loop(root / "docs-site")
    stopped = _repo(root / "mobile")
    _state(stopped, iteration=9, status="stopped", driver="runner")
    _events(stopped, 9)
    web = _repo(root / "web")
    session = {
        "status": "paused",
        "startedAt": "2026-01-09T09:00:00Z",
        "lastUpdated": "2026-01-09T11:20:00Z",
        "maxSessions": 12,
        "currentSession": 4,
        "completedItems": [{"title": "Login form"}, {"title": "Password reset"}],
        "failedItems": [],
        "queueSnapshot": ["SSO", "Audit log", "Rate limiting"],
    }
    (web.root / "docs").mkdir()
    (web.root / "docs" / ".continuous-session-state.json").write_text(json.dumps(session, indent=2))
    return Workspace(root)


def _fix_time(path: Path, moment: datetime) -> None:
    os.utime(path, (moment.timestamp(), moment.timestamp()))


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-I", "-c", "pass"])
    proc.wait()
    return proc.pid


SCENARIOS: dict[str, Callable[[Path], Workspace]] = {
    "running": running,
    "verification": verification,
    "escalation": escalation,
    "resume": resume_prompt,
    "workers": workers,
    "unconfirmed": unconfirmed,
    "corrupt": corrupt,
    "completed": completed,
    "ralph-loop": ralph_loop,
    "fleet": fleet,
    "progress": progress,
}


async def _shoot(name: str, root: Path, out: Path, keys: tuple[str, ...] = ()) -> Path:
    scenario, default_keys, size = PICTURES.get(name, (name, (), SIZE))
    keys = keys or default_keys
    ws = SCENARIOS[scenario](root)
    app = app_for(ws)
    async with app.run_test(size=size) as pilot:  # type: ignore[attr-defined]
        await settle(app)
        if keys:
            await pilot.press(*keys)
            await settle(app)
        await pilot.pause()
        app.save_screenshot(f"{name}.svg", path=str(out))  # type: ignore[attr-defined]
    return out / f"{name}.svg"


PICTURES: dict[str, tuple[str, tuple[str, ...], tuple[int, int]]] = {
    "output": ("running", ("o",), SIZE),
    "running-80x24": ("running", (), (80, 24)),
    "workers-80x24": ("workers", (), (80, 24)),
    "escalation-80x24": ("escalation", (), (80, 24)),
    "progress-charts": ("progress", ("g",), SIZE),
    "progress-charts-80x24": ("progress", ("g",), (80, 24)),
}
"""Pictures beyond the scenarios: a scenario, the keys pressed before the shot, the terminal's
size (the scenarios are shot at `SIZE`; an 80x24 terminal is the smallest the monitor fits)."""


PROJECT = "todo-api"
"""The folder every scenario is made in: the top bar names it, as it names a person's project."""


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "screenshots"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        records = Path(tmp) / "trust"  # the scenarios' confirmations, not in the home folder
        records.mkdir(mode=0o700)
        os.environ["LOOPDECK_TRUST_HOME"] = str(records)
        for name in [*SCENARIOS, *PICTURES]:
            scenario = PICTURES.get(name, (name, (), SIZE))[0]
            folder = "projects" if scenario == "fleet" else PROJECT  # the folder the top bar names
            path = asyncio.run(_shoot(name, Path(tmp) / name / folder, out))
            print(f"wrote {path}")


if __name__ == "__main__":
    main()
