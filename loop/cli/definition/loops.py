"""The verbs that make, read and resume a loop: `start`, `status`, `sources`, `log`, `resume`."""

from __future__ import annotations

from loop.cli.definition.base import Command, VerbGroup
from loop.cli.definition.shared import add_limit_options


def add(verbs: VerbGroup) -> None:
    """`start`, `status` and `sources` (`resume` and `log` come later in `--help`)."""
    _start(verbs)
    status = verbs.add_parser("status", help="the loop's state")
    status.add_argument("--json", action="store_true", help="one JSON object")
    status.set_defaults(func=Command("loop.cli.reading:cmd_status"))

    sources = verbs.add_parser("sources", help="what each task source has left")
    sources.add_argument("--json", action="store_true", help="one JSON object")
    sources.add_argument("--task-file", metavar="P", help="a markdown checklist (default: the loop's)")
    sources.add_argument("--transcript", metavar="P", help="a Claude Code transcript (.jsonl)")
    sources.add_argument("--tasks-dir", metavar="D", help="the Claude Tasks root (default ~/.claude/tasks)")
    sources.add_argument("--session", metavar="ID", help="the Claude Code session id")
    sources.add_argument("--no-github", action="store_true", help="do not ask GitHub")
    sources.set_defaults(func=Command("loop.cli.reading:cmd_sources"))


def add_log(verbs: VerbGroup) -> None:
    """`log`, listed last in `--help` as it always was."""
    log = verbs.add_parser("log", help="the loop's journal as log lines")
    log.add_argument("-n", type=int, default=50, metavar="N", help="how many events (default 50)")
    log.add_argument("--json", action="store_true", help="JSON instead of log lines")
    log.add_argument("-f", "--follow", action="store_true", help="keep printing new events")
    log.set_defaults(func=Command("loop.cli.reading:cmd_log"))


def _start(verbs: VerbGroup) -> None:
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
    start.add_argument(
        "--design",
        metavar="P",
        help="a DESIGN-<timestamp>.md: its acceptance criteria, checks and task type make the loop "
        "(default without a PROMPT: the newest DESIGN-*.md here)",
    )
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
    start.set_defaults(func=Command("loop.cli.starting:cmd_start"))


def add_resume(verbs: VerbGroup) -> None:
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
    resume.set_defaults(func=Command("loop.cli.resume:cmd_resume"))
