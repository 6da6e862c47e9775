"""What a person meets in the first hour with a runner loop, through the real `loopdeck` CLI in
subprocesses: `resume --no` sends nothing, a refused `run` writes nothing, a question says how
to answer it (and an answer says when it lands, and shows as queued), and after a crash and
`resume` the loop goes on as it was run and its summary tells the whole loop."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from loop.store.archive import latest
from loop.store.journal import Journal
from loop.store.paths import Workspace
from loop.store.state import StateStore
from tests.conftest import REPO, loopdeck_cmd, run_loopdeck
from tests.test_hook import Session, env
from tests.test_runner import agent, demo, kinds, processes_in, run_args, start_runner, wait_for

__all__ = ["demo", "env"]

ANSWER_HINT = (
    'loopdeck: the loop waits for your answer: `loopdeck answer "…"` from another terminal, or the monitor'
)


def cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_loopdeck("-C", str(root), *args)


def status(ws: Workspace) -> str | None:
    state = StateStore(ws).read()
    return state.status if state is not None else None


def files_of(root: Path) -> list[str]:
    """Every file and folder in the workspace but git's own."""
    return sorted(
        str(p.relative_to(root)) for p in root.rglob("*") if ".git" not in p.relative_to(root).parts
    )


def runner_to_file(ws: Workspace, log: Path, *args: str) -> subprocess.Popen[bytes]:
    """`loopdeck run ARGS` as a person starts it in a terminal's background: its output in `log`."""
    with log.open("wb") as out:
        return subprocess.Popen(
            [*loopdeck_cmd(), "-C", str(ws.root), *args],
            cwd=ws.root,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )


