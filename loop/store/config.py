"""Saved defaults: the values people would otherwise type on every `run` and `start`.

Two files, read with the standard library's TOML reader:

* the user's, `$XDG_CONFIG_HOME/loopdeck/config.toml` (`~/.config/loopdeck/config.toml`): the
  person's own choices on this machine;
* the project's, `.loopdeck.toml` at the workspace's root, or else the `[tool.loopdeck]` table
  of its `pyproject.toml`: shared with the repository, so it is a workspace file like a state
  file, and what it names is someone else's word until a person here confirms it
  (`loop.trust`; `loop.drivers.defaults` applies that rule).

The command line wins over the project file, which wins over the user's; a value in neither
is loopdeck's built-in default. This module only reads and checks the files: each value's type
is checked here (a mistake is one line naming the file and the key), what a value means
(an agent command, a notification target, a verification command) is checked where it is used,
as the same option on the command line would be.
"""

from __future__ import annotations

import math
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loop.core.errors import FileProblem
from loop.store import xdg
from loop.store.safeopen import read_regular

PROJECT_NAME = ".loopdeck.toml"
PYPROJECT = "pyproject.toml"
MAX_BYTES = 1024 * 1024
"""A configuration file is a few lines; a larger one is refused rather than parsed."""


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip()) and "\0" not in value


def _texts(value: Any) -> bool:
    return isinstance(value, list) and all(_text(v) for v in value)


def _whole(low: int, high: int) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and low <= v <= high


def _positive(value: Any) -> bool:
    return (
        isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0
    )


KEYS: dict[str, tuple[Callable[[Any], bool], str, str]] = {
    "agent": (_text, "an agent: claude, codex, gemini, opencode or a command", "--agent"),
    "fallback_agent": (_text, "an agent: a name or a command", "--fallback-agent"),
    "notify": (_texts, "a list of notification targets", "--notify"),
    "verify": (_texts, "a list of verification commands", "--verify"),
    "verify_allow": (_texts, "a list of commands to allow", "--verify-allow"),
    "max_iterations": (_whole(0, 2**63 - 1), "a whole number >= 0 (0 = no limit)", "--max-iterations"),
    "max_cost": (_positive, "US dollars, more than 0", "--max-cost"),
    "stuck_after": (_whole(1, 10_000), "a whole number >= 1", "--stuck-after"),
    "same_error_after": (_whole(1, 10_000), "a whole number >= 1", "--same-error-after"),
    "iteration_timeout": (_positive, "seconds, more than 0", "--iteration-timeout"),
    "retries": (_whole(0, 100), "a whole number from 0 to 100", "--retries"),
    "sandbox": (lambda v: v in ("auto", "on", "off"), "auto, on or off", "--sandbox"),
    "sandbox_net": (lambda v: isinstance(v, bool), "true or false", "--sandbox-net"),
    "sandbox_env": (
        lambda v: _texts(v) and all(n.replace("_", "a").isalnum() for n in v),
        "a list of variable names",
        "--sandbox-env",
    ),
    "worktree_copy": (_texts, "a list of files relative to the workspace, such as .env", "config only"),
    "worktree_setup": (_texts, "a list of commands run once in each new worktree", "config only"),
    "port_base": (_whole(1024, 65535), "a port from 1024 to 65535", "config only"),
    "ports_per_worker": (_whole(1, 10_000), "a whole number from 1 to 10000", "config only"),
}
"""Every key a configuration file may hold: its check, what it expects, and the option it
stands for (the command line's name for the same value)."""


class ConfigError(FileProblem):
    """A configuration file loopdeck cannot use: not TOML, an unknown key, a value of the
    wrong kind."""


@dataclass(frozen=True)
class ConfigFile:
    """One configuration file as read: where, whose, and its values (empty when absent)."""

    path: Path
    kind: str
    """`project` (the workspace's: confirmed by a person before use) or `user` (the person's)."""
    values: Mapping[str, Any] = field(default_factory=dict)
    exists: bool = False
    table: str | None = None
    """`tool.loopdeck` when the values come from pyproject.toml's table."""
    ignored: str | None = None
    """Why the file's values are not used, when they are not."""

    @property
    def shown(self) -> str:
        return f"{self.path} [{self.table}]" if self.table else str(self.path)


@dataclass(frozen=True)
class Config:
    """The saved defaults: each value with the file it comes from (the project's over the
    user's)."""

    user: ConfigFile
    project: ConfigFile

    def get(self, key: str) -> Any:
        if key in self.project.values:
            return self.project.values[key]
        return self.user.values.get(key)

    def origin(self, key: str) -> ConfigFile | None:
        """The file a value comes from, None when neither file sets it."""
        if key in self.project.values:
            return self.project
        if key in self.user.values:
            return self.user
        return None

    def from_workspace(self, keys: object = None) -> dict[str, Any]:
        """The values the workspace's file contributes (the ones a person must confirm),
        among `keys` (all when None)."""
        wanted = set(keys) if keys is not None else set(KEYS)  # type: ignore[call-overload]
        return {k: v for k, v in self.project.values.items() if k in wanted}


