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

import compileall
import contextlib
import os
import py_compile
import re
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loop.cli.place import LAUNCHER as LAUNCHER  # tests put another in its place
from loop.cli.place import where_installed as where_installed  # doctor and tests look here
from loop.cli.protection import (
    add_protection,
    check_shapes,
    protection,
    take_protection,
)
from loop.cli.protection import deny_rules as deny_rules  # where tests and older callers look
from loop.cli.protection import sandbox_missing as sandbox_missing
from loop.cli.settings_file import (
    LOCAL,
    SHARED,
    Report,
    expect,
    load,
    read_manifest,
    read_text,
    refuse_unsafe,
    save,
    write_manifest,
)
from loop.core.errors import FileProblem
from loop.store import gitexclude
from loop.store.paths import Workspace
from loop.store.safeopen import check_parent, read_regular, write_bytes

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


_EXE = r"(?:'[^']*/loopdeck'|[^\s']*/loopdeck|\S+ (?:-I )?-m loop\.cli)"
_LAUNCHED = r"(?:'[^']*'|[^\s']+) -I (?:-S )?(?:'[^']*/loop/launcher\.py'|[^\s']*/loop/launcher\.py)"
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
"""The exact shape of a command loopdeck writes: `<abs python> -I <abs path>/loop/launcher.py
stop|prompt` (`-I -S` in older installs), or an older install's `<abs path>/loopdeck hook
stop|prompt` (or the `python -m loop.cli` form). Nothing else is taken for ours, so another
tool's `… hook stop` is left alone even without the install record."""


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
    launcher = next((a for a in argv[1:4] if a.endswith("/loop/launcher.py")), None)
    if launcher is not None and not os.path.isfile(launcher):
        found.append(f"{launcher} does not exist")
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
    manifest = read_manifest(ws)
    out: list[Installed] = []
    for name in (LOCAL, SHARED):
        path = ws.claude_dir / name
        data = load(path)
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
    """The start of every hook command: this interpreter, isolated (`-I`),
    on the launcher (`loop/launcher.py` says why). The interpreter's path is kept as it is, not
    resolved: a virtual environment's `python` is a link, and the environment is found through
    it. Where there is no launcher file to run (a zipped install), the `loopdeck` command."""
    python = sys.executable
    if python and os.path.isabs(python) and LAUNCHER.is_file():
        return shlex.join([python, "-I", str(LAUNCHER)])
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
    refuse_unsafe(ws, commands())
    data = load(path)
    manifest = read_manifest(ws)
    entry: dict[str, Any] = manifest["files"].get(name) or {"hooks": {}, "env": {}, "created": []}
    recorded = _recorded_commands(entry)
    created: list[str] = list(entry.get("created") or [])
    if not path.exists():
        created.append("file")  # the whole file is loopdeck's: uninstall removes it
    folders = set(manifest.get("folders") or [])
    folders |= {str(f.relative_to(ws.root)) for f in _folders(ws) if not f.exists()}
    manifest["folders"] = sorted(folders)
    planned = _plan_hooks(data, path, runner, created)
    wanted_env = {TODO_TOOLS: "1"} if keep_block_cap else {BLOCK_CAP: "0", TODO_TOOLS: "1"}
    if "env" not in data:
        created.append("env")
    env = expect(data, "env", dict, path, '"env"')
    sandbox = sandbox or bool(entry.get("values"))  # an earlier --sandbox stays until uninstall
    lists, values = protection(ws, sandbox)
    check_shapes(data, path, [*lists, *values], {**{k: list for k in lists}, **{k: object for k in values}})
    # Every check passed: from here on the data is only changed.
    new_hooks = _merge_hooks(planned, recorded)
    env_record: dict[str, Any] = dict(entry.get("env") or {})
    for key, value in wanted_env.items():
        if key not in env_record:
            env_record[key] = {"set": value, "before": env.get(key)}
        env[key] = value
    folder = ws.claude_dir / "commands"
    to_write = _commands_to_write(folder)  # someone else's file there: refused before any write
    added, set_values = add_protection(ws, data, sandbox, entry, created)
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
    write_manifest(ws, manifest)
    save(path, data, report)
    entry["original"] = entry["original"] or (str(report.backup) if report.backup else None)
    # The same hooks in the other file would run twice per Stop: take loopdeck's own out of it.
    other = SHARED if local else LOCAL
    if (ws.claude_dir / other).exists() and _remove(ws, other, manifest, report):
        report.moved_from = ws.claude_dir / other
    write_manifest(ws, manifest)
    for target, text in to_write:
        write_bytes(target, text.encode("utf-8"))  # a planted symlink is refused, not followed
        report.written.append(target)
    _ignore_private(ws)
    gitexclude.ensure(ws.root, install=local)  # settings.local.json's home paths stay uncommitted
    precompile()
    return report


Planned = list[tuple[list[Any], str, dict[str, Any]]]
"""Each hook event's list of groups in the settings, the event, and loopdeck's entry for it."""


def _plan_hooks(data: dict[str, Any], path: Path, runner: str, created: list[str]) -> Planned:
    """loopdeck's entry for each hook event, beside the settings' list it goes into: every
    shape is checked here, before anything is changed."""
    if "hooks" not in data:
        created.append("hooks")
    hooks = expect(data, "hooks", dict, path, '"hooks"')
    planned: Planned = []
    for event, (argument, timeout) in HOOKS.items():
        if event not in hooks:
            created.append(f"hooks.{event}")
        ours = {"type": "command", "command": hook_command(runner, argument), "timeout": timeout}
        planned.append((expect(hooks, event, list, path, f'"hooks.{event}"'), event, ours))
    return planned


def _merge_hooks(planned: Planned, recorded: set[str]) -> dict[str, list[str]]:
    """Put loopdeck's entries in place of its earlier ones (the first found; a new group where
    there is none); the commands written, by event, for the install record."""
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
    return new_hooks


def precompile(package: Path | None = None) -> bool:
    """Compile loopdeck's modules to bytecode now, where the hooks will find it: the Stop hook
    starts a fresh interpreter on every turn of the agent, and a module without its bytecode is
    compiled on every start when its folder cannot be written (a system install), or on the
    first turn otherwise. Written beside the sources as the hook's interpreter (`-I`: no
    `PYTHONPYCACHEPREFIX`; no `-O`: level 0) looks for it, checked by timestamp (a hash-checked
    file, `SOURCE_DATE_EPOCH`'s default, would read and hash every source at every Stop). A
    folder that cannot be written is no failure: the hook still runs, compiling as it goes.
    Whether everything compiled."""
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
    data = load(path)
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
    take_protection(data, entry, created)
    if not path.exists():
        return False
    if not data and "file" in created and (read_text(path) or "").strip():
        check_parent(path)
        path.unlink()  # it held only what install put there: nothing of the person's to back up
        report.removed.append(path)
        report.changed = True
        return True
    return save(path, data, report)


def uninstall(ws: Workspace, *, local: bool = True) -> Report:
    """Take out what `install` added, from both settings files, and the command files it wrote."""
    refuse_unsafe(ws, commands())
    manifest = read_manifest(ws)
    report = Report(ws.claude_dir / (LOCAL if local else SHARED))
    for name in (LOCAL, SHARED):
        if (ws.claude_dir / name).exists():
            _remove(ws, name, manifest, report)
    write_manifest(ws, manifest)
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
