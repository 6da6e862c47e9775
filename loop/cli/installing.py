"""`loopdeck install` as a person runs it: the hooks and slash commands put into `.claude/` (or
taken out), and what was done said a line each. `loopdeck init --hooks` runs it too."""

from __future__ import annotations

import argparse
import sys

from loop.cli import install, protection, settings_file
from loop.cli.doctor import require_usable
from loop.cli.options import workspace_here
from loop.store.paths import Workspace


def cmd_install(args: argparse.Namespace) -> int:
    ws = workspace_here(args)
    if args.uninstall:
        report = install.uninstall(ws, local=not args.shared)
        print(
            f"loopdeck: removed the Stop hook from {report.settings}"
            if report.changed
            else f"loopdeck: no loopdeck hook in {report.settings}"
        )
        for path in report.removed:
            print(f"loopdeck: removed {path}")
        if report.backup is not None:
            print(f"loopdeck: the previous settings are in {report.backup}")
        return 0
    install_hooks(ws, keep_block_cap=args.keep_block_cap, local=not args.shared, sandbox=args.sandbox)
    return 0


def install_hooks(
    ws: Workspace, *, keep_block_cap: bool = False, local: bool = True, sandbox: bool = False
) -> None:
    """What `loopdeck install` does and says (`loopdeck init --hooks` runs it too)."""
    require_usable()  # the Python and launcher the hooks will name exist, before any write
    existed = (ws.claude_dir / (settings_file.LOCAL if local else settings_file.SHARED)).exists()
    report = install.install(ws, keep_block_cap=keep_block_cap, local=local, sandbox=sandbox)
    state = ("updated" if existed else "created") if report.changed else "already up to date"
    print(f"loopdeck: Stop hook in {report.settings} {state}")
    for line in protection.notes(report):
        print(f"loopdeck: {line}")
    for path in report.written:
        print(f"loopdeck: wrote {path}")
    if not keep_block_cap:
        print(
            "loopdeck: CLAUDE_CODE_STOP_HOOK_BLOCK_CAP=0, so Claude Code does not end a turn after 8 blocks"
        )
    kind, folder = install.where_installed()
    print(f"loopdeck: the hooks run {install.hook_runner()}")
    if kind == "clone":
        print(
            f"loopdeck: warning: that is a development clone ({folder}): moving or deleting it "
            f"breaks these hooks; for hooks that last, install loopdeck as a tool (pipx install "
            f"{folder}) and run `loopdeck install` here again",
            file=sys.stderr,
        )
    print(
        "loopdeck: if this loopdeck is moved, upgraded into another environment or removed, run "
        "`loopdeck install` here again (`loopdeck doctor` tells when the hooks are broken)"
    )
    if report.backup is not None:
        print(f"loopdeck: the previous settings are in {report.backup}")
