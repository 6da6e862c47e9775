"""The verbs that steer a running loop: `pause`, `skip`, `complete`, `stop`, `say`, `answer`,
`set-max-iterations`; and `undo`, which takes a landed task back."""

from __future__ import annotations

from loop.cli.definition.base import Command, VerbGroup

STEER_HELP = {
    "pause": "pause the loop: the agent may stop at its next turn; the state is kept",
    "skip": "skip the current task (or the current verification loop)",
    "complete": "force completion now and archive the loop",
    "stop": "stop the loop after the current iteration",
}
TALK_HELP = {
    "say": "a note for the agent: it goes into the next prompt, once",
    "answer": "answer the agent's question: the loop resumes with it in the next prompt",
}
WAIT_HELP = "wait up to S seconds for the driver to apply it"


def add(verbs: VerbGroup) -> None:
    """The steering verbs but `set-max-iterations`, which comes after `resume` in `--help`."""
    for kind, text in STEER_HELP.items():
        verb = verbs.add_parser(kind, help=text, description=text)
        verb.add_argument("--reason", metavar="T", help="why (shown in the journal)")
        verb.add_argument("--wait", type=float, metavar="S", help=WAIT_HELP)
        verb.add_argument(
            "--worker",
            metavar="NAME",
            help="with `run --workers`: act on this worker only (skip its task, stop it, resume it "
            "with --reason as the answer to its question)",
        )
        verb.set_defaults(func=Command("loop.cli.steer:cmd_steer"), steering=kind)
    for kind, text in TALK_HELP.items():
        talk = verbs.add_parser(kind, help=text, description=text)
        talk.add_argument("text", nargs="+", metavar="TEXT", help="what to tell the agent")
        talk.add_argument("--wait", type=float, metavar="S", help=WAIT_HELP)
        talk.set_defaults(func=Command("loop.cli.steer:cmd_talk"), steering=kind)


def add_set_max(verbs: VerbGroup) -> None:
    setmax = verbs.add_parser("set-max-iterations", help="change the escalation threshold")
    setmax.add_argument("n", type=int, metavar="N", help="the new maximum; 0 = no limit")
    setmax.add_argument("--reason", metavar="T", help="why (shown in the journal)")
    setmax.add_argument("--wait", type=float, metavar="S", help=WAIT_HELP)
    setmax.set_defaults(func=Command("loop.cli.steer:cmd_set_max"))


UNDO_HELP = "revert a landed task on the loop's branch (a revert commit) and open it again"


def add_undo(verbs: VerbGroup) -> None:
    verb = verbs.add_parser("undo", help=UNDO_HELP, description=UNDO_HELP)
    verb.add_argument("task", metavar="TASK", help="the task's id in the graph")
    verb.add_argument("--graph", metavar="PATH", help="the task graph to open it in (default: the loop's)")
    verb.set_defaults(func=Command("loop.cli.undo:cmd_undo"))
