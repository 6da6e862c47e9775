"""The merge train on real git and worktrees: a batch of approved branches merged in a scratch
worktree, verified once, bisected on red; the loop's branch moves only to a tree that passed,
and a branch that fails only beside another task's work is told which one, then a person."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loop.core import scheduler, workflow
from loop.core.board import QUEUED, WORKTREE, Board, Task, Worker, keep, worker_prompt
from loop.core.model import LoopState
from loop.drivers.train import Checked, Halted, Lanes, Outcome, Train, Tried, Verify, blame, first_failing
from loop.repo import worktrees

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
LOOP = "20261128T120000"

CHECK = '''"""Each task's file: no BROKEN line, and no task whose file says it clashes with another
that is also there."""
import pathlib, sys

bad = []
for p in sorted(pathlib.Path("work").glob("*.txt")):
    for line in p.read_text().splitlines():
        if "BROKEN" in line:
            bad.append(p.name)
        if line.startswith("clashes with ") and pathlib.Path("work", line.split()[-1] + ".txt").exists():
            bad.append(p.name + " beside " + line.split()[-1])
if bad:
    print("FAILED:", ", ".join(bad))
    sys.exit(1)
print("ok")
'''


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for key in ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"):
        monkeypatch.setenv(key, "t")
    for key in ("GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"):
        monkeypatch.setenv(key, "t@example.invalid")
    root = tmp_path / "repo"
    (root / "work").mkdir(parents=True)
    (root / "check.py").write_text(CHECK)
    (root / "work" / "base.txt").write_text("base\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "start")
    return root


def task_branch(root: Path, task: str, text: str) -> Worker:
    """A task's worktree and branch with its work committed, as a worker leaves it."""
    wt = worktrees.ensure(root, LOOP, task, "main")
    (wt.path / "work" / f"{task}.txt").write_text(text)
    worktrees.commit_all(wt, f"task {task}")
    return Worker(f"worker-{task}", task, (f"work/{task}.txt",), "", status=QUEUED, branch=wt.branch)


def check(where: Path, unless: object = None) -> tuple[str | None, Mapping[str, Any] | None]:
    done = subprocess.run([sys.executable, "check.py"], cwd=where, capture_output=True, text=True)
    return (None if done.returncode == 0 else done.stdout.strip()), None


def assert_green_at_every_commit(root: Path) -> None:
    """Every commit on the loop's branch (its first-parent line) passes the check."""
    probe = root.parent / "probe"
    git(root, "worktree", "add", "-q", "--detach", str(probe), "main")
    try:
        for sha in git(root, "rev-list", "--first-parent", "main").split():
            git(probe, "checkout", "-q", "--detach", sha)
            assert check(probe)[0] is None, f"the loop's branch held a red commit {sha}"
    finally:
        git(root, "worktree", "remove", "--force", str(probe))


class Ran:
    """The train run as the driver runs it: the batch, again on what stays queued (a red batch
    keeps the branches that pass alone) until nothing moves, then the blame of each branch that
    failed by itself (the driver runs those beside the next batches)."""

    def __init__(self, root: Path, checks: int = 1, verify: Verify = check, ready: Any = None) -> None:
        self.root = root
        self.verify = verify
        self.lanes = Lanes(root, LOOP, checks, ready)
        self.moves: list[list[str]] = []
        self.failed: list[tuple[Outcome, str]] = []
        self.told_after: list[int] = []
        """How many moves the loop's branch had made when each failing branch was handed on."""
        self.passed_alone: dict[str, str] = {}
        self.checked = Checked()
        self.train = self.new_train()
        self.runs = 0

    def new_train(self) -> Train:
        return Train(
            self.root, self.verify, self.land, self.lanes, self.fails, self.passed_alone, self.checked
        )

    def land(self, tried: Tried) -> bool:
        """What the driver does with a green tree (when its branches are still queued)."""
        worktrees.fast_forward(self.root, tried.tip)
        self.moves.append([o.worker.task for o in tried.merged])
        return True

    def fails(self, outcome: Outcome, base: str) -> None:
        self.failed.append((outcome, base))
        self.told_after.append(len(self.moves))

    def run(self, batch: list[Worker]) -> list[Outcome]:
        outcomes: list[Outcome] = []
        queued = list(batch)
        while queued:
            self.train = self.new_train()
            outcomes += self.train.run(queued)
            self.runs += 1
            done = {o.worker.name for o in outcomes} | {f.worker.name for f, _base in self.failed}
            left = [w for w in queued if w.name not in done]
            if len(left) == len(queued):
                break
            queued = left
        return outcomes + [
            f if f.beside else blame(self.root, self.lanes, self.verify, f, base, self.passed_alone)
            for f, base in self.failed
        ]

    @property
    def verifications(self) -> int:
        return self.lanes.checks


def train(root: Path, checks: int = 1) -> tuple[Ran, list[list[str]]]:
    ran = Ran(root, checks)
    return ran, ran.moves


def by_task(outcomes: list[Outcome]) -> dict[str, Outcome]:
    return {o.worker.task: o for o in outcomes}


def test_a_green_batch_lands_in_one_verification(repo: Path) -> None:
    batch = [task_branch(repo, t, f"task {t}\n") for t in ("1", "2", "3")]
    ran, moves = train(repo)
    outcomes = by_task(ran.run(batch))
    assert ran.verifications == 1
    assert moves == [["1", "2", "3"]]  # one move of the loop's branch, all three on it
    assert all(outcomes[t].sha for t in ("1", "2", "3"))
    assert all(worktrees.merged(repo, w.branch or "") for w in batch)
    assert git(repo, "rev-parse", "main").strip() == outcomes["3"].sha
    assert_green_at_every_commit(repo)


