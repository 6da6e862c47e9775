"""`status` lists every loop in the folder: loopdeck's own and its neighbours, read-only."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable

from loop.store.paths import Workspace
from tests.conftest import FIXTURES, Ran

RALPH = FIXTURES / "formats" / "ralph-loop.local.md"


def test_status_json_lists_both(cli: Callable[..., Ran], ws: Workspace) -> None:
    assert cli("start", "Build", "--no-github", "--no-tasks").code == 0
    shutil.copy(RALPH, ws.ralph_state)
    ran = cli("status", "--json")
    assert ran.code == 0
    data = json.loads(ran.out)
    assert [loop["kind"] for loop in data["loops"]] == ["orchestrator-loop", "ralph-loop"]
    assert data["loops"][0] == data["loop"]
    assert data["loops"][1]["iteration"] == 1 and data["loops"][1]["status"] == "running"


def test_status_without_our_loop(cli: Callable[..., Ran], ws: Workspace) -> None:
    shutil.copy(RALPH, ws.ralph_state)
    ran = cli("status")
    assert ran.code == 0
    assert "ralph-loop" in ran.out and "iteration 1/20" in ran.out and "(read-only)" in ran.out
    assert "no loopdeck loop" in ran.out
    data = json.loads(cli("status", "--json").out)
    assert data["loop"] is None and [loop["kind"] for loop in data["loops"]] == ["ralph-loop"]


def test_status_names_an_unreadable_neighbour(cli: Callable[..., Ran], ws: Workspace) -> None:
    (ws.root / ".claude-task-state.json").write_text('{"status": "running", "currentIteration": ')
    ran = cli("status")
    assert ran.code == 0
    assert (
        "claude-task-state" in ran.out and "unreadable" in ran.out and ".claude-task-state.json:1" in ran.out
    )
    data = json.loads(cli("status", "--json").out)
    [loop] = data["loops"]
    assert loop["status"] == "unreadable" and loop["error"]["line"] == 1


def test_empty_folder_has_no_loops(cli: Callable[..., Ran]) -> None:
    data = json.loads(cli("status", "--json").out)
    assert data["loops"] == []


def test_a_corrupt_state_is_listed_as_unreadable(cli: Callable[..., Ran], ws: Workspace) -> None:
    assert cli("start", "Build", "--no-github", "--no-tasks").code == 0
    ws.state.write_text(ws.state.read_text().replace("iteration: 0", 'iteration: "zero"'))
    shutil.copy(RALPH, ws.ralph_state)
    ran = cli("status", "--json")
    assert ran.code == 1
    data = json.loads(ran.out)
    assert [(loop["kind"], loop["status"]) for loop in data["loops"]] == [
        ("orchestrator-loop", "unreadable"),
        ("ralph-loop", "running"),
    ]
    assert data["loops"][0]["error"]["line"] is not None
