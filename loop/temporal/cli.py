"""The verbs on a Temporal server: `run --engine temporal`, `worker`, `temporal dev`, and the
steering and reading verbs (`pause`, `answer`, `status --json`, `log`…) given `--temporal
ADDRESS --workflow ID`, or in a workspace whose loop runs there (its record, written by `run`).

Called by `loop.cli` only when a verb is asked for it, so the single-machine verbs never load
the SDK. Errors are one line (`LoopdeckError`), as everywhere.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import subprocess
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple

from loop import agents, verify
from loop.core.errors import LoopdeckError
from loop.core.events import render_line
from loop.core.redact import redact
from loop.core.scheduler import MAX_WORKERS, WORKTREE, Board, keep
from loop.core.timeutil import iso_s, utcnow
from loop.core.workflow import unaimed
from loop.drivers.start import Request, new_state
from loop.processes import agent, sandbox
from loop.repo import worktrees
from loop.repo.gitargv import git_argv
from loop.repo.worktrees import safe_name
from loop.sources import taskgraph
from loop.store import config
from loop.store.paths import Workspace
from loop.temporal import client as tc
from loop.temporal import dev as tdev
from loop.temporal import protocol, view
from loop.temporal import remote as git
from loop.temporal import worker as tworker
from loop.temporal.protocol import LoopSpec
from loop.trust.person import refuse_inside_agent

FOLLOW_EVERY_S = 1.0


def target_of(args: argparse.Namespace, recorded: dict[str, Any] | None = None) -> tc.Target:
    """The server the options name, else the one the workspace's record names."""
    rec = recorded or {}
    address = getattr(args, "temporal", None) or getattr(args, "address", None) or rec.get("address")
    if not address:
        raise LoopdeckError("no Temporal server named: give --temporal HOST:PORT (or --address)")

    def opt(name: str, default: str | None = None) -> str | None:
        value = getattr(args, name, None)
        return str(value) if value else (str(rec[name]) if rec.get(name) else default)

    return tc.Target(
        address=str(address),
        namespace=opt("namespace", "default") or "default",
        task_queue=opt("task_queue", "loopdeck") or "loopdeck",
        tls_cert=opt("tls_cert"),
        tls_key=opt("tls_key"),
        tls_ca=opt("tls_ca"),
    )


def recorded(ws: Workspace | None) -> dict[str, Any] | None:
    return tc.load(ws.private_dir) if ws is not None else None


def _which(args: argparse.Namespace, ws: Workspace | None) -> tuple[tc.Target, str]:
    rec = recorded(ws) if not getattr(args, "temporal", None) else None
    target = target_of(args, rec)
    workflow_id = getattr(args, "workflow", None) or (rec or {}).get("workflow_id")
    if not workflow_id:
        raise LoopdeckError("which loop? give --workflow ID (`loopdeck tui --temporal ADDRESS` lists them)")
    return target, str(workflow_id)


# --- steering and reading --------------------------------------------------------------------


def steer(kind: str, args: argparse.Namespace, ws: Workspace | None, value: int | None = None) -> int:
    target, workflow_id = _which(args, ws)
    signal = tc.command(kind, "cli", getattr(args, "reason", None), value, getattr(args, "worker", None))

    async def work() -> dict[str, Any]:
        client = await tc.connect(target)
        snap = await tc.read(client, workflow_id)
        if snap.get("ended"):
            raise LoopdeckError(
                f"the loop {workflow_id} has ended ({snap['ended'].get('outcome')}): nothing to {kind}"
            )
        state = snap.get("state")
        why = unaimed(protocol.state_from(state), kind, signal.target) if isinstance(state, dict) else None
        if why is not None:
            raise LoopdeckError(f"nothing to {kind} in the loop {workflow_id}: {why}")
        await tc.send(client, workflow_id, signal)
        wait = getattr(args, "wait", None)
        if not wait:
            return {}
        deadline = time.monotonic() + float(wait)
        while time.monotonic() < deadline:
            snap = await tc.read(client, workflow_id)
            if any(e.get("data", {}).get("id") == signal.id for e in snap.get("events", [])):
                return {"applied": True}
            await _sleep(0.2)
        raise LoopdeckError(f"{kind} was not applied within {wait:g} s; it stays with the loop")

    result = tc.call(work)
    print(f"loopdeck: {kind} sent to {workflow_id} (id {signal.id}); the loop applies it at once")
    if result.get("applied"):
        print(f"loopdeck: {kind} applied")
    return 0


async def _sleep(seconds: float) -> None:
    await asyncio.sleep(seconds)


