"""`loopdeck install`: put loopdeck's hooks and slash commands into a project's `.claude/`.

What goes where follows Claude Code's own split between shared and personal settings. The hook
commands name this loopdeck's Python and its launcher by absolute path (Claude Code runs hooks
without the user's virtual environment on PATH), paths that exist only on this machine, so by
default they go into `.claude/settings.local.json` (personal, not committed) rather than the
team's `.claude/settings.json`; `shared=True` writes the team file instead. Claude Code runs the hooks
of every settings file (they are merged, not replaced) and the more local file wins for `env`.
The slash command files in `.claude/commands/` hold no path and run no shell, so they can be
committed: the `UserPromptSubmit` hook (what `loopdeck hook prompt` runs) does their work.

The agent in the session runs as the person, on the same files: `permissions.deny` rules keep its
file tools off loopdeck's files, the settings and git's config, in every permission mode, and
`--sandbox` turns on Claude Code's Bash sandbox with the same paths unwritable, so its commands
cannot write them either (the hooks run outside the sandbox and still can).

Precise and reversible: a settings file is merged, never replaced (every other key stays, a file
that is not valid JSON is refused with its line and column). Every change is backed up under a
name no later run reuses, and what was added is recorded in `.claude/loopdeck/install.json`, so
`--uninstall` takes out exactly that: the hook entries whose command is the one loopdeck wrote
(recognised by that exact command, never by a substring), and the `env` values it set, putting
back any value the user had before, and the deny rules and sandbox values it added (a rule the
file already held is the person's, and stays). Running it twice changes nothing the second time.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loop.core.errors import FileProblem
from loop.core.timeutil import utcnow
from loop.store import gitexclude
from loop.store.frontmatter import atomic_write
from loop.store.paths import Workspace
from loop.store.safeopen import UnsafePath, check_parent, make_parents, read_regular, write_bytes

BLOCK_CAP = "CLAUDE_CODE_STOP_HOOK_BLOCK_CAP"
TODO_TOOLS = "CLAUDE_CODE_ENABLE_TODO_TOOLS"
"""Claude Code 2.1.332 offers the Task tools (TaskCreate/TaskUpdate) to its newer models only
with this set; the `claude_tasks` source counts what they write."""
MARKER = "<!-- written by loopdeck install; `loopdeck install --uninstall` removes it -->"
HOOK_TIMEOUT = 600
"""Claude Code's default: verification commands run inside the Stop hook on a completion signal."""
PROMPT_TIMEOUT = 60
HOOKS = {
    "Stop": ("stop", HOOK_TIMEOUT),
    "StopFailure": ("stop-failure", PROMPT_TIMEOUT),
    "UserPromptSubmit": ("prompt", PROMPT_TIMEOUT),
}
SHARED = "settings.json"
LOCAL = "settings.local.json"
MANIFEST = "install.json"
LAUNCHER = Path(__file__).resolve().parent.parent / "launcher.py"

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

_EXE = r"(?:'[^']*/loopdeck'|[^\s']*/loopdeck|\S+ (?:-I )?-m loop\.cli)"
_LAUNCHED = r"(?:'[^']*'|[^\s']+) -I -S (?:'[^']*/loop/launcher\.py'|[^\s']*/loop/launcher\.py)"
_RUNNER = rf"(?:{_LAUNCHED}|{_EXE} hook)"
_DETACHING = (
    r"(?:trap '' TERM HUP INT; )?" r'f=\$\(mktemp\) && cat > "\$f" && \{ (?:\$\(command -v setsid\) )?'
)
"""The start of the StopFailure line, as this and older installs wrote it."""
_OURS = re.compile(
    rf"\A{_RUNNER} (?:stop|stop-failure|prompt)\Z"
    rf"|\A{_DETACHING}{_RUNNER} stop-failure "
    r'--input "\$f" </dev/null >/dev/null 2>&1 & \}\Z'
)
"""The exact shape of a command loopdeck writes: `<abs python> -I -S <abs path>/loop/launcher.py
stop|prompt`, or an older install's `<abs path>/loopdeck hook stop|prompt` (or the `python -m
loop.cli` form). Nothing else is taken for ours, so another tool's `… hook stop` is left alone
even without the install record."""


