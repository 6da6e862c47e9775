"""Resumption: the classification, the engine's resume flow and rebuild (pure, fixed clock),
the summaries of every ending, and `loopdeck resume` on real workspaces."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from loop.core import engine
from loop.core.model import Aggregate, Command, JournalEvent, SourceReport, TaskItem
from loop.drivers import classify
from loop.store.archive import latest
from loop.store.journal import Journal
from loop.store.paths import Workspace
from loop.store.state import StateStore
from loop.views.summary import Tally, summary_lines
from tests.test_engine import NOW, cmd, sources, state, stop
from tests.test_runner import agent, demo, processes_in, run_args, start_runner, wait_for

__all__ = ["demo"]


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


# --- classify ----------------------------------------------------------------------------------


def test_every_kind_from_the_state() -> None:
    assert classify.classify(None, None).kind == "none"
    assert classify.classify(None, None, "line 3: bad").kind == "corrupt"
    assert classify.classify(state(status="running"), True).kind == "live"
    assert classify.classify(state(status="running"), None).kind == "live"
    gone_ = classify.classify(state(status="running", iteration=3, max_iterations=10), False)
    assert gone_.kind == "gone" and gone_.question == "Found in-progress loop (iteration 3/10). Resume? [Y/n]"
    paused = classify.classify(state(status="paused", iteration=4, max_iterations=0), False)
    assert paused.kind == "paused" and paused.question == "Found paused loop. Resume from iteration 4? [Y/n]"
    for kind in ("escalation", "question", "usage-limit"):
        waiting = {"kind": kind, "reason": "why not", "since": "t"}
        found = classify.classify(state(status="paused", waiting_for=waiting), False)
        assert found.kind == "waiting" and "why not" in (found.question or "")
    limited = {"kind": "usage-limit", "reason": "limit", "until": "2026-01-09T12:00:00+00:00"}
    assert classify.classify(state(status="running", waiting_for=limited), None).kind == "waiting"
    # A runner loop that names no runner (its runner killed before it took the loop) is gone;
    # a hook loop no session has stopped in yet is not.
    unnamed = classify.classify(state(status="running", driver="runner", pid=None), None)
    assert unnamed.kind == "gone" and unnamed.question is not None
    assert classify.classify(state(status="running", driver="hook", pid=None), None).kind == "live"
    assert classify.classify(state(status="initializing", driver=None, pid=None), None).kind == "live"
    stopping = classify.classify(state(status="stopping"), False)
    assert stopping.question == "Loop was stopping. Mark complete and show summary? [Y/n]"
    for status in ("completed", "stopped", "failed"):
        assert classify.classify(state(status=status), None).kind == "ended"


def test_a_driver_is_recognised_by_its_command_line() -> None:
    runner = ["/usr/bin/python3", "-m", "loop.cli", "-C", "/w", "run"]
    assert classify.looks_like_driver(runner, "python3", "runner")
    assert classify.looks_like_driver(["/home/u/.venv/bin/loopdeck", "run"], "loopdeck", "runner")
    assert not classify.looks_like_driver(["/usr/bin/vim", "run"], "vim", "runner")
    assert not classify.looks_like_driver(["/usr/bin/loopdeck", "status"], "loopdeck", "runner")
    assert classify.looks_like_driver(["claude", "--continue"], "claude", "hook")
    assert classify.looks_like_driver(["node", "/opt/claude-code/cli.js"], "node", "hook")
    assert not classify.looks_like_driver(["bash"], "bash", "hook")


def test_a_reused_pid_is_not_the_driver(tmp_path: Path) -> None:
    assert classify.is_driver(dead_pid(), "runner", time.time()) is False
    # This process started before the state was written: it may be the driver it names.
    assert classify.is_driver(os.getpid(), "runner", time.time())
    # A process started after the state's last write got the pid later: not the driver.
    late = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert classify.is_driver(late.pid, "runner", time.time() - 60) is False
    finally:
        late.kill()
        late.wait()


def test_the_hook_records_its_session_not_a_shell() -> None:
    code = "from loop.store.proc import session_pid; print(session_pid())"
    direct = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert int(direct.stdout) == os.getpid()
    via_sh = subprocess.run(
        ["/bin/sh", "-c", f'"{sys.executable}" -c "{code}"; true'], capture_output=True, text=True, check=True
    )
    assert int(via_sh.stdout) == os.getpid()


# --- the engine --------------------------------------------------------------------------------


def test_resume_flow_lifts_a_wait_and_keeps_the_iteration() -> None:
    waiting = {"kind": "escalation", "reason": "stuck", "since": "t", "escalation": "stuck"}
    before = state(status="paused", iteration=7, waiting_for=waiting, driver="runner", pid=123)
    result = engine.resume_flow(before, "waiting", NOW)
    assert result.state is not None and result.state.status == "running"
    assert result.state.iteration == 7 and result.state.waiting_for is None and result.state.pid is None
    assert result.events == [
        (
            "resumed",
            {"from": "waiting", "iteration": 7, "source": "resume", "was": "stuck", "previous_pid": 123},
        )
    ]
    assert before.status == "paused"  # pure: the caller's state is untouched


def test_resume_flow_frees_a_closed_sessions_loop_and_completes_a_stopping_one() -> None:
    gone_ = engine.resume_flow(state(status="running", driver="hook", pid=99, session_id="s1"), "gone", NOW)
    assert gone_.state is not None and gone_.state.session_id is None and gone_.state.status == "running"
    kept = engine.resume_flow(state(status="paused", driver="hook", pid=None, session_id="s9"), "paused", NOW)
    assert kept.state is not None and kept.state.session_id == "s9"
    done = engine.resume_flow(state(status="stopping", iteration=5), "stopping", NOW, sources(task_file=2))
    assert done.state is not None and done.state.status == "completed"
    assert done.effects.archive is not None and done.effects.archive["pending_at_end"] == 2
    assert done.effects.archive["tasks"]["remaining"] == ["task_file task 0", "task_file task 1"]
    assert engine.resume_flow(state(status="completed"), "gone", NOW).state is None
    assert engine.resume_flow(state(status="running"), "live", NOW).state is None


def test_fail_ends_the_loop_with_a_summary() -> None:
    result = engine.fail(
        state(status="running", iteration=3), "the agent cannot start", NOW, sources(task_file=1)
    )
    assert result.state is not None and result.state.status == "failed"
    assert result.effects.summary is not None and result.effects.summary["outcome"] == "failed"
    assert ("failed", {"reason": "the agent cannot start"}) in result.events


def test_rebuild_replays_the_journal_and_applies_no_command_twice() -> None:
    def ev(what: str, iteration: int | None, **data: object) -> JournalEvent:
        return JournalEvent("2026-01-09T10:00:00Z", what, iteration, data)

    events = [
        ev("loop-started", 0, max_iterations=20, prompt="Build it"),
        ev("blocked", 1),
        ev("blocked", 2),
        ev("paused", 2, reason="coffee"),
        ev("resumed", 2),
        ev("verification-mode", 3, loops=4),
        ev("verification-loop", 4, loop=1, of=4),
        ev("escalation", 5, kind="stuck", reason="no progress"),
        ev("paused", 5, reason="no progress", waiting_for="escalation"),
    ]
    queued = [
        Command("a", "t", "pause", "cli", end=40, person=True),
        Command("b", "t", "resume", "cli", end=80, person=True),
    ]
    result, report_ = engine.rebuild(None, events, queued, {"a", "b"})
    rebuilt = result.state
    assert rebuilt is not None
    assert (rebuilt.iteration, rebuilt.max_iterations, rebuilt.status) == (5, 20, "paused")
    assert rebuilt.waiting_for is not None and rebuilt.waiting_for["escalation"] == "stuck"
    assert rebuilt.verification_mode and rebuilt.verification_remaining == 3
    assert rebuilt.prompt == "Build it" and rebuilt.control_offset == 80 and result.offset == 80
    assert any("2 already applied" in line for line in report_)


def test_a_stop_command_leaves_a_summary_naming_the_tasks() -> None:
    srcs = sources(task_file=2)
    result = engine.decide(state(), stop(), [cmd("stop")], srcs, NOW)
    summary = result.effects.summary
    assert summary is not None and summary["outcome"] == "stopped"
    assert summary["tasks"]["remaining"] == ["task_file task 0", "task_file task 1"]


# --- the summary -------------------------------------------------------------------------------


def test_a_forced_completion_with_open_tasks_says_which() -> None:
    items = (
        TaskItem("a", "done"),
        TaskItem("b", "pending"),
        TaskItem("c", "pending"),
        TaskItem("d", "pending"),
    )
    counts = Aggregate((SourceReport("task_file", True, True, 3, 0, 1, items),), 3, False)
    lines = summary_lines("completed", "forced by user", Tally(), counts, None, state())
    assert "Remaining:   3 task(s): b, c, d" in lines
    assert "Done:        1 task(s): a" in lines
    unknown = summary_lines("stopped", "x", Tally(), None, None, state())
    assert "Tasks:       unknown (the task sources could not be read)" in unknown
    assert not any(line.startswith("Remaining:   0") for line in unknown)


def test_an_agent_that_reports_no_usage_gets_one_line_not_one_per_iteration() -> None:
    silent = Tally(turns=[{"iteration": n, "agent": "text", "tokens": {}} for n in range(1, 14)])
    lines = summary_lines("completed", "done", silent, None, None, state())
    assert "Usage:       not reported by the agent (text) in 13 turn(s)" in lines
    assert not any("tokens not reported" in line or line.startswith("Per iteration") for line in lines)
    spoke = Tally(turns=[{"iteration": 1, "agent": "codex", "tokens": {"input_tokens": 10}}])
    shown = summary_lines("completed", "done", spoke, None, None, state())
    assert "Per iteration:" in shown and "  #1 codex: 10 tokens, cost unknown" in shown


def test_every_next_step_names_a_verb_that_works() -> None:
    for how in ("escalated", "limit", "interrupted", "question"):
        lines = summary_lines(how, "r", Tally(), None, None, state())
        assert "`loopdeck resume`" in lines[-1], (how, lines[-1])
        assert "loopdeck run`" not in lines[-1]


# --- `loopdeck resume` on real workspaces ------------------------------------------------------


def test_resume_yes_restarts_a_dead_runner_and_the_loop_completes(demo: Workspace) -> None:
    from tests.conftest import run_loopdeck

    root = demo.root.resolve()
    first = start_runner(demo, *run_args(agent_cmd=agent("--hang")))
    wait_for((root / ".demo" / "hung-agent.pids").exists)
    first.kill()
    first.wait()
    wait_for(lambda: not processes_in(root), timeout=15)
    status = run_loopdeck("-C", str(root), "status")
    assert "not running; `loopdeck resume` restarts it" in status.stdout
    # the recorded agent hangs: resume with a working one, as a person would after fixing it
    st = StateStore(demo).read()
    assert st is not None
    st.extra["runner"] = {**st.extra["runner"], "agent": agent()}
    StateStore(demo).write(st)
    declined = run_loopdeck("-C", str(root), "resume", "--no")
    assert (
        declined.returncode == 0
        and "Found in-progress loop (iteration 1/100). Resume? [Y/n]" in declined.stdout
    )
    assert "left as it is" in declined.stdout
    ran = run_loopdeck("-C", str(root), "resume", "--yes")
    assert ran.returncode == 0, ran.stderr
    assert "runner restarted in the background" in ran.stdout and "runner.log" in ran.stdout
    folder_holder: list[Path] = []

    def finished() -> bool:
        folder = latest(demo)
        if folder is None or demo.state.exists():
            return False
        folder_holder.append(folder)
        return bool(json.loads((folder / "summary.json").read_text())["outcome"] == "completed")

    wait_for(finished, timeout=60)
    kinds = [e.kind for e in Journal(demo.journal).tail(1000).events]
    assert "resumed" in kinds
    wait_for(lambda: not processes_in(root), timeout=15)


def _runner_killed_before_it_took_the_loop(demo: Workspace, agent_cmd: str) -> Path:
    """A loop as `loopdeck resume` leaves it when the runner it started is killed before it
    takes the loop: running, driven by a runner, no pid."""
    from tests.conftest import run_loopdeck

    root = demo.root.resolve()
    first = start_runner(demo, *run_args(agent_cmd=agent("--hang")))
    wait_for((root / ".demo" / "hung-agent.pids").exists)
    first.kill()
    first.wait()
    wait_for(lambda: not processes_in(root), timeout=15)
    st = StateStore(demo).read()
    assert st is not None and st.status == "running"
    st.pid = None
    st.extra["runner"] = {**st.extra["runner"], "agent": agent_cmd}
    StateStore(demo).write(st)
    status = run_loopdeck("-C", str(root), "status")
    assert "running (driver: runner, no runner; `loopdeck resume` restarts it)" in status.stdout
    return root


def test_resume_starts_a_runner_for_a_loop_nobody_drives_and_waits_until_it_does(demo: Workspace) -> None:
    """Regression: a runner killed before it took the loop left it `running` with no pid, and
    `resume --yes` answered "the runner (pid None) applies it" and started nothing."""
    import re

    from tests.conftest import run_loopdeck

    root = _runner_killed_before_it_took_the_loop(demo, agent("--sleep", "0.5", "0.5"))
    ran = run_loopdeck("-C", str(root), "resume", "--yes")
    assert ran.returncode == 0, ran.stderr
    assert "Found in-progress loop (iteration 1/100). Resume? [Y/n]" in ran.stdout
    found = re.search(r"runner restarted in the background \(pid (\d+)\)", ran.stdout)
    assert found is not None, ran.stdout
    # When resume returns, the runner it started has taken the loop (or already finished it).
    st = StateStore(demo).read()
    assert st is None or st.pid == int(found.group(1)), st
    stop = run_loopdeck("-C", str(root), "stop")
    assert stop.returncode == 0
    wait_for(lambda: not processes_in(root), timeout=30)


def test_resume_says_why_the_runner_it_started_did_not_take_the_loop(demo: Workspace) -> None:
    from tests.conftest import run_loopdeck

    root = _runner_killed_before_it_took_the_loop(demo, "no-such-agent-for-loopdeck --go")
    ran = run_loopdeck("-C", str(root), "resume", "--yes")
    assert ran.returncode == 1, ran.stdout
    err = ran.stderr.strip()
    assert len(err.splitlines()) == 1, err
    assert "is not driving it: it ended (exit status 1) before it took the loop: loopdeck: error:" in err
    assert "no-such-agent-for-loopdeck" in err and "runner.log" in err
    assert "runner restarted" not in ran.stdout
    # Still nobody drives it, and the next resume says so again rather than claiming success.
    status = run_loopdeck("-C", str(root), "status")
    assert "`loopdeck resume` restarts it" in status.stdout


def test_a_completed_loop_its_runner_never_archived_is_archived_at_resume(demo: Workspace) -> None:
    from tests.conftest import run_loopdeck

    root = demo.root.resolve()
    run_loopdeck("-C", str(root), "start", "x", "--task-file", "TODO.md", "--no-github")
    st = StateStore(demo).read()
    assert st is not None
    st.status, st.driver, st.pid = "completed", "runner", dead_pid()
    StateStore(demo).write(st)
    ran = run_loopdeck("-C", str(root), "resume", "--yes")
    assert ran.returncode == 0, ran.stderr
    assert "the loop had completed; archived in" in ran.stdout
    assert not demo.state.exists() and latest(demo) is not None


def test_resume_asks_about_uncommitted_work_and_stashes_it_by_name(demo: Workspace) -> None:
    from tests.conftest import run_loopdeck

    root = demo.root.resolve()
    start = run_loopdeck("-C", str(root), "start", "x", "--task-file", "TODO.md", "--no-github")
    assert start.returncode == 0, start.stderr
    st = StateStore(demo).read()
    assert st is not None
    st.status, st.driver, st.pid = "paused", "hook", dead_pid()
    st.waiting_for = {"kind": "pause", "reason": "coffee", "since": "t"}
    StateStore(demo).write(st)
    (root / "notes.md").write_text("half done\n")
    (root / "check.py").write_text("print('changed')\n")
    ran = run_loopdeck("-C", str(root), "resume", "--yes", "--git", "stash")
    assert ran.returncode == 0, ran.stderr
    assert "Found paused loop. Resume from iteration 0/100? [Y/n]" in ran.stdout
    assert "2 uncommitted change(s): 1 modified, 1 untracked" in ran.stdout and "notes.md" in ran.stdout
    assert "stashed the changes as 'loopdeck resume: loop started" in ran.stdout
    assert "claude --continue" in ran.stdout
    listed = subprocess.run(["git", "stash", "list"], cwd=root, capture_output=True, text=True, check=True)
    assert "loopdeck resume: loop started" in listed.stdout
    assert not (root / "notes.md").exists()  # in the stash, not lost: git stash pop brings it back
    st = StateStore(demo).read()
    assert st is not None and st.status == "running" and st.session_id is None


def test_resume_commits_uncommitted_work_naming_the_loop(demo: Workspace) -> None:
    from tests.conftest import run_loopdeck

    root = demo.root.resolve()
    run_loopdeck("-C", str(root), "start", "x", "--task-file", "TODO.md", "--no-github")
    st = StateStore(demo).read()
    assert st is not None
    st.status, st.driver, st.pid, st.iteration = "running", "hook", dead_pid(), 4
    StateStore(demo).write(st)
    (root / "notes.md").write_text("half done\n")
    ran = run_loopdeck("-C", str(root), "resume", "--yes", "--git", "commit")
    assert ran.returncode == 0, ran.stderr
    log = subprocess.run(["git", "log", "-1", "--format=%s"], cwd=root, capture_output=True, text=True)
    assert "loopdeck: work in progress at resume" in log.stdout and "iteration 4" in log.stdout


def test_a_stopping_loop_is_marked_complete_with_its_summary(demo: Workspace) -> None:
    from tests.conftest import run_loopdeck

    root = demo.root.resolve()
    run_loopdeck("-C", str(root), "start", "x", "--task-file", "TODO.md", "--no-github")
    st = StateStore(demo).read()
    assert st is not None
    st.status = "stopping"
    StateStore(demo).write(st)
    ran = run_loopdeck("-C", str(root), "resume", "--yes")
    assert ran.returncode == 0, ran.stderr
    assert "Loop was stopping. Mark complete and show summary? [Y/n]" in ran.stdout
    assert "Remaining:   5 task(s): Sketch the data model" in ran.stdout
    assert not demo.state.exists()
    status = run_loopdeck("-C", str(root), "status")
    assert "last loop:   completed (marked complete at resume)" in status.stdout


def test_a_waiting_loop_says_why_before_resuming(demo: Workspace) -> None:
    from tests.conftest import run_loopdeck

    root = demo.root.resolve()
    run_loopdeck("-C", str(root), "start", "x", "--task-file", "TODO.md", "--no-github")
    st = StateStore(demo).read()
    assert st is not None
    st.status, st.driver = "paused", "hook"
    st.waiting_for = {"kind": "escalation", "reason": "no progress in 2 iterations", "since": "t"}
    StateStore(demo).write(st)
    ran = run_loopdeck("-C", str(root), "resume", "--yes")
    assert ran.returncode == 0, ran.stderr
    assert "Escalated: no progress in 2 iterations" in ran.stdout


def test_a_loop_at_its_iteration_limit_is_not_resumed_until_the_limit_is_raised(demo: Workspace) -> None:
    """A runner loop that waits at its limit: `resume` says how to go on and leaves it as it
    is (no runner started, nothing run past the limit); with the limit raised (a command
    queued for the runner to apply), the same `resume` goes on."""
    from tests.conftest import run_loopdeck

    root = demo.root.resolve()
    run_loopdeck(
        "-C", str(root), "start", "x", "--task-file", "TODO.md", "--no-github", "--max-iterations", "2"
    )
    st = StateStore(demo).read()
    assert st is not None
    st.status, st.driver, st.iteration, st.escalated = "paused", "hook", 2, True
    reason = "2 iterations reached with 3 task(s) pending"
    st.waiting_for = {"kind": "escalation", "reason": reason, "since": "t", "escalation": "max-iterations"}
    StateStore(demo).write(st)
    refused = run_loopdeck("-C", str(root), "resume", "--yes")
    assert refused.returncode != 0
    assert "not resumed: the loop is at its limit of 2 iterations" in refused.stderr
    assert "loopdeck set-max-iterations N" in refused.stderr and "Traceback" not in refused.stderr
    after = StateStore(demo).read()
    assert after is not None and after.status == "paused" and after.waiting_for == st.waiting_for
    assert run_loopdeck("-C", str(root), "set-max-iterations", "4").returncode == 0
    ran = run_loopdeck("-C", str(root), "resume", "--yes")
    assert ran.returncode == 0, ran.stderr
    assert "loop resumed at iteration 2" in ran.stdout


def test_a_corrupt_state_is_kept_and_rebuilt_from_the_journal_or_the_backup(ws: Workspace, cli) -> None:
    (ws.root / "TODO.md").write_text("- [ ] a\n")
    assert cli("start", "x", "--task-file", "TODO.md", "--no-github").code == 0
    assert cli("pause").code == 0
    st = StateStore(ws).read()
    assert st is not None
    st.iteration = 3
    StateStore(ws).write(st)  # a backup now exists
    Journal(ws.journal).append("blocked", 6, {"message": "x"})
    ws.state.write_text("---\niteration: [\n---\n")
    ran = cli("resume", "--no")
    assert ran.code == 0 and "corrupt" in ran.out and "left as it is" in ran.out
    ran = cli("resume", "--yes", "--from", "journal", "--no")
    assert ran.code == 2  # --yes and --no together: a usage error
    ran = cli("resume", "--yes", "--from", "journal")
    assert ran.code == 0, ran.err
    assert "rebuilt from the journal (iteration 6" in ran.out and "already applied" in ran.out
    assert list(ws.state.parent.glob("*.corrupt-*"))
    st = StateStore(ws).read()
    assert st is not None and st.iteration == 6 and st.task_path == "TODO.md"  # from the backup
    ws.state.write_text("---\niteration: [\n---\n")
    ran = cli("resume", "--yes", "--from", "backup")
    assert ran.code == 0 and "the backup is restored" in ran.out
    assert len(list(ws.state.parent.glob("*.corrupt-*"))) == 2


def test_repeated_runs_of_an_escalated_loop_keep_one_archive_folder(demo: Workspace) -> None:
    from tests.conftest import run_loopdeck

    root = demo.root.resolve()
    for _ in range(3):
        done = run_loopdeck("-C", str(root), *run_args("--max-iterations", "1"), timeout=60)
        assert done.returncode == 1, done.stdout + done.stderr
        assert "`loopdeck resume`" in done.stdout and "then `loopdeck run`" not in done.stdout
    assert len(list((root / ".claude" / "loops").iterdir())) == 1
    status = run_loopdeck("-C", str(root), "status")
    assert "paused" in status.stdout


def test_a_stopped_hook_loop_leaves_a_summary_status_shows(ws: Workspace, cli) -> None:
    (ws.root / "TODO.md").write_text("- [x] a\n- [ ] b\n")
    assert cli("start", "x", "--task-file", "TODO.md", "--no-github", "--no-tasks").code == 0
    assert cli("stop").code == 0
    payload = json.dumps({"session_id": "s1", "cwd": str(ws.root), "hook_event_name": "Stop"})
    env = {"CLAUDE_PROJECT_DIR": str(ws.root)}
    ran = subprocess.run(
        [sys.executable, "-m", "loop.cli", "hook", "stop"],
        input=payload,
        capture_output=True,
        text=True,
        cwd=ws.root,
        env={**os.environ, **env},
    )
    assert ran.returncode == 0
    st = StateStore(ws).read()
    assert st is not None and st.status == "stopped"
    out = cli("status").out
    assert "last loop:   stopped (stopped by a person)" in out
    assert "Done:        1 task(s): a" in out and "Remaining:   1 task(s): b" in out


def test_a_runner_that_cannot_go_on_fails_the_loop_through_the_engine(ws: Workspace, cli) -> None:
    from loop.drivers.runner import Options, Runner

    (ws.root / "TODO.md").write_text("- [x] a\n- [ ] b\n")
    assert cli("start", "x", "--task-file", "TODO.md", "--no-github", "--no-tasks").code == 0
    said: list[str] = []
    code = Runner(ws, Options(), out=said.append).fail("the agent cannot start")
    assert code == 1
    st = StateStore(ws).read()
    assert st is not None and st.status == "failed"
    assert "failed" in [e.kind for e in Journal(ws.journal).tail(50).events]
    folder = latest(ws)
    assert folder is not None
    record = json.loads((folder / "summary.json").read_text())
    assert record["outcome"] == "failed" and record["tasks"]["remaining"] == ["b"]
    assert "Remaining:   1 task(s): b" in said
    assert any("`loopdeck start --force`" in line for line in said)
    assert len(list((ws.root / ".claude" / "loops").iterdir())) == 1


HOLD = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)
os.ftruncate(fd, 0)
os.pwrite(fd, (sys.argv[2] + "\\n").encode(), 0)  # the holder it names
print("held", flush=True)
time.sleep(60)
"""


