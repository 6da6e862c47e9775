"""What a worker machine does for a loop: a worker's turn, its audit, a merge, a fresh read of
the graph, as Temporal activities.

A turn: the shared remote fetched into the machine's cache, the task's branch claimed (created
atomically if absent, else gone on from), a worktree of it, the agent run through the same
adapters and process pool as on one machine (`loop.agents`, `loop.processes`: its own process
group, a supervisor that kills its tree if this worker dies), a heartbeat every few seconds with
its last output line, the work committed with the turn's facts in the commit, and the branch
pushed with a lease on the sha the turn started from. What the agent did comes back as facts
(`TurnOutput`); nothing is decided here. Only a lost worker is retried (by Temporal, after the
heartbeat timeout): a retry finds the branch first, and when the lost attempt had already
pushed this turn's commit it returns that commit's facts without running the agent again.

Credentials stay here: the agent's API key and any git token are in this machine's environment
and are never sent. Everything that leaves (heartbeats, results, error messages: all of it goes
into the workflow's history) is redacted and scrubbed of the values of this machine's secret
variables first.
"""

from __future__ import annotations

import os
import re
import shlex
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError, CancelledError

from loop import agents, verify
from loop.agents.turn import judge, usage_of
from loop.core.errors import LoopdeckError
from loop.core.redact import redact, redact_obj
from loop.core.timeutil import iso_s, utcnow
from loop.processes import agent, sandbox
from loop.processes.workers import Pool
from loop.repo import worktrees
from loop.temporal import remote as git
from loop.temporal.output import Tail
from loop.temporal.protocol import (
    AuditInput,
    AuditOutput,
    GraphInput,
    GraphOutput,
    MergeInput,
    MergeOutput,
    TurnInput,
    TurnOutput,
    task_from,
    task_json,
)
from loop.verify.suite import run_all

SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE|SESSION", re.IGNORECASE)
TEXT_CHARS = 4000
MERGE_TRIES = 5
"""Merges that lose the race for the loop's branch (another pushed first) before giving up."""

AUDIT_TIMEOUT_S = 540.0
"""An audit agent's time (within the ten minutes the workflow gives an audit)."""

T = TypeVar("T")


def secrets_of(env: Mapping[str, str]) -> list[str]:
    """The values of this machine's secret-looking variables (API keys, tokens, passwords),
    longest first: what must never leave it, whatever the redaction patterns recognise."""
    found = {value for name, value in env.items() if SECRET_NAME.search(name) and len(value) >= 8}
    return sorted(found, key=len, reverse=True)


@dataclass
class Settings:
    """A worker machine's own choices, never the workflow's."""

    work_dir: Path
    """The cache of clones and the turns' worktrees and logs."""
    agents: tuple[str, ...] = ()
    """Agent commands this worker runs; empty: the four CLIs' default commands only."""
    allow: tuple[str, ...] = ()
    """Exact verification and audit commands beyond the allowlist this worker's person allowed
    (`loopdeck worker --verify-allow`): a loop's own allowances run only when named here too."""
    heartbeat_s: float = 2.0
    machine: str = ""
    secrets: tuple[str, ...] = ()
    on_turn: Callable[[], None] | None = None
    """Called after each turn (`--max-turns`)."""
    sandbox: str | None = None
    """`auto`, `on` or `off` for the agents' turns (`loop.processes.sandbox`); None:
    `LOOPDECK_SANDBOX`, else `auto`."""
    sandbox_net: bool = True
    sandbox_env: tuple[str, ...] = ()