def test_a_red_batch_lands_the_rest_and_sends_the_breaker_back(repo: Path) -> None:
    batch = [
        task_branch(repo, "1", "task 1\n"),
        task_branch(repo, "2", "task 2 BROKEN\n"),
        task_branch(repo, "3", "task 3\n"),
    ]
    ran, moves = train(repo)
    outcomes = by_task(ran.run(batch))
    assert sorted(t for m in moves for t in m) == ["1", "3"]
    assert outcomes["2"].sha is None and "BROKEN" not in git(repo, "show", "main:work/1.txt")
    assert "FAILED: 2.txt" in (outcomes["2"].failure or "") and outcomes["2"].beside is None
    assert not worktrees.merged(repo, batch[1].branch or "")
    assert_green_at_every_commit(repo)


def test_a_branch_queued_behind_the_batch_that_fails_alone_is_known_while_the_batch_lands(
    repo: Path,
) -> None:
    """The lanes the batch leaves free check the branches queued behind it alone: one that
    fails goes on at once, a batch sooner, and one that passes is known to."""
    batch = [task_branch(repo, t, f"task {t}\n") for t in ("1", "2")]
    behind = [task_branch(repo, "3", "task 3 BROKEN\n"), task_branch(repo, "4", "task 4\n")]
    base = worktrees.head(repo)
    ran = Ran(repo, checks=5)  # the batch, its two branches and the two behind it
    outcomes = by_task(ran.train.run(batch, behind))
    assert ran.moves == [["1", "2"]] and set(outcomes) == {"1", "2"}
    assert [(f.worker.task, at) for f, at in ran.failed] == [("3", base)]
    assert ran.failed[0][0].failure == "FAILED: 3.txt"
    assert ran.passed_alone[worktrees.head(repo, behind[1].branch or "")] == base
    assert_green_at_every_commit(repo)


def test_the_queue_behind_the_batch_is_checked_only_when_batches_are_on() -> None:
    workers = [Worker(f"worker-{t}", t, (), "", status=QUEUED, branch=f"b{t}") for t in "1234"]
    assert [w.task for w in scheduler.behind_batch(board_state(*workers, batch=2))] == ["3", "4"]
    held = scheduler.behind_batch(board_state(*workers, batch=2), held={"worker-3"})
    assert [w.task for w in held] == ["4"]
    assert scheduler.behind_batch(board_state(*workers, batch=1)) == []  # one at a time stays so
    assert scheduler.behind_batch(board_state(*workers)) == []  # all in the batch
    # the batch checked on top of the one under way (its branches held)
    under_way = {"worker-1", "worker-2"}
    assert [w.task for w in scheduler.following_batch(board_state(*workers, batch=2), under_way)] == [
        "3",
        "4",
    ]
    assert scheduler.following_batch(board_state(*workers, batch=1), under_way) == []


def test_the_batch_checked_on_top_of_the_one_under_way_lands_without_a_check_of_its_own(
    repo: Path,
) -> None:
    """While task 1's batch is checked, task 2 is checked on top of it; task 1 lands, and the
    next batch, task 2 on the new tip, is the same tree: it lands on that check."""
    first, second = task_branch(repo, "1", "task 1\n"), task_branch(repo, "2", "task 2\n")
    checking, go_on = threading.Event(), threading.Event()
    trees: list[int] = []

    def held(where: Path, unless: object = None) -> tuple[str | None, Mapping[str, Any] | None]:
        trees.append(len(list((where / "work").glob("*.txt"))))
        if trees[-1] == 2:  # base and task 1: the batch under way
            checking.set()
            go_on.wait(30)
        return check(where)

    ran = Ran(repo, checks=3, verify=held)
    under_way = threading.Thread(target=ran.train.run, args=([first],))
    under_way.start()
    assert checking.wait(30) and ran.train.ahead is not None
    ahead = ran.lanes.start([ran.train.tried_on(ran.train.ahead, [second], threading.Event())])[0]
    assert ahead.result(30).green  # base, task 1 and task 2
    go_on.set()
    under_way.join(30)
    assert not under_way.is_alive()
    ran.train = ran.new_train()
    outcomes = by_task(ran.train.run([second]))
    assert ran.moves == [["1"], ["2"]] and outcomes["2"].sha
    assert trees == [2, 3]  # the batch, and task 2 on top of it: never checked again
    assert_green_at_every_commit(repo)


def test_a_batch_whose_tree_another_lane_checks_gives_its_lane_to_a_branch_behind_it(repo: Path) -> None:
    """Task 2 is checked on top of the loop's branch in one lane. The batch of task 2 is the
    same tree: it waits for that check with no lane of its own, and the lane it had checks a
    branch queued behind it alone (task 4, for which no lane was left)."""
    second = task_branch(repo, "2", "task 2\n")
    behind = [task_branch(repo, "3", "task 3\n"), task_branch(repo, "4", "task 4\n")]
    base = worktrees.head(repo)
    go_on, fourth = threading.Event(), threading.Event()
    trees: list[list[str]] = []

    def held(where: Path, unless: object = None) -> tuple[str | None, Mapping[str, Any] | None]:
        trees.append(sorted(p.stem for p in (where / "work").glob("*.txt")))
        if "2" in trees[-1]:
            go_on.wait(30)
        if "4" in trees[-1]:
            fourth.set()
        return check(where)

    ran = Ran(repo, checks=3, verify=held)
    ahead = ran.lanes.start([ran.train.tried_on(base, [second], threading.Event())])[0]
    with ThreadPoolExecutor(1) as pool:
        landing = pool.submit(ran.train.run, [second], behind)
        assert fourth.wait(30)  # checked while task 2's tree is still under way
        go_on.set()
        outcomes = by_task(landing.result(30))
    assert ahead.result(30).green and outcomes["2"].sha and ran.moves == [["2"]]
    assert sorted(trees) == [["2", "base"], ["3", "base"], ["4", "base"]]  # task 2's tree once
    assert ran.passed_alone[worktrees.head(repo, behind[1].branch or "")] == base
    assert_green_at_every_commit(repo)


