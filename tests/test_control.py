from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from loop.core.errors import LoopdeckError
from loop.store import control
from loop.store.journal import Journal
from loop.store.paths import Workspace
from loop.store.state import LoopState, StateStore
from tests.conftest import REPO


def _loop(ws: Workspace) -> StateStore:
    from loop import trust

    store = StateStore(ws)
    state = LoopState.new("p")
    store.write(state)
    trust.record(ws, state, "test")  # a person here started it
    return store


def person(ws: Workspace) -> bytes:
    """This user's key, as a person's process signs with it (`loop.trust.key.for_person`)."""
    from loop.trust import key

    signing = key.load(ws.root, create=True)
    assert signing is not None
    return signing


def drive(ws: Workspace) -> None:
    """One Stop, as Claude Code delivers it: the code the drivers run applies the queue."""
    from datetime import UTC, datetime

    from loop.drivers import hook

    hook.handle(
        {"session_id": "s1", "cwd": str(ws.root)}, {"CLAUDE_PROJECT_DIR": str(ws.root)}, datetime.now(UTC)
    )


def test_send_pending_and_apply_once(ws: Workspace) -> None:
    store = _loop(ws)
    journal = Journal(ws.journal)
    pause = control.send(ws, "pause", source="tui", reason="lunch")
    bump = control.send(ws, "set-max-iterations", value=200, key=person(ws))
    assert [c.id for c in control.pending(ws)] == [pause.id, bump.id]
    assert control.pending(ws)[0].reason == "lunch"
    drive(ws)
    state = store.read()
    assert state is not None and state.status == "paused" and state.max_iterations == 200
    assert control.pending(ws) == []
    drive(ws)
    assert control.applied_ids(journal) == {pause.id, bump.id}
    outcomes = [e.data["outcome"] for e in journal.tail(50).events if e.kind == "command-applied"]
    assert outcomes == ["paused", "max iterations 100 → 200"]


def test_commands_sent_before_a_loop_starts_are_not_applied(ws: Workspace, cli) -> None:
    control.send(ws, "stop")
    assert cli("start", "work").code == 0
    assert control.pending(ws) == []


def test_bad_lines_are_skipped_and_journaled(ws: Workspace) -> None:
    store = _loop(ws)
    journal = Journal(ws.journal)
    with ws.control.open("ab") as f:
        f.write(b"not json\n")
        f.write(b'{"id": "a", "kind": "explode"}\n')
        f.write(b'{"id": "b", "kind": "set-max-iterations", "value": "lots"}\n')
        f.write(b'{"kind": "pause"}\n')
    good = control.send(ws, "pause")
    with ws.control.open("ab") as f:
        f.write(b'{"id": "c", "kind": "res')  # a sender caught mid-write
    drive(ws)
    assert control.applied_ids(journal) == {good.id}
    state = store.read()
    assert state is not None and state.status == "paused"
    warnings = [e.data["message"] for e in journal.tail(20).events if e.kind == "warning"]
    assert len(warnings) == 4 and "not JSON" in warnings[0] and "unknown command" in warnings[1]
    with ws.control.open("ab") as f:
        f.write(b'ume"}\n')
    drive(ws)
    # The completed line is read; written by hand, unsigned, its resume is refused, not applied.
    assert control.handled(journal) == {good.id: "command-applied", "c": "command-refused"}
    state = store.read()
    assert state is not None and state.status == "paused"


def test_send_rejects_unknown_and_missing_value(ws: Workspace) -> None:
    with pytest.raises(LoopdeckError, match="unknown command"):
        control.send(ws, "explode")
    with pytest.raises(LoopdeckError, match="whole number"):
        control.send(ws, "set-max-iterations")


SENDER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from loop.store import control
    from loop.store.paths import Workspace
    from loop.trust import key
    ws = Workspace(Path(sys.argv[1]))
    signing = key.load(ws.root, create=True)
    sys.stdin.readline()  # start together
    for i in range(500):
        control.send(ws, "pause" if i % 2 else "resume", source=sys.argv[2], reason="r%d" % i, key=signing)
""")

DRIVER = textwrap.dedent("""
    import sys
    from datetime import UTC, datetime
    from loop.drivers import hook
    root = sys.argv[1]
    sys.stdin.readline()
    for _ in range(40):
        hook.handle({"session_id": "s1", "cwd": root}, {"CLAUDE_PROJECT_DIR": root}, datetime.now(UTC))
