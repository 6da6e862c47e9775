"""The hook server: after the first Stop, each Stop is answered by a child of a server that has
loopdeck imported already, and the answer, the state and the journal are the ones the Stop's own
process would have made.

Each test runs its own copy of the `loop` package (a server is named for its install), proven
to answer by the client's own imports (`-X importtime`: the client never imported the hook), and
stops every server of its copy when it ends.
"""

from __future__ import annotations

import contextlib
import ctypes
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
from tests.conftest import REPO, hook_servers, run_loopdeck, stop_hook_servers, stop_payload

IMPORTED_THE_HOOK = re.compile(r"\|\s+loop\.drivers\.hook$", re.MULTILINE)


def await_(condition: Callable[[], object], what: str, timeout: float = 30.0) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = condition()
        if got:
            return got
        time.sleep(0.02)
    raise AssertionError(f"never: {what}")


def listening(launcher: Path) -> int | None:
    """The pid of the server listening for this copy, as the kernel names it; None if none.
    Asked of the kernel's table of sockets, not by connecting: a connection is a Stop to the
    server, handed to its spare (which leaves with it, and the next spare is forked after)."""
    name = "@" + hook_client.address(str(launcher.parent), sys.executable, os.getuid())[1:].decode()
    inodes = set()
    for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 8 and fields[7] == name and int(fields[3], 16) & 0x10000:  # listening
            inodes.add(f"socket:[{fields[6]}]")
    holders = set()
    for pid in hook_servers(launcher):
        with contextlib.suppress(OSError):
            if any(os.readlink(f"/proc/{pid}/fd/{fd}") in inodes for fd in os.listdir(f"/proc/{pid}/fd")):
                holders.add(pid)
    servers = [
        pid for pid in holders if parent_of(pid) not in holders
    ]  # not a child, forked still holding it
    return servers[0] if len(servers) == 1 else None


@pytest.fixture
def launcher(tmp_path: Path) -> Iterator[Path]:
    """A copy of the `loop` package (its bytecode too): its launcher, as `install` would name it.
    Every server of the copy is stopped at the end."""
    copy = tmp_path / "install" / "loop"
    shutil.copytree(REPO / "loop", copy)
    path = copy / "launcher.py"
    yield path
    stop_hook_servers(path)
    await_(lambda: not hook_servers(path), "the servers left")


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
    payload = stop_payload(ws)
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
    await_(lambda: old not in hook_servers(launcher), "the old server left")
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
        await_(lambda: not hook_servers(launcher), "the server started meanwhile left")
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


