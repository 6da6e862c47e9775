"""A control line proves it came from a person's process on this machine, or only pauses.

An agent can append to `.claude/orchestrator-loop.control.jsonl` (`echo >>`); before, its
`{"kind": "complete"}` was applied as a person's forced completion with tasks open."""

from __future__ import annotations

import json
import os
import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest

from loop import trust
from loop.core import engine, workflow
from loop.core.model import Command, LoopState
from loop.core.visible import visible
from loop.drivers.runner import Options, Runner
from loop.store import control
from loop.store.journal import Journal
from loop.store.paths import Workspace
from loop.store.state import StateStore
from loop.trust import key
from loop.trust.person import agent_session
from tests.test_control import drive, person

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


def open_loop(ws: Workspace, **values: object) -> StateStore:
    """A loop a person started here, with open tasks."""
    (ws.root / "TODO.md").write_text("- [ ] one\n- [ ] two\n")
    store = StateStore(ws)
    state = LoopState.new("p", task_file="TODO.md", check_tasks=False, check_github=False, **values)
    store.write(state)
    trust.record(ws, state, "test")
    return store


def forge(ws: Workspace, line: dict[str, object]) -> None:
    with ws.control.open("ab") as f:  # what `echo >>` does
        f.write(json.dumps(line).encode() + b"\n")


def refusals(ws: Workspace) -> list[dict[str, object]]:
    return [dict(e.data) for e in Journal(ws.journal).tail(500).events if e.kind == "command-refused"]


def test_a_complete_an_agent_appends_is_refused_journaled_and_never_retried(ws: Workspace) -> None:
    store = open_loop(ws)
    drive(ws)
    forge(ws, {"kind": "complete", "id": "x"})
    drive(ws)
    state = store.read()
    assert state is not None and state.status == "running" and state.active
    assert refusals(ws) == [
        {"id": "x", "command": "complete", "source": "?", "why": "not sent by a person on this machine"}
    ]
    assert state.control_offset == control.end_offset(ws)  # consumed
    drive(ws)
    assert len(refusals(ws)) == 1  # never tried again
    assert control.applied_ids(Journal(ws.journal)) == {"x"}  # handled: a restore skips it too


@pytest.mark.parametrize("kind", engine.PERSON_ONLY)
def test_every_person_only_kind_is_refused_unsigned_and_applied_signed(ws: Workspace, kind: str) -> None:
    open_loop(ws)
    value = 5 if kind == "set-max-iterations" else None
    reason = "text" if kind in ("answer", "say") else None
    unsigned = control.send(ws, kind, value=value, reason=reason)
    signed = control.send(ws, kind, value=value, reason=reason, key=person(ws))
    commands = control.read_since(ws.control, 0, key.reader(ws.root))[0]
    assert [c.person for c in commands] == [False, True]
    drive(ws)
    handled = control.handled(Journal(ws.journal))
    assert handled[unsigned.id] == "command-refused"
    assert handled[signed.id] == "command-applied"


def test_a_pause_from_anyone_is_applied(ws: Workspace) -> None:
    store = open_loop(ws)
    forge(ws, {"kind": "pause", "id": "p"})
    drive(ws)
    state = store.read()
    assert state is not None and state.status == "paused" and refusals(ws) == []


def test_a_signed_line_copied_from_another_workspace_does_not_verify(ws: Workspace, tmp_path: Path) -> None:
    other = Workspace(tmp_path / "other")
    (other.root / ".claude").mkdir(parents=True)
    control.send(other, "complete", key=person(ws))
    store = open_loop(ws)
    ws.control.write_bytes(other.control.read_bytes())  # the line, mac and all
    drive(ws)
    state = store.read()
    assert state is not None and state.active and [r["command"] for r in refusals(ws)] == ["complete"]


def test_a_line_changed_after_signing_does_not_verify(ws: Workspace) -> None:
    control.send(ws, "set-max-iterations", value=5, key=person(ws))
    line = json.loads(ws.control.read_bytes())
    line["value"] = 500
    ws.control.write_bytes(json.dumps(line).encode() + b"\n")
    assert [c.person for c in control.read_since(ws.control, 0, key.reader(ws.root))[0]] == [False]


def test_the_key_is_32_bytes_only_its_owner_reads_in_the_trust_folder(ws: Workspace) -> None:
    assert key.load(ws.root) is None  # readers never make one
    made = key.load(ws.root, create=True)
    where = key.path(ws.root)
    assert made is not None and len(made) == 32 and where.parent == trust.home(ws.root)
    assert stat.S_IMODE(where.stat().st_mode) == 0o600
    assert key.load(ws.root, create=True) == made
    where.chmod(0o644)  # readable by others: not a secret any more
    assert key.load(ws.root) is None


