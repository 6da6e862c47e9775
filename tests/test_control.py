from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from loop import control
from loop.errors import LoopdeckError
from loop.journal import Journal
from loop.paths import Workspace
from loop.state import LoopState, StateStore
from tests.conftest import REPO


def _loop(ws: Workspace) -> StateStore:
    store = StateStore(ws)
    store.write(LoopState.new("p"))
    return store


def _handler(state: LoopState, command: control.Command) -> str:
    if command.kind == "pause":
        state.status = "paused"
    elif command.kind == "resume":
        state.status = "running"
    elif command.kind == "set-max-iterations":
        assert command.value is not None
        state.max_iterations = command.value
    state.extra["applied"] = [*state.extra.get("applied", []), command.id]
    return f"did {command.kind}"


def test_send_pending_and_drain_once(ws: Workspace) -> None:
    store = _loop(ws)
    journal = Journal(ws.journal)
    pause = control.send(ws, "pause", source="tui", reason="lunch")
    bump = control.send(ws, "set-max-iterations", value=200)
    assert [c.id for c in control.pending(ws)] == [pause.id, bump.id]
    assert control.pending(ws)[0].reason == "lunch"
    applied = control.drain(store, journal, _handler)
    assert [c.id for c in applied] == [pause.id, bump.id]
    state = store.read()
    assert state is not None and state.status == "paused" and state.max_iterations == 200
    assert control.pending(ws) == []
    assert control.drain(store, journal, _handler) == []
    assert control.applied_ids(journal) == {pause.id, bump.id}
    events = journal.tail(10).events
    assert [e.data["outcome"] for e in events] == ["did pause", "did set-max-iterations"]


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
    applied = control.drain(store, journal, _handler)
    assert [c.id for c in applied] == [good.id]
    warnings = [e.data["message"] for e in journal.tail(20).events if e.kind == "warning"]
    assert len(warnings) == 4 and "not JSON" in warnings[0] and "unknown command" in warnings[1]
    with ws.control.open("ab") as f:
        f.write(b'ume"}\n')
    assert [c.id for c in control.drain(store, journal, _handler)] == ["c"]


def test_send_rejects_unknown_and_missing_value(ws: Workspace) -> None:
    with pytest.raises(LoopdeckError, match="unknown command"):
        control.send(ws, "explode")
    with pytest.raises(LoopdeckError, match="whole number"):
        control.send(ws, "set-max-iterations")


SENDER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from loop import control
    from loop.paths import Workspace
    ws = Workspace(Path(sys.argv[1]))
    sys.stdin.readline()  # start together
    for i in range(500):
        control.send(ws, "pause" if i % 2 else "resume", source=sys.argv[2], reason="r%d" % i)
""")

DRAINER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from loop import control
    from loop.journal import Journal
    from loop.paths import Workspace
    from loop.state import StateStore
    ws = Workspace(Path(sys.argv[1]))
    store, journal = StateStore(ws), Journal(ws.journal)
    def handler(state, command):
        return "applied by " + sys.argv[2]
    sys.stdin.readline()
    for _ in range(40):
        control.drain(store, journal, handler)
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
    store = _loop(ws)
    _together(SENDER, ws, ["one", "two"])
    lines = ws.control.read_bytes().split(b"\n")
    assert lines[-1] == b""
    commands = [json.loads(line) for line in lines[:-1]]
    assert len(commands) == 1000
    assert len({c["id"] for c in commands}) == 1000
    assert sorted(c["source"] for c in commands) == ["one"] * 500 + ["two"] * 500
    # Two drivers racing to apply the queue, then a third pass: each command applied once.
    _together(DRAINER, ws, ["A", "B"])
    control.drain(store, Journal(ws.journal), lambda s, c: "late")
    applied = [e.data["id"] for e in Journal(ws.journal).tail(5000).events if e.kind == "command-applied"]
    assert len(applied) == 1000
    assert set(applied) == {c["id"] for c in commands}
    assert control.pending(ws) == []


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
