"""The documentation people find their way in: a README short enough to read, whose first
screen says how to pause a loop, answer its question and resume it after a crash, and a site
that builds with `mkdocs build --strict` (no broken link, no missing page), its CLI reference
written from the parser itself."""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

README = REPO / "README.md"


def test_the_readme_stays_short() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines; the details belong in docs/"


def test_the_readme_first_screen_says_how_to_pause_answer_and_resume_after_a_crash() -> None:
    first_screen = "\n".join(README.read_text().splitlines()[:60])
    for command in ("loopdeck pause", "loopdeck answer", "loopdeck resume"):
        assert command in first_screen, command
    assert "crash" in first_screen.split("loopdeck status", 1)[-1]


def test_every_page_the_readme_links_exists() -> None:
    text = README.read_text()
    linked = {part.split(")", 1)[0] for part in text.split("](")[1:]}
    local = sorted(p for p in linked if not p.startswith(("http", "#")))
    assert local, "the README links the documentation"
    assert [p for p in local if not (REPO / p).exists()] == []


@pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None,
    reason="mkdocs and Material for MkDocs are the docs extra: pip install -e '.[docs]'",
)
def test_the_site_builds_strictly_with_a_cli_reference_from_the_parser(tmp_path: Path) -> None:
    site = tmp_path / "site"
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--quiet",
            "-f",
            REPO / "mkdocs.yml",
            "-d",
            site,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    reference = (site / "cli" / "index.html").read_text()
    assert "<!-- cli-reference -->" not in reference  # the marker was replaced

    from loop.cli import build_parser

    verbs = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert [v for v in verbs.choices if f"loopdeck {v}" not in reference] == []
    assert (site / "screenshots" / "running.svg").is_file()
