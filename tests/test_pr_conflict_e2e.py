"""`run --workers N --pr` with a merge conflict on the host, end to end with the real `gh`
against the fake host (`tests/e2e/fakegithub.py`). Two tasks add a line at the same place of
one file, or a person pushes such a line to the base under a task's pull request: the host says
CONFLICTING, the conflict goes back to the task's worker with its files, hunks and both sides'
intent (as the train's conflicts do), a turn resolves it, the pull request becomes mergeable and
is merged with `gh pr merge`, and the loop's branch ends at the host's merge commit holding both
sides' lines."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loop.demo import graph as demo_graph
from loop.store.journal import Journal
from loop.store.paths import Workspace
from tests.e2e.fakegithub import FakeGitHub, Pull
from tests.test_pr_e2e import git, pr_env, pr_project, pushed, run_pr

REGISTRY = 'FEATURES = [\n    "base",\n]\n'

WORKER = '''"""A scripted worker: its own module, and its feature registered at the end of the shared
list (where the other task registers its own: the two branches conflict). Told of a conflict,
it keeps both sides' lines. Every prompt is kept in PROMPTS, for the test to read."""
import os, sys
from pathlib import Path
from loop.demo.worker import parse

prompt = sys.stdin.read()
with open(os.environ["PROMPTS"], "a", encoding="utf-8") as out:
    out.write(prompt + "\\n----\\n")
task, subject, files = parse(prompt)
registry = Path("src/features.py")
if "MERGE CONFLICT" in prompt:
    kept = [
        line
        for line in registry.read_text().splitlines(keepends=True)
        if not line.startswith(("<<<<<<<", "=======", ">>>>>>>"))
    ]
    registry.write_text("".join(kept))
    print(f"Done task {task}: kept both sides in {registry}")
else:
    Path(files[0]).write_text(f"value_{task} = {task}\\n")
    text = registry.read_text()
    registry.write_text(text.replace("]\\n", f'    "feature_{task}",\\n]\\n'))
    print(f"Done task {task}: {subject}")
