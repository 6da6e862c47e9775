"""Steering a loop from a terminal: a command queued for its driver (pause, resume, skip,
complete, stop, say, answer, a new limit), and said when it lands."""

from __future__ import annotations

import argparse
import sys
import time

from loop.cli import temporal
from loop.cli.options import workspace_of
from loop.core import workflow
from loop.core.errors import LoopdeckError
from loop.core.model import LoopState
from loop.core.policy import named
from loop.drivers.classify import stop_waiting
from loop.store import control
from loop.store.journal import Journal
from loop.store.proc import alive
from loop.store.state import StateStore
from loop.trust import key
from loop.trust.person import refuse_inside_agent

CONFIRMING = ("complete", "answer", "set-max-iterations", "resume", "stop", "skip", "say")
"""Commands only a person may send (the engine's `PERSON_ONLY`: all but pause): each ends the
loop, lifts a wait for a person or speaks to the agent as a person. Inside an agent's session
they are refused here; elsewhere the line is signed with this user's key (`loop.trust.key`),
and a driver applies none of them unsigned."""


def cmd_steer(args: argparse.Namespace) -> int:
    """`pause`, `skip`, `complete`, `stop`: the verb's name is the command's kind."""
    return steer(args.steering, args)


def cmd_talk(args: argparse.Namespace) -> int:
    """`say`, `answer`: the words given are the command's reason."""
    args.reason = " ".join(args.text).strip()
    return steer(args.steering, args)


def cmd_set_max(args: argparse.Namespace) -> int:
    if args.n < 0:
        raise LoopdeckError("set-max-iterations takes 0 (no limit) or more")
    return steer("set-max-iterations", args, value=args.n)


def steer(kind: str, args: argparse.Namespace, value: int | None = None) -> int:
    if kind in CONFIRMING:
        refuse_inside_agent(f"`loopdeck {kind}`")
    ws = workspace_of(args)

    if temporal.wanted(args, ws):  # the loop is a workflow on a Temporal server: a signal
        return int(temporal.backend().steer(kind, args, ws, value))
    state = StateStore(ws).read()
    if state is None:
        raise LoopdeckError(f"no loop in {ws.root}: nothing to {kind}")
    if not state.active:
        raise LoopdeckError(f"the loop in {ws.root} is {state.status}: nothing to {kind}")
    target = getattr(args, "worker", None)
    quiet = state.waiting_kind in (None, "pause", "usage-limit")
    if kind == "answer" and quiet and not _workers_asking(state):
        held = "; the loop stays paused (`loopdeck resume` resumes it)" if state.status == "paused" else ""
        print(
            f"loopdeck: no question is pending: the answer goes into the agent's next prompt{held}",
            file=sys.stderr,
        )
    if target and "parallel" not in state.extra:
        raise LoopdeckError(f"the loop in {ws.root} has no workers (`run --workers N` starts them)")
    why = workflow.unaimed(state, kind, target)
    if why is not None:
        raise LoopdeckError(f"nothing to {kind} in the loop in {ws.root}: {why}")

    command = control.queue(
        ws,
        kind,
        source="cli",
        reason=args.reason,
        value=value,
        target=target,
        iteration=state.iteration,
        warn=lambda why: print(f"loopdeck: warning: {why}", file=sys.stderr),
        key=key.for_person(ws.root),
    )
    journal = Journal(ws.journal)

    if named(state.driver).in_session and stop_waiting(ws):
        when = "now: the agent's Stop is waiting for it and takes it at once"
    elif named(state.driver).in_session:
        when = "at the agent's next Stop"
    elif alive(state.pid):
        when = "within a second (the runner polls the queue)"
    else:
        when = "when a runner drives the loop again: its runner is gone (`loopdeck resume` restarts it)"
    print(f"loopdeck: {kind} queued (id {command.id}); it applies {when}")
    if args.wait:
        deadline = time.monotonic() + args.wait
        while time.monotonic() < deadline:
            handled = control.handled(journal).get(command.id)
            if handled == "command-applied":
                print(f"loopdeck: {kind} applied")
                return 0
            if handled == "command-refused":
                raise LoopdeckError(f"{kind} was refused: not sent by a person on this machine")
            time.sleep(0.1)
        raise LoopdeckError(f"{kind} was not applied within {args.wait:g} s; it stays queued")
    return 0


def _workers_asking(state: LoopState) -> bool:
    """Whether a worker asks (a plain answer then goes to it: not a "no question" case)."""
    return bool(workflow.asking(state))
