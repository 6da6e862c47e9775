"""The hook and the CLI in a hostile workspace: symlinks where loopdeck's files go, FIFOs, a file
for a folder, a read-only or full disk, a state nested too deep, a transcript with no newline,
hook input naming no usable path.

Each is run exactly as installed (`<python> -I -S <loop>/launcher.py stop`, `loopdeck VERB`), in
a real process. The hook exits 0 with at most one JSON object on stdout, writes nothing that is
not its own, and says why in one clear line (in the journal when it can be written); the CLI
exits 1 with one line on stderr. Never a traceback, anywhere.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import resource
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from loop.cli.install import hook_runner
from loop.core.errors import LoopdeckError
from loop.core.model import LoopState
from loop.store import control
from loop.store.journal import Journal
from loop.store.paths import Workspace
from loop.store.state import StateStore
from tests.conftest import REPO, stop_payload
from tests.test_control import person

NESTED = "---\niteration: 1\nmax_iterations: 0\nx: " + "[" * 100_000 + "\n---\nbody\n"


@pytest.fixture
def project(ws: Workspace, tmp_path: Path) -> Workspace:
    """A loop with one task left, and a transcript."""
    (ws.root / "TODO.md").write_text("- [ ] one task left\n")
    (ws.root / "transcript.jsonl").write_text("")
    (tmp_path / "claude-home").mkdir()
    (tmp_path / "outside").mkdir()
    state = LoopState.new("x", task_file="TODO.md", check_github=False, check_tasks=False, max_iterations=0)
    StateStore(ws).write(state)
    from loop import trust

    trust.record(ws, state, "test")  # a person here started it
    Journal(ws.journal).append("loop-started", 0, {"max_iterations": 0, "prompt": "x"})
    return ws


def _env(ws: Workspace) -> dict[str, str]:
    home = ws.root.parent / "claude-home"
    return {
        **os.environ,
        "CLAUDE_CONFIG_DIR": str(home),
        "CLAUDE_PROJECT_DIR": str(ws.root),
        "CLAUDE_CODE_STOP_HOOK_BLOCK_CAP": "0",
        "LOOPDECK_QUESTION_WAIT": "0",
        "LOOPDECK_REPO": str(REPO),
        "PATH": f"{REPO / 'tests' / 'fakes'}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(REPO),
    }


def _full_disk(limit: int = 0) -> Callable[[], None]:
    """No file may grow past `limit` bytes: writes fail as on a full disk (EFBIG, the signal
    that would kill the process ignored), in the child only."""

    def preexec() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return preexec


def _snapshot(folder: Path) -> dict[str, bytes | str]:
    """What a folder holds (a FIFO is never opened), to prove nothing in it was touched."""
    out: dict[str, bytes | str] = {}
    for path in sorted(folder.rglob("*")):
        key = str(path.relative_to(folder))
        if path.name == "orchestrator-loop.lock":
            continue  # the lock's holder writes its pid there: no content of anyone's
        if path.is_symlink():
            out[key] = "-> " + os.readlink(path)
        elif path.is_file():
            out[key] = path.read_bytes()
        else:
            out[key] = "folder" if path.is_dir() else "special"
    return out


# --- making a folder read-only, for root too -------------------------------------------------

_RO_HELPER = (
    "import os, subprocess, sys\n"
    "folder = sys.argv[1]\n"
    "subprocess.run(['mount', '--bind', folder, folder], check=True)\n"
    "subprocess.run(['mount', '-o', 'remount,bind,ro', folder], check=True)\n"
    "os.execvp(sys.argv[2], sys.argv[2:])\n"
)


def _read_only_prefix(folder: Path) -> list[str] | None:
    """argv to put in front of a command so that it sees `folder` read-only, as root too (root
    ignores permissions: a private mount namespace with a read-only bind mount instead), or
    None where neither way is open."""
    if os.geteuid() != 0:
        return []
    unshare = shutil.which("unshare")
    if unshare is None or shutil.which("mount") is None:
        return None
    probe = subprocess.run(
        [unshare, "-m", "--", sys.executable, "-c", _RO_HELPER, str(folder), "true"],
        capture_output=True,
        timeout=30,
    )
    return (
        [unshare, "-m", "--", sys.executable, "-c", _RO_HELPER, str(folder)]
        if probe.returncode == 0
        else None
    )


@contextlib.contextmanager
def read_only(folder: Path) -> Iterator[list[str]]:
    prefix = _read_only_prefix(folder)
    if prefix is None:
        pytest.skip(
            "no way to make a folder read-only for root here (no unshare/mount); the in-process test covers it"
        )
    mode = folder.stat().st_mode
    if not prefix:
        folder.chmod(0o555)
    try:
        yield prefix
    finally:
        folder.chmod(mode)


# --- the Stop hook ---------------------------------------------------------------------------


def stop(
    ws: Workspace,
    payload: dict[str, Any] | None = None,
    prefix: list[str] | None = None,
    preexec: Callable[[], None] | None = None,
) -> tuple[dict[str, Any] | None, subprocess.CompletedProcess[str]]:
    """One Stop through the hook as `loopdeck install` writes it; its answer (checked)."""
    payload = payload or stop_payload(ws)
    done = subprocess.run(
        [*(prefix or []), *shlex.split(hook_runner()), "stop"],
        cwd=ws.root,
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=_env(ws),
        timeout=120,  # generous: a hang fails here; speed is asserted by bytes read elsewhere
        preexec_fn=preexec,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    assert done.stderr == ""
    lines = done.stdout.splitlines()
    assert len(lines) <= 1, done.stdout
    out = json.loads(lines[0]) if lines else None
    assert out is None or isinstance(out, dict)
    return out, done


def journal_lines(ws: Workspace) -> list[dict[str, Any]]:
    """The journal's events as written, each one clear line: no traceback in any of them."""
    if not ws.journal.is_file() or ws.journal.is_symlink() or ws.claude_dir.is_symlink():
        return []
    events = [json.loads(line) for line in ws.journal.read_text().splitlines() if line.strip()]
    for event in events:
        assert "traceback" not in event["data"], event
        assert "Traceback" not in json.dumps(event)
    return events


