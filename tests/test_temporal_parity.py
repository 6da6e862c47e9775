"""The Temporal engine at parity with the local workers, on the dev server with a worker in this
process: a loop that continues as new every two turns completes with every task merged once,
a question asked before a switch answered after it, the monitor's Output panel showing a remote
turn as it runs, and each worker's last turn's lines kept past it; a usage limit handing the
turn to the fallback agent in the same turn; an audit agent rejecting a task once."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "temporalio", reason="the Temporal engine is not installed (pip install 'loopdeck[temporal]')"
)

from tests.temporal_support import REPO, Server, git, many, project, start_server
from tests.test_temporal_workflow import run_loop, spec_for

LIMITED = '''"""An agent held by a usage limit, every call (each call noted in a file)."""
import sys
with open({calls!r}, "a") as f:
    f.write("limited\\n")
print("You've hit your usage limit. Please try again in 600s.", flush=True)
sys.exit(1)
'''

AUDITOR = '''"""An audit agent that rejects each task's first turn, then approves."""
import os, sys
seen = {seen!r}
task = os.environ.get("LOOPDECK_TASK", "?")
prompt = sys.stdin.read()
done = open(seen).read().split() if os.path.exists(seen) else []
with open(seen, "a") as f:
    f.write(task + "\\n")
if task not in done:
    print("REJECTED: task " + task + " has no tests (" + prompt.splitlines()[0] + ")")
    sys.exit(1)
