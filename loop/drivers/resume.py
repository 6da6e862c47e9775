"""Resuming an interrupted loop: find what it is doing, ask, carry out the answer.

`loopdeck resume` and the monitor's resume prompt share this module. What the loop *is* comes
from `loop.drivers.classify`; what resuming *does* to the state is the engine's (`engine.resume_flow`),
written by `loop.drivers.writer` under the loop lock, so a resumption is journaled and decided like any
other transition. This module only does what the engine cannot: look at git, start a runner,
and say what to do next in words that lead somewhere that works.

Uncommitted work found at resume is never discarded: it is kept as it is (the default),
committed (the message names the loop and its iteration), or stashed under a name that the
summary and the journal list.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from loop.core import engine
from loop.core.errors import LoopdeckError
from loop.core.model import Aggregate, LoopState
from loop.core.policy import named
from loop.core.timeutil import iso_s, utcnow
from loop.drivers import classify, writer
from loop.drivers.classify import Classification
from loop.sources.aggregate import SourceConfig, check_all
from loop.store import control
from loop.store.archive import latest
from loop.store.journal import Journal
from loop.store.paths import Workspace
from loop.store.safeopen import open_append
from loop.store.state import StateStore
from loop.trust import key
from loop.views.snapshot import Snapshot

GIT_CHOICES = ("continue", "commit", "stash")
"""What to do with uncommitted changes at resume; `continue` (keep them as they are) is the
default and what `--yes` takes. Discarding is not offered."""


@dataclass(frozen=True)
class Interrupted:
    """The monitor's view of a loop to resume: its classification and the question."""

    kind: str
    question: str
    iteration: int
    max_iterations: int
    driver: str | None


def find(snapshot: Snapshot) -> Interrupted | None:
    """An interrupted loop in the snapshot, or None (nothing to resume, or its driver is live
    and the loop running)."""
    loop = snapshot.loop
    if loop is None:
        return None
    state = LoopState(
        iteration=loop.iteration,
        max_iterations=loop.max_iterations,
        status=loop.status,
        driver=loop.driver,
        pid=loop.pid,
        waiting_for=dict(loop.waiting_for) if loop.waiting_for else None,
    )
    try:
        written = Path(loop.state_file).stat().st_mtime
    except OSError:
        written = None
    alive = classify.driver_alive(state, written) if loop.pid else None
    found = classify.classify(state, alive)
    question = found.question
    if question is None:
        return None
    return Interrupted(found.kind, question, loop.iteration, loop.max_iterations, loop.driver)


def runner_needed(snapshot: Snapshot) -> bool:
    """Does acting on this loop need a runner started (its driver is a runner that is gone)?"""
    loop = snapshot.loop
    return (
        loop is not None
        and not named(loop.driver).in_session
        and loop.alive is not True
        and loop.status not in ("stopped", "completed", "failed")
    )


def start_runner(ws: Workspace) -> int:
    """Start `loopdeck run` on the workspace, detached (its own session, so closing the
    terminal does not end it), headless when the loop was last run headless (`runner_argv`).
    Its own output goes to `.claude/loopdeck/runner.log`, the agent's to the iteration logs.
    Returns its pid at once (the monitor must not wait); `restart_runner` also waits for it to
    take the loop."""
    return _spawn_runner(ws).pid


def runner_argv(ws: Workspace) -> list[str]:
    """The command that restarts the loop's runner as it was run: `--headless` when it was (a
    loop nobody watches must not wait at its next escalation for a person who is not there)."""
    argv = [sys.executable, "-I", "-m", "loop.cli", "-C", str(ws.root), "run"]
    try:
        state = StateStore(ws).read()
    except Exception:  # unreadable: the runner started says why
        state = None
    recorded = state.extra.get("runner") if state is not None else None
    if isinstance(recorded, dict) and recorded.get("headless") is True:
        argv.append("--headless")
    return argv


def _spawn_runner(ws: Workspace) -> subprocess.Popen[bytes]:
    log = ws.private_dir / "runner.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    argv = runner_argv(ws)
    with open_append(log) as out:
        return subprocess.Popen(
            argv,
            cwd=ws.root,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ},
        )


CLAIM_WAIT_S = 30.0
"""How long `loopdeck resume` waits for the runner it started to take the loop: the runner
waits up to 30 s for the loop lock itself, so it says by then whether it took it."""


@dataclass(frozen=True)
class Restart:
    """What became of a runner `loopdeck resume` started."""

    pid: int
    """The runner started."""
    driver: int | None
    """The runner that drives the loop now: `pid`, or another that took the loop first; None
    when none does (`why` says what happened)."""
    why: str | None = None


