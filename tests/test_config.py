"""Saved defaults: the user's file and the project's, the command line over both, and a
project's values used only once a person here confirmed them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loop.demo import workspace
from loop.store.config import ConfigError, load, user_path
from loop.store.paths import Workspace
from loop.store.state import StateStore


@pytest.fixture
def user_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "xdg-config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    path = home / "loopdeck" / "config.toml"
    path.parent.mkdir(parents=True)
    return path


def test_the_user_file_honours_xdg_config_home(tmp_path: Path) -> None:
    assert user_path({"XDG_CONFIG_HOME": "/x/conf", "HOME": "/h"}) == Path("/x/conf/loopdeck/config.toml")
    assert user_path({"HOME": "/h"}) == Path("/h/.config/loopdeck/config.toml")
    assert user_path({"XDG_CONFIG_HOME": "relative", "HOME": "/h"}) == Path("/h/.config/loopdeck/config.toml")


def test_start_takes_the_users_defaults_and_the_command_line_wins(
    ws: Workspace, cli, user_file: Path
) -> None:
    user_file.write_text(
        'notify = ["bell"]\nverify = ["pytest -q"]\nmax_iterations = 12\nmax_cost = 2.5\nstuck_after = 5\n'
    )
    assert cli("start", "x", "--no-github", "--no-tasks").code == 0
    state = StateStore(ws).read()
    assert state is not None
    assert state.notify == ["bell"] and state.verify == ["pytest -q"] and state.max_iterations == 12
    assert state.limits == {"max_cost_micro_usd": 2_500_000, "stuck_after": 5}
    ran = cli("start", "y", "--force", "--max-iterations", "3", "--verify", "ruff check .", "--no-github")
    assert ran.code == 0, ran.err
    state = StateStore(ws).read()
    assert state is not None and state.max_iterations == 3 and state.verify == ["ruff check ."]
    assert state.notify == ["bell"]  # not given: still the saved one


def test_run_takes_the_runners_defaults(
    tmp_path: Path, user_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.conftest import run_loopdeck

    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-home"))
    root = workspace.create(tmp_path / "repo", tasks=3)
    user_file.write_text(
        f"agent = {json.dumps(workspace.agent_command())}\niteration_timeout = 90\nretries = 0\nmax_iterations = 1\n"
    )
    done = run_loopdeck(
        "-C",
        str(root),
        "run",
        "x",
        "--task-file",
        "TODO.md",
        "--no-github",
        "--no-tasks",
        "--headless",
        cwd=root,
    )
    assert done.returncode == 1, done.stdout + done.stderr  # stopped at its limit of 1, waiting for a person
    state = StateStore(Workspace(root)).read()
    assert state is not None and state.max_iterations == 1
    runner = state.extra["runner"]
    assert runner["agent"] == workspace.agent_command()
    assert runner["iteration_timeout"] == 90 and runner["retries"] == 0


def test_a_project_file_is_used_only_once_a_person_confirmed_it(ws: Workspace, cli) -> None:
    (ws.root / ".loopdeck.toml").write_text(
        'verify = ["make evil"]\nnotify = ["cmd:curl-it"]\nmax_iterations = 7\n'
    )
    ran = cli("start", "x", "--no-github", "--no-tasks")  # not a terminal: nobody can be asked
    assert ran.code == 1 and not ws.state.exists()
    assert "names values nobody on this machine confirmed" in ran.err
    assert "verify: ['make evil']" in ran.err and "loopdeck config --trust" in ran.err
    shown = cli("config")
    assert "NOT CONFIRMED" in shown.out and str(ws.root / ".loopdeck.toml") in shown.out
    # given on the command line, a value needs no confirmation from the file
    ran = cli(
        "start",
        "x",
        "--no-github",
        "--no-tasks",
        "--verify",
        "pytest -q",
        "--notify",
        "bell",
        "--max-iterations",
        "2",
    )
    assert ran.code == 0, ran.err
    assert cli("config", "--trust").code == 1  # not a terminal, no --yes
    confirmed = cli("config", "--trust", "--yes")
    assert confirmed.code == 0 and "confirmed on this machine" in confirmed.out
    assert "NOT CONFIRMED" not in cli("config").out
    # confirmed, the file's values are used, and checked as the options would be
    ran = cli("start", "y", "--force", "--no-github", "--no-tasks")
    assert ran.code == 1 and "curl-it is not on PATH" in ran.err, ran.err
    ran = cli("start", "y", "--force", "--no-github", "--no-tasks", "--notify", "bell")
    assert ran.code == 0, ran.err
    state = StateStore(ws).read()
    assert state is not None and state.verify == ["make evil"] and state.max_iterations == 7
    # a changed value asks again
    (ws.root / ".loopdeck.toml").write_text('verify = ["make worse"]\nmax_iterations = 7\n')
    ran = cli("start", "z", "--force", "--no-github", "--no-tasks")
    assert ran.code == 1 and "make worse" in ran.err and "max_iterations" not in ran.err


def test_confirming_a_project_file_is_refused_inside_an_agent(
    ws: Workspace, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws.root / ".loopdeck.toml").write_text('verify = ["make evil"]\n')
    monkeypatch.setenv("CLAUDECODE", "1")
    ran = cli("config", "--trust", "--yes")
    assert ran.code == 1 and "NOT CONFIRMED" in cli("config").out


def test_pyproject_tool_loopdeck_is_the_project_file(ws: Workspace, cli) -> None:
    (ws.root / "pyproject.toml").write_text('[project]\nname = "x"\n\n[tool.loopdeck]\nmax_iterations = 9\n')
    config = load(ws.root)
    assert config.get("max_iterations") == 9 and config.project.table == "tool.loopdeck"
    assert cli("config", "--trust", "--yes").code == 0
    assert cli("start", "x", "--no-github", "--no-tasks").code == 0
    state = StateStore(ws).read()
    assert state is not None and state.max_iterations == 9


def test_config_shows_each_value_and_where_it_comes_from(ws: Workspace, cli, user_file: Path) -> None:
    user_file.write_text('agent = "codex"\nretries = 4\n')
    (ws.root / ".loopdeck.toml").write_text("retries = 1\n")
    ran = cli("config", "--json")
    assert ran.code == 0, ran.err
    rows = {row["key"]: row for row in json.loads(ran.out)["values"]}
    assert rows["agent"]["value"] == "codex" and rows["agent"]["from"] == "user"
    assert rows["agent"]["file"] == str(user_file)
    assert rows["retries"]["value"] == 1 and rows["retries"]["from"] == "project"
    assert rows["retries"]["confirmed"] is False
    assert rows["max_iterations"] == {
        "key": "max_iterations",
        "value": 100,
        "from": "built-in",
        "file": None,
        "option": "--max-iterations",
        "confirmed": True,
    }
    text = cli("config").out
    assert any(
        line.startswith("agent") and "codex" in line and str(user_file) in line for line in text.splitlines()
    )


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('agnet = "codex"\n', "unknown key 'agnet'"),
        ("retries = -1\n", "retries: expected a whole number from 0 to 100"),
        ('notify = "desktop"\n', "notify: expected a list of notification targets"),
        ("max_cost = 0\n", "max_cost: expected US dollars, more than 0"),
        ("iteration_timeout = nan\n", "iteration_timeout: expected seconds"),
        ("retries = = 3\n", ":1: not valid TOML"),
    ],
)
def test_a_bad_file_is_one_line_naming_it(ws: Workspace, cli, user_file: Path, text: str, said: str) -> None:
    user_file.write_text(text)
    with pytest.raises(ConfigError, match=r"config\.toml"):
        load(ws.root)
    ran = cli("start", "x", "--no-github", "--no-tasks")
    assert ran.code == 1 and said in ran.err and str(user_file) in ran.err, ran.err
    assert "Traceback" not in ran.err and not ws.state.exists()


def test_a_user_file_inside_the_workspace_is_not_the_persons(
    ws: Workspace, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    inside = ws.root / "conf"
    (inside / "loopdeck").mkdir(parents=True)
    (inside / "loopdeck" / "config.toml").write_text('verify = ["make evil"]\n')
    monkeypatch.setenv("XDG_CONFIG_HOME", str(inside))
    config = load(ws.root)
    assert config.get("verify") is None and config.user.ignored
    assert cli("start", "x", "--no-github", "--no-tasks").code == 0
    state = StateStore(ws).read()
    assert state is not None and state.verify == []


def test_the_slash_command_takes_saved_defaults_and_never_an_unconfirmed_project_file(
    ws: Workspace, user_file: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from loop.drivers import hook_prompt
    from tests.test_hook_prompt import payload

    def prompt_hook(ws: Workspace, text: str) -> object:
        return hook_prompt.handle(payload(ws, text), {"CLAUDE_PROJECT_DIR": str(ws.root)})

    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-home"))
    user_file.write_text('notify = ["bell"]\nmax_iterations = 11\n')
    out = prompt_hook(ws, "/orchestrator-loop Build it -- --no-github --no-tasks")
    state = StateStore(ws).read()
    assert state is not None, out
    assert state.notify == ["bell"] and state.max_iterations == 11
    ws.state.unlink()
    (ws.root / ".loopdeck.toml").write_text('verify = ["make evil"]\n')
    out = prompt_hook(ws, "/orchestrator-loop Build it -- --no-github --no-tasks")
    assert not ws.state.exists()
    assert "loopdeck config --trust" in json.dumps(out)


def test_a_pyproject_without_our_table_is_not_ours_to_judge(ws: Workspace, cli) -> None:
    (ws.root / "pyproject.toml").write_text("[project\nname = broken\n")
    assert load(ws.root).project.exists is False
    assert cli("start", "x", "--no-github", "--no-tasks").code == 0