class Activities:
    """The activities, bound to this worker's settings."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.cache = git.Cache(settings.work_dir)
        self.machine = settings.machine or socket.gethostname()
        self.box = sandbox.detect(sandbox.choose(settings.sandbox))
        """The sandbox every turn's agent runs in: `--sandbox on` without one refuses to start."""

    def boxed(self, path: Path, repo: Path) -> tuple[sandbox.Spec, sandbox.Status] | None:
        """The sandbox of what runs in the worktree `path` (an agent turn, an audit, a check):
        the worktree writable, the cache's repository its git (config and hooks read-only)."""
        if not self.box.on:
            return None
        settings = self.settings  # turns run side by side in the cache's repository: `beside`
        return sandbox.Spec(path, repo, settings.sandbox_net, settings.sandbox_env, beside=True), self.box

    def validation(self, verdict: Any) -> dict[str, Any] | None:
        """The checks' results as data, redacted like everything a worker sends back."""
        read = getattr(verdict, "validation", None)
        if not callable(read):
            return None
        return {**redact_obj(read(), self.scrub), "ts": iso_s(utcnow())}

    def scrub(self, text: str) -> str:
        """Redacted, and every secret value of this machine's environment taken out."""
        text = redact(text)
        for value in self.settings.secrets:
            text = text.replace(value, "[REDACTED]")
        return text

    def guard(self, work: Callable[[], T]) -> T:
        """Any error leaves as one scrubbed line (its message goes into the history)."""
        try:
            return work()
        except (ApplicationError, CancelledError):
            raise  # ours, or Temporal's cancellation: as they are
        except LoopdeckError as exc:
            raise ApplicationError(self.scrub(str(exc))[-1000:], type="LoopdeckError") from None
        except Exception as exc:  # anything else: its scrubbed line, never its stack
            raise ApplicationError(
                self.scrub(f"{type(exc).__name__}: {exc}")[-1000:], type=type(exc).__name__
            ) from None

    def allowed(self, asked: list[str]) -> list[str]:
        """The loop's exact-command allowances this worker honours: those its own person named
        too. Whoever can start a workflow on the namespace must not widen what a worker machine
        runs (a `sh:` command would get its whole environment)."""
        return [command for command in asked if command in self.settings.allow]

    def own_allowlist(self) -> dict[str, Any]:
        """What this worker runs at all: `verify.WORKER_ALLOW` and its own person's allowances,
        never the single-machine default (make, npm, pytest run the repository's code)."""
        return verify.on_worker(self.settings.allow)

    def refused(self, exc: Exception, command: str, asked: list[str]) -> str:
        """Why a verification or audit command did not run, and, for one the loop allowed but
        this worker did not, how its person allows it."""
        mine = (command.strip(), f"{verify.SHELL_PREFIX} {command.strip()}")
        missing = [entry for entry in asked if entry in mine and entry not in self.settings.allow]
        if missing:
            return (
                f"{exc}. The loop allows it, this worker does not: its person allows it with "
                f"`loopdeck worker --verify-allow {shlex.quote(missing[0])}`"
            )
        return str(exc)

    def accepts(self, command: str) -> str | None:
        """Why this worker does not run `command` (None: it does). A worker runs the agents its
        person named (`--agent`), or else only the CLIs' own default commands: whoever can start
        a workflow on the namespace must not pick the programs a worker machine runs."""
        allowed = self.settings.agents or tuple(
            a.default_command for a in agents.ADAPTERS.values() if a.default_command
        )
        if command in allowed:
            return None
        return (
            f"this worker ({self.machine}) does not run the agent {command!r}; start it with "
            f"`loopdeck worker --agent {command!r}`"
        )

    # --- a worker's turn -------------------------------------------------------------------

    @activity.defn(name="loopdeck.turn")
    def turn(self, inp: TurnInput) -> TurnOutput:
        tail = Tail(inp.worker, inp.task, inp.turn, self.scrub)  # what its heartbeats carry
        with Beating(self.settings.heartbeat_s, tail.last):
            out = self.guard(lambda: self._turn(inp, tail))
        return replace(out, lines=tail.now() if tail.count else None)

    def _turn(self, inp: TurnInput, tail: Tail) -> TurnOutput:
        info = activity.info()
        refused = self.accepts(inp.agent)
        if refused:
            return TurnOutput(
                inp.worker, inp.task, inp.turn, failure=refused, error=refused, machine=self.machine
            )
        repo = self.cache.repo(inp.remote)
        self.cache.fetch(repo, inp.remote)
        base = git.sha_of(repo, git.tracking(inp.loop_branch))
        if base is None:
            raise ApplicationError(
                f"the loop's branch {inp.loop_branch} is not on the remote", non_retryable=True
            )
        start = git.claim(self.cache, repo, inp.remote, inp.branch, base)
        record = git.record_of(repo, start, inp.key)
        if record is not None:  # a lost attempt of this turn pushed its work: never twice
            done = TurnOutput.from_record(record)
            if done is not None:
                changed = _changed(repo, base, start)
                return replace(done, changed=changed, sha=start, attempt=info.attempt, resumed=True)
        name = f"{inp.workflow_id}-{inp.worker}-{inp.turn}-{info.attempt}"
        path = self.cache.worktree(repo, name, start)
        try:
            return self._work(inp, repo, path, base, start, info.attempt, tail)
        finally:
            self.cache.drop(repo, path)

    def _work(
        self, inp: TurnInput, repo: Path, path: Path, base: str, start: str, attempt: int, tail: Tail
    ) -> TurnOutput:
        wt = worktrees.Worktree(path, inp.branch, base)
        if inp.rework == "conflict":
            worktrees.take_in(wt, f"origin/{inp.loop_branch}")  # the markers, for the worker to resolve
        tries = [(inp.role, inp.agent, inp.agent_format)]
        if inp.fallback and self.accepts(inp.fallback) is None:
            tries.append(("fallback", inp.fallback, inp.fallback_format))
        limits: list[dict[str, Any]] = []
        for index, (role, command, fmt) in enumerate(tries):
            # A usage limit is no failure: the next agent goes on in the same worktree at once,
            # as the runner's turn does; the loop hears which agents were held, and until when.
            ran = self._agent(inp, repo, path, role, command, fmt, attempt, tail, index)
            out = replace(ran, role=role)
            if out.limited is None:
                break
            limits.append(
                {"role": role, "agent": out.agent_name, "reason": out.limited, "resets_at": out.resets_at}
            )
            if index + 1 < len(tries):
                tail.add([f"{out.agent_name} hit a usage limit ({out.limited}); the fallback goes on"])
        out = replace(out, limits=limits)
        left = worktrees.unresolved(path)
        if left:
            note = (
                "CONFLICT MARKERS REMAIN in " + ", ".join(left) + ": resolve them (keep both sides' intent)."
            )
            return replace(out, note=note, sha=start)
        message = (
            f"loopdeck: task {inp.task} ({inp.worker}, turn {inp.turn})\n\n"
            f"{git.TRAILER}: {inp.key}\n{git.FACTS}: {out.to_record()}\n"
        )
        sha = worktrees.commit_all(wt, message) or start
        if sha != start and not git.push(path, inp.remote, sha, inp.branch, start):
            # the branch moved under this attempt: it was given up on and another took over
            raise ApplicationError(
                f"{inp.branch} moved on the remote while this attempt ran on {self.machine}: "
                "its push was refused (a later attempt owns the task)",
                type="LatePush",
            )
        if self.settings.on_turn is not None:
            self.settings.on_turn()
        return replace(out, changed=_changed(path, base, sha), sha=sha)

    def _agent(
        self,
        inp: TurnInput,
        repo: Path,
        path: Path,
        role: str,
        command: str,
        fmt: str | None,
        attempt: int,
        tail: Tail,
        index: int,
    ) -> TurnOutput:
        """One agent's run in the turn's worktree, as facts."""
        choice = agents.resolve(command, fmt)
        adapter = choice.adapter
        env = dict(os.environ)
        if choice.command == adapter.default_command and adapter.default_env:
            env = {**adapter.default_env, **env}
        env.update(
            {"LOOPDECK_WORKER": inp.worker, "LOOPDECK_TASK": inp.task, "LOOPDECK_FILES": "\n".join(inp.files)}
        )
        logs = self.settings.work_dir / "logs" / worktrees.safe_name(inp.workflow_id)
        suffix = f".{role}" if index else ""
        log = logs / f"{worktrees.safe_name(inp.worker)}.{inp.turn:02d}.{attempt}{suffix}.log"
        box = self.boxed(path, repo)
        argv, uses_stdin = agent.argv_for(
            agents.in_sandbox(choice, box is not None), inp.prompt, log.with_suffix(".prompt.md")
        )
        tail.follow(log, adapter.name)
        pool = Pool()
        pool.start(inp.worker, "worker", argv, inp.prompt if uses_stdin else None, path, log, env, box)
        ended = None
        seen = 0.0
        try:
            while ended is None:
                got = pool.poll(inp.timeout_s)
                if got:
                    ended = got[0]
                    break
                if time.monotonic() - seen >= min(0.5, self.settings.heartbeat_s / 2):
                    seen = time.monotonic()
                    tail.look()
                time.sleep(0.05)
        finally:
            pool.stop_all()  # a cancelled turn (its worker stopped) ends its agent here
        tail.look()
        judged = judge(
            adapter,
            ended.tail,
            ended.exit_code,
            now=utcnow(),
            timed_out=ended.timed_out,
            timeout_s=inp.timeout_s,
            start_error=ended.error,
            env=env,
            echoed=inp.prompt,
        )
        facts = judged.turn()
        return TurnOutput(
            inp.worker,
            inp.task,
            inp.turn,
            failure=self.scrub(facts.failure) if facts.failure else None,
            error=self.scrub(facts.error) if facts.error else None,
            usage=usage_of(judged.facts),
            limited=self.scrub(facts.limited) if facts.limited else None,
            resets_at=facts.resets_at,
            denied=list(facts.denied),
            denied_hint=facts.denied_hint,
            text=self.scrub(judged.text or "")[-TEXT_CHARS:],
            question=self.scrub(judged.question) if judged.question else None,
            exit_code=ended.exit_code,
            duration_s=ended.duration_s,
            attempt=attempt,
            machine=self.machine,
            agent_name=adapter.name,
        )

    # --- an audit ----------------------------------------------------------------------------

    @activity.defn(name="loopdeck.audit")
    def audit(self, inp: AuditInput) -> AuditOutput:
        with Beating(self.settings.heartbeat_s):
            return self.guard(lambda: self._audit(inp))

    def _audit(self, inp: AuditInput) -> AuditOutput:
        if inp.kind == "agent":
            refused = self.accepts(inp.command)
            if refused:  # never run: the loop hears why (and its person how to allow it)
                return AuditOutput(False, f"the audit agent did not run: {refused}")
        repo = self.cache.repo(inp.remote)
        self.cache.fetch(repo, inp.remote)
        sha = git.sha_of(repo, git.tracking(inp.branch))
        if sha is None:
            return AuditOutput(False, f"the branch {inp.branch} is not on the remote")
        path = self.cache.worktree(repo, f"audit-{inp.worker}-{sha[:12]}", sha)
        try:
            env = {
                **os.environ,
                "LOOPDECK_WORKER": inp.worker,
                "LOOPDECK_TASK": inp.task,
                "LOOPDECK_FILES": "\n".join(inp.files),
                "LOOPDECK_CHANGED": "\n".join(inp.changed),
            }
            if inp.kind == "agent":
                return self._audit_agent(inp, repo, path, env)
            try:
                check = verify.check(inp.command, self.allowed(inp.allow), cwd=path, **self.own_allowlist())
            except verify.CommandRefused as exc:
                return AuditOutput(False, self.scrub(self.refused(exc, inp.command, inp.allow)))
            outcome = verify.run(check, path, env=env, interrupted=_cancelled, sandbox=self.boxed(path, repo))
            return AuditOutput(outcome.passed, self.scrub(outcome.tail)[-TEXT_CHARS:])
        finally:
            self.cache.drop(repo, path)

    def _audit_agent(self, inp: AuditInput, repo: Path, path: Path, env: dict[str, str]) -> AuditOutput:
        """The audit agent, as the local workers run it: given the task, the files the branch
        changed and the worker's report, in the branch's worktree; exit 0 approves, and its
        last words go back to the worker."""
        from loop.core.prompts import audit_prompt
        from loop.core.scheduler import Worker

        task = task_from(inp.task_json or {"id": inp.task})
        prompt = audit_prompt(
            task, Worker(inp.worker, inp.task, tuple(inp.files), ""), inp.output, tuple(inp.changed)
        )
        choice = agents.resolve(inp.command, inp.agent_format)
        if choice.command == choice.adapter.default_command and choice.adapter.default_env:
            env = {**choice.adapter.default_env, **env}
        logs = self.settings.work_dir / "logs" / "audits"
        log = logs / f"{worktrees.safe_name(inp.worker)}.{path.name}.audit.log"
        box = self.boxed(path, repo)
        argv, uses_stdin = agent.argv_for(
            agents.in_sandbox(choice, box is not None), prompt, log.with_suffix(".prompt.md")
        )
        pool = Pool()
        pool.start(inp.worker, "audit", argv, prompt if uses_stdin else None, path, log, env, box)
        try:
            while True:
                got = pool.poll(AUDIT_TIMEOUT_S)
                if got:
                    ended = got[0]
                    break
                if _cancelled():
                    raise CancelledError("the audit was cancelled")
                time.sleep(0.05)
        finally:
            pool.stop_all()
        said = agent.final_text(ended.tail).strip()
        return AuditOutput(ended.exit_code == 0, self.scrub(said)[-TEXT_CHARS:], exit_code=ended.exit_code)

    # --- a merge -------------------------------------------------------------------------------

    @activity.defn(name="loopdeck.merge")
    def merge(self, inp: MergeInput) -> MergeOutput:
        with Beating(self.settings.heartbeat_s):
            return self.guard(lambda: self._merge(inp))

    def _merge(self, inp: MergeInput) -> MergeOutput:
        repo = self.cache.repo(inp.remote)
        for _ in range(MERGE_TRIES):
            self.cache.fetch(repo, inp.remote)
            loop_sha = git.sha_of(repo, git.tracking(inp.loop_branch))
            task_sha = git.sha_of(repo, git.tracking(inp.branch))
            if loop_sha is None or task_sha is None:
                missing = inp.loop_branch if loop_sha is None else inp.branch
                return MergeOutput(False, problem=f"the branch {missing} is not on the remote")
            if git.is_ancestor(repo, task_sha, loop_sha):
                return MergeOutput(True, sha=loop_sha)  # merged already (by a lost attempt): once
            done = self._merge_once(inp, repo, loop_sha, task_sha)
            if done is not None:
                return done
        return MergeOutput(False, problem=f"the loop's branch {inp.loop_branch} kept moving during the merge")

    def _merge_once(self, inp: MergeInput, repo: Path, loop_sha: str, task_sha: str) -> MergeOutput | None:
        path = self.cache.worktree(repo, f"merge-{inp.workflow_id}-{task_sha[:12]}", loop_sha)
        try:
            outcome = worktrees.merge(path, task_sha, inp.message)
            if not outcome.merged:
                return MergeOutput(False, conflicts=list(outcome.conflicts), hunks=self.scrub(outcome.hunks))
            checks: list[verify.Check] = []
            for command in inp.verify:  # every command allowed before any runs
                try:
                    checks.append(
                        verify.check(
                            command, self.allowed(inp.verify_allow), cwd=path, **self.own_allowlist()
                        )
                    )
                except verify.CommandRefused as exc:
                    worktrees.abandon(path)
                    return MergeOutput(
                        False, problem=self.scrub(self.refused(exc, command, inp.verify_allow))
                    )
            verdict = run_all(checks, path, interrupted=_cancelled, sandbox=self.boxed(path, repo))
            checked = self.validation(verdict) if checks and not verdict.interrupted else None
            if not verdict.passed:
                worktrees.abandon(path)
                failures = verdict.failures or ("the checks were cancelled",)
                failure = "\n\n".join(_clip(self.scrub(f)) for f in failures)
                return MergeOutput(False, failure=failure, validation=checked)
            sha = worktrees.conclude(path, inp.message)
            if git.push(path, inp.remote, sha, inp.loop_branch, loop_sha):
                touched = bool(inp.graph) and bool(
                    git.git(path, "diff", "--name-only", loop_sha, sha, "--", inp.graph).stdout.strip()
                )
                return MergeOutput(True, sha=sha, graph_changed=touched, validation=checked)
            return None  # the loop's branch moved meanwhile: merge again onto it
        finally:
            self.cache.drop(repo, path)

    # --- the graph -------------------------------------------------------------------------------

    @activity.defn(name="loopdeck.graph")
    def graph(self, inp: GraphInput) -> GraphOutput:
        with Beating(self.settings.heartbeat_s):
            return self.guard(lambda: self._graph(inp))

    def _graph(self, inp: GraphInput) -> GraphOutput:
        from loop.sources import taskgraph

        repo = self.cache.repo(inp.remote)
        self.cache.fetch(repo, inp.remote)
        sha = git.sha_of(repo, git.tracking(inp.loop_branch))
        if sha is None:
            return GraphOutput(None, problem=f"the loop's branch {inp.loop_branch} is not on the remote")
        path = self.cache.worktree(repo, f"graph-{sha[:12]}-{os.getpid()}", sha)
        try:
            where = (path / inp.graph).resolve()
            if not where.is_relative_to(path.resolve()):  # the graph is the repository's, nothing else
                return GraphOutput(None, problem=f"the graph {inp.graph!r} is outside the repository")
            if not where.exists():
                return GraphOutput(None)
            try:
                tasks = taskgraph.read(where)
            except LoopdeckError as exc:
                return GraphOutput(None, problem=self.scrub(str(exc)))
            return GraphOutput([task_json(t) for t in tasks])
        finally:
            self.cache.drop(repo, path)


