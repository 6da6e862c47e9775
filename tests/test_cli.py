from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from loop.store.paths import Workspace
from loop.store.state import StateStore
from tests.conftest import SEED_STATE, run_loopdeck


def test_status_without_a_loop(cli) -> None:
    ran = cli("status")
    assert ran.code == 0 and "no loop" in ran.out
    ran = cli("status", "--json")
    assert ran.code == 0
    assert json.loads(ran.out)["loop"] is None


def test_start_then_status_json(cli, ws: Workspace) -> None:
    (ws.root / "TODO.md").write_text("- [ ] a\n")  # preflight: the task file must exist
    ran = cli(
        "start",
        "Build",
        "a",
        "todo",
        "API",
        "--max-iterations",
        "5",
        "--completion-promise",
        "DONE",
        "--task-file",
        "TODO.md",
        "--no-github",
        "--verify",
        "pytest -q",
    )
    assert ran.code == 0, ran.err
    state = StateStore(ws).read()
    assert state is not None
    assert state.prompt == "Build a todo API"
    assert (state.max_iterations, state.promise, state.task_path) == (5, "DONE", "TODO.md")
    assert state.check_github is False and state.check_tasks is True
    assert state.verify == ["pytest -q"]
    loop = json.loads(cli("status", "--json").out)["loop"]
    assert loop == {
        "kind": "orchestrator-loop",
        "state_file": str(ws.state),
        "status": "running",
        "iteration": 0,
        "max_iterations": 5,
        "verification_mode": False,
        "verification_remaining": 0,
        "completion_promise": "DONE",
        "started_at": state.started_at,
        "loop_id": state.loop_id,
        "session_id": None,
        "driver": None,
        "pid": None,
        "alive": None,
        "current_task": None,
        "escalated": False,
        "waiting_for": None,
        "usage": None,
        "limits": None,
        "notify": [],
        "sandbox": None,  # no runner has run it yet
        "confirmed": True,
        "last_validation": None,  # no check has run yet
    }
    assert "iteration    0/5" in cli("status").out
    cli("start", "again", "--force")
    assert json.loads(cli("status", "--json").out)["loop"]["completion_promise"] is None  # not "null"


def test_start_defaults_follow_seed_000(cli, ws: Workspace) -> None:
    assert cli("start", "x").code == 0
    state = StateStore(ws).read()
    assert state is not None
    assert state.max_iterations == 100
    assert state.completion_promise == "null" and state.task_file == "null"
    assert state.check_tasks and state.check_github


def test_start_refuses_an_active_loop_without_force(cli, ws: Workspace) -> None:
    assert cli("start", "first").code == 0
    ran = cli("start", "second")
    assert ran.code == 1 and "already running" in ran.err and "--force" in ran.err
    assert cli("start", "second", "--force").code == 0
    state = StateStore(ws).read()
    assert state is not None and state.prompt == "second"
    (archived,) = list(ws.archive_dir.iterdir())
    assert "first" in (archived / "state.md").read_text()
    assert json.loads((archived / "summary.json").read_text())["outcome"] == "replaced by a new loop"


def test_start_without_prompt_is_an_error(cli) -> None:
    ran = cli("start")
    assert ran.code == 1 and "PROMPT" in ran.err


def test_corrupt_state_status_exit_1(cli, ws: Workspace) -> None:
    bad = SEED_STATE.replace("iteration: 5", 'iteration: "five"')
    ws.state.write_text(bad)
    ran = cli("status")
    assert ran.code == 1
    assert f"{ws.state}:2: iteration: expected a whole number" in ran.err
    ran = cli("status", "--json")
    assert ran.code == 1 and json.loads(ran.out)["error"]["line"] == 2
    ran = cli("start", "new")
    assert ran.code == 1 and "corrupt" in ran.err
    assert ws.state.read_text() == bad
    assert cli("start", "new", "--force").code == 0
    assert next(iter(ws.claude_dir.glob("*.corrupt-*"))).read_text() == bad


