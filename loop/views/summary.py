"""What a person reads when a loop ends and as it goes (the progress line): how it ended,
what was done, what failed, what is left, how long, what to do next."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loop.core import progress
from loop.core.model import Aggregate, LoopState
from loop.core.redact import redact


@dataclass
class Tally:
    """What the summary reports, gathered as the run goes."""

    started: float = field(default_factory=time.monotonic)
    iterations: int = 0
    agent_failures: list[str] = field(default_factory=list)
    verify_failures: int = 0
    commits: list[str] = field(default_factory=list)
    turns: list[dict[str, Any]] = field(default_factory=list)
    """One record per completed iteration: its agent, tokens and cost (`runner.spent_data`)."""
    start_head: str | None = None
    """HEAD as this run's first turn started ("" before any commit; None outside git or before
    a turn): what the run changed is counted from it."""
    files: dict[str, Any] | None = None
    """What the run changed in git, counted as it ends (`gitstate.changes`)."""


@dataclass(frozen=True)
class Whole:
    """The whole loop, for a run that took over a loop started earlier (resumed after a crash,
    or continued): the summary tells this run and all of it, never this run as if it were all."""

    duration_s: float | None
    """Since the loop started (None: its start is unknown)."""
    commits: list[str]
    """Every commit the loop made, in every run, oldest first."""


def clock(seconds: float) -> str:
    """`1m 29s`."""
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m {secs}s"


def money(cost_usd: float, estimated: bool = False) -> str:
    """`$1.23`, or `≈$0.12 (estimated)` for loopdeck's estimate (a CLI that reports tokens only).
    Under a cent shows four decimals: a short turn's cost is not "$0.00"."""
    text = f"${cost_usd:.2f}" if cost_usd >= 0.01 or cost_usd == 0 else f"${cost_usd:.4f}"
    return f"≈{text} (estimated)" if estimated else text


def cost_line(usage: dict[str, int] | None, limits: dict[str, int] | None = None) -> str:
    """`$1.23 (45,678 tokens) of a $5.00 budget`, from what the agent reported; `≈$0.12
    (estimated)` when loopdeck estimated it from tokens; the turns whose cost nobody knows."""
    usage = usage or {}
    cost = usage.get("cost_micro_usd")
    estimated = usage.get("estimated_cost_micro_usd", 0)
    tokens = sum(v for k, v in usage.items() if k.endswith("_tokens"))
    if cost is None:
        text = "cost not reported"
    elif estimated and estimated < cost:
        text = f"≈{money(cost / 1e6)} ({money(estimated / 1e6)} of it estimated)"
    else:
        text = money(cost / 1e6, estimated=bool(estimated))
    if tokens:
        text += f" ({tokens:,} tokens)"
    unpriced = usage.get("unpriced_turns", 0)
    if unpriced and cost is not None:
        text += f"; cost unknown for {unpriced} turn(s)"
    budget = (limits or {}).get("max_cost_micro_usd")
    if budget:
        text += f" of a ${budget / 1e6:.2f} budget"
    return text


def turn_line(record: dict[str, Any]) -> str:
    """One iteration's agent, tokens and cost: `#3 codex (gpt-5): 2,150 tokens, ≈$0.0042 (estimated)`."""
    agent = str(record.get("agent") or "?")
    if record.get("model"):
        agent += f" ({record['model']})"
    tokens = record.get("tokens")
    total = sum(v for v in tokens.values() if isinstance(v, int)) if isinstance(tokens, dict) else 0
    parts = [f"{total:,} tokens" if total else "tokens not reported"]
    cost = record.get("cost_usd")
    if isinstance(cost, int | float) and not isinstance(cost, bool):
        parts.append(money(float(cost), bool(record.get("estimated"))))
    elif total:
        parts.append("cost unknown")
    return f"#{record.get('iteration', '?')} {agent}: {', '.join(parts)}"


def _reported(record: dict[str, Any]) -> bool:
    """Whether an iteration's agent said anything of its tokens or cost (a plain-text agent
    never does: ten lines saying so would only hide the rest of the summary)."""
    tokens = record.get("tokens")
    counted = isinstance(tokens, dict) and any(isinstance(v, int) and v for v in tokens.values())
    cost = record.get("cost_usd")
    return counted or (isinstance(cost, int | float) and not isinstance(cost, bool))


def progress_line(done: int, total: int, width: int = 10) -> str:
    """`Progress: [3 of 8] ▰▰▰▱▱▱▱▱▱▱ 37%`."""
    ratio = done / total if total else 1.0
    filled = int(ratio * width)
    return f"Progress: [{done} of {total}] {'▰' * filled}{'▱' * (width - filled)} {int(ratio * 100)}%"


