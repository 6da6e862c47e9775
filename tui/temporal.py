"""The monitor on a Temporal server's loops (`loopdeck tui --temporal ADDRESS`): the fleet of
its loops first, then any one of them on the same monitor as a loop in a folder.

Only the reading and the sending differ: a loop's snapshot comes from its workflow's query
(`loop.temporal.view.snapshot`, the same `Snapshot` the panels are bound to), polled once a
second instead of watched on disk, and the keys' commands go to the workflow as signals instead
of the control queue. Every panel, key and prompt is `LoopdeckApp`'s.

The Output panel follows a remote turn as it follows a local worker's log: each poll fetches
the turns' last heartbeats (their agents' last lines, `loop.temporal.output`) and the last lines
of each worker's ended turn (kept by the loop: a monitor opened in the morning shows the
night's last turns), and appends what is new to a file of the monitor's own (a folder removed
when it closes), which the panel reads.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from textual import work

from loop.core.errors import LoopdeckError
from loop.core.timeutil import utcnow
from loop.store.paths import Workspace
from loop.temporal.client import Remote, Target, command
from loop.temporal.output import Mirror
from loop.temporal.protocol import CommandSignal
from loop.views.snapshot import Snapshot
from tui.app import LoopdeckApp
from tui.prompts import Prompts
from tui.screens.temporal_fleet import TemporalFleetScreen
from tui.watch import SnapshotReady

FLEET = "temporal-fleet"
POLL_S = 1.0


class TemporalApp(LoopdeckApp):
    """The monitor of a Temporal server's loops: its keys are the registry's, as everywhere (the
    main screen's `f` opens this fleet)."""

    def __init__(
        self,
        target: Target,
        workflow_id: str | None = None,
        *,
        clock: Callable[[], datetime] = utcnow,
        poll: bool = True,
        prompts: bool = True,
    ) -> None:
        super().__init__(Workspace(Path.cwd()), clock=clock, watch=False, git=False, prompts=prompts)
        self.target = target
        self.remote = Remote(target)
        self.workflow_id = workflow_id
        self.polling = poll
        self.outputs_root = Path(tempfile.mkdtemp(prefix="loopdeck-monitor-"))
        """Where the remote turns' output is kept while the monitor runs (one folder a loop)."""
        self.mirrors: dict[str, Mirror] = {}

    def on_mount(self) -> None:
        # LoopdeckApp's on_mount runs too: the keymap, the first read.
        self.install_screen(TemporalFleetScreen(self.remote, clock=self.clock, poll=self.polling), FLEET)
        if self.workflow_id is None:
            self.push_screen(FLEET)
        if self.polling:
            self.set_interval(POLL_S, self.load_snapshot)

    def on_unmount(self) -> None:
        self.remote.close()
        shutil.rmtree(self.outputs_root, ignore_errors=True)

    # --- reading and sending -------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="snapshot", exit_on_error=False)
    def load_snapshot(self) -> None:
        from loop.temporal import view

        wf = self.workflow_id
        if wf is None:
            return
        try:
            answer = self.remote.read(wf)
        except (LoopdeckError, TimeoutError):
            return  # the server away for a moment: the next poll tries again
        self.fetch_outputs(wf, answer)  # before the snapshot: the panel finds their lines with it
        if wf == self.workflow_id:
            self.post_message(SnapshotReady(view.snapshot(answer, wf, self.target)))

    def fetch_outputs(self, wf: str, answer: dict[str, Any]) -> list[Path]:
        """The remote turns' latest lines into the loop's files here (the files that grew): the
        ended turns' from the loop's snapshot `answer`, then the last heartbeats of those under
        way (none once the loop ended)."""
        details = list(answer.get("tails") or [])
        if not answer.get("ended"):
            with contextlib.suppress(LoopdeckError, TimeoutError):  # the next poll tries again
                details += self.remote.outputs(wf)
        return self.mirror(wf).take(details)

    def mirror(self, wf: str) -> Mirror:
        if wf not in self.mirrors:
            from loop.repo.worktrees import safe_name

            self.mirrors[wf] = Mirror(Workspace(self.outputs_root / safe_name(wf)).private_dir)
        return self.mirrors[wf]

    def followed_output(self, snapshot: Snapshot | None, worker: str | None) -> Any:
        """What the Output panel follows: the selected (else the first running) worker's turn,
        in the files its heartbeats were fetched into."""
        from tui.widgets.output import worker_turn

        wf = self.workflow_id
        if snapshot is None or snapshot.parallel is None or wf is None:
            return None
        return worker_turn(Workspace(self.mirror(wf).folder.parent.parent), snapshot.parallel, worker)

    def send(
        self, kind: str, *, value: int | None = None, reason: str | None = None, target: str | None = None
    ) -> None:
        self.send_remote(kind, value=value, reason=reason, target=target)

    def send_remote(
        self, kind: str, *, value: int | None = None, reason: str | None = None, target: str | None = None
    ) -> None:
        """A key's command as a signal to the loop's workflow (a worker's, with `target`)."""
        wf = self.workflow_id
        if wf is None:
            return
        signal = command(kind, "tui", reason, value, target)
        self.awaiting[signal.id] = kind
        self.deliver(wf, signal, target or wf)

    @work(thread=True, group="send", exit_on_error=False)
    def deliver(self, wf: str, signal: CommandSignal, to: str) -> None:
        """The signal sent from a thread: a slow or unreachable server never freezes the
        screen; the person hears either way."""
        kind = signal.kind
        try:
            self.remote.send(wf, signal)
        except (LoopdeckError, TimeoutError) as exc:
            why = str(exc) or "the server did not answer in time"
            self.call_from_thread(self.awaiting.pop, signal.id, None)
            self.call_from_thread(self.notify, f"{kind} not sent: {why}", severity="error")
            return
        self.call_from_thread(self.notify, f"{kind} sent to {to}", title="loopdeck")
        self.call_from_thread(self.load_snapshot)

    def ensure_runner(self) -> None:
        """No runner to start: the workflow is always there while the loop lives."""

    def interrupted(self, snapshot: Snapshot) -> Any:
        return None  # a loop on Temporal is never a crashed runner to resume

    # --- the fleet ---------------------------------------------------------------------------

    def on_temporal_fleet_screen_open(self, message: TemporalFleetScreen.Open) -> None:
        self.pop_screen()
        if message.workflow_id != self.workflow_id:
            self.workflow_id = message.workflow_id
            self.snapshot = None
            self.awaiting.clear()
            self.asking = Prompts(self)  # another loop: its prompts are asked afresh
        self.load_snapshot()

    def action_fleet(self) -> None:
        if not isinstance(self.screen, TemporalFleetScreen):
            self.push_screen(FLEET)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "fleet":
            return True
        if action == "restore_backup":
            return False
        return super().check_action(action, parameters)


def target_from(obj: dict[str, Any]) -> Target:
    return Target.from_json(obj)
