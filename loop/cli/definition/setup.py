"""The verbs that set a project up and look after it: the hooks Claude Code runs (`hook`),
`restore`, `trust`, `install`, `config`, `doctor`, `init`, `completion`."""

from __future__ import annotations

from loop.cli.definition.base import Command, VerbGroup, sentence


def add(verbs: VerbGroup) -> None:
    _hooks(verbs)
    _install(verbs)
    _project(verbs)


def _hooks(verbs: VerbGroup) -> None:
    hook = verbs.add_parser("hook", help="Claude Code hooks (run by Claude Code, not by people)")
    events = hook.add_subparsers(dest="event", metavar="EVENT", required=True)
    stop_hook = events.add_parser("stop", help="the Stop hook: JSON on stdin, decision on stdout")
    stop_hook.set_defaults(func=Command("loop.cli.hooks:cmd_hook"))
    failure_hook = events.add_parser(
        "stop-failure", help="the StopFailure hook: a turn ended on an API error (usage limits)"
    )
    failure_hook.add_argument("--input", metavar="FILE", help="read the hook input from FILE (and remove it)")
    failure_hook.set_defaults(func=Command("loop.cli.hooks:cmd_hook"))
    prompt_hook = events.add_parser(
        "prompt", help="the UserPromptSubmit hook: runs the slash commands (JSON on stdin, no shell)"
    )
    prompt_hook.set_defaults(func=Command("loop.cli.hooks:cmd_hook_prompt"))

    restoring = verbs.add_parser(
        "restore", help="put the state's backup back (a corrupt state file is kept beside it)"
    )
    restoring.set_defaults(func=Command("loop.cli.trusting:cmd_restore"))

    trusting = verbs.add_parser(
        "trust",
        help="confirm a loop nobody on this machine started (a state file that came with a repository): "
        "its prompt, commands, notification targets and paths",
    )
    trusting.add_argument(
        "--yes", action="store_true", help="without asking (never inside an agent's session)"
    )
    trusting.set_defaults(func=Command("loop.cli.trusting:cmd_trust"))


def _install(verbs: VerbGroup) -> None:
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
    inst.set_defaults(func=Command("loop.cli.installing:cmd_install"))


def _project(verbs: VerbGroup) -> None:
    text = "the saved defaults (your file and the project's), each with where it comes from"
    configuring = verbs.add_parser("config", help=text, description=text)
    configuring.add_argument("--json", action="store_true", help="one JSON object")
    configuring.add_argument(
        "--trust",
        action="store_true",
        help="confirm the values the project's file names (never inside an agent's session)",
    )
    configuring.add_argument("--yes", action="store_true", help="with --trust: without asking")
    configuring.set_defaults(func=Command("loop.cli.config:cmd_config"))

    text = "check the setup: agent CLIs, gh, the hooks in this project, notification targets, trust"
    checking = verbs.add_parser("doctor", help=text, description=text)
    checking.add_argument("--json", action="store_true", help="one JSON object")
    checking.set_defaults(func=Command("loop.cli.doctor:cmd_doctor"))

    text = "start your own project: a task file to fill in and a project config (the hooks with --hooks)"
    initial = verbs.add_parser("init", help=text)
    initial.add_argument(
        "--hooks", action="store_true", help="also install the Claude Code hooks (as `loopdeck install`)"
    )
    initial.set_defaults(func=Command("loop.cli.init:cmd_init"))

    text = "print a shell completion script for loopdeck's verbs and options"
    completing = verbs.add_parser(
        "completion",
        help=text,
        description=f"{sentence(text)} Bash: loopdeck completion bash > "
        "~/.local/share/bash-completion/completions/loopdeck; zsh: loopdeck completion zsh > "
        "~/.zfunc/_loopdeck (a folder in $fpath); fish: loopdeck completion fish > "
        "~/.config/fish/completions/loopdeck.fish.",
    )
    completing.add_argument("shell", choices=("bash", "zsh", "fish"), help="the shell: bash, zsh or fish")
    completing.set_defaults(func=Command("loop.cli.completion:cmd_completion"))
