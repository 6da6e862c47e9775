""" "The same error N times" on real test output: what changes between two runs of one failure
(durations, addresses, temporary folders, timestamps, process ids) is not the error, and the
failing tests' names are, where the output names them. Proved with the real pytest, alone and
under a runner loop."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from loop.agents.turn import error_signature
from tests.conftest import run_loopdeck

PY = sys.executable

# A test that fails the same way on every run, yet prints what changes from run to run: its
# temporary folder, an object's address, a process id, the time; pytest adds its run time.
SAME = """
import datetime, os

def test_total(tmp_path):
    thing = object()
    assert str(tmp_path) == repr(thing), f"pid {os.getpid()} at {datetime.datetime.now().isoformat()}"
"""


def failing(name: str) -> str:
    """A test file whose one test, `name`, fails."""
    return f"import os\n\ndef {name}():\n    assert os.getpid() == 0\n"


def pytest_output(folder: Path, source: str) -> str:
    """The real pytest's output for `source`, as a verification failure reaches the engine."""
    folder.mkdir(exist_ok=True)
    (folder / "test_app.py").write_text(source)
    done = subprocess.run(
        [PY, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_app.py"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    return f"$ pytest -q\n(exit 1)\n{done.stdout}"


def test_one_real_pytest_failure_run_twice_is_the_same_error(tmp_path: Path) -> None:
    first = pytest_output(tmp_path / "p", SAME)
    second = pytest_output(tmp_path / "p", SAME)
    assert first[-400:] != second[-400:]  # the raw ends differ: pid, time, address, folder
    assert error_signature(first) == error_signature(second)
    assert "test_app.py::test_total" in error_signature(first)


def test_two_different_real_pytest_failures_are_not(tmp_path: Path) -> None:
    one = pytest_output(tmp_path / "p", failing("test_one"))
    two = pytest_output(tmp_path / "p", failing("test_two"))
    assert error_signature(one) != error_signature(two)


@pytest.mark.parametrize(
    ("first", "second", "names"),
    [
        (  # unittest
            "FAIL: test_y (app.tests.Total.test_y)\n----\nRan 3 tests in 0.004s\n\nFAILED (failures=1)",
            "FAIL: test_y (app.tests.Total.test_y)\n----\nRan 3 tests in 0.107s\n\nFAILED (failures=1)",
            ["test_y (app.tests.Total.test_y)"],
        ),
        (  # node's test runner, TAP
            "not ok 2 - adds up\n  ---\n  duration_ms: 0.512\n  ...\n# duration_ms 41.7",
            "not ok 2 - adds up\n  ---\n  duration_ms: 1.93\n  ...\n# duration_ms 38.02",
            ["adds up"],
        ),
        (  # node's test runner, spec
            "\x1b[31m✖ adds up (0.9ms)\x1b[39m\n✖ failing tests:\n",
            "\x1b[31m✖ adds up (1.4ms)\x1b[39m\n✖ failing tests:\n",
            ["adds up", "failing tests:"],
        ),
        (  # go test
            "--- FAIL: TestTotal (0.00s)\n    total_test.go:9: got 3\nFAIL\nFAIL\texample/app\t0.004s",
            "--- FAIL: TestTotal (0.01s)\n    total_test.go:9: got 3\nFAIL\nFAIL\texample/app\t0.131s",
            ["TestTotal"],
        ),
        (  # cargo test
            "test tests::total ... FAILED\n\ntest result: FAILED. 1 passed; 1 failed; finished in 0.00s",
            "test tests::total ... FAILED\n\ntest result: FAILED. 1 passed; 1 failed; finished in 0.02s",
            ["tests::total"],
        ),
    ],
)
def test_the_runners_failing_tests_are_named(first: str, second: str, names: list[str]) -> None:
    assert error_signature(first) == error_signature(second)
    assert error_signature(first).endswith("failing: " + ", ".join(names))


def test_other_tests_failing_are_another_error() -> None:
    assert error_signature("--- FAIL: TestA (0.00s)\nFAIL") != error_signature(
        "--- FAIL: TestB (0.00s)\nFAIL"
    )
    assert error_signature("test a ... FAILED") != error_signature("test a ... FAILED\ntest b ... FAILED")


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("exit 1: db locked at 0x7f3a2c1e9d90", "exit 1: db locked at 0x7f11aa0b2e50"),
        ("crashed (pid 4242) at 2026-01-09T10:30:00.123+00:00", "crashed (pid 977) at 2026-01-10T08:01:59Z"),
        (
            "cannot write /tmp/pytest-of-ann/pytest-7/x0/out",
            "cannot write /tmp/pytest-of-ann/pytest-12/x0/out",
        ),
        ("cannot write /tmp/tmpa1b2c3d4/out", "cannot write /tmp/tmpzz9y8x7w/out"),
        ("build failed after 1m2.5s (12:01:02)", "build failed after 0m59.1s (12:03:44)"),
        ("\x1b[31merror\x1b[0m: 3 errors in 2.5 seconds", "error: 3 errors in 3.1 seconds"),
    ],
)
def test_what_changes_between_runs_is_not_the_error(first: str, second: str) -> None:
    assert error_signature(first) == error_signature(second)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("exit 1: assert 1 == 2", "exit 1: assert 1 == 3"),
        ("exit 2: no such file: a.txt", "exit 2: no such file: b.txt"),
        ("error at line 12", "error at line 13"),
    ],
)
def test_what_differs_in_the_error_still_counts(first: str, second: str) -> None:
    assert error_signature(first) != error_signature(second)


