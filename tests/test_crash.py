"""Acceptance: a runner killed with SIGKILL at random moments, resumed each time with
`loopdeck resume --yes`, always completes its loop; the iteration never goes back, no task is
done twice, a kill tears at most one journal line, and no agent process or child of an agent
outlives its runner (the supervisor kills the tree)."""

from __future__ import annotations

import functools
import json
import os
import random
import re
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from loop.demo import workspace
from loop.store.archive import latest
from loop.store.paths import Workspace
from loop.store.state import StateStore
from tests.conftest import run_loopdeck
from tests.test_runner import agent, demo, gone, kinds, processes_in, run_args, start_runner, wait_for

__all__ = ["demo"]  # the fixture, shared with the runner's tests

KILLS = 16
"""SIGKILLs per run of the crash test: enough to land in every phase of an iteration (runner
start, agent thinking, the agent's child alive, the decision, the write), few enough to keep
the test near half a minute. Raise it locally to hunt for rarer interleavings."""

SEED = int(os.environ.get("LOOPDECK_CRASH_SEED", "20261126"))
"""The moments are random but reproducible: set LOOPDECK_CRASH_SEED to replay a failure."""


def driving(ws: Workspace, pid: int) -> bool:
    """The runner `pid` has claimed the loop, or the loop has completed."""
    try:
        state = StateStore(ws).read()
    except Exception:
        return False
    return (state is not None and state.pid == pid) or (state is None and completed(ws))


def completed(ws: Workspace) -> bool:
    folder = latest(ws)
    if folder is None or ws.state.exists():
        return False
    return bool(json.loads((folder / "summary.json").read_text()).get("outcome") == "completed")


def torn_lines(ws: Workspace) -> int:
    count = 0
    for line in ws.journal.read_bytes().splitlines():
        try:
            json.loads(line)
        except ValueError:
            count += 1
    return count


TASKS = 12
"""Enough work (12 tasks and 4 review loops) that the kills, not the agent, set the pace."""


def test_sigkill_at_random_moments_then_resume_always_completes(demo: Workspace) -> None:
    rng = random.Random(SEED)
    root = demo.root.resolve()
    workspace.create(root, tasks=TASKS)  # more tasks than the runner tests' 5
    command = agent("--spawn-child", "--sleep", "0.3", "0.8")
    first = start_runner(demo, *run_args(agent_cmd=command))
    pid = first.pid
    iteration = 0
    kills = 0
    for _ in range(KILLS):
        wait_for(functools.partial(driving, demo, pid), timeout=30)
        if not demo.state.exists():
            break  # completed before this kill
        _wait_moment(rng.uniform(0.0, 1.2))
        os.kill(pid, signal.SIGKILL)
        kills += 1
        if pid == first.pid:
            first.wait(10)
        wait_for(functools.partial(gone, pid), timeout=10)
        wait_for(lambda: not processes_in(root), timeout=15)  # no agent, no child survives
        assert torn_lines(demo) <= kills
        state = StateStore(demo).read()
        if state is None:
            break
        assert state.iteration >= iteration, "the iteration went back"
        iteration = state.iteration
        resumed = run_loopdeck("-C", str(root), "resume", "--yes")
        assert resumed.returncode == 0, resumed.stderr
        found = re.search(r"runner restarted in the background \(pid (\d+)\)", resumed.stdout)
        assert found is not None, resumed.stdout
        pid = int(found.group(1))
    assert kills >= KILLS // 2, "the loop finished before most kills: make the agent slower"
    wait_for(lambda: completed(demo), timeout=120)  # completed and archived
    folder = latest(demo)
    assert folder is not None
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["outcome"] == "completed"
    assert summary["iterations"] >= iteration
    todo = (root / "TODO.md").read_text()
    assert "- [ ]" not in todo and todo.count("- [x]") == TASKS
    done = (root / ".demo" / "demo-done.log").read_text().split()
    # No task done twice (a kill between the tick and this log line may leave a task unlisted).
    assert len(done) == len(set(done)) and len(done) >= TASKS - kills, done
    wait_for(lambda: not processes_in(root), timeout=15)
    assert torn_lines(demo) <= kills


