"""`loopdeck run --workers N`: the options, checked, and the parallel runner started.

Apart from `loop.cli.long` so that the single runner's verb stays as it was: `--workers 1` is
today's runner, unchanged."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from loop.cli.options import config_confirmer
from loop.cli.starting import request_from
from loop.core.errors import LoopdeckError
from loop.core.scheduler import BATCH, CHECKS, MAX_WORKERS, Board, board_of
from loop.drivers import defaults
from loop.drivers.runner import Options, Runner
from loop.drivers.start import new_state
from loop.sources.claude_tasks import claude_home
from loop.store.control import end_offset
from loop.store.paths import Workspace
from loop.store.state import LoopState

if TYPE_CHECKING:
    from loop.drivers.worktree_setup import WorktreeSetup

DEFAULT_GOAL = "Work through the task graph"


def graph_path(args: argparse.Namespace, ws: Workspace, existing: LoopState | None) -> Path:
    """The graph named on the command line, else the one the loop recorded."""
    if args.graph and args.task_list:
        raise LoopdeckError("give --graph or --task-list, not both")
    if args.task_list:
        return claude_home() / "tasks" / str(args.task_list)
    if args.graph:
        path = Path(str(args.graph)).expanduser()
        return inside(ws, path if path.is_absolute() else (Path.cwd() / path).resolve())
    recorded = board_of(existing).graph if existing is not None else ""
    if recorded:
        return inside(ws, Path(recorded))
    raise LoopdeckError(
        "--workers needs a task graph: --graph PATH (folder or .json/.yaml) or --task-list ID"
    )


def inside(ws: Workspace, path: Path) -> Path:
    """The graph is written (owners, statuses): it must be inside the workspace, or a Claude Code
    task list (`~/.claude/tasks/ID`), never anywhere a state file names."""
    real = path.resolve()
    for root in (ws.root.resolve(), (claude_home() / "tasks").resolve()):
        if real != root and real.is_relative_to(root):
            return real
    raise LoopdeckError(
        f"the task graph {path} is outside the workspace {ws.root}; expected a file or folder inside "
        "it, or a Claude Code task list (--task-list ID)"
    )


def check_workers(args: argparse.Namespace, ws: Workspace, existing: LoopState | None) -> None:
    """A loop of workers' own flags checked first: their mistake is the one to hear, not that
    the default agent is not installed."""
    if args.workers is None:
        return
    if not 1 <= args.workers <= MAX_WORKERS:
        raise LoopdeckError(f"--workers takes 1 to {MAX_WORKERS}, not {args.workers}")
    if args.workers > 1 or args.graph:
        path = graph_path(args, ws, existing)  # refused when none is named or recorded
        if args.graph:
            from loop.sources import taskgraph

            taskgraph.read(path)  # there, and a graph


def run_parallel(
    args: argparse.Namespace,
    ws: Workspace,
    options: Options,
    runner: Runner,
    existing: LoopState | None,
    create: Callable[[], LoopState],
) -> int:
    if not 1 <= args.workers <= MAX_WORKERS:  # `cmd_run` checked the rest (`check_workers`)
        raise LoopdeckError(f"--workers takes 1 to {MAX_WORKERS}, not {args.workers}")
    board = board_of(existing) if existing is not None else None
    pr = bool(getattr(args, "pr", False)) or (board is not None and board.pr)  # a --pr loop goes on as one
    if args.workers == 1 and not pr:
        return runner.run(create)
    # Imported here: the parallel driver (and the verification it loads) would cost every
    # single runner's start ~90 ms (measured: 90-150 ms on top of the runner's own modules).
    from loop.drivers.parallel import Parallel, ParallelRunner

    path = graph_path(args, ws, existing)
    if args.audit and args.audit_agent:
        raise LoopdeckError("give --audit or --audit-agent, not both")
    audit, audit_agent = args.audit, args.audit_agent
    board = board_of(existing) if existing is not None else None
    if board is not None and board.audit and not (audit or audit_agent):
        # the audit this loop recorded (confirmed like the rest of what the state names)
        audit, audit_agent = (None, board.audit) if board.audit_kind == "agent" else (board.audit, None)
    given = frozenset(
        name
        for name, value in (
            ("graph", args.graph or args.task_list),
            ("audit", args.audit or args.audit_agent),
        )
        if value
    )
    parallel = Parallel(
        path,
        args.workers,
        audit,
        audit_agent,
        tuple(args.verify_allow or ()),
        given=given,
        isolation=getattr(args, "isolation", None),
        strategy=getattr(args, "merge", None) or (board.strategy if board is not None else "merge"),
        batch=merge_batch(getattr(args, "merge_batch", None), board),
        merge_checks=merge_checks(getattr(args, "merge_checks", None), board),
        pr=pr,
        worktree_setup=worktree_setup(args, ws),
    )

    def create_parallel() -> LoopState:
        prompt = " ".join(args.prompt).strip() or DEFAULT_GOAL
        request = request_from(
            args, prompt, completion_promise="null", task_file=None, check_tasks=False, check_github=False
        )
        return new_state(request, control_offset=end_offset(ws))

    return ParallelRunner(ws, options, parallel, settings=runner.settings).run(create_parallel)


def worktree_setup(args: argparse.Namespace, ws: Workspace) -> WorktreeSetup:
    """The saved worktree setup (`loop.drivers.worktree_setup`), checked before anything runs. A
    project file's copies, commands and ports are its text: used once a person confirmed them
    (at the terminal, `--yes`, or `loopdeck config --trust`), else the run is refused."""
    from loop.drivers.worktree_setup import KEYS, from_values

    saved = defaults.settle(ws, KEYS, confirm=config_confirmer(args), by="run")
    return from_values(saved.values, args.workers, ws.root, saved.where)


def recorded_workers(state: LoopState) -> int | None:
    """How many workers a loop of workers had (its board), so that `run` and `resume` go on
    with the parallel driver; None for the other loops."""
    board = board_of(state)
    return board.capacity if board.graph and board.capacity > 1 else None


def merge_batch(given: int | None, board: Board | None) -> int:
    """How many branches the merge train lands together: the command line's, else the loop's."""
    if given is None:
        return board.batch if board is not None else BATCH
    if not 1 <= given <= 100:
        raise LoopdeckError(f"--merge-batch takes 1 to 100, not {given}")
    return given


def merge_checks(given: int | None, board: Board | None) -> int:
    """How many checks the merge train may run at once: the command line's, else the loop's."""
    if given is None:
        return board.checks if board is not None else CHECKS
    if not 1 <= given <= 16:
        raise LoopdeckError(f"--merge-checks takes 1 to 16, not {given}")
    return given