def children_of(pid: int) -> list[int]:
    """The processes whose parent is `pid` (the server's children: one per Stop it runs)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_bytes()
            except OSError:
                continue
            if int(stat.rsplit(b")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def payload_of(ws: Workspace) -> str:
    return json.dumps(
        {
            "session_id": "s",
            "transcript_path": str(ws.root / "transcript.jsonl"),
            "cwd": str(ws.root),
            "hook_event_name": "Stop",
            "stop_hook_active": False,
        }
    )


def test_a_server_whose_queue_is_full_never_holds_a_stop(launcher: Path, project: Workspace) -> None:
    """A server that stopped accepting (SIGSTOPped, frozen) fills its queue with the Stops that
    gave up on it; the next Stop's connect must not wait for room there forever."""
    fake = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    fake.bind(hook_client.address(str(launcher.parent), sys.executable, os.getuid()))
    fake.listen(0)
    queued: list[socket.socket] = []
    try:
        while True:  # fill the queue as the Stops that waited on a stopped server did
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            probe.setblocking(False)
            try:
                probe.connect(hook_client.address(str(launcher.parent), sys.executable, os.getuid()))
            except BlockingIOError:
                probe.close()
                break
            queued.append(probe)
        env = {key: value for key, value in os.environ.items() if key != hook_client.ENV}
        done = subprocess.run(
            [sys.executable, "-I", "-S", str(launcher), "stop"],
            cwd=project.root,
            input=payload_of(project),
            capture_output=True,
            text=True,
            env=env,
            timeout=20,  # answered in its own process in well under that; a hang never ends
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["decision"] == "block"
        await_(lambda: not hook_servers(launcher), "the server started meanwhile left")
    finally:
        for probe in queued:
            probe.close()
        fake.close()


def test_a_stop_killed_while_the_server_runs_it_leaves_claude_codes_pipes(
    launcher: Path, project: Workspace
) -> None:
    """Claude Code kills a Stop that runs past its timeout (or is interrupted) and waits for its
    pipes to close: the server's child running that Stop leaves with it, as a Stop answered in
    its own process would have died."""
    import fcntl
    import select

    stop(launcher, project)
    server = await_(lambda: listening(launcher), "a server listens")
    assert isinstance(server, int)
    env = {key: value for key, value in os.environ.items() if key != hook_client.ENV}
    with open(project.lock, "a+b") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # the Stop waits for the loop's lock (15 s)
        client = subprocess.Popen(
            [sys.executable, "-I", "-S", str(launcher), "stop"],
            cwd=project.root,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        assert client.stdin is not None and client.stdout is not None
        client.stdin.write(payload_of(project).encode())
        client.stdin.close()

        def running() -> list[int]:  # a child that took on the Stop's folder runs it
            return [
                pid
                for pid in children_of(server)
                if os.path.realpath(f"/proc/{pid}/cwd") == os.path.realpath(project.root)
            ]

        child = await_(running, "the server's child runs the Stop")
        client.kill()
        client.wait(timeout=30)
        ready, _, _ = select.select([client.stdout], [], [], 5.0)
        assert ready and client.stdout.read() == b"", "Claude Code's pipe held open by the server"
        assert isinstance(child, list)
        await_(lambda: not any(os.path.exists(f"/proc/{pid}") for pid in child), "the child left")


def test_a_stop_of_a_loopdeck_runs_agent_starts_no_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner kills everything its agent leaves after each turn (it is their subreaper): a
    server started by that agent's Stop would die there, with the Stops of other sessions it
    was running. Such a Stop starts none; any other does."""
    spawned: list[list[str]] = []
    monkeypatch.setattr(os, "posix_spawn", lambda path, argv, env, **kw: spawned.append(argv))
    monkeypatch.setenv("LOOPDECK_RUN", "0123456789abcdef.1")
    hook_client.start_server()
    assert spawned == []
    monkeypatch.delenv("LOOPDECK_RUN")
    hook_client.start_server()
    assert len(spawned) == 1 and spawned[0][-1] == "hook-server"


def test_the_run_mark_is_the_sweeps() -> None:
    from loop.processes import sweep

    assert hook_client.RUN_MARK == sweep.MARK


def test_a_server_whose_code_changed_while_it_imported_it_never_serves() -> None:
    """An upgrade under way while the server imports loopdeck: a module may be imported old and
    stat'ed new, and then no later change is ever seen. The server compares with the files as
    they were before its imports, and leaves at once (before it binds or changes anything)."""
    from loop.drivers import hook_entry, hook_server

    before = hook_entry.sources()
    assert set(hook_server.loaded()) <= set(before)
    path = next(iter(hook_server.loaded()))
    mtime, size = before[path]
    before[path] = (mtime - 1_000_000_000, size)  # the file as it was before the upgrade
    assert hook_server.main(before) == 0
    assert os.getcwd() != "/"


def test_a_stop_confined_otherwise_than_the_server_is_answered_in_its_own_process(
    launcher: Path, project: Workspace
) -> None:
    """A Stop whose process may gain no privileges is not run by a server that may: it would
    run outside its process's confinement (the same for seccomp and mount namespaces)."""

    def no_new_privileges() -> None:
        ctypes.CDLL(None, use_errno=True).prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS

    stop(launcher, project)
    server = await_(lambda: listening(launcher), "a server listens")
    before = iteration(project)
    answer, err = stop(launcher, project, ("-X", "importtime"), preexec=no_new_privileges)
    assert IMPORTED_THE_HOOK.search(err), "a server confined otherwise ran the Stop"
    assert answer["decision"] == "block" and iteration(project) == before + 1
    assert listening(launcher) == server


def test_stopping_the_servers_of_a_copy_is_no_error_when_one_left_meanwhile(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A server listed as running can leave before its signal (a newer code's Stop took over):
    the suites' teardown stops the others and raises nothing."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    monkeypatch.setattr("tests.conftest.hook_servers", lambda launcher: [gone.pid])
    stop_hook_servers(REPO / "loop" / "launcher.py")


def parent_of(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def waiting(pid: int) -> bool:
    """Whether `pid` sleeps on a socket (a spare done making its pages its own, waiting for its
    Stop), as far as the kernel shows it."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        channel = Path(f"/proc/{pid}/wchan").read_text()
    except (OSError, IndexError):
        return False
    return state == "S" and (channel in ("", "0") or "unix" in channel)


def the_spare(launcher: Path, server: int) -> int:
    """The one child of `server` (its spare) once it waits for a Stop, alone: the Stop before
    it answered and gone."""

    def alone_and_waiting() -> int | None:
        children = [pid for pid in hook_servers(launcher) if parent_of(pid) == server]
        return children[0] if len(children) == 1 and waiting(children[0]) else None

    found = await_(alone_and_waiting, "a spare waits, alone")
    assert isinstance(found, int)
    return found


def left_with_its_stop(launcher: Path, spare: int) -> None:
    await_(lambda: spare not in hook_servers(launcher), "the spare left with its Stop")


def test_a_stop_is_answered_by_the_spare_forked_before_it(launcher: Path, project: Workspace) -> None:
    """The server forks each Stop's child ahead of the Stop; the Stop handed to it is answered
    as any (by the server's code, not the client's), the spare leaves with it, and the next one
    waits."""
    stop(launcher, project)
    server = await_(lambda: listening(launcher), "a server listens")
    assert isinstance(server, int)
    for _ in range(2):
        spare = the_spare(launcher, server)
        before = iteration(project)
        answer, err = stop(launcher, project, ("-X", "importtime"))
        assert not IMPORTED_THE_HOOK.search(err), "the client answered the Stop itself"
        assert answer["decision"] == "block" and iteration(project) == before + 1
        left_with_its_stop(launcher, spare)
    assert listening(launcher) == server


def test_the_next_spare_is_forked_once_the_stop_before_it_is_answered(
    launcher: Path, project: Workspace
) -> None:
    """Making a spare (a fork, its pages made its own) takes a core: on a busy machine it took
    it from the Stop being answered. The next spare waits until that Stop has its answer, or a
    second for one that waits longer (here: for a person's answer)."""
    from loop.store.journal import Journal

    stop(launcher, project)
    server = await_(lambda: listening(launcher), "a server listens")
    assert isinstance(server, int)
    busy = the_spare(launcher, server)
    env = {key: value for key, value in os.environ.items() if key != hook_client.ENV}
    payload = {**stop_payload(project), "last_assistant_message": "<question>SQLite or Postgres?</question>"}
    asking = subprocess.Popen(
        [sys.executable, "-I", "-S", str(launcher), "stop"],
        cwd=project.root,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**env, "LOOPDECK_QUESTION_WAIT": "30"},
    )
    sent = time.monotonic()
    assert asking.stdin is not None
    asking.stdin.write(json.dumps(payload))
    asking.stdin.close()

    def children() -> list[int]:
        return [pid for pid in hook_servers(launcher) if parent_of(pid) == server]

    def asked() -> bool:
        return any(e.kind == "question" for e in Journal(project.journal).tail(20).events)

    await_(asked, "the Stop asks, and waits for the answer")
    if time.monotonic() - sent < 0.8:  # (a machine this slow cannot tell)
        assert children() == [busy], "a spare was forked beside the Stop being answered"
    await_(lambda: len(children()) == 2, "past a second, the next spare beside the waiting Stop")
    assert run_loopdeck("answer", "SQLite", cwd=project.root).returncode == 0
    assert asking.stdout is not None and asking.stderr is not None
    out, err = asking.stdout.read(), asking.stderr.read()  # the Stop waits 30 s at most
    assert asking.wait(timeout=30) == 0
    assert json.loads(out)["reason"].startswith("A PERSON ANSWERED YOUR QUESTION:\nSQLite"), err


def test_a_spare_leaves_with_its_server(launcher: Path, project: Workspace) -> None:
    stop(launcher, project)
    server = await_(lambda: listening(launcher), "a server listens")
    assert isinstance(server, int)
    spare = the_spare(launcher, server)
    os.kill(server, signal.SIGTERM)
    await_(lambda: spare not in hook_servers(launcher), "the spare left")


def test_a_spare_owns_its_pages_before_its_stop_touches_them() -> None:
    """A child forked at the Stop copies every page of the server the Stop writes, one fault
    at a time; a spare has them all copied while it waits: writing them faults on (almost)
    none."""
    from loop.drivers import hook_server

    pages = bytearray(8 << 20)  # the server's memory: resident, shared with a child at fork
    for at in range(0, len(pages), 4096):
        pages[at] = 1

    def faults_writing(own: bool) -> int:
        def measure() -> int:
            if own:
                hook_server.own_pages()
            before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            for at in range(0, len(pages), 4096):
                pages[at] = 2
            return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

        return in_a_child(measure)

    if not hook_server.own_pages():  # in this process: says whether the kernel can
        pytest.skip("this kernel cannot populate pages ahead (MADV_POPULATE_WRITE, Linux 5.14)")
    count = len(pages) // 4096
    assert faults_writing(own=False) >= count // 2  # the copy, page by page, as a Stop pays it
    assert faults_writing(own=True) < count // 20


def test_a_spare_leaves_a_reservation_it_never_touched_as_it_is() -> None:
    """A mapping mostly untouched (a thread's stack, an arena's tail) is not made real memory."""
    import mmap

    from loop.drivers import hook_server

    if not hook_server.own_pages():
        pytest.skip("this kernel cannot populate pages ahead (MADV_POPULATE_WRITE, Linux 5.14)")

    def measure() -> int:
        reserved = mmap.mmap(-1, 64 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)  # never touched
        reserved[0] = 1  # one page of it in use
        before = anonymous_kb()
        hook_server.own_pages()
        return anonymous_kb() - before

    assert in_a_child(measure) < 32 << 10, "the 64 MiB reservation was made real"


def anonymous_kb() -> int:
    with open("/proc/self/smaps_rollup") as rollup:
        return next(int(line.split()[1]) for line in rollup if line.startswith("Anonymous:"))


def in_a_child(measure: Callable[[], int]) -> int:
    """`measure()` in a child forked from this process (as a spare is from its server)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.write(write, str(measure()).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as said:
        got = int(said.read())
    os.waitpid(pid, 0)
    return got
