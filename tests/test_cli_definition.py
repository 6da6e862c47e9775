"""The command line's definition, apart from the verbs: every verb names a function that
exists, building the parser loads no verb (nor the monitor, nor the runner), the definition and
the verbs that read it import each other in one direction only, and `loopdeck hook stop` reaches
the hook without a parser."""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from loop.cli import build_parser
from loop.cli.definition.base import Command
from loop.cli.definition.monitor import MONITOR_VERBS
from tests.conftest import REPO


def _leaves(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every verb that runs something (`hook stop`, not `hook`)."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path
    for action in subs:
        for name, verb in action.choices.items():
            yield from _leaves(verb, (*path, name))


LEAVES = sorted(_leaves(build_parser()))


@pytest.mark.parametrize("path", LEAVES, ids=" ".join)
def test_every_verb_names_a_function_that_exists(path: tuple[str, ...]) -> None:
    parser = build_parser()
    extra = {
        "completion": ["bash"],
        "set-max-iterations": ["3"],
        "say": ["hi"],
        "answer": ["yes"],
        "undo": ["1"],
    }
    args = parser.parse_args([*path, *extra.get(path[0], [])])
    if path[0] in MONITOR_VERBS:
        assert args.func is None  # tui's, found through the `loopdeck.monitor` entry points
        return
    assert isinstance(args.func, Command), args.func
    assert callable(args.func.resolve()), args.func


def test_building_the_parser_loads_no_verb_and_no_monitor() -> None:
    code = (
        "import json, sys\n"
        "from loop.cli import build_parser\n"
        "build_parser().format_help()\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    loaded = set(json.loads(done.stdout))
    cli = {m for m in loaded if m.startswith("loop.cli.")}
    assert cli <= {
        "loop.cli.definition",
        *(
            f"loop.cli.definition.{n}"
            for n in ("base", "loops", "monitor", "report", "run", "setup", "shared", "steering", "temporal")
        ),
        "loop.cli.place",
    }, sorted(cli)
    heavy = ("tui", "textual", "loop.drivers.runner", "loop.drivers.hook", "temporalio", "shtab")
    assert sorted(m for m in loaded if m.startswith(heavy)) == []


def _imports(module: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(module.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_the_definition_imports_no_verb_and_no_verb_imports_the_package() -> None:
    """`loop.cli` imports the definition; the verbs (completion, init...) import the definition
    or each other, never `loop.cli` itself: no cycle between the package and its verbs."""
    folder = REPO / "loop" / "cli"
    for module in (folder / "definition").glob("*.py"):
        outside = {m for m in _imports(module) if m.startswith("loop.cli.") and ".definition" not in m}
        assert outside <= {"loop.cli.place", "loop.cli.place.where_installed"}, (module.name, outside)
    for module in folder.glob("*.py"):
        if module.name in ("__init__.py", "__main__.py"):
            continue
        uses = _imports(module)
        assert not {"loop.cli.build_parser", "loop.cli.main", "loop.cli.install_hooks"} & uses, module.name


def test_hook_stop_goes_to_the_hook_before_any_parser(tmp_path: Path) -> None:
    """Older installs run `loopdeck hook stop` on every agent turn: it answers (here: no loop,
    nothing to say) without the parser's way to the verb."""
    code = (
        "import json, os, sys\n"
        "real_exit = os._exit\n"
        "def report(status):\n"
        "    print(json.dumps(sorted(sys.modules)), file=sys.stderr, flush=True)\n"
        "    real_exit(status)\n"
        "os._exit = report\n"
        "sys.argv = ['loopdeck', 'hook', 'stop']\n"
        "from loop.cli import main\n"
        "main()\n"
    )
    payload = json.dumps(
        {"session_id": "s", "transcript_path": str(tmp_path / "t.jsonl"), "cwd": str(tmp_path)}
    )
    done = subprocess.run(
        [sys.executable, "-c", code], input=payload, capture_output=True, text=True, cwd=tmp_path, check=True
    )
    loaded = set(json.loads(done.stderr.splitlines()[-1]))
    assert "loop.drivers.hook" in loaded
    assert "loop.cli.hooks" not in loaded  # the verb's module: the parser's way there