_RUNNER_OF = re.compile(
    rf"\A(?:{_DETACHING})?(?P<runner>{_RUNNER}) "
    r"(?:stop|stop-failure|prompt)\b"
)


def runner_of(command: str) -> str | None:
    """The part of a hook command loopdeck wrote that names the loopdeck it runs (`<python> -I
    -S <launcher>`, or an older `<exe> hook`); None for a command that is not ours."""
    found = _RUNNER_OF.match(command)
    return found.group("runner") if found else None


def runner_problems(runner: str) -> list[str]:
    """What is missing for a hook's runner to start: its Python, its launcher, or the `loopdeck`
    command an older install named (a clone moved or deleted, a virtual environment removed)."""
    try:
        argv = shlex.split(runner)
    except ValueError:
        return [f"the hook command {runner!r} cannot be read"]
    if not argv:
        return ["the hook command is empty"]
    found = []
    program = argv[0]
    if not (os.path.isfile(program) and os.access(program, os.X_OK)):
        found.append(f"{program} does not exist (or cannot be run)")
    if len(argv) >= 4 and argv[1:3] == ["-I", "-S"] and not os.path.isfile(argv[3]):
        found.append(f"{argv[3]} does not exist")
    return found


@dataclass(frozen=True)
class Installed:
    """One of loopdeck's hooks as a settings file holds it."""

    settings: Path
    event: str
    command: str
    runner: str


def installed(ws: Workspace) -> list[Installed]:
    """loopdeck's hooks in this project's settings files (the local one, then the team's),
    recognised as `install` recognises them; a settings file that cannot be read raises
    FileProblem."""
    manifest = _read_manifest(ws)
    out: list[Installed] = []
    for name in (LOCAL, SHARED):
        path = ws.claude_dir / name
        data = _load(path)
        hooks = data.get("hooks")
        if not isinstance(hooks, dict):
            continue
        recorded = _recorded_commands(manifest["files"].get(name) or {})
        for event, groups in hooks.items():
            for group in groups if isinstance(groups, list) else []:
                inner = group.get("hooks") if isinstance(group, dict) else None
                for hook in inner if isinstance(inner, list) else []:
                    if _is_ours(hook, recorded):
                        command = str(hook["command"])
                        runner = runner_of(command) or command
                        out.append(Installed(path, str(event), command, runner))
    return out


def installed_quietly(ws: Workspace) -> bool:
    """Whether loopdeck's hooks are in this project's settings; False where a file cannot be read."""
    try:
        return bool(installed(ws))
    except (FileProblem, OSError):
        return False


def where_installed() -> tuple[str, Path]:
    """How this loopdeck is installed: `tool` (a package in an environment's site folder: a
    `pipx` or `uv tool` install, a wheel) or `clone` (a development checkout, an editable
    install), and the folder that holds the `loop` package."""
    import sysconfig

    folder = LAUNCHER.parent.parent
    sites = {sysconfig.get_paths()[key] for key in ("purelib", "platlib")}
    for site in sites:
        try:
            folder.relative_to(Path(site).resolve())
        except ValueError:
            continue
        return "tool", folder
    return "clone", folder


DETACHED = (
    "trap '' TERM HUP INT; "
    'f=$(mktemp) && cat > "$f" && {{ $(command -v setsid) {runner} {event} --input "$f" '
    "</dev/null >/dev/null 2>&1 & }}"
)
"""How the StopFailure hook is installed. `claude -p` ends the moment a turn fails and sends
its hooks SIGTERM as it exits, tens of milliseconds after starting them: before a Python hook
could even start. So the shell first ignores the signals Claude Code ends hooks with (ignored
signals stay ignored across `exec`, for `cat`, `setsid` and loopdeck too), saves the input, and
hands it to a detached loopdeck, in a session of its own where `setsid` exists (where it does
not, `$(command -v setsid)` is empty). The string is loopdeck's own: no user text is in it."""


def hook_command(runner: str, event: str) -> str:
    """The command for one hook: `runner` (which ends where the event's name goes) and the event."""
    if event == "stop-failure":
        return DETACHED.format(runner=runner, event=event)
    return f"{runner} {event}"