def user_path(env: Mapping[str, str] | None = None, root: Path | None = None) -> Path:
    """The user's file: `$XDG_CONFIG_HOME/loopdeck/config.toml` when that is an absolute path
    (as the XDG specification says) outside the repository of `root` (or of the current folder)
    and of `$CLAUDE_PROJECT_DIR`, else `~/.config/loopdeck/config.toml`: a repository's
    `.claude/settings.json` can set the variable, never choose the person's file
    (`loop.store.xdg`)."""
    return xdg.base("XDG_CONFIG_HOME", ".config", env, root) / "loopdeck" / "config.toml"


def _read(path: Path) -> str | None:
    """A file's text, None when there is none; a FIFO, a device or a huge file is refused."""
    try:
        data = read_regular(path, MAX_BYTES + 1)
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise ConfigError(path, "is a folder, expected a TOML file") from None
    except OSError as exc:
        raise ConfigError(path, f"cannot be read ({exc.strerror or exc})") from None
    if len(data) > MAX_BYTES:
        raise ConfigError(path, f"is larger than {MAX_BYTES // 1024} KB; expected a few lines of TOML")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(path, f"not UTF-8 text (byte {exc.start}); expected TOML") from None


def _parse(path: Path, text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        return _not_toml(path, exc)
    except RecursionError:
        raise ConfigError(path, "nested too deep to read; expected TOML") from None


def _not_toml(path: Path, exc: Exception) -> dict[str, Any]:
    message = str(exc)
    line = re.search(r"line (\d+)", message)
    raise ConfigError(path, f"not valid TOML ({message})", int(line.group(1)) if line else None) from None


def checked(path: Path, table: Mapping[str, Any], where: str = "") -> dict[str, Any]:
    """The table's values, each checked against `KEYS`; ConfigError for an unknown key or a
    value of the wrong kind."""
    out: dict[str, Any] = {}
    for key, value in table.items():
        if key not in KEYS:
            known = ", ".join(KEYS)
            raise ConfigError(path, f"{where}unknown key {key!r}; the keys are: {known}")
        check, expected, _option = KEYS[key]
        if not check(value):
            raise ConfigError(path, f"{where}{key}: expected {expected}, got {value!r}"[:400])
        out[key] = list(value) if isinstance(value, list) else value
    return out


def read_user(env: Mapping[str, str] | None = None, root: Path | None = None) -> ConfigFile:
    path = user_path(env, root)
    text = _read(path)
    if text is None:
        return ConfigFile(path, "user")
    return ConfigFile(path, "user", checked(path, _parse(path, text)), exists=True)


def read_project(root: Path) -> ConfigFile:
    """The workspace's file: `.loopdeck.toml`, else pyproject.toml's `[tool.loopdeck]`."""
    path = root / PROJECT_NAME
    text = _read(path)
    if text is not None:
        return ConfigFile(path, "project", checked(path, _parse(path, text)), exists=True)
    pyproject = root / PYPROJECT
    text = _read(pyproject)
    if text is None or "loopdeck" not in text:
        return ConfigFile(path, "project")  # no table of ours: the rest of the file is not ours to judge
    tool = _parse(pyproject, text).get("tool")
    table = tool.get("loopdeck") if isinstance(tool, dict) else None
    if table is None:
        return ConfigFile(path, "project")
    if not isinstance(table, dict):
        raise ConfigError(pyproject, "[tool.loopdeck] must be a table of keys")
    values = checked(pyproject, table, "[tool.loopdeck] ")
    return ConfigFile(pyproject, "project", values, exists=True, table="tool.loopdeck")


def load(root: Path, env: Mapping[str, str] | None = None) -> Config:
    """Both files for the workspace at `root`. A user file inside the workspace is not the
    person's own (a repository can set `XDG_CONFIG_HOME` for the hooks Claude Code runs): it
    is not used."""
    path = user_path(env, root)
    raw = (os.environ if env is None else env).get("XDG_CONFIG_HOME", "")
    named = Path(raw) / "loopdeck" / "config.toml" if raw and os.path.isabs(raw) else path
    if named != path and named.exists():  # `XDG_CONFIG_HOME` points into the repository
        why = f"it is inside the repository of {root}: a repository's file is not your own"
        user = ConfigFile(named, "user", exists=True, ignored=why)
    elif _inside(path, root) and path.exists():
        why = f"it is inside the workspace {root}: a repository's file is not your own"
        user = ConfigFile(path, "user", exists=True, ignored=why)
    else:
        user = read_user(env, root)
    return Config(user, read_project(root))


def _inside(path: Path, root: Path) -> bool:
    try:
        Path(os.path.realpath(path)).relative_to(os.path.realpath(root))
    except ValueError:
        return False
    return True