def status(args: argparse.Namespace, ws: Workspace | None) -> int:
    target, workflow_id = _which(args, ws)

    async def work() -> dict[str, Any]:
        return await tc.read(await tc.connect(target), workflow_id)

    snap = view.snapshot(tc.call(work), workflow_id, target)
    if getattr(args, "json", False):
        obj = snap.to_json()
        obj["temporal"] = {
            "address": target.address,
            "namespace": target.namespace,
            "workflow_id": workflow_id,
        }
        print(json.dumps(obj, indent=2, ensure_ascii=False))
    else:
        for line in view.lines(snap):
            print(line)
    return 0


def log(args: argparse.Namespace, ws: Workspace | None) -> int:
    target, workflow_id = _which(args, ws)
    if getattr(args, "follow", False):
        return follow(target, workflow_id)

    async def work() -> dict[str, Any]:
        return await tc.read(await tc.connect(target), workflow_id)

    wanted = max(0, int(getattr(args, "n", 50)))
    events = view.events(tc.call(work))[-wanted:] if wanted else []
    for event in events:
        print(json.dumps(event.to_json(), ensure_ascii=False) if args.json else render_line(event))
    return 0


# --- run ---------------------------------------------------------------------------------------


def _git_out(root: Path, *args: str) -> str:
    done = subprocess.run(
        git_argv(*args), cwd=root, capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL
    )
    if done.returncode != 0:
        raise LoopdeckError(
            f"git {' '.join(args[:2])} in {root}: {(done.stderr or done.stdout).strip()[-300:]}"
        )
    return done.stdout.strip()


def workflow_id(root: Path, remote: str, graph: str, started_at: str) -> str:
    """One loop's id: the repository, its graph and its start."""
    digest = hashlib.sha256(f"{remote}\0{graph}\0{started_at}".encode()).hexdigest()[:12]
    return f"loopdeck-{safe_name(root.name)[:30]}-{digest}"


def run(args: argparse.Namespace, ws: Workspace, limits: dict[str, int] | None = None) -> int:
    """`loopdeck run --engine temporal`: start the loop's workflow (or attach to it), then
    follow its journal until it ends (`--detach`: return at once)."""
    # Other machines run what this loop names: starting one is a person's act, never an agent's.
    refuse_inside_agent("`run --engine temporal` (a loop whose commands run on other machines)")
    _check_run_options(args)
    root = ws.root
    branch, remote = _repository(args, root)
    graph, rel, tasks = _graph(args, root)
    for command in [*(args.verify or []), *([args.audit] if args.audit else [])]:
        verify.check(command, args.verify_allow or (), cwd=root)  # refused here, not on each worker
    agent_cmd = agents.resolve(args.agent or agent.DEFAULT_AGENT, args.agent_format).command
    others = _other_agents(args)
    for command in (agent_cmd, *others.values()):
        try:
            agent.check_template(command)
        except agent.AgentCommandRefused as exc:
            raise LoopdeckError(str(exc)) from None
    target = target_of(args, None)
    started_at, wf_id = _workflow(ws, target, root, remote, rel or str(graph), branch)
    place = _Place(remote, branch, rel or str(graph), rel, started_at, wf_id, agent_cmd)
    spec = replace(
        _spec(args, limits, target, tasks, place),
        audit_agent=others.get("audit_agent"),
        fallback_agent=others.get("fallback_agent"),
    )

    async def begin() -> bool:
        client = await tc.connect(target)
        handle, started = await tc.start(client, target, spec)
        if not started:
            await handle.signal("graph", spec.tasks)  # the graph as it is here now
        return started

    started = tc.call(begin)
    tc.save(ws.private_dir, target, wf_id, started_at)
    verb = "started" if started else "attached to"
    print(
        f"loopdeck: loop {wf_id} {verb} on {target.address} ({len(tasks)} tasks, queue {target.task_queue}); "
        f"run `loopdeck worker --address {target.address} --task-queue {target.task_queue}` on each machine",
        flush=True,
    )
    if getattr(args, "detach", False):
        return 0
    return follow(target, wf_id)


def _check_run_options(args: argparse.Namespace) -> None:
    if not args.workers or not 1 <= args.workers <= MAX_WORKERS:
        raise LoopdeckError(
            f"--engine temporal needs --workers N (1 to {MAX_WORKERS}): how many turns at once"
        )
    if args.audit and args.audit_agent:
        raise LoopdeckError("give --audit or --audit-agent, not both")


