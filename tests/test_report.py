"""`loopdeck report`: a loop of each driver (the hook, the runner, workers) and an archived one,
read from journals written here, drawn as one self-contained page and as markdown; the verb's
options and errors; the ending's summary and notification that link it."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from loop.core.model import LoopState
from loop.drivers import notify
from loop.store.archive import archive
from loop.store.paths import Workspace
from loop.store.state import StateStore
from loop.views.report import gather, markdown
from loop.views.report import html as page
from loop.views.report.files import ending_report
from loop.views.summary import Tally, summary_lines
from tests.conftest import Ran

START = "2026-03-01T22:00:00+00:00"
TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
NAMESPACES = {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"}


def stamp(second: int) -> str:
    minutes, seconds = divmod(second, 60)
    return f"2026-03-01T22:{minutes:02d}:{seconds:02d}.000Z"


class Lines:
    """A journal written line by line, as the drivers write it."""

    def __init__(self, ws: Workspace) -> None:
        self.path = ws.journal
        self.clock = 0

    def add(self, kind: str, iteration: int | None, /, **data: Any) -> None:
        self.clock += 3
        line = {"ts": stamp(self.clock), "kind": kind, "iteration": iteration, "data": data}
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")


def loop_state(loop_id: str = "aaaa11112222", **more: Any) -> LoopState:
    return LoopState(started_at=START, loop_id=loop_id, body="Fix the parser\nmore words", **more)


def counts_json(failed: int, passed: int) -> dict[str, Any]:
    failing = [f"tests/test_parse.py::test_{n}" for n in range(failed)]
    return {"passed": passed, "failed": failed, "failing": failing, "reader": "junit"}


def runner_journal(ws: Workspace, loop_id: str = "aaaa11112222", turns: int = 10) -> None:
    """A runner loop whose agent fixes one failing test per turn (10 → 0), a check red once."""
    lines = Lines(ws)
    lines.add("loop-started", 0, started_at=START, loop_id=loop_id, prompt="Fix the parser", driver="runner")
    lines.add("runner-started", 0, pid=1, agent="claude")
    for n in range(1, turns + 1):
        task = "Parse numbers" if n <= 5 else "Parse strings"
        lines.add("iteration-started", n, task=task, agent="claude")
        failed = n == 3
        lines.add(
            "verification-failed" if failed else "verification-passed", n,
            command="pytest -q", exit_code=1 if failed else 0, duration_s=1.0,
            tail="E   AssertionError: boom" if failed else "ok", tests=counts_json(10 - n, n),
        )  # fmt: skip
        if not failed:
            lines.add("commit", n, sha=f"{n:040x}")
        lines.add("iteration-completed", n, duration_s=10.0 + n, cost_usd=0.25, agent="claude")
        lines.add(
            "progress", n, tasks={"open": 2 if n <= 5 else 1, "done": 0 if n <= 5 else 1},
            tests=counts_json(10 - n, n), moved=["fewer-failing"],
        )  # fmt: skip


def no_fetch(text: str) -> None:
    """Nothing in the page makes a browser fetch: no address but XML namespace names."""
    found = set(re.findall(r"https?://[^\s\"'<>)]+", text)) - NAMESPACES
    assert not found, found
    assert not re.search(r"(?:src|href)\s*=\s*[\"']?(?:https?:)?//", text)
    assert not re.search(r"<script|<link|@import|url\(", text, re.IGNORECASE)


def test_a_runner_loop_shows_its_test_curve_tasks_cost_and_turns(ws: Workspace) -> None:
    StateStore(ws).write(loop_state(driver="runner", iteration=10, usage={"cost_micro_usd": 2_500_000}))
    runner_journal(ws)
    report = gather(ws)
    assert report.where == "live" and report.driver == "runner"
    assert report.series.column("tests_failed") == [9, 8, 7, 6, 5, 4, 3, 2, 1, 0]
    assert report.series.column("tests_passed") == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    assert report.cost_usd == 2.5
    numbers, strings = report.tasks[:2]
    assert (numbers.name, numbers.turns, numbers.commits, numbers.checks_failed) == ("Parse numbers", 5, 4, 1)
    assert (strings.turns, strings.commits, strings.cost_usd) == (5, 5, 1.25)
    assert len(report.durations) == 10 and report.durations[0] == ("1", 11.0)
    assert any("failed most" in item and "Parse numbers" in item for item in report.attention)
    text = page.render(report)
    for chart in ("chart-tests", "chart-tasks", "chart-cost", "chart-durations"):
        assert f'id="{chart}"' in text
    assert "Content-Security-Policy" in text and "default-src 'none'" in text
    no_fetch(text)
    md = markdown.render(report)
    assert "| Tests failing | 9 → 0 |" in md and "| Tests passing | 1 → 10 |" in md
    assert "`█▇▆▅▄▃▃▂▁▁`"[:3] in md or "█" in md


def test_a_hook_loop_with_an_escalation_waiting_and_a_question_answered(ws: Workspace) -> None:
    state = loop_state(
        driver="hook", iteration=4, status="paused",
        waiting_for={"kind": "escalation", "reason": "the same error 3 times"},
    )  # fmt: skip
    StateStore(ws).write(state)
    lines = Lines(ws)
    lines.add("loop-started", 0, started_at=START, loop_id=state.loop_id, prompt="Fix the parser")
    lines.add("session-bound", 1, session_id="s1")
    for n in range(1, 5):
        lines.add("blocked", n, message=f"iteration {n}", mode="work")
        lines.add("progress", n, tasks={"open": 3, "done": 0}, tests=counts_json(2, 5), moved=[])
    lines.add("question", 2, question="Which parser <b>should</b> I keep?")
    lines.add("answered", 2, answer="the new one")
    lines.add("verification-failed", 4, command="pytest -q", exit_code=1, tail="E boom\nFAILED test_x")
    lines.add("escalation", 4, reason="the same error 3 times", kind="same-error")
    report = gather(ws)
    assert report.driver == "hook" and report.outcome == "paused (escalation)"
    assert report.attention[0].startswith("An escalation waits for you (iteration 4)")
    assert any(
        item.startswith("Verification is red: `pytest -q`") and "FAILED test_x" in item
        for item in report.attention
    )
    assert any("2 test(s) still fail" in item and "never passed" in item for item in report.attention)
    [question] = report.questions
    assert question.answer == "the new one"
    assert report.durations == [("1", 6.0), ("2", 6.0), ("3", 6.0)]  # between the hook's turns
    text = page.render(report)
    assert "Which parser &lt;b&gt;should&lt;/b&gt; I keep?" in text and "<b>should</b>" not in text
    assert "waiting for you" in text
    no_fetch(text)


def test_a_loop_of_workers_shows_each_task_of_its_graph(ws: Workspace) -> None:
    graph = ws.private_dir / "graph"
    graph.mkdir(parents=True)
    for n, subject in ((1, "Sketch the model"), (2, "Add the store")):
        (graph / f"{n}.json").write_text(
            json.dumps({"id": str(n), "subject": subject, "status": "completed"})
        )
    section = {"graph": str(graph), "capacity": 2, "workers": [], "done": ["1", "2"]}
    StateStore(ws).write(loop_state(driver="runner", iteration=6, extra={"parallel": section}))
    lines = Lines(ws)
    lines.add("loop-started", 0, started_at=START, loop_id="aaaa11112222", prompt="Build", driver="runner")
    lines.add("worker-started", 1, worker="worker-1", task="1", files=["a.py"])
    lines.add("worker-started", 1, worker="worker-2", task="2", files=["b.py"])
    lines.add("worker-ended", 2, worker="worker-1", task="1", turn=1, exit_code=0, duration_s=4.0)
    lines.add("audit-approved", 2, worker="worker-1", task="1")
    lines.add("task-merged", 2, worker="worker-1", task="1", sha="1" * 40)
    lines.add("task-completed", 2, worker="worker-1", task="1", turns=1)
    for turn in (1, 2, 3):
        lines.add(
            "worker-ended", 2 + turn, worker="worker-2", task="2", turn=turn, exit_code=0, duration_s=5.0
        )
        if turn < 3:
            lines.add("audit-rejected", 2 + turn, worker="worker-2", task="2", feedback="tests fail")
    lines.add("task-merged", 6, worker="worker-2", task="2", sha="2" * 40)
    lines.add("task-completed", 6, worker="worker-2", task="2", turns=3)
    report = gather(ws)
    assert report.parallel
    first, second = report.tasks
    assert (first.name, first.outcome, first.turns, first.commits) == ("1. Sketch the model", "done", 1, 1)
    assert (second.turns, second.checks_failed, second.problems["audit rejection"]) == (3, 2, 2)
    assert any(
        'failed most: "2. Add the store" (2 audit rejections in 3 turn(s))' in i for i in report.attention
    )
    assert [label for label, _ in report.durations] == ["1·1", "2·1", "2·2", "2·3"]
    text = page.render(report)
    assert 'id="chart-durations"' in text and "worker-2" in text
    no_fetch(text)


def test_an_archived_loop_reads_its_own_events_only(ws: Workspace, cli: Callable[..., Ran]) -> None:
    old = loop_state(loop_id="0ld0ld0ld0ld", driver="runner", iteration=10, status="completed")
    runner_journal(ws, loop_id=old.loop_id)
    Lines(ws).add("completed", 10, reason="all sources empty and verified")
    folder = archive(ws, old, "completed", {"reason": "all sources empty and verified", "tasks": {
        "done": ["Parse numbers", "Parse strings"], "skipped": [], "remaining": []}})  # fmt: skip
    new = LoopState(
        started_at="2026-03-02T08:00:00+00:00", loop_id="ne3ne3ne3ne3", driver="runner", body="Next"
    )
    StateStore(ws).write(new)
    Lines(ws).add("loop-started", 0, started_at=new.started_at, loop_id=new.loop_id, prompt="Next")
    Lines(ws).add("iteration-started", 1, task="Something else")

    report = gather(ws, archive=folder)
    assert report.where == "archived" and report.outcome == "completed"
    assert [t.name for t in report.tasks] == ["Parse numbers", "Parse strings"]
    assert all(t.outcome == "done" for t in report.tasks) and len(report.series.points) == 10
    assert "Something else" not in page.render(report)

    ran = cli("report", "--archive", "0ld0ld0ld0ld")  # by the loop's id
    assert ran.code == 0, ran.err
    assert Path(ran.out.strip()) == folder / "report.html" and (folder / "report.html").is_file()
    ran = cli("report")  # the live loop, into loopdeck's own folder
    assert ran.code == 0 and Path(ran.out.strip()).parent == ws.private_dir / "reports"
    ran = cli("report", "--latest-archive", "--markdown", "--out", "-")
    assert ran.code == 0 and ran.out.startswith("## loopdeck report: Fix the parser")

    StateStore(ws).path.unlink()
    ws.journal.write_text("")  # the journal started over: the archive alone is left
    report = gather(ws)
    assert report.where == "archived" and not report.journal_found
    assert any("no longer holds" in item for item in report.attention)


def test_the_verb_says_what_is_wrong_in_one_line(
    cli: Callable[..., Ran], ws: Workspace, tmp_path: Path
) -> None:
    ran = cli("report")
    assert ran.code == 1 and ran.err.count("\n") == 1 and "no loop in" in ran.err
    ran = cli("report", "--archive", "nope")
    assert ran.code == 1 and "no archived loops in" in ran.err and "Traceback" not in ran.err
    StateStore(ws).write(loop_state())
    ran = cli("report", "--out", str(tmp_path))
    assert ran.code == 1 and "is a folder" in ran.err
    ran = cli("report", "--out", "-", "--open")
    assert ran.code == 1 and "--open needs a file" in ran.err


def test_open_hands_the_file_to_the_browser_as_a_file_address(
    cli: Callable[..., Ran], ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    import webbrowser

    opened: list[str] = []

    def record(url: str, *args: object, **kwargs: object) -> bool:
        opened.append(url)
        return True

    monkeypatch.setattr(webbrowser, "open", record)
    StateStore(ws).write(loop_state())
    ran = cli("report", "--open")
    assert ran.code == 0 and opened == [Path(ran.out.strip()).as_uri()]


def test_agent_text_is_escaped_and_secrets_redacted_in_both_forms(ws: Workspace) -> None:
    StateStore(ws).write(loop_state(driver="runner"))
    lines = Lines(ws)
    lines.add("loop-started", 0, started_at=START, loop_id="aaaa11112222", prompt="x")
    evil = f"<script>alert(1)</script> | [link](http://evil.example) `{TOKEN}`"
    lines.add("iteration-started", 1, task=evil)
    lines.add("question", 1, question=f"use {TOKEN}?")
    report = gather(ws)
    text = page.render(report)
    assert "<script>" not in text and "&lt;script&gt;" in text and TOKEN not in text
    no_fetch(text.replace("http://evil.example", ""))  # the only address: the agent's, as text
    assert 'href="http://evil.example' not in text
    md = markdown.render(report)
    assert TOKEN not in md and "<script>" not in md and "\\[link\\]" in md and "\\|" in md


def test_the_ending_writes_the_report_and_its_summary_and_notification_link_it(ws: Workspace) -> None:
    state = loop_state(driver="runner", iteration=10, status="completed")
    runner_journal(ws)
    folder = archive(ws, state, "completed", {"reason": "done"})
    path = ending_report(ws, folder)
    assert path == folder / "report.html" and path.read_text().startswith("<!doctype html>")
    lines = summary_lines("completed", "done", Tally(), None, folder, state, report=path)
    assert f"Report:      {path}" in lines
    due = notify.messages([("completed", {"reason": "done"}), ("archived", {"folder": str(folder)})], "p", 10)
    assert due[0]["report"] == str(folder / "report.html") and "Report: " in due[0]["text"]
    path.unlink()
    notify.ensure_report(ws.root, folder / "report.html")  # the detached sender, for the hook
    assert path.is_file()
    assert notify.messages([("question", {"question": "?"})], "p", 1)[0].get("report") is None


def test_an_infinite_or_nan_cost_or_duration_is_left_out_not_a_crash(
    ws: Workspace, cli: Callable[..., Ran]
) -> None:
    from loop.agents.output import as_float

    StateStore(ws).write(loop_state(driver="runner", iteration=3))
    lines = Lines(ws)
    lines.add("loop-started", 0, started_at=START, loop_id="aaaa11112222", prompt="x", driver="runner")
    for n, value in ((1, float("inf")), (2, float("nan")), (3, 0.5)):
        lines.add("iteration-completed", n, duration_s=value, cost_usd=value)
        lines.add("progress", n, tests=counts_json(3 - n, n), moved=[])
    assert "Infinity" in ws.journal.read_text() and "NaN" in ws.journal.read_text()
    report = gather(ws)
    assert report.series.column("cost_usd") == [None, None, 0.5]
    assert report.series.column("duration_s") == [None, None, 0.5]
    for text in (markdown.render(report), page.render(report)):
        assert not re.search(r"\b(?:nan|inf|infinity)\b", text, re.IGNORECASE)
    shown = cli("report", "--markdown", "--out", "-")
    assert shown.code == 0 and "| 3 |" in shown.out, shown.err
    assert cli("report").code == 0
    assert [as_float(v) for v in (float("inf"), float("nan"), -1.0, 10**400, 2)] == [None] * 4 + [2.0]


def test_the_markdown_mentions_nobody_and_uncommitted_work_needs_a_look(ws: Workspace) -> None:
    validation = {"ts": START, "tests_pass": True, "build_succeeds": None, "git_clean": False}
    StateStore(ws).write(loop_state(driver="runner", status="completed", last_validation=validation))
    lines = Lines(ws)
    lines.add("loop-started", 0, started_at=START, loop_id="aaaa11112222", prompt="x", driver="runner")
    lines.add("iteration-started", 1, task="ask @octocat and @github/security, not a@b")
    report = gather(ws)
    assert any("uncommitted changes" in item for item in report.attention)
    md = markdown.render(report)
    assert "Nothing needs you" not in md and "uncommitted changes" in md
    assert not re.search(r"@[A-Za-z0-9]", md)
    assert "@\u200doctocat" in md
