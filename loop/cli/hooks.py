"""`loopdeck hook stop|stop-failure|prompt`: the hooks as older installs run them (new ones run
`loop/launcher.py`, which skips the command line). `loop.cli.main` takes `hook stop` and
`hook stop-failure --input FILE` straight to the hook, before any parser."""

from __future__ import annotations

import argparse

from loop.drivers import hook, hook_prompt


def cmd_hook(args: argparse.Namespace) -> int:
    return hook.main(event=args.event, input_file=getattr(args, "input", None))


def cmd_hook_prompt(args: argparse.Namespace) -> int:
    return hook_prompt.main()
