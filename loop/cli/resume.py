"""`loopdeck resume`: an interrupted loop taken up again, whatever stopped it (a pause, a wait
for a person, a crash, a corrupt state), with a person's answer at each step that needs one."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from loop import trust
from loop.cli import temporal
from loop.cli.options import workspace_of
from loop.cli.steer import steer
from loop.core import engine
from loop.core.errors import LoopdeckError
from loop.core.model import LoopState
from loop.core.policy import named
from loop.core.timeutil import utcnow
from loop.drivers import classify, resume, writer
from loop.drivers.start import confirm
from loop.store import control
from loop.store.archive import latest
from loop.store.journal import Journal
from loop.store.paths import Workspace
from loop.store.state import StateStore, backup_of_this_loop
from loop.trust import key
from loop.trust.person import refuse_inside_agent
from loop.views.summary import archived_lines


def _asker(args: argparse.Namespace) -> Any:
    """How to put a question: `--yes`/`--no` answer it for scripts; a terminal asks a person."""

    def ask(question: str, choices: tuple[str, ...] = ("y", "n")) -> str:
        print(question, flush=True)
        if args.yes:
            return choices[0]
        if args.no:
            return choices[-1]
        if not sys.stdin.isatty():
            raise LoopdeckError("resume needs an answer: pass --yes or --no (input is not a terminal)")
        answer = input("> ").strip().lower()
        return answer[:1] if answer else choices[0]

    return ask


def cmd_resume(args: argparse.Namespace) -> int:
    """`loopdeck resume`: a paused loop with a live driver gets the command; any other
    interrupted loop goes through the resumption flow (see `loop.drivers.resume`)."""
    refuse_inside_agent("`loopdeck resume` (it lifts a wait for a person)")
    ws = workspace_of(args)
    if args.worker or temporal.wanted(args, ws):
        return _send_to_running(args)
    ask = _asker(args)
    found = classify.read(ws)
    if found.kind == "corrupt":
        if not _recover(ws, found, args, ask):
            return 0
        found = classify.read(ws)
    state = _resumable(ws, found)
    if state is None:
        return 0
    queued, _bad, _end = control.read_unapplied(
        ws, state.control_offset, Journal(ws.journal), key.reader(ws.root)
    )
    held = engine.held_at_limit(state, queued)
    if held is not None:
        raise LoopdeckError(f"not resumed: {held} (in {ws.root})")
    if found.kind == "live" or (found.kind in ("paused", "waiting") and found.driver_alive):
        return _queue_resume(ws, found, args)  # its driver is there to apply a command
    if ask(found.question or "Resume? [Y/n]") != "y" or not _confirmed(ws, state, ask):
        print("loopdeck: left as it is")
        return 0
    _uncommitted(ws, state, args, ask)
    seen, new = resume.carry_out(ws, found.kind)
    if new is None:
        raise LoopdeckError(f"the loop changed meanwhile (now {seen.kind}); run `loopdeck resume` again")
    print(f"loopdeck: loop resumed at iteration {new.iteration}" if new.status != "completed" else "")
    for line in resume.next_steps(ws, new):
        print(f"loopdeck: {line}")
    if new.status == "completed":
        _show_archive(ws)
    return 0


def _send_to_running(args: argparse.Namespace) -> int:
    """One parallel worker, or a loop on Temporal: a command for the running loop."""
    if args.no:
        whom = f"worker {args.worker}" if args.worker else "the loop"
        print(f"loopdeck: would send `resume` to {whom}; nothing sent (--no)")
        return 0
    return steer("resume", args)


def _resumable(ws: Workspace, found: Any) -> LoopState | None:
    """The loop to resume; None when there is nothing left to do (a completed loop whose
    archiving was interrupted is archived here); LoopdeckError when it cannot be resumed."""
    if found.kind == "none":
        last = latest(ws)
        where = f"; the last one is archived in {last} (`loopdeck status` shows it)" if last else ""
        raise LoopdeckError(f"no loop in {ws.root} to resume{where}")
    state: LoopState = found.state
    if found.kind == "ended" and state.status == "completed":
        folder = resume.finish_completed(ws)  # completed, its driver killed before archiving it
        if folder is not None:
            print(f"loopdeck: the loop had completed; archived in {folder} (`loopdeck status` shows it)")
            return None
    if found.kind == "ended":
        raise LoopdeckError(
            f"the loop in {ws.root} has {state.status}; `loopdeck run` continues a stopped loop, "
            "`loopdeck start --force` starts a new one"
        )
    return state


def _queue_resume(ws: Workspace, found: Any, args: argparse.Namespace) -> int:
    """A loop whose driver is alive: a resume command for it (a running loop: it lifts a
    queued pause), and with `--wait`, wait until it is applied."""
    state = found.state
    if found.kind == "waiting":
        print(found.waiting_reason)
    if args.no:  # only say what would be done: `--no` never queues anything
        if not named(state.driver).in_session:
            who = f"the loop is {state.status} and its runner (pid {state.pid}) is alive"
            then = "it applies within a second"
        else:
            who, then = f"the loop is {state.status}", "the session's next Stop applies"
        print(f"loopdeck: {who}: `loopdeck resume` would queue a resume {then}; nothing sent (--no)")
        return 0
    command_id = resume.send_resume(ws, "cli", args.reason or "loopdeck resume", state.iteration)
    if not named(state.driver).in_session:
        print(f"loopdeck: resume queued (id {command_id}); the runner (pid {state.pid}) applies it")
    else:
        print(
            f"loopdeck: resume queued (id {command_id}); it applies at the session's next Stop: "
            "say `continue` in the Claude Code session"
        )
    if not args.wait:
        return 0
    deadline = time.monotonic() + args.wait
    while time.monotonic() < deadline:
        if command_id in control.applied_ids(Journal(ws.journal)):
            print("loopdeck: resume applied")
            return 0
        time.sleep(0.1)
    raise LoopdeckError(f"resume was not applied within {args.wait:g} s; it stays queued")


def _confirmed(ws: Workspace, state: LoopState, ask: Any) -> bool:
    """Whoever drives the loop next (a restarted runner, the next session's Stop) runs what it
    names: what nobody here confirmed, the person confirms first (`--yes` does)."""
    pending = trust.unconfirmed(ws, state)
    if not pending:
        return True
    print("The loop names what nobody on this machine confirmed:")
    for line in pending:
        print(f"  {line}")
    if ask("Confirm it and resume? [Y/n]") != "y":
        return False
    for line in confirm(ws, state, "resume"):
        print(f"loopdeck: {line}")
    return True


def _uncommitted(ws: Workspace, state: LoopState, args: argparse.Namespace, ask: Any) -> None:
    """Uncommitted changes in the working tree: kept, committed or stashed, as `--git` or the
    person says."""
    changes = resume.uncommitted(ws)
    if not changes:
        return
    print(resume.describe_changes(changes))
    choice = args.git
    if choice is None:
        words = "Continue with them [c], commit them [m] or stash them [s]? [C/m/s]"
        letter = ask(words, ("c", "m", "s"))
        choice = {"c": "continue", "m": "commit", "s": "stash"}.get(letter, "continue")
    print(f"loopdeck: {resume.handle_git(ws, choice, state)}")


def _show_archive(ws: Workspace) -> None:
    """A loop that completed as it resumed: its summary, from the archive."""
    last = latest(ws)
    if last is None:
        return
    record = json.loads((last / "summary.json").read_text())
    for line in archived_lines(record):
        print(line)
    print(f"Archive:     {last}")


def _recover(ws: Workspace, found: Any, args: argparse.Namespace, ask: Any) -> bool:
    """A corrupt state: restore the backup or rebuild from the journal, as the person
    chooses; the corrupt file is kept as `….corrupt-<time>`. False when they declined."""
    print(f"loopdeck: {found.error}")
    has_backup = ws.backup.exists() and backup_of_this_loop(ws)
    if ws.backup.exists() and not has_backup:
        print("loopdeck: the backup is of an earlier loop, not this one: it is not offered")
    source = args.source
    if source is None:
        default = "b" if has_backup else "j"
        options = ("b", "j", "n") if has_backup else ("j", "n")
        words = "Restore the backup [b], rebuild from the journal [j] or leave it [n]?"
        if not has_backup:
            words = "There is no backup. Rebuild the state from the journal [j] or leave it [n]?"
        letter = ask(words, options) if not args.no else "n"
        if letter not in options:
            letter = default
        if letter == "n":
            print("loopdeck: left as it is")
            return False
        source = "backup" if letter == "b" else "journal"
    since = utcnow()
    if source == "backup":
        state = writer.restore_backup(ws, since)
        print(f"loopdeck: the backup is restored (iteration {state.iteration}, {state.status})")
    else:
        state, report = writer.rebuild_from_journal(ws, since)
        where = f"iteration {state.iteration}, {state.status}"
        print(f"loopdeck: the state is rebuilt from the journal ({where})")
        for line in report:
            print(f"  {line}")
    kept = StateStore(ws).newest_corrupt(since)
    print(f"loopdeck: the corrupt file is kept as {kept or 'a ….corrupt-<time> file beside it'}")
    return True