'''

CHECK = """import pathlib, sys
bad = [p.name for p in pathlib.Path("src").glob("*.py") if "<<<<<<<" in p.read_text()]
print("conflict markers left in:", bad) if bad else print("ok")
sys.exit(1 if bad else 0)
"""


def checker(files: dict[str, str]) -> str:
    """The host's CI: no conflict marker left in the project's sources."""
    bad = [name for name, text in files.items() if name.startswith("src/") and "<<<<<<<" in text]
    return "FAILURE" if bad else "SUCCESS"


Review = Callable[[FakeGitHub, Pull, int], "tuple[str, str] | None"]


def approve(host: FakeGitHub, pull: Pull, look: int) -> tuple[str, str] | None:
    return "APPROVED", ""


@dataclass
class Ran:
    root: Path
    bare: Path
    host: FakeGitHub
    events: list[dict[str, Any]]
    prompts: str
    """Every prompt the workers read, each followed by a line `----`."""


def run(tmp_path: Path, tasks: tuple[tuple[str, str, str], ...], review: Review = approve) -> Ran:
    """A `--pr` loop over `tasks` (id, subject, own file) with the scripted worker, the host's
    CI and `review`, to its end: it must succeed."""
    root, gh = pr_project(tmp_path, CHECK, WORKER, {"src/features.py": REGISTRY})
    prompts = tmp_path / "prompts.txt"
    env = {**pr_env(tmp_path, gh), "PROMPTS": str(prompts)}
    bare = pushed(root, tmp_path, env)
    graph = demo_graph.create(root / ".tasks", tuple((t, s, (), (f,)) for t, s, f in tasks))
    host = FakeGitHub(bare, checker, lambda pull, look: review(host, pull, look))
    with host:
        env.update(host.env())
        done = run_pr(root, graph, env)
        assert done.returncode == 0, done.stdout + done.stderr
    events = [e.to_json() for e in Journal(Workspace(root).journal).read_from(0).events]
    return Ran(root, bare, host, events, prompts.read_text())


def test_two_tasks_conflicting_on_the_host_the_later_resolves_it_then_merges(tmp_path: Path) -> None:
    ran = run(tmp_path, (("1", "Add colour", "src/colour.py"), ("2", "Add size", "src/size.py")))
    root, bare, host, events = ran.root, ran.bare, ran.host, ran.events
    hosted = list(host.pulls.values())
    kinds = [(e["kind"], (e.get("data") or {}).get("task")) for e in events]
    # the host said CONFLICTING for one pull request: it went back to that task's worker
    clashes = [e["data"] for e in events if e["kind"] == "merge-conflict"]
    assert len(clashes) == 1 and "src/features.py" in clashes[0]["reason"], kinds
    loser = clashes[0]["task"]
    winner = "1" if loser == "2" else "2"
    turns = [e["data"]["task"] for e in events if e["kind"] == "worker-ended"]
    assert turns.count(loser) == 2 and turns.count(winner) == 1, kinds
    opened = {e["data"]["task"]: e["data"]["worker"] for e in events if e["kind"] == "pr-opened"}
    ended = [
        e["data"]["worker"] for e in events if e["kind"] == "worker-ended" and e["data"]["task"] == loser
    ]
    assert clashes[0]["worker"] == opened[loser] == ended[-1]  # the task's own worker resolved it
    assert not any(e["kind"] == "escalation" for e in events), kinds
    # its prompt named the file, the hunks and both sides' intent
    resolving = next(p for p in ran.prompts.split("\n----\n") if "MERGE CONFLICT" in p)
    assert "- src/features.py" in resolving
    assert f'"feature_{winner}",' in resolving and f'"feature_{loser}",' in resolving
    titles = {"1": "Add colour", "2": "Add size"}
    assert "Both sides' intent" in resolving and f"task {winner}: {titles[winner]}" in resolving
    # the same pull request updated, then merged on the host at the head verified
    pulls = sorted(hosted, key=lambda p: p.number)
    assert len(pulls) == 2 and all(p.state == "MERGED" for p in pulls)
    by_task = {p.title.split("(task ")[1].rstrip(")"): p for p in pulls}
    assert host.conflicting == {by_task[loser].number}  # the host said so, not only git here
    assert sum(1 for e in events if e["kind"] == "pr-updated") == 1
    assert len(host.merge_inputs) == 2 and all(i.get("expectedHeadOid") for i in host.merge_inputs)
    resolved = git(bare, "rev-parse", f"{by_task[loser].merge_commit}^2")  # the worker's head
    assert host.merge_inputs[-1]["expectedHeadOid"] == resolved
    merged = {e["data"]["task"]: e["data"]["sha"] for e in events if e["kind"] == "pr-merged"}
    assert merged == {task: p.merge_commit for task, p in by_task.items()}
    # the loop's branch is the host's, at the last merge commit, with both tasks' intent
    assert git(root, "rev-parse", "main") == git(bare, "rev-parse", "main") == merged[loser]
    text = (root / "src" / "features.py").read_text()
    assert '"feature_1",' in text and '"feature_2",' in text and "<<<<<<<" not in text, text
    assert (root / "src" / "colour.py").exists() and (root / "src" / "size.py").exists()


def test_the_base_moved_on_the_host_under_a_pull_request_the_worker_resolves_it(tmp_path: Path) -> None:
    """A person pushes to the base while the task's pull request waits for its review: the host
    says CONFLICTING, the worker is told the person's commit was the other side."""
    person = 'FEATURES = [\n    "base",\n    "feature_person",\n]\n'

    def review(host: FakeGitHub, pull: Pull, look: int) -> tuple[str, str] | None:
        if look == 0:
            host.push("main", {"src/features.py": person}, "Register the person's feature")
        return "APPROVED", ""

    ran = run(tmp_path, (("1", "Add colour", "src/colour.py"),), review)
    (pull,) = ran.host.pulls.values()
    assert ran.host.conflicting == {pull.number} and pull.state == "MERGED"
    clashes = [e["data"] for e in ran.events if e["kind"] == "merge-conflict"]
    assert len(clashes) == 1 and clashes[0]["task"] == "1"
    assert [e["kind"] for e in ran.events].count("pr-updated") == 1
    resolving = next(p for p in ran.prompts.split("\n----\n") if "MERGE CONFLICT" in p)
    assert "- src/features.py" in resolving and "a commit: Register the person's feature" in resolving
    assert '"feature_person",' in resolving and '"feature_1",' in resolving  # the hunks
    merged = [e["data"]["sha"] for e in ran.events if e["kind"] == "pr-merged"]
    assert merged == [pull.merge_commit] == [git(ran.root, "rev-parse", "main")]
    assert git(ran.bare, "rev-parse", "main") == pull.merge_commit
    text = (ran.root / "src" / "features.py").read_text()
    assert '"feature_1",' in text and '"feature_person",' in text and "<<<<<<<" not in text, text
