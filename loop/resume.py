"""Interrupted loops (seed 003 §4.4.4): find one, put the question, carry out the answer.

This first version offers what is safe without further design: resume (restart a dead runner,
or lift a pause) and pause. The fuller protocol (commit or discard uncommitted work, mark a
stopping loop complete) builds on it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass

from loop import control
from loop.paths import Workspace
from loop.safeopen import open_append
from loop.snapshot import Snapshot


@dataclass(frozen=True)
class Interrupted:
    kind: str
    """"running-dead" (status running, its runner gone), "paused" or "stopping"."""
    question: str
    iteration: int
    max_iterations: int
    driver: str | None


def find(snapshot: Snapshot) -> Interrupted | None:
    loop = snapshot.loop
    if loop is None:
        return None
    of = f"{loop.iteration}/{loop.max_iterations}" if loop.max_iterations else str(loop.iteration)
    if loop.status == "running" and loop.driver == "runner" and loop.alive is False:
        kind, question = "running-dead", f"Found in-progress loop (iteration {of}). Resume? [Y/n]"
    elif loop.status == "paused":
        kind, question = "paused", f"Found paused loop. Resume from iteration {of}? [Y/n]"
    elif loop.status == "stopping":
        kind, question = "stopping", f"Loop was stopping (iteration {of}). Resume it? [Y/n]"
    else:
        return None
    return Interrupted(kind, question, loop.iteration, loop.max_iterations, loop.driver)


def runner_needed(snapshot: Snapshot) -> bool:
    """Does acting on this loop need a runner started (its driver is a runner that is gone)?"""
    loop = snapshot.loop
    return (
        loop is not None and loop.driver == "runner" and loop.alive is not True and loop.status != "stopped"
    )


def start_runner(ws: Workspace) -> int:
    """Start `loopdeck run` on the workspace, detached, not headless (a person is watching, so
    an escalation waits for them). Returns its pid."""
    log = ws.private_dir / "runner.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open_append(log) as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "loop.cli", "-C", str(ws.root), "run"],
            cwd=ws.root,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ},
        )
    return proc.pid


def resume(ws: Workspace, snapshot: Snapshot, source: str = "tui") -> str:
    loop = snapshot.loop
    if loop is None:
        return "no loop to resume"
    if loop.status == "paused":
        control.send(ws, "resume", source=source, reason="resumed from the resume prompt")
    if runner_needed(snapshot):
        pid = start_runner(ws)
        return f"runner restarted (pid {pid})"
    if loop.driver in (None, "hook"):
        return "resume queued; it applies at the agent's next Stop"
    return "resume queued"


def pause(ws: Workspace, snapshot: Snapshot, source: str = "tui") -> str:
    if snapshot.loop is None or snapshot.loop.status == "paused":
        return "nothing to pause"
    control.send(ws, "pause", source=source, reason="paused from the resume prompt")
    return "pause queued"
