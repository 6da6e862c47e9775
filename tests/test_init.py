"""`loopdeck init`: a person's own project, from an empty folder to a finished loop with the
command it prints; nothing a person wrote is ever overwritten."""

from __future__ import annotations

import json
import shlex
import tomllib
from collections.abc import Callable
from pathlib import Path

from loop.cli.config import BUILT_IN
from loop.demo.workspace import agent_command
from loop.store.config import KEYS, PROJECT_NAME, checked, load
from loop.store.paths import Workspace
from tests.conftest import Ran, run_loopdeck


def _next_command(out: str) -> list[str]:
    """The `loopdeck run ...` line init prints after "Next:", as argv."""
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("Next:"))
    argv = shlex.split(lines[at + 1])
    assert argv[:2] == ["loopdeck", "run"], lines[at + 1]
    return argv[1:]


def test_init_in_an_empty_folder_then_the_printed_run_finishes(tmp_path: Path) -> None:
    root = tmp_path / "mine"
    root.mkdir()
    made = run_loopdeck("init", cwd=root)
    assert made.returncode == 0, made.stderr
    assert sorted(p.name for p in root.iterdir()) == [PROJECT_NAME, "TODO.md"]
    assert f"wrote {root / 'TODO.md'}" in made.stdout and f"wrote {root / PROJECT_NAME}" in made.stdout
    assert load(root).project.values == {}  # all commented out: it changes nothing yet
    todo = root / "TODO.md"
    todo.write_text(todo.read_text().replace("And the next one", "Write the greeting"))
    argv = _next_command(made.stdout)
    # The scripted agent stands in for claude; LOOPDECK_SANDBOX=off comes from the test setup.
    ran = run_loopdeck(
        *argv, "--agent", agent_command(), "--headless", "--no-github", "--no-tasks", cwd=root, timeout=120
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "Loop complete" in ran.stdout
    assert "- [ ]" not in todo.read_text() and "- [x] Write the greeting" in todo.read_text()


def test_init_never_overwrites(cli: Callable[..., Ran], ws: Workspace) -> None:
    todo = ws.root / "TODO.md"
    todo.write_text("- [ ] my own task\n")
    ran = cli("init")
    assert ran.code == 1
    assert ran.err.strip().splitlines() == [
        f"loopdeck: error: TODO.md already exists in {ws.root}: init only creates new files, so nothing "
        "was written (edit it, or move it aside and run init again)"
    ]
    assert todo.read_text() == "- [ ] my own task\n" and not (ws.root / PROJECT_NAME).exists()
    todo.unlink()
    elsewhere = ws.root.parent / "elsewhere.toml"
    (ws.root / PROJECT_NAME).symlink_to(elsewhere)  # a link in its place is not followed either
    assert cli("init").code == 1
    assert not elsewhere.exists() and not todo.exists()


def test_the_config_names_every_key_with_the_built_in_defaults(tmp_path: Path) -> None:
    from loop.cli.init import config_text

    text = config_text()
    uncommented = "\n".join(
        line[2:] for line in text.splitlines() if line.startswith("# ") and " = " in line and "`" not in line
    )
    values = checked(tmp_path / PROJECT_NAME, tomllib.loads(uncommented))
    assert set(values) == set(KEYS)
    for key, default in BUILT_IN.items():
        if default not in (None, []):
            assert values[key] == default, key
    for _check, _expects, option in KEYS.values():
        assert f"({option})" in text


def test_init_with_hooks_installs_them_as_install_does(cli: Callable[..., Ran], ws: Workspace) -> None:
    ran = cli("init", "--hooks")
    assert ran.code == 0, ran.err
    settings = ws.claude_dir / "settings.local.json"
    assert f"Stop hook in {settings} created" in ran.out
    assert set(json.loads(settings.read_text())["hooks"]) >= {"Stop", "UserPromptSubmit"}
    assert "/orchestrator-loop Work through the tasks in TODO.md -- --task-file TODO.md" in ran.out
