"""Worktrees that run: a project's untracked files copied into each new worktree, its setup
commands run once per worktree in the sandbox (only once a person confirmed them), and each
worker's own slot and port base. Real git worktrees, real bubblewrap, scripted workers."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from loop.demo import graph as demo_graph
from loop.demo import workspace as demo_workspace
from tests.conftest import REPO
from tests.test_sandbox import real_bwrap

PY = sys.executable

AGENT = """\
import os, sys
from pathlib import Path
from typing import Any
from loop.demo.worker import parse
prompt = sys.stdin.read()
task, subject, files = parse(prompt)
env = Path(".env").read_text().strip() if Path(".env").exists() else "none"
ran = Path("setup-ran.txt").read_text().split().count("boxed") if Path("setup-ran.txt").exists() else 0
turn = "rework" if "AUDIT REJECTED" in prompt else "first"
worker, port = os.environ.get("LOOPDECK_WORKER"), os.environ.get("LOOPDECK_PORT_BASE")
for name in files:
    with open(name, "a") as out:
        out.write(f"task {task} {turn}: worker={worker} port={port} env={env} setup={ran}\\n")
print(f"Done task {task}.")
"""
AUDIT = """\
import os, sys
from pathlib import Path
from typing import Any
files = [f for f in os.environ.get("LOOPDECK_FILES", "").splitlines() if f]
sys.exit(0 if all(" rework: " in Path(f).read_text() for f in files) else 1)  # one rework each
"""
SETUP = """\
import os
with open("setup-ran.txt", "a") as out:
    out.write("boxed\\n" if "GH_TOKEN" not in os.environ else "open\\n")  # the sandbox keeps it out
"""
TASKS = (("1", "Model", (), ("m.py",)), ("2", "View", (), ("v.py",)))


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout


def project(tmp_path: Path, config: str) -> Path:
    root = demo_workspace.create(tmp_path / "repo", tasks=1)
    (root / "agent.py").write_text(AGENT)
    (root / "audit.py").write_text(AUDIT)
    (root / "setup.py").write_text(SETUP)
    (root / ".gitignore").write_text("setup-ran.txt\n")
    demo_graph.create(root / "graph", TASKS)
    git(root, "add", "agent.py", "audit.py", "setup.py", ".gitignore", "graph")
    git(root, "commit", "-qm", "the project")
    (root / ".env").write_text("SECRET=s3cret\n")  # untracked, not ignored: the point
    (root / ".loopdeck.toml").write_text(config)
    return root


def run(root: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    argv = [PY, "-m", "loop.cli", "-C", str(root), "run", "Build it", "--workers", "2"]
    argv += ["--graph", str(root / "graph"), "--agent", f"{PY} agent.py", "--headless", *extra]
    env = {**os.environ, "PYTHONPATH": str(REPO), "GH_TOKEN": "not-for-the-setup"}
    return subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, timeout=120)


def journal(root: Path) -> list[dict[str, Any]]:
    path = root / ".claude" / "orchestrator-loop.events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def config(copy: list[str], setup: tuple[str, ...] = ()) -> str:
    return (
        f"worktree_copy = {json.dumps(copy)}\nworktree_setup = {json.dumps(list(setup))}\nport_base = 30000\n"
    )


def test_a_worktree_gets_its_env_file_runs_its_setup_once_and_each_worker_its_ports(tmp_path: Path) -> None:
    real_bwrap()
    root = project(tmp_path, config([".env"], (f"{PY} setup.py",)))
    audit = f"{PY} audit.py"
    done = run(
        root,
        "--yes",
        "--sandbox",
        "on",
        "--sandbox-env",
        "PYTHONPATH",
        "--audit",
        audit,
        "--verify-allow",
        audit,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = (root / "m.py").read_text().splitlines() + (root / "v.py").read_text().splitlines()
    seen = [re.match(r"task (\d) (\w+): worker=(\d) port=(\d+) env=(\S+) setup=(\d)", ln) for ln in lines]
    facts = [m.groups() for m in seen if m]
    assert len(facts) == 4, lines  # two tasks, each a first turn and a rework in the same worktree
    assert {f[4] for f in facts} == {"SECRET=s3cret"}
    assert {f[5] for f in facts} == {"1"}, (
        facts
    )  # the setup ran once per worktree, before turn one, sandboxed
    slots = {f[0]: (f[2], f[3]) for f in facts}
    assert sorted(slots.values()) == [("1", "30100"), ("2", "30200")], facts
    events = journal(root)
    passed = [e["data"] for e in events if e["kind"] == "worktree-setup-passed"]
    assert sorted(str(d["task"]) for d in passed) == ["1", "2"]
    assert sum(e["kind"] == "worktree-ready" for e in events) == 2
    # the copied file stays off every branch: it was never committed
    assert ".env" not in git(root, "log", "--all", "--name-only", "--format=")
    assert (root / ".env").read_text() == "SECRET=s3cret\n"


def test_a_setup_nobody_confirmed_runs_nothing(tmp_path: Path) -> None:
    root = project(tmp_path, config([".env"], (f"{PY} setup.py",)))
    done = run(root)
    assert done.returncode != 0
    assert "worktree_setup" in done.stderr and "loopdeck config --trust" in done.stderr
    assert not (root / ".loopdeck").exists()  # no worktree was made
    assert not list(root.rglob("setup-ran.txt"))
    assert not any(e["kind"] == "worker-started" for e in journal(root))


@pytest.mark.parametrize(
    ("copy", "said"),
    [
        ("../outside.env", "is outside the workspace"),
        (".env", "is a symlink"),
        ("conf/.env", "goes through a symlink"),
    ],
)
def test_a_path_outside_the_workspace_or_through_a_symlink_is_refused(
    tmp_path: Path, copy: str, said: str
) -> None:
    root = project(tmp_path, config([copy]))
    (tmp_path / "outside.env").write_text("NOT=yours\n")
    (root / ".env").unlink()
    (root / ".env").symlink_to(tmp_path / "outside.env")
    (root / "conf").symlink_to(tmp_path)
    done = run(root, "--yes")
    assert done.returncode != 0
    errors = done.stderr.strip().splitlines()
    assert len(errors) == 1 and said in errors[0] and ".loopdeck.toml" in errors[0], done.stderr
    assert not (root / ".loopdeck").exists()


WAITS_FOR_TASK_2 = """\
import pathlib, sys, time
here = pathlib.Path.cwd()
if here.name == "1":  # task 1's setup: task 2's worker must have run meanwhile
    other = here.parent / "2" / "v.py"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (other.exists() and "task 2" in other.read_text()):
        time.sleep(0.05)
    if not (other.exists() and "task 2" in other.read_text()):
        sys.exit("no other worker ran while this setup ran")
"""


def test_a_long_setup_holds_back_no_other_worker(tmp_path: Path) -> None:
    """Task 1's setup finishes only once task 2's worker has done its turn: setups run beside
    the driver, so the other workers start, end and land meanwhile."""
    root = project(tmp_path, config([], (f"{PY} wait.py",)))
    (root / "wait.py").write_text(WAITS_FOR_TASK_2)
    git(root, "add", "wait.py")
    git(root, "commit", "-qm", "the setup")
    done = run(root, "--yes", "--sandbox", "off")
    events = journal(root)
    said = done.stdout + done.stderr
    assert not [e for e in events if e["kind"] == "worktree-setup-failed"], said
    assert sorted(str(e["data"]["task"]) for e in events if e["kind"] == "task-merged") == ["1", "2"], said
