"""The Temporal engine end to end, against the dev server from the wheel: a 6-task graph on two
`loopdeck worker` processes with the scripted agent; a worker SIGKILLed mid-turn (its turn is
retried on another worker and done once); `answer` and `pause` from the CLI; the fleet view on
the running loop; the server SIGKILLed and started again on its file (the loop completes); and
no secret of the workers' environment anywhere in the workflow's history."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

pytest.importorskip(
    "temporalio", reason="the Temporal engine is not installed (pip install 'loopdeck[temporal]')"
)

from tests.temporal_support import (
    PLAIN_SECRET,
    SECRET,
    TOKEN,
    Server,
    Workers,
    board,
    git,
    history,
    kinds,
    many,
    project,
    query,
    replay,
    start_server,
    until,
    verb,
)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    yield from start_server(tmp_path)


def agent_of(proc: psutil.Process) -> str | None:
    """The task a worker process's agent works on, if one runs under it now."""
    try:
        for child in proc.children(recursive=True):
            task = child.environ().get("LOOPDECK_TASK")
            if task and "agent.py" in " ".join(child.cmdline()):
                return task
    except psutil.Error:
        return None
    return None


async def history_of(address: str, wf: str) -> str:
    """The workflow's whole history, as JSON, with every payload decoded: everything the server
    keeps of it."""
    import base64
    import re

    from temporalio.client import Client

    client = await Client.connect(address)
    history = (await client.get_workflow_handle(wf).fetch_history()).to_json()
    payloads = re.findall(r'"data": "([A-Za-z0-9+/=]+)"', history)
    return "\n".join([history, *(base64.b64decode(p).decode("utf-8", "replace") for p in payloads)])


PASTED = "ghp_" + "a1B2" * 9
"""A token pasted into the prompt: it must never reach the workflow's history."""


async def fleet_then_resume(address: str, wf: str, asking: str) -> None:
    from textual.widgets import DataTable

    from loop.temporal.client import Target
    from tui.screens.temporal_fleet import TemporalFleetScreen
    from tui.temporal import TemporalApp

    app = TemporalApp(Target(address), prompts=False)
    async with app.run_test(size=(180, 40)) as pilot:

        async def until_true(what: str, check: Callable[[], bool], timeout: float = 20) -> None:
            deadline = time.monotonic() + timeout
            while not check():
                assert time.monotonic() < deadline, f"timed out waiting for {what}"
                await pilot.pause(0.1)

        def row() -> list[str]:
            screen = app.screen
            if not isinstance(screen, TemporalFleetScreen):
                return []
            table = screen.query_one(DataTable)
            if wf not in table.rows:
                return []
            return [str(cell) for cell in table.get_row(wf)]

        await until_true(
            "the loop in the fleet, paused, with its workers", lambda: "paused" in " ".join(row())
        )
        cells = row()
        assert cells[0] == wf and "pause" in cells[4]
        assert f"{asking} (5, question)" in cells[5]  # its workers, each with its task and status
        await pilot.press("enter")
        await until_true(
            "the loop's monitor", lambda: app.snapshot is not None and app.snapshot.loop is not None
        )
        assert app.snapshot is not None and app.snapshot.loop is not None
        assert app.snapshot.loop.status == "paused" and app.snapshot.parallel is not None
        await pilot.press("r")
        await until_true(
            "the resume applied",
            lambda: (
                app.snapshot is not None
                and app.snapshot.loop is not None
                and app.snapshot.loop.status == "running"
            ),
        )
        await pilot.press("f")  # back to the server's fleet, with the monitor's own key
        await until_true("the fleet again", lambda: isinstance(app.screen, TemporalFleetScreen))


