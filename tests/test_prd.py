"""prd.json as a task source: stories whose `passes` is false are pending."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from loop.sources import prd
from loop.sources.aggregate import SourceConfig, check_all
from loop.store.paths import Workspace
from tests.conftest import FIXTURES, Ran

PRD = (FIXTURES / "formats" / "prd.json").read_bytes()
NOW = "2026-01-09T11:42:07.000Z"


def test_counts_stories(tmp_path: Path) -> None:
    (tmp_path / "prd.json").write_bytes(PRD)
    report = prd.check(tmp_path, "prd.json", NOW)
    assert report.available and report.enabled
    assert (report.pending, report.done) == (2, 1)
    assert [i.title for i in report.pending_items()] == ["Create a todo", "Validate input"]
    assert report.items[1].id == "US-002"


def test_found_at_the_root_by_the_aggregate(ws: Workspace) -> None:
    (ws.root / "prd.json").write_bytes(PRD)
    result = check_all(SourceConfig(ws, check_github=False, check_tasks=False, check_todos=False), NOW)
    report = result.by_name("prd")
    assert report is not None and report.pending == 2
    assert result.pending_total == 2


def test_named_as_the_task_file(ws: Workspace) -> None:
    (ws.root / "docs").mkdir()
    (ws.root / "docs" / "stories.json").write_bytes(PRD)
    config = SourceConfig(ws, task_file="docs/stories.json", check_github=False, check_tasks=False)
    result = check_all(config, NOW)
    task_file = result.by_name("task_file")
    assert task_file is not None and not task_file.enabled, "a PRD is not read as a checklist"
    report = result.by_name("prd")
    assert report is not None and report.pending == 2


def test_absent_means_no_source(ws: Workspace) -> None:
    result = check_all(SourceConfig(ws, check_github=False, check_tasks=False, check_todos=False), NOW)
    assert result.by_name("prd") is None


BROKEN = {
    "truncated": (PRD[: len(PRD) // 2], "ends early"),
    "binary": (b"\x00\x01\x02", "binary"),
    "no stories": (b'{"project": "x"}', '"userStories" is missing'),
    "stories not a list": (b'{"userStories": {"a": 1}}', "should be a list"),
    "story not an object": (b'{"userStories": ["a"]}', "should be an object"),
    "passes not a bool": (
        b'{"userStories": [{"title": "a", "passes": "yes"}]}',
        '"passes" should be true or false',
    ),
    "huge": (b'{"userStories": [{"title": "' + b"x" * (5 << 20) + b'"}]}', "bytes"),
}


@pytest.mark.parametrize("name", list(BROKEN))
def test_broken_files_make_it_unavailable(ws: Workspace, name: str) -> None:
    data, words = BROKEN[name]
    (ws.root / "prd.json").write_bytes(data)
    result = check_all(SourceConfig(ws, check_github=False, check_tasks=False, check_todos=False), NOW)
    report = result.by_name("prd")
    assert report is not None and not report.available
    assert report.error is not None and words in report.error and "prd.json" in report.error
    assert result.uncertain, "an unreadable PRD keeps the loop working rather than letting it stop"


def test_outside_the_workspace_is_refused(ws: Workspace, tmp_path: Path) -> None:
    (tmp_path / "prd.json").write_bytes(PRD)
    report = prd.check(ws.root, "../prd.json", NOW)
    assert not report.available and report.error is not None and "outside the workspace" in report.error


def test_sources_cli_lists_it(ws: Workspace, cli: Callable[..., Ran]) -> None:
    (ws.root / "prd.json").write_text(json.dumps({"userStories": [{"title": "One", "passes": False}]}))
    ran = cli("sources", "--json", "--no-github")
    data = json.loads(ran.out)
    [report] = [s for s in data["sources"] if s["name"] == "prd"]
    assert report["pending"] == 1


def test_the_prompt_says_how_to_record_a_story(ws: Workspace) -> None:
    from loop.core.prompts import recording_help

    (ws.root / "prd.json").write_bytes(PRD)
    result = check_all(SourceConfig(ws, check_github=False, check_tasks=False, check_todos=False), NOW)
    assert '"passes"` to true' in recording_help(result)
