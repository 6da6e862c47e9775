"""Driving the monitor in a test or a screenshot: the app on a scenario's workspace at a fixed
clock, and waits for the moment its screen has settled (never a fixed sleep)."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime

from textual.app import App
from textual.widgets import DataTable, RichLog
from textual.worker import WorkerCancelled, WorkerFailed

from loop.store.paths import Workspace
from tui.app import LoopdeckApp
from tui.monitor import FLEET, MonitorApp
from tui.screens.fleet import FleetScreen
from tui.screens.neighbour import NeighbourScreen

NOW = datetime(2026, 1, 9, 11, 42, 7, tzinfo=UTC)
"""The clock every scenario is seen at."""


def app_for(ws: Workspace, *, watch: bool = False, git: bool = True, prompts: bool = True) -> object:
    """The monitor on a scenario's workspace; a folder with no loop files of its own (the fleet
    scenario) gets the fleet view of the loops below it."""
    if ws.claude_dir.exists():
        app = MonitorApp([ws], clock=lambda: NOW, watch=watch, git=git, prompts=prompts, fleet_poll=False)
    else:
        app = MonitorApp(
            [],
            scan_root=ws.root,
            clock=lambda: NOW,
            watch=watch,
            git=False,
            prompts=prompts,
            fleet_poll=False,
        )
    app.animation_level = "none"  # a progress bar caught mid-animation is not a picture of anything
    return app


def ready(app: object) -> bool:
    """Whether everything the first screen shows has arrived."""
    assert isinstance(app, LoopdeckApp)
    if not app.snapshots_shown or (app.use_git and app.git_status is None):
        return False
    if not isinstance(app, MonitorApp):
        return True
    if app.fleet_mode:
        screen = app.get_screen(FLEET)
        return isinstance(screen, FleetScreen) and screen.reads > 0 and app.screen is screen
    if app.snapshot is not None and app.snapshot.loop is None and app.neighbours:
        return isinstance(app.screen, NeighbourScreen)
    return True


async def tables_measured(app: object) -> None:
    """Wait until every table has measured its rows: a `DataTable` works out its column widths
    and its height when its queue is empty, which a busy machine can put off past a fixed wait
    (the picture then shows the header at the old widths and the panel a row short)."""
    assert isinstance(app, App)
    for _ in range(250):
        waiting = [
            table
            for table in app.query(DataTable)
            if table._require_update_dimensions or table._updated_cells or table._new_rows
        ]
        if not waiting:
            return
        await asyncio.sleep(0.02)


async def settle(app: object) -> None:
    """Wait until the first snapshot and git are on screen (and any prompt is up)."""
    assert isinstance(app, LoopdeckApp)

    async def finite_workers() -> None:
        # The watchers never complete. A read replaced by a newer one (a change seen meanwhile)
        # ends cancelled, and one that failed is the app's to report: neither is waited on.
        for worker in [w for w in app.workers if w.group not in ("watch", "git-watch", "output-watch")]:
            with contextlib.suppress(WorkerCancelled, WorkerFailed):
                await worker.wait()

    for _ in range(200):
        await asyncio.sleep(0.02)
        await finite_workers()
        if ready(app):
            break
    await asyncio.sleep(0.1)
    await finite_workers()
    await tables_measured(app)
    # Every following log at its end, whatever order the panels above it (the corrupt-state
    # panel, tables that just measured) settled in.

    for log in app.query(RichLog):
        if log.auto_scroll:
            log.scroll_end(animate=False, immediate=True)
    app.screen.refresh(layout=True)  # panels whose text just changed height: lay them out again
    await asyncio.sleep(0.1)
    for log in app.query(RichLog):
        if log.auto_scroll:
            log.scroll_end(animate=False, immediate=True)
    await asyncio.sleep(0.05)
    await tables_measured(app)
    await steady(app)


async def steady(app: object) -> None:
    """Wait until the screen stops changing: two frames in a row that draw the same picture.

    On a busy machine a worker's answer (git read again after the index was touched, a table
    measured late) can land after every other wait, its layout still pending when the picture
    is taken: a panel drawn at its old height, cut by the one below."""
    assert isinstance(app, App)
    previous = None
    for _ in range(40):
        await laid_out(app)
        picture = app.export_screenshot()
        if picture == previous:
            return
        previous = picture
        await asyncio.sleep(0.05)


async def laid_out(app: object) -> None:
    """Lay the screen out again and wait until that frame is drawn: a table that measured its
    rows at the last moment changes its panel's height only at the next layout."""
    assert isinstance(app, App)
    for screen in app.screen_stack:  # the screen under a prompt too: it shows, dimmed
        drawn = asyncio.Event()
        for widget in screen.walk_children():  # every container's arrangement, not only the screen's
            widget.refresh(layout=True)
        screen.refresh(layout=True)
        screen.call_after_refresh(drawn.set)
        await asyncio.wait_for(drawn.wait(), 10)
