"""The trust boundary: what a person on this machine confirmed, where that is kept, and who may
confirm. Everything a workspace file names is data until then."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from loop import trust
from loop.core import engine
from loop.core.model import Result, StopInput
from loop.drivers import writer
from loop.store.journal import Journal
from loop.store.paths import Workspace
from loop.store.state import LoopState, StateStore
from loop.trust.person import agent_session
from tests.conftest import REPO, another_machine

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


def confirmed_loop(ws: Workspace, **values: object) -> LoopState:
    state = LoopState.new("Build it", **values)
    StateStore(ws).write(state)
    trust.record(ws, state, "test")
    return state


def test_a_record_is_read_to_its_size_not_to_the_limit(ws: Workspace) -> None:
    """The monitor and the runner read a loop's record on every snapshot and iteration: a
    read of the limit allocated 4 MB each time for a record of a few hundred bytes. A record
    over the limit is still no record."""
    import tracemalloc

    state = confirmed_loop(ws, verify=["pytest -q"])
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        assert trust.confirmed(ws, state)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 256 * 1024, peak
    record = Path(trust._record_file(ws))
    record.write_text(json.dumps({"pinned": trust.pinned(state), "padding": "x" * trust.MAX_RECORD_BYTES}))
    assert not trust.confirmed(ws, state)


# --- what is pinned, and what a change asks ----------------------------------------------------


def test_a_loop_nobody_here_started_lists_everything_it_names(ws: Workspace) -> None:
    state = LoopState.new("Do X", verify=["pytest -q"], notify=["cmd:notify-me", "https://h.example/x"])
    state.extra["runner"] = {"agent": "claude -p"}
    assert trust.unconfirmed(ws, state) == [
        "prompt: Do X",
        "agent command: claude -p",
        "verification command: pytest -q",
        "notification target: cmd:notify-me",
        "notification target: https://h.example/x",
    ]
    assert not trust.confirmed(ws, state)


def test_a_change_asks_again_and_names_only_what_changed(ws: Workspace) -> None:
    state = confirmed_loop(ws, verify=["pytest -q"], notify=["desktop"])
    assert trust.confirmed(ws, state)
    changed = state.copy()
    changed.verify = ["pytest -q", "make"]
    changed.notify = ["desktop", "cmd:evil"]
    changed.body = "\nSomething else\n"
    assert trust.unconfirmed(ws, changed) == [
        "prompt: Something else",
        "verification command: make",
        "notification target: cmd:evil",
    ]
    fewer = state.copy()
    fewer.verify, fewer.notify = [], []
    # a check taken away is a change too: a loop without its verification completes red
    assert trust.unconfirmed(ws, fewer) == [
        "removed: verification command: pytest -q",
        "removed: notification target: desktop",
    ]


def test_another_loop_in_the_same_folder_is_not_confirmed_by_the_last_one(ws: Workspace) -> None:
    confirmed_loop(ws, started_at="2026-01-01T00:00:00+00:00")
    other = LoopState.new("Build it", started_at="2026-02-02T00:00:00+00:00")
    assert trust.unconfirmed(ws, other) == ["prompt: Build it"]


# --- where the record is kept -----------------------------------------------------------------


def test_the_record_is_never_where_the_environment_of_a_repository_points(
    ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A repository's `.claude/settings.json` sets the hook's environment: XDG_STATE_HOME is not
    read, and an override is taken only as an absolute folder of this user, closed to others,
    outside the workspace."""
    import pwd

    home = Path(pwd.getpwuid(os.getuid()).pw_dir) / ".local" / "state" / "loopdeck" / "trust"
    monkeypatch.delenv("LOOPDECK_TRUST_HOME")
    monkeypatch.setenv("XDG_STATE_HOME", str(ws.root / ".claude" / "xdg"))
    monkeypatch.setenv("HOME", str(ws.root))
    assert trust.home(ws.root) == home
    inside = ws.root / ".claude" / "xdg"
    inside.mkdir(mode=0o700)
    open_folder = tmp_path / "open"
    open_folder.mkdir()
    open_folder.chmod(0o777)
    for value in (".claude/xdg", str(inside), str(tmp_path / "missing"), str(open_folder)):
        monkeypatch.setenv("LOOPDECK_TRUST_HOME", value)
        assert trust.home(ws.root) == home, value
    good = tmp_path / "records"
    good.mkdir(mode=0o700)
    monkeypatch.setenv("LOOPDECK_TRUST_HOME", str(good))
    assert trust.home(ws.root) == good


