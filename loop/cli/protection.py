"""What the agent in a session may not change (`permissions.deny` rules) and, with `install
--sandbox`, Claude Code's Bash sandbox with the same paths unwritable: added to the settings and
recorded, so that `--uninstall` takes back only what loopdeck added."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from loop import trust
from loop.cli.settings_file import Report
from loop.core.errors import FileProblem
from loop.store.config import user_path
from loop.store.paths import Workspace

PROJECT_FILES = (
    ".claude/orchestrator-loop.local.md",
    ".claude/orchestrator-loop.local.md.bak",
    ".claude/orchestrator-loop.events.jsonl",
    ".claude/orchestrator-loop.control.jsonl",
    ".claude/orchestrator-loop.lock",
    ".claude/loopdeck",
    ".claude/loops",
    ".claude/settings.json",
    ".claude/settings.local.json",
    ".loopdeck.toml",
    ".git/config",
    ".git/hooks",
)
"""What an agent in the session must not change, relative to the project: the loop's state, its
journal, control queue and lock, loopdeck's folders, the settings that hold the hooks and these
rules, the project's loopdeck configuration, and git's config and hooks (a `core.fsmonitor` or a
hook runs as the person at the next `git`)."""
FOLDERS = (".claude/loopdeck", ".claude/loops", ".git/hooks")
PROJECT_RULES = (
    "Edit(/.claude/orchestrator-loop.*)",
    "Edit(/.claude/loopdeck/**)",
    "Edit(/.claude/loops/**)",
    "Edit(/.claude/settings.json)",
    "Edit(/.claude/settings.local.json)",
    "Edit(/.loopdeck.toml)",
    "Edit(/.git/config)",
    "Edit(/.git/hooks/**)",
    "Edit(~/.claude/settings.json)",
)
"""Claude Code's `permissions.deny` rules for the same files. Read and Edit rules follow gitignore
patterns: `/x` is relative to the project root, `//x` an absolute path, `~/x` under the home
folder, and a bare `x` relative to the current folder (so not used). An `Edit` rule covers every
tool that writes files (Edit, Write, NotebookEdit); Claude Code checks no path in a `Write(...)`
rule. Deny rules hold in every permission mode, `bypassPermissions` included."""
SANDBOX_ON = {"enabled": True, "autoAllowBashIfSandboxed": True, "allowUnsandboxedCommands": False}
"""Claude Code's Bash sandbox, as `install --sandbox` sets it: commands run in it without a
prompt, and none may leave it (`dangerouslyDisableSandbox` is ignored), so a command cannot
write what the Edit rules protect either."""

# --- what the agent may not change ------------------------------------------------------------


def private_folders(ws: Workspace) -> list[Path]:
    """loopdeck's folders outside the project: the person's configuration and the trust records
    (what a person confirmed). An agent must neither change nor read them."""
    return list(dict.fromkeys([user_path(root=ws.root).parent, trust.home(ws.root)]))


def _home_relative(folder: Path) -> str | None:
    """`folder` under the home folder as `~/…` (the same for the person on any machine)."""
    home = os.path.expanduser("~")
    if not os.path.isabs(home):
        return None
    try:
        rest = folder.relative_to(home)
    except ValueError:
        return None
    return f"~/{rest.as_posix()}" if rest.parts else None


def deny_rules(ws: Workspace) -> list[str]:
    """The `permissions.deny` rules install writes: the project's files, then loopdeck's private
    folders (`~/…`, or `//` and the absolute path outside the home folder)."""
    rules = list(PROJECT_RULES)
    for folder in private_folders(ws):
        rule_path = _home_relative(folder) or "/" + folder.as_posix()
        rules.append(f"Edit({rule_path}/**)")
    return rules


def sandbox_paths(ws: Workspace) -> dict[str, list[str]]:
    """`sandbox.filesystem.denyWrite` and `denyRead`. Exact paths, no patterns: Claude Code's
    sandbox may ignore a glob on Linux. A relative path is the project's; one that does not
    exist yet cannot be created inside the sandbox either."""
    private = [_home_relative(f) or f.as_posix() for f in private_folders(ws)]
    return {"denyWrite": [*PROJECT_FILES, *private], "denyRead": private}


def walk(data: dict[str, Any], dotted: str) -> Any:
    """The value at `a.b.c` in the settings, None where a step is missing or not an object."""
    value: Any = data
    for key in dotted.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    return value


def protection(ws: Workspace, sandbox: bool) -> tuple[dict[str, list[str]], dict[str, Any]]:
    """What install adds: list items by dotted key, and single values by dotted key."""
    lists = {"permissions.deny": deny_rules(ws)}
    values: dict[str, Any] = {}
    if sandbox:
        for key, items in sandbox_paths(ws).items():
            lists[f"sandbox.filesystem.{key}"] = items
        values = {f"sandbox.{key}": value for key, value in SANDBOX_ON.items()}
    return lists, values


def check_shapes(data: dict[str, Any], path: Path, dotted_keys: list[str], leaves: dict[str, type]) -> None:
    """Refuse, before anything changes, a settings file where a key install adds to is not an
    object (or a leaf not the list or value expected)."""
    for dotted in dotted_keys:
        parts = dotted.split(".")
        for n in range(1, len(parts) + 1):
            key = ".".join(parts[:n])
            value = walk(data, key)
            kind = leaves.get(key, dict) if n == len(parts) else dict
            if value is not None and not isinstance(value, kind):
                raise FileProblem(path, f'"{key}" is a {type(value).__name__}, expected a {kind.__name__}')


def _parent(data: dict[str, Any], dotted: str, created: list[str]) -> tuple[dict[str, Any], str]:
    """The object that holds `dotted`'s last key (made, and recorded as made, where missing)."""
    parts = dotted.split(".")
    node = data
    for n, key in enumerate(parts[:-1]):
        if key not in node:
            node[key] = {}
            created.append(".".join(parts[: n + 1]))
        node = node[key]
    return node, parts[-1]


