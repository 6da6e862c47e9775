"""Another tool's loop, watched read-only.

loopdeck does not drive a neighbour loop (a ralph-loop, a workflow or story loop): its own tool
does, and a command in loopdeck's queue would reach nobody. So the steering keys stay visible
but disabled, with the reason in their tooltip and on screen; only `cancel` works, and only
where the neighbour's own convention allows it (ralph-loop: its state file removed, after a
confirm, a copy kept under `.claude/loops/`).

A modal screen, so the monitor's own keys (which steer loopdeck's loop) cannot fire from here.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from loop import formats
from loop.core.errors import FileProblem, LoopdeckError
from loop.core.timeutil import utcnow
from loop.formats import Found
from tui import actions
from tui.screens.confirm import ConfirmScreen
from tui.widgets.common import ago, relative
from tui.widgets.footer import Footer

POLL_S = 0.5
"""How often the file's time and size are checked: a `stat`, so a neighbour loop's progress
shows within half a second at no cost."""
READ_ONLY = "read-only: a {kind} is run by its own tool, not by loopdeck"


class NeighbourScreen(ModalScreen[str | None]):
    """One neighbour loop. Dismissed with "next" (show the next loop), "back" or None."""

    DEFAULT_CSS = """
    NeighbourScreen { background: $background; align: left top; }
    NeighbourScreen #neighbour-bar { height: 1; padding: 0 1; background: $panel; text-style: bold; }
    NeighbourScreen #neighbour-bar.-running { background: $success 40%; }
    NeighbourScreen #neighbour-bar.-waiting { background: $warning 40%; }
    NeighbourScreen #neighbour-bar.-problem { background: $error 80%; }
    NeighbourScreen #neighbour-note { height: auto; padding: 0 1; color: $text-muted; }
    NeighbourScreen #neighbour-body { height: 1fr; padding: 0 1; border: round $primary; }
    """
    BINDINGS = actions.bindings("neighbour")

    def __init__(
        self, root: Path, found: Found, *, clock: Callable[[], datetime] = utcnow, back: bool = True
    ) -> None:
        super().__init__()
        self.back = back
        """Whether there is a screen to go back to (the fleet, or loopdeck's own loop)."""
        self.root = root
        self.found = found
        self.clock = clock
        self.stamp = self._stamp()
        self.gone = False

    def compose(self) -> ComposeResult:
        yield Static(id="neighbour-bar", markup=False)
        yield Static(id="neighbour-note", markup=False)
        with VerticalScroll(id="neighbour-body"):
            yield Static(id="neighbour-fields", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self.show()
        self.set_interval(POLL_S, self.poll)

    # --- reading ------------------------------------------------------------------------------

    def _stamp(self) -> tuple[float, int] | None:
        try:
            st = self.found.path.stat()
        except OSError:
            return None
        return (st.st_mtime, st.st_size)

    def poll(self) -> None:
        stamp = self._stamp()
        if stamp == self.stamp:
            return
        self.stamp = stamp
        if stamp is None:
            self.gone = True
        else:
            self.gone = False
            self.found = formats.read(self.found.kind, self.found.path)
        self.show()
        self.refresh_bindings()

    # --- drawing ------------------------------------------------------------------------------

    def show(self) -> None:
        found, now = self.found, self.clock()
        bar = self.query_one("#neighbour-bar", Static)
        name = self.root.name
        view = found.loop
        for cls in ("-running", "-waiting", "-problem"):
            bar.remove_class(cls)
        if self.gone:
            bar.update(f"{found.kind}  {name} · ended (its state file is gone)")
        elif view is None:
            bar.add_class("-problem")
            bar.update(f"{found.kind}  {name} · unreadable state file")
        else:
            bar.add_class("-waiting" if view.needs_person else "-running" if view.status == "running" else "")
            limit = f"/{view.max_iterations}" if view.max_iterations else ""
            where = f" · iteration {view.iteration}{limit}" if view.iteration is not None else ""
            bar.update(f"{found.kind}  {name} · {view.status}{where}")
        note = READ_ONLY.format(kind=found.kind) + "."
        if view is not None and view.can_cancel and not self.gone:
            note += " c cancels it the plugin's way (its state file removed, a copy kept in .claude/loops/)."
        self.query_one("#neighbour-note", Static).update(note)
        self.query_one("#neighbour-fields", Static).update(self.fields(now))

    def fields(self, now: datetime) -> str:
        found = self.found
        path = relative(str(found.path), str(self.root))
        if found.loop is None:
            problem = found.problem or FileProblem(found.path, "unreadable")
            return (
                "The state file could not be read; it was left as it is.\n\n"
                f"file:     {path}\nline:     {problem.line or '-'}\nproblem:  {problem.problem}\n"
            )
        view = found.loop
        rows: list[tuple[str, str]] = [
            ("file", path),
            ("status", view.status),
            (
                "iteration",
                "-"
                if view.iteration is None
                else f"{view.iteration} of {view.max_iterations}"
                if view.max_iterations
                else f"{view.iteration} (no limit)",
            ),
            ("started", f"{view.started_at} ({ago(view.started_at, now)})" if view.started_at else "-"),
        ]
        if view.updated_at:
            rows.append(("updated", f"{view.updated_at} ({ago(view.updated_at, now)})"))
        if view.session_id:
            rows.append(("session", view.session_id))
        rows.append(("promise", view.completion_promise or "-"))
        if view.current_task:
            rows.append(("current", view.current_task))
        if view.tasks_done is not None or view.tasks_pending is not None:
            done = "-" if view.tasks_done is None else str(view.tasks_done)
            pending = "-" if view.tasks_pending is None else str(view.tasks_pending)
            rows.append(("tasks", f"{done} done · {pending} pending"))
        text = "\n".join(f"{key:<10}{value}" for key, value in rows)
        if view.pending_titles:
            text += "\n\npending:\n" + "\n".join(f"  • {title}" for title in view.pending_titles[:12])
        if view.prompt:
            text += f"\n\nprompt:\n{view.prompt}"
        return text

    # --- keys ---------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "steer":
            return None  # shown greyed out: the loop is not loopdeck's to steer
        if action == "cancel_loop":
            view = self.found.loop
            return True if view is not None and view.can_cancel and not self.gone else None
        if action == "leave" and parameters == ("back",):
            return self.back
        return True

    def action_steer(self, what: str) -> None:  # never runs: check_action disables it
        self.notify(READ_ONLY.format(kind=self.found.kind), severity="warning")

    def action_cancel_loop(self) -> None:
        def answer(yes: bool | None) -> None:
            if not yes:
                return
            from loop.formats import ralph

            try:
                kept = ralph.cancel(self.root, utcnow())
            except (LoopdeckError, OSError) as exc:
                self.notify(f"cancel failed: {exc}", severity="error")
                return
            self.notify(
                f"{self.found.kind} cancelled; its state is kept in {relative(str(kept), str(self.root))}"
            )
            self.poll()

        self.app.push_screen(
            ConfirmScreen(
                f"Cancel the {self.found.kind} in {self.root.name}?",
                "Its state file is removed, as the plugin does to end a loop; a copy is kept under "
                ".claude/loops/. The agent stops at its next turn.",
            ),
            answer,
        )

    def action_leave(self, where: str) -> None:
        self.dismiss(where)