def end(pid: int) -> None:
    """End a runner this test started (a resumed one, detached), if it still runs."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)


# --- resume --no --------------------------------------------------------------------------------


def test_resume_no_on_a_paused_loop_whose_runner_lives_sends_nothing(demo: Workspace) -> None:
    root = demo.root.resolve()
    runner = start_runner(demo, *run_args(agent_cmd=agent("--sleep", "0.3", "0.3")))
    try:
        wait_for(lambda: demo.journal.exists() and "iteration-completed" in kinds(demo))
        assert cli(root, "pause", "--wait", "10").returncode == 0
        wait_for(lambda: status(demo) == "paused")
        queue = demo.control.read_bytes()
        declined = cli(root, "resume", "--no")
        assert declined.returncode == 0, declined.stderr
        assert declined.stdout == (
            f"loopdeck: the loop is paused and its runner (pid {runner.pid}) is alive: `loopdeck resume` "
            "would queue a resume it applies within a second; nothing sent (--no)\n"
        )
        assert demo.control.read_bytes() == queue  # nothing queued
        assert status(demo) == "paused" and "resumed" not in kinds(demo)
    finally:
        cli(root, "stop", "--wait", "10")
        runner.communicate(timeout=30)
    assert "resumed" not in kinds(demo)


# --- a refused run -------------------------------------------------------------------------------


def test_a_refused_run_writes_nothing(demo: Workspace) -> None:
    root = demo.root.resolve()
    before = files_of(root)
    no_prompt = cli(root, "run", "--headless")
    assert no_prompt.returncode == 1
    assert no_prompt.stderr == f"loopdeck: error: no loop in {root}: `loopdeck run PROMPT` starts one\n"
    refused = cli(root, "run", "x", "--agent", agent(), "--verify", "rm -rf /", "--no-github", "--headless")
    assert refused.returncode == 1 and "refused" in refused.stderr, refused.stderr
    assert files_of(root) == before
    assert not (root / ".claude" / "orchestrator-loop.lock").exists()


# --- the agent's question --------------------------------------------------------------------------


def test_a_question_says_how_to_answer_it_in_the_log_status_and_monitor(
    demo: Workspace, tmp_path: Path
) -> None:
    from loop.views.snapshot import read
    from tui.widgets.status_bar import bar_line

    root = demo.root.resolve()
    log = tmp_path / "runner.out"
    runner = runner_to_file(demo, log, "run", "Build the demo", "--agent", agent("--ask-at", "4"),
                            "--task-file", "TODO.md", "--no-github")  # fmt: skip
    try:
        wait_for(lambda: ANSWER_HINT in log.read_text())
        lines = log.read_text().splitlines()
        asked = next(i for i, line in enumerate(lines) if "QUESTION from the agent: Which storage" in line)
        assert lines[asked + 1] == ANSWER_HINT
        shown = cli(root, "status").stdout
        assert 'answer with  loopdeck answer "…" (it goes into the agent\'s next prompt)\n' in shown, shown
        _state, bar = bar_line(read(demo), datetime.now(UTC))
        assert bar.startswith('loopdeck  QUESTION · loopdeck answer "…" · iteration 2/100'), bar
        answered = cli(root, "answer", "SQLite")
        assert answered.returncode == 0, answered.stderr
        assert "it applies within a second (the runner polls the queue)" in answered.stdout
        wait_for(lambda: "answered" in kinds(demo))
    finally:
        cli(root, "stop", "--wait", "10")
        runner.communicate(timeout=30)


def test_an_answer_to_a_loop_nobody_drives_shows_as_queued(demo: Workspace) -> None:
    root = demo.root.resolve()
    headless = cli(root, *run_args(agent_cmd=agent("--ask-at", "4")))
    assert headless.returncode == 1
    assert 'Next:        answer it (`loopdeck answer "…"`), then `loopdeck resume`\n' in headless.stdout
    before = cli(root, "status").stdout
    assert "answer with  loopdeck answer" in before and "queued" not in before
    answered = cli(root, "answer", "Use", "SQLite")
    assert answered.returncode == 0, answered.stderr
    assert "it applies when a runner drives the loop again: its runner is gone" in answered.stdout
    after = cli(root, "status").stdout
    found = re.search(r"^queued       answer \"Use SQLite\" \(sent (\S+)\); (.*)$", after, re.MULTILINE)
    assert found is not None, after
    assert found.group(2) == "applies when a runner drives the loop again (`loopdeck resume` restarts it)"
    assert "answer with" not in after  # answered: the status no longer asks for it


def test_an_answer_to_a_stop_that_waits_for_it_says_it_lands_now(ws: Workspace, env: dict[str, str]) -> None:
    (ws.root / "TODO.md").write_text("- [ ] a\n")
    session = Session(ws, {**env, "LOOPDECK_QUESTION_WAIT": "60"}, subprocess=True)
    assert session.loopdeck("start", "x", "--task-file", "TODO.md", "--no-github").returncode == 0
    said: list[subprocess.CompletedProcess[str]] = []

    def answer_when_asked() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and "question" not in session.kinds():
            time.sleep(0.05)
        said.append(cli(ws.root, "answer", "Use SQLite"))

    helper = threading.Thread(target=answer_when_asked)
    helper.start()
    out = session.stop("Before I go on: <question>SQLite or Postgres?</question>", active=False)
    helper.join()
    assert out is not None and out["reason"].startswith("A PERSON ANSWERED YOUR QUESTION:\nUse SQLite")
    (answered,) = said
    assert answered.returncode == 0, answered.stderr
    assert answered.stdout.endswith(
        "; it applies now: the agent's Stop is waiting for it and takes it at once\n"
    ), answered.stdout
    assert not (
        ws.private_dir / "stop-waits"
    ).exists()  # the Stop is over: the next answer waits for the next one
    again = cli(ws.root, "say", "later")
    assert again.stdout.endswith("; it applies at the agent's next Stop\n"), again.stdout


# --- after a crash: resume -----------------------------------------------------------------------


def _kill_mid_iteration(demo: Workspace, runner: subprocess.Popen[str], commits: int) -> int:
    """SIGKILL the runner while its agent works, after `commits` commits: the iteration cut."""
    wait_for(lambda: kinds(demo).count("commit") >= commits and kinds(demo)[-1:] == ["iteration-started"])
    runner.kill()
    runner.communicate(timeout=30)
    wait_for(lambda: not processes_in(demo.root.resolve()), timeout=15)
    last = Journal(demo.journal).tail(1).events[-1]
    assert last.kind == "iteration-started" and last.iteration is not None
    return last.iteration


def test_after_a_crash_and_resume_the_summary_tells_the_whole_loop(demo: Workspace) -> None:
    root = demo.root.resolve()
    started = time.monotonic()
    first = start_runner(demo, *run_args("--commit", agent_cmd=agent("--sleep", "0.8", "0.8")))
    cut = _kill_mid_iteration(demo, first, commits=2)
    resumed = cli(root, "resume", "--yes")
    assert resumed.returncode == 0, resumed.stderr
    pid = int(re.findall(r"runner restarted in the background \(pid (\d+)\)", resumed.stdout)[0])
    try:
        wait_for(lambda: not demo.state.exists() and latest(demo) is not None, timeout=60)
        wait_for(lambda: not processes_in(root), timeout=15)
    finally:
        end(pid)
    took = time.monotonic() - started
    journal = Journal(demo.journal).tail(10_000).events
    (note,) = [e for e in journal if e.kind == "agent-interrupted"]
    assert note.iteration == cut
    assert note.data["reason"] == (
        f"iteration {cut} was cut short: its runner (pid {first.pid}) ended during it, before the turn was over"
    )
    assert f"Agent ended early: iteration {cut} was cut short" in cli(root, "log").stdout
    shas = [str(e.data["sha"]) for e in journal if e.kind == "commit"]
    made = subprocess.run(["git", "log", "--format=%H", "--grep=loopdeck: iteration"], cwd=root,
                          capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
    assert sorted(made) == sorted(shas) and len(shas) >= 4
    out = (demo.private_dir / "runner.log").read_text()
    summary = out[out.rindex("== loopdeck summary ==") :]
    mine = sum(1 for e in journal[journal.index(note) :] if e.kind == "commit")
    assert f"Commits:     {mine} this run, {len(shas)} in all ({shas[-1][:8]} last)\n" in summary, summary
    found = re.search(r"^Duration:    (\d+)m (\d+)s this run, (\d+)m (\d+)s in all$", summary, re.MULTILINE)
    assert found is not None, summary
    this_run, in_all = (int(found[1]) * 60 + int(found[2]), int(found[3]) * 60 + int(found[4]))
    assert this_run < in_all <= took + 1
    record = json.loads((latest(demo) / "summary.json").read_text())  # type: ignore[operator]
    assert record["outcome"] == "completed"


def test_resume_restarts_a_headless_loop_headless(demo: Workspace) -> None:
    """The loop was run headless: the runner `resume` starts ends at the agent's question with
    a summary, rather than wait for a person nobody is watching."""
    root = demo.root.resolve()
    first = start_runner(demo, *run_args(agent_cmd=agent("--sleep", "0.6", "0.6", "--ask-at", "5")))
    _kill_mid_iteration(demo, first, commits=0)
    resumed = cli(root, "resume", "--yes")
    assert resumed.returncode == 0, resumed.stderr
    pid = int(re.findall(r"runner restarted in the background \(pid (\d+)\)", resumed.stdout)[0])
    log = demo.private_dir / "runner.log"
    try:
        assert (
            "loopdeck: it runs headless, as the loop was run: a question or an escalation ends it"
            in resumed.stdout
        )
        wait_for(
            lambda: "Ended:       question (the agent asks: Which storage" in log.read_text(), timeout=30
        )
        wait_for(lambda: not processes_in(root), timeout=15)  # it ended: nobody waits for a person
    finally:
        end(pid)
    assert status(demo) == "paused"
