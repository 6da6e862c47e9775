"""`loopdeck config`: the saved defaults, each with the file it comes from; `--trust` confirms
the values a workspace's file (`.loopdeck.toml`, pyproject.toml's `[tool.loopdeck]`) names."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from loop import trust
from loop.cli.confirm import confirm_and_record
from loop.core.redact import redact
from loop.store.config import KEYS, Config, ConfigFile, load
from loop.store.paths import Workspace, find_workspace
from loop.trust.person import refuse_inside_agent

BUILT_IN: dict[str, Any] = {
    "agent": "claude",
    "fallback_agent": None,
    "notify": [],
    "verify": [],
    "verify_allow": [],
    "max_iterations": 100,
    "max_cost": None,
    "stuck_after": 2,
    "same_error_after": 3,
    "iteration_timeout": 1800,
    "retries": 2,
    "sandbox": "auto",
    "sandbox_net": True,
    "sandbox_env": [],
    "worktree_copy": [],
    "worktree_setup": [],
    "port_base": 20000,
    "ports_per_worker": 100,
}
"""What loopdeck uses when neither the command line nor a file says (see each option's help)."""
assert tuple(BUILT_IN) == tuple(KEYS)


def _shown(value: Any) -> str:
    if value is None or value == []:
        return "(none)"
    if isinstance(value, list):
        return redact(", ".join(str(v) for v in value))
    return redact(str(value))


def rows(config: Config, pending: set[str]) -> list[dict[str, Any]]:
    """Each key: its value, where it comes from, and whether a person must confirm it first."""
    out = []
    for key in KEYS:
        found = config.origin(key)
        value = config.get(key) if found is not None else BUILT_IN[key]
        out.append(
            {
                "key": key,
                "value": value,
                "from": found.kind if found is not None else "built-in",
                "file": found.shown if found is not None else None,
                "option": KEYS[key][2],
                "confirmed": key not in pending,
            }
        )
    return out


def _file_line(label: str, file: ConfigFile) -> str:
    if file.ignored:
        return f"{label}{file.shown} (not used: {file.ignored})"
    return f"{label}{file.shown}" + ("" if file.exists else " (none)")


def cmd_config(args: argparse.Namespace) -> int:
    ws = Workspace(Path(args.workspace).resolve()) if args.workspace else find_workspace()
    config = load(ws.root)
    contributed = config.from_workspace()
    pending_lines = trust.config_unconfirmed(ws, contributed) if contributed else []
    pending = {line.split(":", 1)[0] for line in pending_lines}
    if args.trust:
        return _confirm(ws, config, contributed, pending_lines, args.yes)
    table = rows(config, pending)
    if args.json:
        data = {
            "values": table,
            "user_file": {
                "path": str(config.user.path),
                "exists": config.user.exists,
                "ignored": config.user.ignored,
            },
            "project_file": {
                "path": config.project.shown,
                "exists": config.project.exists,
                "confirmed": not pending_lines,
            },
        }
        print(json.dumps(data, indent=2, ensure_ascii=False, default=str))
        return 0
    width = max(len(k) for k in KEYS) + 2
    print(f"{'KEY':<{width}}{'VALUE':<34}FROM")
    for row in table:
        where = row["from"] if row["file"] is None else f"{row['from']}: {row['file']}"
        if not row["confirmed"]:
            where += "  (NOT CONFIRMED on this machine: loopdeck config --trust)"
        print(f"{row['key']:<{width}}{_shown(row['value']):<34}{where}")
    print()
    print(_file_line("user file:    ", config.user))
    print(_file_line("project file: ", config.project))
    print(
        "The command line wins over both files, the project's file over yours; a loop that "
        "exists keeps the values it started with."
    )
    return 0


def _confirm(
    ws: Workspace, config: Config, contributed: dict[str, Any], pending: list[str], yes: bool
) -> int:
    """A person confirms the workspace file's values (shown in full first), outside an agent."""
    refuse_inside_agent("`loopdeck config --trust`")
    if not contributed:
        print(f"loopdeck: no project file values to confirm ({config.project.shown})")
        return 0
    if not pending:
        print(f"loopdeck: every value of {config.project.shown} was confirmed on this machine")
        return 0
    print(f"{config.project.shown} names values nobody on this machine confirmed:")
    for line in pending:
        print(f"  {line}")
    print(
        "Confirming lets `run`, `start` and /orchestrator-loop in this folder use them (agents and "
        "commands it names will run, targets will be told); a change asks again."
    )

    confirm_and_record(ws, yes, lambda: trust.record_config(ws, contributed, "config --trust"))
    return 0
