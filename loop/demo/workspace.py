"""A demo workspace: a git repo with a checklist, a check script, and nothing else."""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from loop.repo.gitargv import git_argv
from loop.store.paths import Workspace
from loop.store.proc import alive
from loop.store.state import StateError, StateStore

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
    # Only the scripted agent's scratch folder: loopdeck keeps its own files out of `git status`
    # itself (`loop.store.gitexclude`), as in a person's project.
    (root / ".gitignore").write_text(".demo/\n")
    git = git_argv("-c", "user.name=loopdeck demo", "-c", "user.email=demo@loopdeck.invalid")
    subprocess.run([*git, "init", "-q", "-b", "main"], cwd=root, check=True)
    subprocess.run([*git, "add", "-A"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "demo: start"], cwd=root, check=True)
    return root


def agent_command(*options: str) -> str:
    """The scripted agent as an `--agent` command line."""
    return shlex.join([sys.executable, "-I", "-m", "loop.demo.agent", *options])


def verify_command() -> str:
    """The demo's verification command (this Python running check.py); allowlisted by the demo."""
    return shlex.join([sys.executable, "-I", "check.py"])


PREFIX = "loopdeck-demo-"
MARKER = ".loopdeck-demo"
"""The file each demo's folder holds: only a folder with it is ever removed by a later demo."""
MARKER_TEXT = "made by `loopdeck demo`; the next demo removes this folder\n"


def make_folder() -> Path:
    """A new folder for a demo in the temporary folder, marked as the demo's own (with the
    demo's pid: a later demo leaves it alone while this one runs)."""
    folder = Path(tempfile.mkdtemp(prefix=PREFIX))
    (folder / MARKER).write_text(f"{MARKER_TEXT}pid {os.getpid()}\n")
    return folder


def previous_folders(keep: Path | None = None) -> list[Path]:
    """Earlier demos' folders a new demo may remove: in the temporary folder, named as a demo
    names them, real folders (not links) of this user, holding the demo's marker file, and
    neither the demo that made them nor a runner in them still running."""
    found = []
    for folder in sorted(Path(tempfile.gettempdir()).glob(PREFIX + "*")):
        if keep is not None and folder == keep:
            continue
        with contextlib.suppress(OSError, ValueError):
            info = os.lstat(folder)
            if not os.path.isdir(folder) or folder.is_symlink() or info.st_uid != os.getuid():
                continue
            marker = folder / MARKER
            if marker.is_symlink() or not marker.is_file():
                continue
            text = marker.read_text(encoding="utf-8", errors="replace")
            if not text.startswith(MARKER_TEXT):
                continue
            pids = [
                int(line[4:]) for line in text.splitlines() if line.startswith("pid ") and line[4:].isdigit()
            ]
            pids += _runner_pids(folder / "project")
            if any(alive(pid) for pid in pids):
                continue  # a demo still running (another terminal's)
            found.append(folder)
    return found


def _runner_pids(root: Path) -> list[int]:
    """The pid of the runner that drives the loop in `root`, as its state says (none when no
    state, or one that does not read)."""
    try:
        state = StateStore(Workspace(root)).read()
    except (StateError, OSError):
        return []
    return [state.pid] if state is not None and state.pid else []


def remove_previous(keep: Path | None = None) -> list[Path]:
    """Remove the folders of earlier demos (`previous_folders`); the ones removed."""
    removed = []
    for folder in previous_folders(keep):
        try:
            shutil.rmtree(folder)  # never follows a link inside it
        except OSError:
            continue
        removed.append(folder)
    return removed
