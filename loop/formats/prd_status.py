"""A story loop's `docs/prd-status.json`: which stories of a PRD have passed verification.

No schema is published, so both shapes seen in the wild are read: `{"stories": [{"id",
"title", "passes" | "status"}]}` (also under `userStories`), or a plain map of story id to
true/false or a status word. A story is done when it passes (or its status says passed, done or
complete).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loop.core.errors import FileProblem
from loop.formats.common import JsonFields
from loop.formats.view import NeighbourLoop

KIND = "prd-status"
PATH = "docs/prd-status.json"
DONE_WORDS = ("passed", "pass", "done", "complete", "completed", "verified")


def read(path: Path) -> NeighbourLoop:
    f = JsonFields.load(path)
    key, stories = f.get("stories", "userStories")
    done: list[str] = []
    pending: list[str] = []
    if stories is not None:
        if not isinstance(stories, list):
            raise FileProblem(path, f'"{key}" should be a list of stories', f.line_of(key))
        for index, story in enumerate(stories):
            if not isinstance(story, dict):
                raise FileProblem(path, f'"{key}"[{index}] should be an object', f.line_of(key))
            title = str(story.get("title") or story.get("id") or f"story {index + 1}")
            (done if _passed(story.get("passes", story.get("status"))) else pending).append(title)
    else:
        for story_id, value in f.data.items():
            if not isinstance(value, bool | str | dict):
                raise FileProblem(
                    path,
                    f'"{story_id}" should be true/false, a status word or an object',
                    f.line_of(story_id),
                )
            if isinstance(value, dict):
                value = value.get("passes", value.get("status"))
            (done if _passed(value) else pending).append(story_id)
    if not done and not pending:
        raise FileProblem(path, 'no stories: expected "stories": [...] or a map of story id to status')
    return NeighbourLoop(
        kind=KIND,
        state_file=str(path),
        status="running" if pending else "completed",
        current_task=pending[0] if pending else None,
        tasks_done=len(done),
        tasks_pending=len(pending),
        pending_titles=tuple(pending[:20]),
    )


def _passed(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    return isinstance(value, str) and value.lower() in DONE_WORDS
