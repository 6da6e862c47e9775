"""The monitor for any loop, many loops, from anywhere: loopdeck's own monitor (`LoopdeckApp`)
plus the other loops in the same folder (read-only) and a fleet of folders.

- `n` switches between the loops of one folder: loopdeck's own and its neighbours
  (`NeighbourScreen`, read-only).
- With several folders (`loopdeck tui DIR…`, `--scan DIR`) it opens on the fleet
  (`FleetScreen`); Enter opens a loop's own monitor, Escape goes back.

The monitor screen stays at the bottom of the stack; the fleet and the neighbour views are
modal screens over it, so the monitor's steering keys never reach a loop that is not on screen.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path

from textual.css.query import NoMatches

from loop import formats
from loop.core.timeutil import utcnow
from loop.formats import Found
from loop.store.paths import Workspace
from loop.views.snapshot import Snapshot
from tui.app import LoopdeckApp
from tui.screens.fleet import FleetScreen
from tui.screens.neighbour import NeighbourScreen

FLEET = "fleet"


class MonitorApp(LoopdeckApp):
    """The main screen holds its keys (`n`, `f`: the registry's "monitor" scope); the app says
    when they apply."""

    def __init__(
        self,
        workspaces: Sequence[Workspace],
        *,
        scan_root: Path | None = None,
        scan_depth: int = 4,
        clock: Callable[[], datetime] = utcnow,
        fleet_poll: bool = True,
        **options: bool,
    ) -> None:
        first = workspaces[0] if workspaces else Workspace((scan_root or Path.cwd()).resolve())
        super().__init__(first, clock=clock, **options)  # type: ignore[arg-type]
        self.workspaces = list(workspaces)
        self.scan_root = scan_root
        self.scan_depth = scan_depth
        self.fleet_mode = scan_root is not None or len(self.workspaces) > 1
        self.fleet_poll = fleet_poll
        self.neighbours: list[Found] = []
        self.opened_neighbour = False

    def on_mount(self) -> None:
        # LoopdeckApp's own on_mount runs too (Textual calls each class's handler).
        self.neighbours = formats.detect(self.workspace.root)
        if self.fleet_mode:
            self.install_screen(
                FleetScreen(
                    [w.root for w in self.workspaces],
                    scan_root=self.scan_root,
                    depth=self.scan_depth,
                    clock=self.clock,
                    poll=self.fleet_poll,
                ),
                FLEET,
            )
            self.push_screen(FLEET)

    # --- one folder, several loops ---------------------------------------------------------

    def show_snapshot(self, snapshot: Snapshot) -> None:
        # The neighbours first: the keys on offer, worked out once a snapshot, depend on them.
        self.neighbours = formats.detect(self.workspace.root)
        try:
            super().show_snapshot(snapshot)
        except NoMatches:
            return  # a snapshot that arrives while the app closes finds no panels: nothing to show
        only_neighbours = snapshot.loop is None and snapshot.error is None and self.neighbours
        if only_neighbours and not self.opened_neighbour and len(self.screen_stack) == 1:
            # Nothing of loopdeck's here: show the loop that is, rather than an empty monitor.
            self.opened_neighbour = True
            self.show_neighbour(0)

    def show_neighbour(self, index: int) -> None:
        found = self.neighbours[index]

        def left(where: str | None) -> None:
            self.neighbours = formats.detect(self.workspace.root)
            if where == "next" and index + 1 < len(self.neighbours):
                self.show_neighbour(index + 1)
            elif where == "back" and self.fleet_mode:
                self.action_fleet()
            elif (
                where == "next"
                and self.snapshot is not None
                and self.snapshot.loop is None
                and self.neighbours
            ):
                self.show_neighbour(0)  # no loop of loopdeck's to come back to: go round

        ours = self.snapshot is not None and (
            self.snapshot.loop is not None or self.snapshot.error is not None
        )
        screen = NeighbourScreen(self.workspace.root, found, clock=self.clock, back=self.fleet_mode or ours)
        self.push_screen(screen, left)

    def action_next_loop(self) -> None:
        self.neighbours = formats.detect(self.workspace.root)
        if self.neighbours:
            self.show_neighbour(0)

    # --- the fleet ---------------------------------------------------------------------------

    def action_fleet(self) -> None:
        if self.fleet_mode and not isinstance(self.screen, FleetScreen):
            self.push_screen(FLEET)

    @property
    def can_go_back(self) -> bool:  # type: ignore[override]
        """Escape on the main screen, with no search or full screen to leave, goes back to the
        fleet, when there is one."""
        return self.fleet_mode

    def action_go_back(self) -> None:
        self.action_fleet()

    def on_fleet_screen_open(self, message: FleetScreen.Open) -> None:
        self.pop_screen()  # the fleet stays installed, and keeps watching
        if message.folder != self.workspace.root:
            self.open_workspace(Workspace(message.folder))
        if message.kind != formats.OURS:
            self.opened_neighbour = True
            found = [i for i, f in enumerate(self.neighbours) if f.kind == message.kind]
            if found:
                self.show_neighbour(found[0])

    def open_workspace(self, workspace: Workspace) -> None:
        """Point the monitor at another folder: everything read from the last one is dropped."""
        self.workspace = workspace
        self.snapshot = None
        self.git_status = None
        self.awaiting.clear()
        self.asking.asked_resume = False
        self.watched = None
        self.opened_neighbour = False
        self.neighbours = formats.detect(workspace.root)
        self.load_snapshot()
        if self.use_git:
            self.git_dirty = False
            self.load_git()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "next_loop":
            return bool(self.neighbours)
        if action == "fleet":
            return self.fleet_mode
        return super().check_action(action, parameters)
