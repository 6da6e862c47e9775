"""The one brain: every transition of the loop is decided in `loop.core`, and nowhere else.

Pure functions of (state, event, commands, source counts, now) → Result: the new state, the
events to journal, the prompt for the agent and the effects (archive, skip marks) for the driver
to carry out. No file, no process, no clock, not even through a callback: a driver gathers the
inputs (asking `needs_sources` and `wants_verification` first, so it does no work the decision
will not use) and `loop.drivers.writer` carries the Result out. So every rule is tested on a
fixed clock, without processes or disks, and the four drivers (the Stop hook, the runner, its
workers, the Temporal workflow) keep the same rules. What differs between them is data: the
`DriverPolicy` a driver hands in (`loop.core.policy`), never a test of its name.

This module is the engine's one door; the rules live along their seams:

* `loop.core.stop`: a Stop (`decide`): the hook's, or the end of a turn the runner started;
* `loop.core.workers`: a loop of parallel workers (`admit`, `worker_turn`, `escalate`, `finish`);
* `loop.core.commands`: a person's commands, and who may send which (`commands`, `refusal`);
* `loop.core.lifecycle`: `configure`, `interrupt`, `usage_limited`, `adopt`, `resume_flow`,
  `fail`, `restore`, `rebuild`;
* `loop.core.transitions`: the moves they share (wait for a person, stuck, a usage limit,
  complete, the ending's summary, a loop naming what nobody confirmed).
"""

from __future__ import annotations

from loop.core.commands import (
    ANSWER_KEEPS_WAITING,
    NOT_A_PERSON,
    PERSON_ONLY,
    commands,
    held_at_limit,
    refusal,
    refuse,
)
from loop.core.lifecycle import (
    RESUMABLE,
    adopt,
    configure,
    fail,
    interrupt,
    rebuild,
    restore,
    resume_flow,
    usage_limited,
)
from loop.core.model import DEFAULT_BLOCK_CAP, Result, StopInput
from loop.core.policy import HOOK, RUNNER, TEMPORAL, WORKERS, DriverPolicy, run_ends
from loop.core.stop import (
    RALPH_WARNING,
    decide,
    needs_look,
    needs_sources,
    ours,
    signalled,
    wants_verification,
)
from loop.core.transitions import (
    LIMIT_BACKOFF_S,
    UNCONFIRMED_SHOWN,
    agent_for_turn,
    ending_summary,
    hold_unconfirmed,
    limit_until,
    unconfirmed_line,
)
from loop.core.workers import TURN_VERDICTS, admit, checked, escalate, finish, worker_turn

__all__ = [
    "ANSWER_KEEPS_WAITING",
    "DEFAULT_BLOCK_CAP",
    "HOOK",
    "LIMIT_BACKOFF_S",
    "NOT_A_PERSON",
    "PERSON_ONLY",
    "RALPH_WARNING",
    "RESUMABLE",
    "RUNNER",
    "TEMPORAL",
    "TURN_VERDICTS",
    "UNCONFIRMED_SHOWN",
    "WORKERS",
    "DriverPolicy",
    "Result",
    "StopInput",
    "admit",
    "adopt",
    "agent_for_turn",
    "checked",
    "commands",
    "configure",
    "decide",
    "ending_summary",
    "escalate",
    "fail",
    "finish",
    "held_at_limit",
    "hold_unconfirmed",
    "interrupt",
    "limit_until",
    "needs_look",
    "needs_sources",
    "ours",
    "rebuild",
    "refusal",
    "refuse",
    "restore",
    "resume_flow",
    "run_ends",
    "signalled",
    "unconfirmed_line",
    "usage_limited",
    "wants_verification",
    "worker_turn",
]
