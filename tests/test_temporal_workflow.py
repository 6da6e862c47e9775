"""The loop's workflow on the dev server with a worker in this process: the graph read again when
a merge changed it (a worker added a task, which is done too), and a person's stop ending the
loop and the turn under way (its agent ends with it)."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "temporalio", reason="the Temporal engine is not installed (pip install 'loopdeck[temporal]')"
)

from tests.temporal_support import REPO, Server, project, start_server

GROWER = '''"""The demo worker that, on task 1, also adds task 9 to the graph in its branch."""
import json, os, sys
sys.path.insert(0, {repo!r})
prompt = sys.stdin.read()
if "Your task (1)" in prompt:
    with open(os.path.join("tasks", "9.json"), "w") as f:
        json.dump({{"id": "9", "subject": "Found while working", "status": "pending", "blockedBy": ["1"],
                   "metadata": {{"target_files": ["src/nine.py"]}}}}, f)
from loop.demo.worker import main
import io
sys.stdin = io.StringIO(prompt)
sys.exit(main(sys.argv[1:]))
'''


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    yield from start_server(tmp_path)


def spec_for(proj: Any, agent: str, queue: str, tasks: list[Any]) -> Any:
    from loop.core.model import LoopState
    from loop.core.scheduler import WORKTREE, Board, keep
    from loop.temporal import protocol

    state = LoopState.new("Build it", check_tasks=False, check_github=False)
    board = Board(graph="tasks", capacity=2, isolation=WORKTREE, loop_branch="main")
    return protocol.LoopSpec(
        workflow_id=f"wf-{queue}",
        state=protocol.state_json(keep(state, board)),
        tasks=[protocol.task_json(t) for t in tasks],
        remote=str(proj.remote),
        loop_branch="main",
        loop_name="t",
        graph="tasks",
        agent=agent,
        task_queue=queue,
        heartbeat_timeout_s=5,
        idle_s=0.5,
    )


async def run_loop(
    server: Server,
    spec: Any,
    work: Path,
    during: Any = None,
    accepts: tuple[str, ...] = (),
    timeout: float = 60,
) -> dict[str, Any]:
    from loop.temporal import client as tc
    from loop.temporal.worker import WorkerOptions, _run

    target = tc.Target(server.address, task_queue=spec.task_queue)
    client = await tc.connect(target)
    handle, started = await tc.start(client, target, spec)
    assert started
    stop = asyncio.Event()
    options = WorkerOptions(target, work, agents=(spec.agent, *accepts), concurrency=2, heartbeat_s=0.5)
    serving = asyncio.create_task(_run(options, [], stop))
    try:
        if during is not None:
            await during(client)
        result: dict[str, Any] = await asyncio.wait_for(handle.result(), timeout)
        return result
    finally:
        stop.set()
        await asyncio.wait_for(serving, 30)


def test_a_task_a_worker_adds_to_the_graph_is_read_again_and_done(server: Server, tmp_path: Path) -> None:
    from loop.demo import graph
    from loop.sources import taskgraph
    from loop.temporal import client as tc

    proj = project(tmp_path, tasks=3)
    script = tmp_path / "grower.py"
    script.write_text(GROWER.format(repo=str(REPO)))
    agent = f"{sys.executable} {script}"
    assert graph  # the project's graph is the demo's first three tasks
    spec = spec_for(proj, agent, "grow", taskgraph.read(proj.ws / "tasks"))
    end = asyncio.run(run_loop(server, spec, tmp_path / "work"))
    assert end["outcome"] == "completed" and end["reason"] == "all 4 tasks completed"

    async def look() -> dict[str, Any]:
        return await tc.read(await tc.connect(tc.Target(server.address)), spec.workflow_id)

    done = [e["data"]["task"] for e in asyncio.run(look())["events"] if e["kind"] == "task-completed"]
    assert sorted(done) == ["1", "2", "3", "9"]


def test_a_stop_ends_the_loop_and_the_turn_under_way(server: Server, tmp_path: Path) -> None:
    import psutil

    from loop.sources import taskgraph
    from loop.temporal import client as tc

    proj = project(tmp_path, tasks=1)
    agent = f"{sys.executable} -m loop.demo.worker --hang-on 1"
    spec = spec_for(proj, agent, "stop", taskgraph.read(proj.ws / "tasks"))

    def agent_alive(p: psutil.Process) -> bool:
        try:
            return "loop.demo.worker" in " ".join(p.cmdline()) and p.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:  # ended (or a zombie) between the listing and the look
            return False

    def hanging() -> list[psutil.Process]:
        return [p for p in psutil.Process().children(recursive=True) if agent_alive(p)]

    async def stop(client: Any) -> None:
        deadline = time.monotonic() + 30
        while not hanging():
            assert time.monotonic() < deadline, "the agent never started"
            await asyncio.sleep(0.1)
        await tc.send(client, spec.workflow_id, tc.command("stop", "test", "enough"))
        deadline = time.monotonic() + 20
        while hanging():  # the turn's cancellation reached the worker, which ended its agent
            assert time.monotonic() < deadline, "the agent outlived the stopped loop"
            await asyncio.sleep(0.1)

    end = asyncio.run(run_loop(server, spec, tmp_path / "work", stop))
    assert end["outcome"] == "stopped"
    assert str(REPO)  # the agent ran from this checkout (PYTHONPATH)
