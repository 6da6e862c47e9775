"""What a person alone may do to a loop's state from a terminal: confirm a loop nobody on this
machine started (`trust`), and put a corrupt state's backup back (`restore`)."""

from __future__ import annotations

import argparse

from loop import trust
from loop.cli.confirm import confirm_and_record
from loop.cli.options import workspace_of
from loop.core.engine import refusal
from loop.core.errors import LoopdeckError
from loop.core.model import LoopState
from loop.core.timeutil import utcnow
from loop.core.visible import visible
from loop.drivers import writer
from loop.store import control
from loop.store.journal import Journal
from loop.store.paths import Workspace
from loop.store.state import StateStore
from loop.trust import key
from loop.trust.person import refuse_inside_agent


def cmd_trust(args: argparse.Namespace) -> int:
    """A person confirms a loop nobody on this machine started (or whose values changed): what
    it names is shown in full first, and nothing is confirmed inside an agent's session."""
    refuse_inside_agent("`loopdeck trust`")
    ws = workspace_of(args)
    state = StateStore(ws).read()
    if state is None:
        raise LoopdeckError(f"no loop in {ws.root}: nothing to confirm")
    pending = trust.unconfirmed(ws, state)
    queued = _queued_lines(ws, state)
    if not pending:
        print("loopdeck: everything this loop names was confirmed on this machine")
        for line in queued:
            print(line)
        return 0
    print(visible(f"The loop in {ws.root} names what nobody on this machine confirmed:"))
    for line in pending:
        print(f"  {visible(line)}")
    if any(line.startswith("prompt:") for line in pending):
        print("Its whole prompt (sent to the agent's model every iteration):")
        for line in state.prompt.splitlines() or [""]:
            print(f"  | {visible(line)}")
    for line in queued:
        print(line)
    print(
        "Confirming lets loopdeck run these commands, send its prompt to the agent, notify these "
        "targets and write these paths, in this folder, from now on (a change asks again)."
    )

    confirm_and_record(ws, args.yes, lambda: trust.record(ws, state, "trust"))
    waiting = state.waiting_for or {}
    if state.active and waiting.get("escalation") == "unconfirmed":
        command = control.queue(
            ws, "resume", source="cli", reason="confirmed with loopdeck trust", key=key.for_person(ws.root)
        )
        print(f"loopdeck: resume queued (id {command.id}): the runner goes on")
    return 0


def _queued_lines(ws: Workspace, state: LoopState) -> list[str]:
    """The loop's queued, unapplied commands, each marked with whether it will be applied: a
    queue committed with the repository must not ride on a confirmation."""
    commands, _bad, _end = control.read_unapplied(
        ws, state.control_offset, Journal(ws.journal), key.reader(ws.root)
    )
    if not commands:
        return []
    lines = [f"Commands queued for this loop, not applied yet ({len(commands)}):"]
    for command in commands:
        why = refusal(command)
        mark = "from a person here" if why is None and command.person else "from anyone (a pause)"
        if why is not None:
            mark = f"will be ignored: {why}"
        text = f": {command.reason}" if command.reason else ""
        value = f" {command.value}" if command.value is not None else ""
        lines.append(visible(f"  {command.kind}{value}{text} [{mark}]"))
    return lines


def cmd_restore(args: argparse.Namespace) -> int:
    """A person puts the state's last good copy back (the corrupt file is kept beside it); the
    monitor's `b` runs this verb, so the monitor itself never writes the state."""
    refuse_inside_agent("`loopdeck restore`")
    ws = workspace_of(args)
    since = utcnow()
    state = writer.restore_backup(ws, since)
    kept = StateStore(ws).newest_corrupt(since)
    print(
        f"loopdeck: the backup is restored (iteration {state.iteration}, {state.status}); "
        f"the corrupt file is kept as {kept or 'a ….corrupt-<time> file beside it'}"
    )
    return 0