def test_steering_verbs_queue_commands(cli, ws: Workspace) -> None:
    ran = cli("pause")
    assert ran.code == 1 and "no loop" in ran.err
    cli("start", "x")
    for verb in ("pause", "resume", "skip", "complete", "stop"):
        ran = cli(verb, "--reason", f"because {verb}")
        assert ran.code == 0 and "queued" in ran.out and "next Stop" in ran.out
    assert cli("set-max-iterations", "7").code == 0
    lines = [json.loads(line) for line in ws.control.read_text().splitlines()]
    assert [c["kind"] for c in lines] == ["pause", "resume", "skip", "complete", "stop", "set-max-iterations"]
    assert lines[0]["reason"] == "because pause" and lines[0]["source"] == "cli"
    assert lines[-1]["value"] == 7
    ran = cli("pause", "--wait", "0.3")
    assert ran.code == 1 and "not applied within 0.3 s" in ran.err


def test_log_renders_and_json(cli) -> None:
    nothing = cli("log")  # no loop yet: said, as every verb says it
    assert nothing.code == 1 and "has a journal yet: `loopdeck run PROMPT` starts one" in nothing.err
    cli("start", "x", "--max-iterations", "3")
    cli("pause")
    out = cli("log").out.splitlines()
    assert out[0].endswith("loopdeck: Loop started (max 3 iterations)")
    assert "Command queued: pause (cli)" in out[1]
    data = json.loads(cli("log", "--json", "-n", "1").out)
    assert [e["kind"] for e in data["events"]] == ["command-sent"]


def test_status_on_a_corrupt_state_offers_only_a_backup_restore_would_take(cli, ws: Workspace) -> None:
    import shutil

    cli("start", "x")
    shutil.copy(ws.state, ws.backup)  # the last good copy, as a runner's write leaves it
    good = ws.backup.read_text()
    ws.state.write_text("garbage\n")
    ran = cli("status")
    assert ran.code == 1 and f"{ws.backup}: `loopdeck restore` puts it back" in ran.err
    older = ws.state.with_name(ws.state.name + ".corrupt-20200101T000000")
    older.write_text("an older corrupt state, moved aside before\n")
    restored = cli("restore")
    assert restored.code == 0, restored.err
    kept = restored.out.split("the corrupt file is kept as ")[1].strip()
    assert kept != str(older) and Path(kept).read_text() == "garbage\n"
    ws.state.write_text("garbage\n")
    # the backup of a loop before this one: restore refuses it, so status does not offer it
    earlier = re.sub(r"(?m)^started_at: .*$", 'started_at: "2020-01-01T00:00:00+00:00"', good)
    ws.backup.write_text(re.sub(r"(?m)^loop_id: .*$", 'loop_id: "0123456789ab"', earlier))
    ran = cli("status")
    assert ran.code == 1 and "restore" not in ran.err
    assert "`loopdeck resume` rebuilds the state from the journal" in ran.err
    assert cli("restore").code == 1


def test_a_workers_flags_mistake_is_said_before_a_missing_agent(
    cli, ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(ws.root / "no-agents-here"))  # the default agent is not installed
    for argv, said in (
        (("--workers", "0"), "--workers takes 1 to 12, not 0"),
        (("--workers", "2"), "--workers needs a task graph"),
        (("--workers", "2", "--graph", str(ws.root / "nope.json")), "nope.json: no such task graph"),
    ):
        ran = cli("run", "x", "--headless", *argv)
        assert ran.code == 1 and said in ran.err and ran.err.count("\n") == 1, ran.err
    assert not ws.state.exists()  # nothing written