def _other_agents(args: argparse.Namespace) -> dict[str, str]:
    """The audit agent and the fallback as the commands a worker runs (a CLI's name means its
    default command): what each worker accepts with its own `--agent`."""
    found = {}
    if args.audit_agent:
        found["audit_agent"] = agents.resolve(args.audit_agent, None).command
    if args.fallback_agent:
        found["fallback_agent"] = agents.resolve(args.fallback_agent, args.fallback_agent_format).command
    return found


def _repository(args: argparse.Namespace, root: Path) -> tuple[str, str]:
    """The branch the tasks merge into and the shared remote every worker clones."""
    if not worktrees.is_repo(root):
        raise LoopdeckError(
            f"--engine temporal needs a git repository with a shared remote; {root} is not one"
        )
    branch = worktrees.current_branch(root)
    if branch is None:
        raise LoopdeckError(f"{root} is on a detached HEAD: check out the branch the tasks should merge into")
    remote = args.remote or _git_out(root, "remote", "get-url", "origin")
    problem = git.remote_problem(remote)
    if problem is not None:
        raise LoopdeckError(f"{problem} (--remote URL, or the remote origin of {root})")
    if git.has_credentials(remote):
        raise LoopdeckError(
            "the remote's URL holds a password or token, which would travel to every worker in the "
            "loop's history; give each worker machine its own git credentials (a credential helper) "
            "and a URL without them (--remote URL)"
        )
    return branch, remote


def _graph(args: argparse.Namespace, root: Path) -> tuple[Path, str, list[Any]]:
    """The task graph, its path inside the repository when git tracks it there (the workers
    read it from their clone), else "", and its tasks."""
    graph_arg = args.graph or args.task_list
    if not graph_arg:
        raise LoopdeckError("--engine temporal needs a task graph: --graph PATH (folder or .json/.yaml)")
    graph = Path(str(graph_arg)).expanduser()
    graph = (graph if graph.is_absolute() else Path.cwd() / graph).resolve()
    tasks = taskgraph.read(graph)
    rel = ""
    if graph.is_relative_to(root.resolve()):
        candidate = str(graph.relative_to(root.resolve()))
        tracked = subprocess.run(
            git_argv("ls-files", "--error-unmatch", "--", candidate, literal=True),
            cwd=root,
            capture_output=True,
            check=False,
        )
        rel = candidate if tracked.returncode == 0 else ""
    return graph, rel, tasks


def _workflow(
    ws: Workspace, target: tc.Target, root: Path, remote: str, graph: str, branch: str
) -> tuple[str, str]:
    """The loop's start and workflow id: the recorded loop's while it still runs on that
    server, else a new loop's."""
    rec = recorded(ws)
    attach = rec is not None and rec.get("address") == target.address and bool(rec.get("workflow_id"))
    if attach and rec is not None:
        recorded_id = str(rec["workflow_id"])

        async def still_running() -> bool:
            return await tc.running(await tc.connect(target), recorded_id)

        attach = tc.call(still_running)
    if attach and rec is not None:
        return str(rec["started_at"]), str(rec["workflow_id"])
    # A new loop (none recorded, or the recorded one ended): its own start, id and branch
    # names, so no task branch or turn record of an earlier loop is taken for its work; the
    # loop's branch pushed first, where every worker starts from.
    started_at = iso_s(utcnow())
    wf_id = workflow_id(root, remote, graph, started_at)
    publish(root, remote, branch)
    return started_at, wf_id


class _Place(NamedTuple):
    """Where a new loop on Temporal runs: settled by `run` before its workflow input is made."""

    remote: str
    branch: str
    graph: str
    """The graph as the board records it."""
    rel: str
    """The graph's path in the repository, "" when git does not track it there."""
    started_at: str
    workflow_id: str
    agent: str


