"""More of what a person meets in the first hour, through the real `loopdeck` CLI and real git:
a state corrupted mid-run is restored and told, each progress line says what is next, `git
status` never lists loopdeck's own files, a demo tidies the one before it, and the demo says
that `q` ends it."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from loop.demo import workspace
from loop.store import gitexclude
from loop.store.journal import Journal
from loop.store.paths import Workspace
from tests.conftest import run_loopdeck
from tests.test_runner import agent, kinds, run_args, start_runner, wait_for

CORRUPT = b"---\niteration: [this is not\n---\n"


def project(root: Path, tasks: int = 3) -> Workspace:
    """A person's git project: a checklist, committed, and no `.gitignore` at all."""
    root.mkdir(parents=True)
    (root / "TODO.md").write_text("# Plan\n\n" + "".join(f"- [ ] Task {i}\n" for i in range(1, tasks + 1)))
    for argv in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "start"]):
        subprocess.run(["git", *argv], cwd=root, check=True)
    return Workspace(root)


def porcelain(root: Path) -> list[str]:
    """`git status --porcelain`, every untracked file listed."""
    out = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"], cwd=root, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def loopdeck_lines(root: Path) -> list[str]:
    """What `git status` lists of loopdeck's own files (a local install's slash commands too)."""
    return [line for line in porcelain(root) if ".claude" in line or ".loopdeck" in line]


def told_target(tmp_path: Path) -> tuple[str, Path]:
    """A `cmd:` notification target that writes each message it is given into a file."""
    told = tmp_path / "told.txt"
    script = f"import sys; open({str(told)!r}, 'a').write(sys.argv[1] + '\\n')"
    return "cmd:" + shlex.join([sys.executable, "-I", "-c", script]), told


# --- 4: a state corrupted mid-run -----------------------------------------------------------------


def _corrupt_in_iteration(ws: Workspace, n: int, backup: bool) -> None:
    """While the agent works on iteration `n` (the runner writes nothing meanwhile), the state
    file is corrupted (and its backup removed, unless `backup`)."""
    wait_for(
        lambda: any(
            e.kind == "iteration-started" and e.iteration == n for e in Journal(ws.journal).tail(50).events
        )
    )
    if not backup:
        ws.backup.unlink()
    ws.state.write_bytes(CORRUPT)


def test_a_state_corrupted_mid_run_is_restored_from_its_backup_journaled_and_told(tmp_path: Path) -> None:
    ws = project(tmp_path / "repo")
    target, told = told_target(tmp_path)
    runner = start_runner(ws, *run_args("--notify", target, agent_cmd=agent("--sleep", "0.6", "0.6")))
    _corrupt_in_iteration(ws, 2, backup=True)
    out, err = runner.communicate(timeout=90)
    assert runner.returncode == 0, out + err
    assert "Ended:       completed" in out
    (kept,) = ws.claude_dir.glob("orchestrator-loop.local.md.corrupt-*")
    assert kept.read_bytes() == CORRUPT
    line = next(line for line in out.splitlines() if "the state file was corrupt" in line)
    assert re.search(
        rf"WARNING: the state file was corrupt \({re.escape(str(ws.state))}:3: .+\); it is kept as "
        rf"{re.escape(str(kept))}; the backup of this loop is restored \(iteration \d+\) and the loop goes on$",
        line,
    ), line
    assert "restored" in kinds(ws)
    wait_for(lambda: told.exists() and "the state file was corrupt" in told.read_text(), timeout=15)
    assert told.read_text().startswith("loopdeck needs you: the state file was corrupt")


def test_a_state_corrupted_mid_run_without_a_backup_escalates_and_keeps_the_file(tmp_path: Path) -> None:
    ws = project(tmp_path / "repo")
    target, told = told_target(tmp_path)
    runner = start_runner(ws, *run_args("--notify", target, agent_cmd=agent("--sleep", "0.6", "0.6")))
    _corrupt_in_iteration(ws, 1, backup=False)
    out, err = runner.communicate(timeout=60)
    assert runner.returncode == 1, out + err
    assert ws.state.read_bytes() == CORRUPT  # nothing overwritten: `resume` offers to rebuild it
    assert "ESCALATION: the state file is corrupt" in out
    assert (
        "there is no backup of this loop to restore: it is left as it is; `loopdeck resume` rebuilds" in out
    )
    assert "Ended:       escalated (the state file is corrupt" in out
    assert "Traceback" not in out + err
    (event,) = [e for e in Journal(ws.journal).tail(100).events if e.kind == "escalation"]
    assert event.data["kind"] == "corrupt-state"
    wait_for(lambda: told.exists() and "the state file is corrupt" in told.read_text(), timeout=15)


