"""Starting a loop: the one place a new loop's state is made (`new_state`), and where a new
in-session loop is created and confirmed (`start_loop`).

`loopdeck start` (a person at a terminal) and `/orchestrator-loop` (a person typing in a Claude
Code session, through the prompt hook) both come here with the values that person gave, so
both check them the same way, write the state through the writer and record the confirmation:
everything the loop names was chosen by a person on this machine. The runner, its workers and
a loop on Temporal make theirs with `new_state` too, from the same `Request`.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from loop import trust
from loop.core.errors import LoopdeckError
from loop.core.model import LoopState
from loop.drivers import preflight, writer
from loop.sources.task_file import resolve
from loop.store.control import end_offset
from loop.store.journal import Journal
from loop.store.paths import Workspace
from loop.store.state import StateStore


@dataclass
class Request:
    """What a person asked for when starting a loop."""

    prompt: str
    max_iterations: int = 100
    completion_promise: str = "null"
    task_file: str | None = None
    check_tasks: bool = True
    check_github: bool = True
    github_project: str | None = None
    verify: list[str] = field(default_factory=list)
    verify_allow: list[str] = field(default_factory=list)
    limits: dict[str, int] = field(default_factory=dict)
    notify: list[str] = field(default_factory=list)
    force: bool = False
    design: dict[str, Any] | None = None
    """The design file the loop was started from (`loop.design.lock.record`): its commands join
    `verify`, and the drivers lock it."""
    design_confirmed: bool = False
    """The person confirmed the design's commands as they started the loop; else they wait for
    `loopdeck trust` (they are the workspace's text, not the person's)."""

    @property
    def design_commands(self) -> list[str]:
        """The design's commands the person did not give themselves (`--verify`)."""
        commands = self.design.get("commands", []) if self.design else []
        return [str(c) for c in commands if c not in self.verify]

    @property
    def held(self) -> list[str]:
        """The commands whose confirmation waits for `loopdeck trust`."""
        return [] if self.design_confirmed else self.design_commands


def start_loop(ws: Workspace, request: Request, by: str) -> tuple[LoopState, list[str]]:
    """Check `request`, write the new loop's state, record it as a person's choice (`by`: how
    they gave it); the state and the lines to show them. Nothing is written when a check fails."""
    prompt = request.prompt.strip()
    if not prompt:
        raise LoopdeckError("start needs a PROMPT: what the agent should work on")
    check_max_iterations(request.max_iterations)
    check_promise(request.completion_promise)
    # Imported here: a runner whose loop names no check never loads verification (~30 ms;
    # tests/test_runner_overhead.py holds it to that), and `run` imports this module.
    from loop import verify

    said = {"hint": "loopdeck start --verify-allow"} if by == "start" else {}
    for command in request.verify:
        verify.check(command, request.verify_allow, cwd=ws.root, **said)  # refused before the loop starts
    where = str(request.design["path"]) if request.design else "the design"
    # The person typed `loopdeck start`: the refusal names that command, with this design.
    hint = f"loopdeck start --design {shlex.quote(where)} --verify-allow"
    for command in request.design_commands:
        try:
            verify.check(command, request.verify_allow, cwd=ws.root, hint=hint)
        except LoopdeckError as exc:
            raise LoopdeckError(f"{where}: {exc}") from None
    if request.task_file:
        try:
            resolve(ws.root, request.task_file)
        except (ValueError, OSError, RuntimeError) as exc:
            raise LoopdeckError(str(exc)) from None
    preflight.require(
        ws.root,
        task_file=request.task_file,
        github_project=request.github_project if request.check_github else None,
        notify=request.notify,
    )
    store = StateStore(ws)
    journal = Journal(ws.journal)
    with store.locked():
        state = new_state(request, control_offset=end_offset(ws))
        lines: list[str] = []
        confirmed = partial(confirm, ws, state, by, held=request.held)
        writer.start(ws, store, journal, state, force=request.force, before=lambda: lines.extend(confirmed()))
    journal.append("loop-started", 0, writer.started_data(state))
    limit = state.max_iterations or "no limit"
    lines.append(f"loop started in {ws.root} (max iterations: {limit})")
    if request.held:
        n = len(request.held)
        lines.append(
            f"the design names {n} command{'s' if n > 1 else ''} to check the work; nothing of the loop "
            f"runs until you confirm {'them' if n > 1 else 'it'}: loopdeck trust"
        )
    if state.promise:
        lines.append(f"To finish, the agent outputs <promise>{state.promise}</promise> (only when true).")
    else:
        lines.append("To finish, the agent outputs ALL_TASKS_COMPLETE (only when every task is done).")
    return state, lines


def new_state(request: Request, *, control_offset: int = 0, **driver: Any) -> LoopState:
    """A new loop's state as a person asked for it: every driver's new loop is made here (a
    session's, the runner's, its workers', Temporal's). `control_offset` is where the loop's
    control queue ends now (commands queued before the loop are not its own); `driver` holds
    what only the driver knows (`driver="temporal"`, its start time)."""
    state = LoopState.new(
        request.prompt.strip(),
        max_iterations=request.max_iterations,
        completion_promise=request.completion_promise,
        task_file=request.task_file or "null",
        check_tasks=request.check_tasks,
        check_github=request.check_github,
        github_project_id=request.github_project or "",
        verify=list(dict.fromkeys([*request.verify, *request.design_commands])),
        control_offset=control_offset,
        limits=dict(request.limits),
        notify=list(request.notify),
        **driver,
    )
    if request.verify_allow:
        state.extra["verify_allow"] = list(request.verify_allow)
    if request.design:
        state.extra["design"] = dict(request.design)
    return state


def check_max_iterations(value: int) -> None:
    """`--max-iterations` as the state can hold it, refused before anything is written."""
    if not 0 <= value < 2**63:
        raise LoopdeckError("--max-iterations must be 0 (no limit) or more, a whole number below 2^63")


def check_promise(promise: str | None) -> None:
    """A completion promise the agent can print and a person can read: one line of text (the
    state, `status` and the prompts show it on one line)."""
    if promise is None or promise == "null":
        return
    if any(ord(c) < 32 or c in "\x7f\x85\u2028\u2029" for c in promise):
        raise LoopdeckError(
            "--completion-promise must be one line of printable text (no newline or control character)"
        )


def confirm(ws: Workspace, state: LoopState, by: str, held: list[str] | None = None) -> list[str]:
    """Record that a person here confirmed the loop, but for the `held` commands (a design's,
    which `loopdeck trust` shows them first). A home folder that cannot keep the record is said
    (the loop then asks to be confirmed again), never a traceback."""
    kept = state
    if held:
        kept = state.copy()
        kept.verify = [c for c in state.verify if c not in held]
    try:
        trust.record(ws, kept, by)
    except OSError as exc:
        reason: Any = exc.strerror or exc
        return [
            f"warning: could not record the confirmation in {trust.home(ws.root)} ({reason}); "
            "the loop will ask to be confirmed again (`loopdeck trust`)"
        ]
    return []
