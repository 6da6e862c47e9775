"""The one read-only view every neighbour format is turned into."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

NEEDS_PERSON = ("paused", "failed", "stopping")
"""Statuses of a neighbour loop that mean it waits for a person rather than for its agent."""


@dataclass(frozen=True)
class NeighbourLoop:
    """Another tool's loop, as far as its file tells: never written, never driven by loopdeck.

    Fields a format does not record stay `None`, so a viewer shows "-" rather than a guess.
    """

    kind: str
    """`ralph-loop`, `workflow-loop`, `continuous-session`, `task-loop`, `prd-status`,
    `claude-task-state`, `claude-goal`."""
    state_file: str
    status: str
    """Normalised to loopdeck's words: initializing, running, paused, stopping, completed,
    stopped, failed."""
    iteration: int | None = None
    max_iterations: int | None = None
    prompt: str = ""
    completion_promise: str | None = None
    started_at: str | None = None
    updated_at: str | None = None
    session_id: str | None = None
    current_task: str | None = None
    tasks_done: int | None = None
    tasks_pending: int | None = None
    pending_titles: tuple[str, ...] = ()
    can_cancel: bool = False
    """Whether the format's own convention lets a person end the loop from outside (ralph-loop:
    its state file removed)."""

    @property
    def needs_person(self) -> bool:
        return self.status in NEEDS_PERSON

    def to_json(self) -> dict[str, Any]:
        obj = asdict(self)
        obj["pending_titles"] = list(self.pending_titles)
        return obj


STATUS_WORDS = {"complete": "completed", "done": "completed", "active": "running", "cancelled": "stopped"}


def normalise(status: str) -> str:
    return STATUS_WORDS.get(status, status)
