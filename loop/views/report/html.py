"""A loop's report as one self-contained HTML page: inline CSS, charts as inline SVG, no script,
nothing fetched (its Content-Security-Policy forbids every fetch, should anything try).

Every text in it came from the workspace or the agent (task titles, questions, commands, their
output): each is redacted and escaped here, in one helper, never written raw.
"""

from __future__ import annotations

import html
from collections.abc import Iterable

import loop
from loop.core.progress import tests_line
from loop.core.redact import redact
from loop.core.timeutil import human_duration, log_stamp
from loop.views.report import charts
from loop.views.report.model import LoopReport, money
from loop.views.report.timeline import TIMELINE_TAIL

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"

CSS = """
:root { color-scheme: light; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #1d1d1f;
  background: #f4f5f7; }
main { max-width: 1360px; margin: 0 auto; padding: 20px 28px 40px; }
h1 { font-size: 22px; margin: 4px 0 2px; }
h2 { font-size: 17px; margin: 28px 0 10px; border-bottom: 1px solid #d8dbe0; padding-bottom: 4px; }
.meta { color: #5f6368; font-size: 13px; }
.card { background: #fff; border: 1px solid #e0e3e7; border-radius: 8px; padding: 14px 18px; }
.ending { display: flex; flex-wrap: wrap; gap: 10px 28px; align-items: baseline; }
.badge { display: inline-block; padding: 2px 10px; border-radius: 12px; font-weight: 600; color: #fff;
  background: #607d8b; }
.badge.good { background: #2e7d32; } .badge.bad { background: #c62828; } .badge.wait { background: #ef6c00; }
.figure b { font-size: 18px; display: block; }
.attention li { margin: 4px 0; } ol.attention { padding-left: 2.2em; }
td.when { white-space: nowrap; } .attention.none { color: #2e7d32; }
.charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(560px, 1fr)); gap: 14px; }
.chart svg { width: 100%; height: auto; display: block; }
table { border-collapse: collapse; width: 100%; background: #fff; font-size: 13px; }
th, td { text-align: left; padding: 5px 8px; border-bottom: 1px solid #eceef1; vertical-align: top; }
th { background: #f0f2f5; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.bad td { background: #fdecea; } tr.good td:first-child { border-left: 3px solid #2e7d32; }
tr.bad td:first-child { border-left: 3px solid #c62828; }
pre { white-space: pre-wrap; word-break: break-word; margin: 4px 0 0; font-size: 12px; color: #444; }
code { font-size: 12px; background: #f0f2f5; padding: 1px 4px; border-radius: 3px; }
.empty { color: #777; font-style: italic; }
footer { margin-top: 30px; color: #777; font-size: 12px; }
"""


def e(value: object) -> str:
    """Workspace or agent text, safe in HTML: redacted, then escaped (quotes too)."""
    return html.escape(redact(str(value)), quote=True)


def tone_of(outcome: str) -> str:
    if outcome.startswith(("completed", "done")):
        return "good"
    if outcome.startswith(("failed", "escalated", "limit")):
        return "bad"
    if outcome.startswith(("paused", "question", "usage-limit", "interrupted")):
        return "wait"
    return ""


def render(report: LoopReport) -> str:
    """The whole page."""
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>loopdeck report: {e(report.title)}</title>",
        f"<style>{CSS}</style></head><body><main>",
        *_header(report),
        *_attention(report),
        *_charts(report),
        *_tasks(report),
        *_checks(report),
        *_questions(report),
        *_escalations(report),
        *_timeline(report),
        f"<footer>Written by loopdeck {e(loop.__version__)} at {e(log_stamp(report.generated_at))}. "
        "This page is one file: it loads nothing from anywhere.</footer>",
        "</main></body></html>",
    ]
    return "\n".join(parts) + "\n"