def restart_runner(ws: Workspace, timeout: float = CLAIM_WAIT_S, poll: float = 0.05) -> Restart:
    """Start a runner and wait until it has taken the loop (its pid in the state, or its
    `runner-started` in the journal when it finished the loop at once), or exited without
    taking it, or `timeout` passed. A runner killed before it took the loop would otherwise
    leave the loop `running` with nobody driving it and a person told all is well."""
    log = ws.private_dir / "runner.log"
    try:
        offset = log.stat().st_size
    except OSError:
        offset = 0
    proc = _spawn_runner(ws)
    deadline = time.monotonic() + timeout
    while True:
        driver = _driving(ws, proc.pid)
        if driver is not None:
            return Restart(proc.pid, driver)
        code = proc.poll()
        if code is not None:
            driver = _driving(ws, proc.pid)  # it may have taken the loop and ended it at once
            if driver is not None:
                return Restart(proc.pid, driver)
            said = _last_line(log, offset)
            how = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
            why = f"it ended ({how}) before it took the loop" + (f": {said}" if said else "")
            return Restart(proc.pid, None, why)
        if time.monotonic() >= deadline:
            why = f"it has not taken the loop within {timeout:g} s (still starting?)"
            return Restart(proc.pid, None, why)
        time.sleep(poll)


def _driving(ws: Workspace, started: int) -> int | None:
    """The pid of the runner that drives the loop now, once `started` has taken it (or lost
    it to another live runner); None while nobody has."""
    try:
        state = StateStore(ws).read()
    except Exception:  # a state being replaced or unreadable: not taken yet
        state = None
    if state is not None and not named(state.driver).in_session and state.pid:
        if state.pid == started:
            return started
        if classify.driver_alive(state, classify.state_written_at(ws)):
            return state.pid
    try:
        events = Journal(ws.journal).tail(200).events
    except OSError:
        return None
    taken = any(e.kind == "runner-started" and e.data.get("pid") == started for e in events)
    return started if taken else None


def _last_line(log: Path, offset: int) -> str:
    """The last line the runner wrote to its log (from `offset`: this runner's output only)."""
    try:
        with log.open("rb") as f:
            f.seek(offset)
            text = f.read(256 * 1024).decode("utf-8", "replace")
    except OSError:
        return ""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][-300:] if lines else ""


# --- git at resume ---------------------------------------------------------------------------


def uncommitted(ws: Workspace) -> tuple[str, ...] | None:
    """`git status --short` lines of the work (loopdeck's own files left out); None outside
    git or when git cannot be read."""
    # Here, not at the top: ~60 ms (`-X importtime`, GitPython) that a queued resume and
    # /orchestrator-loop never use.
    from loop.repo import gitread

    status = gitread.status(ws.root)
    if status.error is not None:
        return None
    return status.changes


def describe_changes(changes: tuple[str, ...]) -> str:
    """`3 uncommitted change(s): 2 modified, 1 untracked` and their names."""
    untracked = sum(1 for line in changes if line.startswith("??"))
    text = f"{len(changes)} uncommitted change(s): {len(changes) - untracked} modified, {untracked} untracked"
    names = [line[3:] for line in changes[:12]]
    more = f"\n  … and {len(changes) - 12} more" if len(changes) > 12 else ""
    return text + "".join(f"\n  {name}" for name in names) + more


def handle_git(ws: Workspace, choice: str, state: LoopState) -> str:
    """Carry out the person's choice for uncommitted work; journaled. Never discards."""
    from loop.repo import gitstate  # ~25 ms (`-X importtime`): only a choice for uncommitted work

    if choice not in GIT_CHOICES:
        raise ValueError(f"unknown choice {choice!r}: one of {', '.join(GIT_CHOICES)}")
    what = f"loop started {state.started_at}, iteration {state.iteration}"
    journal = Journal(ws.journal)
    if choice == "commit":
        sha = gitstate.commit(ws.root, f"loopdeck: work in progress at resume ({what})")
        journal.append("git-at-resume", state.iteration, {"action": "commit", "sha": sha})
        return f"committed the changes ({sha[:8]})" if sha else "nothing to commit"
    if choice == "stash":
        name = f"loopdeck resume: {what} ({iso_s(utcnow())})"
        ref = gitstate.stash(ws.root, name)
        journal.append("git-at-resume", state.iteration, {"action": "stash", "stash": name, "ref": ref})
        return f"stashed the changes as {name!r} (`git stash list` shows it)" if ref else "nothing to stash"
    journal.append("git-at-resume", state.iteration, {"action": "continue"})
    return "continuing with the uncommitted changes as they are"


# --- the resumption itself -------------------------------------------------------------------