def test_a_batch_member_checked_alone_in_the_lane_the_batch_gave_up_is_heard(repo: Path) -> None:
    """The batch of tasks 2 and 3 waits for its tree's check in another lane; task 3, checked
    alone in the batch's lane, fails: the red batch goes back with task 3 known to fail alone,
    and task 2 waits for the next batch, as when every branch had a lane from the start."""
    batch = [task_branch(repo, "2", "task 2\n"), task_branch(repo, "3", "task 3 BROKEN\n")]
    go_on, third = threading.Event(), threading.Event()

    def held(where: Path, unless: object = None) -> tuple[str | None, Mapping[str, Any] | None]:
        names = {p.stem for p in (where / "work").glob("*.txt")}
        if {"2", "3"} <= names:
            go_on.wait(30)
        found = check(where)
        if names == {"3", "base"}:
            third.set()
        return found

    ran = Ran(repo, checks=3, verify=held)
    ahead = ran.lanes.start([ran.train.tried_on(worktrees.head(repo), batch, threading.Event())])[0]
    with ThreadPoolExecutor(1) as pool:
        landing = pool.submit(ran.train.run, batch)
        assert third.wait(30)
        go_on.set()
        assert landing.result(30) == []
    assert ahead.result(30).red and ran.moves == []
    assert [(f.worker.task, f.failure) for f, _at in ran.failed] == [("3", "FAILED: 3.txt")]


def test_a_tree_is_checked_once_unless_it_was_red_or_its_check_was_called_off() -> None:
    checked = Checked()
    runs: list[str] = []

    def green() -> tuple[str | None, Mapping[str, Any] | None]:
        runs.append("green")
        return None, None

    def red() -> tuple[str | None, Mapping[str, Any] | None]:
        runs.append("red")
        return "FAILED", None

    assert checked.result("a", green) == (None, None) and checked.result("a", red) == (None, None)
    assert checked.result("b", red) == ("FAILED", None) and checked.result("b", green) == (None, None)
    assert runs == ["green", "red", "green"]  # a red tree may have been flaky: checked again
    mine, first = checked.claim("d")
    theirs, second = checked.claim("d")  # claimed in one step: one job checks it, the other waits
    assert first and not second and theirs is mine and not mine.done()
    assert checked.settle("d", mine, green) == (None, None) and theirs.result(0) == (None, None)

    started, called_off = threading.Event(), threading.Event()

    def halted() -> tuple[str | None, Mapping[str, Any] | None]:
        started.set()
        called_off.wait(30)
        raise Halted

    with ThreadPoolExecutor(2) as pool:
        owner = pool.submit(checked.result, "c", halted)
        assert started.wait(30)
        waiter = pool.submit(checked.result, "c", green)  # waits for the one under way
        called_off.set()
        with pytest.raises(Halted):
            owner.result(30)
        assert waiter.result(30) == (None, None) and runs[-1] == "green"  # then checked itself


def test_branches_that_break_only_together_name_each_other(repo: Path) -> None:
    """Each passes alone; together the second fails: it is told the first's task."""
    batch = [
        task_branch(repo, "1", "task 1\n"),
        task_branch(repo, "2", "task 2\nclashes with 1\n"),
        task_branch(repo, "3", "task 3\n"),
    ]
    later = task_branch(repo, "4", "task 4\nclashes with 3\n")  # begun now, queued after
    ran, _moves = train(repo)
    outcomes = by_task(ran.run(batch))
    assert outcomes["1"].sha and outcomes["3"].sha and outcomes["2"].sha is None
    assert outcomes["2"].beside == "1"
    assert_green_at_every_commit(repo)

    # the task it fails beside landed in an earlier train: still named
    begun_after = task_branch(repo, "5", "task 5\nclashes with 1\n")  # begun with task 1 landed
    ran, _moves = train(repo)
    outcomes = by_task(ran.run([later, begun_after]))
    assert outcomes["4"].beside == "3" and outcomes["5"].beside == "1"
    assert_green_at_every_commit(repo)


def board_state(*workers: Worker, batch: int = 8) -> LoopState:
    state = LoopState.new("Build it", started_at="2026-11-28T12:00:00+00:00")
    state.status = "running"
    queue = tuple(w.name for w in workers)
    return keep(
        state, Board(isolation=WORKTREE, loop_branch="main", workers=workers, queue=queue, batch=batch)
    )


def test_a_collision_is_named_in_the_next_prompt_and_the_second_escalates_naming_both() -> None:
    worker = Worker("worker-2", "2", ("work/2.txt",), "", status=QUEUED, branch="loopdeck/x/2")
    step = workflow.merge_ended(
        board_state(worker), "worker-2", sha=None, failure="FAILED: 2.txt beside 1", beside="1", now=NOW
    )
    again = scheduler.board_of(step.seal()).worker("worker-2")
    assert again is not None and again.status == scheduler.READY and step.state.status == "running"
    prompt = worker_prompt("Build it", Task("2", "Two"), again)
    assert "BESIDE TASK 1" in prompt and "FAILED: 2.txt beside 1" in prompt

    requeued = board_state(replace(again, status=QUEUED))  # its next turn approved, queued again
    second = workflow.merge_ended(requeued, "worker-2", sha=None, failure="FAILED again", beside="1", now=NOW)
    assert second.state.status == "paused"
    reason = str((second.state.waiting_for or {}).get("reason"))
    assert "task 2" in reason and "task 1" in reason
    assert [e[1]["kind"] for e in second.events if e[0] == "escalation"] == ["merge-collision"]


