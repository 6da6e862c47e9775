"""What the runner does per iteration besides running the agent: how it starts its children,
how often it asks git, how often it reads what did not change. Counted, never timed: each test
pins one piece of work the runner used to repeat (or to do the slow way)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from loop.demo import workspace
from loop.store.paths import Workspace
from tests.test_control import person

AGENT = "#!/bin/sh\ncat > /dev/null\nsed -i '0,/- \\[ \\]/s//- [x]/' TODO.md\necho done\n"
"""The benchmark's agent: reads its prompt, ticks the first open box, says so."""


@pytest.fixture
def ticking(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Workspace, Path]:
    """A demo repository of 3 tasks and the ticking agent."""
    for name in ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"):
        monkeypatch.setenv(name, "t")
    for name in ("GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"):
        monkeypatch.setenv(name, "t@example.invalid")
    agent = tmp_path / "agent.sh"
    agent.write_text(AGENT)
    agent.chmod(0o755)
    return Workspace(workspace.create(tmp_path / "repo", tasks=3)), agent


def run_in_process(ws: Workspace, agent: Path, *extra: str) -> int:
    from loop.cli import main

    argv = ["-C", str(ws.root), "run", "tick every box", "--agent", str(agent), "--agent-format", "text"]
    argv += ["--task-file", "TODO.md", "--no-github", "--no-tasks", "--headless", *extra]
    return main(argv)


def deadline(predicate: Any, timeout: float = 15.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.02)
    return bool(predicate())


def gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except OSError:
        return True


# --- starting children -------------------------------------------------------------------------


