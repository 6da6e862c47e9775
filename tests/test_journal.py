from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loop.store.journal import Event, Journal, message, render_line
from loop.store.paths import Workspace
from loop.store.tailread import ReadCounter, lines_backwards

T0 = datetime(2025, 1, 17, 14, 0, 0, tzinfo=UTC)


def test_append_and_tail(ws: Workspace) -> None:
    journal = Journal(ws.journal)
    for i in range(10):
        journal.append("iteration-started", i, {"max_iterations": 5}, now=T0)
    raw = ws.journal.read_text().splitlines()
    assert len(raw) == 10
    assert json.loads(raw[0]) == {
        "ts": "2025-01-17T14:00:00.000Z",
        "kind": "iteration-started",
        "iteration": 0,
        "data": {"max_iterations": 5},
    }
    result = journal.tail(3)
    assert [e.iteration for e in result.events] == [7, 8, 9]
    assert result.problems == []


def test_missing_journal_is_empty(ws: Workspace) -> None:
    assert Journal(ws.journal).tail(5).events == []
    assert Journal(ws.journal).read_from(0).events == []


def test_torn_and_garbage_lines_are_skipped_and_reported(ws: Workspace) -> None:
    journal = Journal(ws.journal)
    journal.append("loop-started", 0, now=T0)
    with ws.journal.open("ab") as f:
        f.write(b"\x00\xff garbage \x89PNG\n")
        f.write(b'["a list"]\n')
        f.write(b'{"kind": "no ts"}\n')
    journal.append("paused", 1, {"reason": "x"}, now=T0)
    with ws.journal.open("ab") as f:
        f.write(b'{"ts": "2025-01-17T14:00:00Z", "kind": "resu')  # writer killed mid-line
    result = journal.tail(10)
    assert [e.kind for e in result.events] == ["loop-started", "paused"]
    reasons = [p.reason for p in result.problems]
    assert reasons == [
        "not JSON",
        "not a JSON object",
        "missing 'ts' or 'kind' string",
        "torn last line (no newline, not JSON)",
    ]
    # Forward reading leaves the torn line for later and resumes once it is finished.
    forward = journal.read_from(0)
    assert [e.kind for e in forward.events] == ["loop-started", "paused"]
    with ws.journal.open("ab") as f:
        f.write(b'med", "iteration": 1, "data": {}}\n')
    more = journal.read_from(forward.offset)
    assert [e.kind for e in more.events] == ["resumed"]


def test_wrong_types_inside_an_event_are_tolerated(ws: Workspace) -> None:
    ws.journal.write_text('{"ts": "t", "kind": "k", "iteration": "two", "data": [1]}\n')
    (event,) = Journal(ws.journal).tail(1).events
    assert event.iteration is None and event.data == {"value": [1]}


def test_huge_line_is_skipped_not_loaded(ws: Workspace) -> None:
    journal = Journal(ws.journal)
    journal.append("loop-started", 0)
    with ws.journal.open("ab") as f:
        f.write(b"x" * (3 * 1024 * 1024) + b"\n")
    journal.append("paused", 0)
    result = journal.tail(5)
    assert [e.kind for e in result.events] == ["loop-started", "paused"]
    assert "too long" in result.problems[0].reason
    forward = journal.read_from(0, limit_bytes=1024 * 1024)
    assert [e.kind for e in forward.events] == ["loop-started"]
    rest = journal.read_from(forward.offset, limit_bytes=1024 * 1024)
    assert "skipped" in rest.problems[0].reason
    last = journal.read_from(rest.offset, limit_bytes=1024 * 1024)
    assert [e.kind for e in last.events] == ["paused"]


def test_tail_of_a_1gb_journal_reads_only_its_end(ws: Workspace) -> None:
    journal = Journal(ws.journal)
    with ws.journal.open("wb") as f:
        f.truncate(1024**3)  # sparse: 1 GB on paper, nothing on disk
        f.seek(0, 2)
        f.write(b"\n")
    for i in range(100):
        journal.append("iteration-started", i)
    result = journal.tail(50)
    assert [e.iteration for e in result.events] == list(range(50, 100))
    assert result.bytes_read <= 64 * 1024
    assert ws.journal.stat().st_size > 1024**3


