"""What travels between the loop's workflow, its activities and the verbs: plain data, and the
state and the graph as JSON.

Everything here ends up in the workflow's history, which the server keeps and anyone with
access to the namespace can read: no credential ever goes in (the agent's API key and the git
token stay in the worker's environment), and the texts an agent wrote are redacted and scrubbed
of the worker's secrets before they leave it (`loop.temporal.activities`). No Temporal import:
the verbs and the tests build these without the SDK.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from loop.core.model import KNOWN_KEYS, Aggregate, LoopState, combine
from loop.core.scheduler import Task, Update
from loop.sources import graph

WORKFLOW_NAME = "loopdeck.loop"
TURNS_SUFFIX = "-turns"
"""Workers' turns poll their own queue (`<queue>-turns`), so a worker busy with an agent never
holds up the loop's short activities (merges, audits, the graph) on the main queue."""


def turns_queue(task_queue: str) -> str:
    return task_queue + TURNS_SUFFIX


# --- the loop's state and graph, as JSON --------------------------------------------------------


def state_json(state: LoopState) -> dict[str, Any]:
    """The state as the workflow carries it: every known key, the extras, the prompt."""
    return {
        "values": {key: getattr(state, key) for key in KNOWN_KEYS},
        "extra": dict(state.extra),
        "body": state.body,
    }


def state_from(obj: dict[str, Any]) -> LoopState:
    values = {k: v for k, v in dict(obj.get("values") or {}).items() if k in KNOWN_KEYS}
    state = LoopState(**values, extra=dict(obj.get("extra") or {}), body=str(obj.get("body") or ""))
    return state.copy()


def task_json(task: Task) -> dict[str, Any]:
    return asdict(task)


def task_from(obj: dict[str, Any]) -> Task:
    return Task(
        id=str(obj.get("id", "?")),
        subject=str(obj.get("subject", "")),
        description=str(obj.get("description", "")),
        status=str(obj.get("status", "pending")),
        owner=obj.get("owner") if isinstance(obj.get("owner"), str) else None,
        blocked_by=tuple(str(b) for b in obj.get("blocked_by") or ()),
        target_files=tuple(str(f) for f in obj.get("target_files") or ()),
        skipped=obj.get("skipped") is True,
    )


def overlay(tasks: list[Task], updates: dict[str, Update]) -> list[Task]:
    """The graph as the loop knows it: what it read, with the statuses and owners the loop
    decided since (the local driver writes those into the graph's file; here the workflow
    holds them), so a refreshed graph never hands a task under way to a second worker."""
    from dataclasses import replace

    return [
        replace(
            t,
            status=updates[t.id].status,
            owner=updates[t.id].owner,
            skipped=updates[t.id].metadata.get("skipped") is True,
        )
        if t.id in updates
        else t
        for t in tasks
    ]


# --- the workflow's input ----------------------------------------------------------------------


@dataclass
class LoopSpec:
    """What `loopdeck run --engine temporal` starts a loop with."""

    workflow_id: str
    state: dict[str, Any]
    """`state_json` of the new loop: its prompt, limits, verification and board."""
    tasks: list[dict[str, Any]]
    """The graph's tasks as read at the start (`task_json`)."""
    remote: str
    """The shared git remote every worker clones and pushes to (a URL, or a bare repository's
    path on a shared disk); never with credentials in it."""
    loop_branch: str
    """The branch approved tasks merge into, on the remote."""
    loop_name: str
    """The loop's short name in task branch names (`loopdeck/<loop_name>/<task>`)."""
    graph: str = ""
    """The graph's path inside the repository (refreshed from the loop's branch), "" when it is
    not in the repository (the tasks given at the start are the graph)."""
    agent: str = ""
    """The agent command a person confirmed at `run`; a worker runs it only if it accepts it."""
    agent_format: str | None = None
    task_queue: str = "loopdeck"
    turn_timeout_s: float = 1800.0
    heartbeat_timeout_s: float = 30.0
    """A worker silent this long is lost: its turn goes to another worker."""
    audit: str | None = None
    audit_agent: str | None = None
    """An agent command that audits each approved turn (exit 0 approves), as `--audit-agent`
    locally; a worker runs it only if it accepts it (`loopdeck worker --agent`)."""
    fallback_agent: str | None = None
    """The agent a turn goes to while a usage limit holds the first (`--fallback-agent`)."""
    fallback_format: str | None = None
    verify_allow: list[str] = field(default_factory=list)
    strategy: str = "merge"
    idle_s: float = 10.0
    """With nothing under way, how often the loop looks again (the graph, the deadlock count)."""
    max_attempts: int = 5
    """Attempts of one turn on lost workers before the loop is told the turn failed."""
    turns_per_run: int = 0
    """Turns one run of the workflow takes before it continues as new; 0: when the server
    suggests it (or its history reaches `HISTORY_EVENTS`)."""
    carried: dict[str, Any] | None = None
    """What a run that continued as new hands to the next (`Carried.to_json`); None at the start."""


