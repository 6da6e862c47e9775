"""Where the person's own files live, from the XDG variables, only when a repository cannot
have chosen it.

Claude Code runs its hooks with the `env` of the project's `.claude/settings.json`, which comes
with the repository (any folder of it: `sub/.claude/settings.json` counts when a session starts
in `sub`). So a value that decides where the user's configuration or loopdeck's trust folder is
must not point into the repository: a folder there, holding a forged record or configuration,
would be read as the person's. A relative value is ignored too, as the XDG specification says.
"""

from __future__ import annotations

import contextlib
import os
import pwd
from collections.abc import Mapping
from pathlib import Path

MAX_DEPTH = 64
AGENT_FOLDERS = (
    ".claude",
    ".codex",
    ".gemini",
    ".config/opencode",
    ".local/share/opencode",
    ".local/state/opencode",
    ".cache/opencode",
)
"""The agent CLIs' folders in the home folder: an agent writes there even in the sandbox."""


def repository_top(start: str | os.PathLike[str]) -> str:
    """The top-most folder at or above `start` holding a `.git` (a folder or a worktree's file);
    `start` itself when none does. Real paths."""
    here = os.path.realpath(start)
    top = here
    for _ in range(MAX_DEPTH):
        if os.path.lexists(os.path.join(here, ".git")):
            top = here
        parent = os.path.dirname(here)
        if parent == here:
            break
        here = parent
    return top


def repositories(root: str | os.PathLike[str] | None, env: Mapping[str, str] | None = None) -> list[str]:
    """The folders a repository's settings could speak for: the top of the workspace's
    repository, and of `CLAUDE_PROJECT_DIR`'s (the current folder when no workspace is given)."""
    env = os.environ if env is None else env
    starts = [os.fspath(root) if root is not None else os.getcwd()]
    project = env.get("CLAUDE_PROJECT_DIR", "")
    if project and os.path.isabs(project):
        starts.append(project)
    return [repository_top(start) for start in starts]


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def usable(
    value: str | None, root: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None
) -> bool:
    """Whether `value` (a folder named by an environment variable) may say where the person's
    own files are: an absolute path outside every repository `repositories` names."""
    if not value or not os.path.isabs(value):
        return False
    real = os.path.realpath(value)
    if any(_within(real, folder) for folder in agent_folders(env)):
        return False
    return not any(_within(real, top) for top in repositories(root, env))


def agent_folders(env: Mapping[str, str] | None = None) -> list[str]:
    """`AGENT_FOLDERS` under the home folder (the password database's and `$HOME`), real paths:
    what an agent may have written is nobody's configuration or trust folder."""
    env = os.environ if env is None else env
    homes = {env.get("HOME", "")}
    with contextlib.suppress(KeyError):
        homes.add(pwd.getpwuid(os.getuid()).pw_dir)
    return [
        os.path.realpath(os.path.join(h, name)) for h in homes if os.path.isabs(h) for name in AGENT_FOLDERS
    ]


def base(
    name: str,
    fallback: str,
    env: Mapping[str, str] | None = None,
    root: str | os.PathLike[str] | None = None,
) -> Path:
    """`$name` (XDG_CONFIG_HOME, XDG_STATE_HOME, XDG_CACHE_HOME) when `usable`, else
    `~/<fallback>` (`.config`, `.local/state`, `.cache`)."""
    env = os.environ if env is None else env
    value = env.get(name, "")
    if usable(value, root, env):
        return Path(value)
    return Path(env.get("HOME") or Path.home()) / fallback
