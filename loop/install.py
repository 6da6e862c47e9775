"""`loopdeck install`: put the Stop hook and the slash commands into a project's `.claude/`.

Claude Code runs hooks without the user's virtual environment on PATH, so the hook command
names this loopdeck by its absolute path. The settings file is merged, never replaced: every
other key stays, the old file is backed up, and a file that is not valid JSON is refused with
its line and column rather than "fixed". Running it twice changes nothing the second time.
"""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loop.errors import FileProblem
from loop.frontmatter import atomic_write
from loop.paths import Workspace
from loop.safeopen import write_bytes
from loop.timeutil import utcnow

HOOK_MARK = "hook stop"
BLOCK_CAP = "CLAUDE_CODE_STOP_HOOK_BLOCK_CAP"
MARKER = "<!-- written by loopdeck install; `loopdeck install --uninstall` removes it -->"
HOOK_TIMEOUT = 600
"""Claude Code's default: verification commands run inside the hook when the agent signals completion."""


def loopdeck_command() -> str:
    """The absolute command that runs this loopdeck, whatever PATH Claude Code has."""
    argv0 = Path(sys.argv[0])
    if argv0.name == "loopdeck" and argv0.exists():
        return shlex.quote(str(argv0.resolve()))
    found = shutil.which("loopdeck")
    if found:
        return shlex.quote(str(Path(found).resolve()))
    return f"{shlex.quote(sys.executable)} -m loop.cli"


def _is_ours(hook: Any) -> bool:
    if not isinstance(hook, dict):
        return False
    command = hook.get("command")
    return isinstance(command, str) and HOOK_MARK in command and "loop" in command


def commands(exe: str) -> dict[str, str]:
    return {
        "orchestrator-loop.md": f"""---
description: Start a loopdeck loop that keeps working until every task source is empty and verified
argument-hint: PROMPT [--max-iterations N] [--completion-promise TEXT] [--task-file PATH]
allowed-tools: Bash({exe} start:*)
---
{MARKER}

```!
{exe} start $ARGUMENTS
```

The orchestrator loop has started for the task above. Work on it now. When you try to stop,
loopdeck's Stop hook checks every task source and sends you back to work while anything is
pending, then runs verification loops. Signal completion only when it is completely true.
""",
        "loop-status.md": f"""---
description: Show the loopdeck loop's state and its task sources
allowed-tools: Bash({exe} status:*)
---
{MARKER}

```!
{exe} status
```
""",
        "loop-pause.md": f"""---
description: Pause the loopdeck loop (it is kept; `loopdeck resume` continues it)
allowed-tools: Bash({exe} pause:*)
---
{MARKER}

```!
{exe} pause --reason "paused from /loop-pause"
```

The loop is paused: you may stop after this turn.
""",
        "loop-cancel.md": f"""---
description: Stop the loopdeck loop (it is kept, status stopped)
allowed-tools: Bash({exe} stop:*)
---
{MARKER}

```!
{exe} stop --reason "cancelled from /loop-cancel"
```

The loop is stopped: you may stop after this turn.
""",
    }


@dataclass
class Report:
    settings: Path
    changed: bool = False
    backup: Path | None = None
    written: list[Path] = field(default_factory=list)
    removed: list[Path] = field(default_factory=list)


def _load(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except UnicodeDecodeError as exc:
        raise FileProblem(path, f"not UTF-8 text (byte {exc.start}); expected JSON settings") from None
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FileProblem(
            path, f"not valid JSON (column {exc.colno}: {exc.msg}); fix it and run again", exc.lineno
        ) from None
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


def _save(path: Path, data: dict[str, Any], report: Report) -> None:
    new = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    try:
        old = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        old = None
    if old == new:
        return
    if old is not None:
        report.backup = path.with_name(f"{path.name}.bak-{utcnow().strftime('%Y%m%dT%H%M%S')}")
        shutil.copy2(path, report.backup)
    atomic_write(path, new.encode("utf-8"))  # never through a symlink, never outside .claude/
    report.changed = True


def install(
    ws: Workspace, *, keep_block_cap: bool = False, local: bool = False, exe: str | None = None
) -> Report:
    exe = exe or loopdeck_command()
    path = ws.claude_dir / ("settings.local.json" if local else "settings.json")
    report = Report(path)
    data = _load(path)
    hooks = _expect(data, "hooks", dict, path, '"hooks"')
    stop = _expect(hooks, "Stop", list, path, '"hooks.Stop"')
    command = f"{exe} hook stop"
    ours = {"type": "command", "command": command, "timeout": HOOK_TIMEOUT}
    found = False
    for group in stop:
        inner = group.get("hooks") if isinstance(group, dict) else None
        if not isinstance(inner, list):
            continue
        for index, hook in enumerate(inner):
            if _is_ours(hook) and not found:
                inner[index] = {**hook, **ours}
                found = True
    if not found:
        stop.append({"hooks": [ours]})
    if not keep_block_cap:
        env = _expect(data, "env", dict, path, '"env"')
        env[BLOCK_CAP] = "0"
    _save(path, data, report)
    folder = ws.claude_dir / "commands"
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in commands(exe).items():
        target = folder / name
        if target.exists() and MARKER not in target.read_text(encoding="utf-8", errors="replace"):
            raise FileProblem(target, "exists and was not written by loopdeck; move it away first")
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            write_bytes(target, text.encode("utf-8"))  # a planted symlink is refused, not followed
            report.written.append(target)
    return report


def uninstall(ws: Workspace, *, local: bool = False) -> Report:
    path = ws.claude_dir / ("settings.local.json" if local else "settings.json")
    report = Report(path)
    data = _load(path)
    hooks = data.get("hooks")
    if isinstance(hooks, dict) and isinstance(hooks.get("Stop"), list):
        kept_groups = []
        for group in hooks["Stop"]:
            inner = group.get("hooks") if isinstance(group, dict) else None
            if isinstance(inner, list):
                rest = [h for h in inner if not _is_ours(h)]
                if not rest and inner:
                    continue
                group = {**group, "hooks": rest}
            kept_groups.append(group)
        if kept_groups:
            hooks["Stop"] = kept_groups
        else:
            del hooks["Stop"]
        if not hooks:
            del data["hooks"]
    env = data.get("env")
    if isinstance(env, dict) and env.get(BLOCK_CAP) == "0":
        del env[BLOCK_CAP]
        if not env:
            del data["env"]
    if path.exists():
        _save(path, data, report)
    folder = ws.claude_dir / "commands"
    for name in commands("loopdeck"):
        target = folder / name
        if target.exists() and MARKER in target.read_text(encoding="utf-8", errors="replace"):
            target.unlink()
            report.removed.append(target)
    return report
