"""Breaks a security review found, each shown closed on the real thing: a workspace's own `loop/`
package never runs as loopdeck, git runs no program the repository names, the verification
allowlist refuses what runs code by other means, a task's files are never pathspec magic, a
Temporal remote is never an option, and the serve token is never on a command line."""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from loop import verify
from loop.drivers import notify, resume
from loop.processes.supervisor import Supervisor
from loop.repo import gitread, gitstate, worktrees
from loop.sources import taskgraph
from loop.store.paths import Workspace
from loop.temporal import remote
from tests.conftest import REPO, Ran
from tui import serve

SOURCES = [p for folder in ("loop", "tui") for p in sorted((REPO / folder).rglob("*.py"))]


def _wait_for(condition: Callable[[], bool], timeout: float = 30.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:g} s: {what}")
        time.sleep(0.02)


# --- 1. a workspace's `loop/` or `tui/` package never runs as loopdeck ---------------------------


@pytest.fixture
def hostile(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace whose own `loop` and `tui` packages leave a marker when imported."""
    ws = tmp_path / "ws"
    marker = tmp_path / "PWNED"
    for name in ("loop", "tui"):
        (ws / name).mkdir(parents=True)
        (ws / name / "__init__.py").write_text(f"open({str(marker)!r}, 'a').write({name!r})\n")
    return ws, marker


def test_every_python_child_is_isolated_in_the_code() -> None:
    """Every argv or command line that starts this Python has `-I` right after it."""
    missing = []
    for path in SOURCES:
        text = path.read_text()
        for found in re.finditer(r"sys\.executable", text):
            after = text[found.end() :]
            listed = re.match(r"\s*,\s*\"([^\"]*)\"", after)  # [sys.executable, "-m", …]
            joined = re.match(r"\)?\}\s+(\S+)", after)  # f"{shlex.quote(sys.executable)} -m …"
            word = listed.group(1) if listed else joined.group(1) if joined else None
            if word is not None and word != "-I":
                line = text.count("\n", 0, found.start()) + 1
                missing.append(f"{path.relative_to(REPO)}:{line}")
    assert not missing, f"python started without -I at {missing}"


def test_the_supervisor_and_a_notification_import_loopdeck_not_the_workspace(
    hostile: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    ws, marker = hostile
    monkeypatch.chdir(ws)
    supervisor = Supervisor()
    try:
        assert supervisor.proc.poll() is None
    finally:
        supervisor.close()
    # The sender runs `cmd:touch` with the message as its last word, in the workspace.
    notify.send_detached(ws, ["cmd:touch"], [{"kind": "completed", "text": "SENT", "iteration": 1}])
    _wait_for(lambda: (ws / "SENT").exists(), what="the notification sender ran")
    assert not marker.exists()


def test_a_runner_started_by_resume_imports_loopdeck_not_the_workspace(
    hostile: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws, marker = hostile
    monkeypatch.chdir(tmp_path)  # `loopdeck -C ws resume` from another folder
    proc = resume._spawn_runner(Workspace(ws))
    assert proc.wait(timeout=60) is not None
    assert not marker.exists()
    assert proc.args[:2] == [sys.executable, "-I"]  # type: ignore[index]


def test_the_serve_child_and_the_monitor_restore_are_isolated() -> None:
    assert shlex.split(serve.child_command())[1:3] == ["-I", "-m"]
    app = (REPO / "tui" / "app.py").read_text()
    assert '[sys.executable, "-I", "-m", "loop.cli", "-C", str(self.workspace.root), "restore"]' in app


# --- 2. git runs no program of the repository ----------------------------------------------------


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def trapped(tmp_path: Path) -> tuple[Path, Path]:
    """A repository whose config and hooks would leave a marker if git ran them."""
    root = tmp_path / "repo"
    root.mkdir()
    marker = tmp_path / "RAN"
    _git(root, "init", "-q", "-b", "main")
    _git(root, "config", "user.name", "t")
    _git(root, "config", "user.email", "t@t")
    (root / "a.txt").write_text("one\n")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "start")
    script = root / ".git" / "fsm.sh"
    script.write_text(f"#!/bin/sh\necho fsmonitor >> {marker}\nexit 1\n")
    script.chmod(0o755)
    _git(root, "config", "core.fsmonitor", str(script))
    ext = root / ".git" / "ext.sh"
    ext.write_text(f"#!/bin/sh\necho ext-diff >> {marker}\n")
    ext.chmod(0o755)
    _git(root, "config", "diff.external", str(ext))
    hooks = root / ".git" / "hooks"
    for hook in (
        "pre-commit",
        "commit-msg",
        "post-commit",
        "post-checkout",
        "post-merge",
        "reference-transaction",
    ):
        (hooks / hook).write_text(f"#!/bin/sh\necho {hook} >> {marker}\n")
        (hooks / hook).chmod(0o755)
    return root, marker


def test_git_runs_no_fsmonitor_and_no_hook(trapped: tuple[Path, Path]) -> None:
    root, marker = trapped
    gitstate.forget_repos()
    (root / "a.txt").write_text("two\n")
    assert gitstate.fingerprint(root) is not None
    assert gitread.status(root).modified == 1
    assert gitstate.commit(root, "loopdeck: work") is not None
    wt = worktrees.ensure(root, "L", "t1", "main")  # worktree add: post-checkout
    (wt.path / "b.txt").write_text("b\n")
    assert worktrees.commit_all(wt, "task") is not None
    assert worktrees.changed_files(wt) == ["b.txt"]
    assert worktrees.merge(root, wt.branch, "merge t1").merged  # merge: post-merge
    assert not marker.exists(), marker.read_text()


def test_no_module_builds_a_git_argv_by_hand() -> None:
    by_hand = re.compile(r"\[\s*(\"git\"|git_program\(\))\s*,")
    found = [
        f"{path.relative_to(REPO)}:{text.count(chr(10), 0, m.start()) + 1}"
        for path in SOURCES
        if path.name != "gitargv.py"
        for text in [path.read_text()]
        for m in by_hand.finditer(text)
    ]
    assert not found, f"git run without the prefix of loop.repo.gitargv at {found}"


# --- 9. the verification allowlist ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        ("ruff check @/outside/argfile", "names an argument file"),
        ("ruff check @inside.txt", "names an argument file"),
        ("npx tsc @file", "names an argument file"),
        ("make test \"PYTEST=perl -e 'print 1'\"", "sets the make variable PYTEST"),
        ("make test 'PYTEST=true #'", "sets the make variable PYTEST"),
        ("make -e test", "lets the environment override"),
        ("pytest --basetemp=.git", "chooses the folder pytest empties"),
        ("pytest --junitxml=.git/hooks/pre-commit", "writes into the .git folder"),
        ("go test -gcflags=all=-N ./...", "compiler flags"),
        ("go test -ldflags=-X=main.x=1 ./...", "compiler flags"),
        ("go test -asmflags=x ./...", "compiler flags"),
        ("go test -toolexec=/bin/x ./...", "runs a tool of its choosing"),
        ("go test -exec=/bin/x ./...", "a program of its choosing"),
        ("go test -overlay=o.json ./...", "replaces the module's go.mod or source files"),
        ("go test -modfile=alt.mod ./...", "replaces the module's go.mod or source files"),
        ("gradle test -Dorg.gradle.jvmargs=-XX:OnOutOfMemoryError=sh", "sets JVM properties"),
        ("./gradlew test -Dexec.executable=sh", "sets JVM properties"),
        ("gradle test -Porg.gradle.jvmargs=-XX:OnError=sh", "one of Gradle's own settings"),
        ("mvn test -Dexec.executable=sh", "only test selection is allowed"),
        ("mvn test -DargLine=-XX:OnOutOfMemoryError=sh", "only test selection is allowed"),
    ],
)
def test_the_allowlist_refuses_what_runs_code_by_other_means(
    tmp_path: Path, command: str, reason: str
) -> None:
    (tmp_path / "node_modules" / ".bin").mkdir(parents=True)
    (tmp_path / "node_modules" / ".bin" / "tsc").write_text("")
    gradlew = tmp_path / "gradlew"
    gradlew.write_text("#!/bin/sh\n")
    gradlew.chmod(0o755)
    with pytest.raises(verify.CommandRefused, match=re.escape(reason)) as refused:
        verify.check(command, cwd=tmp_path)
    assert "a person can allow this exact command" in str(refused.value)


def test_everyday_commands_still_pass(tmp_path: Path) -> None:
    for command in ("make test", "make -j4 test", "pytest -q --junitxml=out.xml", "mvn test -Dtest=Foo"):
        assert verify.check(command, cwd=tmp_path).argv is not None


def test_a_worker_runs_only_what_its_own_person_allowed(tmp_path: Path) -> None:
    """`make`, `npm test`, `pytest` run the repository's code: not on a worker that allowed
    nothing more, whatever the loop asked for."""
    for command in ("make test", "npm test", "pytest -q"):
        with pytest.raises(verify.CommandRefused, match="loopdeck worker --verify-allow"):
            verify.check(command, [], cwd=tmp_path, **verify.on_worker(()))
    assert verify.check("ruff check .", [], cwd=tmp_path, **verify.on_worker(())).argv
    assert verify.check("make test", [], cwd=tmp_path, **verify.on_worker(["make test"])).argv


def test_the_worker_activities_apply_the_workers_own_allowlist(tmp_path: Path) -> None:
    pytest.importorskip("temporalio")
    from loop.temporal.activities import Activities, Settings

    acts = Activities(Settings(work_dir=tmp_path))
    with pytest.raises(verify.CommandRefused, match="this worker runs only"):
        verify.check("make test", acts.allowed(["make test"]), cwd=tmp_path, **acts.own_allowlist())


# --- 10. a task's target_files -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "why"),
    [
        (":/", "git pathspec magic"),
        (":(glob)**", "git pathspec magic"),
        ("/etc/passwd", "an absolute path"),
        ("../other/.env", "a path out of the workspace"),
        ("src/../../x", "a path out of the workspace"),
    ],
)
def test_target_files_are_workspace_paths(tmp_path: Path, entry: str, why: str) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    _git(root, "init", "-q")
    graph = root / "graph.json"
    graph.write_text(
        json.dumps([{"id": "1", "subject": "x", "metadata": {"target_files": ["ok.py", entry]}}])
    )
    with pytest.raises(taskgraph.GraphError, match=re.escape(why)) as refused:
        taskgraph.read(graph)
    assert f"task 1: target_files entry {entry!r}" in str(refused.value)
    tasks_folder = root / "tasks"
    tasks_folder.mkdir()
    (tasks_folder / "1.json").write_text(json.dumps({"id": "1", "subject": "x", "target_files": [entry]}))
    with pytest.raises(taskgraph.GraphError, match=re.escape(why)):
        taskgraph.read(tasks_folder)


def test_a_task_file_named_like_magic_is_committed_as_a_file(tmp_path: Path) -> None:
    from loop.drivers import parallel

    root = tmp_path / "repo"
    root.mkdir()
    _git(root, "init", "-q")
    _git(root, "config", "user.name", "t")
    _git(root, "config", "user.email", "t@t")
    (root / "base").write_text("x")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "start")
    (root / "mine.txt").write_text("mine")
    (root / ".env.local").write_text("SECRET=1")
    assert parallel.commit_files(root, ("mine.txt",), "task") is not None
    assert _git(root, "show", "--name-only", "--format=", "HEAD").split() == ["mine.txt"]
    assert "?? .env.local" in _git(root, "status", "--short")


# --- 11. a Temporal remote -----------------------------------------------------------------------


def test_a_remote_that_is_an_option_never_reaches_git(tmp_path: Path) -> None:
    marker = tmp_path / "PWN"
    cache = remote.Cache(tmp_path / "cache")
    bare = tmp_path / "cache" / "repos" / "x.git"
    bare.mkdir(parents=True)
    _git(bare, "init", "-q", "--bare")
    for bad in (
        f"--upload-pack=touch {marker}; false",
        "ext::sh -c touch% /tmp/x",
        "ssh://-oProxyCommand=x/y",
    ):
        with pytest.raises(remote.GitProblem, match="remote"):
            cache.fetch(bare, bad)
        with pytest.raises(remote.GitProblem):
            cache.repo(bad)
        with pytest.raises(remote.GitProblem):
            remote.push(bare, bad, "0" * 40, "b", None)
    assert not marker.exists()
    for good in ("https://example.com/a/b.git", "git@example.com:a/b.git", "ssh://git@h/x", "/srv/x.git"):
        assert remote.remote_problem(good) is None
    assert remote.remote_problem("FILE:///srv/x.git") is not None  # git would run git-remote-FILE


# --- 13. the serve token -------------------------------------------------------------------------


def test_a_token_on_the_command_line_is_refused(cli: Callable[..., Ran], tmp_path: Path) -> None:
    ran = cli("serve", "--token", "a-long-secret-token")
    assert ran.code == 1 and "--token-file" in ran.err and serve.TOKEN_ENV in ran.err
    assert ran.out == ""
    shared = tmp_path / "token"
    shared.write_text("a-long-secret-token\n")
    shared.chmod(0o644)
    ran = cli("serve", "--token-file", str(shared))
    assert ran.code == 1 and "can be read by others" in ran.err and "chmod 600" in ran.err


def _descendants(pid: int) -> list[int]:
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        children = [p for p, parent in parents.items() if parent == current]
        found += children
        todo += children
    return found


def _cmdline(pid: int) -> str:
    try:
        return (
            (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except OSError:
        return ""


async def test_no_process_of_serve_has_the_token_in_its_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import aiohttp

    from tests.test_serve import serving

    token = "a-token-from-a-private-file"
    file = tmp_path / "token"
    file.write_text(token + "\n")
    file.chmod(0o600)
    async with (
        serving(tmp_path, monkeypatch, None, "--token-file", str(file)) as served,
        aiohttp.ClientSession() as session,
    ):
        assert "open http" in await served.printed()
        assert token not in _cmdline(served.proc.pid)
        async with session.ws_connect(f"{served.base}/ws?token={token}&width=80&height=24") as socket_:
            deadline = time.monotonic() + 30
            while not any("tui.serve" in _cmdline(p) for p in _descendants(served.proc.pid)):
                assert time.monotonic() < deadline, "no monitor process started"
                await asyncio.sleep(0.05)
            lines = [_cmdline(p) for p in _descendants(served.proc.pid)]
            assert all(token not in line for line in lines)
            monitor = next(line for line in lines if "tui.serve" in line)
            assert " -I -m tui.serve" in monitor
            environ = (Path("/proc") / str(_monitor_pid(served.proc.pid)) / "environ").read_bytes()
            assert token.encode() not in environ
            await socket_.close()


def _monitor_pid(pid: int) -> int:
    return next(p for p in _descendants(pid) if "tui.serve" in _cmdline(p))
