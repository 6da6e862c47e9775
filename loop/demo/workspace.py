"""A demo workspace: a git repo with a checklist, a check script, and nothing else."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from loop.repo.gitargv import git_argv

TASKS = (
    "Sketch the data model",
    "Add the storage layer",
    "Expose the list endpoint",
    "Expose the create endpoint",
    "Validate input",
    "Handle errors consistently",
    "Write the README section",
    "Add a smoke test",
)

CHECK = '''"""The demo's verification: every work file must be whole (no BROKEN marker)."""
import pathlib
import sys

broken = [p.name for p in sorted(pathlib.Path("work").glob("*.txt")) if "BROKEN" in p.read_text()]
if broken:
    print("FAILED: broken work files:", ", ".join(broken))
    sys.exit(1)
print("ok: all work files are whole")
'''


def create(root: Path, tasks: int = len(TASKS)) -> Path:
    """Make `root` a git repo holding TODO.md with `tasks` open tasks and check.py."""
    root.mkdir(parents=True, exist_ok=True)
    names = [
        TASKS[i % len(TASKS)] + (f" ({i // len(TASKS) + 1})" if i >= len(TASKS) else "") for i in range(tasks)
    ]
    (root / "TODO.md").write_text("# Demo plan\n\n" + "".join(f"- [ ] {n}\n" for n in names))
    (root / "check.py").write_text(CHECK)
    (root / ".gitignore").write_text(
        ".claude/orchestrator-loop.*\n.claude/loopdeck/\n.claude/loops/\n.demo/\n"
    )
    git = git_argv("-c", "user.name=loopdeck demo", "-c", "user.email=demo@loopdeck.invalid")
    subprocess.run([*git, "init", "-q", "-b", "main"], cwd=root, check=True)
    subprocess.run([*git, "add", "-A"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "demo: start"], cwd=root, check=True)
    return root


def agent_command(*options: str) -> str:
    """The scripted agent as an `--agent` command line."""
    import shlex

    return shlex.join([sys.executable, "-I", "-m", "loop.demo.agent", *options])


def verify_command() -> str:
    """The demo's verification command (this Python running check.py); allowlisted by the demo."""
    import shlex

    return shlex.join([sys.executable, "-I", "check.py"])