def hook_runner() -> str:
    """The start of every hook command: this interpreter, isolated and without the site start-up,
    on the launcher (`loop/launcher.py` says why). The interpreter's path is kept as it is, not
    resolved: a virtual environment's `python` is a link, and the environment is found through
    it. Where there is no launcher file to run (a zipped install), the `loopdeck` command."""
    python = sys.executable
    if python and os.path.isabs(python) and LAUNCHER.is_file():
        return shlex.join([python, "-I", "-S", str(LAUNCHER)])
    return f"{loopdeck_command()} hook"


def loopdeck_command() -> str:
    """The absolute command that runs this loopdeck, whatever PATH Claude Code has."""
    argv0 = Path(sys.argv[0])
    if argv0.name == "loopdeck" and argv0.exists():
        return shlex.quote(str(argv0.resolve()))
    found = shutil.which("loopdeck")
    if found:
        return shlex.quote(str(Path(found).resolve()))
    return f"{shlex.quote(sys.executable)} -I -m loop.cli"


def commands() -> dict[str, str]:
    """The slash command files. They run no shell: `loopdeck hook prompt` sees the typed text
    (`/orchestrator-loop …`) before the model does and acts on it; the body only tells the model
    what happened (loopdeck's own words arrive as the hook's additional context)."""
    return {
        "orchestrator-loop.md": f"""---
description: Start a loopdeck loop (no arguments: resume it); it works until every task source is empty
argument-hint: PROMPT [-- --task-file PATH --max-iterations N --completion-promise TEXT]
---
{MARKER}

loopdeck's prompt hook has acted on this command: its report is in the context above. If it
started a loop, the task is the text quoted here, which is the user's request, verbatim:

<task>
$ARGUMENTS
</task>

Work on it now. When you try to stop, loopdeck's Stop hook checks every task source and sends
you back to work while anything is pending, then runs verification loops. Signal completion only
when it is completely true.
""",
        "loop-status.md": f"""---
description: Show the loopdeck loop's state and its task sources
---
{MARKER}

loopdeck's prompt hook put the loop's status in the context above. Report it to the user in a
few lines, then stop.
""",
        "loop-pause.md": f"""---
description: Pause the loopdeck loop (it is kept; /orchestrator-loop with no arguments resumes it)
---
{MARKER}

loopdeck's prompt hook has queued a pause: the loop is paused at your next stop. Say so in one
line and stop.
""",
        "loop-cancel.md": f"""---
description: Stop the loopdeck loop (it is kept, status stopped)
---
{MARKER}

loopdeck's prompt hook has queued a stop: the loop ends at your next stop. Say so in one line
and stop.
""",
    }


@dataclass
class Report:
    settings: Path
    changed: bool = False
    backup: Path | None = None
    backups: list[Path] = field(default_factory=list)
    written: list[Path] = field(default_factory=list)
    removed: list[Path] = field(default_factory=list)
    moved_from: Path | None = None
    """The other settings file loopdeck's own entries were taken out of (so they run once)."""
    denied: list[str] = field(default_factory=list)
    """The `permissions.deny` rules the settings hold for loopdeck."""
    sandbox: bool = False
    """Whether Claude Code's Bash sandbox is on by loopdeck's install."""


def _read_text(path: Path) -> str | None:
    """A settings or command file's text, None when there is none. A FIFO or device in its place
    is an error (NotRegularFile), never a hang."""
    try:
        data = read_regular(path)
    except FileNotFoundError:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FileProblem(path, f"not UTF-8 text (byte {exc.start}); expected JSON settings") from None


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object's keys, each once: rewriting a file whose `"hooks"` appears twice would keep
    only the last (JSON readers differ), silently dropping the other."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _load(path: Path) -> dict[str, Any]:
    text = _read_text(path)
    if text is None or not text.strip():
        return {}
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as exc:
        raise FileProblem(
            path, f"not valid JSON (column {exc.colno}: {exc.msg}); fix it and run again", exc.lineno
        ) from None
    except _DuplicateKey as exc:
        raise FileProblem(
            path,
            f"the key {json.dumps(exc.key, ensure_ascii=True)} appears twice in one object; loopdeck "
            "would keep only one of them: merge the two and run again",
        ) from None
    except RecursionError:
        raise FileProblem(path, "nested too deep to read; expected JSON settings") from None
    if not isinstance(data, dict):
        raise FileProblem(path, f"is a JSON {type(data).__name__}, expected an object of settings", 1)
    return data