def test_the_record_is_not_written_through_a_symlink(ws: Workspace, tmp_path: Path) -> None:
    state = LoopState.new("x")
    trust.record(ws, state, "test")
    path = next(trust.home(ws.root).glob("*.json"))
    target = tmp_path / "elsewhere.json"
    target.write_text("{}")
    path.unlink()
    path.symlink_to(target)
    trust.record(ws, state, "test")  # replaced by rename: the link goes, its target is untouched
    assert target.read_text() == "{}" and not path.is_symlink()


# --- the drivers -------------------------------------------------------------------------------


def test_the_hook_allows_the_stop_and_tells_the_person_only(ws: Workspace) -> None:
    state = LoopState.new("REPO-PROMPT")
    stop = StopInput(last_text="hi", session_id="s1", unconfirmed=("prompt: REPO-PROMPT",))
    assert not engine.needs_sources(state, stop, [])
    result = engine.decide(state, stop, [], None, NOW)
    assert result.action == "allow" and result.reason is None and result.state is None
    assert result.system_message is not None and "loopdeck trust" in result.system_message


def test_a_runner_waits_for_a_person_when_the_file_changes_under_it(ws: Workspace) -> None:
    state = LoopState.new("x", status="running", driver="runner")
    stop = StopInput(last_text=None, driver="runner", unconfirmed=("notification target: cmd:evil",))
    result = engine.decide(state, stop, [], None, NOW)
    assert result.state is not None and result.state.status == "paused"
    assert result.state.waiting_for is not None and result.state.waiting_for["escalation"] == "unconfirmed"
    assert "cmd:evil" in result.state.waiting_for["reason"] and result.reason is None


