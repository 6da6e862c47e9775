"""`loopdeck completion bash|zsh|fish`: scripts the shells accept that complete the verbs and
options of the parser itself, folders for `-C`. Bash's is run for real (it is on every machine
this runs on); zsh's and fish's are checked by their shells where they are installed."""

from __future__ import annotations

import argparse
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from loop.cli import build_parser
from loop.cli.completion import script
from tests.conftest import Ran, run_loopdeck

BASH = shutil.which("bash")


def _verbs() -> set[str]:
    parser = build_parser()
    verbs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return set(verbs.choices)


def _bash_complete(script_file: Path, words: list[str], cwd: Path) -> list[str]:
    """What bash offers for the last word of `words`, by the function the script registered."""
    quoted = " ".join(f"'{w}'" for w in words)
    program = (
        f"source {script_file}\n"
        "func=$(complete -p loopdeck | sed -E 's/.* -F ([^ ]+) .*/\\1/')\n"
        f"COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}\n"
        'COMP_LINE="${COMP_WORDS[*]}"; COMP_POINT=${#COMP_LINE}\n'
        '"$func" loopdeck "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"\n'
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    done = subprocess.run(
        [BASH or "bash", "--norc", "--noprofile", "-c", program],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return [line.strip() for line in done.stdout.splitlines() if line.strip()]


@pytest.mark.skipif(BASH is None, reason="no bash on this machine")
def test_the_bash_script_completes_verbs_options_and_folders(cli: Callable[..., Ran], tmp_path: Path) -> None:
    ran = cli("completion", "bash")
    assert ran.code == 0 and ran.err == ""
    script_file = tmp_path / "loopdeck.bash"
    script_file.write_text(ran.out)
    checked = subprocess.run([BASH or "bash", "-n", str(script_file)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    offered = set(_bash_complete(script_file, ["loopdeck", ""], tmp_path))
    assert _verbs() <= offered and {"init", "completion", "run", "status"} <= offered
    assert set(_bash_complete(script_file, ["loopdeck", "re"], tmp_path)) == {"report", "resume", "restore"}
    assert _bash_complete(script_file, ["loopdeck", "run", "--max-it"], tmp_path) == ["--max-iterations"]
    assert set(_bash_complete(script_file, ["loopdeck", "completion", ""], tmp_path)) == {
        "bash",
        "zsh",
        "fish",
    }
    place = tmp_path / "place"
    (place / "project-a").mkdir(parents=True)
    (place / "project-file").write_text("")
    assert _bash_complete(script_file, ["loopdeck", "-C", "proj"], place) == ["project-a"]


def test_each_shell_gets_a_script_that_names_every_verb() -> None:
    for shell in ("bash", "zsh", "fish"):
        text = script(shell)
        for verb in _verbs():
            assert verb in text, (shell, verb)


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_the_shell_accepts_its_script(shell: str, tmp_path: Path) -> None:
    program = shutil.which(shell)
    if program is None:
        pytest.skip(f"no {shell} on this machine (apt-get install {shell})")
    script_file = tmp_path / f"loopdeck.{shell}"
    script_file.write_text(script(shell))
    checked = subprocess.run([program, "-n", str(script_file)], capture_output=True, text=True, timeout=30)
    assert checked.returncode == 0, checked.stderr
    if shell == "fish":
        offered = subprocess.run(
            [program, "--no-config", "-c", f"source {script_file}; complete -C 'loopdeck '"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout
        assert _verbs() <= {line.split("\t")[0] for line in offered.splitlines()}


def test_an_unknown_shell_is_a_usage_error() -> None:
    ran = run_loopdeck("completion", "tcsh")
    assert ran.returncode == 2
    assert "loopdeck completion: error: argument shell: invalid choice: 'tcsh'" in ran.stderr
