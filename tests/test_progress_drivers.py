"""Progress judged on the tests, through a real runner: a pytest project of failing tests and a
scripted agent that fixes one a turn. The journal's `progress` events and `status --json` show
the tests getting better turn by turn; the same real failure escalates as `same error`, and a
turn that changes files without a test getting better counts towards `stuck`."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from loop.store.journal import Journal
from loop.store.paths import Workspace

N = 10
"""Failing tests at the start."""
TESTS = "\n".join(f"def test_{i}():\n    assert FIXED > {i}\n" for i in range(N))
PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider"


def agent(tmp_path: Path, step: str) -> Path:
    """A scripted agent: reads its prompt, does `step` (shell) in the workspace, says so."""
    path = tmp_path / "agent.sh"
    path.write_text(f"#!/bin/sh\ncat > /dev/null\n{step}\necho did my turn\n")
    path.chmod(0o755)
    return path


FIX_ONE = 'n=$(cat count); n=$((n+1)); echo "$n" > count; printf "FIXED = %s\\n" "$n" > calc.py'
"""Fixes one more test a turn."""
TOUCH = 'echo "# $(date +%s%N)" >> notes.txt'
"""Changes a file, fixes nothing."""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    """A git repository of `N` failing pytest tests (nothing fixed yet), committed."""
    for name in ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"):
        monkeypatch.setenv(name, "t")
    for name in ("GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"):
        monkeypatch.setenv(name, "t@example.invalid")
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    root = tmp_path / "proj"
    (root / "tests").mkdir(parents=True)
    (root / "calc.py").write_text("FIXED = 0\n")
    (root / "count").write_text("0\n")
    (root / "tests" / "test_calc.py").write_text(
        f"import sys\nsys.path.insert(0, '.')\nfrom calc import FIXED\n\n{TESTS}"
    )
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run(["git", "commit", "-qm", "start"], cwd=root, check=True)
    return Workspace(root)


def run(ws: Workspace, script: Path, *extra: str) -> int:
    from loop.cli import main

    argv = [
        "-C",
        str(ws.root),
        "run",
        "make the tests pass",
        "--agent",
        str(script),
        "--agent-format",
        "text",
    ]
    argv += ["--no-github", "--no-tasks", "--headless", "--sandbox", "off"]
    argv += ["--verify", PYTEST, "--verify-allow", PYTEST]
    return main([*argv, *extra])


def progress(ws: Workspace) -> list[tuple[int | None, dict[str, Any]]]:
    return [
        (e.iteration, dict(e.data)) for e in Journal(ws.journal).tail(100_000).events if e.kind == "progress"
    ]


def test_failing_tests_fixed_one_a_turn_show_in_the_journal_turn_by_turn(
    project: Workspace, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(project, agent(tmp_path, FIX_ONE)) == 0, capsys.readouterr()
    out = capsys.readouterr().out
    seen = progress(project)
    assert [n for n, _ in seen] == list(range(N + 5))  # the starting point, each turn, 4 reviews
    assert all(d["moved"] == [] and d["tests"]["passed"] == N for _, d in seen[N + 1 :])
    seen = seen[: N + 1]
    assert [d["tests"]["failed"] for _, d in seen] == list(range(N, -1, -1))
    assert [d["tests"]["passed"] for _, d in seen] == list(range(N + 1))
    assert seen[0][1]["moved"] == []
    assert all(d["moved"] == ["fewer-failing", "more-passing"] for _, d in seen[1:])
    assert seen[1][1]["files"]["modified"] == 2 and seen[1][1]["files"]["added"] == 2
    assert seen[-1][1]["tests_pass"] is True
    kinds = [e.kind for e in Journal(project.journal).tail(100_000).events]
    assert "escalation" not in kinds and "completed" in kinds
    assert "Final validation:" in out and f"Tests:     {N} passed" in out
    assert "Files:       0 created, 2 modified, 0 deleted (+2 -2 lines)" in out  # nothing committed
    capsys.readouterr()

    # The same curve, per iteration, in the report and in the monitor's Progress view.
    from loop.cli import main

    assert main(["-C", str(project.root), "report", "--markdown", "--out", "-"]) == 0
    text = capsys.readouterr().out
    assert "still fail" not in text  # every test passes at the end
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    curve = {
        int(cells[1]): (int(cells[2]), int(cells[3])) for cells in map(_cells, rows) if cells[1].isdigit()
    }
    assert [curve[n] for n in range(N + 1)] == [(N - n, n) for n in range(N + 1)]
    assert main(["-C", str(project.root), "report"]) == 0
    page = Path(capsys.readouterr().out.strip().splitlines()[-1].split()[-1])
    assert page.suffix == ".html" and "<svg" in page.read_text()
    asyncio.run(_progress_view_shows(project))


def _cells(row: str) -> list[str]:
    """A markdown table row's cells (its first, empty, kept so cells[1] is the first column)."""
    return [cell.strip() for cell in row.split("|")]