def test_a_loop_of_workers_on_temporal_survives_a_lost_worker_and_a_lost_server(
    server: Server, tmp_path: Path
) -> None:
    proj = project(tmp_path, tasks=6, agent_args="--sleep 0.8 0.8 --ask-on 5")
    workers = Workers(server, proj, queue="e2e")
    try:
        first = workers.start("w1")
        workers.start("w2")
        ran = verb(
            *["run", "Build the demo service", "--workers", "2", "--engine", "temporal"],
            *["--address", server.address, "--task-queue", "e2e", "--graph", "tasks"],
            *["--agent", proj.agent, "--heartbeat-timeout", "3", "--idle", "0.5", "--detach"],
            cwd=proj.ws,
        )
        assert ran.returncode == 0, ran.stderr
        record = json.loads((proj.ws / ".claude" / "loopdeck" / "temporal.json").read_text())
        wf = record["workflow_id"]
        assert record["address"] == server.address and wf in ran.stdout

        # a worker SIGKILLed in the middle of a turn: its turn goes to another worker
        killed = until("an agent running under the first worker", lambda: agent_of(psutil.Process(first.pid)))
        first.send_signal(signal.SIGKILL)
        first.wait()
        workers.start("w3")  # a new machine joins

        # task 5's worker asks a question; a pause from the CLI: no turn starts while paused
        asking = until(
            "a worker's question",
            lambda: [w for w in board(query(server.address, wf))["workers"] if w["status"] == "question"],
        )
        paused = verb(
            *["pause", "--reason", "a look", "--temporal", server.address, "--workflow", wf, "--wait", "20"],
            cwd=tmp_path,
        )
        assert paused.returncode == 0, paused.stderr
        quiet = until(
            "the turns under way to end after the pause",
            lambda: (
                (s := query(server.address, wf))
                and not [w for w in board(s)["workers"] if w["status"] in ("running", "auditing")]
                and s
            ),
        )
        assert quiet["state"]["values"]["status"] == "paused"
        started = len(kinds(quiet, "worker-started")) + len(kinds(quiet, "worker-turn"))
        done = {e["data"]["task"] for e in kinds(quiet, "task-completed")}
        assert len(done) < 6, "the pause came too late to show anything"
        status = verb("status", "--json", cwd=proj.ws)  # the workspace's record names the loop
        assert status.returncode == 0, status.stderr
        shown = json.loads(status.stdout)
        assert shown["loop"]["status"] == "paused" and shown["temporal"]["workflow_id"] == wf
        still = query(server.address, wf)  # idle cycles went by: none started a turn
        assert started == len(kinds(still, "worker-started")) + len(kinds(still, "worker-turn"))

        # the fleet view on the server: the loop and its (asking) worker; Enter opens its monitor,
        # whose keys go to the workflow as signals (`r` resumes it)
        asyncio.run(fleet_then_resume(server.address, wf, asking[0]["name"]))
        again = query(server.address, wf)
        assert again["state"]["values"]["status"] == "running"

        # the answer from the CLI reaches the asking worker, whose next turn has it
        answered = verb("answer", "keep", "the", "old", "format", "--wait", "20", cwd=proj.ws)
        assert answered.returncode == 0, answered.stderr
        assert "answer applied" in answered.stdout
        snap = query(server.address, wf)
        said = kinds(snap, "answered")
        assert said and said[-1]["data"]["worker"] == asking[0]["name"]
        assert said[-1]["data"]["answer"] == "keep the old format"

        # the server SIGKILLed mid-run and started again on its file: the loop goes on
        until(
            "a turn under way",
            lambda: any(w["status"] == "running" for w in board(query(server.address, wf))["workers"]),
        )
        server.kill()
        server.start()
        end = until("the loop's end", lambda: query(server.address, wf).get("ended"), timeout=90)
        assert end["outcome"] == "completed", end
    finally:
        workers.stop()

    # every task done once: one merge per task on the loop's branch, one line per task
    log = git(proj.remote, "log", "--format=%s", "main")
    for task in range(1, 7):
        assert log.count(f"merge task {task} (") == 1, log
    tree = {}
    for path in git(proj.remote, "ls-tree", "-r", "--name-only", "main").split():
        tree[path] = git(proj.remote, "show", f"main:{path}")
    lines = [
        line for text in tree.values() for line in text.splitlines() if line.startswith(f"task {killed}:")
    ]
    assert len(lines) == len({line for line in lines}) >= 1, lines  # its work is there, never twice
    # the killed turn was retried by Temporal (a second attempt, on another worker)
    found = history(server.address, wf)
    assert '"attempt": 2' in found or '"attempt":2' in found
    # nothing of the workers' secrets in the history: not the API key, the token, nor a value
    # only the worker knows is secret (its agent printed it)
    for secret in (SECRET, TOKEN, PLAIN_SECRET):
        assert secret not in found
    assert "my key is [REDACTED]" in found  # the agent did say it: the worker took it out
    # the whole history replays through the workflow's code to the same decisions
    replay(server.address, wf)