def _expect(container: dict[str, Any], key: str, kind: type, path: Path, where: str) -> Any:
    value = container.get(key)
    if value is None:
        value = kind()
        container[key] = value
    if not isinstance(value, kind):
        raise FileProblem(path, f"{where} is a {type(value).__name__}, expected a {kind.__name__}")
    return value


def _backup(path: Path) -> Path:
    """Copy `path` to a backup name no other run uses (created exclusively, never overwritten)."""
    stamp = utcnow().strftime("%Y%m%dT%H%M%S%f")
    for n in range(1000):
        candidate = path.with_name(f"{path.name}.bak-{stamp}" + (f"-{n}" if n else ""))
        try:
            out = candidate.open("xb")  # exclusive: never through a symlink, never over a file
        except FileExistsError:
            continue
        try:
            with out, path.open("rb") as src:
                shutil.copyfileobj(src, out)
            shutil.copystat(path, candidate)
        except BaseException:
            with contextlib.suppress(OSError):
                candidate.unlink()  # a full disk leaves no half backup behind
            raise
        return candidate
    raise FileProblem(path, "cannot find a free backup name")


def _json_text(data: dict[str, Any]) -> str:
    """The settings as JSON text. A lone surrogate (`"\\ud800"` in the file read) has no UTF-8
    form: it is written back as the same escape, so nothing of the file is lost or changed."""
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = re.sub("[\ud800-\udfff]", lambda m: f"\\u{ord(m.group()):04x}", text)
    return text


def _save(path: Path, data: dict[str, Any], report: Report) -> bool:
    new = _json_text(data)
    old = _read_text(path)
    if old == new:
        return False
    if old is not None:
        backup = _backup(path)
        report.backups.append(backup)
        report.backup = report.backup or backup
    atomic_write(path, new.encode("utf-8"))  # never through a symlink, never outside .claude/
    report.changed = True
    return True


# --- the install record ----------------------------------------------------------------------


def _manifest_path(ws: Workspace) -> Path:
    return ws.private_dir / MANIFEST


def _read_manifest(ws: Workspace) -> dict[str, Any]:
    path = _manifest_path(ws)
    try:
        data = json.loads(read_regular(path))
    except (FileNotFoundError, ValueError, RecursionError):
        return {"files": {}}
    if not isinstance(data, dict) or not isinstance(data.get("files"), dict):
        return {"files": {}}
    return data


def _write_manifest(ws: Workspace, manifest: dict[str, Any]) -> None:
    path = _manifest_path(ws)
    if not manifest["files"]:
        check_parent(path)  # never an unlink through a symlinked folder
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return
    make_parents(path)  # a real folder inside .claude/, never a symlink to elsewhere
    atomic_write(path, (json.dumps(manifest, indent=2) + "\n").encode("ascii"))


def _refuse_unsafe(ws: Workspace) -> None:
    """Refuse, before anything is written, every place install would write through a symlink
    (a settings file, `.claude/loopdeck`, `.claude/commands` or a command file, `.claude`
    itself) or where no regular file can go: a refusal half-way would leave the settings
    changed and the install unrecorded."""
    for name in (LOCAL, SHARED):
        check_parent(ws.claude_dir / name)
        _no_symlink(ws.claude_dir / name)
    check_parent(_manifest_path(ws))
    folder = ws.claude_dir / "commands"
    for name in commands():
        check_parent(folder / name)
        _no_symlink(folder / name)


def _no_symlink(path: Path) -> None:
    if path.is_symlink():
        raise UnsafePath(
            f"{path} is a symlink (to {os.readlink(path)}); loopdeck does not write through "
            "symlinks: put the file itself there, or move the link away"
        )


def _is_ours(hook: Any, recorded: set[str]) -> bool:
    if not isinstance(hook, dict) or hook.get("type", "command") != "command":
        return False
    command = hook.get("command")
    return isinstance(command, str) and (command in recorded or _OURS.match(command) is not None)


def _recorded_commands(entry: dict[str, Any]) -> set[str]:
    hooks = entry.get("hooks")
    if not isinstance(hooks, dict):
        return set()
    return {
        c for commands in hooks.values() if isinstance(commands, list) for c in commands if isinstance(c, str)
    }


# --- what the agent may not change ------------------------------------------------------------


