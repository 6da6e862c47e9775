"""The long-running verb `loopdeck run`, apart from `loop.cli` so that the quick verbs (and the
Stop hook) never load the runner. The monitor's verbs (`tui`, `demo`) live in `tui.cli`: `loop`
never imports the monitor."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from loop.cli.options import LOOP_KEYS, SANDBOX_KEYS
from loop.core.errors import LoopdeckError
from loop.store.paths import Workspace, find_workspace

# --- run -----------------------------------------------------------------------------------


def cmd_run(args: argparse.Namespace) -> int:
    from loop.core.model import Settings
    from loop.drivers.runner import Options, Runner
    from loop.processes import agent
    from loop.store.state import LoopState, StateStore

    if args.yes:
        from loop.trust.person import refuse_inside_agent

        refuse_inside_agent("`--yes`")
    ws = Workspace(Path(args.workspace).resolve()) if args.workspace else find_workspace()
    if getattr(args, "engine", "local") == "temporal":
        from loop.cli import temporal
        from loop.cli.options import limits_from

        return int(temporal.backend().run(args, ws, limits_from(args)))
    existing = StateStore(ws).read()
    recorded = existing.extra.get("runner", {}) if existing is not None else {}
    if not isinstance(recorded, dict):
        recorded = {}

    prompt = " ".join(args.prompt).strip()
    saved = _saved_defaults(args, ws, recorded, new_loop=existing is None and bool(prompt))

    def pick(name: str, given: Any, default: Any) -> Any:
        if given is not None:
            return given
        kept = recorded.get(name)
        if kept is not None:
            return kept
        return saved.get(name, default)

    from loop import agents

    # `--agent codex` is Codex's default command, recorded as that command (what runs is what a
    # person confirms); a full command is kept as given. The format goes with the agent.
    chosen = agents.resolve(args.agent, args.agent_format).command if args.agent else None
    fallback = agents.resolve(args.fallback_agent, None).command if args.fallback_agent else None
    if chosen is None and saved.get("agent"):
        chosen = agents.resolve(saved.get("agent"), args.agent_format).command
    if fallback is None and saved.get("fallback_agent"):
        fallback = agents.resolve(saved.get("fallback_agent"), None).command
    from loop.cli.options import check_retries, check_timeout
    from loop.drivers.start import check_max_iterations, check_promise

    if args.max_iterations is not None:
        check_max_iterations(args.max_iterations)
    check_promise(args.completion_promise)

    def where(name: str, option: str, given: Any) -> str:
        if given is not None:
            return option
        return f"{ws.state} (runner.{name})" if recorded.get(name) is not None else saved.where(name)

    timeout = check_timeout(
        pick("iteration_timeout", args.iteration_timeout, 1800.0),
        where("iteration_timeout", "--iteration-timeout", args.iteration_timeout),
    )
    retries = check_retries(pick("retries", args.retries, 2), where("retries", "--retries", args.retries))
    from loop.cli.options import sandbox_from

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
    from loop.store.proc import alive

    driven = existing is not None and existing.driver == "runner" and bool(alive(existing.pid))
    if existing is not None and prompt and prompt != existing.prompt and not driven:  # else: refused below
        print(
            f"loopdeck: continuing the loop in {ws.root}; the PROMPT given is ignored "
            "(`loopdeck start --force` starts anew)",
            file=sys.stderr,
        )

    def create() -> LoopState:
        if not prompt:
            raise LoopdeckError(f"no loop in {ws.root}: `loopdeck run PROMPT` starts one")
        from loop.store.control import end_offset

        control_offset = end_offset(ws)
        state = LoopState.new(
            prompt,
            max_iterations=args.max_iterations if args.max_iterations is not None else 100,
            completion_promise=args.completion_promise or "null",
            task_file=args.task_file or "null",
            check_tasks=not args.no_tasks,
            check_github=not args.no_github,
            verify=list(args.verify or []),
            control_offset=control_offset,
            limits=limits,
            notify=list(args.notify or []),
        )
        if args.verify_allow:
            state.extra["verify_allow"] = list(args.verify_allow)
        return state

    from loop.cli.options import limits_from
    from loop.drivers import preflight  # before anything is written

    task_file = existing.task_file if existing is not None else args.task_file
    project = existing.github_project_id if existing is not None and existing.check_github else None
    if existing is not None or prompt:  # else "no loop" is the one thing to say
        preflight.require(
            ws.root,
            agent=options.agent,
            fallback_agent=options.fallback_agent,
            task_file=task_file,
            github_project=project,
            notify=list(args.notify or (existing.notify if existing is not None else [])),
        )

    limits = limits_from(args)
    settings = Settings(
        max_iterations=args.max_iterations if existing is not None else None,
        limits=limits if existing is not None and limits else None,
        notify=list(args.notify) if existing is not None and args.notify else None,
        verify=list(args.verify) if existing is not None and args.verify else None,
        verify_allow=list(args.verify_allow) if existing is not None and args.verify_allow else None,
    )
    runner = Runner(ws, options, settings=settings)
    if args.workers is None and existing is not None:
        from loop.cli.parallel import recorded_workers

        args.workers = recorded_workers(existing)  # a loop of workers goes on as one (`resume` too)
    if args.workers is not None:
        from loop.cli.parallel import run_parallel

        if args.fallback_agent and args.workers > 1:
            raise LoopdeckError(
                "--fallback-agent works with one agent at a time (the runner), not with --workers"
            )

        return run_parallel(args, ws, options, runner, existing, create)
    return runner.run(create)


RUNNER_KEYS = ("agent", "fallback_agent", "iteration_timeout", "retries")
"""Saved defaults that are the runner's options (recorded with the loop once it ran)."""