def test_the_agent_and_the_checks_start_without_python_in_the_child_and_are_registered(
    ticking: tuple[Workspace, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A `preexec_fn` makes Python fork the whole runner and run Python before exec; without one
    the child is spawned with vfork. The supervisor still learns each child's pid."""
    from loop.processes.supervisor import Supervisor

    ws, agent = ticking
    started: list[tuple[list[str], object]] = []
    registered: list[int] = []
    real_popen = subprocess.Popen

    class Spy(real_popen):  # type: ignore[misc,valid-type]
        def __init__(self, args: Any, *more: Any, **kwargs: Any) -> None:
            super().__init__(args, *more, **kwargs)
            started.append(([str(a) for a in args], kwargs.get("preexec_fn")))
            self.spied_pid = self.pid

    real_register = Supervisor.register

    def register(self: Supervisor, pid: int) -> None:
        registered.append(pid)
        real_register(self, pid)

    monkeypatch.setattr(subprocess, "Popen", Spy)
    monkeypatch.setattr(Supervisor, "register", register)
    check = f"{sys.executable} check.py"
    assert run_in_process(ws, agent, "--verify", check, "--verify-allow", check) == 0, capsys.readouterr()
    children = [(argv, preexec) for argv, preexec in started if argv[0] in (str(agent), sys.executable)]
    agents = [c for c in children if c[0][0] == str(agent)]
    checks = [c for c in children if c[0][-1] == "check.py"]
    assert agents and checks
    assert all(preexec is None for _argv, preexec in agents + checks)
    assert len(registered) == len(agents) + len(checks)


def test_a_child_registered_after_it_started_dies_with_a_killed_runner() -> None:
    """No marker in its environment, no `preexec_fn`: only the registration finds it."""
    from loop.processes.supervisor import Supervisor

    supervisor = Supervisor()
    child = subprocess.Popen(["sleep", "300"], start_new_session=True, env={"PATH": os.environ["PATH"]})
    try:
        supervisor.register(child.pid)
        assert supervisor.fd is not None
        os.close(supervisor.fd)  # the runner's end, as its death closes it (no release)
        supervisor.fd = None
        supervisor.proc.wait(15)
        assert deadline(lambda: gone(child.pid)), "the registered child outlived the runner"
    finally:
        if not gone(child.pid):
            os.killpg(child.pid, signal.SIGKILL)
        child.wait(5)
        supervisor.close()


# --- the agent's pipes ---------------------------------------------------------------------------


def test_a_turn_starts_no_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The prompt, the output and the agent's end are served by one `select` in the runner's own
    thread: a thread started per turn (two, with a prompt on stdin) waited for the interpreter."""
    import threading

    from loop.processes import agent

    started: list[threading.Thread] = []
    real_start = threading.Thread.start

    def start(self: threading.Thread) -> None:
        started.append(self)
        real_start(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    run = agent.run("cat", "the prompt\n", tmp_path, tmp_path / "a.log", timeout=30, interrupt=lambda: None)
    assert run.exit_code == 0 and run.tail == b"the prompt\n"
    assert (tmp_path / "a.log").read_bytes() == b"the prompt\n"
    assert started == []


CHATTY = """\
import hashlib, sys
sys.stdout.write("x" * 1_000_000 + "\\n")  # more than the pipe holds, before reading anything
sys.stdout.flush()
data = sys.stdin.buffer.read()
print(len(data), hashlib.sha256(data).hexdigest())
"""


def test_a_prompt_larger_than_the_pipe_reaches_an_agent_that_prints_before_reading(tmp_path: Path) -> None:
    """Neither side waits on the other: the prompt is written as the pipe takes it while the
    output is read."""
    import hashlib
    import shlex

    from loop.processes import agent

    script = tmp_path / "chatty.py"
    script.write_text(CHATTY)
    prompt = "p" * 3_000_000
    command = shlex.join([sys.executable, str(script)])
    run = agent.run(command, prompt, tmp_path, tmp_path / "a.log", timeout=60, interrupt=lambda: None)
    assert run.exit_code == 0
    expected = f"{len(prompt)} {hashlib.sha256(prompt.encode()).hexdigest()}"
    assert run.tail.decode().splitlines()[-1] == expected
    assert (tmp_path / "a.log").read_text().splitlines()[-1] == expected


def test_an_agent_that_prints_as_it_stops_is_read_while_it_stops(tmp_path: Path) -> None:
    """A timeout's SIGTERM: the agent's last words (more than a pipe holds) are read while it
    shuts down, so it ends on its own instead of blocking until the SIGKILL."""
    import shlex

    from loop.processes import agent

    script = tmp_path / "slow_to_stop.py"
    script.write_text(
        "import signal, sys, time\n"
        "def bye(*_):\n"
        "    sys.stdout.write('y' * 1_000_000 + '\\nbye\\n'); sys.stdout.flush(); sys.exit(3)\n"
        "signal.signal(signal.SIGTERM, bye)\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    command = shlex.join([sys.executable, str(script)])
    looks: list[int] = []

    def interrupt() -> str | None:
        looks.append(1)
        log = tmp_path / "a.log"
        return "skip" if log.exists() and b"ready" in log.read_bytes() else None

    run = agent.run(command, "", tmp_path, tmp_path / "a.log", timeout=60, interrupt=interrupt, poll=0.05)
    assert run.interrupted == "skip"
    assert run.exit_code == 3  # its own exit, not the SIGKILL (-9)
    assert run.tail.endswith(b"bye\n")


# --- loopdeck's own files --------------------------------------------------------------------------


def test_a_line_appended_to_an_existing_journal_makes_no_folder_and_checks_it_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every journal line and state write checks that its folder stays inside `.claude/`; a
    folder already there is not made again, nor checked a second time."""
    from loop.store import safeopen
    from loop.store.journal import Journal

    ws = Workspace(tmp_path)
    journal = Journal(ws.journal)
    journal.append("warning", 1, {"message": "first"})  # makes .claude/
    made: list[Path] = []
    checks: list[Path] = []
    real_mkdir, real_check = Path.mkdir, safeopen.check_parent

    def mkdir(self: Path, *args: Any, **kwargs: Any) -> None:
        made.append(self)
        real_mkdir(self, *args, **kwargs)

    def check_parent(path: Path) -> None:
        checks.append(path)
        real_check(path)

    walks: list[str] = []
    real_realpath = os.path.realpath

    def realpath(path: Any, *args: Any, **kwargs: Any) -> Any:
        walks.append(str(path))
        return real_realpath(path, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", mkdir)
    monkeypatch.setattr(safeopen, "check_parent", check_parent)
    monkeypatch.setattr(os.path, "realpath", realpath)
    for n in range(3):
        journal.append("warning", 1, {"message": f"line {n}"})
    assert made == []
    assert len(checks) == 3
    assert walks == []  # a file right in `.claude`: its folder is the one checked, no walk needed
    assert len(ws.journal.read_text().splitlines()) == 4


def test_a_folder_made_through_a_planted_symlink_is_still_refused(tmp_path: Path) -> None:
    """The folder that is not there yet is made, then checked again."""
    from loop.store.safeopen import UnsafePath, make_parents

    claude = tmp_path / ".claude"
    claude.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (claude / "loopdeck").symlink_to(outside)
    with pytest.raises(UnsafePath):
        make_parents(claude / "loopdeck" / "iterations" / "0001.log")


# --- git -----------------------------------------------------------------------------------------


def test_a_turns_git_look_is_waited_for_only_when_the_decision_needs_it(
    ticking: tuple[Workspace, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """One `git status` per turn, started as the turn ends. A turn that ticked a box made
    progress whatever git says: the decision is written first, and git is read only before the
    next agent starts (from what this turn left). A turn that changed no count is judged by it:
    git is read before the decision."""
    from loop.drivers.session import Session
    from loop.repo import gitstate
    from loop.store.state import StateStore

    ws, agent = ticking
    seen: list[str] = []
    real_init, real_result = gitstate.Fingerprint.__init__, gitstate.Fingerprint.result
    real_count, real_write = Session.count, StateStore.write

    def init(self: gitstate.Fingerprint, root: Path) -> None:
        seen.append("git started")
        real_init(self, root)

    def result(self: gitstate.Fingerprint) -> str | None:
        seen.append("git read")
        return real_result(self)

    def count(self: Session, state: Any) -> Any:
        seen.append("sources read")
        return real_count(self, state)

    def write(self: StateStore, state: Any, **kw: Any) -> Any:
        seen.append("decided")
        return real_write(self, state, **kw)

    monkeypatch.setattr(gitstate.Fingerprint, "__init__", init)
    monkeypatch.setattr(gitstate.Fingerprint, "result", result)
    monkeypatch.setattr(Session, "count", count)
    monkeypatch.setattr(StateStore, "write", write)
    assert run_in_process(ws, agent) == 0, capsys.readouterr()
    out = capsys.readouterr().out
    turns = out.count("Starting iteration")
    assert turns == 7  # three boxes ticked, then four verification turns
    after_turns = [i for i, what in enumerate(seen) if what == "git started"][1:]  # [0]: the baseline
    assert len(after_turns) == turns
    for at in after_turns[:-1]:
        assert seen[at : at + 4] == ["git started", "sources read", "decided", "git read"]
    assert seen[after_turns[-1] : after_turns[-1] + 3] == ["git started", "sources read", "decided"]
    assert "git read" not in seen[after_turns[-1] :]  # the loop is over: nobody waits for it


def test_a_turns_git_look_with_a_commit_starts_after_the_commit(
    ticking: tuple[Workspace, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """With checks or a commit to run after the agent, the look waits for them: what they
    change is the turn's work too."""
    from loop.drivers.commits import Commits
    from loop.repo import gitstate

    ws, agent = ticking
    seen: list[str] = []
    real_init, real_commit = gitstate.Fingerprint.__init__, Commits.turn

    def init(self: gitstate.Fingerprint, root: Path) -> None:
        seen.append("git started")
        real_init(self, root)

    def commit(self: Commits, n: int) -> Any:
        seen.append("committed")
        return real_commit(self, n)

    monkeypatch.setattr(gitstate.Fingerprint, "__init__", init)
    monkeypatch.setattr(Commits, "turn", commit)
    assert run_in_process(ws, agent, "--commit") == 0, capsys.readouterr()
    turns = [i for i, what in enumerate(seen) if what == "committed"]
    assert len(turns) >= 3
    assert all(seen[at + 1 : at + 2] == ["git started"] for at in turns)
    assert seen.count("git started") == len(turns) + 1  # and the baseline: one look a turn


def test_an_agent_that_changes_nothing_is_still_found_stuck(
    ticking: tuple[Workspace, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """The mark read later is the mark: a turn that leaves the workspace as it was is no progress."""
    ws, agent = ticking
    agent.write_text("#!/bin/sh\ncat > /dev/null\necho thinking\n")
    assert run_in_process(ws, agent) == 1
    out = capsys.readouterr().out
    assert "no progress in" in out
    assert out.count("Starting iteration") <= 5


@pytest.mark.parametrize("git", [True, False], ids=["git", "no-git"])
def test_an_agent_that_changes_files_but_no_count_is_not_stuck(
    ticking: tuple[Workspace, Path], capsys: pytest.CaptureFixture[str], git: bool
) -> None:
    """Each turn is judged by what it changed, from the mark its own start left: notes written
    turn after turn are progress, in a repository and in a plain folder."""
    import shutil

    ws, agent = ticking
    if not git:
        shutil.rmtree(ws.root / ".git")
    agent.write_text("#!/bin/sh\ncat > /dev/null\necho note >> NOTES.md\necho thinking\n")
    assert run_in_process(ws, agent, "--max-iterations", "4") == 1
    out = capsys.readouterr().out
    assert "no progress in" not in out
    assert out.count("Starting iteration") == 4 and "4/4" in out


def test_a_skip_queued_after_the_agent_ended_is_decided_from_the_workspace(
    ticking: tuple[Workspace, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The agent writes down a new task (3 -> 4 open); `loopdeck skip` arrives while the runner
    commits, after the agent ended, so the decision applies it: 4 -> 3 open, the counts the
    turn started from. The runner looks at the workspace for that decision too."""
    from loop.drivers.commits import Commits
    from loop.store import control

    ws, agent = ticking
    agent.write_text(
        "#!/bin/sh\ncat > /dev/null\necho '- [ ] a task found on the way' >> TODO.md\necho noted\n"
    )
    real_commit = Commits.turn
    sent: list[int] = []

    def commit(self: Commits, n: int) -> Any:
        if not sent:
            sent.append(n)
            control.queue(self.session.ws, "skip", key=person(self.session.ws))
        return real_commit(self, n)

    monkeypatch.setattr(Commits, "turn", commit)
    code = run_in_process(ws, agent, "--commit", "--max-iterations", "2")
    out = capsys.readouterr()
    assert sent and code == 1 and "error" not in out.err, out
    assert out.out.count("Starting iteration") == 2


def test_what_a_failed_turn_changed_is_progress_for_the_next_turn(
    ticking: tuple[Workspace, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Turn 1 changes nothing; turn 2 writes notes, then fails (no retry); turn 3 changes
    nothing. The workspace changed since turn 1 ended: a failed turn's work is the next judged
    turn's progress, so the loop is not stuck."""
    ws, agent = ticking
    counter = tmp_path / "turns"
    agent.write_text(
        "#!/bin/sh\ncat > /dev/null\n"
        f"echo x >> {counter}\n"
        f"if [ $(wc -l < {counter}) -eq 2 ]; then echo note >> NOTES.md; echo crashed; exit 1; fi\n"
        "echo thinking\n"
    )
    run_in_process(ws, agent, "--retries", "0", "--max-iterations", "3")
    out = capsys.readouterr().out
    assert out.count("Starting iteration") == 3, out
    assert "no progress in" not in out, out


def test_a_loop_waiting_for_a_person_holds_no_git_look(
    ticking: tuple[Workspace, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The agent ticks a box and asks a question: the decision did not need the turn's look,
    and the loop now waits for an answer (for minutes or days). The look's git process is
    ended and reaped before the wait, and the next turn starts from a look taken then."""
    from loop.cli import main
    from loop.drivers.runner import Runner

    ws, agent = ticking
    agent.write_text(
        "#!/bin/sh\ncat > /dev/null\nsed -i '0,/- \\[ \\]/s//- [x]/' TODO.md\n"
        "echo '<question>SQLite or Postgres?</question>'\n"
    )
    seen: list[tuple[bool, set[int]]] = []
    before = unreaped_children()  # other tests' in this worker

    def wait_while_paused(self: Runner) -> bool:
        seen.append((self.marks.looking is None and self.marks.start is None, unreaped_children() - before))
        self.signals.caught = signal.SIGTERM
        return False

    monkeypatch.setattr(Runner, "wait_while_paused", wait_while_paused)
    argv = ["-C", str(ws.root), "run", "tick every box", "--agent", str(agent), "--agent-format", "text"]
    main([*argv, "--task-file", "TODO.md", "--no-github", "--no-tasks"])
    out = capsys.readouterr().out
    assert "SQLite or Postgres?" in out
    assert seen == [(True, set())]


def unreaped_children() -> set[int]:
    """This process's children that ended and were not waited for."""
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if fields[0] == b"Z" and int(fields[1]) == os.getpid():
                found.add(int(entry))
    return found


# --- the supervisor ------------------------------------------------------------------------------


def _supervise(monkeypatch: pytest.MonkeyPatch, said: bytes) -> list[str]:
    """The supervisor's main loop fed `said` then the end of file: the sweeps it made."""
    from loop.processes import supervisor, sweep

    swept: list[str] = []

    def kill(*args: Any, **kwargs: Any) -> set[int]:
        swept.append("run")
        return set()

    monkeypatch.setattr(sweep, "kill", kill)
    monkeypatch.setattr(supervisor, "kill_all", lambda pids: swept.append(f"groups {sorted(pids)}"))
    read_end, write_end = os.pipe()
    os.write(write_end, said)
    os.close(write_end)
    saved = os.dup(0)
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        os.dup2(read_end, 0)
        assert supervisor.main(["abc123"]) == 0
    finally:
        for sig, handler in handlers.items():  # it ignores them: a process of its own
            signal.signal(sig, handler)
        os.dup2(saved, 0)
        os.close(saved)
        os.close(read_end)
    return swept


def test_a_runner_that_swept_its_run_itself_spares_the_supervisor_a_second_sweep(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from loop.processes.supervisor import SWEPT

    assert _supervise(monkeypatch, b"+123\n-\n" + SWEPT) == []


def test_a_runner_that_died_without_its_last_word_is_swept_after(monkeypatch: pytest.MonkeyPatch) -> None:
    from loop.processes.supervisor import SWEPT

    assert _supervise(monkeypatch, b"+123\n") == ["groups [123]", "run"]
    assert _supervise(monkeypatch, b"") == ["run"]
    assert _supervise(monkeypatch, SWEPT + b"+124\n") == ["groups [124]", "run"]  # a child after it


# --- what a run imports ----------------------------------------------------------------------------

IMPORTED = """\
import sys
from loop.cli import main
code = main(sys.argv[1:])
print("verify imported" if "loop.verify" in sys.modules else "verify not imported")
sys.exit(code)
"""


def test_a_run_without_checks_does_not_import_the_checks_module(ticking: tuple[Workspace, Path]) -> None:
    ws, agent = ticking
    argv = ["-C", str(ws.root), "run", "tick", "--agent", str(agent), "--agent-format", "text"]
    argv += ["--task-file", "TODO.md", "--no-github", "--no-tasks", "--headless"]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    done = subprocess.run([sys.executable, "-c", IMPORTED, *argv], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "verify not imported"
    check = f"{sys.executable} check.py"
    (ws.root / "TODO.md").write_text("- [ ] one more\n")
    again = [*argv, "--verify", check, "--verify-allow", check, "--yes"]
    done = subprocess.run([sys.executable, "-c", IMPORTED, *again], capture_output=True, text=True, env=env)
    assert done.stdout.splitlines()[-1] == "verify imported", done.stdout + done.stderr


def test_a_turns_log_folder_is_checked_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The log is opened the safe way, which makes and checks its folder: not twice a turn."""
    from loop.processes import agent
    from loop.store import safeopen

    checks: list[Path] = []
    real_check = safeopen.check_parent

    def check_parent(path: Path) -> None:
        checks.append(path)
        real_check(path)

    log = tmp_path / ".claude" / "loopdeck" / "iterations" / "loop" / "0001.log"
    log.parent.mkdir(parents=True)
    monkeypatch.setattr(safeopen, "check_parent", check_parent)
    run = agent.run("cat", "hi\n", tmp_path, log, timeout=30, interrupt=lambda: None)
    assert run.exit_code == 0 and log.read_bytes() == b"hi\n"
    assert checks == [log]
