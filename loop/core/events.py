"""Every kind of event the journal holds, each with the line a person reads for it.

One list: a driver appending a kind that is not here is refused (`Journal.append`), so a
viewer, `loopdeck log` and the monitor's colours never meet a kind they do not know.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from loop.core.model import JournalEvent as Event
from loop.core.progress import tests_line
from loop.core.timeutil import human_duration, log_stamp

if TYPE_CHECKING:  # annotations only: the Stop hook does not pay for typing
    from typing import Any

# --- human log lines ------------------------------------------------------------------


def _of(iteration: int | None, data: Mapping[str, Any]) -> str:
    limit = data.get("max_iterations")
    return f"{iteration}/{limit}" if limit else f"{iteration}"


def _spent(data: Mapping[str, Any]) -> str:
    """`; codex, 2,150 tokens, ≈$0.0042 (estimated)`: what a turn used, when the agent said."""
    parts = [str(data["agent"])] if data.get("agent") else []
    tokens = data.get("tokens")
    if isinstance(tokens, Mapping):
        total = sum(v for v in tokens.values() if isinstance(v, int))
        if total:
            parts.append(f"{total:,} tokens")
    cost = data.get("cost_usd")
    if isinstance(cost, int | float) and not isinstance(cost, bool):
        shown = f"${cost:.2f}" if cost >= 0.01 or cost == 0 else f"${cost:.4f}"
        parts.append(f"≈{shown} (estimated)" if data.get("estimated") else shown)
    return "; " + ", ".join(parts) if parts else ""


def _progress(data: Mapping[str, Any]) -> str:
    """A judged turn in one line: the tests, the tasks, what moved."""
    parts = []
    tests = data.get("tests")
    if isinstance(tests, Mapping):
        parts.append(f"tests {tests_line(tests)}")
    tasks = data.get("tasks")
    if isinstance(tasks, Mapping) and any(tasks.get(key) for key in ("open", "done")):
        parts.append(f"tasks {tasks.get('open', '?')} open, {tasks.get('done', '?')} done")
    moved = data.get("moved")
    parts.append(f"moved: {', '.join(str(m) for m in moved)}" if moved else "nothing moved")
    return "Progress: " + "; ".join(parts)


TURN_KINDS = frozenset({"progress"})
"""Events about the turn that just ended: journaled with that turn's iteration (the decision
that judges it may already have counted the next one)."""

KINDS: dict[str, Callable[[Event], str]] = {
    # the loop's life
    "loop-started": lambda e: f"Loop started (max {e.data.get('max_iterations', '?')} iterations)",
    "iteration-started": lambda e: f"Starting iteration {_of(e.iteration, e.data)}",
    "iteration-completed": lambda e: (
        f"Iteration {e.iteration} complete ({human_duration(e.data.get('duration_s'))}{_spent(e.data)})"
    ),
    "progress": lambda e: _progress(e.data),
    "agent-switched": lambda e: (
        f"Agent switched: {e.data.get('from', '?')} → {e.data.get('to', '?')}"
        + (f" ({e.data['reason']})" if e.data.get("reason") else "")
    ),
    "task-selected": lambda e: f'Selected item: "{e.data.get("task", "?")}"',
    "blocked": lambda e: f"Turn over, work remains: {e.data.get('message', 'the agent goes on')}",
    "allowed": lambda e: f"Turn over, no next turn now: {e.data.get('reason', '')}".rstrip(": "),
    "verification-started": lambda e: f"Running verification: {e.data.get('command', '?')}",
    "verification-passed": lambda e: f"Verification PASSED (exit {e.data.get('exit_code', 0)})",
    "verification-failed": lambda e: f"Verification FAILED (exit {e.data.get('exit_code', '?')})",
    "question": lambda e: f"QUESTION from the agent: {e.data.get('question', '')}",
    "answered": lambda e: f"Answered: {e.data.get('answer', '')}",
    "runner-started": lambda e: (
        f"Runner started (pid {e.data.get('pid', '?')}): {e.data.get('agent', '?')}"
        + (f" (fallback: {e.data['fallback']})" if e.data.get("fallback") else "")
        + (f"; sandbox: {e.data['sandbox']}" if e.data.get("sandbox") else "")
    ),
    "agent-failed": lambda e: (
        f"Agent FAILED (attempt {e.data.get('attempt', '?')} of {e.data.get('of', '?')}): "
        f"{e.data.get('reason', '')}"
    ),
    "agent-interrupted": lambda e: f"Agent ended early: {e.data.get('reason', '')}",
    "retry": lambda e: f"Retrying in {e.data.get('in_s', '?')} s",
    "verification-mode": lambda e: f"All task sources empty: {e.data.get('loops', '?')} verification loops",
    "verification-interrupted": lambda e: f"Back to work: {e.data.get('reason', '')}",
    "verification-skipped": lambda e: f"Verification loop {e.data.get('loop', '?')} skipped",
    "session-bound": lambda e: f"Loop bound to session {e.data.get('session_id', '?')}",
    "task-skipped": lambda e: f'Task skipped: "{e.data.get("task", "?")}"',
    "archived": lambda e: f"Loop archived in {e.data.get('folder', '?')}",
    "verification-loop": lambda e: f"Verification loop {e.data.get('loop', '?')} of {e.data.get('of', '?')}",
    "commit": lambda e: f"Committing changes ({e.data.get('sha', '')[:8]})".replace(" ()", ""),
    "escalation": lambda e: f"ESCALATION: {e.data.get('reason', '')}",
    "command-sent": lambda e: f"Command queued: {e.data.get('command', '?')} ({e.data.get('source', '?')})",
    "command-applied": lambda e: (
        f"Command applied: {e.data.get('command', '?')}"
        + (f" — {e.data['outcome']}" if e.data.get("outcome") else "")
    ),
    "command-refused": lambda e: (
        f"Command refused: {e.data.get('command', '?')} ({e.data.get('source', '?')})"
        f" — {e.data.get('why', '')}"
    ),
    "completed": lambda e: f"Loop complete: {e.data.get('reason', '')}".rstrip(": "),
    "paused": lambda e: "Loop paused" + (f": {e.data['reason']}" if e.data.get("reason") else ""),
    "resumed": lambda e: "Loop resumed",
    "stopped": lambda e: "Loop stopped" + (f": {e.data['reason']}" if e.data.get("reason") else ""),
    "failed": lambda e: f"Loop FAILED: {e.data.get('reason', '')}",
    "summary-kept": lambda e: f"Summary kept in {e.data.get('folder', '?')}",
    "lock-broken": lambda e: f"Stale lock broken (its holder, pid {e.data.get('pid', '?')}, is gone)",
    "git-at-resume": lambda e: f"Uncommitted changes at resume: {e.data.get('action', '?')}",
    "state-rebuilt": lambda e: f"State rebuilt from the {e.data.get('from', '?')}",
    "usage-limit": lambda e: (
        f"Usage limit: {e.data.get('reason', '')}; waiting until {e.data.get('until', '?')}"
    ),
    "limit-lifted": lambda e: "Usage limit over: back to work",
    "permission-denied": lambda e: f"The agent was refused: {', '.join(e.data.get('tools', []))}",
    "sandbox-refused": lambda e: (
        (f"{e.data['worker']}: " if e.data.get("worker") else "")
        + f"The sandbox refused: {(e.data.get('lines') or ['?'])[0]}"
        + (f" (and {len(e.data['lines']) - 1} more)" if len(e.data.get("lines") or []) > 1 else "")
    ),
    "said": lambda e: f"Note for the agent: {e.data.get('note', '')}",
    "configured": lambda e: "Settings changed: " + ", ".join(f"{k} {v}" for k, v in e.data.items()),
    "restored": lambda e: (
        f"State restored from the {e.data.get('from', 'backup')}"
        + (
            f"; {e.data['already_applied']} command(s) already applied kept out"
            if e.data.get("already_applied")
            else ""
        )
    ),
    # parallel workers (`run --workers N`)
    "worker-started": lambda e: (
        f"{e.data.get('worker', '?')} started on task {e.data.get('task', '?')}"
        + (f" (its files: {', '.join(e.data['files'])})" if e.data.get("files") else "")
    ),
    "worker-turn": lambda e: (
        f"{e.data.get('worker', '?')}: task {e.data.get('task', '?')} again (turn {e.data.get('turn', '?')})"
    ),
    "worker-ended": lambda e: (
        f"{e.data.get('worker', '?')} ended turn {e.data.get('turn', '?')} on task {e.data.get('task', '?')} "
        f"(exit {e.data.get('exit_code', '?')}, {human_duration(e.data.get('duration_s'))}{_spent(e.data)})"
    ),
    "worker-question": lambda e: f"QUESTION from {e.data.get('worker', '?')}: {e.data.get('question', '')}",
    "worker-replaced": lambda e: (
        f"{e.data.get('worker', '?')} made no progress on task {e.data.get('task', '?')}: "
        f"replaced by {e.data.get('by', '?')}"
    ),
    "worker-stopped": lambda e: (
        f"{e.data.get('worker', '?')} stopped; task {e.data.get('task', '?')} back in the graph"
    ),
    "task-deferred": lambda e: str(e.data.get("line") or f"Task {e.data.get('task', '?')} deferred"),
    "audit-approved": lambda e: (
        f"Audit APPROVED task {e.data.get('task', '?')} ({e.data.get('worker', '?')})"
    ),
    "audit-rejected": lambda e: (
        f"Audit REJECTED task {e.data.get('task', '?')} ({e.data.get('worker', '?')}): "
        f"{(str(e.data.get('feedback', '')).strip().splitlines() or [''])[-1]}"
    ),
    "task-completed": lambda e: f"Task {e.data.get('task', '?')} completed by {e.data.get('worker', '?')}",
    "merge-queued": lambda e: (
        f"Task {e.data.get('task', '?')} queued to merge "
        f"({e.data.get('branch') or e.data.get('worker', '?')})"
    ),
    "pr-opened": lambda e: f"Task {e.data.get('task', '?')}: pull request opened, {e.data.get('url', '?')}",
    "pr-updated": lambda e: f"Task {e.data.get('task', '?')}: pull request updated, {e.data.get('url', '?')}",
    "pr-rework": lambda e: (
        f"Task {e.data.get('task', '?')}: "
        + (f"checks failed ({', '.join(e.data['checks'])})" if e.data.get("checks") else "changes requested")
        + f" on {e.data.get('url', '?')}, back to {e.data.get('worker', '?')}"
    ),
    "pr-merged": lambda e: f"Task {e.data.get('task', '?')}: pull request merged, {e.data.get('url', '?')}",
    "task-merged": lambda e: (
        f"Task {e.data.get('task', '?')} merged into the loop's branch"
        + (f" ({str(e.data['sha'])[:8]})" if e.data.get("sha") else "")
    ),
    "task-undone": lambda e: (
        f"Task {e.data.get('task', '?')} undone: reverted on the loop's branch"
        + (f" ({str(e.data['revert'])[:8]})" if e.data.get("revert") else "")
        + "; it is open again"
    ),
    "merge-conflict": lambda e: (
        f"Task {e.data.get('task', '?')}: merge CONFLICT, back to {e.data.get('worker', '?')} to resolve "
        f"({e.data.get('reason', '')})"
    ),
    "merge-rejected": lambda e: (
        f"Task {e.data.get('task', '?')}: the merged tree failed verification; merge undone, back to "
        f"{e.data.get('worker', '?')}"
    ),
    "merge-flaky": lambda e: (
        f"Task {e.data.get('task', '?')}: the checks failed on its merged tree, then passed on the same "
        "tree; they may be flaky: queued again"
    ),
    "worker-strayed": lambda e: (
        f"{e.data.get('worker', '?')} changed files outside task {e.data.get('task', '?')}'s: "
        + ", ".join(str(f) for f in e.data.get("files") or [])
    ),
    "locks-freed": lambda e: (
        f"{e.data.get('worker', '?')} released " + (", ".join(e.data.get("files") or []) or "no files")
    ),
    "worktree-setup-started": lambda e: (
        f"{e.data.get('worker', '?')}: setting up task {e.data.get('task', '?')}'s worktree: "
        f"{e.data.get('command', '?')}"
    ),
    "worktree-setup-passed": lambda e: (
        f"{e.data.get('worker', '?')}: setup passed: {e.data.get('command', '?')} "
        f"({human_duration(e.data.get('duration_s'))})"
    ),
    "worktree-setup-failed": lambda e: (
        f"{e.data.get('worker', '?')}: task {e.data.get('task', '?')}'s worktree is NOT READY: "
        f"{e.data.get('message', '')}"
    ),
    "worktree-ready": lambda e: (
        f"{e.data.get('worker', '?')}: task {e.data.get('task', '?')}'s worktree is ready"
    ),
    "warning": lambda e: f"WARNING: {e.data.get('message', '')}",
    "error": lambda e: f"ERROR: {e.data.get('message', '')}",
}


def message(event: Event) -> str:
    render = KINDS.get(event.kind)
    if render is not None:
        try:
            return render(event)
        except (KeyError, TypeError, ValueError, AttributeError):
            pass
    details = " ".join(f"{k}={v}" for k, v in event.data.items())
    return f"{event.kind} {details}".rstrip()


def render_line(event: Event, name: str = "loopdeck") -> str:
    """`[2025-01-17T14:00:00Z] loopdeck: Starting iteration 1/5`, the form every loopdeck log line takes."""
    return f"[{log_stamp(event.ts)}] {name}: {message(event)}"