def _saved_defaults(args: argparse.Namespace, ws: Workspace, recorded: dict[str, Any], new_loop: bool) -> Any:
    """The saved defaults `run` uses: the runner's options neither given nor recorded with the
    loop, and, for a new loop, its settings not given; those settings are filled into `args`
    (the command line wins). A workspace file's values need a person's confirmation: at the
    terminal, or `--yes`."""
    from loop.drivers import defaults

    wanted = [k for k in RUNNER_KEYS if getattr(args, k) is None and recorded.get(k) is None]
    wanted += [k for k in SANDBOX_KEYS if getattr(args, k, None) is None]  # never kept with the loop
    if new_loop:
        wanted += [k for k in LOOP_KEYS if getattr(args, k) is None]

    def confirm(lines: list[str], shown: str) -> bool:
        if args.yes:
            return True
        if args.headless or not sys.stdin.isatty():
            return False
        return _ask_config(lines, shown)

    saved = defaults.settle(ws, wanted, confirm=confirm, by="run")
    if new_loop:
        _fill(args, saved, LOOP_KEYS)
    return saved


def _fill(args: argparse.Namespace, saved: Any, keys: tuple[str, ...]) -> None:
    """Put the saved values into the options the command line left unset, each checked as the
    option would be (a notification target that cannot work is named with its file)."""
    from loop.drivers.notify import check_target

    for key in keys:
        value = saved.get(key)
        if value is None or getattr(args, key, None) is not None:
            continue
        if key == "notify":
            for target in value:
                problem = check_target(target)
                if problem:
                    raise LoopdeckError(f"{saved.where(key)}: {problem}")
        setattr(args, key, list(value) if isinstance(value, list) else value)


def _ask_config(lines: list[str], shown: str) -> bool:
    """Ask the person at the terminal to confirm a workspace file's saved values."""
    print(f"{shown} names values nobody on this machine confirmed:", file=sys.stderr)
    for line in lines:
        print(f"  {line}", file=sys.stderr)
    try:
        return input("Use them? [y/N] ").strip().lower() in ("y", "yes")
    except EOFError:
        return False


