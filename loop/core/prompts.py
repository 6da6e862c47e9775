"""The prompts the loop feeds the agent: the first prompt, continuation, escalation, review,
conservative-block and claim texts, and the feedback of a failed verification.

Kept apart from the engine's rules so the wording can change without touching a decision, and
under Claude Code's 10,000-character cap for hook strings.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from loop.core import progress
from loop.core.board import Task, Worker
from loop.core.model import SOURCE_LABELS, Aggregate, LoopState
from loop.core.signals import COMPLETE_MARKER

MAX_MESSAGE = 9_500
"""Claude Code caps hook strings at 10,000 characters."""


OPENINGS = (
    "ORCHESTRATOR CONTINUATION",
    "ORCHESTRATOR ESCALATION",
    "VERIFICATION LOOP ",
    "VERIFICATION FAILED",
    "VERIFICATION REQUIRED",
    "TASK CHECK FAILED",
    "COMPLETION CLAIMED",
    "A PERSON ANSWERED",
    "A PERSON WATCHING",
)
"""How each prompt the Stop hook sends opens: what a reader (or a test) can recognise it by."""

# --- prompts -------------------------------------------------------------------------------


def answered_prompt(answer: str, question: str | None) -> str:
    """A person's answer as the agent reads it, with the question it answers: the agent that
    reads it is often not the one that asked (the runner starts a fresh agent each turn)."""
    text = f"A PERSON ANSWERED YOUR QUESTION:\n{answer}"
    return f"{text}\n(The question was: {question})" if question else text


VERIFICATION_CHECKLIST = """\
In this loop, examine:
- Errors and missing elements
- Wrong references and TDD violations
- Inconsistent naming and incongruences
- Redundant or duplicated parts
- Incomplete planning
- Risks without safeguards
- Workarounds instead of proper fixes
- Outdated documentation"""

VERIFICATION_FOCUS = {
    1: "Loop 1: initial comprehensive review.",
    2: "Loop 2: second pass, focusing on edge cases.",
    3: "Loop 3: third pass, checking documentation.",
    4: "Loop 4: final confirmation.",
}


def finish_line(state: LoopState) -> str:
    if state.promise:
        return (
            f"When every task is truly complete, output <promise>{state.promise}</promise>. "
            "The promise must be completely and unequivocally TRUE; never output it to escape the loop."
        )
    return (
        f"When every task is truly complete, output {COMPLETE_MARKER} on a line by itself. "
        "Never output it to escape the loop."
    )


def pending_summary(sources: Aggregate, per_source: int = 5) -> str:
    lines: list[str] = []
    for report in sources.with_pending:
        label = SOURCE_LABELS.get(report.name, report.name)
        where = f" ({report.detail})" if report.detail and report.name in ("task_file", "github") else ""
        counts = f"{report.pending} pending" + (
            f", {report.in_progress} in progress" if report.in_progress else ""
        )
        lines.append(f"- {label}{where}: {counts}")
        for item in report.pending_items()[:per_source]:
            mark = "in progress" if item.status == "in_progress" else "pending"
            at = f"line {item.line}: " if item.line else (f"#{item.id}: " if item.id else "")
            lines.append(f"    - [{mark}] {at}{item.title}")
        more = report.open_count - min(per_source, len(report.pending_items()))
        if more > 0:
            lines.append(f"    - … and {more} more")
    return "\n".join(lines)


RECORDING = {
    "task_file": "when a task of {where} is done, tick it (`- [ ]` → `- [x]`); mark one that should "
    "not be done skipped (`- [-]`)",
    "claude_tasks": "when a Claude Task is done, set its status to completed (TaskUpdate)",
    "todos": "keep your TODO list current (TodoWrite): mark each item completed when it is done",
    "github": "when a GitHub project item is done, set its Status to Done",
    "prd": 'when a story of the PRD is done and verified, set its `"passes"` to true',
}
"""How the agent records progress in each source: the loop counts what the sources say, so
work done but not recorded is work the loop will send the agent back to."""


def recording_help(sources: Aggregate) -> str:
    """One line per active source: how to record progress there."""
    lines = []
    for report in sources.sources:
        if not (report.enabled and report.available) or report.name not in RECORDING:
            continue
        if report.name == "todos" and not report.open_count and not report.done:
            continue  # no TODO list in this session: nothing to keep current
        where = report.detail if report.name == "task_file" and report.detail else "the task file"
        lines.append(f"- {RECORDING[report.name].format(where=where)}")
    if not lines:
        return ""
    return "How to record progress (the loop counts what these say):\n" + "\n".join(lines)


def first_prompt(state: LoopState, sources: Aggregate) -> str:
    """The first prompt of a fresh agent: the task, what is pending, how to record progress."""
    pending = (
        f"\n\nPending work: {sources.pending_total} task(s):\n{pending_summary(sources)}"
        if sources.pending_total
        else ""
    )
    recording = recording_help(sources)
    return cap(f"{state.prompt}{pending}\n\n" + (f"{recording}\n" if recording else "") + finish_line(state))


def continuation_prompt(state: LoopState, sources: Aggregate) -> str:
    n_sources = len(sources.with_pending)
    recording = recording_help(sources)
    return cap(
        "ORCHESTRATOR CONTINUATION - DO NOT STOP\n\n"
        f"{state.prompt}\n\n"
        f"Pending work: {sources.pending_total} task(s) across {n_sources} source(s):\n"
        f"{pending_summary(sources)}\n\n"
        "Continue with the next pending task. When every task source is empty, "
        f"{state.verify_loops} verification loops follow before you may stop.\n"
        + last_checks(state)
        + (f"{recording}\n" if recording else "")
        + finish_line(state)
    )


def criteria_commands(state: LoopState) -> dict[str, str]:
    """Each command a design's criterion names, with the criterion's words (a loop started
    from a design; else empty): a failing check is then said as the criterion it checks."""
    design = state.extra.get("design")
    listed = design.get("criteria") if isinstance(design, Mapping) else None
    found: dict[str, str] = {}
    for criterion in listed if isinstance(listed, list) else []:
        if isinstance(criterion, Mapping) and isinstance(criterion.get("command"), str):
            found.setdefault(criterion["command"], str(criterion.get("text") or criterion["command"]))
    return found


def last_checks(state: LoopState) -> str:
    """The last checks' results for a prompt (empty before any ran), with the next action when
    they show a failure: commit the work when only the working tree is not clean."""
    criteria = criteria_commands(state)
    lines = progress.validation_lines(state.last_validation, criteria)
    if not lines:
        return ""
    kind = progress.failure_kind(state.last_validation, criteria)
    step = f"\n{progress.NEXT_STEP[kind]}" if kind in progress.NEXT_STEP else ""
    return "\nLast checks:\n" + "\n".join(f"- {line}" for line in lines) + step + "\n"


def escalation_prompt(state: LoopState, sources: Aggregate | None) -> str:
    pending = f"\n\nStill pending:\n{pending_summary(sources)}" if sources and sources.pending_total else ""
    return cap(
        "ORCHESTRATOR ESCALATION - ITERATION THRESHOLD REACHED\n\n"
        f"The orchestrator has completed {state.max_iterations} iterations without finishing all tasks.\n"
        "This is NOT an automatic exit: there are no deadlines or time limits.\n\n"
        "REQUIRED ACTION:\n"
        "1. Review all task sources manually\n"
        f"2. If ALL tasks are truly complete, output: {COMPLETE_MARKER}\n"
        "3. If tasks remain, continue working on them\n"
        "4. The orchestrator will NOT auto-exit based on iteration count\n\n"
        f"Iteration {state.iteration}. Original task:\n{state.prompt}{pending}"
    )


def verification_prompt(state: LoopState, number: int) -> str:
    total = state.verify_loops
    focus = VERIFICATION_FOCUS.get(number, f"Loop {number}: another full pass.")
    return cap(
        f"VERIFICATION LOOP {number} of {total} - MANDATORY REVIEW BEFORE EXIT\n\n"
        "All task sources show 0 pending tasks. However, before allowing exit,\n"
        f"the orchestrator must complete {total} verification loops to check\n"
        "the quality and correctness of all changes made.\n\n"
        f"{focus}\n\n"
        "Examine your changes in depth.\n"
        f"{VERIFICATION_CHECKLIST}\n\n"
        "IDENTIFY every issue, DOCUMENT it, and add a task for each (to the task file or the TODO list);\n"
        "a new task sends the loop back to work. Re-verify in the next loop that issues are resolved.\n"
        + uncommitted(state)
        + f"\nOriginal task:\n{state.prompt}"
    )


def uncommitted(state: LoopState) -> str:
    """The next action when the last checks passed but left the working tree uncommitted (a
    loop that commits nothing itself: the runner commits after passing checks when asked to, so
    its tree is clean then; the Stop hook leaves git alone and never says): commit the work. A
    line for a turn that goes on; it never holds up completion."""
    if progress.failure_kind(state.last_validation, criteria_commands(state)) != "git":
        return ""
    return f"\n{progress.NEXT_STEP['git']}\n"


def failure_prompt(
    state: LoopState, failure: str, sources: Aggregate, validation: Mapping[str, Any] | None = None
) -> str:
    """The checks failed: the next action by the failure's kind (the build, the tests, a
    design's criterion, another check), the results as data (counts, failing tests, first
    error, which check failed), then their output."""
    pending = f"\n\nPending work:\n{pending_summary(sources)}" if sources.pending_total else ""
    criteria = criteria_commands(state)
    kind = progress.failure_kind(validation, criteria)
    results = "\n".join(progress.validation_lines(validation, criteria))
    step = progress.NEXT_STEP.get(kind or "", "") if kind != "git" else ""
    return cap(
        "VERIFICATION FAILED - FIX THIS FIRST\n\n"
        + (f"{step}\n\n" if step else "")
        + (f"{results}\n\n" if results else "")
        + "The verification commands failed after your last turn:\n\n"
        f"{failure}\n\n"
        "Fix the cause (not the check), then continue."
        f"{pending}\n\n{recording_help(sources)}\n\nOriginal task:\n{state.prompt}\n\n{finish_line(state)}"
    )


def conservative_prompt(state: LoopState, sources: Aggregate) -> str:
    failed = "\n".join(f"- {SOURCE_LABELS.get(r.name, r.name)}: {r.error}" for r in sources.unavailable)
    known = f"\n\nKnown pending work:\n{pending_summary(sources)}" if sources.pending_total else ""
    return cap(
        "TASK CHECK FAILED - manually verify and output ALL_TASKS_COMPLETE\n\n"
        "loopdeck could not read these task sources, so it cannot tell whether work remains:\n"
        f"{failed}\n\n"
        "Check them yourself. If work remains, continue with it. "
        f"If ALL tasks are truly complete, output {COMPLETE_MARKER} on a line by itself: the loop "
        f"then waits for a person to confirm it, as loopdeck cannot check.{known}\n\n"
        f"Original task:\n{state.prompt}"
    )


def claimed_prompt(state: LoopState, sources: Aggregate) -> str:
    """The agent said it was done while the task sources still list open work."""
    return cap(
        "COMPLETION CLAIMED WITH TASKS STILL OPEN - NOT DONE YET\n\n"
        f"You signalled completion, but {sources.pending_total} task(s) are still open:\n"
        f"{pending_summary(sources)}\n\n"
        "For each one: finish it and record it in its source, or, if it should not be done, "
        "mark it skipped (`- [-]` in the task file), or ask a person to force completion "
        "(<question>…</question>).\n"
        f"{recording_help(sources)}\n"
        + uncommitted(state)
        + f"\nOriginal task:\n{state.prompt}\n\n{finish_line(state)}"
    )


def unverified_prompt(state: LoopState) -> str:
    """Nothing is pending, but the verification commands have not passed yet."""
    commands = "\n".join(f"- {c}" for c in state.verify)
    return cap(
        "VERIFICATION REQUIRED BEFORE COMPLETION\n\n"
        "Every task source is empty, but these verification commands must pass before the loop "
        f"can complete, and they have not passed yet:\n{commands}\n\n"
        "Make sure they pass, then finish your turn.\n\n"
        f"Original task:\n{state.prompt}\n\n{finish_line(state)}"
    )


def vanished_reason(count: int, where: str) -> str:
    """Why a loop whose task file lost its open tasks waits for a person (its escalation)."""
    tasks = "task" if count == 1 else "tasks"
    return f"{count} open {tasks} vanished from {where}"


def cap(text: str) -> str:
    if len(text) <= MAX_MESSAGE:
        return text
    return text[: MAX_MESSAGE - 40].rstrip() + "\n… (truncated by loopdeck)"


def iteration_of(state: LoopState) -> str:
    return f"{state.iteration}/{state.max_iterations}" if state.max_iterations else f"{state.iteration}"


def audit_prompt(task: Task, worker: Worker, output: str, changed: tuple[str, ...] = ()) -> str:
    """What an audit agent reads, wherever it runs (a local worker or a Temporal worker): the
    task, the files it names and the files its branch changed, and the worker's report."""
    files = "\n".join(f"- {f}" for f in task.target_files) or "- (no files named)"
    diff = "\n".join(f"- {f}" for f in changed) or "- (none)"
    return (
        f"Audit the work of {worker.name} on task {task.id}: {task.subject}\n\n"
        f"{task.description.strip() or '(no description)'}\n\nFiles:\n{files}\n\n"
        f"Files its branch changed:\n{diff}\n\n"
        f"The worker's report:\n{output.strip()[-4000:]}\n\n"
        "Exit 0 to approve. Otherwise explain what is wrong: your output goes back to the worker."
    )