class Beating:
    """Heartbeats from a thread of their own for the whole activity, with the latest detail
    (the agent's last line): a first clone of a large repository or a long merge is not a lost
    worker. A frozen or killed process stops beating, which is what the server must see."""

    def __init__(self, every: float, detail: Callable[[], Any] = lambda: "") -> None:
        import contextvars
        import threading

        self.every = every
        self.detail = detail
        self.context = contextvars.copy_context()  # the activity's: `activity.heartbeat` reads it
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name="loopdeck-heartbeat", daemon=True)

    def __enter__(self) -> Beating:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.thread.join(5)

    def _run(self) -> None:
        while not self.stopped.wait(self.every):
            try:
                self.context.run(activity.heartbeat, self.detail())
            except RuntimeError:  # the activity is over
                return


def _changed(cwd: Path, base: str, sha: str) -> list[str]:
    """What the task's branch changed since it left the loop's branch."""
    out = git.git(cwd, "diff", "--name-only", f"{base}...{sha}").stdout
    return sorted(f for f in out.splitlines() if f)


def _clip(failure: str) -> str:
    """One failed check for the workflow's history: its command and exit status, and the last
    of its output."""
    lines = failure.split("\n", 2)  # `$ command`, `(exit N)`, the output
    return "\n".join([*lines[:2], *(output[-TEXT_CHARS:] for output in lines[2:])])


def _cancelled() -> bool:
    """A verification or audit under way ends when its activity is cancelled."""
    try:
        return activity.is_cancelled()
    except RuntimeError:
        return False


def all_activities(acts: Activities) -> dict[str, list[Any]]:
    """Which queue runs what: the turns on their own queue, the rest on the loop's."""
    return {"turns": [acts.turn], "loop": [acts.audit, acts.merge, acts.graph]}