NEXT_STEPS = {
    "completed": "review the work (`git log`, `git diff`); nothing is left in the task sources",
    "stopped": "`loopdeck run` continues the loop; `loopdeck start --force` starts anew",
    "interrupted": "`loopdeck resume` resumes where it paused",
    "paused": "`loopdeck resume` resumes it",
    "limit": "raise the limit (`loopdeck set-max-iterations N`), then `loopdeck resume`; or finish by hand",
    "escalated": "read the journal (`loopdeck log`), fix what blocks the agent, then `loopdeck resume`",
    "failed": "read the journal (`loopdeck log`) and the iteration logs, then `loopdeck start --force`",
    "question": 'answer it (`loopdeck answer "…"`), then `loopdeck resume`',
}
"""What to do after each ending: every step names a verb that works on the loop as it was left."""

NAMES_SHOWN = 8
TURNS_SHOWN = 10


def task_names(counts: Aggregate | None) -> dict[str, list[str]] | None:
    """Done, skipped and remaining tasks by title, from readable sources (None: not counted)."""
    if counts is None:
        return None
    names: dict[str, list[str]] = {"done": [], "skipped": [], "remaining": []}
    for report in counts.sources:
        if not (report.enabled and report.available):
            continue
        for item in report.items:
            key = {"done": "done", "skipped": "skipped", "pending": "remaining", "in_progress": "remaining"}
            if item.status in key:
                names[key[item.status]].append(item.title)
    return names


def _named(label: str, count: int, titles: list[str]) -> str:
    text = f"{label:<13}{count} task(s)"
    if titles:
        shown = ", ".join(titles[:NAMES_SHOWN])
        more = f", … {len(titles) - NAMES_SHOWN} more" if len(titles) > NAMES_SHOWN else ""
        text += f": {shown}{more}"
    return text


def summary_lines(
    how: str,
    reason: str,
    tally: Tally,
    counts: Aggregate | None,
    folder: Path | None,
    state: LoopState | None,
    recorded: dict[str, Any] | None = None,
    whole: Whole | None = None,
    report: Path | None = None,
) -> list[str]:
    """The summary a person reads at the end of a run. Task figures come from `counts`, the
    sources as the run ended, or else from the tasks the loop's own `recorded` summary names
    (a parallel loop's graph); without either, the summary says they are unknown, never zero.
    `whole`: the loop as a whole, when this run took it over (its duration and commits are
    then told for this run and in all)."""
    seconds = time.monotonic() - tally.started
    next_step = NEXT_STEPS.get(how, "read the journal (`loopdeck log`)")
    duration = clock(seconds)
    if whole is not None and whole.duration_s is not None:
        duration = f"{duration} this run, {clock(max(whole.duration_s, seconds))} in all"
    lines = [
        "",
        "== loopdeck summary ==",
        f"Ended:       {how} ({reason})",
        f"Iterations:  {tally.iterations} this run" + (f", {state.iteration} in all" if state else ""),
        f"Duration:    {duration}",
    ]
    names = task_names(counts)
    tasks = recorded.get("tasks") if recorded else None
    if (counts is None or names is None) and isinstance(tasks, dict):
        for label, key in (("Done:", "done"), ("Skipped:", "skipped"), ("Remaining:", "remaining")):
            titles = [str(t) for t in tasks.get(key) or []]
            if titles or key != "skipped":
                lines.append(_named(label, len(titles), titles))
    elif counts is None or names is None:
        lines.append("Tasks:       unknown (the task sources could not be read)")
    else:
        done = sum(r.done for r in counts.sources if r.enabled and r.available)
        skipped = sum(r.skipped for r in counts.sources if r.enabled and r.available)
        lines.append(_named("Done:", done, names["done"]))
        if skipped:
            lines.append(_named("Skipped:", skipped, names["skipped"]))
        remaining = _named("Remaining:", counts.pending_total, names["remaining"])
        if counts.uncertain:
            unread = ", ".join(r.name for r in counts.unavailable)
            remaining += f" (and unknown in {unread}: could not be read)"
        lines.append(remaining)
    lines += validation_lines(
        state.last_validation if state is not None else None, tally.files, criteria_line(state)
    )
    if tally.agent_failures:
        lines.append(f"Failed:      {len(tally.agent_failures)} agent run(s): {tally.agent_failures[-1]}")
    if tally.verify_failures:
        lines.append(f"Verification failed {tally.verify_failures} time(s) along the way")
    if whole is not None and whole.commits:
        every, mine = whole.commits, len(tally.commits)
        lines.append(f"Commits:     {mine} this run, {len(every)} in all ({every[-1][:8]} last)")
    elif tally.commits:
        lines.append(f"Commits:     {len(tally.commits)} ({tally.commits[-1][:8]} last)")
    if state is not None and (state.usage or state.limits.get("max_cost_micro_usd")):
        lines.append(f"Cost:        {cost_line(state.usage, state.limits)}")
    if tally.turns and not any(_reported(record) for record in tally.turns):
        agents = ", ".join(sorted({str(record.get("agent") or "?") for record in tally.turns}))
        lines.append(f"Usage:       not reported by the agent ({agents}) in {len(tally.turns)} turn(s)")
    elif tally.turns:
        shown = tally.turns[-TURNS_SHOWN:]
        more = f" (the last {len(shown)} of {len(tally.turns)})" if len(tally.turns) > len(shown) else ""
        lines.append(f"Per iteration{more}:")
        lines += [f"  {turn_line(record)}" for record in shown]
    if folder is not None:
        lines.append(f"Archive:     {folder}")
    if report is not None:  # the loop's report with its charts (`loopdeck report`)
        lines.append(f"Report:      {report}")
    lines.append(f"Next:        {next_step}")
    return [redact(line) for line in lines]  # printed, and copied into bug reports