HISTORY_EVENTS = 20_000
"""A run's history this long continues as new whatever the server says (its hard limit is
51,200 events)."""


@dataclass
class Carried:
    """Everything one run of the loop's workflow hands to the next when it continues as new:
    the loop, its graph and journal's tail, the commands not yet applied, and what its workers
    were doing (no activity is under way at the switch: the run waited for each to end)."""

    state: dict[str, Any]
    tasks: list[dict[str, Any]]
    updates: dict[str, list[Any]]
    """Task → [status, owner, metadata] the loop decided (a task skipped says so there)."""
    journal: list[dict[str, Any]]
    attached: int
    """Journal events before `journal`'s first (the queries count events from the loop's start)."""
    inbox: list[dict[str, Any]] = field(default_factory=list)
    """Signals not yet applied (`CommandSignal` fields), in order."""
    held: dict[str, list[Any]] = field(default_factory=dict)
    """Role (`agent`, `fallback`) → [until ISO time, limits in a row without a reset time]."""
    audits: dict[str, list[str]] = field(default_factory=dict)
    """Worker → the files its branch changed, for an audit that starts in the next run."""
    outputs: dict[str, str] = field(default_factory=dict)
    """Worker → its last turn's final words, for an audit agent."""
    tails: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Worker → its last ended turn's last lines, for a monitor."""
    refresh: bool = False
    """The graph is to be read again from the loop's branch."""
    runs: int = 1
    """Runs of the workflow so far, this one included."""
    role: str = "agent"
    """The role of the agent the last turn started with."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Carried:
        known = {k: v for k, v in obj.items() if k in cls.__dataclass_fields__}
        return cls(**known)


# --- the activities' inputs and outputs --------------------------------------------------------


@dataclass
class TurnInput:
    workflow_id: str
    worker: str
    task: str
    turn: int
    prompt: str
    remote: str
    loop_branch: str
    branch: str
    agent: str
    agent_format: str | None
    timeout_s: float
    files: list[str] = field(default_factory=list)
    rework: str | None = None
    role: str = "agent"
    """Which of the loop's agents `agent` is: `agent` (the first choice) or `fallback`."""
    fallback: str | None = None
    """The agent to turn to at once, in the same worktree, if `agent` hits a usage limit (the
    loop's fallback while no limit holds it)."""
    fallback_format: str | None = None

    @property
    def key(self) -> str:
        """This turn, whichever attempt: what its commit on the task's branch records."""
        return f"{self.workflow_id}/{self.worker}/{self.turn}"