def hold_lock(ws: Workspace, named: int) -> subprocess.Popen[str]:
    ws.lock.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(ws.lock), str(named)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline() == "held\n"
    return proc


def test_a_stale_lock_is_broken_and_journaled(ws: Workspace) -> None:
    dead = dead_pid()
    holder = hold_lock(ws, dead)  # the lock outlives the process it names: stale
    try:
        store = StateStore(ws, lock_timeout=0.3)
        with store.locked():
            pass
        broken = [e for e in Journal(ws.journal).tail(10).events if e.kind == "lock-broken"]
        assert [e.data["pid"] for e in broken] == [dead]
    finally:
        holder.kill()
        holder.wait()


def test_a_live_holders_lock_is_never_broken(ws: Workspace) -> None:
    import pytest

    from loop.core.errors import LockTimeout

    holder = hold_lock(ws, os.getpid())  # names a live process
    try:
        with (
            pytest.raises(LockTimeout, match=f"pid {os.getpid()}, alive"),
            StateStore(ws, lock_timeout=0.3).locked(),
        ):
            pass
        assert "lock-broken" not in [e.kind for e in Journal(ws.journal).tail(10).events]
    finally:
        holder.kill()
        holder.wait()


def test_runners_killed_as_resume_starts_them_never_leave_a_loop_nobody_resumes(demo: Workspace) -> None:
    """`resume` after any kill starts a driver or says exactly why not: here each runner it
    starts is SIGKILLed as soon as it appears, before or after it took the loop."""
    import re
    import signal

    from tests.conftest import loopdeck_cmd

    root = _runner_killed_before_it_took_the_loop(demo, agent("--sleep", "0.5", "0.5"))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}

    def runners() -> list[int]:
        import psutil

        found = []
        for pid in processes_in(root):
            try:
                argv = psutil.Process(pid).cmdline()
            except psutil.Error:
                continue
            if "run" in argv[-2:] and "loop.cli" in argv:  # `run`, or `run --headless` as it was run
                found.append(pid)
        return found

    for _ in range(4):
        resumer = subprocess.Popen(
            [*loopdeck_cmd(), "-C", str(root), "resume", "--yes"],
            cwd=root,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

        def appeared(resumer: subprocess.Popen[str] = resumer) -> bool:
            return bool(runners()) or resumer.poll() is not None

        wait_for(appeared, timeout=30)
        for pid in runners():
            os.kill(pid, signal.SIGKILL)
        out, err = resumer.communicate(timeout=60)
        assert "(pid None)" not in out + err
        started = re.search(r"runner restarted in the background \(pid (\d+)\)", out)
        killed = "before it took the loop" in err and resumer.returncode == 1
        assert started is not None or killed, (out, err)
        wait_for(lambda: not runners(), timeout=15)
    ran = run_loopdeck_yes(root)
    assert re.search(r"runner restarted in the background \(pid (\d+)\)", ran.stdout), ran.stdout + ran.stderr
    from tests.conftest import run_loopdeck

    assert run_loopdeck("-C", str(root), "stop").returncode == 0
    wait_for(lambda: not processes_in(root), timeout=30)


def run_loopdeck_yes(root: Path) -> subprocess.CompletedProcess[str]:
    from tests.conftest import run_loopdeck

    return run_loopdeck("-C", str(root), "resume", "--yes")
