"""`loopdeck undo TASK`: take a landed task back out of the loop's branch and open it again.

The landing's `task-merged` event says which commits the task brought: the landed commit, and
where the branch was before (the journal's word; the backup ref `loop.repo.landing.backup` must
agree with it, since an agent can write refs but not the journal). One revert commit takes them
back (never a reset, never a force-push: the history only grows). The task is then pending
in its graph and no longer among the loop's completed ones, so the next `run --workers` takes
it and lands it again. A person's verb: refused inside an agent's session, and while a runner
drives the loop (it holds the loop's lock and its merge queue moves the branch).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from loop.cli.options import workspace_of
from loop.core import scheduler, undo
from loop.core.board import PENDING, Update
from loop.core.errors import LoopdeckError
from loop.core.model import LoopState, Result
from loop.core.timeutil import utcnow
from loop.drivers import writer
from loop.repo import landing, worktrees
from loop.sources import taskgraph
from loop.store.journal import Journal
from loop.store.paths import Workspace
from loop.store.proc import alive
from loop.store.state import StateStore
from loop.trust.person import refuse_inside_agent
from loop.views.landed import landings, loop_graph


def cmd_undo(args: argparse.Namespace) -> int:
    refuse_inside_agent("`loopdeck undo`")
    ws = workspace_of(args)
    print(f"loopdeck: {undo_task(ws, args.task, Path(args.graph) if args.graph else None)}")
    return 0


@dataclass(frozen=True)
class Landed:
    task: str
    before: str
    after: str
    backup: str


def landed(ws: Workspace, task: str) -> Landed:
    """The task's last landing on the branch checked out: what it brought, from its `task-merged`
    event (the landed commit, and where the branch was before, which a backup ref must agree
    with); refused in one line when it did not land, was undone, or the record is not whole."""
    last = landings(Journal(ws.journal).read_from(0).events).get(task)
    if last is None:
        raise LoopdeckError(f"task {task} has not landed in {ws.root}: the journal records no merge of it")
    if last.undone:
        raise LoopdeckError(f"task {task} is not landed: it was undone at {last.undone[:19]}")
    after, before, root = last.sha, last.before, ws.root
    if not after or not landing.contains(root, after):
        raise LoopdeckError(
            f"task {task}'s landed commit {after[:8] or '(not recorded)'} is not on the branch "
            f"checked out in {root}: check out the loop's branch, then undo"
        )
    if not before:
        raise LoopdeckError(
            f"task {task}'s landing predates the journal's record of where the branch was before it: "
            "undo it by hand with `git revert`"
        )
    found = landing.backup_at(root, task, before)
    if found is None or before == after or not landing.contains(root, before, after):
        raise LoopdeckError(
            f"no backup ref of task {task} points at {before[:12]}, where the journal says the branch "
            f"was before it landed in {root}: undo it by hand with `git revert`"
        )
    return Landed(task, before, after, found.ref)


def undo_task(ws: Workspace, task: str, graph: Path | None = None) -> str:
    """Revert `task` on the loop's branch and open it again; what was done, in one line. The
    monitor's undo runs this too."""
    store = StateStore(ws)
    state = store.read()
    if state is not None and state.active and alive(state.pid):
        raise LoopdeckError(
            f"a runner drives the loop in {ws.root} (pid {state.pid}): stop it first "
            f"(`loopdeck stop --wait 30`), then undo task {task}"
        )
    where = _graph(ws, state, graph)
    with store.locked():
        state = store.read()
        if state is not None and state.active and alive(state.pid):
            raise LoopdeckError(f"a runner started in {ws.root} meanwhile: stop it, then undo task {task}")
        what = landed(ws, task)
        branch = worktrees.current_branch(ws.root) or "HEAD"
        span = f"{what.before[:12]}..{what.after[:12]}"
        message = f"loopdeck: undo task {task}\n\nReverts what task {task} landed ({span})."
        sha = landing.revert(ws.root, what.before, what.after, message)
        data = {"revert": sha, "landed": what.after, "backup": what.backup, "branch": branch}
        journal = Journal(ws.journal)
        updates = [Update(task, PENDING, None)]
        if state is not None and scheduler.SECTION in state.extra:
            step = undo.undone(scheduler.step_of(state), task, data)
            result = Result("allow", step.seal(), events=list(step.events))
            writer.carry_out(ws, store, journal, state, result, utcnow())
            updates = step.updates
        else:
            journal.append(
                "task-undone", state.iteration if state is not None else None, {"task": task, **data}
            )
    reopened = ""
    if where is not None:
        try:
            taskgraph.write(where, updates)
            reopened = f"; task {task} is pending again in {where}"
        except (OSError, LoopdeckError) as exc:
            reopened = f"; the task graph was not updated ({exc}): mark task {task} pending by hand"
    return f"task {task} undone on {branch} by {sha[:8]}{reopened}"


def _graph(ws: Workspace, state: LoopState | None, given: Path | None) -> Path | None:
    """The task graph to open the task again in: the one given, else the loop's (live, or the
    latest archived)."""
    return given if given is not None else loop_graph(ws, state)