def _format(given: str | None, agent_given: str | None, recorded: Any) -> str | None:
    """The output format for an agent: as given; else the recorded one, unless a new agent was
    given (its program name decides); a recorded value loopdeck does not know is dropped."""
    from loop import agents

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


# --- resume --------------------------------------------------------------------------------


def _asker(args: argparse.Namespace) -> Any:
    """How to put a question: `--yes`/`--no` answer it for scripts; a terminal asks a person."""

    def ask(question: str, choices: tuple[str, ...] = ("y", "n")) -> str:
        print(question, flush=True)
        if args.yes:
            return choices[0]
        if args.no:
            return choices[-1]
        if not sys.stdin.isatty():
            raise LoopdeckError("resume needs an answer: pass --yes or --no (input is not a terminal)")
        answer = input("> ").strip().lower()
        return answer[:1] if answer else choices[0]

    return ask


def cmd_resume(args: argparse.Namespace) -> int:
    """`loopdeck resume`: a paused loop with a live driver gets the command; any other
    interrupted loop goes through the resumption flow (see `loop.resume`)."""
    import json
    import time

    from loop.drivers import classify, resume
    from loop.store import control
    from loop.store.journal import Journal
    from loop.trust.person import refuse_inside_agent

    refuse_inside_agent("`loopdeck resume` (it lifts a wait for a person)")
    ws = Workspace(Path(args.workspace).resolve()) if args.workspace else find_workspace()
    from loop.cli import temporal

    if args.worker or temporal.wanted(args, ws):
        # one parallel worker, or a loop on Temporal: a command for the running loop
        if args.no:
            whom = f"worker {args.worker}" if args.worker else "the loop"
            print(f"loopdeck: would send `resume` to {whom}; nothing sent (--no)")
            return 0
        from loop.cli.steer import steer

        return steer("resume", args)
    ask = _asker(args)
    found = classify.read(ws)
    if found.kind == "corrupt":
        if not _recover(ws, found, args, ask):
            return 0
        found = classify.read(ws)
    if found.kind == "none":
        from loop.store.archive import latest

        last = latest(ws)
        where = f"; the last one is archived in {last} (`loopdeck status` shows it)" if last else ""
        raise LoopdeckError(f"no loop in {ws.root} to resume{where}")
    state = found.state
    assert state is not None
    if found.kind == "ended" and state.status == "completed":
        folder = resume.finish_completed(ws)  # completed, its driver killed before archiving it
        if folder is not None:
            print(f"loopdeck: the loop had completed; archived in {folder} (`loopdeck status` shows it)")
            return 0
    if found.kind == "ended":
        raise LoopdeckError(
            f"the loop in {ws.root} has {state.status}; `loopdeck run` continues a stopped loop, "
            "`loopdeck start --force` starts a new one"
        )
    from loop.core import engine

    journal = Journal(ws.journal)
    from loop.trust import key

    queued, _bad, _end = control.read_unapplied(ws, state.control_offset, journal, key.reader(ws.root))
    held = engine.held_at_limit(state, queued)
    if held is not None:
        raise LoopdeckError(f"not resumed: {held} (in {ws.root})")
    if found.kind == "live" or (found.kind in ("paused", "waiting") and found.driver_alive):
        # Its driver is there to apply a command (a running loop: it lifts a queued pause).
        if found.kind == "waiting":
            print(found.waiting_reason)
        if args.no:  # only say what would be done: `--no` never queues anything
            if state.driver == "runner":
                who = f"the loop is {state.status} and its runner (pid {state.pid}) is alive"
                then = "it applies within a second"
            else:
                who, then = f"the loop is {state.status}", "the session's next Stop applies"
            print(f"loopdeck: {who}: `loopdeck resume` would queue a resume {then}; nothing sent (--no)")
            return 0
        command_id = resume.send_resume(ws, "cli", args.reason or "loopdeck resume", state.iteration)
        if state.driver == "runner":
            print(f"loopdeck: resume queued (id {command_id}); the runner (pid {state.pid}) applies it")
        else:
            print(
                f"loopdeck: resume queued (id {command_id}); it applies at the session's next Stop: "
                "say `continue` in the Claude Code session"
            )
        if args.wait:
            deadline = time.monotonic() + args.wait
            while time.monotonic() < deadline:
                if command_id in control.applied_ids(journal):
                    print("loopdeck: resume applied")
                    return 0
                time.sleep(0.1)
            raise LoopdeckError(f"resume was not applied within {args.wait:g} s; it stays queued")
        return 0
    question = found.question or "Resume? [Y/n]"
    if ask(question) != "y":
        print("loopdeck: left as it is")
        return 0
    from loop import trust

    pending = trust.unconfirmed(ws, state)
    if pending:
        # Whoever drives it next (a restarted runner, the next session's Stop) runs what it
        # names: the person confirms that first (`--yes` does).
        print("The loop names what nobody on this machine confirmed:")
        for line in pending:
            print(f"  {line}")
        if ask("Confirm it and resume? [Y/n]") != "y":
            print("loopdeck: left as it is")
            return 0
        from loop.drivers.start import confirm

        for line in confirm(ws, state, "resume"):
            print(f"loopdeck: {line}")
    changes = resume.uncommitted(ws)
    said = None
    if changes:
        print(resume.describe_changes(changes))
        choice = args.git
        if choice is None:
            words = "Continue with them [c], commit them [m] or stash them [s]? [C/m/s]"
            letter = ask(words, ("c", "m", "s"))
            choice = {"c": "continue", "m": "commit", "s": "stash"}.get(letter, "continue")
        said = resume.handle_git(ws, choice, state)
        print(f"loopdeck: {said}")
    seen, new = resume.carry_out(ws, found.kind)
    if new is None:
        raise LoopdeckError(f"the loop changed meanwhile (now {seen.kind}); run `loopdeck resume` again")
    print(f"loopdeck: loop resumed at iteration {new.iteration}" if new.status != "completed" else "")
    for line in resume.next_steps(ws, new):
        print(f"loopdeck: {line}")
    if new.status == "completed":
        from loop.store.archive import latest
        from loop.views.summary import archived_lines

        last = latest(ws)
        if last is not None:
            record = json.loads((last / "summary.json").read_text())
            for line in archived_lines(record):
                print(line)
            print(f"Archive:     {last}")
    return 0


