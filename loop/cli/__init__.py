"""The `loopdeck` command.

argparse only, and every verb imports what it needs inside its own function: `loopdeck hook
stop` runs on every turn of the agent and must not pay for Textual or GitPython.

Exit status: 0 done, 1 failed (the message on stderr), 2 usage.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from loop.cli.options import LOOP_KEYS, add_limit_options, add_sandbox_options, limits_from
from loop.cli.steer import steer
from loop.core.errors import LoopdeckError, os_problem
from loop.store.paths import Workspace, find_workspace

if TYPE_CHECKING:  # annotations only
    from loop.core.model import LoopState

STEER_HELP = {
    "pause": "pause the loop: the agent may stop at its next turn; the state is kept",
    "skip": "skip the current task (or the current verification loop)",
    "complete": "force completion now and archive the loop",
    "stop": "stop the loop after the current iteration",
}


def _workspace(args: argparse.Namespace) -> Workspace:
    if args.workspace is not None:
        return Workspace(Path(args.workspace).resolve())
    return find_workspace()


# --- start ---------------------------------------------------------------------------------


def cmd_start(args: argparse.Namespace) -> int:
    from loop.drivers.start import Request, start_loop
    from loop.trust.person import refuse_inside_agent

    refuse_inside_agent("`loopdeck start` (in a session, type /orchestrator-loop)")
    ws = Workspace(Path(args.workspace).resolve()) if args.workspace else Workspace(Path.cwd())
    if " ".join(args.prompt).strip():  # else the one thing to say is that a PROMPT is needed
        _start_defaults(args, ws)
    request = Request(
        " ".join(args.prompt),
        max_iterations=args.max_iterations if args.max_iterations is not None else 100,
        completion_promise=args.completion_promise,
        task_file=args.task_file,
        check_tasks=not args.no_tasks,
        check_github=not args.no_github,
        github_project=args.github_project,
        verify=list(args.verify or []),
        verify_allow=list(args.verify_allow or []),
        limits=limits_from(args),
        notify=list(args.notify or []),
        force=args.force,
    )
    _state, lines = start_loop(ws, request, "start")
    for line in lines:
        print(f"loopdeck: {line}" if not line.startswith("To finish") else line)
    return 0


def _start_defaults(args: argparse.Namespace, ws: Workspace) -> None:
    """Fill the options `start` was not given from the saved defaults (the command line wins);
    a workspace file's values are confirmed at the terminal first."""
    from loop.cli.long import _ask_config, _fill
    from loop.drivers import defaults

    wanted = [k for k in LOOP_KEYS if getattr(args, k) is None]
    confirm = _ask_config if sys.stdin.isatty() else None
    saved = defaults.settle(ws, wanted, confirm=confirm, by="start")
    _fill(args, saved, LOOP_KEYS)


# --- status --------------------------------------------------------------------------------


def cmd_status(args: argparse.Namespace) -> int:
    from loop import formats
    from loop.cli import temporal
    from loop.views.snapshot import read

    ws = _workspace(args)
    if temporal.wanted(args, ws):
        return int(temporal.backend().status(args, ws))
    if not args.json:
        from loop.core.visible import visible
        from loop.views.status_text import render

        code, lines, errors = render(ws)
        for line in lines:
            print(visible(line))
        for line in errors:
            print(f"loopdeck: {visible(line)}", file=sys.stderr)
        return code
    snap = read(ws)
    obj = snap.to_json()
    ours = obj["loop"]
    if snap.error is not None:  # listed like an unreadable neighbour: kind, file, problem
        ours = {
            "kind": formats.OURS,
            "state_file": str(ws.state),
            "status": "unreadable",
            "error": obj["error"],
        }
    obj["loops"] = formats.loops_json(ours, formats.detect(ws.root))
    print(json.dumps(obj, indent=2, ensure_ascii=False))
    if snap.error is not None:
        print(f"loopdeck: error: {snap.error.message}", file=sys.stderr)
        if ws.backup.exists():
            print(f"loopdeck: a backup of the last good state is in {ws.backup}", file=sys.stderr)
        return 1
    return 0


# --- sources -------------------------------------------------------------------------------