async def _progress_view_shows(ws: Workspace) -> None:
    from textual.widgets import Static

    from tui.app import LoopdeckApp
    from tui.screens.progress import ProgressScreen

    monitor = LoopdeckApp(ws, watch=False)
    async with monitor.run_test(size=(120, 40)) as pilot:
        for _ in range(500):  # the first snapshot, then the keypress (bounded, awaited)
            await pilot.pause(0.02)
            if monitor.progress is not None and monitor.progress.points:
                break
        await pilot.press("g")
        for _ in range(500):
            await pilot.pause(0.02)
            if isinstance(monitor.screen, ProgressScreen):
                break
        points = monitor.progress.points[: N + 1]
        assert [(p.tests_failed, p.tests_passed) for p in points] == [(N - n, n) for n in range(N + 1)]
        headline = str(monitor.screen.query_one("#progress-headline", Static).render())
        assert f"failing {N} → 0" in headline and f"passing 0 → {N}" in headline


def test_the_status_shows_the_last_validation(project: Workspace, tmp_path: Path) -> None:
    assert run(project, agent(tmp_path, FIX_ONE), "--max-iterations", "3") != 0
    status = subprocess.run(
        [sys.executable, "-m", "loop.cli", "-C", str(project.root), "status", "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    loop = json.loads(status.stdout)["loop"]
    validation = loop["last_validation"]
    assert validation["tests_pass"] is False and validation["git_clean"] is False
    assert (validation["tests"]["passed"], validation["tests"]["failed"]) == (3, N - 3)
    text = subprocess.run(
        [sys.executable, "-m", "loop.cli", "-C", str(project.root), "status"], capture_output=True, text=True
    ).stdout
    assert f"tests        3 passed, {N - 3} failed (tests/test_calc.py::test_3, " in text


def test_the_same_real_failure_escalates_and_a_busy_agent_that_fixes_nothing_is_stuck(
    project: Workspace, tmp_path: Path
) -> None:
    assert run(project, agent(tmp_path, TOUCH), "--same-error-after", "3", "--stuck-after", "9") != 0
    escalations = [e.data for e in Journal(project.journal).tail(100_000).events if e.kind == "escalation"]
    assert len(escalations) == 1 and escalations[0]["kind"] == "stuck"
    assert escalations[0]["reason"].startswith("the same error 3 times in a row")
    assert len(progress(project)) == 4  # the starting point and three turns

    (project.journal).unlink()
    project.state.unlink()
    assert run(project, agent(tmp_path, TOUCH), "--same-error-after", "9", "--stuck-after", "2") != 0
    escalations = [e.data for e in Journal(project.journal).tail(100_000).events if e.kind == "escalation"]
    assert len(escalations) == 1 and escalations[0]["kind"] == "stuck"
    assert "no test got better" in escalations[0]["reason"]


FLIP = (
    "if grep -q BROKEN tests/test_calc.py; then sed -i '/BROKEN/d' tests/test_calc.py; "
    'else echo "BROKEN = (" >> tests/test_calc.py; fi'
)
"""Breaks the test file (a collection error) one turn, mends it the next."""
PAD = 'printf "\\ndef test_pad_$(date +%s%N)():\\n    assert True\\n" >> tests/test_calc.py'
"""Adds a passing test a turn; the same tests fail with the same error."""


def test_a_test_file_broken_and_mended_turn_after_turn_is_stuck(project: Workspace, tmp_path: Path) -> None:
    """A collection error is not fewer failing, and the suite back is not new tests."""
    limits = ["--same-error-after", "9", "--stuck-after", "3", "--max-iterations", "8"]
    assert run(project, agent(tmp_path, FLIP), *limits) != 0
    escalations = [e.data for e in Journal(project.journal).tail(100_000).events if e.kind == "escalation"]
    assert len(escalations) == 1 and escalations[0]["kind"] == "stuck", escalations
    assert "no test got better" in escalations[0]["reason"]
    seen = progress(project)
    assert len(seen) == 4 and all(d["moved"] == [] for _, d in seen)
    assert [d["tests"].get("errors", 0) for _, d in seen] == [0, 1, 0, 1]


def test_passing_tests_added_beside_the_same_failures_escalate_the_same_error(
    project: Workspace, tmp_path: Path
) -> None:
    limits = ["--same-error-after", "3", "--stuck-after", "9", "--max-iterations", "8"]
    assert run(project, agent(tmp_path, PAD), *limits) != 0
    escalations = [e.data for e in Journal(project.journal).tail(100_000).events if e.kind == "escalation"]
    assert len(escalations) == 1 and escalations[0]["reason"].startswith("the same error 3 times in a row")
    assert [d["moved"] for _, d in progress(project)][1:] == [["more-passing", "new-tests"]] * 3


def test_passing_checks_on_uncommitted_work_ask_for_a_commit_without_holding_up_completion(
    project: Workspace, tmp_path: Path
) -> None:
    """The runner without `--commit` leaves the tree dirty: each review turn's prompt says to
    commit; with `--commit` it commits itself and never asks. Neither blocks completion."""
    step = 'n=$(ls prompt-*.txt 2>/dev/null | wc -l); cat > "prompt-$n.txt"; echo "FIXED = 10" > calc.py'
    script = tmp_path / "agent.sh"
    script.write_text(f"#!/bin/sh\n{step}\necho did my turn\n")
    script.chmod(0o755)
    assert run(project, script) == 0
    prompts = sorted(project.root.glob("prompt-*.txt"), key=lambda p: int(p.stem.split("-")[1]))
    assert len(prompts) == 5  # the first turn, then four reviews
    assert "Commit your changes" not in prompts[0].read_text()
    assert all("Commit your changes" in p.read_text() for p in prompts[1:])

    for p in prompts:
        p.unlink()
    project.journal.unlink()
    (project.root / "calc.py").write_text("FIXED = 0\n")
    assert run(project, script, "--commit") == 0
    assert not any("Commit your changes" in p.read_text() for p in project.root.glob("prompt-*.txt"))


def test_what_a_turn_changed_is_counted_from_its_starting_commit_uncommitted_work_included(
    project: Workspace,
) -> None:
    from loop.repo import gitstate

    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=project.root, capture_output=True, text=True
    ).stdout
    (project.root / "calc.py").write_text("FIXED = 3\nMORE = 1\n")
    (project.root / "count").unlink()
    (project.root / "new.py").write_text("a\nb\nc")
    (project.root / ".claude").mkdir()
    (project.root / ".claude" / "orchestrator-loop.local.md").write_text("ours\n")
    files = gitstate.changes(project.root, head.strip())
    assert files == {
        "created": 1,
        "modified": 1,
        "deleted": 1,
        "added": 2 + 3,
        "removed": 1 + 1,
        "paths": ["calc.py", "count", "new.py"],
    }
    assert gitstate.clean(project.root) is False
    assert gitstate.changes(project.root.parent, "") is None  # outside git