def test_a_flaky_check_queues_the_branch_again_once_then_it_goes_back() -> None:
    """The checks failed on a branch's merged tree, then passed on the same tree: no task is to
    blame, so the branch stays queued (and the journal says why); the next time it goes back
    to its worker with the failure, told the checks may be flaky."""
    worker = Worker("worker-2", "2", ("work/2.txt",), "", status=QUEUED, branch="loopdeck/x/2")
    step = workflow.merge_ended(
        board_state(worker), "worker-2", sha=None, failure="FAILED: t", flaky=True, now=NOW
    )
    again = scheduler.board_of(step.seal()).worker("worker-2")
    assert again is not None and again.status == QUEUED and again.flaky == 1 and again.feedback is None
    assert [e[0] for e in step.events] == ["merge-flaky"]
    assert [w.name for w in scheduler.next_batch(step.state)] == ["worker-2"]

    second = workflow.merge_ended(step.state, "worker-2", sha=None, failure="FAILED: t", flaky=True, now=NOW)
    back = scheduler.board_of(second.seal()).worker("worker-2")
    assert back is not None and back.status == scheduler.READY
    assert "FAILED: t" in (back.feedback or "") and "flaky" in (back.feedback or "")


def test_a_check_that_fails_once_then_passes_on_the_same_tree_blames_no_task(repo: Path) -> None:
    """A branch's merged tree fails the checks once, then passes them: the blame checks that
    tree again first, so the landing before it is not named."""
    ran, _ = train(repo)
    ran.run([task_branch(repo, "1", "task 1\n")])
    calls: list[Path] = []

    def once(where: Path, unless: object = None) -> tuple[str | None, Mapping[str, Any] | None]:
        calls.append(where)
        return ("FAILED: a flaky test", None) if len(calls) == 1 else check(where)

    flaky = Ran(repo, checks=4, verify=once)
    outcomes = by_task(flaky.run([task_branch(repo, "2", "task 2\n")]))
    assert flaky.moves == [] and outcomes["2"].flaky and outcomes["2"].beside is None


def test_a_red_pair_that_passes_every_way_it_is_split_is_no_collision(repo: Path) -> None:
    """A batch of two fails once, then each passes alone: nothing repeated the red, so no pair
    is named; the blame checks the tree again and finds the checks flaky."""
    calls: list[Path] = []

    def once(where: Path, unless: object = None) -> tuple[str | None, Mapping[str, Any] | None]:
        both = len(list((where / "work").glob("*.txt"))) == 3  # base, 1 and 2: the batch
        if both and not calls:
            calls.append(where)
            return "FAILED: a flaky test", None
        return check(where)

    ran = Ran(repo, checks=4, verify=once)
    outcomes = by_task(ran.run([task_branch(repo, "1", "task 1\n"), task_branch(repo, "2", "task 2\n")]))
    assert ran.moves == [["1"]]
    assert outcomes["2"].beside is None and outcomes["2"].flaky


def test_a_flaky_branch_a_person_let_go_meanwhile_is_not_queued_again() -> None:
    worker = Worker("worker-2", "2", ("work/2.txt",), "", status=QUEUED, branch="loopdeck/x/2")
    state = keep(board_state(worker), replace(scheduler.board_of(board_state(worker)), queue=()))
    step = workflow.merge_ended(state, "worker-2", sha=None, failure="FAILED: t", flaky=True, now=NOW)
    assert "merge-flaky" not in [e[0] for e in step.events]


def test_a_batch_of_one_is_one_at_a_time() -> None:
    """The queue gives the train its first `batch` branches: 1 keeps one-at-a-time landings."""
    workers = [Worker(f"worker-{t}", t, (), "", status=QUEUED, branch=f"b{t}") for t in "123"]
    state = board_state(*workers)
    assert [w.task for w in scheduler.next_batch(state)] == ["1", "2", "3"]
    one = board_state(*workers, batch=1)
    assert [w.task for w in scheduler.next_batch(one)] == ["1"]
    # a branch still being looked into stays queued but out of the batches; the next takes its place
    assert [w.task for w in scheduler.next_batch(one, held={"worker-1"})] == ["2"]
    two = board_state(*workers, batch=2)
    assert [w.task for w in scheduler.next_batch(two, held={"worker-2"})] == ["1", "3"]


def test_run_with_workers_names_the_task_a_branch_collides_with_then_asks_a_person(tmp_path: Path) -> None:
    """`run --workers` end to end: task 2 passes alone but fails beside task 1 (landed); it is
    told so, fails again the same way, and the loop asks a person naming both tasks."""
    from bench import merge_train as bench
    from loop.store.journal import Journal
    from loop.store.paths import Workspace

    root = bench.project(tmp_path, 2, 0.0)
    agent = [sys.executable, bench.__file__, "worker", "--turn", "0", "0.1", "--clash", "2:1", "--deaf"]
    check_cmd = f"{sys.executable} check.py"
    env = {**bench.IDENTITY, "CLAUDE_CONFIG_DIR": str(tmp_path / "claude")}
    argv = [sys.executable, "-m", "loop.cli", "-C", str(root), "run", "Build", "--workers", "2"]
    argv += ["--graph", str(root / "graph"), "--agent", " ".join(agent), "--headless", "--merge-batch", "8"]
    argv += ["--verify", check_cmd, "--verify-allow", check_cmd]
    done = subprocess.run(
        argv, cwd=root, env={**os.environ, **env}, capture_output=True, text=True, timeout=120
    )
    evs = Journal(Workspace(root).journal).read_from(0).events
    assert [e.data["task"] for e in evs if e.kind == "task-merged"] == ["1"], done.stdout + done.stderr
    assert [e.data.get("beside") for e in evs if e.kind == "merge-rejected"] == ["1", "1"]
    escalations = [e.data for e in evs if e.kind == "escalation"]
    assert [e["kind"] for e in escalations] == ["merge-collision"]
    assert "task 2" in escalations[0]["reason"] and "task 1" in escalations[0]["reason"]
    told = next(root.rglob("worker-2.02.stdin")).read_text()  # the second turn's prompt
    assert "BESIDE TASK 1" in told
    assert_green_at_every_commit(root)