def cmd_sources(args: argparse.Namespace) -> int:
    from loop.core.model import replace
    from loop.core.visible import visible
    from loop.sources.aggregate import SourceConfig, check_all
    from loop.store.state import StateStore

    ws = _workspace(args)
    state = StateStore(ws).read()
    config = SourceConfig.from_state(
        ws,
        state,
        task_file=args.task_file,
        transcript=Path(args.transcript) if args.transcript else None,
        tasks_dir=Path(args.tasks_dir) if args.tasks_dir else None,
        session_id=args.session,
    )
    if args.no_github:
        config = replace(config, check_github=False)
    result = check_all(config)
    if args.json:
        print(json.dumps(result.to_json(), indent=2, ensure_ascii=False))
        return 0
    print(f"{'SOURCE':<14}{'PENDING':>8}{'IN PROG':>9}{'DONE':>7}  WHERE")
    for report in result.sources:
        if not report.enabled:
            where = f"off: {report.error}"
        elif not report.available:
            where = f"UNAVAILABLE: {report.error}"
        else:
            where = report.detail or ""
        counts = (
            f"{report.pending:>8}{report.in_progress:>9}{report.done:>7}"
            if report.available
            else f"{'-':>8}{'-':>9}{'-':>7}"
        )
        print(visible(f"{report.name:<14}{counts}  {where}"))
    print(
        f"\npending total: {result.pending_total}"
        + ("  (UNCERTAIN: a source is unavailable)" if result.uncertain else "")
    )
    for report in result.with_pending:
        for item in report.pending_items()[:5]:
            where = f" (line {item.line})" if item.line else ""
            print(visible(f"  {report.name}: [{item.status}] {item.title}{where}"))
    return 0


# --- steering ------------------------------------------------------------------------------


def _steer_cmd(kind: str) -> Callable[[argparse.Namespace], int]:
    return lambda args: steer(kind, args)


def _talk_cmd(kind: str) -> Callable[[argparse.Namespace], int]:
    def talk(args: argparse.Namespace) -> int:
        args.reason = " ".join(args.text).strip()
        return steer(kind, args)

    return talk


def cmd_set_max(args: argparse.Namespace) -> int:
    if args.n < 0:
        raise LoopdeckError("set-max-iterations takes 0 (no limit) or more")
    return steer("set-max-iterations", args, value=args.n)


# --- log -----------------------------------------------------------------------------------


def cmd_log(args: argparse.Namespace) -> int:
    from loop.store.journal import Journal, render_line

    ws = _workspace(args)
    from loop.cli import temporal

    if temporal.wanted(args, ws):
        return int(temporal.backend().log(args, ws))
    if not args.follow and not ws.journal.exists():  # with -f: it waits for a loop to start
        raise LoopdeckError(f"no loop in {ws.root} has a journal yet: `loopdeck run PROMPT` starts one")
    journal = Journal(ws.journal)
    result = journal.tail(args.n)
    for problem in result.problems:
        print(f"loopdeck: {ws.journal}: skipped {problem}", file=sys.stderr)
    if args.json and not args.follow:
        print(json.dumps({"events": [e.to_json() for e in result.events]}, ensure_ascii=False))
        return 0

    def show(events: Sequence[Any]) -> None:
        for event in events:
            line = json.dumps(event.to_json(), ensure_ascii=False) if args.json else render_line(event)
            print(line, flush=True)

    show(result.events)
    if not args.follow:
        return 0
    offset = result.offset
    try:
        while True:
            time.sleep(0.25)
            more = journal.read_from(offset)
            for problem in more.problems:
                print(f"loopdeck: {ws.journal}: skipped {problem}", file=sys.stderr)
            show(more.events)
            offset = more.offset
    except KeyboardInterrupt:
        return 0


def _verbs() -> Any:
    """The long-running verb (run), imported only when it is asked for."""
    from loop.cli import long as cli_long

    return cli_long


def _config_verb() -> Any:
    from loop.cli import config

    return config


def _doctor_verb() -> Any:
    from loop.cli import doctor

    return doctor


def _init_verb() -> Any:
    from loop.cli import init

    return init


def _completion_verb() -> Any:
    from loop.cli import completion

    return completion


# --- hook and install ----------------------------------------------------------------------


