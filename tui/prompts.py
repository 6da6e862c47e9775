"""What the monitor asks a person, each thing once: an interrupted loop to resume (at start),
a loop nobody on this machine confirmed, an escalation, the agent's question; what each answer
sends; and the prompt that no longer applies, closed with a word why.

The app owns one `Prompts`; the prompts themselves are modal screens that `dismiss` with the
answer (`tui/screens/`). What a prompt asks of the app is `Host`, so this module needs nothing
of `tui.app` (which needs it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from textual.notifications import SeverityLevel
from textual.screen import Screen

from loop import trust
from loop.drivers import resume
from loop.repo.gitstate import GitStatus
from loop.store.paths import Workspace
from loop.store.state import StateError, StateStore
from loop.trust.person import agent_session
from loop.views.snapshot import Snapshot
from tui.screens.confirm import ConfirmScreen
from tui.screens.escalation import EscalationScreen
from tui.screens.main import MainScreen
from tui.screens.number import NumberScreen
from tui.screens.resume import ResumeScreen
from tui.screens.text import QuestionScreen

RAISE_BY = 20
"""Continue after an escalation raises a reached limit by this many iterations."""


class Host(Protocol):
    """What the prompts need of the monitor (`tui.app.LoopdeckApp`): what it shows, its screens,
    and the commands it sends."""

    @property
    def workspace(self) -> Workspace: ...
    @property
    def snapshot(self) -> Snapshot | None: ...
    @property
    def git_status(self) -> GitStatus | None: ...
    @property
    def use_git(self) -> bool: ...
    @property
    def screen(self) -> Screen[object]: ...
    @property
    def screen_stack(self) -> list[Screen[Any]]: ...
    @property
    def main(self) -> MainScreen: ...
    def interrupted(self, snapshot: Snapshot) -> resume.Interrupted | None: ...
    def push_screen(self, screen: Screen[Any], callback: Callable[[Any], None] | None = None) -> object: ...
    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information") -> None: ...
    def send(
        self, kind: str, *, value: int | None = None, reason: str | None = None, target: str | None = None
    ) -> None: ...
    def ensure_runner(self) -> None: ...
    def load_snapshot(self) -> object: ...


class Prompts:
    """The app's questions to a person: which are asked, which were, and their answers."""

    def __init__(self, app: Host) -> None:
        self.app = app
        self.seen_escalations: set[str] = set()
        self.seen_questions: set[str] = set()
        self.seen_unconfirmed: set[tuple[str, ...]] = set()
        """What the monitor already asked a person to confirm (asked once per distinct list)."""
        self.asked_resume = False
        self.moot: list[str] = []
        """Why each prompt closed itself (the notification says the same)."""

    def ask(self, snapshot: Snapshot, first: bool) -> None:
        """Put in front of the person what the snapshot needs them for, one prompt at a time:
        an interrupted loop to resume (asked once, at start), a loop nobody confirmed, an
        escalation, the agent's question."""
        app = self.app
        if len(app.screen_stack) > 1:
            return
        if first and not self.asked_resume:
            self.asked_resume = True
            found = app.interrupted(snapshot) if snapshot.escalation is None else None
            if found is not None:
                # Git is read by its worker, never here: the prompt fills in when it arrives.
                changes = app.git_status.changes if app.git_status is not None else None
                if not app.use_git:
                    changes = None
                app.push_screen(ResumeScreen(found.question, changes, found.kind), self.resume_answer)
                return
        loop = snapshot.loop
        if loop is not None and snapshot.unconfirmed and snapshot.unconfirmed not in self.seen_unconfirmed:
            self.seen_unconfirmed.add(snapshot.unconfirmed)
            listed = "\n".join(f"  {line}" for line in snapshot.unconfirmed)
            detail = (
                f"{listed}\n\nConfirmed, loopdeck runs its commands, sends its prompt to the agent and "
                "notifies its targets, in this folder. Nothing of it runs until then."
            )
            title = "This loop names what nobody on this machine confirmed"
            app.push_screen(ConfirmScreen(title, detail, yes="Confirm", no="Not now"), self.trust_answer)
            return
        escalation = snapshot.escalation
        if escalation is not None and escalation.data.get("kind") == "unconfirmed" and snapshot.confirmed:
            self.seen_escalations.add(escalation.ts)  # confirmed meanwhile: nothing to ask
        if escalation is not None and escalation.ts not in self.seen_escalations and snapshot.loop:
            self.seen_escalations.add(escalation.ts)
            loop = snapshot.loop
            pending = snapshot.sources.pending_total if snapshot.sources else 0
            numbers = (
                f"iteration {loop.iteration} of {loop.max_iterations or '∞'} · {pending} task(s) pending"
                f" · status {loop.status} · driver {loop.driver or '-'}"
            )
            reason = str(escalation.data.get("reason", "escalated"))
            kind = escalation.data.get("kind")
            if kind:
                reason = f"{kind}: {reason}"
            app.push_screen(EscalationScreen(reason, numbers, RAISE_BY), self.escalation_answer)
            return
        question = snapshot.question
        if question is not None and question.ts not in self.seen_questions:
            self.seen_questions.add(question.ts)
            asker = question.data.get("worker")
            app.push_screen(
                QuestionScreen(str(question.data.get("question", ""))),
                lambda answer: self.question_answer(answer, asker if isinstance(asker, str) else None),
            )

    def trust_answer(self, yes: bool | None) -> None:
        """A person at the monitor confirms the loop (never from inside an agent's session)."""
        app = self.app
        if not yes:
            return
        why = agent_session()
        if why is not None:
            app.notify(f"not confirmed: this monitor runs inside {why}", severity="error")
            return
        try:
            state = StateStore(app.workspace).read()
            if state is None:
                return
            trust.record(app.workspace, state, "monitor")
        except (OSError, StateError) as exc:
            app.notify(f"not confirmed: {exc}", severity="error")
            return
        app.notify("confirmed on this machine", title="loopdeck")
        if (state.waiting_for or {}).get("escalation") == "unconfirmed":
            app.send("resume", reason="confirmed in the monitor")
            app.ensure_runner()
        else:
            app.load_snapshot()

    def resume_answer(self, answer: str | None) -> None:
        """The answer: `no`, or the git choice for yes (used only when there is uncommitted work)."""
        app = self.app
        if app.snapshot is None:
            return
        yes = answer not in (None, "no")
        dirty = app.use_git and app.git_status is not None and bool(app.git_status.changes)
        done = (
            resume.resume(app.workspace, app.snapshot, git=answer if dirty else None)
            if yes
            else resume.pause(app.workspace, app.snapshot)
        )
        app.notify(done, title="loopdeck")

    def escalation_answer(self, choice: str | None) -> None:
        app = self.app
        loop = app.snapshot.loop if app.snapshot else None
        if loop is None or choice in (None, "dismiss"):
            return
        if choice == "continue":
            if loop.max_iterations and loop.iteration >= loop.max_iterations:
                app.send(
                    "set-max-iterations", value=loop.iteration + RAISE_BY, reason="continue after escalation"
                )
            app.send("resume", reason="continue after escalation")
            app.ensure_runner()
        elif choice == "pause":
            if loop.status != "paused":  # a runner's escalation has paused it already
                app.send("pause", reason="escalation")
        elif choice == "skip":
            app.send("skip", reason="escalation")
            if loop.status == "paused":
                app.send("resume", reason="after skipping the task")
            app.ensure_runner()
        elif choice == "complete":
            app.send("complete", reason="forced after escalation")
            app.ensure_runner()
        elif choice == "log" and app.main.maximized is None:
            app.main.action_toggle_journal()

    def question_answer(self, answer: str | None, worker: str | None = None) -> None:
        """The answer goes to whoever asked: the loop, or the worker whose question was shown."""
        app = self.app
        if answer:
            app.send("answer", reason=answer, target=worker)
            app.ensure_runner()

    def close_if_moot(self, snapshot: Snapshot) -> None:
        """A modal about a loop that has moved on says so and goes: answering it would steer a
        loop that is no longer in the state the question described."""
        app = self.app
        screen = app.screen
        loop = snapshot.loop
        ended = loop is None or loop.status in ("completed", "failed", "stopped")
        why = None
        if isinstance(screen, EscalationScreen) and (ended or snapshot.escalation is None):
            why = "the loop ended" if ended else "the loop was resumed"
            screen.dismiss("dismiss")
        elif isinstance(screen, QuestionScreen) and (ended or snapshot.question is None):
            why = "the loop ended" if ended else "the question was answered"
            screen.dismiss(None)
        elif isinstance(screen, ConfirmScreen | NumberScreen) and ended:
            why = "the loop ended"
            screen.dismiss(None)
        if why is not None:
            self.moot.append(why)
            app.notify(f"That prompt no longer applies: {why}.", title="loopdeck", severity="warning")