def branch_with(root: Path, task: str, files: Mapping[str, bytes]) -> Worker:
    """A task's branch whose commit writes `files` (relative path → bytes)."""
    wt = worktrees.ensure(root, LOOP, task, "main")
    for name, data in files.items():
        (wt.path / name).parent.mkdir(parents=True, exist_ok=True)
        (wt.path / name).write_bytes(data)
    worktrees.commit_all(wt, f"task {task}")
    return Worker(f"worker-{task}", task, tuple(files), "", status=QUEUED, branch=wt.branch)


def test_the_trains_checks_see_the_files_and_setup_a_workers_worktree_gets(repo: Path) -> None:
    """Checks ran in the workspace (with its `.env`) before the train: the scratch worktree is
    made ready the same way, once."""
    from types import SimpleNamespace

    from loop.drivers.children import Children, Signals
    from loop.drivers.worktree_setup import Ready, from_values

    (repo / ".env").write_text("SECRET=s3cret\n")
    setup = from_values({"worktree_copy": [".env"]}, 2, repo, lambda key: key)
    options = SimpleNamespace(iteration_timeout=30.0, verify_timeout=30.0)
    session = SimpleNamespace(ws=SimpleNamespace(root=repo), options=options)
    turns = SimpleNamespace(sandbox_for=lambda where, beside: None)
    ready = Ready(setup, session, turns, Children(), Signals())  # type: ignore[arg-type]
    prepared: list[Path] = []

    def needs_env(where: Path, unless: object = None) -> tuple[str | None, Mapping[str, Any] | None]:
        env = where / ".env"
        return (None if env.exists() and "s3cret" in env.read_text() else "no .env"), None

    def scratch(where: Path) -> None:
        prepared.append(where)
        ready.scratch(where)

    for task in ("1", "2"):
        worker = task_branch(repo, task, f"task {task}\n")
        ran = Ran(repo, verify=needs_env, ready=scratch)
        assert [o.sha is not None for o in ran.run([worker])] == [True], ran.train.outcomes
    assert len(prepared) == 2 and prepared[0] == prepared[1]  # the same scratch worktree, kept
    mark = Path(git(prepared[0], "rev-parse", "--absolute-git-dir").strip()) / "loopdeck-worktree-setup.json"
    assert mark.exists()  # ran once: the second train found it ready


def test_a_file_in_another_encoding_goes_through_the_blame_without_a_crash(repo: Path) -> None:
    """A branch red by itself is tried without the last landings (its diff applied elsewhere):
    a latin-1 file in it is bytes from git to git, never text."""
    for n in (1, 2):  # landings before the branch, so its blame has somewhere to go
        (repo / "work" / f"old{n}.txt").write_text(f"old {n}\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", f"loopdeck: merge task old{n} (x)")
    latin = "caf\xe9 cr\xe8me\n".encode("latin-1")
    worker = branch_with(repo, "7", {"notes/7.txt": latin, "work/7.txt": b"task 7 BROKEN\n"})
    ran, moves = train(repo)
    outcomes = by_task(ran.run([worker]))
    assert moves == [] and "FAILED: 7.txt" in (outcomes["7"].failure or "")
    assert ran.verifications >= 2  # the batch, then the branch's own changes on an older tip
    assert (worktrees.scratch_path(repo, LOOP) / "notes" / "7.txt").read_bytes() == latin


def test_a_conflict_with_a_batch_mate_that_did_not_land_is_no_conflict(repo: Path) -> None:
    """Branch 2 conflicts with 1 in the batch, but 1 fails and stays out: 2 is tried again
    alone on what landed, and lands. A conflict with a batch-mate that landed stays one."""
    one = branch_with(repo, "1", {"work/base.txt": b"one\n", "work/1.txt": b"task 1 BROKEN\n"})
    two = branch_with(repo, "2", {"work/base.txt": b"two\n", "work/2.txt": b"task 2\n"})
    ran, moves = train(repo)
    outcomes = by_task(ran.run([one, two]))
    assert outcomes["1"].failure and outcomes["1"].conflict is None
    assert outcomes["2"].conflict is None and outcomes["2"].sha, outcomes["2"]
    assert moves == [["2"]] and git(repo, "show", "main:work/base.txt") == "two\n"
    assert_green_at_every_commit(repo)

    three = branch_with(repo, "3", {"work/3.txt": b"task 3\n", "work/base.txt": b"three\n"})
    four = branch_with(repo, "4", {"work/4.txt": b"task 4\n", "work/base.txt": b"four\n"})
    ran, moves = train(repo)
    outcomes = by_task(ran.run([three, four]))
    assert moves == [["3"]] and outcomes["4"].conflict is not None
    assert outcomes["4"].conflict.conflicts == ("work/base.txt",)


