"""The hook server: after the first Stop, each Stop is answered by a child of a server that has
loopdeck imported already, and the answer, the state and the journal are the ones the Stop's own
process would have made.

Each test runs its own copy of the `loop` package (a server is named for its install), proven
to answer by the client's own imports (`-X importtime`: the client never imported the hook), and
stops every server of its copy when it ends.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from loop.drivers import hook_client
from loop.store.paths import Workspace
from loop.store.state import StateStore
from tests.conftest import REPO, run_loopdeck

IMPORTED_THE_HOOK = re.compile(r"\|\s+loop\.drivers\.hook$", re.MULTILINE)


def servers_of(launcher: Path) -> list[int]:
    """Every process running the server of this copy of loopdeck."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if str(launcher).encode() in argv and b"hook-server" in argv:
                found.append(int(entry))
    return found


def await_(condition: Callable[[], object], what: str, timeout: float = 30.0) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = condition()
        if got:
            return got
        time.sleep(0.02)
    raise AssertionError(f"never: {what}")


def listening(launcher: Path) -> int | None:
    """The pid of the server listening for this copy, as the kernel names it; None if none."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(hook_client.address(str(launcher.parent), sys.executable, os.getuid()))
        except OSError:
            return None
        creds = probe.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
        return int.from_bytes(creds[:4], sys.byteorder)


@pytest.fixture
def launcher(tmp_path: Path) -> Iterator[Path]:
    """A copy of the `loop` package (its bytecode too): its launcher, as `install` would name it.
    Every server of the copy is stopped at the end."""
    copy = tmp_path / "install" / "loop"
    shutil.copytree(REPO / "loop", copy)
    path = copy / "launcher.py"
    yield path
    for pid in servers_of(path):
        os.kill(pid, signal.SIGTERM)
    await_(lambda: not servers_of(path), "the servers left")


@pytest.fixture
def project(ws: Workspace, tmp_path: Path) -> Workspace:
    (ws.root / "TODO.md").write_text("- [ ] one task left\n")
    started = run_loopdeck("start", "x", "--task-file", "TODO.md", "--no-github", "--no-tasks", cwd=ws.root)
    assert started.returncode == 0, started.stderr
    return ws


def stop(
    launcher: Path, ws: Workspace, flags: tuple[str, ...] = (), preexec: Callable[[], None] | None = None
) -> tuple[dict[str, object], str]:
    """One Stop through the copy's launcher, with the server allowed: its answer and stderr."""
    env = {key: value for key, value in os.environ.items() if key != hook_client.ENV}
    payload = {
        "session_id": "s",
        "transcript_path": str(ws.root / "transcript.jsonl"),
        "cwd": str(ws.root),
        "hook_event_name": "Stop",
        "stop_hook_active": False,
    }
    done = subprocess.run(
        [sys.executable, *flags, "-I", "-S", str(launcher), "stop"],
        cwd=ws.root,
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        preexec_fn=preexec,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 1, done.stdout + done.stderr
    return json.loads(lines[0]), done.stderr


def iteration(ws: Workspace) -> int:
    state = StateStore(ws).read()
    assert state is not None
    return state.iteration


pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the hook server is Linux's")


def test_the_first_stop_starts_the_server_and_the_next_is_answered_by_it_as_in_process(
    launcher: Path, project: Workspace
) -> None:
    first, err = stop(launcher, project, ("-X", "importtime"))
    assert IMPORTED_THE_HOOK.search(err), "the first Stop is answered in its own process"
    assert first["decision"] == "block" and "one task left" in str(first["reason"])
    before = iteration(project)
    server = await_(lambda: listening(launcher), "a server listens")

    second, err = stop(launcher, project, ("-X", "importtime"))
    assert "loop.drivers.hook_client" in err and not IMPORTED_THE_HOOK.search(err), err
    for heavy in ("json", "re", "pathlib", "datetime", "loop.core.engine"):
        assert not re.search(rf"\|\s+{re.escape(heavy)}$", err, re.MULTILINE), f"the client imported {heavy}"
    assert second["decision"] == "block" and "one task left" in str(second["reason"])
    assert iteration(project) == before + 1
    state = StateStore(project).read()
    assert state is not None and state.pid == os.getpid(), "the session is the client's parent"
    assert listening(launcher) == server
    third, err = stop(launcher, project)
    assert err == "" and third["decision"] == "block" and iteration(project) == before + 2


def test_a_server_whose_code_changed_leaves_and_the_stop_is_answered_by_the_new_code(
    launcher: Path, project: Workspace
) -> None:
    stop(launcher, project)
    old = await_(lambda: listening(launcher), "a server listens")
    hook = launcher.parent / "drivers" / "hook.py"
    hook.write_text(hook.read_text() + "\n# an upgrade\n")

    answer, err = stop(launcher, project, ("-X", "importtime"))
    assert IMPORTED_THE_HOOK.search(err), "answered in its own process, by the new code"
    assert answer["decision"] == "block"
    await_(lambda: old not in servers_of(launcher), "the old server left")
    new = await_(lambda: listening(launcher), "a new server listens")
    assert new != old


def test_a_stop_the_server_is_too_slow_to_take_is_answered_once_in_process(
    launcher: Path, project: Workspace
) -> None:
    """A server that takes the Stop only after the client gave up waiting gets nothing from it:
    neither the request (nothing to run) nor the client's stdio (Claude Code's pipes close when
    the client exits)."""
    fake = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    fake.bind(hook_client.address(str(launcher.parent), sys.executable, os.getuid()))
    fake.listen(1)
    accepted: list[socket.socket] = []
    taker = threading.Thread(target=lambda: accepted.append(fake.accept()[0]))
    taker.start()
    before = iteration(project)
    try:
        answer, err = stop(launcher, project, ("-X", "importtime"))
        assert IMPORTED_THE_HOOK.search(err) and answer["decision"] == "block"
        assert iteration(project) == before + 1
        taker.join(timeout=30)
        conn = accepted[0]
        with contextlib.suppress(BrokenPipeError):  # the client is long gone
            conn.sendall(hook_client.TAKEN)
        assert conn.recv(1 << 16) == b"", "the client sent a request it answered itself"
        conn.close()
        # The server the client started found the name taken: let it leave before the fake does.
        await_(lambda: not servers_of(launcher), "the server started meanwhile left")
    finally:
        fake.close()
    assert iteration(project) == before + 1


def test_the_server_keeps_the_stops_resource_limits(launcher: Path, project: Workspace) -> None:
    """A Stop that may not write (as on a full disk) fails as safely through the server as it
    does in its own process: the server's child takes on the client's limits."""

    def full_disk() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))

    stop(launcher, project)
    await_(lambda: listening(launcher), "a server listens")
    state = (project.claude_dir / "orchestrator-loop.local.md").read_bytes()
    answer, err = stop(launcher, project, ("-X", "importtime"), preexec=full_disk)
    assert not IMPORTED_THE_HOOK.search(err), "answered by the server"
    assert "decision" not in answer and "failed" in str(answer.get("systemMessage")), answer
    assert (project.claude_dir / "orchestrator-loop.local.md").read_bytes() == state