def test_the_cli_inside_an_agent_does_not_sign(cli, ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    store = open_loop(ws)
    monkeypatch.setenv("CLAUDECODE", "1")
    assert key.for_person(ws.root) is None
    for kind in ("skip", "stop", "say"):
        ran = cli(kind, *(["x"] if kind == "say" else []))
        assert ran.code != 0 and "is for a person" in ran.err
    assert cli("pause").code == 0  # anyone may stop work
    assert "mac" not in json.loads(ws.control.read_bytes())
    drive(ws)
    state = store.read()
    assert state is not None and state.status == "paused"


def test_the_cli_of_a_person_signs_and_the_driver_applies(cli, ws: Workspace) -> None:
    store = open_loop(ws)
    assert cli("stop").code == 0
    assert "mac" in json.loads(ws.control.read_bytes())
    drive(ws)
    state = store.read()
    assert state is not None and state.status == "stopped"


@pytest.mark.parametrize("marker", ["LOOPDECK_RUN", "LOOPDECK_TASK"])
def test_a_detached_process_with_a_runs_marker_is_an_agents(marker: str) -> None:
    """`nohup env -u CLAUDECODE loopdeck trust --yes &`: no ancestor left, but the marker every
    process of a loopdeck run's agent inherits is still there."""
    assert agent_session({marker: "abc.1"}, ancestry=False) is not None


def test_the_runner_refuses_an_unsigned_complete(ws: Workspace) -> None:
    store = StateStore(ws)
    state = LoopState.new("x", check_tasks=False, check_github=False, driver="runner")
    store.write(state)
    trust.record(ws, state, "test")
    forge(ws, {"kind": "complete", "id": "c"})
    runner = Runner(ws, Options(agent="true"))
    assert runner.pending_interrupt() is None  # an unsigned complete ends no turn
    result = runner.decide(None)
    assert result.state is not None and result.state.active
    assert [r["id"] for r in refusals(ws)] == ["c"]


def test_a_workers_command_goes_through_the_same_rule() -> None:
    from loop.core import scheduler

    state = LoopState.new("x", status="running")
    step = workflow.command(state, Command("s", "t", "skip", "agent", target="worker-1"), None, NOW)
    assert ("command-refused", {"id": "s", "command": "skip", "source": "agent", "why": engine.NOT_A_PERSON,
                                "worker": "worker-1"}) in step.events  # fmt: skip
    assert step.applied == [] and isinstance(step, scheduler.Step)


def test_replaying_commands_ignores_unsigned_ones() -> None:
    """`held_at_limit` (resume) replays the queue: an unsigned new limit lifts nothing."""
    state = LoopState.new("x", max_iterations=3, iteration=3, status="paused")
    state.escalated = True
    state.waiting_for = {"kind": "escalation", "escalation": "max-iterations", "reason": "r", "since": "s"}
    unsigned = Command("m", "t", "set-max-iterations", "agent", value=0)
    signed = Command("m", "t", "set-max-iterations", "cli", value=0, person=True)
    assert engine.held_at_limit(state, [signed]) is None
    assert engine.held_at_limit(state, [unsigned]) == engine.held_at_limit(state, [])


def test_trust_shows_queued_commands_and_which_are_ignored(cli, ws: Workspace) -> None:
    state = LoopState.new("Build it", notify=["desktop"])
    StateStore(ws).write(state)
    forge(ws, {"kind": "complete", "id": "a", "reason": "done, trust me"})
    control.send(ws, "say", reason="use sqlite", key=person(ws))
    ran = cli("trust", "--yes")
    assert ran.code == 0
    assert "complete: done, trust me [will be ignored: not sent by a person on this machine]" in ran.out
    assert "say: use sqlite [from a person here]" in ran.out


# --- nothing from a loop's files reaches a terminal raw ------------------------------------------

HOSTILE = [
    "cmd:/bin/true\r\x1b[2Kdesktop",  # rewrites the line it is on
    "cmd:x \x1b[8mhidden\x1b[0m",  # concealed text
    "cmd:x \x1b]0;pwned title\x07",  # an OSC window title
    "cmd:x \x9b2J \u202egnp.exe",  # C1 CSI and a bidi override
]


def test_visible_shows_every_control_character() -> None:
    assert visible("a\r\x1b[2Kb") == "a\\r\\e[2Kb"
    assert visible("\x1b]0;t\x07") == "\\e]0;t\\a"
    assert visible("\x9b\u202e\x00") == "\\x9b\\u202e\\0"
    assert visible("a\nb") == "a\\nb" and visible("a\nb", keep_newlines=True) == "a\nb"
    assert visible("tab\tand ünïcode") == "tab\tand ünïcode"


def _raw(text: str) -> list[str]:
    return [c for c in text if (ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F or c == "\u202e"]


def test_trust_sources_and_status_print_no_control_character(cli, ws: Workspace) -> None:
    (ws.root / "TODO.md").write_text("".join(f"- [ ] task {t}\n" for t in HOSTILE))
    state = LoopState.new("Build \x1b[8mit", notify=HOSTILE, task_file="TODO.md", check_github=False)
    StateStore(ws).write(state)
    forge(ws, {"kind": "say", "id": "s", "reason": "hi\r\x1b[2Kthere"})
    outputs = [cli("trust", "--yes"), cli("sources", "--no-github"), cli("status")]
    for ran in outputs:
        assert _raw(ran.out + ran.err) == [], (ran.out, ran.err)
    assert "cmd:/bin/true\\r\\e[2Kdesktop" in outputs[0].out
    assert "\\e]0;pwned title\\a" in outputs[0].out
    assert "\\e[8mhidden" in outputs[1].out


def test_redacted_prompt_is_what_the_record_pins(ws: Workspace) -> None:
    token = "ghp_" + "A" * 36
    state = LoopState.new(f"push with {token} to https://bob:hunter2pass@example.com/r")
    StateStore(ws).write(state)
    trust.record(ws, state, "test")
    record = next(p for p in trust.home(ws.root).iterdir() if p.name.endswith(".json"))
    text = record.read_text()
    assert token not in text and "hunter2pass" not in text
    # the state keeps the prompt redacted (its writer redacts): still the same loop
    saved = StateStore(ws).read()
    assert saved is not None and trust.unconfirmed(ws, saved) == []
    assert os.environ.get("LOOPDECK_TRUST_HOME")