def add_protection(
    ws: Workspace, data: dict[str, Any], sandbox: bool, entry: dict[str, Any], created: list[str]
) -> tuple[dict[str, list[str]], dict[str, Any]]:
    """Merge the rules (and the sandbox's settings) in; the records of what was added (a rule
    the file already held is the person's and is not recorded) and of the values set."""
    lists, values = protection(ws, sandbox)
    added: dict[str, list[str]] = {k: list(v) for k, v in (entry.get("lists") or {}).items()}
    for dotted, items in lists.items():
        node, key = _parent(data, dotted, created)
        if key not in node:
            node[key] = []
            created.append(dotted)
        present = node[key]
        record = added.setdefault(dotted, [])
        for item in items:
            if item not in present:
                present.append(item)
                if item not in record:
                    record.append(item)
    set_record: dict[str, Any] = dict(entry.get("values") or {})
    for dotted, value in values.items():
        node, key = _parent(data, dotted, created)
        if dotted not in set_record:
            set_record[dotted] = {"set": value, "before": node.get(key)}
        node[key] = value
    return {k: v for k, v in added.items() if v}, set_record


def take_protection(data: dict[str, Any], entry: dict[str, Any], created: set[str]) -> None:
    """Take out the rules and values install recorded; a value changed since is the person's."""
    lists = entry.get("lists")
    for dotted, items in (lists or {}).items() if isinstance(lists, dict) else ():
        current = walk(data, dotted)
        if isinstance(current, list) and isinstance(items, list):
            current[:] = [item for item in current if item not in items]
    values = entry.get("values")
    for dotted, record in (values or {}).items() if isinstance(values, dict) else ():
        parent = walk(data, dotted.rpartition(".")[0])
        key = dotted.rpartition(".")[2]
        if not isinstance(parent, dict) or not isinstance(record, dict) or key not in parent:
            continue
        if parent[key] != record.get("set"):
            continue
        if record.get("before") is None:
            del parent[key]
        else:
            parent[key] = record["before"]
    # What install made and is now empty goes, deepest first.
    for dotted in sorted(created, key=lambda k: -k.count(".")):
        if dotted.split(".")[0] not in ("permissions", "sandbox"):
            continue
        parent = walk(data, dotted.rpartition(".")[0]) if "." in dotted else data
        key = dotted.rpartition(".")[2]
        if isinstance(parent, dict) and key in parent and parent[key] in ([], {}):
            del parent[key]


def sandbox_missing(
    which: Callable[[str], str | None] = shutil.which, platform: str | None = None
) -> list[str]:
    """What Claude Code's Bash sandbox lacks on this machine to start: bubblewrap and socat on
    Linux (macOS has what it needs); without them it runs commands unsandboxed, with a warning."""
    platform = platform or sys.platform
    if platform == "darwin":
        return []
    if not platform.startswith("linux"):
        return [f"Claude Code has no command sandbox on {platform}"]
    return [f"{name} is not installed" for name in ("bwrap", "socat") if which(name) is None]


def notes(report: Report) -> list[str]:
    """What install tells the person about the protection it wrote, a line each."""
    lines = [
        f"the agent's Edit and Write tools may not change the loop's files, loopdeck's folders, the "
        f"settings or git's config ({len(report.denied)} rules in permissions.deny; they hold in "
        "every permission mode)"
    ]
    if not report.sandbox:
        lines.append(
            "its Bash commands are not confined: `loopdeck install --sandbox` turns Claude Code's sandbox on"
        )
        return lines
    lines.append(
        "Claude Code's Bash sandbox is on (sandbox.enabled): commands cannot write those files either, "
        "cannot read loopdeck's configuration or trust records, and cannot leave the sandbox"
    )
    lines.append(
        "sandboxed commands reach only the hosts listed in sandbox.network.allowedDomains (none are "
        "listed): another host is refused in `claude -p` and asked about in a session. List the hosts "
        'your commands need there (e.g. "pypi.org", "*.npmjs.org"); Claude Code\'s own API requests '
        "do not go through the sandbox. So that a session left alone is refused rather than asked, set "
        "sandbox.network.strictAllowlist to true in ~/.claude/settings.json (project files cannot)"
    )
    missing = sandbox_missing()
    if missing:
        lines.append(
            f"warning: the sandbox cannot start here ({'; '.join(missing)}): Claude Code then runs "
            "commands unsandboxed; install them (Debian/Ubuntu: apt-get install bubblewrap socat)"
        )
    return lines
