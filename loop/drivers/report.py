"""What a run tells the person: a progress line after each turn, and the summary it prints
and archives as it ends (this run's figures, and the whole loop's for a run that took over a
loop started earlier)."""

from __future__ import annotations

import contextlib
import json
import time
from typing import Any

from loop.core import engine
from loop.core.model import Aggregate, LoopState, Result
from loop.core.timeutil import human_duration, parse_iso
from loop.drivers import writer
from loop.drivers.children import EXIT_DONE, EXIT_FAILED
from loop.drivers.claim import Claim
from loop.drivers.session import Session
from loop.store.archive import latest
from loop.store.state import StateError
from loop.views.report.files import ending_report
from loop.views.summary import Whole, progress_line, summary_lines

LOOP_COMMITS = frozenset({"loop-started", "commit", "task-merged"})
"""The journal's events a loop's commits are counted from (since its `loop-started`)."""


def stage_of(state: LoopState) -> str:
    """What the loop's next turn is, as its state says: `working` on the tasks, `verification
    loop N of M` once they are done (`verifying` when it has no verification loops)."""
    if not state.verification_mode:
        return "working"
    if state.verify_loops <= 0:
        return "verifying"
    number = min(state.verify_loops, max(1, state.verify_loops - state.verification_remaining))
    return f"verification loop {number} of {state.verify_loops}"


class Report:
    """The run's progress lines and its summary."""

    def __init__(self, session: Session, claim: Claim) -> None:
        self.session = session
        self.claim = claim
        """Whether this run took over a loop started earlier (`Claim.continued`): its summary
        then tells this run and the whole loop."""

    def progress(
        self, state: LoopState, counts: Aggregate | None = None, after: Result | None = None
    ) -> None:
        """`Progress: [1 of 3] ▰▰▰▱▱▱▱▱▱▱ 33% · next: "Write the parser" · stage: working · 2m 10s
        elapsed`: the sources as the decision counts them (or counted now); the turn the
        decision runs next (`after`, when it runs one): its task and stage; the loop's time."""
        counts = counts or self.session.counted(state)
        if counts is None:  # progress is a courtesy
            return
        done = sum(r.done for r in counts.sources if r.available)
        total = done + counts.pending_total
        if total:
            self.session.out(" · ".join([progress_line(done, total), *self.progress_more(state, after)]))

    def progress_more(self, state: LoopState, after: Result | None) -> list[str]:
        """The next turn's task and stage (as the decision's state says), and the time since the
        loop started (this run's when that is not known)."""
        parts = []
        nxt = after.state if after is not None else None
        if nxt is not None:
            if nxt.current_task and not nxt.verification_mode:
                parts.append(f'next: "{nxt.current_task}"')
            parts.append(f"stage: {stage_of(nxt)}")
        started = parse_iso(state.started_at)
        seconds = (self.session.now() - started).total_seconds() if started else None
        if seconds is None or seconds < 0:
            seconds = time.monotonic() - self.session.tally.started
        parts.append(f"{human_duration(seconds)} elapsed")
        return parts

    def finish(self, how: str, reason: str, archived: bool = False) -> int:
        """Print and archive the summary; the exit status for `how`.

        The task figures are counted from the sources now, also for an archived loop (its
        state as the last decision left it): a forced completion with tasks open says so."""
        session = self.session
        self.count_files()
        state = session.final if archived else None
        if not archived:
            with contextlib.suppress(StateError):  # a corrupt one is told, never archived
                state = session.store.read()
        counts = session.counted(state)
        folder = None
        recorded: dict[str, Any] | None = None
        if archived:
            folder = latest(session.ws)
            with contextlib.suppress(OSError, ValueError):
                loaded = json.loads((folder / "summary.json").read_text()) if folder else None
                recorded = loaded if isinstance(loaded, dict) else None
        elif state is not None:
            folder = writer.archive_ending(
                session.ws, state, how, self.summary_data(how, reason, counts, state)
            )
        whole = self.whole(state, recorded) if self.claim.continued else None
        page = ending_report(session.ws, folder) if folder is not None else None
        for line in summary_lines(how, reason, session.tally, counts, folder, state, recorded, whole, page):
            session.out(line)
        return EXIT_DONE if how in ("completed", "stopped") else EXIT_FAILED

    def summary_data(
        self, how: str, reason: str, counts: Aggregate | None, state: LoopState | None
    ) -> dict[str, Any]:
        """The archived summary of a run that ended without completing: the engine's record
        of an ending (tasks by name, iterations, cost), with what this run saw."""
        session, tally = self.session, self.session.tally
        base = engine.ending_summary(how, reason, state, counts, session.now()) if state is not None else {}
        this_run = round(time.monotonic() - tally.started, 1)
        return {
            "duration_s": this_run,  # the whole loop's (`base`) when its start is known
            **base,
            "outcome": how,
            "reason": reason,
            "iterations_this_run": tally.iterations,
            "agent_failures": tally.agent_failures,
            "verification_failures": tally.verify_failures,
            "commits": self.loop_commits() if self.claim.continued else tally.commits,
            "commits_this_run": len(tally.commits),
            "pending_at_end": counts.pending_total if counts and not counts.uncertain else None,
            "usage": dict(state.usage) if state is not None else None,
            "duration_this_run_s": this_run,
            **({"files": tally.files} if tally.files else {}),
        }

    def count_files(self) -> None:
        """What this run changed in git since its first turn started (once, as it ends)."""
        tally = self.session.tally
        if tally.start_head is None or tally.files is not None:
            return
        from loop.repo import gitstate

        tally.files = gitstate.changes(self.session.ws.root, tally.start_head)

    def loop_commits(self) -> list[str]:
        """Every commit the loop made, in every run (the journal's since it started), and this
        run's (a commit the journal lost is still counted)."""
        try:
            events = self.session.journal.tail(1_000_000, where=lambda e: e.kind in LOOP_COMMITS).events
        except OSError:
            events = []
        starts = [i for i, e in enumerate(events) if e.kind == "loop-started"]
        shas = [str(e.data.get("sha")) for e in events[starts[-1] if starts else 0 :] if e.data.get("sha")]
        return list(dict.fromkeys([*shas, *self.session.tally.commits]))

    def whole(self, state: LoopState | None, recorded: dict[str, Any] | None) -> Whole:
        """The loop as a whole, for a run that took it over: how long since it started (as its
        archived summary says, else until now) and every commit it made."""
        seconds = (recorded or {}).get("duration_s")
        if not isinstance(seconds, int | float) and state is not None:
            started = parse_iso(state.started_at)
            seconds = (self.session.now() - started).total_seconds() if started else None
        return Whole(float(seconds) if isinstance(seconds, int | float) else None, self.loop_commits())