@dataclass
class TurnOutput:
    """A worker's turn as facts: the loop's rules judge them (nothing is decided here)."""

    worker: str
    task: str
    turn: int
    failure: str | None = None
    error: str | None = None
    usage: dict[str, int] | None = None
    limited: str | None = None
    resets_at: str | None = None
    denied: list[str] = field(default_factory=list)
    denied_hint: str | None = None
    text: str = ""
    question: str | None = None
    exit_code: int | None = None
    duration_s: float = 0.0
    changed: list[str] = field(default_factory=list)
    """What the task's branch changed against the loop's branch (empty: no progress)."""
    note: str = ""
    """What the worker must hear when its work cannot be taken (conflict markers left)."""
    sha: str | None = None
    """The task branch's head after the turn."""
    attempt: int = 1
    resumed: bool = False
    """A lost attempt had pushed this turn's work already: the agent did not run again."""
    machine: str = ""
    role: str = "agent"
    """The role of the agent whose turn this is (`fallback` when the first was limited)."""
    agent_name: str = ""
    """Its CLI (`claude`, `codex`, `text`…), as the journal names agents."""
    limits: list[dict[str, Any]] = field(default_factory=list)
    """Each agent that hit a usage limit in this turn: role, agent, reason, resets_at."""
    lines: dict[str, Any] | None = None
    """The turn's last lines as its last heartbeat would carry them (`loop.temporal.output`),
    taken after the agent ended: a monitor opened later shows them."""

    def to_record(self) -> str:
        """The facts kept in the turn's commit (its lines stay out of the commit message)."""
        facts = {k: v for k, v in asdict(self).items() if k != "lines"}
        return json.dumps(facts, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_record(cls, text: str) -> TurnOutput | None:
        try:
            obj = json.loads(text)
        except ValueError:
            return None
        if not isinstance(obj, dict):
            return None
        known = {k: v for k, v in obj.items() if k in cls.__dataclass_fields__}
        try:
            return cls(**known)
        except TypeError:
            return None


@dataclass
class MergeInput:
    workflow_id: str
    remote: str
    loop_branch: str
    branch: str
    task: str
    worker: str
    message: str
    verify: list[str] = field(default_factory=list)
    verify_allow: list[str] = field(default_factory=list)
    graph: str = ""
    """The graph's path in the repository: a merge that changed it says so (it is read again)."""


@dataclass
class MergeOutput:
    merged: bool
    sha: str | None = None
    graph_changed: bool = False
    """The merge changed the task graph on the loop's branch (a worker added a task)."""
    conflicts: list[str] = field(default_factory=list)
    hunks: str = ""
    failure: str | None = None
    """The verification of the merged tree failed (its output): the merge was not pushed."""
    problem: str | None = None
    """The merge could not be tried (a git error): the loop needs a person."""
    validation: dict[str, Any] | None = None
    """The checks' results on the merged tree as data (redacted), when they ran."""


@dataclass
class AuditInput:
    remote: str
    loop_branch: str
    branch: str
    command: str
    allow: list[str]
    worker: str
    task: str
    files: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    kind: str = "check"
    """`check` (a verification command) or `agent` (`command` is an agent given `prompt`)."""
    task_json: dict[str, Any] | None = None
    """The task (`task_json`), for an audit agent's prompt."""
    output: str = ""
    """The worker's report of its turn, for an audit agent's prompt."""
    agent_format: str | None = None


@dataclass
class AuditOutput:
    approved: bool
    output: str = ""
    exit_code: int | None = None


@dataclass
class GraphInput:
    remote: str
    loop_branch: str
    graph: str


@dataclass
class GraphOutput:
    tasks: list[dict[str, Any]] | None = None
    """None: the graph is not on the loop's branch (the tasks as given stay the graph)."""
    problem: str | None = None


# --- what a person sends --------------------------------------------------------------------


@dataclass
class CommandSignal:
    """A person's command (`loopdeck pause`, the monitor's keys) as a workflow signal: the same
    fields as a line of the local control queue."""

    id: str
    ts: str
    kind: str
    source: str
    reason: str | None = None
    value: int | None = None
    target: str | None = None


# --- the graph as a task source -------------------------------------------------------------


def graph_sources(tasks: list[Task], where: str, now: str) -> Aggregate:
    """The graph counted as a task source, the way `loop.sources.graph` counts the file: what
    the summary, `status` and the monitor show for a loop of workers."""
    return combine([graph.of_tasks(tasks, now, where)], now)
