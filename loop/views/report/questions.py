"""What the loop asked of a person: its questions (answered or not) and its escalations (open
until the loop resumed, ended or got more iterations)."""

from __future__ import annotations

from loop.core.model import JournalEvent, LoopState
from loop.core.redact import redact
from loop.views.report.model import Escalation, Question


def questions_in(events: list[JournalEvent]) -> list[Question]:
    found: list[Question] = []
    for event in events:
        if event.kind in ("question", "worker-question"):
            worker = event.data.get("worker")
            found.append(
                Question(event.iteration, event.ts, redact(str(event.data.get("question") or "")),
                         worker=str(worker) if worker else None)
            )  # fmt: skip
        elif event.kind == "answered":
            for question in reversed(found):
                if question.answer is None:
                    question.answer = redact(str(event.data.get("answer") or ""))
                    break
        elif event.kind == "resumed" and event.data.get("worker"):
            for question in reversed(found):
                if question.answer is None and question.worker == event.data.get("worker"):
                    question.answer = redact(str(event.data.get("reason") or "(resumed)"))
                    break
    return found


def escalations_in(events: list[JournalEvent], state: LoopState) -> list[Escalation]:
    found: list[Escalation] = []
    for event in events:
        if event.kind == "escalation":
            found.append(
                Escalation(event.iteration, event.ts, redact(str(event.data.get("reason") or "")),
                           str(event.data.get("kind") or ""), open=True)
            )  # fmt: skip
        elif event.kind in ("resumed", "completed", "stopped") or (
            event.kind == "command-applied" and event.data.get("command") == "set-max-iterations"
        ):
            for escalation in found:
                escalation.open = False
    if state.status not in ("paused", "running", "unknown"):
        for escalation in found:
            escalation.open = False
    return found