def _header(report: LoopReport) -> list[str]:
    where = {
        "live": "the live loop",
        "archived": f"archived in {report.folder}",
        "journal": "from the journal",
    }
    done = sum(1 for t in report.tasks if t.outcome == "done")
    left = sum(1 for t in report.tasks if t.outcome in ("remaining", "in progress", "?"))
    limit = f" of {report.max_iterations}" if report.max_iterations else ""
    figures = [
        ("Iterations", f"{report.iterations}{limit}"),
        ("Duration", human_duration(report.duration_s) if report.duration_s is not None else "unknown"),
        ("Cost", money(report.cost_usd)),
        ("Commits", str(report.commits)),
        ("Tasks", f"{done} done, {left} left" if report.tasks else "none named"),
    ]
    last = report.series.points[-1] if report.series.points else None
    if last is not None and last.tests_failed is not None:
        figures.append(("Tests", f"{last.tests_passed or 0} passing, {last.tests_failed} failing"))
    cells = "".join(f'<div class="figure">{e(name)}<b>{e(value)}</b></div>' for name, value in figures)
    return [
        f"<h1>{e(report.title)}</h1>",
        f'<p class="meta">{e(report.workspace)} · loop {e(report.loop_id or "without an id")} · '
        f"driver {e(report.driver)} · started {e(log_stamp(report.started_at))} · "
        f"{e(where[report.where])}</p>",
        '<section class="card" id="ending"><div class="ending">',
        f'<div><span class="badge {tone_of(report.outcome)}">{e(report.outcome)}</span></div>',
        f"<div>{e(report.reason) or '<span class=empty>no reason recorded</span>'}</div></div>",
        f'<div class="ending" style="margin-top:10px">{cells}</div></section>',
    ]


def _attention(report: LoopReport) -> list[str]:
    out = ['<h2 id="attention">Look at first</h2>']
    if not report.attention:
        out.append('<p class="attention none">Nothing needs you: no escalation waits, no check is red.</p>')
        return out
    out.append('<ol class="attention card">')
    out += [f"<li>{e(item)}</li>" for item in report.attention]
    out.append("</ol>")
    return out


def _charts(report: LoopReport) -> list[str]:
    points = report.series.points
    labels = [str(p.iteration) for p in points]
    drawn: list[tuple[str, str]] = []
    if report.series.has_tests:
        drawn.append(("tests", charts.lines(
            "Tests per iteration", labels,
            [
                ("passing", report.series.column("tests_passed")),
                ("failing", report.series.column("tests_failed")),
            ],
        )))  # fmt: skip
    if report.series.known("tasks_done") or report.series.known("tasks_open"):
        drawn.append(("tasks", charts.lines(
            "Tasks per iteration", labels,
            [("done", report.series.column("tasks_done")), ("open", report.series.column("tasks_open"))],
        )))  # fmt: skip
    if report.series.known("cost_usd"):
        drawn.append(("cost", charts.lines(
            "Cost so far (USD)", labels, [("cost", report.series.column("cost_usd"))],
            show_legend=False, fill=True,
        )))  # fmt: skip
    if report.durations:
        drawn.append(("durations", charts.bars(
            "Turn durations (seconds)", [label for label, _ in report.durations], "seconds",
            [round(seconds, 1) for _, seconds in report.durations],
        )))  # fmt: skip
    out = ['<h2 id="progress">Progress</h2>']
    if not drawn:
        out.append('<p class="empty">The journal holds no per-iteration figures for this loop yet.</p>')
        return out
    out.append('<div class="charts">')
    out += [
        f'<figure class="chart card" id="chart-{name}" style="margin:0">{svg}</figure>' for name, svg in drawn
    ]
    out.append("</div>")
    return out


def _empty(anchor: str, title: str, said: str) -> list[str]:
    """A section with nothing to show: its heading and the line (loopdeck's own words) that says so."""
    return [f'<h2 id="{anchor}">{title}</h2>', f'<p class="empty">{said}</p>']


def _table(anchor: str, title: str, headers: Iterable[str]) -> list[str]:
    """A section's heading and its table's header row (the caller adds the rows and closes it)."""
    head = "".join(f"<th>{h}</th>" for h in headers)
    return [f'<h2 id="{anchor}">{title}</h2>', f"<table><tr>{head}</tr>"]


def _row(cells: Iterable[str], tone: str = "") -> str:
    return f'<tr class="{tone}">' + "".join(cells) + "</tr>" if tone else "<tr>" + "".join(cells) + "</tr>"


def _pull(url: str) -> str:
    """A task's pull request as a link (an address of the web only)."""
    if not url.startswith(("https://", "http://")):
        return ""
    return f' <a href="{e(url)}">pull request #{e(url.rsplit("/", 1)[-1])}</a>'


