"""Options checked where they are read, before anything is written; `-C` wherever it is typed."""

from __future__ import annotations

import pytest

from loop.store.paths import Workspace
from loop.store.state import StateStore
from tests.conftest import run_loopdeck

BAD_START = {
    "a limit past 2^63": ["--max-iterations", "99999999999999999999999"],
    "a negative limit": ["--max-iterations", "-1"],
    "a promise of two lines": ["--completion-promise", "DONE\nreally"],
    "a promise with a control character": ["--completion-promise", "DO\x1bNE"],
    "a negative budget": ["--max-cost", "-1"],
    "a stuck threshold of 0": ["--stuck-after", "0"],
    "an unknown notification target": ["--notify", "carrier-pigeon"],
    "a dangerous verification": ["--verify", "rm -rf /"],
    "a task file outside": ["--task-file", "../elsewhere.md"],
    "a task file missing": ["--task-file", "NOPE.md"],
}


@pytest.mark.parametrize("name", list(BAD_START))
def test_start_force_checks_every_option_before_it_archives_anything(ws: Workspace, cli, name: str) -> None:
    assert cli("start", "the first loop", "--no-github", "--no-tasks").code == 0
    before = ws.state.read_bytes()
    ran = cli("start", "a second loop", "--force", "--no-github", "--no-tasks", *BAD_START[name])
    assert ran.code != 0, ran.out
    assert "Traceback" not in ran.err
    assert ws.state.read_bytes() == before  # the active loop is untouched
    assert not ws.archive_dir.exists() or not list(ws.archive_dir.iterdir())


def test_a_one_line_promise_is_still_taken(ws: Workspace, cli) -> None:
    assert cli("start", "x", "--completion-promise", "SHIPPED IT", "--no-github").code == 0
    st = StateStore(ws).read()
    assert st is not None and st.promise == "SHIPPED IT"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--iteration-timeout", "-1"], "--iteration-timeout"),
        (["--iteration-timeout", "0"], "--iteration-timeout"),
        (["--iteration-timeout", "nan"], "--iteration-timeout"),
        (["--retries", "-3"], "--retries"),
        (["--max-iterations", "-2"], "--max-iterations"),
        (["--completion-promise", "a\nb"], "--completion-promise"),
    ],
)
def test_run_refuses_bad_numbers_before_it_starts(ws: Workspace, cli, args: list[str], said: str) -> None:
    ran = cli("run", "x", "--agent", "true", "--no-github", "--no-tasks", "--headless", *args)
    assert ran.code == 1 and said in ran.err, ran.err
    assert not ws.state.exists()


def test_run_refuses_a_bad_value_recorded_in_the_state_naming_the_file(ws: Workspace, cli) -> None:
    from loop import trust
    from loop.core.model import LoopState

    state = LoopState.new("x", check_tasks=False, check_github=False)
    state.extra["runner"] = {"agent": "true", "retries": -3, "iteration_timeout": 60}
    StateStore(ws).write(state)
    trust.record(ws, state, "test")
    ran = cli("run", "--headless")
    assert ran.code == 1 and "retries" in ran.err and str(ws.state) in ran.err, ran.err


def test_workspace_option_before_or_after_the_verb(ws: Workspace, tmp_path) -> None:
    assert run_loopdeck("-C", str(ws.root), "start", "x", "--no-github", "--no-tasks").returncode == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    after = run_loopdeck("status", "-C", str(ws.root), cwd=elsewhere)
    assert after.returncode == 0 and "running" in after.stdout, after.stderr
    both = run_loopdeck("-C", str(elsewhere), "status", "--workspace", str(ws.root), cwd=elsewhere)
    assert both.returncode == 0 and "running" in both.stdout  # the one after the verb wins
    before = run_loopdeck("-C", str(ws.root), "status", cwd=elsewhere)
    assert before.returncode == 0 and "running" in before.stdout


@pytest.mark.parametrize("verb", [["status"], ["status", "--json"], ["log"], ["pause"], ["install"]])
def test_a_workspace_that_does_not_exist_is_an_error(tmp_path, verb: list[str]) -> None:
    missing = tmp_path / "nonexistent"
    for args in (["-C", str(missing), *verb], [*verb, "-C", str(missing)]):
        ran = run_loopdeck(*args, cwd=tmp_path)
        assert ran.returncode == 1, (args, ran.stdout)
        assert ran.stderr.strip() == f"loopdeck: error: -C {missing}: the folder does not exist"
        assert not missing.exists()


def test_a_workspace_that_is_a_file_is_an_error(tmp_path) -> None:
    afile = tmp_path / "notes.txt"
    afile.write_text("x")
    ran = run_loopdeck("status", "-C", str(afile), cwd=tmp_path)
    assert ran.returncode == 1 and "is a file, expected a folder" in ran.stderr


def test_answer_without_a_question_says_it_resumes_nothing(ws: Workspace, cli) -> None:
    assert cli("start", "x", "--no-github", "--no-tasks").code == 0
    assert cli("pause").code == 0
    ran = cli("answer", "use SQLite")
    assert ran.code == 0 and "no question is pending" in ran.err
