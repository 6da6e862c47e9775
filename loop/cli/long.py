"""`loopdeck run`: the external runner, a fresh agent process per iteration (`--workers N`:
several, `loop.cli.parallel`; `--engine temporal`: a loop on a Temporal server). What the
runner uses is settled here in one order: the command line, else what the loop recorded, else
the saved defaults, else the built-in value."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from loop import agents
from loop.cli import temporal
from loop.cli.options import (
    LOOP_KEYS,
    SANDBOX_KEYS,
    check_retries,
    check_timeout,
    config_confirmer,
    fill,
    limits_from,
    sandbox_from,
    workspace_of,
)
from loop.cli.parallel import check_workers, recorded_workers, run_parallel
from loop.cli.starting import request_from
from loop.core.errors import LoopdeckError
from loop.core.model import Settings
from loop.core.policy import named
from loop.drivers import defaults, preflight
from loop.drivers.runner import Options, Runner
from loop.drivers.start import check_max_iterations, check_promise, new_state
from loop.processes import agent
from loop.store.control import end_offset
from loop.store.paths import Workspace
from loop.store.proc import alive
from loop.store.state import LoopState, StateStore
from loop.trust.person import refuse_inside_agent

RUNNER_KEYS = ("agent", "fallback_agent", "iteration_timeout", "retries")
"""Saved defaults that are the runner's options (recorded with the loop once it ran)."""


def cmd_run(args: argparse.Namespace) -> int:
    if args.yes:
        refuse_inside_agent("`--yes`")
    ws = workspace_of(args)
    if getattr(args, "engine", "local") == "temporal":
        return int(temporal.backend().run(args, ws, limits_from(args)))
    existing = StateStore(ws).read()
    prompt = " ".join(args.prompt).strip()
    options = runner_options(args, ws, existing, prompt)
    driven = existing is not None and not named(existing.driver).in_session and bool(alive(existing.pid))
    if existing is not None and prompt and prompt != existing.prompt and not driven:  # else: refused below
        print(
            f"loopdeck: continuing the loop in {ws.root}; the PROMPT given is ignored "
            "(`loopdeck start --force` starts anew)",
            file=sys.stderr,
        )
    if existing is not None or prompt:  # else "no loop" is the one thing to say
        check_workers(args, ws, existing)
        _preflight(args, ws, existing, options)
    limits = limits_from(args)

    def create() -> LoopState:
        if not prompt:
            raise LoopdeckError(f"no loop in {ws.root}: `loopdeck run PROMPT` starts one")
        return new_state(request_from(args, prompt, limits=limits), control_offset=end_offset(ws))

    runner = Runner(ws, options, settings=_new_settings(args, existing, limits))
    if args.workers is None and existing is not None:
        args.workers = recorded_workers(existing)  # a loop of workers goes on as one (`resume` too)
    if args.workers is None:
        if getattr(args, "pr", False):
            raise LoopdeckError("--pr works with --workers N: each task of the graph becomes a pull request")
        return runner.run(create)
    if args.fallback_agent and args.workers > 1:
        raise LoopdeckError(
            "--fallback-agent works with one agent at a time (the runner), not with --workers"
        )
    return run_parallel(args, ws, options, runner, existing, create)


def runner_options(
    args: argparse.Namespace, ws: Workspace, existing: LoopState | None, prompt: str
) -> Options:
    """The runner's options: each from the command line, else as the loop recorded it, else
    from the saved defaults, else built in; checked before anything runs."""
    recorded = existing.extra.get("runner", {}) if existing is not None else {}
    if not isinstance(recorded, dict):
        recorded = {}
    saved = _saved_defaults(args, ws, recorded, new_loop=existing is None and bool(prompt))

    def pick(name: str, given: Any, default: Any) -> Any:
        if given is not None:
            return given
        kept = recorded.get(name)
        return kept if kept is not None else saved.get(name, default)

    def where(name: str, option: str, given: Any) -> str:
        if given is not None:
            return option
        return f"{ws.state} (runner.{name})" if recorded.get(name) is not None else saved.where(name)

    chosen, fallback = _agents(args, saved)
    if args.max_iterations is not None:
        check_max_iterations(args.max_iterations)
    check_promise(args.completion_promise)
    timeout = check_timeout(
        pick("iteration_timeout", args.iteration_timeout, 1800.0),
        where("iteration_timeout", "--iteration-timeout", args.iteration_timeout),
    )
    retries = check_retries(pick("retries", args.retries, 2), where("retries", "--retries", args.retries))
    boxed, net, names = sandbox_from(args, saved)
    options = Options(
        agent=pick("agent", chosen, agent.DEFAULT_AGENT),
        agent_format=_format(args.agent_format, args.agent, recorded.get("agent_format")),
        fallback_agent=pick("fallback_agent", fallback, None),
        fallback_format=_format(
            args.fallback_agent_format, args.fallback_agent, recorded.get("fallback_format")
        ),
        iteration_timeout=timeout,
        retries=retries,
        commit=bool(pick("commit", True if args.commit else None, False)),
        headless=args.headless,
        agent_given=args.agent is not None or "agent" in saved.values,
        fallback_given=args.fallback_agent is not None or "fallback_agent" in saved.values,
        trusted=args.yes,
        confirm=_ask if sys.stdin.isatty() and not args.headless else None,
        sandbox=boxed,
        sandbox_net=net,
        sandbox_env=names,
    )
    try:  # refused before the loop starts, not per attempt
        agent.check_template(options.agent)
        if options.fallback_agent:
            agent.check_template(options.fallback_agent)
    except agent.AgentCommandRefused as exc:
        raise LoopdeckError(str(exc)) from None
    return options


