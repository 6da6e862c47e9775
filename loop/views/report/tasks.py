"""The report's task table: each task's turns, commits, cost, checks and what went wrong.

A loop of one agent names its task per iteration; a loop of workers names it on every worker
event. The task sources' lists (done, skipped, remaining) then give each row its outcome.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from pathlib import Path

from loop.core.errors import LoopdeckError
from loop.core.model import JournalEvent, LoopState
from loop.core.redact import redact
from loop.views.report.model import TaskRow

WORKER_PROBLEMS = {
    "audit-rejected": "audit rejection",
    "merge-conflict": "merge conflict",
    "merge-rejected": "merge undone",
    "merge-flaky": "flaky check",
    "worker-replaced": "worker replaced",
    "worker-strayed": "files outside the task",
    "verification-failed": "failed check",
}
PULL_PROBLEMS = {"checks": "failed check on the pull request", "reviewers": "change request"}


def graph_titles(state: LoopState) -> dict[str, str]:
    """A loop of workers' task titles by id, from its graph when it can still be read."""
    section = state.extra.get("parallel")
    if isinstance(section, str):
        with contextlib.suppress(ValueError):
            section = json.loads(section)
    graph = section.get("graph") if isinstance(section, dict) else None
    if not isinstance(graph, str) or not graph:
        return {}
    from loop.sources import taskgraph

    try:
        return {task.id: task.subject for task in taskgraph.read(Path(graph))}
    except (OSError, LoopdeckError, ValueError):
        return {}


def turn_tasks(events: list[JournalEvent]) -> list[TaskRow]:
    """A loop of one agent: each iteration's task (as the runner or the hook named it), and
    what that iteration did (its commits, its cost, its checks)."""
    task_of: dict[int, str] = {}
    for event in events:
        n = event.iteration
        task = event.data.get("task")
        if (
            isinstance(n, int)
            and isinstance(task, str)
            and task
            and event.kind in ("iteration-started", "task-selected", "blocked")
        ):
            task_of[n] = task
    rows: dict[str, TaskRow] = {}
    turns: dict[str, set[int]] = {}
    for event in events:
        n = event.iteration
        if not isinstance(n, int) or n not in task_of:
            continue
        row = rows.setdefault(task_of[n], TaskRow(redact(task_of[n])))
        turns.setdefault(task_of[n], set()).add(n)
        if event.kind == "commit":
            row.commits += 1
        elif event.kind == "iteration-completed":
            row.add_cost(event.data.get("cost_usd"))
        elif event.kind == "verification-passed":
            row.checks_passed += 1
        elif event.kind == "verification-failed":
            row.checks_failed += 1
            row.problems["failed check"] += 1
        elif event.kind == "agent-failed":
            row.problems["agent failure"] += 1
    for name, seen in turns.items():
        rows[name].turns = len(seen)
    return list(rows.values())


def worker_tasks(events: list[JournalEvent], titles: Mapping[str, str]) -> list[TaskRow]:
    """A loop of workers: each task of the graph, from its workers' events."""
    rows: dict[str, TaskRow] = {}
    for event in events:
        task = event.data.get("task")
        if task is None or not event.kind.startswith(("worker-", "task-", "audit-", "merge-", "pr-")):
            continue
        key = str(task)
        title = titles.get(key)
        row = rows.setdefault(key, TaskRow(redact(f"{key}. {title}" if title else f"task {key}")))
        worker = event.data.get("worker")
        if isinstance(worker, str) and worker and worker not in row.workers:
            row.workers.append(worker)
        if event.kind == "worker-ended":
            row.turns += 1
            row.add_cost(event.data.get("cost_usd"))
        elif event.kind == "task-merged":
            row.commits += 1
        elif event.kind == "audit-approved":
            row.checks_passed += 1
        elif event.kind == "task-completed":
            row.outcome = "done"
        elif event.kind in ("pr-opened", "pr-updated") and isinstance(event.data.get("url"), str):
            row.pull = str(event.data["url"])
        elif event.kind == "pr-rework":
            row.problems[PULL_PROBLEMS["checks" if event.data.get("checks") else "reviewers"]] += 1
        elif event.kind in WORKER_PROBLEMS:
            row.problems[WORKER_PROBLEMS[event.kind]] += 1
            if event.kind == "audit-rejected":
                row.checks_failed += 1
    return sorted(rows.values(), key=lambda r: _id_order(r.name))


def _id_order(name: str) -> tuple[int, str]:
    head = name.split(".", 1)[0].removeprefix("task ")
    return (int(head), name) if head.isdigit() else (1 << 30, name)


def set_outcomes(tasks: list[TaskRow], names: Mapping[str, list[str]]) -> None:
    """Each task's outcome from the sources' lists by title (done, skipped, remaining); the
    tasks no iteration worked on join the table."""
    status: dict[str, str] = {}
    for key in ("remaining", "skipped", "done"):
        for title in names.get(key, []):
            status[redact(title)] = key
    matched: set[str] = set()
    for row in tasks:
        plain = row.name.split(". ", 1)[-1] if row.name[:1].isdigit() else row.name
        title = row.name if row.name in status else plain
        if title in status:
            row.outcome = status[title] if row.outcome == "?" else row.outcome
            matched.add(title)
        elif row.outcome == "?" and row.workers:
            row.outcome = "in progress"
    tasks.extend(TaskRow(title, outcome=key) for title, key in status.items() if title not in matched)