def _wait_moment(seconds: float) -> None:
    """Let the runner work for `seconds` (the random moment of the kill)."""
    import time

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(min(0.02, max(0.0, end - time.monotonic())))


def test_a_runner_killed_mid_turn_leaves_no_agent_nor_child(demo: Workspace) -> None:
    root = demo.root.resolve()
    runner = start_runner(demo, *run_args(agent_cmd=agent("--spawn-child", "--hang")))
    pids = Path(root / ".demo" / "hung-agent.pids")
    # The agent creates the file, then writes both pids: wait for the line, not the file.
    wait_for(lambda: pids.exists() and len(pids.read_text().split()) == 2, timeout=30)
    agent_pid, child_pid = (int(p) for p in pids.read_text().split())
    os.kill(runner.pid, signal.SIGKILL)
    runner.wait(10)
    wait_for(lambda: gone(agent_pid) and gone(child_pid), timeout=15)
    wait_for(lambda: not processes_in(root), timeout=15)


# --- what leaves the process group ----------------------------------------------------------

LEAVING_AGENT = """\
import os, subprocess, sys, time
from pathlib import Path
from typing import Any

sys.stdin.read()
pids = Path(sys.argv[1])
turns = pids.with_suffix(".turns")
turn = len(turns.read_text().split()) + 1 if turns.exists() else 1
with turns.open("a") as f:
    f.write(f"{turn}\\n")
quiet = {"stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
# `setsid sleep 300 &`: a session (and process group) of its own.
setsid = subprocess.Popen(["sleep", "300"], start_new_session=True, **quiet)
# A daemon: fork, setsid, fork again; the middle one exits, the daemon is nobody's child.
read_end, write_end = os.pipe()
middle = os.fork()
if middle == 0:
    os.setsid()
    daemon = os.fork()
    if daemon == 0:
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.execvp("sleep", ["sleep", "301"])
    os.write(write_end, str(daemon).encode())
    os._exit(0)
os.close(write_end)
os.waitpid(middle, 0)
daemon = int(os.read(read_end, 64))
task = os.environ.get("LOOPDECK_TASK")  # a parallel worker's task
key = f"task{task}" if task else str(turn)
with pids.open("a") as f:
    f.write(f"{key} {setsid.pid} {daemon}\\n")
if key in sys.argv[2:]:
    time.sleep(600)  # hangs: a timeout or the runner's end must take it down
print(f"{key} done")
"""


def leaving_agent(root: Path, *hang_at: int | str) -> tuple[str, Path]:
    """An agent that leaves a `setsid` child and a double-forked daemon behind every turn (and
    hangs at the turns, or `taskN` parallel tasks, named); its pids, a line per turn, go to the
    file returned."""
    script = root / ".claude" / "leaving_agent.py"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(LEAVING_AGENT)
    pids = root / ".claude" / "left.pids"
    return " ".join([sys.executable, str(script), str(pids), *map(str, hang_at)]), pids


def left_by(pids: Path, turn: int | str) -> list[int]:
    """The processes the agent left behind in `turn` (empty until it has written them)."""
    if not pids.exists():
        return []
    for line in pids.read_text().splitlines():
        words = line.split()
        if len(words) == 3 and words[0] == str(turn):
            return [int(w) for w in words[1:]]
    return []


def marked_processes(root: Path) -> list[int]:
    """This test's processes (by working folder) that carry a run's marker."""
    from loop.processes.sweep import _marks

    return [pid for pid in processes_in(root) if _marks(pid)]


def test_setsid_children_and_daemons_die_at_the_end_of_a_finished_turn_and_with_a_killed_runner(
    demo: Workspace,
) -> None:
    root = demo.root.resolve()
    command, pids = leaving_agent(root, 2)
    runner = start_runner(demo, *run_args(agent_cmd=command))
    try:
        wait_for(lambda: len(left_by(pids, 2)) == 2, timeout=30)  # turn 1 ended, turn 2 hangs
        first = left_by(pids, 1)
        assert len(first) == 2
        wait_for(lambda: all(gone(pid) for pid in first), timeout=10)
        assert runner.poll() is None, "swept at the end of the turn, not by the runner's end"
        second = left_by(pids, 2)
        assert not any(gone(pid) for pid in second)
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait(10)
        wait_for(lambda: all(gone(pid) for pid in second), timeout=15)
        wait_for(lambda: not marked_processes(root), timeout=15)
        wait_for(lambda: not processes_in(root), timeout=15)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()


