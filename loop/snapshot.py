"""One immutable picture of a workspace: what `status --json` prints and the TUI draws.

Viewers never hold state of their own: they read a fresh Snapshot whenever a file changes.
Reading never fails: a corrupt state file becomes `error`, so the viewer can show it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from loop.errors import FileProblem
from loop.paths import Workspace
from loop.proc import alive
from loop.sources.aggregate import Aggregate, SourceConfig, check_all
from loop.state import LoopState, StateStore


@dataclass(frozen=True)
class LoopView:
    kind: str
    state_file: str
    status: str
    iteration: int
    max_iterations: int
    verification_mode: bool
    verification_remaining: int
    completion_promise: str
    started_at: str
    session_id: str | None
    driver: str | None
    pid: int | None
    alive: bool | None

    @classmethod
    def of(cls, workspace: Workspace, state: LoopState) -> LoopView:
        return cls(
            kind="orchestrator-loop",
            state_file=str(workspace.state),
            status=state.status,
            iteration=state.iteration,
            max_iterations=state.max_iterations,
            verification_mode=state.verification_mode,
            verification_remaining=state.verification_remaining,
            completion_promise=state.completion_promise,
            started_at=state.started_at,
            session_id=state.session_id,
            driver=state.driver,
            pid=state.pid,
            alive=alive(state.pid),
        )


@dataclass(frozen=True)
class StateProblem:
    path: str
    line: int | None
    problem: str
    message: str


@dataclass(frozen=True)
class Snapshot:
    workspace: str
    loop: LoopView | None
    error: StateProblem | None = None
    sources: Aggregate | None = None

    def to_json(self) -> dict[str, Any]:
        obj: dict[str, Any] = {
            "workspace": self.workspace,
            "loop": asdict(self.loop) if self.loop else None,
            "sources": [s.to_json() for s in self.sources.sources] if self.sources else [],
            "pending_total": self.sources.pending_total if self.sources else 0,
            "uncertain": self.sources.uncertain if self.sources else False,
        }
        if self.error is not None:
            obj["error"] = asdict(self.error)
        return obj


def read(workspace: Workspace, *, with_sources: bool = True) -> Snapshot:
    try:
        state = StateStore(workspace).read()
    except FileProblem as exc:
        problem = StateProblem(str(exc.path), exc.line, exc.problem, str(exc))
        return Snapshot(str(workspace.root), None, problem)
    if state is None:
        return Snapshot(str(workspace.root), None)
    sources = check_all(SourceConfig.from_state(workspace, state)) if with_sources else None
    return Snapshot(str(workspace.root), LoopView.of(workspace, state), sources=sources)
