"""Verification commands: the allowlist cannot be talked around, and a run can be stopped.

The table of refused and allowed commands is tests/test_verify_bypass.py."""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

import pytest

from loop import verify
from loop.verify import argv as verify_argv
from loop.verify import options as verify_options
from loop.verify.argv import Spec, inside, path_operand, read, table


def test_a_script_named_like_an_allowed_program_is_refused(tmp_path: Path) -> None:
    fake = tmp_path / "elsewhere" / "pytest"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\ntouch pwned\n")
    fake.chmod(0o755)
    with pytest.raises(verify.CommandRefused, match="not in the allowlist"):
        verify.check(f"{fake} -q", cwd=tmp_path)
    with pytest.raises(verify.CommandRefused, match="not in the allowlist"):
        verify.check("elsewhere/pytest -q", cwd=tmp_path)


def test_the_absolute_path_of_an_allowed_program_is_accepted(tmp_path: Path) -> None:
    item = verify.check(f"{sys.executable} check.py", [f"{sys.executable} check.py"], cwd=tmp_path)
    assert item.argv == (sys.executable, "check.py")


def test_a_shell_runs_only_for_the_exact_command_allowed(tmp_path: Path) -> None:
    command = "true | true > out.txt"
    with pytest.raises(verify.CommandRefused, match="needs a shell"):
        verify.check(command, ["true"], cwd=tmp_path)
    with pytest.raises(verify.CommandRefused):
        verify.check(command + " ; touch x", [f"sh: {command}"], cwd=tmp_path)
    item = verify.check(command, [f"sh: {command}"], cwd=tmp_path)
    assert item.argv is None
    assert verify.run(item, tmp_path, timeout=30).passed
    assert (tmp_path / "out.txt").exists()


def test_accepted_arguments_reach_the_program_without_a_shell(tmp_path: Path) -> None:
    item = verify.check(
        f"{sys.executable} -c 'import sys; open(sys.argv[1], \"w\").write(sys.argv[1])' 'a b;c'",
        [f"{sys.executable} -c"],
        cwd=tmp_path,
    )
    outcome = verify.run(item, tmp_path, timeout=30)
    assert outcome.passed, outcome.tail
    assert (tmp_path / "a b;c").read_text() == "a b;c"


# --- paths: resolved as the program would, symlinks and `..` included -------------------------


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """A workspace with a symlink inside it pointing out of it, and one pointing within it."""
    root = tmp_path / "ws"
    (root / "tests").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (root / "out").symlink_to(tmp_path / "outside")
    (root / "alias").symlink_to(root / "tests")
    return root


def test_a_path_is_inside_only_once_symlinks_and_dots_are_resolved(ws: Path, tmp_path: Path) -> None:
    root = os.path.realpath(ws)
    for path in (
        "tests/test_x.py",
        ".",
        "",
        "-",
        "tests/../tests",
        "alias/test_x.py",
        str(ws / "tests"),
        os.devnull,
    ):
        assert inside(path, root), path
    outside = ("..", "../ws2", "tests/../../x", "out", "out/test_x.py", "alias/../out/x", str(tmp_path), "/")
    for path in (*outside, "~/x", "~", "$HOME/x", "tests/$X"):
        assert not inside(path, root), path


def test_a_workspace_reached_through_a_symlink_is_still_itself(ws: Path, tmp_path: Path) -> None:
    link = tmp_path / "link-to-ws"
    link.symlink_to(ws)
    assert verify.check(f"pytest {ws / 'tests'}", cwd=link).argv is not None
    assert verify.check(f"pytest {link / 'tests'}", cwd=ws).argv is not None


@pytest.mark.parametrize(
    "command",
    [
        "pytest out/test_evil.py",
        "pytest out",
        "pytest alias/../out/x.py",
        "pytest tests/../../outside/test_x.py",
        "pytest --junitxml=out/junit.xml",
        "mypy --cache-dir=out/cache loop",
        "make -f out/Makefile",
        "make -C out",
        "ruff check --config out/ruff.toml .",
        "cargo test --manifest-path out/Cargo.toml",
        "npm test -- out/x.test.js",
    ],
)
def test_a_symlink_inside_the_workspace_does_not_carry_a_path_out(ws: Path, command: str) -> None:
    with pytest.raises(verify.CommandRefused, match="outside the workspace"):
        verify.check(command, cwd=ws)


def test_without_a_workspace_paths_are_judged_against_the_current_directory(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ws)
    assert verify.check(f"pytest {ws / 'tests'}").argv is not None
    with pytest.raises(verify.CommandRefused, match="outside the workspace"):
        verify.check("pytest out/test_x.py")