def test_setsid_children_and_daemons_die_with_a_timed_out_turn(demo: Workspace) -> None:
    root = demo.root.resolve()
    command, pids = leaving_agent(root, 1, 2, 3)
    runner = start_runner(demo, *run_args("--iteration-timeout", "2", "--retries", "0", agent_cmd=command))
    try:
        wait_for(lambda: "agent-failed" in kinds(demo), timeout=30)  # turn 1 timed out
        first = left_by(pids, 1)
        assert len(first) == 2
        wait_for(lambda: all(gone(pid) for pid in first), timeout=10)
        assert runner.poll() is None, "swept at the end of the turn, not by the runner's end"
        out, _ = runner.communicate(timeout=60)  # three timeouts escalate (headless: it ends)
        assert runner.returncode == 1, out
        wait_for(lambda: not marked_processes(root), timeout=15)
        wait_for(lambda: not processes_in(root), timeout=15)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()


def test_parallel_workers_leave_no_setsid_child_nor_daemon(demo: Workspace) -> None:
    from loop.demo import graph as demo_graph

    root = demo.root.resolve()
    graph = demo_graph.create(root / "graph", (("1", "One", (), ("a.py",)), ("2", "Two", (), ("b.py",))))
    command, pids = leaving_agent(root, "task2")
    args = ["run", "Build it", "--workers", "2", "--graph", str(graph), "--agent", command, "--headless"]
    runner = start_runner(demo, *args)
    try:
        wait_for(lambda: len(left_by(pids, "task1")) == 2 and len(left_by(pids, "task2")) == 2, timeout=30)
        first = left_by(pids, "task1")  # its worker ended (exit 0 approves): its turn is over
        wait_for(lambda: all(gone(pid) for pid in first), timeout=15)
        assert runner.poll() is None, "swept at the end of the worker's turn, not by the runner's end"
        second = left_by(pids, "task2")
        assert not any(gone(pid) for pid in second)
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait(10)
        wait_for(lambda: all(gone(pid) for pid in second), timeout=15)
        wait_for(lambda: not marked_processes(root), timeout=15)
        wait_for(lambda: not processes_in(root), timeout=15)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()


def test_a_verification_command_leaves_no_setsid_child_nor_daemon(demo: Workspace) -> None:
    root = demo.root.resolve()
    command, pids = leaving_agent(root)
    checks = ["--verify", command, "--verify-allow", command]
    runner = start_runner(demo, *run_args(*checks, agent_cmd=agent("--sleep", "2", "2")))
    try:
        wait_for(lambda: len(left_by(pids, 1)) == 2, timeout=30)
        first = left_by(pids, 1)
        wait_for(lambda: all(gone(pid) for pid in first), timeout=10)
        assert runner.poll() is None, "swept after the check, not by the runner's end"
        runner.send_signal(signal.SIGTERM)
        runner.communicate(timeout=30)
        wait_for(lambda: not marked_processes(root), timeout=15)
        wait_for(lambda: not processes_in(root), timeout=15)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()


# --- the sweep's parts ------------------------------------------------------------------------


def test_markers_nest_and_match_their_own_run_only() -> None:
    from loop.processes import sweep

    assert sweep.marked_env({"A": "1"}, "r1.1") == {"A": "1", sweep.MARK: "r1.1"}
    nested = sweep.marked_env({sweep.MARK: "outer.3"}, "r1.2")[sweep.MARK]
    assert nested == "outer.3:r1.2"
    parts = nested.split(":")
    assert sweep.of_run("outer")(parts) and sweep.of_run("r1")(parts) and sweep.of_token("r1.2")(parts)
    assert not sweep.of_run("r")(["r1.2"]) and not sweep.of_run("r1")(["r10.2", "", "r1"])
    assert not sweep.of_token("r1.1")(["r1.10"])


SLEEPER = [sys.executable, "-c", "import time; time.sleep(300)"]


