"""What a person on this machine confirmed a loop may do: the one trust boundary.

A loop's state file lives in the workspace, and a workspace arrives from elsewhere (a clone, a
pull, the agent itself writing it). Everything the file names is someone else's word until a
person here confirms it: the prompt (it reaches a model), the commands (agent, verification,
audit, and the allowlist entries that unlock them), the notification targets (programs, URLs),
the paths it writes (task file, task graph) and the GitHub project it reads. So:

* a loop started here (`loopdeck start`, `run`, `/orchestrator-loop` typed in a session) is
  recorded as confirmed, with those exact values;
* any other loop, or one whose values changed since, is only data: the Stop hook neither adopts
  its session nor feeds its prompt to the model, the runner runs nothing of it, nothing is
  notified, until a person confirms it (`loopdeck trust`, or `run --yes`), outside the agent's
  process (`loop.trust.person`);
* the record lives in the person's home folder as the system knows it (the password database,
  not `$HOME` or `$XDG_STATE_HOME`, which a repository's `.claude/settings.json` can set for the
  hook), under `~/.local/state/loopdeck/trust/`, never in the workspace.

The record pins the values themselves, not a digest, so a change is shown as what changed.
"""

from __future__ import annotations

import functools
import json
import os
import pwd
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from loop.core.model import LoopState
from loop.core.redact import redact
from loop.core.timeutil import iso_s, utcnow
from loop.store import xdg
from loop.store.paths import Workspace
from loop.store.safeopen import read_regular

HOME_ENV = "LOOPDECK_TRUST_HOME"
"""A folder for the records instead of the home folder's (tests, sandboxes). Honoured only when
it is an absolute path to an existing folder of this user that nobody else can write, outside
the workspace's git repository (and `$CLAUDE_PROJECT_DIR`'s): a repository's settings can set
the variable, but cannot point it at a folder of its own holding a forged record or key."""
MAX_RECORD_BYTES = 4 * 1024 * 1024
"""A record is a few KB; one larger than this is not one of ours."""
CONFIG_SUFFIX = ".config.json"

LABELS = {
    "prompt": "prompt",
    "agent": "agent command",
    "fallback_agent": "fallback agent command",
    "verify": "verification command",
    "allowed": "allowlist entry",
    "audit": "audit command",
    "notify": "notification target",
    "task_file": "task file",
    "graph": "task graph",
    "github_project": "GitHub project",
}
"""What each pinned value is, in the words a person reads."""


def pinned(state: LoopState) -> dict[str, Any]:
    """Everything in the state that runs, is posted to, is written or reaches a model."""
    runner = state.extra.get("runner")
    agent = runner.get("agent") if isinstance(runner, dict) else None
    fallback = runner.get("fallback_agent") if isinstance(runner, dict) else None
    allow = state.extra.get("verify_allow")
    board = _board(state)
    audit = board.get("audit")
    graph = board.get("graph")
    return {
        "loop": state.started_at,
        "prompt": _redacted(state.prompt),
        "agent": agent if isinstance(agent, str) and agent else None,
        "fallback_agent": fallback if isinstance(fallback, str) and fallback else None,
        "verify": [str(c) for c in state.verify],
        "allowed": [str(a) for a in allow] if isinstance(allow, list) else [],
        "audit": audit if isinstance(audit, str) and audit else None,
        "notify": [str(t) for t in state.notify],
        "task_file": state.task_path or None,
        "graph": graph if isinstance(graph, str) and graph else None,
        "github_project": str(state.github_project_id)
        if state.check_github and state.github_project_id
        else None,
    }


def _redacted(prompt: str) -> str:
    """The prompt as the record keeps it: redacted, so a token pasted into it is never written
    to the trust folder, and a state that keeps the prompt redacted still matches its record."""
    return redact(prompt)


def _board(state: LoopState) -> dict[str, Any]:
    raw = state.extra.get("parallel")
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return {}
    return raw if isinstance(raw, dict) else {}


# --- where the records live ----------------------------------------------------------------------


def _own_folder(path: str, workspace: Path | None) -> bool:
    if not os.path.isabs(path):
        return False
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return False
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o022:
        return False
    if workspace is not None:
        real, root = os.path.realpath(path), os.path.realpath(workspace)
        if real == root or real.startswith(root.rstrip(os.sep) + os.sep):
            return False
    # Not inside the workspace's repository either, nor `$CLAUDE_PROJECT_DIR`'s: a committed
    # `.claude/settings.json` (of any folder of it) can set the variable for the hooks.
    return xdg.usable(path, workspace)


def home(workspace: Path | None = None) -> Path:
    """The folder of the trust records for this user."""
    return Path(_home(workspace))


def _home(workspace: Path | None) -> str:
    """`home`, as a string. The monitor and the runner read a loop's record on every snapshot
    and iteration: a `Path` made each time interned its names anew each time."""
    override = os.environ.get(HOME_ENV)
    if override and _own_folder(override, workspace):
        return override
    return os.path.join(_user_home(os.getuid()), ".local", "state", "loopdeck", "trust")


@functools.cache
def _user_home(uid: int) -> str:
    """The user's home folder, from the password database (looked up once: a lookup reads
    /etc/passwd)."""
    try:
        return pwd.getpwuid(uid).pw_dir
    except KeyError:  # no password entry (some containers): the home we are given
        return os.path.expanduser("~")