def test_only_confirmed_targets_are_notified(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    """A target added to the state file after the person confirmed it is never told anything."""
    from loop.drivers import notify

    sent: list[list[str]] = []
    monkeypatch.setattr(notify, "send_detached", lambda root, targets, due: sent.append(list(targets)))
    state = confirmed_loop(ws, notify=["desktop"])
    changed = state.copy()
    changed.notify = ["desktop", "cmd:touch pwned"]
    result = Result("allow", changed, events=[("escalation", {"reason": "stuck"})])
    writer.carry_out(ws, StateStore(ws), Journal(ws.journal), changed, result, NOW)
    assert sent == [["desktop"]]
    stranger = LoopState.new("other", notify=["cmd:touch pwned"], started_at="2020-01-01T00:00:00+00:00")
    writer.carry_out(
        ws,
        StateStore(ws),
        Journal(ws.journal),
        stranger,
        Result("allow", stranger, events=[("completed", {})]),
        NOW,
    )
    assert sent[-1] == []


def test_trust_lets_a_waiting_runner_go_on(cli, ws: Workspace) -> None:
    state = confirmed_loop(ws, status="paused")
    state.notify = ["desktop"]
    state.waiting_for = {"kind": "escalation", "escalation": "unconfirmed", "reason": "…", "since": "x"}
    StateStore(ws).write(state)
    ran = cli("trust", "--yes")
    assert ran.code == 0 and "notification target: desktop" in ran.out and "resume queued" in ran.out
    assert trust.confirmed(ws, state)


# --- who may confirm ----------------------------------------------------------------------------


@pytest.mark.parametrize("marker", ["CLAUDECODE", "LOOPDECK_DRIVER", "LOOPDECK_WORKER", "GEMINI_CLI"])
def test_an_agents_environment_is_known(marker: str) -> None:
    assert agent_session({marker: "1"}, ancestry=False) is not None
    assert agent_session({}, ancestry=False) is None


def test_an_agent_that_clears_its_environment_is_known_by_its_ancestors(tmp_path: Path) -> None:
    """`env -u CLAUDECODE loopdeck trust` still runs below the agent's shell."""
    probe = "from loop.trust.person import agent_session; print(agent_session() or 'person')"
    inner = [sys.executable, "-c", probe]
    shell = f'env -u CLAUDECODE {inner[0]} -c "{probe}"'
    env = {**os.environ, "CLAUDECODE": "1", "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        ["/bin/sh", "-c", f"{shell}; true"], env=env, capture_output=True, text=True, timeout=30
    )
    assert "Claude Code's session" in done.stdout and "above this one" in done.stdout, (
        done.stdout + done.stderr
    )
    alone = subprocess.run(
        inner,
        env={k: v for k, v in env.items() if k != "CLAUDECODE"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert alone.stdout.strip() == "person", alone.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["trust", "--yes"],
        ["trust"],
        ["start", "x"],
        ["resume", "--yes"],
        ["complete"],
        ["answer", "yes"],
        ["set-max-iterations", "500"],
        ["run", "--yes", "--headless"],
    ],
)
def test_confirming_verbs_refuse_inside_an_agents_session(
    cli,
    ws: Workspace,
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
) -> None:
    state = confirmed_loop(ws)
    monkeypatch.setenv("CLAUDECODE", "1")
    ran = cli(*argv)
    assert ran.code == 1 and "is for a person" in ran.err and "Traceback" not in ran.err, ran.err
    assert StateStore(ws).read() == state


def test_pausing_and_saying_are_allowed_inside_an_agents_session(
    cli,
    ws: Workspace,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    confirmed_loop(ws)
    monkeypatch.setenv("CLAUDECODE", "1")
    assert cli("pause").code == 0 and cli("status").code == 0
    said = cli("say", "a note")  # words to the agent as a person's: never from inside an agent
    assert said.code == 1 and "is for a person" in said.err


def test_a_state_file_changed_by_another_machine_is_refused_by_run_until_confirmed(
    cli,
    ws: Workspace,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    confirmed_loop(ws, notify=["cmd:touch pwned"])
    another_machine(tmp_path, monkeypatch)
    ran = cli("run", "--headless", "--agent", "true")
    assert (
        ran.code == 1 and "notification target: cmd:touch pwned" in ran.err and "Nothing was run" in ran.err
    )
    assert not (ws.root / "pwned").exists()


# --- paths -------------------------------------------------------------------------------------


def test_a_task_graph_outside_the_workspace_is_refused(
    cli,
    ws: Workspace,
    tmp_path: Path,
) -> None:
    """Regression: a committed `parallel: {graph: /outside/graph.json}` made `run --workers`
    rewrite a file outside the workspace."""
    outside = tmp_path / "graph.json"
    outside.write_text(json.dumps({"tasks": [{"id": "1", "subject": "x", "status": "pending"}]}))
    state = confirmed_loop(ws)
    state.extra["parallel"] = json.dumps({"graph": str(outside), "capacity": 2})
    StateStore(ws).write(state)
    trust.record(ws, state, "test")
    before = outside.read_text()
    ran = cli("run", "--workers", "2", "--headless", "--agent", "true")
    assert ran.code == 1 and "outside the workspace" in ran.err, ran.err
    ran = cli("run", "--workers", "2", "--graph", str(outside), "--headless", "--agent", "true")
    assert ran.code == 1 and "outside the workspace" in ran.err, ran.err
    assert outside.read_text() == before


# --- the monitor -------------------------------------------------------------------------------


async def test_the_monitor_asks_a_person_to_confirm_a_cloned_loop(tmp_path: Path) -> None:
    from tests.test_tui import SIZE, app, make
    from tools import screenshots
    from tui.screens.confirm import ConfirmScreen

    ws = make(tmp_path, "unconfirmed")
    monitor = app(ws, git=False)
    async with monitor.run_test(size=SIZE) as pilot:
        await screenshots.settle(monitor)
        assert isinstance(monitor.screen, ConfirmScreen)
        assert "notification target: cmd:notify-team" in monitor.screen.detail
        await pilot.press("y")
        await pilot.pause()
    state = StateStore(ws).read()
    assert state is not None and trust.confirmed(ws, state)


async def test_the_monitor_inside_an_agents_session_cannot_confirm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.test_tui import SIZE, app, make
    from tools import screenshots
    from tui.screens.confirm import ConfirmScreen

    ws = make(tmp_path, "unconfirmed")
    monkeypatch.setenv("LOOPDECK_DRIVER", "runner")
    monitor = app(ws, git=False)
    async with monitor.run_test(size=SIZE) as pilot:
        await screenshots.settle(monitor)
        assert isinstance(monitor.screen, ConfirmScreen)
        await pilot.press("y")
        await pilot.pause()
    state = StateStore(ws).read()
    assert state is not None and not trust.confirmed(ws, state)


def test_start_takes_an_exact_command_to_allow(cli, ws: Workspace) -> None:
    """A hook loop's verification can run one exact command with its options, when a person
    allowed it at the terminal."""
    refused = cli("start", "x", "--verify", "pytest -p xdist -n 2")
    assert refused.code == 1 and "--verify-allow" in refused.err
    ran = cli("start", "x", "--verify", "pytest -p xdist -n 2", "--verify-allow", "pytest -p xdist -n 2")
    assert ran.code == 0, ran.err
    state = StateStore(ws).read()
    assert state is not None and state.extra["verify_allow"] == ["pytest -p xdist -n 2"]
    assert trust.confirmed(ws, state)


# --- a check taken away is as unconfirmed as one added -------------------------------------------


def test_a_check_removed_from_the_state_is_unconfirmed(ws: Workspace) -> None:
    state = confirmed_loop(ws, verify=["make verify"], notify=["desktop"])
    state.extra["verify_allow"] = ["make"]
    trust.record(ws, state, "test")
    emptied = state.copy()
    emptied.verify = []
    emptied.notify = []
    emptied.extra["verify_allow"] = []
    assert trust.unconfirmed(ws, emptied) == [
        "removed: verification command: make verify",
        "removed: allowlist entry: make",
        "removed: notification target: desktop",
    ]


def test_a_runner_whose_verification_was_removed_mid_run_does_not_complete(ws: Workspace) -> None:
    from loop.drivers.runner import Options, Runner

    state = LoopState.new("x", check_tasks=False, check_github=False, driver="runner", verify=["false"])
    StateStore(ws).write(state)
    trust.record(ws, state, "test")
    edited = StateStore(ws).read()
    assert edited is not None
    edited.verify = []  # the agent empties `verify:`, then claims completion
    StateStore(ws).write(edited)
    result = Runner(ws, Options(agent="true")).decide("<promise>DONE</promise>")
    assert result.state is not None and result.state.status == "paused"
    assert result.state.waiting_for is not None and result.state.waiting_for["escalation"] == "unconfirmed"
    assert "removed: verification command: false" in result.state.waiting_for["reason"]


# --- a repository's settings never choose the person's files -------------------------------------


def test_xdg_and_trust_home_inside_the_repository_are_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`sub/.claude/settings.json` sets LOOPDECK_TRUST_HOME and XDG_CONFIG_HOME to a folder of the
    repository holding a forged trust record and user config: the loop stays unconfirmed, the
    config is the project's (unconfirmed)."""
    from loop.store import config as config_mod
    from loop.store.xdg import usable

    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    root = repo / "sub"
    (root / ".claude").mkdir(parents=True)
    ws = Workspace(root)
    forged = repo / "forged"
    forged.mkdir(mode=0o700)
    forged.chmod(0o700)
    (forged / "loopdeck").mkdir()
    (forged / "loopdeck" / "config.toml").write_text('agent = "evil"\n')
    (root / ".loopdeck.toml").write_text('agent = "evil"\n')
    state = LoopState.new("Build it", verify=["make"])
    StateStore(ws).write(state)
    with monkeypatch.context() as shipped:  # what the repository shipped, in its own folder
        shipped.setattr(trust, "_home", lambda workspace: str(forged))
        trust.record(ws, state, "forged")
        trust.record_config(ws, {"agent": "evil"}, "forged")
    assert any(p.name.endswith(".json") for p in forged.iterdir())
    monkeypatch.setenv("LOOPDECK_TRUST_HOME", str(forged))
    monkeypatch.setattr(trust, "_user_home", lambda uid: str(tmp_path / "home"))
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(root))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(forged))
    assert trust.home(ws.root) != forged
    assert trust.unconfirmed(ws, state) != []  # not the forged record
    assert trust.config_unconfirmed(ws, {"agent": "evil"}) == ["agent: evil"]
    assert config_mod.user_path(None, root).parent.parent != forged
    loaded = config_mod.load(root)
    assert loaded.user.values.get("agent") is None and loaded.project.values.get("agent") == "evil"
    assert not usable("relative/dir", root) and usable(str(tmp_path / "elsewhere"), root)


def test_relative_xdg_values_are_ignored(tmp_path: Path) -> None:
    from loop.store.xdg import base

    env = {"XDG_CACHE_HOME": "cache", "XDG_CONFIG_HOME": "./conf", "HOME": str(tmp_path)}
    assert base("XDG_CACHE_HOME", ".cache", env) == tmp_path / ".cache"
    assert base("XDG_CONFIG_HOME", ".config", env) == tmp_path / ".config"


# --- a prompt holding a secret -------------------------------------------------------------------


def test_run_with_a_secret_in_the_prompt_does_not_escalate_at_iteration_0(ws: Workspace) -> None:
    from loop.demo import workspace as demo

    token = "ghp_" + "B" * 36
    done = subprocess.run(
        [
            sys.executable, "-m", "tui.cli", "-C", str(ws.root), "run", "--yes", "--agent",
            f"{sys.executable} -c \"print('ok')\"", "--max-iterations", "1", "--no-github", "--no-tasks",
            "--", f"push with {token} to https://bob:hunter2pass@example.com/r",
        ],
        capture_output=True, text=True, cwd=REPO, timeout=120, check=False,
    )  # fmt: skip
    assert "unconfirmed" not in done.stdout + done.stderr, done.stdout + done.stderr
    kinds = [e.kind for e in Journal(ws.journal).tail(500).events]
    assert "escalation" not in kinds or all(
        e.data.get("kind") != "unconfirmed"
        for e in Journal(ws.journal).tail(500).events
        if e.kind == "escalation"
    )
    for path in trust.home(ws.root).iterdir():
        text = path.read_text(errors="replace")
        assert token not in text and "hunter2pass" not in text
    assert demo is not None


def test_a_trust_home_or_xdg_folder_inside_an_agent_clis_folder_is_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent writes its CLI's folders even in the sandbox (`~/.codex`, `~/.claude`…): a trust
    folder it planted there, named by a variable a settings file can set, is nobody's."""
    from loop.store.xdg import usable

    home = tmp_path / "home"
    planted = home / ".codex" / "trust"
    planted.mkdir(parents=True, mode=0o700)
    planted.chmod(0o700)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("LOOPDECK_TRUST_HOME", str(planted))
    assert trust.home(tmp_path / "ws") != planted
    assert not usable(str(home / ".claude" / "xdg"), tmp_path / "ws")
    assert usable(str(home / "own-trust"), tmp_path / "ws")