def private_folders(ws: Workspace) -> list[Path]:
    """loopdeck's folders outside the project: the person's configuration and the trust records
    (what a person confirmed). An agent must neither change nor read them."""
    from loop import trust
    from loop.store.config import user_path

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


def _walk(data: dict[str, Any], dotted: str) -> Any:
    """The value at `a.b.c` in the settings, None where a step is missing or not an object."""
    value: Any = data
    for key in dotted.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _protection(ws: Workspace, sandbox: bool) -> tuple[dict[str, list[str]], dict[str, Any]]:
    """What install adds: list items by dotted key, and single values by dotted key."""
    lists = {"permissions.deny": deny_rules(ws)}
    values: dict[str, Any] = {}
    if sandbox:
        for key, items in sandbox_paths(ws).items():
            lists[f"sandbox.filesystem.{key}"] = items
        values = {f"sandbox.{key}": value for key, value in SANDBOX_ON.items()}
    return lists, values


def _check_shapes(data: dict[str, Any], path: Path, dotted_keys: list[str], leaves: dict[str, type]) -> None:
    """Refuse, before anything changes, a settings file where a key install adds to is not an
    object (or a leaf not the list or value expected)."""
    for dotted in dotted_keys:
        parts = dotted.split(".")
        for n in range(1, len(parts) + 1):
            key = ".".join(parts[:n])
            value = _walk(data, key)
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


def _add_protection(
    ws: Workspace, data: dict[str, Any], sandbox: bool, entry: dict[str, Any], created: list[str]
) -> tuple[dict[str, list[str]], dict[str, Any]]:
    """Merge the rules (and the sandbox's settings) in; the records of what was added (a rule
    the file already held is the person's and is not recorded) and of the values set."""
    lists, values = _protection(ws, sandbox)
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


def _take_protection(data: dict[str, Any], entry: dict[str, Any], created: set[str]) -> None:
    """Take out the rules and values install recorded; a value changed since is the person's."""
    lists = entry.get("lists")
    for dotted, items in (lists or {}).items() if isinstance(lists, dict) else ():
        current = _walk(data, dotted)
        if isinstance(current, list) and isinstance(items, list):
            current[:] = [item for item in current if item not in items]
    values = entry.get("values")
    for dotted, record in (values or {}).items() if isinstance(values, dict) else ():
        parent = _walk(data, dotted.rpartition(".")[0])
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
        parent = _walk(data, dotted.rpartition(".")[0]) if "." in dotted else data
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


# --- install and uninstall -------------------------------------------------------------------