def _tasks(report: LoopReport) -> list[str]:
    if not report.tasks:
        return _empty("tasks", "Tasks", "No task is named in this loop's journal or sources.")
    headers = ("Task", "Outcome", "Turns", "Commits", "Cost", "Checks", "What went wrong")
    out = _table("tasks", "Tasks", headers)
    for task in report.tasks:
        tone = "bad" if task.failures else "good" if task.outcome == "done" else ""
        wrong = ", ".join(f"{n} × {kind}" for kind, n in task.problems.most_common())
        who = f" ({', '.join(task.workers)})" if task.workers else ""
        checks = (
            f"{task.checks_passed} passed, {task.checks_failed} failed"
            if task.checks_passed or task.checks_failed
            else ""
        )
        out.append(_row([
            f"<td>{e(task.name)}{e(who)}{_pull(task.pull)}</td>", f"<td>{e(task.outcome)}</td>",
            f'<td class="num">{task.turns}</td>', f'<td class="num">{task.commits}</td>',
            f'<td class="num">{e(money(task.cost_usd)) if task.cost_usd is not None else ""}</td>',
            f"<td>{e(checks)}</td>", f"<td>{e(wrong)}</td>",
        ], tone))  # fmt: skip
    out.append("</table>")
    return out


def _checks(report: LoopReport) -> list[str]:
    if not report.checks:
        return _empty("verification", "Verification", "No verification command ran.")
    out = _table("verification", "Verification", ("Command", "Runs", "Failed", "Last", "Tests"))
    for check in report.checks:
        last = "passed" if check.last_passed else f"FAILED (exit {check.last_exit})"
        tail = f"<pre>{e(check.tail)}</pre>" if check.tail.strip() and not check.last_passed else ""
        out.append(_row([
            f"<td><code>{e(check.command)}</code>{tail}</td>", f'<td class="num">{check.runs}</td>',
            f'<td class="num">{check.failed}</td>',
            f"<td>{e(last)} at iteration {e(check.last_iteration)}</td>",
            f"<td>{e(tests_line(check.tests) if check.tests else '')}</td>",
        ], "" if check.last_passed else "bad"))  # fmt: skip
    out.append("</table>")
    if report.still_failing:
        out.append(
            "<p>Still failing:</p><ul>"
            + "".join(f"<li><code>{e(t)}</code></li>" for t in report.still_failing)
            + "</ul>"
        )
    return out


def _questions(report: LoopReport) -> list[str]:
    if not report.questions:
        return _empty("questions", "Questions", "The agent asked nothing.")
    out = _table("questions", "Questions", ("Iteration", "Asked", "Answer"))
    for q in report.questions:
        who = f"{q.worker}: " if q.worker else ""
        answer = e(q.answer) if q.answer is not None else "<b>not answered yet</b>"
        cells = [
            f'<td class="num">{e(q.iteration)}</td>',
            f"<td>{e(who + q.text)}</td>",
            f"<td>{answer}</td>",
        ]
        out.append(_row(cells,
                        "" if q.answer is not None else "bad"))  # fmt: skip
    out.append("</table>")
    return out


def _escalations(report: LoopReport) -> list[str]:
    if not report.escalations:
        return _empty("escalations", "Escalations", "None: the loop never stopped to ask for a person.")
    out = _table("escalations", "Escalations", ("Iteration", "When", "Why", "Now"))
    for x in report.escalations:
        out.append(_row([
            f'<td class="num">{e(x.iteration)}</td>', f'<td class="when">{e(log_stamp(x.ts))}</td>',
            f"<td>{e(x.reason)}" + (f" <code>{e(x.kind)}</code>" if x.kind else "") + "</td>",
            f"<td>{'<b>waiting for you</b>' if x.open else 'resolved'}</td>",
        ], "bad" if x.open else ""))  # fmt: skip
    out.append("</table>")
    return out


def _timeline(report: LoopReport) -> list[str]:
    if not report.journal_found and not report.timeline:
        return _empty("timeline", "Timeline", "The journal no longer holds this loop's events.")
    out = _table("timeline", "Timeline", ("Time", "Iteration", "Event"))
    for i, moment in enumerate(report.timeline):
        if report.left_out and i == len(report.timeline) - TIMELINE_TAIL:
            out.append(f'<tr><td colspan="3" class="empty">… {report.left_out} events left out …</td></tr>')
        out.append(_row([
            f'<td class="when">{e(log_stamp(moment.ts))}</td>',
            f'<td class="num">{e("" if moment.iteration is None else moment.iteration)}</td>',
            f"<td>{e(moment.text)}</td>",
        ], moment.tone))  # fmt: skip
    out.append("</table>")
    return out
