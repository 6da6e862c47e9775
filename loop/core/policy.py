"""What differs between the four drivers, as data: one `DriverPolicy` each.

The engine takes the same decisions for every driver; where a driver's situation really differs
(the Stop hook runs inside the agent's own session, the runner starts each agent turn itself, a
Temporal workflow never ends a run on its own), the driver hands the engine its policy and the
engine reads the policy's fields, never the driver's name. The name stays in the state, for
people to read.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from loop.core.model import LoopState


@dataclass(frozen=True, slots=True)
class DriverPolicy:
    """How one driver stands to the loop it drives."""

    name: str
    """The driver's name as the state records it (`LoopState.driver`): for display only."""
    in_session: bool
    """It runs inside the agent's own session (the Stop hook): it binds the loop to that
    session and its process, a note it sends is read at once, and a loop naming what nobody
    confirmed is left alone (nothing written, the person told in one line)."""
    starts_agent: bool
    """It starts each agent turn itself: its first decision sends the loop's own prompt, and a
    decision with no turn is a wake-up (a command arrived), not a turn that ended."""
    waits_for_person: bool
    """When the loop needs a person (the iteration limit, unreadable sources) it pauses and
    waits; in a session, the escalation is said in the prompt and the session goes on."""
    tracks_cost: bool
    """It reads each turn's cost: a spent budget starts no new turn."""
    headless: bool
    """Nobody watches the run: it ends once the loop waits for a person (or a worker asks)."""

    def watched(self, headless: bool) -> DriverPolicy:
        """This policy for a run that a person watches (False) or not (True)."""
        return replace(self, headless=headless)


HOOK = DriverPolicy(
    "hook", in_session=True, starts_agent=False, waits_for_person=False, tracks_cost=False, headless=False
)
RUNNER = DriverPolicy(
    "runner", in_session=False, starts_agent=True, waits_for_person=True, tracks_cost=True, headless=True
)
WORKERS = DriverPolicy(
    "workers", in_session=False, starts_agent=True, waits_for_person=True, tracks_cost=True, headless=True
)
TEMPORAL = DriverPolicy(
    "temporal", in_session=False, starts_agent=True, waits_for_person=True, tracks_cost=True, headless=False
)
"""A workflow waits for a person's signal as long as it takes: it never ends a run by itself."""

POLICIES = {p.name: p for p in (HOOK, RUNNER, WORKERS, TEMPORAL)}


def named(name: str | None) -> DriverPolicy:
    """The policy of the driver a state or a fact names: a loop no driver claimed (None) is the
    session's (the hook's); a name this version does not know, a driver outside any session."""
    if not name:
        return HOOK
    return POLICIES.get(name, RUNNER)


# --- a run nobody watches ----------------------------------------------------------------------


def run_ends(
    policy: DriverPolicy, state: LoopState, *, asking: str | None = None, at_start: bool = False
) -> tuple[str, str] | None:
    """How and why a run nobody watches ends now, or None while it goes on. It ends when the
    loop waits for a person's answer or decision (a question, an escalation), or when nothing
    runs and a worker asks (`asking`: the question); one that starts on a loop already waiting
    (`at_start`, any wait) ends at once. A watched run, or one that never ends by itself
    (Temporal), waits instead."""
    if not policy.headless:
        return None
    if at_start:
        return _ending(state, still=True) if state.waiting_for is not None else None
    if state.status == "paused" and state.waiting_kind in ("escalation", "question"):
        return _ending(state)
    if asking is not None:
        return "question", f"a worker asks: {asking}"
    return None


def _ending(state: LoopState, still: bool = False) -> tuple[str, str]:
    """How a headless run ends on a loop that waits for a person, and why."""
    waiting = state.waiting_for or {}
    reason = str(waiting.get("reason") or "waiting for a person")
    if still:
        reason = f"still waiting for a person: {reason}"
    if waiting.get("kind") == "question":
        return "question", reason
    if waiting.get("kind") == "pause":  # a person's (or a signal's) pause: their resume lifts it
        return "paused", reason
    if waiting.get("escalation") == "max-iterations":
        return "limit", f"{reason}: needs a person"
    return "escalated", reason if still else f"{reason}: needs a person"