def test_a_red_batch_finds_its_breaker_by_checking_each_branch_alone_beside_it(repo: Path) -> None:
    """Eight branches, one broken, eight lanes: the batch's check runs beside checks of seven of
    its branches alone (they really overlap), so when it is red the breaker is handed on at
    once. The seven others stay queued and land together next, each checked alone once."""

    batch = [
        task_branch(repo, str(t), f"task {t}" + (" BROKEN" if t == 6 else "") + "\n") for t in range(1, 9)
    ]
    one_started = threading.Event()
    beside: list[bool] = []
    alone: list[str] = []

    def counted(where: Path, unless: object = None) -> tuple[str | None, Mapping[str, Any] | None]:
        tasks = sorted(p.stem for p in (where / "work").glob("*.txt") if p.stem != "base")
        if len(tasks) == 1:  # a branch alone
            alone.append(tasks[0])
            one_started.set()
        elif len(tasks) == 8 and not beside:  # the batch (the blame's checks come later)
            beside.append(one_started.wait(30))
        return check(where)

    ran = Ran(repo, checks=8, verify=counted)
    outcomes = by_task(ran.run(batch))
    assert beside == [True]
    assert ran.told_after == [0]  # handed on before anything landed: one round
    assert ran.moves == [["1", "2", "3", "4", "5", "7", "8"]] and ran.runs == 2
    assert (
        outcomes["6"].sha is None
        and outcomes["6"].beside is None
        and "6.txt" in (outcomes["6"].failure or "")
    )
    others = [t for t in alone if t != "6"]  # (the blame checks 6 alone again)
    assert len(others) == len(set(others)) and {"1", "6"} <= set(alone)  # none checked alone twice
    assert_green_at_every_commit(repo)


@pytest.mark.parametrize(("checks", "verifications"), [(4, 1 + 3 + 4), (8, 1 + 4 + 4)])
def test_two_branches_that_break_only_together_in_one_batch_land_one_and_name_it(
    repo: Path, checks: int, verifications: int
) -> None:
    """Task 3 breaks the checks only beside task 1, both in one batch: each passes alone (the
    checks beside the batch's, as many as lanes are free), so the batch without each branch is
    checked. The batch without 3 and the batch without 1 both pass and the batch without 4
    fails again, which names the pair: no blame."""
    batch = [
        task_branch(repo, "1", "task 1\n"),
        task_branch(repo, "2", "task 2\n"),
        task_branch(repo, "3", "task 3\nclashes with 1\n"),
        task_branch(repo, "4", "task 4\n"),
    ]
    ran, moves = train(repo, checks=checks)
    outcomes = by_task(ran.run(batch))
    assert moves == [["1", "2", "4"]] and outcomes["3"].beside == "1"
    assert ran.verifications == verifications
    assert_green_at_every_commit(repo)


def test_a_red_batch_with_a_breaker_and_a_pair_checks_no_tree_twice(repo: Path) -> None:
    """Task 3 fails alone (no lane was left to check it alone beside the batch) and task 2
    fails beside task 1: the batch without each branch is red every way. Each is checked
    alone, 3 goes back, and 1 and 2 together are the batch without 3, known red already: split
    at once, not checked again. 1 lands."""
    batch = [
        task_branch(repo, "1", "task 1\n"),
        task_branch(repo, "2", "task 2\nclashes with 1\n"),
        task_branch(repo, "3", "task 3 BROKEN\n"),
    ]
    trees: list[tuple[str, ...]] = []  # checked before anything landed

    def counted(where: Path, unless: object = None) -> tuple[str | None, Mapping[str, Any] | None]:
        if not ran.moves:
            trees.append(tuple(sorted(p.stem for p in (where / "work").glob("*.txt") if p.stem != "base")))
        return check(where)

    ran = Ran(repo, checks=3, verify=counted)
    outcomes = by_task(ran.run(batch))
    assert ran.moves[0] == ["1"] and outcomes["3"].sha is None and outcomes["2"].sha is None
    assert sorted(trees) == sorted(
        [("1",), ("2",), ("1", "2", "3"), ("1", "2"), ("1", "3"), ("2", "3"), ("3",)]
    )
    assert_green_at_every_commit(repo)


def test_the_blame_searches_many_landings_with_several_checks_at_once(repo: Path) -> None:
    """Twelve landings since the branch left: the one it fails beside is found and named."""
    late = task_branch(repo, "late", "task late\nclashes with 7\n")
    for t in range(1, 13):
        ran, _ = train(repo)
        ran.run([task_branch(repo, str(t), f"task {t}\n")])
    ran, moves = train(repo, checks=4)
    outcomes = by_task(ran.run([late]))
    assert moves == [] and outcomes["late"].beside == "7"
    one, _ = train(repo, checks=1)  # one check at a time finds the same
    assert by_task(one.run([late]))["late"].beside == "7"


def test_a_blame_searches_only_the_landings_since_the_branch_passed_alone(repo: Path) -> None:
    """Twelve landings since the branch left, and it passed alone on the sixth: the blame
    checks it only on the landings after that one, and names the one it fails beside."""
    late = task_branch(repo, "late", "task late\nclashes with 9\n")
    green_at = ""
    for t in range(1, 13):
        ran, _ = train(repo)
        ran.run([task_branch(repo, str(t), f"task {t}\n")])
        green_at = worktrees.head(repo) if t == 6 else green_at
    landed: list[int] = []

    def counted(where: Path, unless: object = None) -> tuple[str | None, Mapping[str, Any] | None]:
        landed.append(len(list((where / "work").glob("*.txt"))) - 2)  # but base.txt and its own
        return check(where)

    known = {worktrees.head(repo, late.branch or ""): green_at}
    found = blame(
        repo, Lanes(repo, LOOP, 1, None), counted, Outcome(late, failure="red"), worktrees.head(repo), known
    )
    assert found.beside == "9" and landed and min(landed) > 6


def test_a_check_a_signal_ended_lands_nothing(repo: Path) -> None:
    batch = [task_branch(repo, "1", "task 1\n")]
    before = git(repo, "rev-parse", "main")

    def interrupted(where: Path, unless: object = None) -> tuple[str | None, Mapping[str, Any] | None]:
        raise Halted

    ran = Ran(repo, verify=interrupted)
    with pytest.raises(Halted):
        ran.run(batch)
    assert ran.moves == [] and git(repo, "rev-parse", "main") == before


