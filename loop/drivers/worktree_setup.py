"""Worktrees that run: what a project needs in each new worktree before a worker's first turn.

A fresh worktree holds only what git tracks: no `.env`, no local settings, no installed
dependencies, and every worker's tests reach for the same port. Per project (`.loopdeck.toml`,
pyproject.toml's `[tool.loopdeck]`, or the person's own config file):

* `worktree_copy`: untracked files copied from the workspace into each new worktree. Paths are
  relative to the workspace, never outside it, never through a symlink (a planted link would
  copy a file from anywhere into a branch an agent reads). They are added to the repository's
  local exclude file, so a worker's commit never takes them onto its branch;
* `worktree_setup`: commands run once per worktree, in the agent's sandbox, as argv (no shell).
  They are the workspace's text, so they run only once a person confirmed them, as every value
  of a project's file is (`loop.drivers.defaults`); a person's confirmation names each exact
  command, so no allowlist entry is needed beyond it, but the dangers the allowlist refuses
  (`curl | sh`, `rm -rf /`, shell syntax) are refused here too. That a worktree's setup ran is
  kept in its own git folder, which goes with the worktree: a new worktree runs it again;
* `port_base`, `ports_per_worker`: each worker holds a slot 1..N while it lives, and finds it
  in `LOOPDECK_WORKER` with `LOOPDECK_PORT_BASE` = base + ports_per_worker × slot, so tests
  run side by side on distinct ports.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loop.core.errors import LoopdeckError
from loop.drivers.children import Children, Signals
from loop.drivers.session import Session
from loop.drivers.turn import Turns
from loop.processes.sandbox import Spec, Status
from loop.repo.worktrees import run_git
from loop.verify import Check, CommandRefused, check, run

KEYS = ("worktree_copy", "worktree_setup", "port_base", "ports_per_worker")
"""The saved defaults this module reads (`loop.store.config.KEYS` checks their types)."""
PORT_BASE = 20000
PORTS_PER_WORKER = 100
MARK = "loopdeck-worktree-setup.json"
"""In the worktree's own git folder (`.git/worktrees/<name>/`): not in the tree an agent writes,
and removed with the worktree."""
MAX_COPY_BYTES = 16 * 1024 * 1024
"""A `.env` or a settings file is a few KB; a larger file is not what this is for."""

Report = Callable[[str, dict[str, Any]], object]


class SetupFailed(LoopdeckError):
    """A worktree could not be made ready: a file not copied, a setup command failed."""

    def __init__(self, message: str, tail: str = "") -> None:
        super().__init__(message)
        self.tail = tail
        """The failed command's last lines of output, redacted."""


@dataclass(frozen=True)
class WorktreeSetup:
    """The project's worktree setup for this run, checked (`admit`)."""

    copy: tuple[str, ...] = ()
    setup: tuple[str, ...] = ()
    port_base: int = PORT_BASE
    ports_per_worker: int = PORTS_PER_WORKER
    checks: tuple[Check, ...] = field(default=(), compare=False)

    @property
    def digest(self) -> str:
        """What a worktree's mark records: setup runs again when the files or commands change."""
        text = json.dumps([list(self.copy), list(self.setup)])
        return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:16]

    def port(self, slot: int) -> int:
        return self.port_base + self.ports_per_worker * slot


def from_values(
    values: Mapping[str, Any], workers: int, root: Path, where: Callable[[str], str]
) -> WorktreeSetup:
    """The setup the saved values describe, checked before anything runs: each path inside the
    workspace and no symlink, each command argv the allowlist's dangers do not refuse, the
    ports within range for `workers`. `where(key)` names the file a value came from.
    LoopdeckError, one line, for the first problem."""
    copy = tuple(str(p) for p in values.get("worktree_copy") or ())
    setup = tuple(str(c) for c in values.get("worktree_setup") or ())
    base = int(values.get("port_base") or PORT_BASE)
    step = int(values.get("ports_per_worker") or PORTS_PER_WORKER)
    for path in copy:
        problem = path_problem(root, path)
        if problem:
            raise LoopdeckError(f"{where('worktree_copy')}: {path!r} {problem}")
    if tracked := _tracked(root, copy):
        raise LoopdeckError(
            f"{where('worktree_copy')}: {tracked!r} is tracked by git, so each worktree has it "
            "already; expected untracked files such as .env"
        )
    checks = tuple(_checked(command, root, where("worktree_setup")) for command in setup)
    top = base + step * (workers + 1) - 1
    if top > 65535:
        raise LoopdeckError(
            f"{where('port_base')}: {workers} workers need ports up to {top}; expected at most 65535"
        )
    found = WorktreeSetup(copy, setup, base, step, checks)
    if copy:
        _exclude(root, copy)
    return found


def _checked(command: str, cwd: Path, where: str) -> Check:
    """A setup command as argv. A person confirmed this exact command, so it is its own allow
    entry; what the allowlist refuses whatever a person allows still is refused."""
    try:
        found = check(command, [command], cwd=cwd)
    except CommandRefused as exc:
        said = str(exc).replace("verification command", "setup command", 1)
        raise LoopdeckError(f"{where}: {said}") from None
    if found.argv is None:  # cannot happen: only a `sh: ` entry allows a shell
        raise LoopdeckError(f"{where}: setup command {command!r} needs a shell; expected argv")
    return found


