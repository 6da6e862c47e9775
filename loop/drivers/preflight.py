"""Checks before the first iteration: mistakes a loop would otherwise find out overnight.

`loopdeck run` and `loopdeck start` check that the agent's executable resolves (and the
fallback agent's; a missing CLI is named with its install command), that the task
file exists, that `gh` is logged in when a GitHub project is configured and that each
notification target can be used here (`notify-send` for `desktop`, a URL with a host, a
`cmd:` program that exists). `loopdeck doctor` runs the same checks, and more. Without them a typo
shows up as an agent that "fails" five times and escalates, a source that reads as empty, or a
loop kept going on an uncertain count. Every problem is one line that says what to do; all are
reported at once, and the verb exits 1 before it writes anything.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from urllib.parse import urlsplit

from loop.core.errors import LoopdeckError
from loop.core.redact import target_shown
from loop.drivers.notify import check_target

GH_TIMEOUT_S = 10.0


def _gh_logged_in(gh: str) -> bool:
    try:
        done = subprocess.run(
            [gh, "auth", "status"],
            capture_output=True,
            timeout=GH_TIMEOUT_S,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _set(value: str | None) -> str | None:
    """None for the state file's "null" spellings and blanks."""
    return None if value is None or value.strip() in ("", "null") else value


def _agent_problems(root: Path, command: str, option: str, which: Callable[[str], str | None]) -> list[str]:
    """Whether the agent command's executable resolves; a missing CLI is named with its install
    command (`npm install -g @openai/codex`, …)."""
    what = "the fallback agent" if option == "--fallback-agent" else "the agent"
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        return [f"{what} command {command!r} cannot be read ({exc})"]
    if not argv:
        return [f"{what} command is empty: name one with {option} AGENT"]
    exe = argv[0]
    if "/" in exe:
        path = (root / exe).resolve()
        if not (path.is_file() and os.access(path, os.X_OK)):
            return [f"{what} {exe!r} is not an executable file (as seen from {root})"]
        return []
    if which(exe) is not None:
        return []
    # Here, not at the top: ~17 ms (`-X importtime`) that `start` and `resume` never use.
    from loop.agents import install_hint

    hint = install_hint(os.path.basename(exe)) or f"install {exe}"
    return [f"{what} {exe!r} is not on PATH: {hint}, or name another with {option} AGENT"]


def problems(
    root: Path,
    *,
    agent: str | None = None,
    fallback_agent: str | None = None,
    task_file: str | None = None,
    github_project: str | None = None,
    notify: Sequence[str] = (),
    which: Callable[[str], str | None] = shutil.which,
    gh_logged_in: Callable[[str], bool] = _gh_logged_in,
) -> list[str]:
    """One line per mistake found; empty when the loop can start."""
    found: list[str] = []
    for option, command in (("--agent", agent), ("--fallback-agent", fallback_agent)):
        if command is not None:
            found += _agent_problems(root, command, option, which)
    task = _set(task_file)
    if task is not None and not (root / task).is_file():
        found.append(f"the task file {task} does not exist in {root}: create it, or leave out --task-file")
    for target in notify:
        problem = notify_problem(target, which)
        if problem:
            found.append(problem)
    project = _set(github_project)
    if project is not None:
        gh = which("gh")
        if gh is None:
            found.append(
                f"GitHub project {project} is configured but `gh` is not installed: "
                "install it, or pass --no-github"
            )
        elif not gh_logged_in(gh):
            found.append(
                f"`gh` is not logged in (run `gh auth login`), needed for GitHub project {project}; "
                "or pass --no-github"
            )
    return found


def notify_problem(target: str, which: Callable[[str], str | None] = shutil.which) -> str | None:
    """Why a notification target cannot be used on this machine, or None. Nothing is sent: a
    target that can never work (`check_target`), `desktop` without `notify-send`, a URL with no
    host, a `cmd:` program that is not there, `apprise:` without Apprise."""
    problem = check_target(target)
    if problem:
        return problem
    shown = _shown(target)
    if target == "desktop" and which("notify-send") is None:
        return (
            "--notify desktop needs notify-send, which is not installed (Debian/Ubuntu: apt install "
            "libnotify-bin); or use another target"
        )
    if target.startswith(("http://", "https://")):
        try:
            parts = urlsplit(target)
            parts.port  # noqa: B018  (a port that is no number raises here)
        except ValueError as exc:
            return f"--notify {shown}: not a usable URL ({exc})"
        if not parts.hostname:
            return f"--notify {shown}: the URL names no host"
    if target.startswith("cmd:"):
        program = shlex.split(target[4:])[0]
        if "/" in program:
            if not (os.path.isfile(program) and os.access(program, os.X_OK)):
                return f"--notify {shown}: {program} is not an executable file"
        elif which(program) is None:
            return f"--notify {shown}: {program} is not on PATH"
    if target.startswith("apprise:") and importlib.util.find_spec("apprise") is None:
        return f"--notify {shown}: Apprise is not installed (pip install apprise, in loopdeck's environment)"
    return None


def _shown(target: str) -> str:
    return target_shown(target)


def require(
    root: Path,
    *,
    agent: str | None = None,
    fallback_agent: str | None = None,
    task_file: str | None = None,
    github_project: str | None = None,
    notify: Sequence[str] = (),
) -> None:
    """Raise one LoopdeckError listing every problem (a line each), or return."""
    found = problems(
        root,
        agent=agent,
        fallback_agent=fallback_agent,
        task_file=task_file,
        github_project=github_project,
        notify=notify,
    )
    if found:
        raise LoopdeckError("\n".join(found))