def test_render_seed_log_lines() -> None:
    def ev(kind: str, iteration: int | None = None, **data: object) -> Event:
        return Event("2025-01-17T14:00:00.000Z", kind, iteration, data)

    assert render_line(ev("iteration-started", 1, max_iterations=5)) == (
        "[2025-01-17T14:00:00Z] loopdeck: Starting iteration 1/5"
    )
    assert message(ev("task-selected", task="Implement user auth")) == (
        'Selected item: "Implement user auth"'
    )
    assert message(ev("verification-started", command="npm test")) == "Running verification: npm test"
    assert message(ev("verification-passed", exit_code=0)) == "Verification PASSED (exit 0)"
    assert message(ev("iteration-completed", 1, duration_s=228)) == "Iteration 1 complete (3m 48s)"
    assert message(ev("something-new", a=1)) == "something-new a=1"
    assert message(ev("iteration-completed", 1, duration_s="soon")) == "Iteration 1 complete (?)"


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.binary(max_size=30).map(lambda b: b.replace(b"\n", b"")), max_size=20),
    st.booleans(),
    st.integers(1, 40),
)
def test_lines_backwards_matches_split(lines: list[bytes], trailing: bool, block: int) -> None:
    data = b"\n".join(lines) + (b"\n" if trailing and lines else b"")
    got = list(lines_backwards(io.BytesIO(data), block=block, counter=ReadCounter()))
    expected = []
    offset = 0
    parts = data.split(b"\n")
    for index, part in enumerate(parts):
        terminated = index < len(parts) - 1
        if not terminated and part == b"":
            break
        expected.append((offset, part, terminated))
        offset += len(part) + 1
    assert got == expected[::-1]


def test_journal_path_is_created(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "new" / "dir" / "j.jsonl")
    journal.append("warning")
    assert journal.size() > 0


def test_unknown_kinds_are_refused(tmp_path: Path) -> None:
    """One list of event kinds: a kind a viewer would not know never reaches the journal."""
    journal = Journal(tmp_path / "j.jsonl")
    with pytest.raises(ValueError, match="unknown journal event kind"):
        journal.append("made-up")
    assert journal.size() == 0


# --- appends that fail: never a torn line run into the next ---------------------------------