WAITS_FOR_TASK_3 = """import pathlib, sys, time
here = pathlib.Path.cwd()
if here.name.startswith(".train"):  # the train's check: task 3's worker must start meanwhile
    deadline = time.monotonic() + 30
    while not (here.parent / "3").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    if not (here.parent / "3").exists():
        print("FAILED: no worker started while the train checked")
        sys.exit(1)
print("ok")
"""


def test_workers_go_on_while_the_train_checks(tmp_path: Path) -> None:
    """Two workers, three tasks: the branches of tasks 1 and 2 wait for the train's check,
    which passes only once task 3's worker has started. The train runs beside the driver and a
    branch waiting for it holds no worker's slot, so task 3 starts at once and all land."""
    from bench import merge_train as bench
    from loop.store.journal import Journal
    from loop.store.paths import Workspace

    root = bench.project(tmp_path, 3, 0.0)
    (root / "check.py").write_text(WAITS_FOR_TASK_3)
    subprocess.run(
        ["git", "commit", "-qam", "the check"], cwd=root, check=True, env={**os.environ, **bench.IDENTITY}
    )
    agent = [sys.executable, bench.__file__, "worker", "--turn", "0", "0.1"]
    check_cmd = f"{sys.executable} check.py"
    env = {**bench.IDENTITY, "CLAUDE_CONFIG_DIR": str(tmp_path / "claude")}
    argv = [sys.executable, "-m", "loop.cli", "-C", str(root), "run", "Build", "--workers", "2"]
    argv += ["--graph", str(root / "graph"), "--agent", " ".join(agent), "--headless"]
    argv += ["--verify", check_cmd, "--verify-allow", check_cmd]
    done = subprocess.run(
        argv, cwd=root, env={**os.environ, **env}, capture_output=True, text=True, timeout=120
    )
    evs = Journal(Workspace(root).journal).read_from(0).events
    said = done.stdout + done.stderr
    assert sorted(str(e.data["task"]) for e in evs if e.kind == "task-merged") == ["1", "2", "3"], said
    assert not [e for e in evs if e.kind == "merge-rejected"], said


def test_a_lane_that_could_not_be_made_ready_is_made_again_later(repo: Path) -> None:
    """A scratch worktree whose setup failed once is no lane lost: the next job makes it again
    (a job waiting for a lane is not left waiting for one that will never be freed)."""
    tries: list[Path] = []

    def flaky(where: Path) -> None:
        tries.append(where)
        if len(tries) == 1:
            raise RuntimeError("setup failed")

    lanes = Lanes(repo, LOOP, 1, flaky)
    with pytest.raises(RuntimeError):
        lanes.run(lambda lane: lane)
    assert lanes.run(lambda lane: lane) == worktrees.scratch_path(repo, LOOP)
    assert lanes.run(lambda lane: lane) == worktrees.scratch_path(repo, LOOP)  # made once more, kept
    assert len(tries) == 2


def test_two_breakers_in_a_batch_are_both_handed_on_after_one_round(repo: Path) -> None:
    """Two branches of eight break the checks: both fail alone beside the batch's check and are
    handed on at once; the six that pass stay queued and land together next."""
    broken = {"3", "6"}
    batch = [
        task_branch(repo, str(t), f"task {t}" + (" BROKEN" if str(t) in broken else "") + "\n")
        for t in range(1, 9)
    ]
    ran, moves = train(repo, checks=8)
    outcomes = by_task(ran.run(batch))
    assert moves == [["1", "2", "4", "5", "7", "8"]]
    assert {t for t, o in outcomes.items() if o.sha is None} == broken
    assert ran.told_after == [0, 0]  # their blames start before the six are checked together
    assert all(outcomes[t].failure and outcomes[t].beside is None for t in broken)
    # two rounds: the batch beside seven alone; the six beside the eighth alone (unless the six
    # passed before its check began). Each blame checks its branch again once.
    assert ran.verifications <= (1 + 7) + (1 + 1) + 2
    assert_green_at_every_commit(repo)


def test_a_green_batch_ends_the_checks_of_its_branches_alone_under_way(repo: Path) -> None:
    """The batch passes while its branches' checks alone still run: nobody needs those any more,
    so they are told to end (their lanes serve the next checks) and nothing waits for them."""

    told: list[bool] = []
    batch_done = threading.Event()

    def slow_alone(where: Path, unless: object = None) -> tuple[str | None, Mapping[str, Any] | None]:
        if len(list((where / "work").glob("*.txt"))) == 2:  # base and one branch: alone
            assert isinstance(unless, threading.Event)
            batch_done.wait(30)
            told.append(unless.wait(30))
            raise Halted
        result = check(where)
        batch_done.set()
        return result

    ran = Ran(repo, checks=4, verify=slow_alone)
    outcomes = by_task(ran.run([task_branch(repo, t, f"task {t}\n") for t in ("1", "2", "3")]))
    ran.lanes.quiet()
    assert ran.moves == [["1", "2", "3"]] and all(o.sha for o in outcomes.values())
    assert told and all(told)