def cmd_trust(args: argparse.Namespace) -> int:
    """A person confirms a loop nobody on this machine started (or whose values changed): what
    it names is shown in full first, and nothing is confirmed inside an agent's session."""
    from loop import trust
    from loop.core.visible import visible
    from loop.store.state import StateStore
    from loop.trust.person import refuse_inside_agent

    refuse_inside_agent("`loopdeck trust`")
    ws = _workspace(args)
    state = StateStore(ws).read()
    if state is None:
        raise LoopdeckError(f"no loop in {ws.root}: nothing to confirm")
    pending = trust.unconfirmed(ws, state)
    queued = _queued_lines(ws, state)
    if not pending:
        print("loopdeck: everything this loop names was confirmed on this machine")
        for line in queued:
            print(line)
        return 0
    print(visible(f"The loop in {ws.root} names what nobody on this machine confirmed:"))
    for line in pending:
        print(f"  {visible(line)}")
    if any(line.startswith("prompt:") for line in pending):
        print("Its whole prompt (sent to the agent's model every iteration):")
        for line in state.prompt.splitlines() or [""]:
            print(f"  | {visible(line)}")
    for line in queued:
        print(line)
    print(
        "Confirming lets loopdeck run these commands, send its prompt to the agent, notify these "
        "targets and write these paths, in this folder, from now on (a change asks again)."
    )
    from loop.cli.confirm import confirm_and_record

    confirm_and_record(ws, args.yes, lambda: trust.record(ws, state, "trust"))
    waiting = state.waiting_for or {}
    if state.active and waiting.get("escalation") == "unconfirmed":
        from loop.store import control
        from loop.trust import key

        command = control.queue(
            ws, "resume", source="cli", reason="confirmed with loopdeck trust", key=key.for_person(ws.root)
        )
        print(f"loopdeck: resume queued (id {command.id}): the runner goes on")
    return 0


def _queued_lines(ws: Workspace, state: LoopState) -> list[str]:
    """The loop's queued, unapplied commands, each marked with whether it will be applied: a
    queue committed with the repository must not ride on a confirmation."""
    from loop.core.engine import refusal
    from loop.core.visible import visible
    from loop.store import control
    from loop.store.journal import Journal
    from loop.trust import key

    commands, _bad, _end = control.read_unapplied(
        ws, state.control_offset, Journal(ws.journal), key.reader(ws.root)
    )
    if not commands:
        return []
    lines = [f"Commands queued for this loop, not applied yet ({len(commands)}):"]
    for command in commands:
        why = refusal(command)
        mark = "from a person here" if why is None and command.person else "from anyone (a pause)"
        if why is not None:
            mark = f"will be ignored: {why}"
        text = f": {command.reason}" if command.reason else ""
        value = f" {command.value}" if command.value is not None else ""
        lines.append(visible(f"  {command.kind}{value}{text} [{mark}]"))
    return lines


def cmd_restore(args: argparse.Namespace) -> int:
    """A person puts the state's last good copy back (the corrupt file is kept beside it); the
    monitor's `b` runs this verb, so the monitor itself never writes the state."""
    from loop.core.timeutil import utcnow
    from loop.drivers import writer
    from loop.trust.person import refuse_inside_agent

    refuse_inside_agent("`loopdeck restore`")
    ws = _workspace(args)
    state = writer.restore_backup(ws, utcnow())
    print(
        f"loopdeck: the backup is restored (iteration {state.iteration}, {state.status}); "
        "the corrupt file is kept beside it (….corrupt-<time>)"
    )
    return 0


def cmd_hook(args: argparse.Namespace) -> int:
    from loop.drivers import hook

    return hook.main(event=args.event, input_file=getattr(args, "input", None))


def cmd_hook_prompt(args: argparse.Namespace) -> int:
    from loop.drivers import hook_prompt

    return hook_prompt.main()


def cmd_install(args: argparse.Namespace) -> int:
    from loop.cli import install

    ws = Workspace(Path(args.workspace).resolve()) if args.workspace else Workspace(Path.cwd())
    if args.uninstall:
        report = install.uninstall(ws, local=not args.shared)
        print(
            f"loopdeck: removed the Stop hook from {report.settings}"
            if report.changed
            else f"loopdeck: no loopdeck hook in {report.settings}"
        )
        for path in report.removed:
            print(f"loopdeck: removed {path}")
        if report.backup is not None:
            print(f"loopdeck: the previous settings are in {report.backup}")
        return 0
    install_hooks(ws, keep_block_cap=args.keep_block_cap, local=not args.shared, sandbox=args.sandbox)
    return 0