# --- 5: what each progress line says --------------------------------------------------------------


def test_each_progress_line_names_the_next_task_the_stage_and_the_time(tmp_path: Path) -> None:
    ws = project(tmp_path / "repo")
    done = run_loopdeck("-C", str(ws.root), *run_args(), cwd=ws.root)
    assert done.returncode == 0, done.stderr + done.stdout
    lines = [line for line in done.stdout.splitlines() if line.startswith("Progress:")]
    elapsed = r" · \d+s elapsed$"
    assert re.match(
        r'Progress: \[1 of 3\] ▰▰▰▱▱▱▱▱▱▱ 33% · next: "Task 2" · stage: working' + elapsed, lines[0]
    )
    assert re.match(
        r'Progress: \[2 of 3\] ▰▰▰▰▰▰▱▱▱▱ 66% · next: "Task 3" · stage: working' + elapsed, lines[1]
    )
    assert re.match(
        r"Progress: \[3 of 3\] ▰▰▰▰▰▰▰▰▰▰ 100% · stage: verification loop 1 of 4" + elapsed, lines[2]
    )
    assert re.match(
        r"Progress: \[3 of 3\] ▰▰▰▰▰▰▰▰▰▰ 100% · stage: verification loop 2 of 4" + elapsed, lines[3]
    )
    assert re.match(r"Progress: \[3 of 3\] ▰▰▰▰▰▰▰▰▰▰ 100%" + elapsed, lines[-1])  # no next turn


# --- 6: git status stays clean of loopdeck's files ------------------------------------------------


def test_git_status_stays_clean_after_install_and_run(tmp_path: Path) -> None:
    ws = project(tmp_path / "repo")
    installed = run_loopdeck("-C", str(ws.root), "install", cwd=ws.root)
    assert installed.returncode == 0, installed.stderr
    assert (ws.claude_dir / "settings.local.json").exists()
    assert loopdeck_lines(ws.root) == []
    ran = run_loopdeck("-C", str(ws.root), *run_args("--commit"), cwd=ws.root)
    assert ran.returncode == 0, ran.stderr + ran.stdout
    assert list(ws.archive_dir.iterdir()) and ws.journal.exists() and ws.lock.exists()
    assert loopdeck_lines(ws.root) == []
    exclude = (ws.root / ".git" / "info" / "exclude").read_text()
    assert exclude.count("# loopdeck\n") == 1  # install wrote every line, the run none again
    for line in (*gitexclude.LOOP_LINES, ".claude/settings.local.json"):
        assert exclude.splitlines().count(line) == 1
    assert not (ws.root / ".gitignore").exists()  # the person's own file is never written


def test_git_status_stays_clean_after_a_crash_and_resume(tmp_path: Path) -> None:
    ws = project(tmp_path / "repo", tasks=4)
    first = start_runner(ws, *run_args("--commit", agent_cmd=agent("--sleep", "0.5", "0.5")))
    wait_for(
        lambda: (
            ws.journal.exists() and kinds(ws).count("commit") >= 1 and kinds(ws)[-1] == "iteration-started"
        )
    )
    first.kill()
    first.communicate(timeout=30)
    assert loopdeck_lines(ws.root) == []
    resumed = run_loopdeck("-C", str(ws.root), "resume", "--yes", cwd=ws.root)
    assert resumed.returncode == 0, resumed.stderr
    pid = int(re.findall(r"runner restarted in the background \(pid (\d+)\)", resumed.stdout)[0])
    try:
        wait_for(lambda: not ws.state.exists() and ws.archive_dir.exists(), timeout=60)
    finally:
        with __import__("contextlib").suppress(ProcessLookupError):
            os.kill(pid, 15)
    assert (ws.private_dir / "runner.log").exists()
    assert loopdeck_lines(ws.root) == []