print("approved")
'''


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    yield from start_server(tmp_path)


def independent(tmp_path: Path, count: int, agent_args: str) -> Any:
    """A project whose graph is `count` independent tasks (each its own file)."""
    import shutil

    from loop.demo import graph

    proj = project(tmp_path, tasks=1, agent_args=agent_args)
    shutil.rmtree(proj.ws / "tasks")
    graph.create(proj.ws / "tasks", many(count))
    git(proj.ws, "add", "-A")
    git(proj.ws, "commit", "-qm", "independent tasks")
    git(proj.ws, "push", "-q", "origin", "HEAD:main")
    return proj


def merged_once(proj: Any, count: int) -> None:
    """Every task merged once into the loop's branch, its line written once."""
    log = git(proj.remote, "log", "--format=%s", "main")
    for task in range(1, count + 1):
        assert log.count(f"merge task {task} (") == 1, log
        text = git(proj.remote, "show", f"main:src/part{task}.py")
        assert text.count(f"task {task}: Write part {task}\n") == 1, text


async def until(what: str, check: Callable[[], Any], timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = await check()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.1)


def workers_of(snap: dict[str, Any]) -> list[dict[str, Any]]:
    raw = (snap.get("state") or {}).get("extra", {}).get("parallel") or "{}"
    return list((json.loads(raw) if isinstance(raw, str) else raw).get("workers") or [])


async def monitor_shows_a_remote_turn(address: str, wf: str) -> None:
    """The Temporal monitor's Output panel follows a turn running on a worker elsewhere."""
    from loop.temporal.client import Target
    from tui.temporal import TemporalApp
    from tui.widgets.output import OutputPanel

    app = TemporalApp(Target(address), wf, prompts=False)
    async with app.run_test(size=(160, 48)) as pilot:
        deadline = time.monotonic() + 30
        while True:
            panel = app.screen.query(OutputPanel)
            shown = " ".join(t.plain for t in panel.first().lines) if panel else ""
            if "my key is" in shown:  # the agent's first line, while its turn runs elsewhere
                break
            assert time.monotonic() < deadline, f"no remote output in the panel: {shown!r}"
            await pilot.pause(0.2)
        target = panel.first().target
        assert target is not None and " turn " in target.kind
        folder = app.outputs_root
    assert not folder.exists()  # the monitor's copies go with it


def test_a_loop_continued_as_new_loses_and_repeats_nothing(server: Server, tmp_path: Path) -> None:
    from loop.sources import taskgraph
    from loop.temporal import client as tc

    proj = independent(tmp_path, 6, "--sleep 2.5 2.5 --ask-on 2")
    spec = spec_for(proj, proj.agent, "again", taskgraph.read(proj.ws / "tasks"))
    spec.turns_per_run = 2
    asked: dict[str, Any] = {}

    async def during(client: Any) -> None:
        async def snap() -> dict[str, Any]:
            return await tc.read(client, spec.workflow_id)

        await until("a turn under way", lambda: _running(snap))
        await monitor_shows_a_remote_turn(server.address, spec.workflow_id)
        asking = await until("a worker's question", lambda: _asking(snap))
        # its turn ended: its last lines are the loop's to show, not a heartbeat's
        tails = {t["worker"]: t for t in (await snap())["tails"]}
        assert tails[asking["name"]]["lines"][0].startswith("my key is"), tails
        asked["runs"] = (await snap())["runs"]
        asked["worker"] = asking["name"]
        # the loop goes on and continues as new while the question waits for its answer
        await until("a switch while the question waits", lambda: _runs_after(snap, asked["runs"]))
        assert asking["name"] in {t["worker"] for t in (await snap())["tails"]}  # carried over
        await tc.send(
            client, spec.workflow_id, tc.command("answer", "test", "keep it", target=asking["name"])
        )

    end = asyncio.run(run_loop(server, spec, tmp_path / "work", during))
    assert end["outcome"] == "completed", end
    final = end["final"]
    assert final["tails"] == []  # kept only while a worker is on the board
    assert final["runs"] >= 4, final["runs"]  # continued as new at least three times
    done = [e["data"]["task"] for e in final["events"] if e["kind"] == "task-completed"]
    assert sorted(done) == ["1", "2", "3", "4", "5", "6"]
    answered = [e["data"] for e in final["events"] if e["kind"] == "answered"]
    assert answered and answered[-1]["worker"] == asked["worker"] and answered[-1]["answer"] == "keep it"
    merged_once(proj, 6)


async def _running(snap: Callable[[], Any]) -> bool:
    return any(w["status"] == "running" for w in workers_of(await snap()))


async def _asking(snap: Callable[[], Any]) -> dict[str, Any] | None:
    return next((w for w in workers_of(await snap()) if w["status"] == "question"), None)


async def _runs_after(snap: Callable[[], Any], runs: int) -> bool:
    return int((await snap())["runs"]) > runs


def test_a_fallback_takes_a_limited_turn_over_and_an_audit_agent_rejects_once(
    server: Server, tmp_path: Path
) -> None:
    from dataclasses import replace

    from loop.core.scheduler import Board, board_of, keep
    from loop.sources import taskgraph
    from loop.temporal import protocol

    proj = independent(tmp_path, 2, "")
    calls, seen = tmp_path / "limited.calls", tmp_path / "audited.tasks"
    (tmp_path / "limited.py").write_text(LIMITED.format(calls=str(calls)))
    (tmp_path / "auditor.py").write_text(AUDITOR.format(seen=str(seen)))
    limited = f"{sys.executable} {tmp_path / 'limited.py'}"
    auditor = f"{sys.executable} {tmp_path / 'auditor.py'}"
    spec = spec_for(proj, limited, "parity", taskgraph.read(proj.ws / "tasks"))
    state = protocol.state_from(spec.state)
    board: Board = replace(board_of(state), capacity=1, audit=auditor, audit_kind="agent")
    spec = replace(
        spec, state=protocol.state_json(keep(state, board)), audit_agent=auditor, fallback_agent=proj.agent
    )
    end = asyncio.run(run_loop(server, spec, tmp_path / "work", accepts=(proj.agent, auditor)))
    assert end["outcome"] == "completed", end
    events = end["final"]["events"]
    switched = [e["data"] for e in events if e["kind"] == "agent-switched"]
    # the first turn's agent was limited: the fallback went on in the same turn; the next turns
    # started on the fallback while the limit held (the first agent ran once)
    assert len(switched) == 1 and switched[0]["role"] == "fallback", switched
    assert "usage limit" in switched[0]["reason"] and switched[0]["until"]
    assert calls.read_text() == "limited\n"
    assert not [e for e in events if e["kind"] in ("usage-limit", "worker-failed")]
    rejected = [e["data"] for e in events if e["kind"] == "audit-rejected"]
    assert sorted(r["task"] for r in rejected) == ["1", "2"]  # once each
    assert "has no tests (Audit the work of" in rejected[0]["feedback"]
    assert "(exit 1)" in rejected[0]["feedback"]
    assert len([e for e in events if e["kind"] == "audit-approved"]) == 2
    merged_once(proj, 2)
    assert str(REPO)