def path_problem(root: Path, relative: str) -> str | None:
    """Why `relative` cannot be copied from the workspace at `root` (None: it can): absolute,
    leaving the workspace, through a symlink, or not a regular file."""
    if not relative or "\0" in relative:
        return "is not a path"
    parts = Path(relative).parts
    if Path(relative).is_absolute() or ".." in parts or not parts:
        return "is outside the workspace; expected a path relative to it, such as .env"
    if parts[0] == ".git":
        return "is inside git's folder; expected a file of the workspace"
    here = root
    for i, part in enumerate(parts):
        here = here / part
        try:
            mode = os.lstat(here).st_mode
        except FileNotFoundError:
            return "does not exist in the workspace"
        except OSError as exc:
            return f"cannot be read ({exc.strerror or exc})"
        if stat.S_ISLNK(mode):
            return "is a symlink" if i == len(parts) - 1 else f"goes through a symlink ({here.name})"
        if i < len(parts) - 1 and not stat.S_ISDIR(mode):
            return "is not under a folder"
        if i == len(parts) - 1 and not stat.S_ISREG(mode):
            return "is not a regular file; expected a file such as .env"
    return None


def _tracked(root: Path, paths: Iterable[str]) -> str | None:
    for path in paths:
        if run_git(root, "ls-files", "--error-unmatch", "--", path, check=False).returncode == 0:
            return path
    return None


def _exclude(root: Path, paths: Iterable[str]) -> None:
    """Keep the copied files off every task's branch: each one the project does not ignore
    already goes into the repository's local exclude file (shared by its worktrees; nothing the
    project commits changes)."""
    wanted = [p for p in paths if run_git(root, "check-ignore", "-q", "--", p, check=False).returncode != 0]
    if not wanted:
        return
    common = run_git(root, "rev-parse", "--git-common-dir", check=False).stdout.strip()
    if not common:
        raise LoopdeckError(f"{root}: git's folder could not be found")
    info = (root / common).resolve() / "info" / "exclude"
    try:
        text = info.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = ""
    have = set(text.splitlines())
    lines = [line for p in wanted if (line := "/" + Path(p).as_posix()) not in have]
    if lines:
        info.parent.mkdir(parents=True, exist_ok=True)
        with info.open("a", encoding="utf-8") as f:
            f.write(("" if not text or text.endswith("\n") else "\n") + "\n".join(lines) + "\n")


# --- a worktree made ready ------------------------------------------------------------------------


def _mark_path(worktree: Path) -> Path:
    done = run_git(worktree, "rev-parse", "--absolute-git-dir", check=False)
    if done.returncode != 0 or not done.stdout.strip():
        raise SetupFailed(f"{worktree}: not a git worktree")
    return Path(done.stdout.strip()) / MARK


def is_ready(setup: WorktreeSetup, worktree: Path) -> bool:
    """Did this worktree's setup run (with these files and commands)?"""
    try:
        data = json.loads(_mark_path(worktree).read_text(encoding="utf-8"))
    except (OSError, ValueError, LoopdeckError):
        return False
    return isinstance(data, dict) and data.get("digest") == setup.digest


def prepare(
    setup: WorktreeSetup,
    root: Path,
    worktree: Path,
    *,
    env: Mapping[str, str] | None,
    sandbox: tuple[Spec, Status] | None,
    timeout: float,
    report: Report,
    register: Callable[[int], None] | None = None,
    interrupted: Callable[[], bool] | None = None,
) -> bool:
    """Make a new worktree ready, once: the files copied, then each setup command run in it
    (in `sandbox`); each command's outcome `report`ed. False when it was ready already.
    SetupFailed naming the file or the command (its exit and output) when it cannot be."""
    if not (setup.copy or setup.setup) or is_ready(setup, worktree):
        return False
    mark = _mark_path(worktree)
    for path in setup.copy:
        copy_file(root, worktree, path)
    for item in setup.checks:
        report("worktree-setup-started", {"command": item.command, "worktree": str(worktree)})
        outcome = run(
            item, worktree, timeout, register=register, env=env, sandbox=sandbox, interrupted=interrupted
        )
        data = {
            "command": item.command,
            "worktree": str(worktree),
            "exit_code": outcome.exit_code,
            "duration_s": round(outcome.duration_s, 3),
        }
        if not outcome.passed:
            said = "timed out" if outcome.timed_out else f"exit {outcome.exit_code}"
            last = outcome.tail.strip().splitlines()[-1:] or [""]
            message = f"setup command {item.command!r} failed in {worktree} ({said}): {last[0][:300]}"
            raise SetupFailed(message, outcome.tail)
        report("worktree-setup-passed", data)
    mark.write_text(json.dumps({"digest": setup.digest, "copied": list(setup.copy)}), encoding="utf-8")
    return True