def _write_half(monkeypatch: pytest.MonkeyPatch, then_raise: bool) -> None:
    """os.write writes half (a disk filling up): returns the count, as the kernel does, or
    raises ENOSPC after writing it."""
    import errno
    import os

    real = os.write

    def half(fd: int, data: bytes) -> int:
        written = real(fd, bytes(data)[: len(data) // 2])
        if then_raise:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return written

    monkeypatch.setattr(os, "write", half)


@pytest.mark.parametrize("then_raise", [False, True])
def test_an_append_cut_short_leaves_nothing(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch, then_raise: bool
) -> None:
    journal = Journal(ws.journal)
    journal.append("warning", 1, {"message": "before"}, now=T0)
    before = ws.journal.read_bytes()
    _write_half(monkeypatch, then_raise)
    with pytest.raises(OSError) as info:
        journal.append("warning", 1, {"message": "lost"}, now=T0)
    monkeypatch.undo()
    assert info.value.filename == str(ws.journal)
    assert ws.journal.read_bytes() == before
    journal.append("warning", 1, {"message": "after"}, now=T0)
    read = journal.read_from(0)
    assert [e.data["message"] for e in read.events] == ["before", "after"] and read.problems == []


def test_a_torn_last_line_does_not_swallow_the_next(ws: Workspace) -> None:
    """A line left without its newline (a writer killed mid-write, an older version on a full
    disk): the next append starts a line of its own, and the reader skips only the torn one."""
    journal = Journal(ws.journal)
    journal.append("warning", 1, {"message": "before"}, now=T0)
    with ws.journal.open("ab") as f:
        f.write(b'{"ts": "2025-01-17T14:00:00.000Z", "kind": "warn')
    journal.append("warning", 1, {"message": "after"}, now=T0)
    for read in (journal.read_from(0), journal.tail(10)):
        assert [e.data["message"] for e in read.events] == ["before", "after"]
        assert [p.reason for p in read.problems] == ["not JSON"]


def test_a_line_nested_too_deep_is_skipped_not_fatal(ws: Workspace) -> None:
    journal = Journal(ws.journal)
    with ws.journal.open("ab") as f:
        f.write(b"[" * 100_000 + b"\n")
    journal.append("warning", 1, {"message": "after"}, now=T0)
    for read in (journal.read_from(0), journal.tail(10)):
        assert [e.data["message"] for e in read.events] == ["after"]
        assert [p.reason for p in read.problems] == ["not JSON"]


def test_appenders_racing_never_leave_an_empty_line(ws: Workspace) -> None:
    """Each append looks at the file's last byte to start a fresh line after a torn one. A
    reader can see another appender's line half-way in (a line across a page boundary), so
    without a lock among appenders that look found no newline and added an empty line."""
    import os
    import subprocess
    import sys

    from tests.conftest import REPO

    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from loop.store.journal import Journal\n"
        "journal = Journal(Path(sys.argv[1]))\n"
        "for i in range(1000):\n"
        "    journal.append('warning', i, {'message': 'x' * 3000})\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    writers = [subprocess.Popen([sys.executable, "-c", code, str(ws.journal)], env=env) for _ in range(2)]
    assert [w.wait(timeout=120) for w in writers] == [0, 0]
    lines = ws.journal.read_bytes().split(b"\n")
    assert lines.pop() == b""
    assert len(lines) == 2000 and all(json.loads(line)["kind"] == "warning" for line in lines)


# --- followed: only what was appended is read -----------------------------------------------------


def test_a_follower_reads_only_what_was_appended(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    from loop.store import journal as journal_module

    journal = Journal(ws.journal)
    for i in range(2000):
        journal.append("iteration-started", i, {"max_iterations": 0}, now=T0)
    follower = journal_module.Follower(ws.journal, 300)
    first = follower.read()
    assert len(first) == 300 and first[-1].iteration == 1999
    assert follower.read() is first  # nothing new: the same tuple, nothing read

    reads: list[int] = []
    real_read_from = Journal.read_from

    def read_from(self: Journal, offset: int = 0, limit_bytes: int = 8 * 1024 * 1024) -> Any:
        reads.append(offset)
        return real_read_from(self, offset, limit_bytes)

    def backwards(*args: object, **kwargs: object) -> Any:
        raise AssertionError("the journal was read backwards again")

    monkeypatch.setattr(Journal, "read_from", read_from)
    monkeypatch.setattr(journal_module, "lines_backwards", backwards)
    size = ws.journal.stat().st_size
    journal.append("iteration-completed", 1999, {"duration_s": 1.0}, now=T0)
    journal.append("iteration-started", 2000, {"max_iterations": 0}, now=T0)
    second = follower.read()
    assert reads == [size]
    assert len(second) == 300 and [e.kind for e in second[-2:]] == [
        "iteration-completed",
        "iteration-started",
    ]
    assert second[:-2] == first[2:]


def test_a_follower_waits_for_a_whole_line_and_starts_over_on_a_new_journal(ws: Workspace) -> None:
    from loop.store.journal import Follower

    journal = Journal(ws.journal)
    journal.append("warning", 1, {"message": "one"}, now=T0)
    line = json.dumps(
        {"ts": "2025-01-17T14:00:01.000Z", "kind": "warning", "iteration": 2, "data": {"message": "two"}}
    )
    with ws.journal.open("ab") as f:
        f.write(line[:20].encode())  # a writer mid-line
    follower = Follower(ws.journal, 10)
    assert [e.data["message"] for e in follower.read()] == ["one"]
    with ws.journal.open("ab") as f:
        f.write(line[20:].encode() + b"\n")
    assert [e.data["message"] for e in follower.read()] == ["one", "two"]
    replaced = ws.journal.with_name("new.jsonl")
    Journal(replaced).append("warning", 1, {"message": "a new loop"}, now=T0)
    replaced.replace(ws.journal)
    assert [e.data["message"] for e in follower.read()] == ["a new loop"]
    ws.journal.write_text("")  # cut short
    assert follower.read() == ()
    journal.append("warning", 1, {"message": "after"}, now=T0)
    assert [e.data["message"] for e in follower.read()] == ["after"]
    ws.journal.unlink()
    assert follower.read() == ()