def install_hooks(
    ws: Workspace, *, keep_block_cap: bool = False, local: bool = True, sandbox: bool = False
) -> None:
    """What `loopdeck install` does and says (`loopdeck init --hooks` runs it too)."""
    from loop.cli import install
    from loop.cli.doctor import require_usable

    require_usable()  # the Python and launcher the hooks will name exist, before any write
    existed = (ws.claude_dir / (install.LOCAL if local else install.SHARED)).exists()
    report = install.install(ws, keep_block_cap=keep_block_cap, local=local, sandbox=sandbox)
    state = ("updated" if existed else "created") if report.changed else "already up to date"
    print(f"loopdeck: Stop hook in {report.settings} {state}")
    for line in install.notes(report):
        print(f"loopdeck: {line}")
    for path in report.written:
        print(f"loopdeck: wrote {path}")
    if not keep_block_cap:
        print(
            "loopdeck: CLAUDE_CODE_STOP_HOOK_BLOCK_CAP=0, so Claude Code does not end a turn after 8 blocks"
        )
    kind, folder = install.where_installed()
    print(f"loopdeck: the hooks run {install.hook_runner()}")
    if kind == "clone":
        print(
            f"loopdeck: warning: that is a development clone ({folder}): moving or deleting it "
            f"breaks these hooks; for hooks that last, install loopdeck as a tool (pipx install "
            f"{folder}) and run `loopdeck install` here again",
            file=sys.stderr,
        )
    print(
        "loopdeck: if this loopdeck is moved, upgraded into another environment or removed, run "
        "`loopdeck install` here again (`loopdeck doctor` tells when the hooks are broken)"
    )
    if report.backup is not None:
        print(f"loopdeck: the previous settings are in {report.backup}")


# --- the parser ----------------------------------------------------------------------------


class _Verbs(argparse._SubParsersAction):  # type: ignore[type-arg]
    """Every verb's `--help` opens with a one-line description: its help line, unless it has
    a longer one of its own."""

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        text = kwargs.get("help")
        if text and text is not argparse.SUPPRESS and kwargs.get("description") in (None, text):
            kwargs["description"] = _sentence(text)
        parser: argparse.ArgumentParser = super().add_parser(name, **kwargs)
        return parser