def test_a_sweep_kills_its_runs_processes_and_no_others() -> None:
    import subprocess

    from loop.processes import sweep

    mine = subprocess.Popen(SLEEPER, env=sweep.marked_env(dict(os.environ), "run-a.1"))
    other = subprocess.Popen(SLEEPER, env=sweep.marked_env(dict(os.environ), "run-b.1"))
    plain = subprocess.Popen(SLEEPER, env={k: v for k, v in os.environ.items() if k != sweep.MARK})
    try:
        wait_for(lambda: sweep._marks(mine.pid) == ["run-a.1"], timeout=10)  # exec'd with its marker
        killed = sweep.kill(sweep.of_run("run-a"))
        assert killed == {mine.pid}
        assert gone(mine.pid)  # dead, and reaped by the sweep (it was this process's child)
        assert other.poll() is None and plain.poll() is None
    finally:
        for proc in (mine, other, plain):
            proc.kill()
            proc.wait()


DAEMON_WITHOUT_ENV = """\
import os, sys
middle = os.fork()
if middle == 0:
    os.setsid()
    if os.fork() == 0:
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.execve(sys.executable, [sys.executable, "-c", "import time; time.sleep(300)"], {})
    os._exit(0)
os.waitpid(middle, 0)
"""


def _cmdline(process: Any) -> str:
    """A child's command line; empty for one that is gone or a zombie (another test's child,
    killed and not yet reaped, may be among this process's children)."""
    import psutil

    try:
        return " ".join(process.cmdline())
    except psutil.Error:
        return ""


def test_a_daemon_that_clears_its_environment_is_found_as_an_orphan_of_the_subreaper() -> None:
    import subprocess

    import psutil
    import pytest

    from loop.processes import sweep
    from loop.processes.supervisor import Supervisor

    if sweep.subreaper(False) is None:
        pytest.skip("no child subreaper on this system")
    supervisor = Supervisor()
    try:
        env = supervisor.env()
        subprocess.run([sys.executable, "-c", DAEMON_WITHOUT_ENV], env=env, check=True, timeout=30)
        orphans = [p for p in psutil.Process().children() if p.pid != supervisor.proc.pid]
        daemons = [p for p in orphans if "time.sleep(300)" in _cmdline(p)]
        assert len(daemons) == 1 and sweep._marks(daemons[0].pid) == []  # no marker: an orphan of ours
        supervisor.release()
        assert gone(daemons[0].pid)
    finally:
        supervisor.close()
    assert sweep.subreaper(False) is False  # this process is no subreaper again


SETSID_CHILD = """\
import os, subprocess, sys
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
"""


def test_a_turns_end_looks_only_below_the_subreaper(monkeypatch: pytest.MonkeyPatch) -> None:
    """A subreaper's children keep everything they start below it, so the end of a turn looks
    for its marked processes there, not in every process of the machine (hundreds of
    `/proc/*/environ` reads a turn), and lists children without psutil's whole-machine scan."""
    import subprocess

    import psutil

    from loop.processes import sweep
    from loop.processes.supervisor import Supervisor

    if sweep.subreaper(False) is None or not os.path.exists("/proc/self/task"):
        pytest.skip("no child subreaper (or no /proc) on this system")
    supervisor = Supervisor()
    try:
        env = supervisor.env()
        subprocess.run([sys.executable, "-c", SETSID_CHILD], env=env, check=True, timeout=30)
        left = [  # the orphan it left (other tests' children may be here too: not ours to count)
            p.pid
            for p in psutil.Process().children()
            if p.pid != supervisor.proc.pid and "time.sleep(300)" in _cmdline(p)
        ]
        assert len(left) == 1 and sweep.children(os.getpid()) >= {left[0], supervisor.proc.pid}

        def whole_machine() -> list[int]:
            raise AssertionError("the whole machine was scanned")

        monkeypatch.setattr(sweep, "_own_pids", whole_machine)
        monkeypatch.setattr(psutil.Process, "children", lambda self, recursive=False: whole_machine())
        supervisor.release()
        assert gone(left[0])
    finally:
        monkeypatch.undo()
        supervisor.close()
