"""A PRD as a task source: a `prd.json` with `userStories[]`, each done when `passes` is true.

The format of the snarktank-style Ralph loops: `{"project", "branchName", "userStories":
[{"id", "title", "priority", "passes", …}]}`. It is found at the workspace root, or named with
`--task-file prd.json` (any `.json` task file is read as a PRD). Stories whose `passes` is false
are pending; the agent records progress by setting it to true. A file that cannot be read makes
the source unavailable (and the loop's answer uncertain), with file, line and problem.
"""

from __future__ import annotations

from pathlib import Path

from loop.core.errors import FileProblem
from loop.sources.base import MAX_ITEMS, SourceReport, TaskItem, unavailable
from loop.sources.task_file import resolve

NAME = "prd"
FILE_NAME = "prd.json"


def is_prd(path_text: str | None) -> bool:
    """Whether a configured task file is a PRD rather than a markdown checklist."""
    return bool(path_text) and str(path_text).lower().endswith(".json")


def configured(workspace_root: Path, task_file: str | None) -> str | None:
    """The PRD to read: the task file when it is one, else `prd.json` at the root if present."""
    if is_prd(task_file):
        return task_file
    return FILE_NAME if (workspace_root / FILE_NAME).is_file() else None


def check(workspace_root: Path, path_text: str, now: str) -> SourceReport:
    # Here, not at the top: it loads every loop format (`loop.formats`), ~8 ms that every Stop
    # would pay, measured with `-X importtime`; only a loop with a PRD comes here.
    from loop.formats.common import JsonFields

    try:
        path = resolve(workspace_root, path_text)
    except (ValueError, OSError, RuntimeError) as exc:
        return unavailable(NAME, str(exc), now, detail=path_text)
    try:
        fields = JsonFields.load(path)
        stories = fields.get("userStories")[1]
        if stories is None:
            raise FileProblem(path, '"userStories" is missing: expected a list of stories', 1)
        if not isinstance(stories, list):
            raise FileProblem(
                path, '"userStories" should be a list of stories', fields.line_of("userStories")
            )
        items: list[TaskItem] = []
        pending = done = 0
        for index, story in enumerate(stories):
            where = f'"userStories"[{index}]'
            if not isinstance(story, dict):
                raise FileProblem(path, f"{where} should be an object", fields.line_of("userStories"))
            passes = story.get("passes", False)
            if not isinstance(passes, bool):
                raise FileProblem(path, f'{where}: "passes" should be true or false, found {passes!r:.30}')
            title = story.get("title") or story.get("id") or f"story {index + 1}"
            if not isinstance(title, str):
                raise FileProblem(path, f'{where}: "title" should be text')
            story_id = story.get("id")
            if passes:
                done += 1
            else:
                pending += 1
            if len(items) < MAX_ITEMS:
                items.append(
                    TaskItem(
                        title=title.strip(),
                        status="done" if passes else "pending",
                        id=str(story_id) if story_id is not None else None,
                    )
                )
    except FileProblem as exc:
        return unavailable(NAME, str(exc), now, detail=str(path))

    return SourceReport(
        NAME,
        enabled=True,
        available=True,
        pending=pending,
        done=done,
        items=tuple(items),
        checked_at=now,
        detail=str(path),
    )