def test_a_new_run_after_an_ended_loop_is_a_new_loop_from_the_branch_as_it_is_here(
    server: Server, tmp_path: Path
) -> None:
    """`run` pushes the loop's branch first (a commit made here, not pushed, is where the
    workers start); a `run` after the recorded loop ended starts a new loop with names of its
    own, never the ended one's id, branches or turn records (which would pass its tasks as done
    without running the agent)."""
    from loop.demo import graph

    proj = project(tmp_path, tasks=2)
    (proj.ws / "NOTES.md").write_text("made here, not pushed yet\n")
    git(proj.ws, "add", "NOTES.md")
    git(proj.ws, "commit", "-qm", "a local commit")
    workers = Workers(server, proj, queue="again")
    args = ["run", f"Build it with {PASTED}", "--workers", "1", "--engine", "temporal"]
    args += ["--address", server.address, "--task-queue", "again", "--graph", "tasks"]
    args += ["--agent", proj.agent, "--idle", "0.5"]
    try:
        workers.start("w1")
        first = verb(*args, cwd=proj.ws, timeout=120)
        assert first.returncode == 0 and "loop completed" in first.stdout, first.stdout + first.stderr
        assert "NOTES.md" in git(proj.remote, "ls-tree", "--name-only", "main")
        old = json.loads((proj.ws / ".claude" / "loopdeck" / "temporal.json").read_text())
        history = asyncio.run(history_of(server.address, old["workflow_id"]))
        assert "Build it with" in history and PASTED not in history  # the prompt, redacted
        behind = verb(*args, cwd=proj.ws, timeout=120)  # the merged work is on the remote only
        assert behind.returncode == 1 and "git pull" in behind.stderr and "[rejected]" in behind.stderr
        git(proj.ws, "pull", "-q", "--no-rebase", "origin", "main")
        # the next loop's tasks have the same ids as the last one's, and other work
        graph.create(proj.ws / "more", many(2))
        git(proj.ws, "add", "more")
        git(proj.ws, "commit", "-qm", "more tasks")
        second = verb(*[a if a != "tasks" else "more" for a in args], cwd=proj.ws, timeout=120)
        assert second.returncode == 0, second.stdout + second.stderr
        new = json.loads((proj.ws / ".claude" / "loopdeck" / "temporal.json").read_text())
        assert new["workflow_id"] != old["workflow_id"] and " started on " in second.stdout
        branches = git(proj.remote, "branch", "--list", "loopdeck/*").split()
        assert len({name.split("/")[1] for name in branches}) == 2, branches  # names of its own
        merged = git(proj.remote, "ls-tree", "-r", "--name-only", "main").split()
        assert {"src/part1.py", "src/part2.py"} <= set(merged)  # its agent ran: the work is there
    finally:
        workers.stop()


def test_a_loop_run_in_the_foreground_is_read_and_paused_from_its_workspace(
    server: Server, tmp_path: Path
) -> None:
    """Regression: with `run --engine temporal` in the foreground, `status --json` in its
    workspace showed `driver: null` and `pause` there said it "applies at the agent's next Stop",
    never reaching the workflow: a loop the workspace ran earlier (a hook loop's state file) hid
    the record of the Temporal loop started after it."""
    import os
    import subprocess

    from tests.conftest import REPO
    from tests.temporal_support import loopdeck

    # Task 2 asks a question: the loop cannot end before the verbs run, however busy the machine.
    proj = project(tmp_path, tasks=2, agent_args="--sleep 1 1 --ask-on 2")
    earlier = verb("start", "An earlier loop", "--no-github", "--no-tasks", cwd=proj.ws)
    assert earlier.returncode == 0, earlier.stderr
    workers = Workers(server, proj, queue="here")
    args = ["run", "Build it", "--workers", "1", "--engine", "temporal", "--address", server.address]
    args += ["--task-queue", "here", "--graph", "tasks", "--agent", proj.agent, "--idle", "0.5"]
    record = proj.ws / ".claude" / "loopdeck" / "temporal.json"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = subprocess.Popen(
        [*loopdeck(), *args],
        cwd=proj.ws,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:
        workers.start("w1")
        wf = until(
            "the loop's record", lambda: record.is_file() and json.loads(record.read_text())["workflow_id"]
        )
        shown = verb("status", "--json", cwd=proj.ws)
        assert shown.returncode == 0, shown.stderr
        status = json.loads(shown.stdout)
        assert status["loop"]["driver"] == "temporal" and status["temporal"]["workflow_id"] == wf
        paused = verb("pause", "--reason", "a look", "--wait", "20", cwd=proj.ws)
        assert paused.returncode == 0, paused.stderr
        assert f"pause sent to {wf}" in paused.stdout and "pause applied" in paused.stdout, paused.stdout
        assert "next Stop" not in paused.stdout
        assert query(server.address, wf)["state"]["values"]["status"] == "paused"
        now = json.loads(verb("status", "--json", cwd=proj.ws).stdout)
        assert now["loop"]["status"] == "paused" and now["loop"]["waiting_for"]["kind"] == "pause"
        resumed = verb("resume", "--wait", "20", cwd=proj.ws)
        assert resumed.returncode == 0 and "resume applied" in resumed.stdout, resumed.stdout + resumed.stderr
        until(
            "task 2's question",
            lambda: [w for w in board(query(server.address, wf))["workers"] if w["status"] == "question"],
        )
        answered = verb("answer", "keep it", cwd=proj.ws)
        assert answered.returncode == 0, answered.stderr
        out, _ = run.communicate(timeout=120)
        assert run.returncode == 0 and "loop completed" in out, out
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        workers.stop()