def test_a_signature_is_short_and_a_huge_output_is_read_quickly() -> None:
    assert len(error_signature("x" * 100_000 + "\nFAILED t.py::test_a")) <= 400
    assert len(error_signature("a_" * 2_000_000)) <= 400


# --- a runner loop whose verification is the real pytest ------------------------------------------

AGENT = """
import pathlib, sys
sys.stdin.read()
turn = pathlib.Path("turns.txt")
n = len(turn.read_text().splitlines()) + 1 if turn.exists() else 1
turn.write_text(turn.read_text() + f"{n}\\n" if turn.exists() else "1\\n")
if sys.argv[1:] == ["--change"]:  # a new failure every turn: another test fails
    pathlib.Path("test_app.py").write_text(
        f"import os\\n\\ndef test_step_{n}():\\n    assert os.getpid() == 0\\n"
    )
print(f"Worked on turn {n}.")
"""

FAILS_ALIKE = """
import datetime, os

def test_total(tmp_path):
    assert str(tmp_path) == repr(object()), f"pid {os.getpid()} at {datetime.datetime.now().isoformat()}"
"""


def project(root: Path) -> Path:
    root.mkdir()
    (root / ".claude").mkdir()
    (root / "agent.py").write_text(AGENT)
    (root / "test_app.py").write_text(textwrap.dedent(FAILS_ALIKE))
    (root / "TODO.md").write_text("- [ ] make test_app.py pass\n")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    return root


def run_loop(root: Path, *agent_args: str, extra: tuple[str, ...] = ()) -> list[dict[str, object]]:
    """`loopdeck run` headless with the scripted agent and `pytest -q` as its check; the journal."""
    venv_bin = str(Path(PY).parent)
    done = run_loopdeck(
        "-C",
        str(root),
        "run",
        "Make the tests pass",
        "--agent",
        " ".join([PY, "agent.py", *agent_args]),
        "--agent-format",
        "text",
        "--task-file",
        "TODO.md",
        "--no-github",
        "--no-tasks",
        "--headless",
        "--sandbox",
        "off",
        "--verify",
        "pytest -q",
        *extra,
        cwd=root,
        env={"PATH": venv_bin + os.pathsep + os.environ.get("PATH", "")},
        timeout=240,
    )
    journal = root / ".claude" / "orchestrator-loop.events.jsonl"
    assert journal.exists(), done.stdout + done.stderr
    return [json.loads(line) for line in journal.read_text().splitlines() if line.strip()]


def escalations(events: list[dict[str, object]]) -> list[tuple[object, str]]:
    return [
        (e["iteration"], str(e["data"]["reason"]))  # type: ignore[index]
        for e in events
        if e["kind"] == "escalation"
    ]


# The same real pytest failure escalating as the same error under a runner is in
# tests/test_progress_drivers.py.


def test_a_loop_whose_failure_changes_every_turn_never_escalates_same_error(tmp_path: Path) -> None:
    events = run_loop(
        project(tmp_path / "repo"), "--change", extra=("--max-iterations", "3", "--stuck-after", "9")
    )
    failed = [e for e in events if e["kind"] == "verification-failed"]
    assert len(failed) >= 3, [e["kind"] for e in events]
    found = escalations(events)
    assert found and not any("same error" in reason for _n, reason in found), found


FAILING_AGENT = """
import sys
sys.stdin.read()
print(f"RuntimeError: the database at {hex(id(object()))} is locked")
sys.exit(1)
"""


def test_an_agent_failing_the_same_way_escalates_same_error_at_the_third_turn(tmp_path: Path) -> None:
    """Each turn's failure is told with its iteration ("iteration 2: exit 1: …"): the number is
    not part of the error."""
    root = project(tmp_path / "repo")
    (root / "agent.py").write_text(FAILING_AGENT)
    events = run_loop(root, extra=("--retries", "0"))
    assert [e["kind"] for e in events].count("agent-failed") == 3
    assert escalations(events) == [(3, "the same error 3 times in a row")]