def test_a_skip_naming_no_worker_among_several_is_refused_naming_them(cli, ws: Workspace) -> None:
    from loop.core import scheduler
    from loop.store.state import StateStore

    cli("start", "x")
    store = StateStore(ws)
    state = store.read()
    assert state is not None
    two = (scheduler.Worker("worker-1", "3", (), ""), scheduler.Worker("worker-2", "4", (), ""))
    store.write(scheduler.keep(state, scheduler.Board(workers=two)))
    ran = cli("skip")
    assert ran.code == 1 and ran.err.count("\n") == 1 and "Traceback" not in ran.err
    assert "worker-1 (task 3), worker-2 (task 4): skip one's task with --worker NAME" in ran.err
    assert cli("skip", "--worker", "worker-2").code == 0
    lines = [json.loads(line) for line in ws.control.read_text().splitlines()]
    assert [(c["kind"], c.get("target")) for c in lines] == [("skip", "worker-2")]


@pytest.mark.parametrize(
    "verb",
    [
        "start",
        "status",
        "pause",
        "resume",
        "skip",
        "complete",
        "stop",
        "set-max-iterations",
        "log",
        "sources",
        "run",
        "tui",
        "demo",
        "install",
        "hook",
        "doctor",
        "config",
        "restore",
        "trust",
        "serve",
    ],
)
def test_help_everywhere(cli, verb: str) -> None:
    ran = cli(verb, "--help")
    assert ran.code == 0 and "usage: loopdeck" in ran.out


def test_usage_error_exit_2(cli) -> None:
    assert cli("frobnicate").code == 2
    assert cli("log", "-n", "many").code == 2


def test_real_process_finds_workspace_from_a_subfolder(ws: Workspace) -> None:
    assert run_loopdeck("start", "hello", cwd=ws.root).returncode == 0
    sub = ws.root / "src" / "deep"
    sub.mkdir(parents=True)
    ran = run_loopdeck("status", "--json", cwd=sub)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["workspace"] == str(ws.root)
    assert run_loopdeck(cwd=sub).returncode == 0  # no verb: status


def test_limits_and_targets_are_kept_and_shown(cli, ws: Workspace, monkeypatch, tmp_path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "notify-send").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "notify-send").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")  # `desktop` needs it here
    ran = cli(
        "start",
        "x",
        "--max-cost",
        "2.5",
        "--stuck-after",
        "4",
        "--same-error-after",
        "5",
        "--notify",
        "desktop",
        "--notify",
        "https://hooks.example.invalid/x",
    )
    assert ran.code == 0, ran.err
    state = StateStore(ws).read()
    assert state is not None
    assert state.limits == {"max_cost_micro_usd": 2_500_000, "stuck_after": 4, "same_error_after": 5}
    assert state.notify == ["desktop", "https://hooks.example.invalid/x"]
    text = cli("status").out
    assert "cost         cost not reported of a $2.50 budget" in text
    assert "limits       stuck after 4 turns, same error 5 times" in text
    assert "notify       desktop, https://hooks.example.invalid/x" in text
    assert cli("start", "y", "--force", "--max-cost", "0").code == 1


class Killed(BaseException):
    """The process ending where it stands."""


def test_start_killed_as_it_wrote_the_state_kept_the_confirmation(
    cli, ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `start` killed right after writing the new loop left it confirmed: the person typed it.
    One refused by a loop already running leaves that loop's confirmation as it was."""
    from loop import trust

    assert cli("start", "first").code == 0
    first = StateStore(ws).read()
    assert first is not None and trust.unconfirmed(ws, first) == []
    assert cli("start", "second").code == 1
    assert trust.unconfirmed(ws, first) == []  # refused: the running loop is still confirmed

    written = StateStore.write

    def then_killed(self: StateStore, *args: object, **kwargs: object) -> None:
        written(self, *args, **kwargs)  # type: ignore[arg-type]
        raise Killed

    monkeypatch.setattr(StateStore, "write", then_killed)
    with pytest.raises(Killed):
        cli("start", "third", "--force")
    monkeypatch.setattr(StateStore, "write", written)
    third = StateStore(ws).read()
    assert third is not None and third.prompt == "third"
    assert trust.unconfirmed(ws, third) == []