def copy_file(root: Path, worktree: Path, relative: str) -> None:
    """Copy one file from the workspace into the worktree: no symlink on either side, the
    source a regular file, its permissions kept (a `.env` stays private)."""
    problem = path_problem(root, relative)
    if problem:
        raise SetupFailed(f"worktree_copy: {relative!r} {problem}")
    source = root / relative
    try:
        fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise SetupFailed(f"worktree_copy: {relative!r} cannot be read ({exc.strerror or exc})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SetupFailed(f"worktree_copy: {relative!r} is not a regular file")
        if info.st_size > MAX_COPY_BYTES:
            raise SetupFailed(f"worktree_copy: {relative!r} is larger than {MAX_COPY_BYTES >> 20} MB")
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read(MAX_COPY_BYTES + 1)
    finally:
        os.close(fd)
    target = worktree
    for part in Path(relative).parts[:-1]:
        target = target / part
        if os.path.islink(target):
            raise SetupFailed(f"worktree_copy: {relative!r} would be written through a symlink in {worktree}")
        target.mkdir(exist_ok=True)
    target = target / Path(relative).name
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        out = os.open(target, flags, stat.S_IMODE(info.st_mode))
    except OSError as exc:
        raise SetupFailed(
            f"worktree_copy: {relative!r} cannot be written in {worktree} ({exc.strerror or exc})"
        ) from None
    with os.fdopen(out, "wb") as f:
        f.write(data)
    os.chmod(target, stat.S_IMODE(info.st_mode), follow_symlinks=False)


# --- a worker's slot and ports ----------------------------------------------------------------------


class Slots:
    """Each live worker's slot, 1..N: the lowest one free when it first starts, held while it
    lives on the board (its turns and audits), given back when it leaves."""

    def __init__(self) -> None:
        self.held: dict[str, int] = {}

    def of(self, name: str, live: Iterable[str]) -> int:
        alive = set(live) | {name}
        self.held = {n: s for n, s in self.held.items() if n in alive}
        if name not in self.held:
            taken = set(self.held.values())
            self.held[name] = next(i for i in range(1, len(alive) + len(taken) + 2) if i not in taken)
        return self.held[name]


def env_for(setup: WorktreeSetup, slot: int) -> dict[str, str]:
    """A worker's slot and port base, for its turns, its setup and its audit."""
    return {"LOOPDECK_WORKER": str(slot), "LOOPDECK_PORT_BASE": str(setup.port(slot))}


class Ready:
    """The parallel driver's side: a worker's worktree made ready before its turn, and its
    slot's environment. Outcomes go to the journal; a failure is the worktree's, said in one
    line (the worker's turn then fails to start with it)."""

    def __init__(
        self, setup: WorktreeSetup, session: Session, turns: Turns, children: Children, signals: Signals
    ) -> None:
        self.setup = setup
        self.session = session
        self.turns = turns
        self.children = children
        self.signals = signals
        self.slots = Slots()

    def env(self, name: str, live: Iterable[str]) -> dict[str, str]:
        return {**env_for(self.setup, self.slots.of(name, live)), "LOOPDECK_WORKER_NAME": name}

    def needed(self, worktree: Path) -> bool:
        """Whether `worktree` has files to copy or setup to run before its first turn."""
        return bool(self.setup.copy or self.setup.setup) and not is_ready(self.setup, worktree)

    def prepare(self, name: str, task: str, worktree: Path, env: Mapping[str, str]) -> None:
        session = self.session

        def report(kind: str, data: dict[str, Any]) -> None:
            session.event(kind, None, {"worker": name, "task": task, **data})

        try:
            done = prepare(
                self.setup,
                session.ws.root,
                worktree,
                env=self.children.env({**os.environ, **env}),
                sandbox=self.turns.sandbox_for(worktree, beside=True),
                timeout=session.options.iteration_timeout or session.options.verify_timeout,
                report=report,
                register=self.children.register(),
                interrupted=lambda: self.signals.caught is not None,
            )
        except SetupFailed as exc:
            data = {"worker": name, "task": task, "message": str(exc), "tail": exc.tail}
            session.event("worktree-setup-failed", None, data)
            raise
        finally:
            self.children.release()
        if done:
            report("worktree-ready", {"worktree": str(worktree), "copied": list(self.setup.copy)})

    def scratch(self, worktree: Path) -> None:
        """The merge train's scratch worktree made ready for the loop's checks, once, as a
        worker's is (the checks ran in the workspace, which has the files and the setup's
        dependencies, before the train). Its environment is the checks' own: no worker's slot.
        SetupFailed, one line, when it cannot be (the train's batch then goes to a person)."""
        session = self.session
        try:
            prepare(
                self.setup,
                session.ws.root,
                worktree,
                env=self.children.env(),
                sandbox=self.turns.sandbox_for(worktree, beside=True),
                timeout=session.options.iteration_timeout or session.options.verify_timeout,
                report=lambda _kind, _data: None,  # the journal's setup events name a worker's task
                register=self.children.register(),
                interrupted=lambda: self.signals.caught is not None,
            )
        finally:
            self.children.release()
