"""The command line as a person meets it: every verb says what it does in its `--help`, a mistake
after a verb is answered with that verb's usage, and `install` says whether it created the
settings file or changed one that was there."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator

import pytest

from loop.cli import build_parser, main
from loop.store.paths import Workspace
from tests.conftest import Ran


def _verbs(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every verb and sub-verb (`hook stop`, `temporal dev`), with its parser."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, verb in action.choices.items():
                yield (*path, name), verb
                yield from _verbs(verb, (*path, name))


VERBS = sorted(path for path, _parser in _verbs(build_parser()))


def test_every_verb_is_found() -> None:
    names = {" ".join(path) for path in VERBS}
    assert {"run", "log", "demo", "install", "init", "completion", "hook stop", "temporal dev"} <= names


@pytest.mark.parametrize("path", VERBS, ids=" ".join)
def test_every_verb_describes_itself_in_its_help(
    path: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as ended:
        main([*path, "--help"])
    assert ended.value.code == 0
    out = capsys.readouterr().out
    usage, _blank, rest = out.partition("\n\n")
    assert usage.startswith(f"usage: loopdeck {' '.join(path)}")
    description = rest.splitlines()[0]
    assert description and not description.startswith(("positional arguments", "options")), out
    assert description[0].isupper(), description


@pytest.mark.parametrize("path", VERBS, ids=" ".join)
def test_a_bad_option_after_a_verb_prints_that_verbs_usage(
    path: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as ended:
        main([*path, "--no-such-option"])
    assert ended.value.code == 2
    err = capsys.readouterr().err
    prog = f"loopdeck {' '.join(path)}"
    assert err.startswith(f"usage: {prog} "), err
    assert f"\n{prog}: error: " in err, err


def test_the_error_names_the_unknown_option(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["log", "-n", "5", "--bogus"])
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == "loopdeck log: error: unrecognized arguments: --bogus"
    with pytest.raises(SystemExit):
        main(["--bogus", "status"])  # before the verb: the top-level usage, as before
    assert capsys.readouterr().err.splitlines()[-1] == "loopdeck: error: unrecognized arguments: --bogus"


def test_local_and_shared_exclude_each_other(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ended:
        main(["install", "--local", "--shared"])
    assert ended.value.code == 2
    assert (
        "loopdeck install: error: argument --shared: not allowed with argument --local"
        in capsys.readouterr().err
    )


def test_install_says_created_for_a_new_settings_file(cli: Callable[..., Ran], ws: Workspace) -> None:
    first = cli("install")
    assert first.code == 0, first.err
    assert first.out.splitlines()[0].endswith("settings.local.json created"), first.out
    again = cli("install")
    assert "settings.local.json already up to date" in again.out
    (ws.claude_dir / "settings.json").write_text('{"model": "the team\'s"}\n')  # the person's own file
    shared = cli("install", "--shared")
    assert shared.out.splitlines()[0].endswith("settings.json updated"), shared.out