def test_git_status_stays_clean_after_demo_workers(tmp_path: Path) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {"TMPDIR": str(temp), "LOOPDECK_DEMO_PACE": "0 0"}
    ran = run_loopdeck("demo", "--workers", "2", "--headless", env=env, timeout=180)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    (root,) = temp.glob("loopdeck-demo-*/project")
    assert list((root / ".loopdeck" / "worktrees").iterdir())  # the workers' worktrees are there
    assert loopdeck_lines(root) == []


def test_the_exclude_goes_to_the_common_git_folder_once_and_never_through_a_symlink(tmp_path: Path) -> None:
    main = project(tmp_path / "main").root
    linked = tmp_path / "linked"
    subprocess.run(["git", "worktree", "add", "-q", str(linked)], cwd=main, check=True)
    (linked / "sub" / ".claude").mkdir(parents=True)
    (linked / "sub" / ".claude" / "orchestrator-loop.lock").write_text("1\n")
    gitexclude._done.clear()
    written = gitexclude.ensure(linked / "sub")
    assert written == main / ".git" / "info" / "exclude"
    gitexclude._done.clear()
    assert gitexclude.ensure(linked / "sub") is None  # nothing missing: nothing added
    text = written.read_text()
    assert text.count("# loopdeck") == 1 and text.count("sub/.claude/orchestrator-loop.*\n") == 1
    assert porcelain(linked) == []
    # a symlink in place of the file: never written through
    other = project(tmp_path / "other").root
    outside = tmp_path / "outside.txt"
    outside.write_text("mine\n")
    exclude = other / ".git" / "info" / "exclude"
    exclude.unlink()
    exclude.symlink_to(outside)
    gitexclude._done.clear()
    assert gitexclude.ensure(other) is None
    assert outside.read_text() == "mine\n"
    # no repository: nothing at all
    plain = tmp_path / "plain"
    plain.mkdir()
    assert gitexclude.ensure(plain) is None


# --- 9: a demo removes the previous demo's folder, and only that ---------------------------------


def test_a_demo_says_where_it_is_and_removes_only_the_previous_demos_folder(tmp_path: Path) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {"TMPDIR": str(temp), "LOOPDECK_DEMO_PACE": "0 0"}
    first = run_loopdeck("demo", "--headless", env=env, timeout=120)
    assert first.returncode == 0, first.stdout + first.stderr
    (old,) = temp.glob("loopdeck-demo-*")
    assert (
        f"loopdeck demo: a throwaway git workspace in {old / 'project'}; the next demo removes it"
        in first.stdout
    )
    unmarked = temp / "loopdeck-demo-mine"  # named like one, but no demo made it
    unmarked.mkdir()
    (unmarked / "notes.txt").write_text("keep me\n")
    second = run_loopdeck("demo", "--headless", env=env, timeout=120)
    assert second.returncode == 0, second.stdout + second.stderr
    assert second.stdout.startswith(f"loopdeck demo: removed the previous demo's workspace {old}\n")
    assert not old.exists()
    assert (unmarked / "notes.txt").read_text() == "keep me\n"
    (new,) = [p for p in temp.glob("loopdeck-demo-*") if p != unmarked]
    assert (new / workspace.MARKER).exists()


def test_a_demo_leaves_a_demo_that_still_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    running = workspace.make_folder()  # this process's: it still runs
    ended = workspace.make_folder()
    (ended / workspace.MARKER).write_text(workspace.MARKER_TEXT + "pid 999999999\n")
    assert workspace.previous_folders() == [ended]
    assert workspace.remove_previous() == [ended] and running.exists() and not ended.exists()


# --- 20: the demo says that q ends it -------------------------------------------------------------


async def test_the_demo_says_in_the_monitor_that_q_ends_it_and_q_ends_its_loop(tmp_path: Path) -> None:
    from tui.cli import DEMO_QUIT, demo_app

    root = workspace.create(tmp_path / "project", tasks=2)
    ended: list[bool] = []
    app = demo_app(Workspace(root), lambda: ended.append(True))
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await pilot.pause()
        assert any(str(n.message) == DEMO_QUIT for n in app._notifications)
        await pilot.press("q")
        await pilot.pause()
    assert ended == [True]
    assert DEMO_QUIT.startswith("q ends the demo and stops its loop")