def carry_out(ws: Workspace, expected: str) -> tuple[Classification, LoopState | None]:
    """Resume the loop under the lock, if it is still what the person was asked about: the
    engine decides the new state (`engine.resume_flow`), the writer writes it. Returns the
    classification seen under the lock and the new state (None when nothing was done)."""
    store = StateStore(ws)
    journal = Journal(ws.journal)
    with store.locked():
        found = classify.read(ws)
        if found.kind != expected or found.state is None:
            return found, None
        state = found.state
        now = utcnow()
        sources: Aggregate | None = None
        if found.kind == "stopping":
            sources = check_all(SourceConfig.from_state(ws, state))
        queued, _bad, _end = control.read_unapplied(ws, state.control_offset, journal, key.reader(ws.root))
        result = engine.resume_flow(state, found.kind, now, sources, queued)
        writer.carry_out(ws, store, journal, state, result, now)
        return found, result.state


def finish_completed(ws: Workspace) -> Path | None:
    """A loop whose state says completed but that was never archived (its driver killed
    between the two writes): archive it now, as the next `run` would. Returns the folder, or
    None when it is no longer such a loop."""
    store = StateStore(ws)
    with store.locked():
        found = classify.read(ws)
        if found.state is None or found.state.status != "completed":
            return None
        writer.finish_archive(ws, Journal(ws.journal), found.state)
    return latest(ws)


def next_steps(ws: Workspace, state: LoopState) -> list[str]:
    """After the state is resumed: start a runner loop's runner and wait until it drives the
    loop (LoopdeckError, saying why, when it does not); tell a hook loop's person how to
    continue. Each line names something that works."""
    if state.status == "completed":
        return ["the loop is marked complete; `loopdeck status` shows its summary"]
    if not named(state.driver).in_session:
        log = ws.private_dir / "runner.log"
        headless = "--headless" in runner_argv(ws)
        restart = restart_runner(ws)
        if restart.driver is None:
            raise LoopdeckError(
                f"the runner started to resume the loop (pid {restart.pid}) is not driving it: "
                f"{restart.why}; its output is in {log}; `loopdeck resume` tries again"
            )
        if restart.driver != restart.pid:
            return [
                f"another runner (pid {restart.driver}) took the loop first and drives it; "
                f"its output is in {log}",
                "watch it with `loopdeck` (the monitor) or `loopdeck log -f`",
            ]
        lines = [
            f"runner restarted in the background (pid {restart.pid}); its output is in "
            f"{log}, the agent's in {ws.iteration_logs(state.started_at, state.loop_id)}",
        ]
        if headless:
            lines.append(
                "it runs headless, as the loop was run: a question or an escalation ends it "
                "with a summary (`loopdeck run` without --headless waits for a person instead)"
            )
        return [*lines, "watch it with `loopdeck` (the monitor) or `loopdeck log -f`"]
    return [
        "the loop is running again; continue the Claude Code session with `claude --continue` "
        "(or type `/orchestrator-loop` in a new session): its next Stop drives the loop",
    ]


def send_resume(ws: Workspace, source: str, reason: str, iteration: int | None = None) -> str:
    """A paused loop whose driver is alive: the driver applies the command itself."""
    return control.queue(
        ws, "resume", source=source, reason=reason, iteration=iteration, key=key.for_person(ws.root)
    ).id


def resume(ws: Workspace, snapshot: Snapshot, source: str = "tui", git: str | None = None) -> str:
    """The monitor's yes. The monitor never writes the state: it sends the command that does
    what `loopdeck resume` does (`resume` lifts a pause or a wait, `complete` finishes a loop
    left stopping) and starts a runner when the loop's runner is gone, which applies it.
    `git`: what to do with uncommitted work first (None: nothing to do). One line back."""
    loop = snapshot.loop
    if loop is None:
        return "no loop to resume"
    said: list[str] = []
    if git is not None:
        state = StateStore(ws).read()
        if state is not None:
            said.append(handle_git(ws, git, state))

    if loop.status == "paused":
        control.queue(
            ws, "resume", source=source, reason="resumed from the resume prompt", key=key.for_person(ws.root)
        )
    elif loop.status == "stopping":
        control.queue(
            ws,
            "complete",
            source=source,
            reason="the loop was stopping: marked complete at resume",
            key=key.for_person(ws.root),
        )
    if runner_needed(snapshot):
        pid = start_runner(ws)
        said.append(f"runner restarted (pid {pid})")
    elif named(loop.driver).in_session:
        said.append(
            "resume queued; it applies at the agent's next Stop (continue the Claude Code session: "
            "`claude --continue`)"
        )
    else:
        said.append("resume queued")
    return "; ".join(said)


def pause(ws: Workspace, snapshot: Snapshot, source: str = "tui") -> str:
    if snapshot.loop is None or snapshot.loop.status == "paused":
        return "nothing to pause"
    control.queue(ws, "pause", source=source, reason="paused from the resume prompt")
    return "pause queued"
