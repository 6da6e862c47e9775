"""What a driver starts dies with it, and the signals that end it are noted, not acted on.

`Children` marks each child (an agent, a check) and registers it with a supervisor that kills
its tree if the driver dies, however it dies. `Signals` notes SIGINT and SIGTERM while a driver
runs: each driver ends its own way (SIGINT pauses the loop, SIGTERM stops it) at a safe point.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

from loop.processes.supervisor import Supervisor

EXIT_DONE, EXIT_FAILED, EXIT_SIGINT, EXIT_SIGTERM = 0, 1, 130, 143


class Signals:
    """SIGINT or SIGTERM, once one arrived (`caught`)."""

    def __init__(self) -> None:
        self.caught: int | None = None

    @contextmanager
    def noted(self) -> Iterator[None]:
        """While the driver runs, the signals are noted here; its old handlers come back after."""
        handlers = {sig: signal.signal(sig, self._note) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in handlers.items():
                signal.signal(sig, handler)

    def _note(self, signum: int, frame: object) -> None:
        self.caught = signum

    @property
    def pauses(self) -> bool:
        """SIGINT (Ctrl-C) pauses the loop; SIGTERM (or none yet) stops it."""
        return (self.caught or signal.SIGTERM) == signal.SIGINT

    @property
    def name(self) -> str:
        return signal.Signals(self.caught or signal.SIGTERM).name

    def exit_code(self) -> int:
        return EXIT_SIGINT if self.pauses else EXIT_SIGTERM


class Children:
    """The supervisor of the processes a runner starts, while it runs (`supervised`)."""

    def __init__(self) -> None:
        self.supervisor: Supervisor | None = None
        self.hidden: frozenset[str] = frozenset()
        """Variables no child sees (with `--pr`, the host's tokens): taken out by `env`/`clean`."""

    @contextmanager
    def supervised(self) -> Iterator[None]:
        self.supervisor = Supervisor()
        try:
            yield
        finally:
            self.supervisor.close()
            self.supervisor = None

    def register(self) -> Callable[[int], None] | None:
        """Tells the supervisor of a child the moment it started: it dies with the runner."""
        if self.supervisor is None:
            return None
        return self.supervisor.register

    def env(self, env: dict[str, str] | None = None) -> dict[str, str] | None:
        """The children's environment (`env`, else ours), without the `hidden` variables, marked:
        what they leave behind is found and killed."""
        if self.hidden:
            env = self.clean(env)
        if self.supervisor is None:
            return env
        return self.supervisor.env(env)

    def clean(self, env: Mapping[str, str] | None = None) -> dict[str, str]:
        """`env` (else ours) without the `hidden` variables: every child's, however started."""
        return {k: v for k, v in (os.environ if env is None else env).items() if k not in self.hidden}

    def release(self) -> None:
        if self.supervisor is not None:
            self.supervisor.release()