""")


def _together(script: str, ws: Workspace, names: list[str]) -> None:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(ws.root), name], cwd=REPO, stdin=subprocess.PIPE, text=True
        )
        for name in names
    ]
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    for proc in procs:
        assert proc.wait(timeout=120) == 0


def test_two_processes_send_500_each_and_two_drivers_apply_each_once(ws: Workspace) -> None:
    _loop(ws)
    _together(SENDER, ws, ["one", "two"])
    lines = ws.control.read_bytes().split(b"\n")
    assert lines[-1] == b""
    commands = [json.loads(line) for line in lines[:-1]]
    assert len(commands) == 1000
    assert len({c["id"] for c in commands}) == 1000
    assert sorted(c["source"] for c in commands) == ["one"] * 500 + ["two"] * 500
    # Two hooks racing to apply the queue, then a third Stop: each command applied once.
    _together(DRIVER, ws, ["A", "B"])
    drive(ws)
    applied = [e.data["id"] for e in Journal(ws.journal).tail(5000).events if e.kind == "command-applied"]
    assert len(applied) == 1000
    assert set(applied) == {c["id"] for c in commands}
    assert control.pending(ws) == []


def test_restoring_the_backup_never_applies_a_command_twice(ws: Workspace) -> None:
    """Regression: the backup holds an older queue offset; restoring it re-applied a `skip`
    that had already marked a task, and a second task of the user's list was skipped."""
    from datetime import UTC, datetime

    from loop.drivers import writer

    (ws.root / "TODO.md").write_text("- [ ] one\n- [ ] two\n- [ ] three\n")
    from loop import trust

    store = StateStore(ws)
    state = LoopState.new("p", task_file="TODO.md", check_tasks=False, check_github=False)
    store.write(state)
    trust.record(ws, state, "test")
    drive(ws)  # the backup now holds the state before the skip is sent
    control.send(ws, "skip", source="tui", key=person(ws))
    drive(ws)
    assert (ws.root / "TODO.md").read_text() == "- [-] one\n- [ ] two\n- [ ] three\n"
    backup = store.read_backup()
    assert backup is not None and control.pending(ws, backup)  # the skip, not yet applied there
    ws.state.write_text("---\niteration: [\n---\n")  # someone breaks the state file
    writer.restore_backup(ws, datetime.now(UTC))
    assert control.pending(ws) == []
    drive(ws)
    assert (ws.root / "TODO.md").read_text() == "- [-] one\n- [ ] two\n- [ ] three\n"
    restored = [e for e in Journal(ws.journal).tail(100).events if e.kind == "restored"]
    assert restored and restored[-1].data["already_applied"] == 1


def test_applied_ids_reads_a_huge_journal_from_the_end(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--wait` polls this ten times a second: it must cost what the journal's end costs, not
    what the journal weighs. A 1 GB journal (sparse: a newline every MB, zeros between) with
    one command applied near its end, and thousands of other events after the hole."""
    with ws.journal.open("wb") as f:
        for mb in range(1, 1025):
            f.seek(mb * 1024 * 1024)
            f.write(b"\n")
    journal = Journal(ws.journal)
    journal.append("command-applied", 3, {"id": "early", "command": "pause"})
    journal.append("command-applied", 3, {"id": "wanted", "command": "pause"})
    with ws.journal.open("ab") as f:
        f.write(b'{"ts": "2026-01-01T00:00:00.000Z", "kind": "iteration-started", "iteration": 4}\n' * 3000)
    reads: list[int] = []
    real_tail = Journal.tail

    def spy(self: Journal, *args: object, **kwargs: object):
        result = real_tail(self, *args, **kwargs)  # type: ignore[arg-type]
        reads.append(result.bytes_read)
        return result

    monkeypatch.setattr(Journal, "tail", spy)
    assert control.applied_ids(journal) == {"early", "wanted"}
    assert ws.journal.stat().st_size > 1024**3
    assert reads and max(reads) <= 2 * 1024 * 1024


def test_tail_budget_passes_over_the_cut_line(ws: Workspace) -> None:
    journal = Journal(ws.journal)
    for i in range(100):
        journal.append("iteration-started", i)
    line = len(ws.journal.read_bytes()) // 100
    result = journal.tail(1000, budget=10 * line + line // 2)
    assert [e.iteration for e in result.events] == list(range(90, 100))
    assert result.problems == []
    assert journal.tail(1000, budget=10**9).events == journal.tail(1000).events