# --- reading options as the program does -------------------------------------------------------

GETOPT = Spec(
    "prog",
    table("""
        code   required -E --eval | runs it
        path   required -f --file
        value  optional -j --jobs
        value  next     --debug
        flag   none     -s -k --silent --keep-going
    """),
    operand=path_operand("names"),
)


def _uses(spec: Spec, line: str) -> list[tuple[str | None, tuple[str, ...]]]:
    return [(u.name, u.values) for u in read(spec, line.split())]


def test_bundled_short_options_give_the_last_one_its_value() -> None:
    assert _uses(GETOPT, "-skE code t") == [("-s", ()), ("-k", ()), ("-E", ("code",)), (None, ("t",))]
    assert _uses(GETOPT, "-sfFILE t") == [("-s", ()), ("-f", ("FILE",)), (None, ("t",))]
    assert _uses(GETOPT, "-j4 -j t") == [("-j", ("4",)), ("-j", ()), (None, ("t",))]
    # argparse and clap drop the `=` of `-f=FILE`, getopt keeps it: both readings are judged
    assert _uses(GETOPT, "-f=FILE") == [("-f", ("=FILE", "FILE"))]


def test_an_unknown_short_option_is_read_both_ways() -> None:
    # -z might take the rest as its value, or be a flag followed by more flags: judged both ways
    assert _uses(GETOPT, "-zE code") == [("-z", ("E",)), ("-E", ("code",))]


def test_long_options_are_read_whole_abbreviated_and_up_to_the_double_dash() -> None:
    assert _uses(GETOPT, "--eval=x --file y t") == [("--eval", ("x",)), ("--file", ("y",)), (None, ("t",))]
    # an abbreviation is a guess (the table may miss an exact name): the next word is judged
    # as its value, then read again
    assert _uses(GETOPT, "--ev x") == [("--eval", ("x",)), (None, ("x",))]
    assert _uses(GETOPT, "--jo=3") == [("--jobs", ("3",))]
    assert _uses(GETOPT, "--debug -s --debug log") == [("--debug", ()), ("-s", ()), ("--debug", ("log",))]
    assert _uses(GETOPT, "-- -E --eval") == [(None, ("-E",)), (None, ("--eval",))]
    assert [u.passed for u in read(GETOPT, ["t", "--", "u"])] == [False, True]


def test_an_ambiguous_abbreviation_is_read_as_the_riskiest_it_could_be() -> None:
    spec = Spec("prog", table("flag none --keep-going\n code required --kernel"), operand=path_operand("n"))
    assert _uses(spec, "--ke x")[0] == ("--kernel", ("x",))


def test_go_flags_take_one_or_two_dashes_and_whole_names_only() -> None:
    go = verify_options.RULES["go"]
    ctx = verify_argv.Context("/nonexistent-workspace", "go")
    assert go(["test", "--exec=/x", "./..."], [], ctx) is not None
    assert go(["test", "-exe=x", "./..."], [], ctx) is None  # go has no abbreviations


def test_a_table_line_that_is_not_an_option_is_an_error() -> None:
    with pytest.raises(ValueError, match="not an option line"):
        table("code sometimes -x")


def test_pytest_loads_a_plugin_from_any_word_that_starts_with_dash_p(tmp_path: Path) -> None:
    # pytest's early plugin scan reads every word, before its parser: after `--`, after -k
    for command in ("pytest -- -pevil", "pytest -k x -pevil", "pytest -x -p evil"):
        with pytest.raises(verify.CommandRefused, match="loads a plugin"):
            verify.check(command, cwd=tmp_path)


def test_every_program_with_rules_is_one_the_allowlist_knows() -> None:
    allowed = {verify_options.program(e.split())[0] for e in verify.DEFAULT_ALLOW}
    assert set(verify_options.RULES) - allowed <= {"git", "find", "py.test"}
    assert allowed - set(verify_options.RULES) == {"true"}


# --- who may unlock a refused option -----------------------------------------------------------


def test_only_an_allow_entry_equal_to_the_whole_command_unlocks_its_options(tmp_path: Path) -> None:
    command = "pytest -p xdist -n 2"
    for allow in ([], ["pytest"], ["pytest -p"], ["pytest -p xdist"], ["sh: pytest -p xdist -n 2"]):
        with pytest.raises(verify.CommandRefused, match="loads a plugin"):
            verify.check(command, allow, cwd=tmp_path)
    assert verify.check(command, [command], cwd=tmp_path).argv == ("pytest", "-p", "xdist", "-n", "2")
    assert verify.check(command, ["pytest  -p 'xdist' -n 2"], cwd=tmp_path).argv is not None  # same words
    with pytest.raises(verify.CommandRefused, match="loads a plugin"):
        verify.check(command + " -q", [command], cwd=tmp_path)  # the entry is now only its start