def _link(target: Path, at: Path) -> None:
    if at.exists() or at.is_symlink():
        at.unlink()
    at.symlink_to(target)


def _move_out(path: Path, outside: Path) -> None:
    """`path` moved outside and a symlink to it left in its place."""
    moved = outside / path.name
    shutil.move(path, moved)
    path.symlink_to(moved)


def _fifo(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    os.mkfifo(path)


def _control_symlinked(ws: Workspace) -> None:
    (ws.root.parent / "outside" / "queue").write_text("")
    _link(ws.root.parent / "outside" / "queue", ws.control)


def _private_symlinked(ws: Workspace) -> None:
    (ws.root.parent / "outside" / "private").mkdir()
    _link(ws.root.parent / "outside" / "private", ws.private_dir)


def _claude_a_file(ws: Workspace) -> None:
    shutil.rmtree(ws.claude_dir)
    ws.claude_dir.write_text("not a folder\n")


def _claude_symlinked(ws: Workspace) -> None:
    outside = ws.root.parent / "outside" / "claude"
    shutil.move(ws.claude_dir, outside)
    ws.claude_dir.symlink_to(outside)


HOSTILE: dict[str, tuple[Callable[[Workspace], object], str | None]] = {
    # setup, and the words of the refusal (None: the Stop goes on, nothing to refuse)
    "journal-symlink": (
        lambda ws: _link(ws.root.parent / "outside" / "journal", ws.journal),
        "orchestrator-loop.events.jsonl is a symlink",
    ),
    "lock-symlink": (
        lambda ws: _link(ws.root.parent / "outside" / "lock", ws.lock),
        "orchestrator-loop.lock: is a symlink",
    ),
    "state-symlink": (lambda ws: _move_out(ws.state, ws.root.parent / "outside"), None),
    "control-symlink": (_control_symlinked, None),
    "private-symlink": (_private_symlinked, "loopdeck resolves to"),  # the sources' cache: refused
    "claude-symlink": (_claude_symlinked, ".claude is a symlink"),
    "journal-fifo": (lambda ws: _fifo(ws.journal), "is a FIFO, not a regular file"),
    "control-fifo": (lambda ws: _fifo(ws.control), "is a FIFO, not a regular file"),
    "lock-fifo": (lambda ws: _fifo(ws.lock), None),
    "state-fifo": (lambda ws: _fifo(ws.state), "is a FIFO, not a regular file"),
    "nested-state": (lambda ws: ws.state.write_text(NESTED), "front matter is not valid YAML"),
    "claude-a-file": (_claude_a_file, None),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_the_hook_in_a_hostile_workspace(project: Workspace, tmp_path: Path, name: str) -> None:
    setup, refusal = HOSTILE[name]
    setup(project)
    outside = tmp_path / "outside"
    before = _snapshot(outside)
    out, _done = stop(project)
    assert _snapshot(outside) == before  # nothing written through a link, nothing outside
    events = journal_lines(project)
    if refusal is None:
        assert out is None or "failed safe" not in out.get("systemMessage", ""), out
    else:
        assert out is not None and "decision" not in out, out
        assert out["systemMessage"].startswith("loopdeck: the Stop hook failed safe"), out
        assert refusal in out["systemMessage"], out
        if events:  # the journal could be written: the refusal is its last line
            assert events[-1]["kind"] == "error" and refusal in events[-1]["data"]["message"]


def test_the_hook_whose_reader_is_gone(project: Workspace) -> None:
    """Claude Code gone before the answer (its end of the pipe closed): still exit 0, and no
    broken-pipe traceback from the flush on the way out."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [*shlex.split(hook_runner()), "stop"],
            cwd=project.root,
            input=json.dumps({"session_id": "s", "cwd": str(project.root)}).encode(),
            stdout=write_end,
            stderr=subprocess.PIPE,
            env=_env(project),
            timeout=120,
        )
    finally:
        os.close(write_end)
    assert done.returncode == 0 and done.stderr == b"", done.stderr


def test_the_hook_on_a_full_disk(project: Workspace) -> None:
    journal = project.journal.read_bytes()
    state = project.state.read_bytes()
    out, _done = stop(project, preexec=_full_disk())
    assert out is not None and out["systemMessage"].startswith("loopdeck: the Stop hook failed safe"), out
    assert "size limit" in out["systemMessage"] or "no space" in out["systemMessage"], out
    assert project.journal.read_bytes() == journal  # no torn line left behind
    assert project.state.read_bytes() == state


def test_the_hook_on_a_nearly_full_disk_leaves_no_torn_journal_line(project: Workspace) -> None:
    """Room for part of the next journal line only: the part is taken back out, and the next
    Stop (with room) journals whole lines the reader reads."""
    size = project.journal.stat().st_size
    out, _done = stop(project, preexec=_full_disk(size + 40))
    assert out is not None
    text = project.journal.read_bytes()
    assert text.endswith(b"\n") and len(text) <= size + 40
    out, _done = stop(project)
    assert out is not None and out["decision"] == "block"
    read = Journal(project.journal).read_from(0)
    assert read.problems == [] and read.events[-1].kind == "blocked"


def test_the_hook_with_a_read_only_claude_folder(project: Workspace) -> None:
    state = project.state.read_bytes()
    with read_only(project.claude_dir) as prefix:
        out, _done = stop(project, prefix=prefix)
    assert out is not None and out["systemMessage"].startswith("loopdeck: the Stop hook failed safe"), out
    assert "read-only" in out["systemMessage"] or "permission denied" in out["systemMessage"], out
    assert project.state.read_bytes() == state


def test_a_transcript_without_a_newline_in_its_last_40_mb(project: Workspace) -> None:
    """Bounded: the hook reads a fixed budget of the transcript's end (counted in the
    transcript tests), and the task sources decide."""
    with (project.root / "transcript.jsonl").open("wb") as f:
        f.write(b'{"type":"assistant","message":{"content":[{"type":"text","text":"ALL_TASKS_COMPLETE"}]}}\n')
        f.truncate(40 * 1024 * 1024 + 100)  # NUL bytes, no newline: the scan finds no line start
    out, _done = stop(project)
    assert out is not None and out["decision"] == "block" and "one task left" in out["reason"]


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("/tmp/a\x00b.jsonl", "it holds a NUL byte"),
        ("/tmp/a\ud800b.jsonl", "which no file name can hold"),
        (12, "it is a number, expected a string"),
        (["x"], "it is a list, expected a string"),
        ("~no-such-user-here/t.jsonl", "~no-such-user-here names no user of this machine"),
    ],
)
def test_an_unusable_transcript_path_is_one_journal_line(
    project: Workspace, value: object, problem: str
) -> None:
    out, _done = stop(project, {"session_id": "s", "transcript_path": value, "cwd": str(project.root)})
    assert out is not None and out["decision"] == "block", out  # the Stop goes on without it
    (warning,) = [e for e in journal_lines(project) if e["kind"] == "warning"]
    message = warning["data"]["message"]
    assert message.startswith("the hook input's transcript_path ") and "is not a usable path" in message
    assert problem in message


# --- the CLI ---------------------------------------------------------------------------------

VERBS = {
    "say": ["say", "hello"],
    "pause": ["pause"],
    "skip": ["skip"],
    "install": ["install"],
    "run": ["run", "--agent", "claude"],
}


def loopdeck(
    ws: Workspace, argv: list[str], prefix: list[str] | None = None, preexec: Callable[[], None] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*(prefix or []), sys.executable, "-m", "tui.cli", *argv],
        cwd=ws.root,
        capture_output=True,
        text=True,
        env=_env(ws),
        timeout=120,
        stdin=subprocess.DEVNULL,
        preexec_fn=preexec,
    )


def refused(done: subprocess.CompletedProcess[str]) -> str:
    """The CLI failed with one clear line; that line."""
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("loopdeck: error: "), done.stderr
    return lines[0]


CLI_HOSTILE: dict[str, tuple[Callable[[Workspace], object], str]] = {
    "claude-a-file": (_claude_a_file, "is a file, expected a folder"),
    "nested-state": (lambda ws: ws.state.write_text(NESTED), "front matter is not valid YAML"),
}


@pytest.mark.parametrize(
    ("name", "verb"),
    # install does not read the loop's state: a nested one is nothing to it
    [(n, v) for n in sorted(CLI_HOSTILE) for v in sorted(VERBS) if (n, v) != ("nested-state", "install")],
)
def test_the_cli_in_a_hostile_workspace(project: Workspace, name: str, verb: str) -> None:
    setup, words = CLI_HOSTILE[name]
    setup(project)
    line = refused(loopdeck(project, VERBS[verb]))
    assert words in line


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_the_cli_on_a_full_disk(project: Workspace, verb: str) -> None:
    before = _snapshot(project.claude_dir)
    line = refused(loopdeck(project, VERBS[verb], preexec=_full_disk()))
    assert "size limit" in line or "no space" in line, line
    after = _snapshot(project.claude_dir)
    assert {k: v for k, v in after.items() if k in before} == before  # nothing lost or torn
    assert control.pending(project) == []  # a command that failed is not queued


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_the_cli_with_a_read_only_claude_folder(project: Workspace, verb: str) -> None:
    before = _snapshot(project.claude_dir)
    with read_only(project.claude_dir) as prefix:
        line = refused(loopdeck(project, VERBS[verb], prefix=prefix))
    assert "read-only" in line or "permission denied" in line, line
    assert _snapshot(project.claude_dir) == before


def test_install_never_writes_through_a_symlinked_private_folder(project: Workspace, tmp_path: Path) -> None:
    elsewhere = tmp_path / "outside" / "private"
    elsewhere.mkdir()
    project.private_dir.symlink_to(elsewhere)
    line = refused(loopdeck(project, ["install"]))
    assert "loopdeck" in line and "outside" in line, line
    assert list(elsewhere.iterdir()) == []
    assert not (project.claude_dir / "settings.local.json").exists()  # refused before any write
    assert not (project.claude_dir / "commands").exists()


# --- the same, in process: read-only for root, whatever the machine allows --------------------

WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


@contextlib.contextmanager
def read_only_in_process(folder: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every change under `folder` fails as on a read-only file system (EROFS), whoever runs
    the tests: os.open for writing, mkdir, rename, link, unlink, and io's own open."""
    import builtins
    import io

    inside = str(folder)

    def under(path: object) -> bool:
        try:
            text = os.fsdecode(path)  # type: ignore[arg-type]
        except TypeError:
            return False
        return os.path.abspath(text).startswith(inside)

    def refuse(path: object) -> OSError:
        return OSError(errno.EROFS, os.strerror(errno.EROFS), os.fsdecode(path))  # type: ignore[arg-type]

    real_open, real_io_open = os.open, io.open

    def fake_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if flags & WRITE_FLAGS and under(path):
            raise refuse(path)
        return real_open(path, flags, *args, **kwargs)

    def fake_io_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if isinstance(file, str | bytes | os.PathLike) and set(mode) & set("wax+") and under(file):
            raise refuse(file)
        return real_io_open(file, mode, *args, **kwargs)

    def guard(real: Callable[..., Any]) -> Callable[..., Any]:
        def fake(path: Any, *args: Any, **kwargs: Any) -> Any:
            if under(path) or any(under(a) for a in args if isinstance(a, str | os.PathLike)):
                raise refuse(path)
            return real(path, *args, **kwargs)

        return fake

    monkeypatch.setattr(os, "open", fake_open)
    monkeypatch.setattr(io, "open", fake_io_open)
    monkeypatch.setattr(builtins, "open", fake_io_open)
    for name in ("mkdir", "replace", "rename", "link", "unlink", "rmdir", "symlink"):
        monkeypatch.setattr(os, name, guard(getattr(os, name)))
    yield


@pytest.mark.parametrize("verb", ["say", "pause", "skip", "install"])
def test_the_cli_with_a_read_only_claude_folder_in_process(
    project: Workspace, verb: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tui.cli import main

    before = _snapshot(project.claude_dir)
    with read_only_in_process(project.claude_dir, monkeypatch):
        code = main(["-C", str(project.root), *VERBS[verb]])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and err.startswith("loopdeck: error: "), err
    assert "read-only" in err
    monkeypatch.undo()
    assert _snapshot(project.claude_dir) == before


def test_the_hook_with_a_read_only_claude_folder_in_process(
    project: Workspace, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import io

    from loop.drivers import hook

    payload = {"session_id": "s", "transcript_path": str(project.root / "transcript.jsonl")}
    env = {
        "CLAUDE_PROJECT_DIR": str(project.root),
        "CLAUDE_CONFIG_DIR": str(project.root.parent / "claude-home"),
    }
    with read_only_in_process(project.claude_dir, monkeypatch):
        code = hook.main(stdin=io.BytesIO(json.dumps(payload).encode()), env={**os.environ, **env})
    printed = capsys.readouterr().out.splitlines()
    assert code == 0 and len(printed) == 1
    out = json.loads(printed[0])
    assert (
        out["systemMessage"].startswith("loopdeck: the Stop hook failed safe")
        and "read-only" in out["systemMessage"]
    )


# --- the control queue: a failed send queues nothing ----------------------------------------


def _short_writes(monkeypatch: pytest.MonkeyPatch, then_raise: bool = False) -> None:
    """os.write writes half of what it is given (a disk filling up), and returns that count
    (as the kernel does) or, with `then_raise`, raises ENOSPC after writing it."""
    real = os.write

    def half(fd: int, data: Any) -> int:
        written = real(fd, bytes(data)[: max(1, len(data) // 2)])
        if then_raise:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return written

    monkeypatch.setattr(os, "write", half)


@pytest.mark.parametrize("then_raise", [False, True])
def test_a_send_cut_short_queues_nothing_and_says_so(
    project: Workspace, monkeypatch: pytest.MonkeyPatch, then_raise: bool
) -> None:
    control.send(project, "say", reason="first", key=person(project))
    before = project.control.read_bytes()
    _short_writes(monkeypatch, then_raise)
    with pytest.raises(LoopdeckError, match=r"say was not queued: .*orchestrator-loop\.control\.jsonl"):
        control.send(project, "say", reason="second", key=person(project))
    monkeypatch.undo()
    assert project.control.read_bytes() == before
    control.send(project, "say", reason="third", key=person(project))
    commands, bad, _end = control.read_since(project.control, 0)
    assert [c.reason for c in commands] == ["first", "third"] and bad == []


def test_a_torn_command_is_skipped_never_run_into_the_next(project: Workspace) -> None:
    """A command line torn by a writer killed mid-write: the next send starts a line of its
    own; the torn one is skipped (and reported), never applied, never swallowing the next."""
    control.send(project, "say", reason="first", key=person(project))
    with project.control.open("ab") as f:
        f.write(b'{"id": "torn", "ts": "2026-01-01T00:00:00.000Z", "kind": "sto')
    assert [c.reason for c in control.read_since(project.control, 0)[0]] == ["first"]
    control.send(project, "say", reason="after", key=person(project))
    commands, bad, _end = control.read_since(project.control, 0)
    assert [c.reason for c in commands] == ["first", "after"]
    assert [b.reason for b in bad] == ["not JSON"]


def test_a_say_whose_journal_line_fails_still_reports_it_queued(
    project: Workspace, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command is queued (and will be applied): the CLI must not report it failed because
    the journal, written after, could not take its line."""
    from loop.store import journal
    from tui.cli import main

    def full(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(project.journal))

    monkeypatch.setattr(journal, "append_bytes", full)
    code = main(["-C", str(project.root), "say", "hello"])
    captured = capsys.readouterr()
    assert code == 0 and "say queued" in captured.out
    assert captured.err.startswith("loopdeck: warning: the journal could not record the say")
    assert [c.reason for c in control.pending(project)] == ["hello"]


# --- the transcript: a fixed budget of bytes from its end -----------------------------------


def test_the_transcript_is_read_within_a_fixed_budget(tmp_path: Path) -> None:
    """40 MB without a newline at the end: at most the budget is read, whether or not a line
    start was found, and the agent's words are unknown (the task sources decide)."""
    from loop.sources.transcript import MAX_SCAN_BYTES, last_assistant_text
    from loop.store.tailread import ReadCounter

    transcript = tmp_path / "t.jsonl"
    with transcript.open("wb") as f:
        f.write(b'{"type":"assistant","message":{"content":[{"type":"text","text":"early"}]}}\n')
        f.truncate(40 * 1024 * 1024)
    counter = ReadCounter()
    assert last_assistant_text(transcript, counter) is None
    assert 0 < counter.bytes_read <= MAX_SCAN_BYTES


def test_the_budget_still_finds_words_near_the_end(tmp_path: Path) -> None:
    from loop.sources.transcript import MAX_SCAN_BYTES, last_assistant_text

    line = b'{"type":"assistant","message":{"content":[{"type":"text","text":"the words"}]}}\n'
    transcript = tmp_path / "t.jsonl"
    transcript.write_bytes(b"x" * (MAX_SCAN_BYTES + 10) + b"\n" + line + b"y" * (MAX_SCAN_BYTES // 2))
    assert last_assistant_text(transcript) == "the words"  # the torn tail is passed over
    # A line cut by the budget's edge is never taken for a line: here only its end is in reach.
    cut = (
        b'{"type":"assistant","message":{"content":[{"type":"text","text":"'
        + b"z" * MAX_SCAN_BYTES
        + b'"}]}}\n'
    )
    transcript.write_bytes(line + cut)
    assert last_assistant_text(transcript) is None
