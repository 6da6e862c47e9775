"""All four sources at once: what the hook, the runner, `loopdeck sources` and the TUI ask."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from loop.core.model import Aggregate, LoopState, combine
from loop.core.timeutil import iso_ms, utcnow
from loop.sources import claude_tasks, github, prd, task_file, todos
from loop.sources import graph as graph_source
from loop.sources.base import disabled
from loop.store.paths import Workspace

__all__ = ["Aggregate", "SourceConfig", "check_all", "combine"]


@dataclass(frozen=True, slots=True)
class SourceConfig:
    """What to check, as the state file (or the command line) says."""

    workspace: Workspace
    task_file: str | None = None
    check_todos: bool = True
    check_tasks: bool = True
    github: github.GithubConfig | None = None
    check_github: bool = True
    transcript: Path | None = None
    session_id: str | None = None
    tasks_dir: Path | None = None
    graph: Path | None = None
    """A parallel loop's task graph (its board names it)."""

    @classmethod
    def from_state(cls, workspace: Workspace, state: LoopState | None, **overrides: Any) -> SourceConfig:
        if state is None:
            config = cls(workspace)
        else:
            transcript = state.transcript_path or None
            if transcript is None and state.session_id:
                found = todos.transcript_for(claude_tasks.claude_home(), workspace.root, state.session_id)
                transcript = str(found) if found else None
            project = str(state.github_project_id or "")
            config = cls(
                workspace,
                task_file=state.task_path,
                check_tasks=state.check_tasks,
                check_github=state.check_github,
                github=github.GithubConfig(project) if project else None,
                transcript=Path(transcript) if transcript else None,
                session_id=state.session_id,
                graph=_graph_of(state),
            )
        return replace(config, **{k: v for k, v in overrides.items() if v is not None})


def check_all(config: SourceConfig, now: str | None = None) -> Aggregate:
    stamp = now or iso_ms(utcnow())
    cache_dir = config.workspace.private_dir
    reports = [
        github.check(config.github, stamp, cache_dir)
        if config.check_github
        else disabled(github.NAME, "turned off (--no-github)", stamp),
        claude_tasks.check(config.tasks_dir, config.session_id, stamp)
        if config.check_tasks
        else disabled(claude_tasks.NAME, "turned off (--no-tasks)", stamp),
        task_file.check(
            config.workspace.root, None if prd.is_prd(config.task_file) else config.task_file, stamp
        ),
        todos.check(config.transcript, stamp, cache_dir)
        if config.check_todos
        else disabled(todos.NAME, "turned off", stamp),
    ]
    if config.graph is not None:
        reports.append(graph_source.check(config.graph, stamp))
    prd_file = prd.configured(config.workspace.root, config.task_file)
    if prd_file is not None:
        reports.append(prd.check(config.workspace.root, prd_file, stamp))
    return combine(reports, stamp)


def _graph_of(state: LoopState) -> Path | None:
    """The task graph a parallel loop's board names (None for the other loops)."""
    raw = state.extra.get("parallel")
    if raw is None:
        return None
    try:
        board = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return None
    graph = board.get("graph") if isinstance(board, dict) else None
    return Path(graph) if isinstance(graph, str) and graph else None
