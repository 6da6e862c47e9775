"""`loopdeck worker`: one machine's share of the loops on a Temporal server.

It hosts the loop's workflow code (any worker can take over the coordinator: the workflow's
state is its history on the server) and the activities: workers' turns on `<queue>-turns`, as
many at once as `--concurrency` (one agent at a time by default), and merges, audits and reads
of the graph on `<queue>`. It leaves after `--max-turns` turns, or on SIGINT/SIGTERM: turns
under way are cancelled (their agents end) and go to another worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from temporalio.worker import Worker

from loop.temporal import client as tclient
from loop.temporal.activities import Activities, Settings, secrets_of
from loop.temporal.protocol import turns_queue
from loop.temporal.workflow import LoopWorkflow


@dataclass(frozen=True)
class WorkerOptions:
    target: tclient.Target
    work_dir: Path
    agents: tuple[str, ...] = ()
    allow: tuple[str, ...] = ()
    """`--verify-allow`: what this worker runs beyond `verify.WORKER_ALLOW` (no Makefile, npm
    script or pytest runs unless named here: a loop comes from whoever can start a workflow)."""
    concurrency: int = 1
    max_turns: int | None = None
    heartbeat_s: float = 2.0
    identity: str = ""
    sandbox: str | None = None
    """Where this worker's turns run (`--sandbox`; None: LOOPDECK_SANDBOX, else auto): the same
    sandbox as a runner's turns."""
    sandbox_net: bool = True
    sandbox_env: tuple[str, ...] = ()


def default_work_dir() -> Path:
    from loop.store.xdg import base

    return base("XDG_CACHE_HOME", ".cache") / "loopdeck" / "temporal"  # a relative value is ignored


def run(options: WorkerOptions, said: list[str] | None = None) -> int:
    return asyncio.run(_run(options, said if said is not None else []))


async def _run(options: WorkerOptions, said: list[str], stop: asyncio.Event | None = None) -> int:
    """Serve until `stop` is set (SIGINT, SIGTERM, `--max-turns`, or the caller)."""
    client = await tclient.connect(options.target)
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    turns = [0]

    def turned() -> None:
        turns[0] += 1
        if options.max_turns is not None and turns[0] >= options.max_turns:
            loop.call_soon_threadsafe(stop.set)

    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(ValueError, RuntimeError):  # not the main thread: the caller stops it
            loop.add_signal_handler(signum, stop.set)
    identity = options.identity or f"loopdeck-worker@{socket.gethostname()}/{os.getpid()}"
    acts = Activities(
        Settings(
            work_dir=options.work_dir,
            agents=options.agents,
            allow=options.allow,
            heartbeat_s=options.heartbeat_s,
            machine=identity,
            secrets=tuple(secrets_of(os.environ)),
            on_turn=turned,
            sandbox=options.sandbox,
            sandbox_net=options.sandbox_net,
            sandbox_env=options.sandbox_env,
        )
    )
    queue = options.target.task_queue
    with ThreadPoolExecutor(max_workers=options.concurrency + 4) as pool:
        loop_worker = Worker(
            client,
            task_queue=queue,
            workflows=[LoopWorkflow],
            activities=[acts.audit, acts.merge, acts.graph],
            activity_executor=pool,
            max_concurrent_activities=4,
            identity=identity,
            graceful_shutdown_timeout=timedelta(seconds=2),
        )
        turn_worker = Worker(
            client,
            task_queue=turns_queue(queue),
            activities=[acts.turn],
            activity_executor=pool,
            max_concurrent_activities=options.concurrency,
            identity=identity,
            graceful_shutdown_timeout=timedelta(seconds=2),
            # a turn's heartbeats carry its output's last lines (the monitor's Output panel):
            # sent as often as they beat, not once in most of the heartbeat timeout
            max_heartbeat_throttle_interval=timedelta(seconds=max(0.5, options.heartbeat_s)),
        )
        said.append(f"loopdeck worker {identity}: serving {queue} at {options.target.address}")
        print(said[-1], flush=True)
        try:
            async with loop_worker, turn_worker:
                await stop.wait()
        finally:
            for signum in (signal.SIGINT, signal.SIGTERM):
                with contextlib.suppress(ValueError, RuntimeError):
                    loop.remove_signal_handler(signum)
    print(
        f"loopdeck worker {identity}: {turns[0]} turn{'s' if turns[0] != 1 else ''} done; leaving", flush=True
    )
    return 0