def _agents(args: argparse.Namespace, saved: Any) -> tuple[str | None, str | None]:
    """The agent and the fallback given or saved, as commands. `--agent codex` is Codex's
    default command, recorded as that command (what runs is what a person confirms); a full
    command is kept as given. The format goes with the agent."""
    chosen = agents.resolve(args.agent, args.agent_format).command if args.agent else None
    fallback = agents.resolve(args.fallback_agent, None).command if args.fallback_agent else None
    if chosen is None and saved.get("agent"):
        chosen = agents.resolve(saved.get("agent"), args.agent_format).command
    if fallback is None and saved.get("fallback_agent"):
        fallback = agents.resolve(saved.get("fallback_agent"), None).command
    return chosen, fallback


def _preflight(args: argparse.Namespace, ws: Workspace, existing: LoopState | None, options: Options) -> None:
    """What the loop needs is there (the agents, its task file, GitHub, the notification
    targets), before anything is written."""
    task_file = existing.task_file if existing is not None else args.task_file
    project = existing.github_project_id if existing is not None and existing.check_github else None
    preflight.require(
        ws.root,
        agent=options.agent,
        fallback_agent=options.fallback_agent,
        task_file=task_file,
        github_project=project,
        notify=list(args.notify or (existing.notify if existing is not None else [])),
    )


def _new_settings(args: argparse.Namespace, existing: LoopState | None, limits: dict[str, int]) -> Settings:
    """An existing loop's settings the command line changes (a new loop takes them all)."""
    if existing is None:
        return Settings()
    return Settings(
        max_iterations=args.max_iterations,
        limits=limits or None,
        notify=list(args.notify) if args.notify else None,
        verify=list(args.verify) if args.verify else None,
        verify_allow=list(args.verify_allow) if args.verify_allow else None,
    )


def _saved_defaults(args: argparse.Namespace, ws: Workspace, recorded: dict[str, Any], new_loop: bool) -> Any:
    """The saved defaults `run` uses: the runner's options neither given nor recorded with the
    loop, and, for a new loop, its settings not given; those settings are filled into `args`
    (the command line wins). A workspace file's values need a person's confirmation: at the
    terminal, or `--yes`."""
    wanted = [k for k in RUNNER_KEYS if getattr(args, k) is None and recorded.get(k) is None]
    wanted += [k for k in SANDBOX_KEYS if getattr(args, k, None) is None]  # never kept with the loop
    if new_loop:
        wanted += [k for k in LOOP_KEYS if getattr(args, k) is None]

    saved = defaults.settle(ws, wanted, confirm=config_confirmer(args), by="run")
    if new_loop:
        fill(args, saved, LOOP_KEYS)
    return saved


def _format(given: str | None, agent_given: str | None, recorded: Any) -> str | None:
    """The output format for an agent: as given; else the recorded one, unless a new agent was
    given (its program name decides); a recorded value loopdeck does not know is dropped."""
    if given is not None:
        return given
    if agent_given is None and isinstance(recorded, str) and recorded in agents.FORMATS:
        return recorded
    return None


def _ask(commands: list[str]) -> bool:
    """Ask the person at the terminal to confirm commands this machine never chose."""
    print("The loop's state file names commands nobody on this machine chose:", file=sys.stderr)
    for command in commands:
        print(f"  {command}", file=sys.stderr)
    try:
        return input("Run them? [y/N] ").strip().lower() in ("y", "yes")
    except EOFError:
        return False