def install(
    ws: Workspace,
    *,
    keep_block_cap: bool = False,
    local: bool = True,
    exe: str | None = None,
    sandbox: bool = False,
) -> Report:
    """Merge loopdeck's hooks, env and deny rules into the settings (local by default) and write
    the commands; `sandbox` turns Claude Code's Bash sandbox on too, kept by later installs.

    The hooks run the launcher (`hook_runner`); `exe` names a `loopdeck` command to run them
    through instead (`<exe> hook stop`), the form older installs wrote."""
    runner = f"{exe} hook" if exe else hook_runner()
    name = LOCAL if local else SHARED
    path = ws.claude_dir / name
    report = Report(path)
    _refuse_unsafe(ws)
    data = _load(path)
    manifest = _read_manifest(ws)
    entry: dict[str, Any] = manifest["files"].get(name) or {"hooks": {}, "env": {}, "created": []}
    recorded = _recorded_commands(entry)
    created: list[str] = list(entry.get("created") or [])
    if not path.exists():
        created.append("file")  # the whole file is loopdeck's: uninstall removes it
    folders = set(manifest.get("folders") or [])
    folders |= {str(f.relative_to(ws.root)) for f in _folders(ws) if not f.exists()}
    manifest["folders"] = sorted(folders)
    if "hooks" not in data:
        created.append("hooks")
    hooks = _expect(data, "hooks", dict, path, '"hooks"')
    planned: list[tuple[list[Any], str, dict[str, Any]]] = []
    for event, (argument, timeout) in HOOKS.items():
        if event not in hooks:
            created.append(f"hooks.{event}")
        planned.append(
            (
                _expect(hooks, event, list, path, f'"hooks.{event}"'),
                event,
                {
                    "type": "command",
                    "command": hook_command(runner, argument),
                    "timeout": timeout,
                },
            )
        )
    wanted_env = {TODO_TOOLS: "1"} if keep_block_cap else {BLOCK_CAP: "0", TODO_TOOLS: "1"}
    if "env" not in data:
        created.append("env")
    env = _expect(data, "env", dict, path, '"env"')
    sandbox = sandbox or bool(entry.get("values"))  # an earlier --sandbox stays until uninstall
    lists, values = _protection(ws, sandbox)
    _check_shapes(data, path, [*lists, *values], {**{k: list for k in lists}, **{k: object for k in values}})
    # Every check passed: from here on the data is only changed.
    new_hooks: dict[str, list[str]] = {}
    for groups, event, ours in planned:
        found = False
        for group in groups:
            inner = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(inner, list):
                continue
            for index, hook in enumerate(inner):
                if _is_ours(hook, recorded) and not found:
                    inner[index] = {**hook, **ours}
                    found = True
        if not found:
            groups.append({"hooks": [ours]})
        new_hooks[event] = [ours["command"]]
    env_record: dict[str, Any] = dict(entry.get("env") or {})
    for key, value in wanted_env.items():
        if key not in env_record:
            env_record[key] = {"set": value, "before": env.get(key)}
        env[key] = value
    folder = ws.claude_dir / "commands"
    to_write = _commands_to_write(folder)  # someone else's file there: refused before any write
    added, set_values = _add_protection(ws, data, sandbox, entry, created)
    report.denied = lists["permissions.deny"]
    report.sandbox = sandbox
    entry = {
        "hooks": new_hooks,
        "env": env_record,
        "lists": added,
        "values": set_values,
        "created": sorted(set(created)),
        "original": entry.get("original"),
    }
    manifest["files"][name] = entry
    # The record first: a failure after it (a full disk) leaves a record of changes maybe not
    # made, which uninstall takes back harmlessly; the other way round, the user's own values
    # (`before`) would be lost.
    _write_manifest(ws, manifest)
    _save(path, data, report)
    entry["original"] = entry["original"] or (str(report.backup) if report.backup else None)
    # The same hooks in the other file would run twice per Stop: take loopdeck's own out of it.
    other = SHARED if local else LOCAL
    if (ws.claude_dir / other).exists():
        moved = _remove(ws, other, manifest, report)
        if moved:
            report.moved_from = ws.claude_dir / other
    _write_manifest(ws, manifest)
    for target, text in to_write:
        write_bytes(target, text.encode("utf-8"))  # a planted symlink is refused, not followed
        report.written.append(target)
    _ignore_private(ws)
    gitexclude.ensure(ws.root, install=local)  # settings.local.json's home paths stay uncommitted
    precompile()
    return report


def precompile(package: Path | None = None) -> bool:
    """Compile loopdeck's modules to bytecode now, where the hooks will find it: the Stop hook
    starts a fresh interpreter on every turn of the agent, and a module without its bytecode is
    compiled on every start when its folder cannot be written (a system install), or on the
    first turn otherwise. Written beside the sources as the hook's interpreter (`-I`: no
    `PYTHONPYCACHEPREFIX`; no `-O`: level 0) looks for it, checked by timestamp (a hash-checked
    file, `SOURCE_DATE_EPOCH`'s default, would read and hash every source at every Stop). A
    folder that cannot be written is no failure: the hook still runs, compiling as it goes.
    Whether everything compiled."""
    import compileall
    import py_compile

    folder = package or LAUNCHER.parent
    saved = sys.pycache_prefix
    sys.pycache_prefix = None
    timestamp = py_compile.PycInvalidationMode.TIMESTAMP
    try:
        return bool(
            compileall.compile_dir(folder, quiet=2, workers=1, optimize=0, invalidation_mode=timestamp)
        )
    except OSError:
        return False
    finally:
        sys.pycache_prefix = saved


IGNORE = "# written by loopdeck: this folder is loopdeck's own (logs, caches, its install record)\n*\n"
"""`.claude/loopdeck/.gitignore`: the folder ignores itself, so `git status` never lists it and
nothing in it is committed by accident (no change to the project's own `.gitignore`)."""


def _ignore_private(ws: Workspace) -> None:
    target = ws.private_dir / ".gitignore"
    try:
        current = read_regular(target).decode("utf-8", "replace")
    except FileNotFoundError:
        current = None
    if current is None:
        write_bytes(target, IGNORE.encode("utf-8"))


