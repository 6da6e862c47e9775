"""A scripted stand-in for a coding agent: `python -m loop.demo.agent [options]`.

It reads its prompt (stdin, or `--prompt-file`), then does what a diligent agent would with a
checklist: takes the current task of TODO.md, writes its file under `work/`, ticks the box and
reports. Given a failed verification it fixes what it broke; in a verification loop it reviews;
with nothing left it prints ALL_TASKS_COMPLETE. Options make it misbehave on purpose:
fail (exit 1) or break the build at a given task, hang, or answer as `claude -p --output-format
json` does.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import time
from pathlib import Path

SCRATCH = ".demo"
"""The demo agent's and workers' own notes, in the workspace (loopdeck's folders are read-only
to an agent in the sandbox)."""
BOX = re.compile(r"^([ \t]*[-*+] \[)([ ~])(\] )(.*)$", re.MULTILINE)


def _memory(root: Path) -> dict[str, list[int]]:
    path = root / SCRATCH / "demo-agent.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        data = {}
    return {
        "failed": data.get("failed", []),
        "broken": data.get("broken", []),
        "asked": data.get("asked", []),
        "limited": data.get("limited", []),
    }


def _remember(root: Path, memory: dict[str, list[int]]) -> None:
    path = root / SCRATCH / "demo-agent.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(memory))


def act(root: Path, prompt: str, args: argparse.Namespace) -> tuple[int, str]:
    """Do one turn of work; returns (exit code, final text)."""
    todo = root / args.task_file
    work = root / "work"
    work.mkdir(exist_ok=True)
    memory = _memory(root)
    if prompt.startswith("VERIFICATION FAILED"):
        fixed = []
        for path in sorted(work.glob("*.txt")):
            text = path.read_text()
            if "BROKEN" in text:
                path.write_text(text.replace("BROKEN", "fixed"))
                fixed.append(path.name)
        return 0, f"Fixed the failing check in {', '.join(fixed) or 'nothing'}."
    if prompt.startswith("VERIFICATION LOOP"):
        loop_no = prompt.split()[2]
        return 0, f"Verification loop {loop_no}: reviewed every change; nothing to fix."
    text = todo.read_text() if todo.exists() else ""
    match = next((m for m in BOX.finditer(text) if m.group(2) == "~"), None) or BOX.search(text)
    if match is None:
        return 0, "Every task in the checklist is done and checked.\nALL_TASKS_COMPLETE"
    number = text[: match.start()].count("\n") + 1
    title = match.group(4).strip()
    asked = memory.setdefault("asked", [])
    if number in args.ask_at and number not in asked:
        asked.append(number)
        _remember(root, memory)
        return 0, f"Before {title!r}: <question>Which storage should I use, SQLite or files?</question>"
    if "A PERSON ANSWERED YOUR QUESTION" in prompt:
        answer = prompt.split("\n")[1].strip()
        title = f"{title} (using {answer})"
    if number in args.limit_at and number not in memory["limited"]:
        memory["limited"].append(number)
        _remember(root, memory)
        reset = int(time.time() + args.limit_for + 0.999)
        return 1, f"Claude AI usage limit reached|{reset}"
    if number in args.fail_at and number not in memory["failed"]:
        memory["failed"].append(number)
        _remember(root, memory)
        return 1, f"error: could not complete {title!r} (scripted failure)"
    content = f"{title}\n"
    if number in args.break_at and number not in memory["broken"]:
        memory["broken"].append(number)
        _remember(root, memory)
        content += "BROKEN\n"
    slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:40] or "task"
    (work / f"{number:03d}-{slug}.txt").write_text(content)
    ticked = (
        text[: match.start()] + match.group(1) + "x" + match.group(3) + match.group(4) + text[match.end() :]
    )
    tmp = todo.with_name(f".{todo.name}.tmp")
    tmp.write_text(ticked)
    os.replace(tmp, todo)
    (root / SCRATCH).mkdir(parents=True, exist_ok=True)
    with open(root / SCRATCH / "demo-done.log", "a") as done:
        done.write(f"{number}\n")  # one line per task ticked: a task done twice shows twice
    return 0, f"Done: {title} (work/{number:03d}-{slug}.txt)."


def at_lines(parser: argparse.ArgumentParser, flag: str, help: str) -> None:
    """A flag that names task lines, given once per line."""
    parser.add_argument(flag, type=int, action="append", default=[], metavar="LINE", help=help)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="loopdeck-demo-agent", description=__doc__)
    parser.add_argument("--task-file", default="TODO.md")
    parser.add_argument("--prompt-file", help="read the prompt from this file, not stdin")
    at_lines(parser, "--fail-at", "exit 1 (once) when the current task is on this line")
    at_lines(parser, "--break-at", "do the task on this line but break the check (once)")
    parser.add_argument(
        "--sleep",
        type=float,
        nargs=2,
        default=(0.0, 0.0),
        metavar=("MIN", "MAX"),
        help="think for a random time between MIN and MAX seconds",
    )
    parser.add_argument("--hang", action="store_true", help="never finish (for timeout tests)")
    parser.add_argument(
        "--spawn-child",
        action="store_true",
        help="start a long-lived child process first (for the no-orphans tests)",
    )
    at_lines(parser, "--ask-at", "ask a <question> (once) before doing the task on this line")
    at_lines(
        parser,
        "--limit-at",
        "hit a usage limit (once) at the task on this line, resetting --limit-for seconds later",
    )
    parser.add_argument("--limit-for", type=float, default=2.0, metavar="S")
    parser.add_argument(
        "--cost", type=float, default=0.0, metavar="USD", help="the cost each turn reports (with --json)"
    )
    parser.add_argument("--json", action="store_true", help="answer like `claude -p --output-format json`")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args(argv)
    prompt = Path(args.prompt_file).read_text() if args.prompt_file else sys.stdin.read()
    if args.hang:
        # A hung agent with a child of its own: both must die with the process group.
        import subprocess

        child = subprocess.Popen([sys.executable, "-I", "-c", "import time; time.sleep(600)"])
        pids = Path.cwd() / SCRATCH / "hung-agent.pids"
        pids.parent.mkdir(parents=True, exist_ok=True)
        pids.write_text(f"{os.getpid()} {child.pid}\n")
        while True:
            time.sleep(60)
    if args.spawn_child:
        # A child that outlives this turn unless someone kills the agent's whole tree.
        import subprocess

        subprocess.Popen([sys.executable, "-I", "-c", "import time; time.sleep(300)"])
    rng = random.Random(args.seed)
    low, high = args.sleep
    if high > 0:
        time.sleep(rng.uniform(low, high))
    start = time.monotonic()
    code, text = act(Path.cwd(), prompt, args)
    if args.json:
        print(
            json.dumps(
                {
                    "type": "result",
                    "subtype": "success" if code == 0 else "error_during_execution",
                    "is_error": code != 0,
                    "duration_ms": int((time.monotonic() - start) * 1000),
                    "num_turns": 1,
                    "result": text,
                    "session_id": "demo-agent",
                    "total_cost_usd": args.cost,
                    "usage": {"input_tokens": 100, "output_tokens": 20},
                }
            )
        )
    else:
        print(text)
    return code


if __name__ == "__main__":
    sys.exit(main())