def _spec(
    args: argparse.Namespace,
    limits: dict[str, int] | None,
    target: tc.Target,
    tasks: list[Any],
    place: _Place,
) -> LoopSpec:
    """The workflow's input: the new loop's state (made as every driver's is), its graph, and
    what each turn needs."""
    # The workflow's input is kept in the server's history and reaches every worker: a token
    # pasted into the prompt belongs in the agents' environment, not there.
    prompt = redact(" ".join(args.prompt).strip() or "Work through the task graph")
    request = Request(
        prompt,
        max_iterations=args.max_iterations if args.max_iterations is not None else 100,
        check_tasks=False,
        check_github=False,
        verify=list(args.verify or []),
        verify_allow=list(args.verify_allow or []),
        limits=dict(limits or {}),
    )
    state = new_state(request, started_at=place.started_at, driver="temporal")
    audit_agent = agents.resolve(args.audit_agent, None).command if args.audit_agent else None
    board = Board(
        graph=place.graph,
        capacity=args.workers,
        audit=args.audit or audit_agent,
        audit_kind="agent" if audit_agent else "check",
        isolation=WORKTREE,
        loop_branch=place.branch,
        strategy="merge",
    )
    return LoopSpec(
        workflow_id=place.workflow_id,
        state=protocol.state_json(keep(state, board)),
        tasks=[protocol.task_json(t) for t in tasks],
        remote=place.remote,
        loop_branch=place.branch,
        loop_name=worktrees.loop_id(place.started_at),
        graph=place.rel,
        agent=place.agent,
        agent_format=args.agent_format,
        task_queue=target.task_queue,
        turn_timeout_s=float(args.iteration_timeout or 1800.0),
        heartbeat_timeout_s=float(getattr(args, "heartbeat_timeout", None) or 30.0),
        audit=args.audit,
        fallback_format=getattr(args, "fallback_agent_format", None),
        verify_allow=list(args.verify_allow or []),
        idle_s=float(getattr(args, "idle", None) or 10.0),
    )


def publish(root: Path, remote: str, branch: str) -> None:
    """The loop's branch on the remote is where every worker starts from: pushed there first
    (a fast-forward; a remote that has moved on must be pulled first)."""
    pushed = subprocess.run(
        git_argv("push", "--quiet", "--", remote, f"HEAD:refs/heads/{branch}"),
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    if pushed.returncode != 0:
        lines = [line.strip() for line in (pushed.stderr or pushed.stdout).splitlines()]
        said = [line for line in lines if line.startswith(("!", "error:", "fatal:"))] or ["refused"]
        raise LoopdeckError(
            f"the loop's branch {branch} could not be pushed to {remote} ({said[0]}); "
            "the workers start from it: `git pull` (the remote has work this clone lacks), then run again"
        )


def follow(target: tc.Target, wf_id: str) -> int:
    """Print the loop's journal as it grows, until the loop ends; Ctrl+C leaves it running."""

    async def work() -> int:
        client = await tc.connect(target)
        seen = 0
        while True:
            snap = await tc.read(client, wf_id, seen)
            for event in view.events(snap):
                print(render_line(event), flush=True)
            seen = int(snap.get("events_total") or seen)
            ended = snap.get("ended")
            if ended:
                for line in view.ending_lines(ended):
                    print(line, flush=True)
                return 0 if ended.get("outcome") in ("completed", "stopped") else 1
            await asyncio.sleep(FOLLOW_EVERY_S)

    try:
        return tc.call(work)
    except KeyboardInterrupt:
        print(
            f"loopdeck: left the loop {wf_id} running "
            f"(`loopdeck status --temporal {target.address} --workflow {wf_id}`)"
        )
        return 130


# --- worker and dev server ------------------------------------------------------------------


def worker(args: argparse.Namespace) -> int:
    if args.concurrency < 1:
        raise LoopdeckError("--concurrency takes 1 or more")
    if args.max_turns is not None and args.max_turns < 1:
        raise LoopdeckError("--max-turns takes 1 or more")
    if not args.heartbeat > 0:
        raise LoopdeckError(f"--heartbeat takes a number of seconds above 0, not {args.heartbeat}")

    chosen = tuple(agents.resolve(a, None).command for a in args.agent or ())
    saved = config.read_user().values
    mode, net, names = sandbox.settings(args.sandbox, args.sandbox_net, args.sandbox_env, saved)
    options = tworker.WorkerOptions(
        target=target_of(args),
        work_dir=Path(args.work_dir).expanduser().resolve() if args.work_dir else tworker.default_work_dir(),
        agents=chosen,
        allow=tuple(args.verify_allow or ()),
        concurrency=args.concurrency,
        max_turns=args.max_turns,
        heartbeat_s=args.heartbeat,
        sandbox=mode,
        sandbox_net=net,
        sandbox_env=names,
    )
    return tworker.run(options)


def dev(args: argparse.Namespace) -> int:
    db = Path(args.db_filename).expanduser().resolve()
    db.parent.mkdir(parents=True, exist_ok=True)
    argv = tdev.argv(db, args.port, args.ip, ui=args.ui)
    print(
        f"loopdeck: the Temporal dev server on {args.ip}:{args.port}, its database in {db} (Ctrl+C stops it)",
        flush=True,
    )
    os.execv(argv[0], argv)  # the server itself from here on: signals reach it, nothing is left behind
    return 0  # pragma: no cover - execv does not return
