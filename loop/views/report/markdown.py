"""A loop's report as GitHub-flavoured markdown, fit for a pull request's description: the same
sections as the HTML page, its charts as unicode sparklines and a small table of iterations.

Workspace and agent text is redacted and escaped (no HTML, no table-breaking `|`, no link or
emphasis it did not mean), so a task title cannot change what the pull request shows.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from loop.core.redact import redact
from loop.core.timeutil import human_duration, log_stamp
from loop.views.report.model import LoopReport, money

BLOCKS = "▁▂▃▄▅▆▇█"
ROWS_SHOWN = 20
TIMELINE_SHOWN = 40

_SPECIAL = re.compile(r"([\\`*_\[\]|<>~])")
"""What markdown reads as markup inside a line: emphasis, code, links, tables, HTML, strikes."""


_MENTION = re.compile(r"@(?=[A-Za-z0-9_])")
"""An `@name` GitHub would turn into a mention (and a notification to that person or team)."""


def md(value: object) -> str:
    """Text safe in markdown (and in a table cell): redacted, one line, specials escaped, and no
    `@mention` (a zero-width joiner after the `@`): a pull request quoting the agent pings nobody."""
    text = " ".join(redact(str(value)).split())
    text = text.replace("&", "&amp;")
    return _MENTION.sub("@\u200d", _SPECIAL.sub(r"\\\1", text))


def code(value: object) -> str:
    """Text shown as code: in a span whose backticks outnumber its own."""
    text = " ".join(redact(str(value)).split()).replace("|", "\\|")
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    return f"{fence} {text} {fence}"


def sparkline(values: Sequence[float | None]) -> str:
    """`▁▃▅█`, a space where a value is unknown."""
    known = [v for v in values if v is not None]
    if not known:
        return ""
    low, high = min(known), max(known)
    span = (high - low) or 1.0
    return "".join(" " if v is None else BLOCKS[int((v - low) / span * (len(BLOCKS) - 1))] for v in values)


def _number(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "–"
    return f"{value:.{digits}f}" if digits else str(int(value))


def render(report: LoopReport) -> str:
    out: list[str] = [f"## loopdeck report: {md(report.title)}", ""]
    limit = f" of {report.max_iterations}" if report.max_iterations else ""
    done = sum(1 for t in report.tasks if t.outcome == "done")
    left = sum(1 for t in report.tasks if t.outcome in ("remaining", "in progress", "?"))
    out += [
        f"**{md(report.outcome)}**" + (f": {md(report.reason)}" if report.reason else ""),
        "",
        f"- Iterations: {report.iterations}{limit}; duration "
        + (human_duration(report.duration_s) if report.duration_s is not None else "unknown"),
        f"- Cost: {money(report.cost_usd)}; commits: {report.commits}",
        f"- Tasks: {done} done, {left} left" if report.tasks else "- Tasks: none named",
        f"- Loop {md(report.loop_id or 'without an id')}, driver {md(report.driver)}, "
        f"started {md(log_stamp(report.started_at))}",
        "",
        "### Look at first",
        "",
    ]
    out += [f"{i}. {md(item)}" for i, item in enumerate(report.attention, 1)] or [
        "Nothing needs you: no escalation waits, no check is red."
    ]
    out += ["", *_progress(report), *_tasks(report), *_checks(report), *_questions(report)]
    out += [*_escalations(report), *_timeline(report)]
    return "\n".join(out).rstrip() + "\n"


def _progress(report: LoopReport) -> list[str]:
    figures = report.series
    if not figures.points:
        return ["### Progress", "", "No per-iteration figures yet.", ""]
    named = [
        ("Tests failing", "tests_failed", 0),
        ("Tests passing", "tests_passed", 0),
        ("Tasks done", "tasks_done", 0),
        ("Tasks open", "tasks_open", 0),
        ("Cost so far", "cost_usd", 2),
        ("Turn seconds", "duration_s", 1),
    ]
    shown = [(label, name, digits) for label, name, digits in named if figures.known(name)]
    out = ["### Progress", "", "| | first → last | per iteration |", "| --- | --- | --- |"]
    for label, name, digits in shown:
        column = figures.column(name)
        known = [v for v in column if v is not None]
        ends = f"{_number(known[0], digits)} → {_number(known[-1], digits)}"
        out.append(f"| {label} | {ends} | `{sparkline(column)}` |")
    rows = figures.points[-ROWS_SHOWN:]
    more = f" (the last {len(rows)} of {len(figures.points)})" if len(figures.points) > len(rows) else ""
    out += ["", f"<details><summary>Per iteration{more}</summary>", ""]
    out.append("| Iteration | " + " | ".join(label for label, _, _ in shown) + " |")
    out.append("| ---: |" + " ---: |" * len(shown))
    for point in rows:
        cells = [_number(getattr(point, name), digits) for _, name, digits in shown]
        out.append(f"| {point.iteration} | " + " | ".join(cells) + " |")
    out += ["", "</details>", ""]
    return out


def _tasks(report: LoopReport) -> list[str]:
    if not report.tasks:
        return []
    out = ["### Tasks", "", "| Task | Outcome | Turns | Commits | Cost | Checks | What went wrong |"]
    out.append("| --- | --- | ---: | ---: | ---: | --- | --- |")
    for task in report.tasks:
        checks = (
            f"{task.checks_passed} passed, {task.checks_failed} failed"
            if task.checks_passed or task.checks_failed
            else ""
        )
        wrong = ", ".join(f"{n} × {kind}" for kind, n in task.problems.most_common())
        cost = money(task.cost_usd) if task.cost_usd is not None else ""
        pull = f" {md(task.pull)}" if task.pull else ""  # its pull request (`run --pr`)
        out.append(
            f"| {md(task.name)}{pull} | {md(task.outcome)} | {task.turns} | {task.commits} | {cost} "
            f"| {checks} | {md(wrong)} |"
        )
    return [*out, ""]


def _checks(report: LoopReport) -> list[str]:
    if not report.checks:
        return []
    out = ["### Verification", "", "| Command | Runs | Failed | Last |", "| --- | ---: | ---: | --- |"]
    for check in report.checks:
        last = "passed" if check.last_passed else f"**FAILED** (exit {check.last_exit})"
        out.append(
            f"| {code(check.command)} | {check.runs} | {check.failed} "
            f"| {last} at iteration {check.last_iteration} |"
        )
    if report.still_failing:
        out += ["", "Still failing:", *[f"- {code(test)}" for test in report.still_failing]]
    return [*out, ""]


def _questions(report: LoopReport) -> list[str]:
    if not report.questions:
        return []
    out = ["### Questions", "", "| Iteration | Asked | Answer |", "| ---: | --- | --- |"]
    for q in report.questions:
        who = f"{q.worker}: " if q.worker else ""
        answer = md(q.answer) if q.answer is not None else "**not answered yet**"
        out.append(f"| {q.iteration} | {md(who + q.text)} | {answer} |")
    return [*out, ""]


def _escalations(report: LoopReport) -> list[str]:
    if not report.escalations:
        return []
    out = ["### Escalations", "", "| Iteration | Why | Now |", "| ---: | --- | --- |"]
    for x in report.escalations:
        out.append(f"| {x.iteration} | {md(x.reason)} | {'**waiting for you**' if x.open else 'resolved'} |")
    return [*out, ""]


def _timeline(report: LoopReport) -> list[str]:
    if not report.timeline:
        return []
    shown = report.timeline[-TIMELINE_SHOWN:]
    more = (
        f" (the last {len(shown)} of {len(report.timeline) + report.left_out})"
        if len(shown) < len(report.timeline) + report.left_out
        else ""
    )
    out = ["<details><summary>Timeline" + more + "</summary>", ""]
    out += [f"- `{log_stamp(m.ts)}` {md(m.text)}" for m in shown]
    return [*out, "", "</details>", ""]
