"""Each Stop is answered in its own process, through the launcher as `loopdeck install` writes
it, and whatever breaks inside it the process exits 0, prints one JSON object or nothing, and
says why (the journal, stderr): never a stop allowed with no word of it.

Each test runs its own copy of the `loop` package, broken on purpose where the test says.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from loop.drivers.hook import FAILED
from loop.store.paths import Workspace
from loop.store.state import StateStore
from tests.conftest import REPO, run_loopdeck, stop_payload


@pytest.fixture
def launcher(tmp_path: Path) -> Path:
    """A copy of the `loop` package (its bytecode too): its launcher, as `install` would name it."""
    copy = tmp_path / "install" / "loop"
    shutil.copytree(REPO / "loop", copy)
    return copy / "launcher.py"


@pytest.fixture
def project(ws: Workspace) -> Workspace:
    (ws.root / "TODO.md").write_text("- [ ] one task left\n")
    started = run_loopdeck("start", "x", "--task-file", "TODO.md", "--no-github", "--no-tasks", cwd=ws.root)
    assert started.returncode == 0, started.stderr
    return ws


def stop(launcher: Path, ws: Workspace, flags: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    """One Stop through the copy's launcher; exit 0 and at most one line on stdout, always."""
    done = subprocess.run(
        [sys.executable, *flags, "-I", str(launcher), "stop"],
        cwd=ws.root,
        input=json.dumps(stop_payload(ws)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) <= 1, done.stdout
    return done


def break_decision(launcher: Path, raises: str) -> None:
    """The copy's engine decides no Stop: `decide` raises `raises` (Python source)."""
    engine = launcher.parent / "core" / "engine.py"
    engine.write_text(engine.read_text() + f"\n\ndef decide(*args, **kwargs):\n    raise {raises}\n")


def journal_errors(ws: Workspace) -> list[dict[str, object]]:
    lines = [json.loads(line) for line in ws.journal.read_text().splitlines() if line.strip()]
    return [entry for entry in lines if entry.get("kind", entry.get("event")) == "error"]


def test_a_stop_is_answered_in_its_own_process_and_leaves_nothing_behind(
    launcher: Path, project: Workspace
) -> None:
    before = StateStore(project).read()
    assert before is not None
    done = stop(launcher, project, ("-X", "importtime"))
    answer = json.loads(done.stdout)
    assert answer["decision"] == "block" and "one task left" in answer["reason"]
    assert "| loop.drivers.hook\n" in done.stderr, "the hook ran in the Stop's own process"
    after = StateStore(project).read()
    assert after is not None and after.iteration == before.iteration + 1
    left = []
    for entry in os.listdir("/proc") if sys.platform == "linux" else ():
        if entry.isdigit():
            try:
                argv = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if str(launcher).encode() in argv:
                left.append(entry)
    assert left == [], "a process of the Stop outlived it"


def test_a_decision_that_raises_is_journaled_and_answered_with_the_fail_safe_line(
    launcher: Path, project: Workspace
) -> None:
    break_decision(launcher, "RuntimeError('the engine broke')")
    done = stop(launcher, project)
    answer = json.loads(done.stdout)
    assert "decision" not in answer, answer
    assert answer["systemMessage"].startswith(FAILED) and "the engine broke" in answer["systemMessage"]
    errors = journal_errors(project)
    assert len(errors) == 1 and "the engine broke" in json.dumps(errors[0]), errors
    assert "Traceback" in json.dumps(errors[0]), "a bug takes its traceback to the journal"


@pytest.mark.parametrize("raises", ["KeyboardInterrupt()", "SystemExit(3)"])
def test_an_interrupt_or_exit_inside_the_decision_is_said_and_the_stop_answered_once(
    launcher: Path, project: Workspace, raises: str
) -> None:
    """What `hook.main` passes on rather than fails safe on: the process still exits 0, says
    why on stderr and in the journal, and prints the one fail-safe answer."""
    break_decision(launcher, raises)
    done = stop(launcher, project)
    name = raises.partition("(")[0]
    answer = json.loads(done.stdout)
    assert "decision" not in answer and answer["systemMessage"].startswith(FAILED), answer
    assert done.stderr.startswith(FAILED) and name in done.stderr, done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
    errors = journal_errors(project)
    assert len(errors) == 1 and name in json.dumps(errors[0]), errors


def test_an_install_that_cannot_import_the_hook_says_why(launcher: Path, project: Workspace) -> None:
    """Nothing of the project can be journaled without the hook: stderr has the line, and the
    answer tells the person."""
    (launcher.parent / "core" / "engine.py").write_text("raise ImportError('a broken install')\n")
    done = stop(launcher, project)
    answer = json.loads(done.stdout)
    assert answer["systemMessage"].startswith(FAILED) and "a broken install" in answer["systemMessage"]
    assert "ImportError: a broken install" in done.stderr and len(done.stderr.splitlines()) == 1


def test_a_launcher_that_cannot_start_the_hook_is_one_line_and_exit_0(
    launcher: Path, project: Workspace
) -> None:
    (launcher.parent / "drivers" / "hook_entry.py").write_text("def (\n")
    done = stop(launcher, project)
    assert done.stdout == "" and done.stderr.startswith("loopdeck: the hook cannot start (SyntaxError")
    assert len(done.stderr.splitlines()) == 1, done.stderr


def test_an_older_install_without_the_site_start_up_still_finds_pyyaml(
    launcher: Path, project: Workspace
) -> None:
    """Installs made before `-I` alone wrote `-I -S`: the launcher runs the site start-up the
    interpreter skipped, so a hand-edited state (read by PyYAML, in the site folders) still
    blocks rather than failing safe."""
    text = project.state.read_text()
    project.state.write_text(text.replace("---\n", "---\n# edited by hand\n", 1))
    done = subprocess.run(
        [sys.executable, "-I", "-S", str(launcher), "stop"],
        cwd=project.root,
        input=json.dumps(stop_payload(project)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and json.loads(done.stdout).get("decision") == "block", done