def validation_line(validation: dict[str, Any] | None) -> str:
    """`7 passed, 3 failed (test_a, test_b); build succeeds; uncommitted changes` from the last
    checks' results (`LoopState.last_validation`)."""
    validation = validation or {}
    tests = progress.tests_of(validation)
    parts = []
    if tests is not None:
        names = progress.failing_names(tests, 3)
        parts.append(progress.tests_line(tests) + (f" ({names})" if names else ""))
    elif validation.get("tests_pass") is not None:
        parts.append("pass" if validation["tests_pass"] else "fail")
    else:
        parts.append("none run")
    if validation.get("build_succeeds") is not None:
        parts.append("build " + ("succeeds" if validation["build_succeeds"] else "fails"))
    if validation.get("git_clean") is not None:
        parts.append("git clean" if validation["git_clean"] else "uncommitted changes")
    return "; ".join(parts)


def files_line(files: dict[str, Any]) -> str:
    """`2 created, 3 modified, 0 deleted (+120 -30 lines)`."""
    counts = {key: files.get(key) if isinstance(files.get(key), int) else 0 for key in progress.FILE_KEYS}
    return (
        f"{counts['created']} created, {counts['modified']} modified, {counts['deleted']} deleted "
        f"(+{counts['added']} -{counts['removed']} lines)"
    )


def validation_lines(
    validation: dict[str, Any] | None, files: dict[str, Any] | None, criteria: str | None = None
) -> list[str]:
    """The final validation block of a summary: the tests (coverage), the build, git, the
    files the run changed and the tests it added; nothing when neither is known."""
    lines = []
    if validation:
        tests = progress.tests_of(validation)
        lines.append("Final validation:")
        if tests is not None:
            names = progress.failing_names(tests, 5)
            lines.append(f"  Tests:     {progress.tests_line(tests)}" + (f" ({names})" if names else ""))
        elif validation.get("tests_pass") is not None:
            lines.append(f"  Tests:     {'pass' if validation['tests_pass'] else 'fail'}")
        if validation.get("build_succeeds") is not None:
            lines.append(f"  Build:     {'succeeds' if validation['build_succeeds'] else 'fails'}")
        if validation.get("git_clean") is not None:
            lines.append(f"  Git:       {'clean' if validation['git_clean'] else 'uncommitted changes'}")
        if criteria:
            lines.append(criteria)
        added = progress.tests_added(validation)
        if added is not None:
            lines.append(f"  New tests: {added}")
    if files:
        lines.append(f"Files:       {files_line(files)}")
    return lines


def criteria_line(state: LoopState | None) -> str | None:
    """`  Criteria:  1 of 1 checked by a command met; 1 left to the agent's judgement (…)` for a
    loop started from a design: a criterion naming a command is met when that command passed
    at the last validation."""
    design = state.extra.get("design") if state is not None else None
    if state is None or not isinstance(design, dict) or not isinstance(design.get("criteria"), list):
        return None
    criteria = [c for c in design["criteria"] if isinstance(c, dict)]
    passed = (state.last_validation or {}).get("passed")
    passed = passed if isinstance(passed, dict) else {}
    checked = [str(c["command"]) for c in criteria if c.get("command")]
    met = sum(1 for command in checked if passed.get(command))
    judged = len(criteria) - len(checked)
    return (
        f"  Criteria:  {met} of {len(checked)} checked by a command met; "
        f"{judged} left to the agent's judgement ({design.get('path', 'the design')})"
    )


def archived_lines(record: dict[str, object]) -> list[str]:
    """The last summary as `status` shows it once the loop has ended (from `summary.json`)."""
    outcome = record.get("outcome", "?")
    iterations = record.get("iteration", "?")
    lines = [f"last loop:   {outcome} ({record.get('reason', '')}), {iterations} iterations"]
    tasks = record.get("tasks")
    if isinstance(tasks, dict):
        for key, label in (("done", "Done:"), ("skipped", "Skipped:"), ("remaining", "Remaining:")):
            titles = [str(t) for t in tasks.get(key) or []]
            if titles or key != "skipped":
                lines.append(_named(label, len(titles), titles))
    usage = record.get("usage")
    if isinstance(usage, dict) and usage:
        lines.append(f"Cost:        {cost_line({str(k): int(v) for k, v in usage.items()})}")
    validation = record.get("validation")
    if isinstance(validation, dict) and validation:
        lines.append(f"Tests:       {validation_line(validation)}")
    lines.append(f"Next:        {NEXT_STEPS.get(str(outcome), 'read the journal (`loopdeck log`)')}")
    return [redact(line) for line in lines]