def test_no_lane_free_means_no_branch_is_checked_alone(repo: Path) -> None:
    """Blames hold every lane when a batch comes: its branches are not checked alone (they would
    hold its own check back); the batch waits for a lane and lands."""

    lanes_held = threading.Event()
    checked: list[int] = []

    def counted(where: Path, unless: object = None) -> tuple[str | None, Mapping[str, Any] | None]:
        checked.append(len(list((where / "work").glob("*.txt"))))
        return check(where)

    ran = Ran(repo, checks=4, verify=counted)
    held = ran.lanes.start([lambda lane: lanes_held.wait(30)] * 4)
    with ran.lanes._changed:
        ran.lanes._changed.wait_for(lambda: ran.lanes._wanted == 4, timeout=30)
    batch = [task_branch(repo, t, f"task {t}\n") for t in ("1", "2", "3")]
    landed = threading.Thread(target=ran.run, args=(batch,))
    landed.start()
    with ran.lanes._changed:  # the batch's check asked for a lane
        ran.lanes._changed.wait_for(lambda: ran.lanes._wanted > 4, timeout=30)
    lanes_held.set()
    landed.join(30)
    assert all(h.result() for h in held)
    assert ran.moves == [["1", "2", "3"]] and checked == [4]  # base and three: the batch only


class Probes:
    """Lanes for `first_failing` without git: the probes run here, and the rounds are counted."""

    def __init__(self, count: int, spare: int | None = None) -> None:
        self.count = count
        self.free = count if spare is None else spare
        self.rounds = 0
        self.sizes: list[int] = []

    def round(self, pick: Any, job: Any) -> dict[int, bool]:
        chosen = pick(max(1, min(self.count - 1, self.free - 1)), max(1, self.free))  # one kept for the train
        self.rounds += 1
        self.sizes.append(len(chosen))
        return {i: job(i)(Path(".")) for i in chosen}


def test_a_blame_leaves_the_train_the_lanes_its_rounds_do_not_need() -> None:
    """Nine landings with seven lanes free take two rounds of three probes at most: the tree
    it failed on is checked again only in the last round, and only while no probe failed (that
    is a second failure), so the first round leaves the train's next batch its lanes. A branch
    that fails on the oldest landing too fails alone, said after one round."""
    lanes = Probes(8)
    assert first_failing(lanes, lambda i: lambda lane: i >= 2, 0, 9) == 2  # type: ignore[arg-type]
    assert lanes.sizes == [3, 2]  # 0, 3, 6; then 1, 2
    alone = Probes(8)
    assert first_failing(alone, lambda i: lambda lane: True, 0, 9) == 0  # type: ignore[arg-type]
    assert alone.sizes == [3]
    last = Probes(8)  # it fails only beside the last landing: named once checked there again
    assert first_failing(last, lambda i: lambda lane: i >= 9, 0, 9) == 9  # type: ignore[arg-type]
    assert last.sizes == [3, 3]  # 0, 3, 6; then 7, 8 and the tree it failed on (9)


def test_a_blame_takes_the_lanes_free_when_its_round_starts() -> None:
    """Another blame holds five of eight lanes: each round takes two of the three free ones
    (the third is the train's) rather than waiting a round for more, and still finds the
    landing."""
    lanes = Probes(8, spare=3)
    assert first_failing(lanes, lambda i: lambda lane: i >= 11, 0, 16) == 11  # type: ignore[arg-type]
    assert max(lanes.sizes[:-1]) == 2 and lanes.rounds <= 5  # the last checks the tree it failed on again


def test_a_blame_whose_last_round_needs_the_trains_lane_takes_it() -> None:
    """Two places are left (the last landing, and the tree it failed on, checked again) and two
    lanes are free: the blame takes both, the train's too, and ends a round sooner; its worker
    waits for it, the train's next batch for one check at most."""
    lanes = Probes(8, spare=2)
    assert first_failing(lanes, lambda i: lambda lane: i >= 16, 15, 16) == 16  # type: ignore[arg-type]
    assert lanes.sizes == [2]
    one = Probes(8, spare=1)  # no lane spare but one: a round each
    assert first_failing(one, lambda i: lambda lane: i >= 16, 15, 16) == 16  # type: ignore[arg-type]
    assert one.sizes == [1, 1]


def test_two_blames_at_once_leave_the_train_a_lane(repo: Path) -> None:
    """A blame's round counts the lanes another round took as it planned, and keeps one for
    the train's next batch: two blames at once never hold every lane."""
    lanes = Lanes(repo, LOOP, 8, None)
    told: list[int] = []
    release = threading.Event()

    def pick(most: int, last: int) -> list[int]:
        told.append(most)
        return list(range(min(most, 4)))

    def job(i: int) -> Any:
        return lambda lane: release.wait(30)

    rounds = [threading.Thread(target=lanes.round, args=(pick, job)) for _ in range(2)]
    for started, wanted in zip(rounds, (4, 7), strict=True):
        started.start()
        with lanes._changed:
            assert lanes._changed.wait_for(lambda: lanes._wanted == wanted, timeout=30)  # noqa: B023
    release.set()
    for started in rounds:
        started.join(30)
    assert told == [7, 3]  # the second round counts the first's four lanes, and the train's one


@given(count=st.integers(1, 9), high=st.integers(0, 80), data=st.data())
def test_the_blame_finds_the_first_failing_landing_in_as_few_rounds_as_all_lanes_would(
    count: int, high: int, data: st.DataObject
) -> None:
    """Whatever the landing, it is found; with fewer probes a round than lanes, at most one
    round more than all the lanes but the train's would take (when no probe fails, the tree it
    failed on is checked again in the last round, or in one of its own when that has no lane
    to spare)."""
    first = data.draw(st.integers(0, high))
    lanes = Probes(count)
    found = first_failing(lanes, lambda i: lambda lane: i >= first, 0, high)  # type: ignore[arg-type]
    assert found == first
    again = Probes(count)
    flaky = first_failing(again, lambda i: lambda lane: False, 0, high)  # type: ignore[arg-type]
    assert flaky is None  # it failed once, and passes everywhere since: nothing is named
    most = count - 1
    if most >= 2:
        fewest = next(r for r in range(1, 10) if most**r >= high)
        assert lanes.rounds <= fewest + 1