def _recover(ws: Workspace, found: Any, args: argparse.Namespace, ask: Any) -> bool:
    """A corrupt state: restore the backup or rebuild from the journal, as the person
    chooses; the corrupt file is kept as `….corrupt-<time>`. False when they declined."""
    from loop.core.timeutil import utcnow
    from loop.drivers import writer

    print(f"loopdeck: {found.error}")
    has_backup = ws.backup.exists() and writer.backup_of_this_loop(ws)
    if ws.backup.exists() and not has_backup:
        print("loopdeck: the backup is of an earlier loop, not this one: it is not offered")
    source = args.source
    if source is None:
        default = "b" if has_backup else "j"
        options = ("b", "j", "n") if has_backup else ("j", "n")
        words = "Restore the backup [b], rebuild from the journal [j] or leave it [n]?"
        if not has_backup:
            words = "There is no backup. Rebuild the state from the journal [j] or leave it [n]?"
        letter = ask(words, options) if not args.no else "n"
        if letter not in options:
            letter = default
        if letter == "n":
            print("loopdeck: left as it is")
            return False
        source = "backup" if letter == "b" else "journal"
    if source == "backup":
        state = writer.restore_backup(ws, utcnow())
        print(f"loopdeck: the backup is restored (iteration {state.iteration}, {state.status})")
    else:
        state, report = writer.rebuild_from_journal(ws, utcnow())
        where = f"iteration {state.iteration}, {state.status}"
        print(f"loopdeck: the state is rebuilt from the journal ({where})")
        for line in report:
            print(f"  {line}")
    print("loopdeck: the corrupt file is kept beside it (….corrupt-<time>)")
    return True