class VerbParser(argparse.ArgumentParser):
    """A verb's parser: a mistake after the verb is reported with that verb's usage
    (`loopdeck log: error: ...`), not the top-level one argparse would print for an option it
    does not know."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.register("action", "parsers", _Verbs)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:  # the innermost verb (`hook stop`, `temporal dev`) meets them first
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


def _sentence(text: str) -> str:
    text = text.strip()
    text = text[:1].upper() + text[1:]
    return text if text.endswith((".", ")", "?", "!")) else text + "."


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="loopdeck",
        description="Run, watch and steer autonomous coding-agent loops.",
    )
    parser.register("action", "parsers", _Verbs)
    parser.add_argument(
        "-C",
        "--workspace",
        metavar="DIR",
        help="the project folder (default: the nearest folder at or above the current one "
        "that holds a loop, else the current folder)",
    )
    parser.add_argument(
        "--version", action=_Version, nargs=0, help="show loopdeck's version and where it runs from, and exit"
    )
    verbs: argparse._SubParsersAction[argparse.ArgumentParser] = parser.add_subparsers(
        dest="verb", metavar="VERB", parser_class=cast(type[argparse.ArgumentParser], VerbParser)
    )
    _add_workspace_option_to_every_verb(verbs)

    start = verbs.add_parser("start", help="create a loop (the /orchestrator-loop command)")
    start.add_argument("prompt", nargs="*", metavar="PROMPT", help="what the agent works on")
    start.add_argument(
        "--max-iterations",
        type=int,
        metavar="N",
        help="escalate after N iterations (never exits for it); 0 = no limit (default 100)",
    )
    start.add_argument(
        "--completion-promise",
        default="null",
        metavar="T",
        help="the agent finishes by printing <promise>T</promise>",
    )
    start.add_argument("--task-file", metavar="P", help="a markdown checklist of tasks")
    start.add_argument("--no-tasks", action="store_true", help="do not check Claude Code Tasks")
    start.add_argument("--no-github", action="store_true", help="do not check GitHub Projects")
    start.add_argument("--github-project", metavar="ID", help="the GitHub project to check")
    start.add_argument("--verify", action="append", metavar="CMD", help="a verification command (repeatable)")
    start.add_argument(
        "--verify-allow",
        action="append",
        metavar="CMD",
        help="allow this exact command (options and all), or `sh: CMD` through a shell (repeatable)",
    )
    start.add_argument(
        "--force", action="store_true", help="archive an active (or move aside a corrupt) loop and start anew"
    )
    add_limit_options(start)
    start.set_defaults(func=cmd_start)

    status = verbs.add_parser("status", help="the loop's state")
    status.add_argument("--json", action="store_true", help="one JSON object")
    status.set_defaults(func=cmd_status)

    sources = verbs.add_parser("sources", help="what each task source has left")
    sources.add_argument("--json", action="store_true", help="one JSON object")
    sources.add_argument("--task-file", metavar="P", help="a markdown checklist (default: the loop's)")
    sources.add_argument("--transcript", metavar="P", help="a Claude Code transcript (.jsonl)")
    sources.add_argument("--tasks-dir", metavar="D", help="the Claude Tasks root (default ~/.claude/tasks)")
    sources.add_argument("--session", metavar="ID", help="the Claude Code session id")
    sources.add_argument("--no-github", action="store_true", help="do not ask GitHub")
    sources.set_defaults(func=cmd_sources)

    for kind, text in STEER_HELP.items():
        verb = verbs.add_parser(kind, help=text, description=text)
        verb.add_argument("--reason", metavar="T", help="why (shown in the journal)")
        verb.add_argument(
            "--wait", type=float, metavar="S", help="wait up to S seconds for the driver to apply it"
        )
        verb.add_argument(
            "--worker",
            metavar="NAME",
            help="with `run --workers`: act on this worker only (skip its task, stop it, resume it "
            "with --reason as the answer to its question)",
        )
        verb.set_defaults(func=_steer_cmd(kind))

    for kind, text in (
        ("say", "a note for the agent: it goes into the next prompt, once"),
        ("answer", "answer the agent's question: the loop resumes with it in the next prompt"),
    ):
        talk = verbs.add_parser(kind, help=text, description=text)
        talk.add_argument("text", nargs="+", metavar="TEXT", help="what to tell the agent")
        talk.add_argument(
            "--wait", type=float, metavar="S", help="wait up to S seconds for the driver to apply it"
        )
        talk.set_defaults(func=_talk_cmd(kind))

    text = "resume an interrupted loop: paused, waiting, crashed, stopping or corrupt"
    resume = verbs.add_parser("resume", help=text, description=text)
    answer = resume.add_mutually_exclusive_group()
    answer.add_argument("-y", "--yes", action="store_true", help="answer yes to every question (scripts)")
    answer.add_argument("--no", action="store_true", help="answer no: only say what would be done")
    resume.add_argument(
        "--git",
        choices=("continue", "commit", "stash"),
        help="uncommitted changes: keep them as they are (the default), commit or stash them",
    )
    resume.add_argument(
        "--from",
        dest="source",
        choices=("backup", "journal"),
        help="a corrupt state: restore the backup (the default when there is one) or rebuild it "
        "from the journal",
    )
    resume.add_argument("--reason", metavar="T", help="why (shown in the journal)")
    resume.add_argument(
        "--wait", type=float, metavar="S", help="wait up to S seconds for a live driver to apply it"
    )
    resume.add_argument(
        "--worker", metavar="NAME", help="resume one parallel worker (the reason is its answer)"
    )
    resume.set_defaults(func=lambda args: _verbs().cmd_resume(args))

    setmax = verbs.add_parser("set-max-iterations", help="change the escalation threshold")
    setmax.add_argument("n", type=int, metavar="N", help="the new maximum; 0 = no limit")
    setmax.add_argument("--reason", metavar="T", help="why (shown in the journal)")
    setmax.add_argument(
        "--wait", type=float, metavar="S", help="wait up to S seconds for the driver to apply it"
    )
    setmax.set_defaults(func=cmd_set_max)

    run = verbs.add_parser("run", help="the external runner: a fresh agent process per iteration")
    run.add_argument("prompt", nargs="*", metavar="PROMPT", help="what the agent works on (new loops)")
    run.add_argument(
        "--agent",
        metavar="AGENT",
        help="claude, codex, gemini or opencode (each with a default command for unattended work in "
        "the workspace), or a full agent command: the prompt goes on stdin, or where {prompt} or "
        "{prompt_file} stands (default: claude)",
    )
    formats = ("claude", "codex", "gemini", "opencode", "text")  # loop.agents.FORMATS, without importing it
    run.add_argument(
        "--agent-format",
        choices=formats,
        metavar="FORMAT",
        help="how to read the agent's output: claude, codex, gemini, opencode or text "
        "(default: by the command's program name)",
    )
    run.add_argument(
        "--fallback-agent",
        metavar="AGENT",
        help="the agent (a name or a command, as --agent) to turn to while the first one is held by "
        "a usage limit; back to the first after its reset",
    )
    run.add_argument(
        "--fallback-agent-format",
        choices=formats,
        metavar="FORMAT",
        help="as --agent-format, for the fallback",
    )
    run.add_argument("--max-iterations", type=int, metavar="N", help="escalate after N (default 100)")
    run.add_argument("--completion-promise", metavar="T", help="finish on <promise>T</promise>")
    run.add_argument("--task-file", metavar="P", help="a markdown checklist of tasks")
    run.add_argument(
        "--verify",
        action="append",
        metavar="CMD",
        help="a verification command run after every iteration (repeatable)",
    )
    run.add_argument(
        "--verify-allow",
        action="append",
        metavar="CMD",
        help="add a command to the verification allowlist (repeatable)",
    )
    run.add_argument(
        "--iteration-timeout",
        type=float,
        metavar="S",
        help="kill an agent run after S seconds (default 1800)",
    )
    run.add_argument("--retries", type=int, metavar="N", help="retries of a failed agent run (default 2)")
    run.add_argument("--commit", action="store_true", help="commit after each verified iteration")
    run.add_argument(
        "--headless",
        action="store_true",
        help="no person watching: an escalation ends the run with a summary",
    )
    run.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="run up to N workers (1-12) in parallel over a task graph (--graph or --task-list)",
    )
    run.add_argument(
        "--graph", metavar="P", help="the task graph: a Claude Code Tasks folder, or a .json/.yaml file"
    )
    run.add_argument("--task-list", metavar="ID", help="the graph is the Claude Code task list ID")
    run.add_argument(
        "--audit", metavar="CMD", help="with --workers: a verification command approving each task (exit 0)"
    )
    run.add_argument(
        "--audit-agent",
        metavar="CMD",
        help="with --workers: an agent command given the task and the worker's output (exit 0 approves)",
    )
    run.add_argument(
        "--isolation",
        choices=("worktree", "locks"),
        help="with --workers: a git worktree and branch per task, merged one at a time (the default "
        "in a git repository), or one shared tree kept apart by file locks (the default elsewhere)",
    )
    run.add_argument(
        "--merge",
        choices=("merge", "rebase"),
        help="with worktrees: how an approved task's branch joins the loop's (default merge)",
    )
    run.add_argument("--no-tasks", action="store_true", help="do not check Claude Code Tasks")
    run.add_argument("--no-github", action="store_true", help="do not check GitHub Projects")
    run.add_argument(
        "--yes", action="store_true", help="run the commands a state file names without asking (scripts)"
    )
    add_limit_options(run)
    add_sandbox_options(run)
    run.set_defaults(func=lambda args: _verbs().cmd_run(args))

    tui = verbs.add_parser("tui", help="the monitor (also: loopdeck with no verb, on a terminal)")
    tui.add_argument(
        "dir", nargs="*", metavar="DIR", help="the workspace (default: here); several open the fleet view"
    )
    tui.add_argument("--scan", metavar="DIR", help="the fleet view of every loop found below DIR")
    tui.add_argument(
        "--depth",
        type=int,
        default=4,
        metavar="N",
        help="how many folder levels --scan looks down (default 4)",
    )
    tui.set_defaults(func=None)

    serve = verbs.add_parser(
        "serve",
        help="the monitor in a web browser",
        description=(
            "Serve the monitor to a web browser. Anyone with the page can steer the loops, so every "
            "request needs a token: a random one unless given, printed once in the address to open "
            "(http://HOST:PORT/?token=...). The browser then keeps it in a cookie; pages from other "
            "sites and other host names are refused, and the token is never logged."
        ),
    )
    serve.add_argument("dir", nargs="*", metavar="DIR", help="the workspace(s), as for tui")
    serve.add_argument("--scan", metavar="DIR", help="the fleet view of every loop found below DIR")
    serve.add_argument("--depth", type=int, default=4, metavar="N", help="how deep --scan looks (default 4)")
    serve.add_argument(
        "--host",
        default="127.0.0.1",
        help="the address to listen on (default 127.0.0.1); any other serves plain HTTP to the network, "
        "the token included: from another machine, tunnel over SSH instead (ssh -L 8000:127.0.0.1:8000 HOST)",
    )
    serve.add_argument("--port", type=int, default=8000, help="the port (default 8000; 0: any free one)")
    serve.add_argument(
        "--token-file",
        metavar="FILE",
        help="a file holding the secret the browser must present, at least 8 characters, readable by you "
        "alone (default: LOOPDECK_SERVE_TOKEN, else a random one, printed once)",
    )
    serve.add_argument("--token", help=argparse.SUPPRESS)  # refused: a command line shows in `ps`
    serve.set_defaults(func=None)

    demo = verbs.add_parser(
        "demo", help="a throwaway workspace, a scripted agent, the runner and the monitor"
    )
    demo.add_argument("--headless", action="store_true", help="no monitor: run to completion, print the log")
    demo.add_argument(
        "--workers", type=int, metavar="N", help="parallel workers (2-12) over a small task graph"
    )
    demo.set_defaults(func=None)

    hook = verbs.add_parser("hook", help="Claude Code hooks (run by Claude Code, not by people)")
    events = hook.add_subparsers(dest="event", metavar="EVENT", required=True)
    stop_hook = events.add_parser("stop", help="the Stop hook: JSON on stdin, decision on stdout")
    stop_hook.set_defaults(func=cmd_hook)
    failure_hook = events.add_parser(
        "stop-failure", help="the StopFailure hook: a turn ended on an API error (usage limits)"
    )
    failure_hook.add_argument("--input", metavar="FILE", help="read the hook input from FILE (and remove it)")
    failure_hook.set_defaults(func=cmd_hook)
    prompt_hook = events.add_parser(
        "prompt", help="the UserPromptSubmit hook: runs the slash commands (JSON on stdin, no shell)"
    )
    prompt_hook.set_defaults(func=cmd_hook_prompt)

    restoring = verbs.add_parser(
        "restore", help="put the state's backup back (a corrupt state file is kept beside it)"
    )
    restoring.set_defaults(func=cmd_restore)

    trusting = verbs.add_parser(
        "trust",
        help="confirm a loop nobody on this machine started (a state file that came with a repository): "
        "its prompt, commands, notification targets and paths",
    )
    trusting.add_argument(
        "--yes", action="store_true", help="without asking (never inside an agent's session)"
    )
    trusting.set_defaults(func=cmd_trust)

    inst = verbs.add_parser(
        "install",
        help="put the Stop hook and slash commands into .claude/",
        description="Put loopdeck's hooks (Stop, StopFailure, UserPromptSubmit) and its slash commands "
        "into this project's .claude/, for loops run inside Claude Code (/orchestrator-loop). By "
        "default into .claude/settings.local.json, which git is told to leave out.",
    )
    inst.add_argument("--uninstall", action="store_true", help="take them back out")
    inst.add_argument(
        "--keep-block-cap", action="store_true", help="leave Claude Code's 8-consecutive-blocks cap in place"
    )
    where = inst.add_mutually_exclusive_group()
    where.add_argument(
        "--local",
        action="store_true",
        help="use .claude/settings.local.json, yours alone, not committed (the default)",
    )
    where.add_argument(
        "--shared",
        action="store_true",
        help="use the team's .claude/settings.json (committed) instead of settings.local.json",
    )
    inst.add_argument(
        "--sandbox",
        action="store_true",
        help="also run the agent's Bash commands in Claude Code's sandbox (kept until --uninstall)",
    )
    inst.set_defaults(func=cmd_install)

    text = "the saved defaults (your file and the project's), each with where it comes from"
    configuring = verbs.add_parser("config", help=text, description=text)
    configuring.add_argument("--json", action="store_true", help="one JSON object")
    configuring.add_argument(
        "--trust",
        action="store_true",
        help="confirm the values the project's file names (never inside an agent's session)",
    )
    configuring.add_argument("--yes", action="store_true", help="with --trust: without asking")
    configuring.set_defaults(func=lambda args: _config_verb().cmd_config(args))

    text = "check the setup: agent CLIs, gh, the hooks in this project, notification targets, trust"
    checking = verbs.add_parser("doctor", help=text, description=text)
    checking.add_argument("--json", action="store_true", help="one JSON object")
    checking.set_defaults(func=lambda args: _doctor_verb().cmd_doctor(args))

    text = "start your own project: a task file to fill in and a project config (the hooks with --hooks)"
    initial = verbs.add_parser("init", help=text)
    initial.add_argument(
        "--hooks", action="store_true", help="also install the Claude Code hooks (as `loopdeck install`)"
    )
    initial.set_defaults(func=lambda args: _init_verb().cmd_init(args))

    text = "print a shell completion script for loopdeck's verbs and options"
    completing = verbs.add_parser(
        "completion",
        help=text,
        description=f"{_sentence(text)} Bash: loopdeck completion bash > "
        "~/.local/share/bash-completion/completions/loopdeck; zsh: loopdeck completion zsh > "
        "~/.zfunc/_loopdeck (a folder in $fpath); fish: loopdeck completion fish > "
        "~/.config/fish/completions/loopdeck.fish.",
    )
    completing.add_argument("shell", choices=("bash", "zsh", "fish"), help="the shell: bash, zsh or fish")
    completing.set_defaults(func=lambda args: _completion_verb().cmd_completion(args))

    log = verbs.add_parser("log", help="the loop's journal as log lines")
    log.add_argument("-n", type=int, default=50, metavar="N", help="how many events (default 50)")
    log.add_argument("--json", action="store_true", help="JSON instead of log lines")
    log.add_argument("-f", "--follow", action="store_true", help="keep printing new events")
    log.set_defaults(func=cmd_log)
    from loop.cli.temporal import extend

    extend(verbs)  # the Temporal engine's options and verbs (its code loads only when asked for)
    return parser


class _Version(argparse.Action):
    """`loopdeck --version`: the version, and which loopdeck answers (a tool install or a
    clone, its folder and its Python), worked out only when asked."""

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        import loop
        from loop.cli.install import where_installed

        kind, folder = where_installed()
        how = "installed as a tool" if kind == "tool" else "a development clone"
        python = sys.version.split()[0]
        print(f"loopdeck {loop.__version__} ({how}: {folder}; Python {python} {sys.executable})")
        parser.exit()


def _add_workspace_option_to_every_verb(verbs: Any) -> None:
    """`-C DIR` after the verb too (`loopdeck status -C DIR`), as people type it: every verb
    made from here on accepts it, and leaves the one given before the verb alone when it is
    not given again (`SUPPRESS`: no default of its own)."""
    made = verbs.add_parser

    def add_parser(name: str, **kwargs: Any) -> argparse.ArgumentParser:
        verb: argparse.ArgumentParser = made(name, **kwargs)
        if name != "hook":
            verb.add_argument(
                "-C",
                "--workspace",
                metavar="DIR",
                default=argparse.SUPPRESS,
                help="the project folder (as before the verb)",
            )
        return verb

    verbs.add_parser = add_parser


def _check_workspace(args: argparse.Namespace) -> None:
    """`-C DIR` names a folder that exists: `-C /nonexistent status` must not say "no loop"
    and succeed."""
    given = getattr(args, "workspace", None)
    if given is None:
        return
    folder = Path(given)
    if not folder.exists():
        raise LoopdeckError(f"-C {given}: the folder does not exist")
    if not folder.is_dir():
        raise LoopdeckError(f"-C {given} is a file, expected a folder")


MonitorVerbs = Mapping[str, Callable[[argparse.Namespace], int]]
"""The verbs that open the monitor (`tui`, `demo`), handed in by `tui.cli`: `loop` never imports
the monitor itself."""


def main(argv: Sequence[str] | None = None, monitor: MonitorVerbs | None = None) -> int:
    sdk_before = "temporalio" in sys.modules
    code = _main(argv, monitor)
    if not sdk_before and "temporalio" in sys.modules:
        # A verb loaded the Temporal SDK, whose native runtime can abort in the interpreter's
        # teardown (after the work is done, success or error): leave without that teardown.
        # Only when this call loaded it: a process that had it before (a test) goes on.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _main(argv: Sequence[str] | None, monitor: MonitorVerbs | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.verb is None:
        # People get the monitor; scripts and pipes (no terminal) get the status.
        tty = sys.stdout.isatty() and sys.stdin.isatty() and monitor is not None
        args = parser.parse_args([*(argv or sys.argv[1:]), "tui" if tty else "status"])
    try:
        _check_workspace(args)
        func = args.func
        if func is None:
            func = (monitor or {}).get(args.verb)
            if func is None:
                raise LoopdeckError(f"`{args.verb}` opens the monitor: run it as `loopdeck {args.verb}`")
        result: int = func(args)
        sys.stdout.flush()  # inside the try: a reader gone early (`| head -1`) is met here
        return result
    except BrokenPipeError:
        # The reader closed the pipe: what it wanted it has. Point stdout at /dev/null so the
        # interpreter's own flush at exit does not print a traceback, and end quietly.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except LoopdeckError as exc:
        from loop.core.redact import redact

        print(
            f"loopdeck: error: {redact(str(exc))}", file=sys.stderr
        )  # a detached runner's goes to runner.log
        return 1
    except KeyboardInterrupt:
        return 130
    except OSError as exc:  # a read-only or full disk, a file where a folder belongs…
        print(f"loopdeck: error: {os_problem(exc)}", file=sys.stderr)
        return 1
    except Exception as exc:  # a bug: still one line, never a traceback
        print(
            f"loopdeck: error: unexpected {type(exc).__name__}: {_one_line(str(exc))} "
            "(a bug in loopdeck: please report it with the command that caused it)",
            file=sys.stderr,
        )
        return 1


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 300 else text[:297] + "..."


if __name__ == "__main__":
    sys.exit(main())