def _key(root: str) -> str:
    """A file name for a workspace: its path, readable, `%`-escaped (a hash when too long for a
    file name). No hashing module on the Stop hook's path for the common case."""
    name = "".join(c if c.isalnum() or c in "-_." else f"%{ord(c):02X}" for c in root)
    if len(name.encode("utf-8", "surrogateescape")) <= 200:
        return name
    import hashlib  # ~3 ms (`-X importtime`): only a path too long for a file name pays it

    return "sha256-" + hashlib.sha256(root.encode("utf-8", "surrogateescape")).hexdigest()


def _record_file(ws: Workspace, suffix: str = ".json") -> str:
    """A workspace's record (`suffix` ".config.json": its configuration's)."""
    return os.path.join(_home(ws.root), _key(os.path.realpath(ws.root)) + suffix)


def _record_path(ws: Workspace) -> Path:
    return Path(_record_file(ws))


def _read(path: str) -> dict[str, Any] | None:
    """A record, None when there is none or it is no JSON object. Read to its size, under a
    limit: a read of the limit itself allocated 4 MB on every snapshot."""
    try:
        record = json.loads(read_regular(path, MAX_RECORD_BYTES))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def _load(ws: Workspace) -> dict[str, Any] | None:
    return _read(_record_file(ws))


# --- asking and recording ----------------------------------------------------------------------


def _show(name: str, value: Any) -> list[str]:
    label = LABELS.get(name, name)
    if value is None or value == []:
        return []
    if isinstance(value, list):
        return [f"{label}: {v}" for v in value]
    text = str(value)
    if name == "prompt":
        first = text.strip().splitlines()[0] if text.strip() else ""
        more = " …" if len(first) > 100 or "\n" in text.strip() else ""
        return [f"{label}: {first[:100]}{more}"]
    return [f"{label}: {text}"]


def unconfirmed(ws: Workspace, state: LoopState, given: Iterable[str] = ()) -> list[str]:
    """What in this loop nobody on this machine confirmed, a line each (empty: all confirmed).

    A loop with no record, or another loop's record, lists everything it names; a loop whose
    values changed since they were confirmed lists what changed. `given`: the names of pinned
    values a person gives right now (a `run` option), which need no other confirmation."""
    now = pinned(state)
    skip = {"loop", *given}
    record = _load(ws)
    before = record.get("pinned") if record is not None else None
    if not isinstance(before, dict) or before.get("loop") != now["loop"]:
        lines = [line for name, value in now.items() if name not in skip for line in _show(name, value)]
        if lines or "prompt" in skip:
            return lines
        return ["a loop nobody on this machine started (it names no command)"]
    lines = []
    for name, value in now.items():
        if name in skip or before.get(name) == value:
            continue
        was = before.get(name)
        if isinstance(value, list):
            old = was if isinstance(was, list) else []
            lines += [line for v in value if v not in old for line in _show(name, [v])]
            # A check taken away is as unconfirmed as one added: an emptied `verify:` list
            # would let a loop complete with its verification red.
            lines += [f"removed: {line}" for v in old if v not in value for line in _show(name, [v])]
        elif value is None or value == "":
            lines += [f"removed: {line}" for line in _show(name, was)]
        else:
            lines += _show(name, value)
    return lines


def confirmed(ws: Workspace, state: LoopState) -> bool:
    return not unconfirmed(ws, state)


def record(ws: Workspace, state: LoopState, by: str) -> None:
    """Remember that a person on this machine confirmed this loop's values (`by`: how)."""
    path = _record_path(ws)
    data = {"workspace": str(ws.root), "by": by, "at": iso_s(utcnow()), "pinned": pinned(state)}
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False, indent=1)
    os.replace(tmp, path)


def confirmed_targets(ws: Workspace, state: LoopState) -> list[str]:
    """The state's notification targets a person here confirmed for this loop: the only ones
    told anything."""
    if not state.notify:
        return []
    record = _load(ws)
    before = record.get("pinned") if record is not None else None
    if not isinstance(before, dict) or before.get("loop") != state.started_at:
        return []
    was = before.get("notify")
    allowed = was if isinstance(was, list) else []
    return [t for t in state.notify if t in allowed]


# --- a project's saved defaults ------------------------------------------------------------------


def _config_record_path(ws: Workspace) -> Path:
    return Path(_record_file(ws, CONFIG_SUFFIX))


def config_unconfirmed(ws: Workspace, values: dict[str, Any]) -> list[str]:
    """The values a workspace's configuration file (`.loopdeck.toml`, pyproject.toml's
    `[tool.loopdeck]`) contributes that nobody on this machine confirmed, a line each: the file
    came with the repository, so its agent, commands and targets are someone else's word, as a
    state file's are. A value confirmed before and unchanged needs nothing more."""
    record = _read(_record_file(ws, CONFIG_SUFFIX))
    before = record.get("values") if record is not None else None
    before = before if isinstance(before, dict) else {}
    return [f"{name}: {value}" for name, value in sorted(values.items()) if before.get(name) != value]


def record_config(ws: Workspace, values: dict[str, Any], by: str) -> None:
    """Remember that a person here confirmed these values of the workspace's configuration
    file (`by`: how); the values confirmed before for other keys are kept."""
    path = _config_record_path(ws)
    old = _read(str(path))
    kept: dict[str, Any] = {}
    if old is not None and isinstance(old.get("values"), dict):
        kept = old["values"]
    data = {"workspace": str(ws.root), "by": by, "at": iso_s(utcnow()), "values": {**kept, **values}}
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False, indent=1)
    os.replace(tmp, path)