def test_an_exact_allow_entry_never_unlocks_a_shell_or_a_danger(tmp_path: Path) -> None:
    with pytest.raises(verify.CommandRefused, match="needs a shell"):
        verify.check("pytest -p evil | tee x", ["pytest -p evil | tee x"], cwd=tmp_path)
    with pytest.raises(verify.CommandRefused, match="force-pushes"):
        verify.check("git push --force", ["git push --force"], cwd=tmp_path)


def test_an_exact_allow_entry_matches_the_program_where_it_is(tmp_path: Path) -> None:
    fake = tmp_path / "bin" / "make"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    # `make` allowed exactly with its risky assignment does not unlock another file named make
    with pytest.raises(verify.CommandRefused, match="not in the allowlist"):
        verify.check(f"{fake} 'x:=$(shell true)'", ["make 'x:=$(shell true)'"], cwd=tmp_path)


@pytest.mark.parametrize(
    ("command", "boundary"),
    [
        ("pytest -p evil", "The allowlist keeps the commands a person types inside the workspace; a person"),
        ("python evil.py", "is not in the allowlist"),
        ("pytest | tee x", "A person can let this exact command run through /bin/sh with"),
    ],
)
def test_a_refusal_says_what_a_person_can_do_without_telling_the_agent(
    command: str, boundary: str, tmp_path: Path
) -> None:
    with pytest.raises(verify.CommandRefused) as refused:
        verify.check(command, cwd=tmp_path)
    message = str(refused.value)
    assert boundary in message
    assert re.search(
        r"`loopdeck run --verify-allow '(sh: )?" + re.escape(command) + r"'` in a terminal", message
    )
    assert not re.search(r"\b(you|your|trust)\b", message, re.IGNORECASE)
    assert "state file" not in message


def test_a_missing_program_is_reported_not_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "nothing-here"))
    outcome = verify.run(verify.Check("pytest -q", ("pytest", "-q")), tmp_path, timeout=30)
    assert outcome.exit_code == 127 and "not found" in outcome.tail


CHILD = """
import os, subprocess, sys, time
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
with open("pids.tmp", "w") as f:
    f.write(f"{os.getpid()} {grandchild.pid}")
os.rename("pids.tmp", "pids")
time.sleep(30)
"""


def test_an_interrupted_verification_ends_promptly_with_its_whole_group(tmp_path: Path) -> None:
    (tmp_path / "child.py").write_text(CHILD)
    item = verify.Check("child", (sys.executable, "child.py"))
    pids = tmp_path / "pids"
    outcome = verify.run(item, tmp_path, timeout=60, interrupted=pids.exists, poll=0.05)
    assert outcome.interrupted and not outcome.passed
    assert outcome.duration_s < 20
    for pid in (int(p) for p in pids.read_text().split()):
        deadline = time.monotonic() + 10
        while _running(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not _running(pid), f"pid {pid} survived the interrupted verification"


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
    except OSError:
        return False


def test_output_tail_is_redacted(tmp_path: Path) -> None:
    code = "print('OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwx')"
    outcome = verify.run(verify.Check("p", (sys.executable, "-c", code)), tmp_path, timeout=30)
    assert "sk-abcdefghij" not in outcome.tail and "[REDACTED]" in outcome.tail


def test_checks_a_signal_ended_are_no_pass(tmp_path: Path) -> None:
    """The runner was told to stop while its checks ran: what they checked is not known to
    pass, so nothing may land or complete on them (a rebase landing, a pull request's merge)."""
    from types import SimpleNamespace

    from loop.core.model import Settings
    from loop.drivers.children import Children, Signals
    from loop.drivers.verification import INTERRUPTED, Verification

    signals = Signals()
    signals.caught = 15
    tally = SimpleNamespace(verify_failures=0)
    session = SimpleNamespace(
        ws=SimpleNamespace(root=tmp_path),
        options=SimpleNamespace(verify_timeout=60.0),
        event=lambda *_args: None,
        tally=tally,
    )
    turns = SimpleNamespace(sandbox_for=lambda _cwd, beside: None)
    checks = Verification(session, Settings(), turns, Children(), signals)  # type: ignore[arg-type]
    checks.checks = [verify.Check("slow", (sys.executable, "-c", "import time; time.sleep(30)"))]
    assert checks.run(3) == INTERRUPTED
    assert checks.validation is None and tally.verify_failures == 0