def _folders(ws: Workspace) -> tuple[Path, ...]:
    """The folders install may create, outermost first."""
    return (ws.claude_dir, ws.claude_dir / "commands", ws.private_dir)


def _commands_to_write(folder: Path) -> list[tuple[Path, str]]:
    """The slash command files that are missing or out of date; FileProblem for one that is
    someone else's."""
    out = []
    for file_name, text in commands().items():
        target = folder / file_name
        try:
            current = read_regular(target).decode("utf-8", "replace")
        except FileNotFoundError:
            current = None
        if current is not None and MARKER not in current:
            raise FileProblem(target, "exists and was not written by loopdeck; move it away first")
        if current != text:
            out.append((target, text))
    return out


def _remove(ws: Workspace, name: str, manifest: dict[str, Any], report: Report) -> bool:
    """Take loopdeck's entries out of one settings file; True when the file changed."""
    path = ws.claude_dir / name
    entry = manifest["files"].pop(name, None) or {}
    recorded = _recorded_commands(entry)
    created = set(entry.get("created") or [])
    data = _load(path)
    hooks = data.get("hooks")
    if isinstance(hooks, dict):
        for event in list(hooks):
            groups = hooks[event]
            if not isinstance(groups, list):
                continue
            kept = []
            for group in groups:
                inner = group.get("hooks") if isinstance(group, dict) else None
                if isinstance(inner, list):
                    rest = [h for h in inner if not _is_ours(h, recorded)]
                    if not rest and len(rest) != len(inner):
                        continue  # a group that held only ours goes with it
                    group = {**group, "hooks": rest}
                kept.append(group)
            hooks[event] = kept
            if not kept and f"hooks.{event}" in created:
                del hooks[event]
        if not hooks and "hooks" in created:
            del data["hooks"]
    env = data.get("env")
    records = entry.get("env")
    if isinstance(env, dict) and isinstance(records, dict):
        for key, record in records.items():
            if not isinstance(record, dict) or env.get(key) != record.get("set"):
                continue  # changed since: the user's now
            before = record.get("before")
            if before is None:
                del env[key]
            else:
                env[key] = before
        if not env and "env" in created:
            del data["env"]
    _take_protection(data, entry, created)
    if not path.exists():
        return False
    if not data and "file" in created and (_read_text(path) or "").strip():
        check_parent(path)
        path.unlink()  # it held only what install put there: nothing of the person's to back up
        report.removed.append(path)
        report.changed = True
        return True
    return _save(path, data, report)


def uninstall(ws: Workspace, *, local: bool = True) -> Report:
    """Take out what `install` added, from both settings files, and the command files it wrote."""
    _refuse_unsafe(ws)
    manifest = _read_manifest(ws)
    report = Report(ws.claude_dir / (LOCAL if local else SHARED))
    for name in (LOCAL, SHARED):
        if (ws.claude_dir / name).exists():
            _remove(ws, name, manifest, report)
    _write_manifest(ws, manifest)
    folder = ws.claude_dir / "commands"
    for name in commands():
        target = folder / name
        try:
            current = read_regular(target).decode("utf-8", "replace")
        except FileNotFoundError:
            continue
        if MARKER in current:
            target.unlink()
            report.removed.append(target)
    _tidy(ws, manifest)
    return report


def _tidy(ws: Workspace, manifest: dict[str, Any]) -> None:
    """After an uninstall: the folders install created go if nothing else is left in them (the
    private folder's own `.gitignore` aside); a folder holding anything else stays."""
    if manifest["files"]:
        return  # still installed in a settings file
    ignore = ws.private_dir / ".gitignore"
    with contextlib.suppress(OSError):
        ours = not ignore.is_symlink() and read_regular(ignore).decode("utf-8", "replace") == IGNORE
        if ours and [p.name for p in ws.private_dir.iterdir()] == [".gitignore"]:
            ignore.unlink()
    created = set(manifest.get("folders") or [])
    for folder in reversed(_folders(ws)):
        if str(folder.relative_to(ws.root)) in created and not folder.is_symlink():
            with contextlib.suppress(OSError):
                folder.rmdir()  # only an empty folder: never anything of anyone's
