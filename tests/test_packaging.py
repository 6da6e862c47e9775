"""loopdeck as a tool people install once: the wheel the README's `python -m build` makes holds
every package and the monitor's style sheet, and installed into an environment of its own it
works from an empty folder with no clone anywhere on the path (`--version`, `doctor`, `demo
--headless`); when that environment moves, `doctor` in a project whose hooks it wrote says what
broke and how to fix it.

Offline: the wheel is built without an isolated build environment (setuptools is among the dev
extras) from a copy of the sources, and installed without its dependencies, which the fresh
environment finds in this test run's own site folder (a path, so nothing of this checkout's
editable install comes along)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO

pytest.importorskip("build", reason="the dev extras' `build` makes the wheel: pip install -e '.[dev]'")


def _sh(*argv: str | Path, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=120, **kwargs)  # type: ignore[call-overload,no-any-return]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, source / name)
    for package in ("loop", "tui", "tools"):  # tools/ too: the package list must leave it out
        shutil.copytree(REPO / package, source / package, ignore=shutil.ignore_patterns("__pycache__"))
    dist = tmp_path_factory.mktemp("dist")
    built = _sh(
        sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", dist, source, cwd=source
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (found,) = dist.glob("loopdeck-*.whl")
    return found


def test_the_wheel_holds_every_package_and_the_style_sheet(wheel: Path) -> None:
    import loop

    names = set(zipfile.ZipFile(wheel).namelist())
    packages = sorted(
        str(p.parent.relative_to(REPO))
        for root in ("loop", "tui")
        for p in (REPO / root).rglob("__init__.py")
    )
    for package in packages:
        assert f"{package}/__init__.py" in names, package
    modules = [str(p.relative_to(REPO)) for root in ("loop", "tui") for p in (REPO / root).rglob("*.py")]
    assert sorted(m for m in modules if m not in names) == []
    assert "tui/app.tcss" in names and "loop/launcher.py" in names
    assert wheel.name == f"loopdeck-{loop.__version__}-py3-none-any.whl"
    meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(wheel).read(meta).decode()
    assert "Requires-Dist: textual-serve" in text  # its page and scripts ship in its own package


def test_the_wheel_leaves_the_screenshot_fixtures_out(wheel: Path) -> None:
    """The scenarios that write state files and git repositories for the screenshots are a
    development tool (`python tools/screenshots.py`), not something an install carries."""
    names = zipfile.ZipFile(wheel).namelist()
    assert (REPO / "tools" / "screenshots.py").is_file()
    assert [n for n in names if n.startswith("tools/") or n.endswith("screenshots.py")] == []


def test_the_command_enters_through_loop_and_finds_the_monitor_by_entry_point(wheel: Path) -> None:
    """`loopdeck` is `loop.cli:main`; the verbs that open the monitor are tui's, named as entry
    points, so `loop` never imports `tui`."""
    archive = zipfile.ZipFile(wheel)
    entry = next(n for n in archive.namelist() if n.endswith(".dist-info/entry_points.txt"))
    text = archive.read(entry).decode()
    assert "loopdeck = loop.cli:main" in text
    assert "[loopdeck.monitor]" in text
    for verb in ("tui", "serve", "demo"):
        assert f"{verb} = tui.cli:cmd_{verb}" in text


def test_installed_as_a_tool_it_works_from_an_empty_folder_and_doctor_finds_moved_hooks(
    wheel: Path, tmp_path: Path
) -> None:
    venv = tmp_path / "tools" / "loopdeck"
    made = _sh(sys.executable, "-m", "venv", "--without-pip", venv)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    installed = _sh(
        sys.executable,
        "-m",
        "pip",
        "--python",
        python,
        "install",
        "--quiet",
        "--no-deps",
        "--no-index",
        wheel,
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    site = Path(_sh(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())
    (site / "zz-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")  # textual and co.

    empty = tmp_path / "empty"
    empty.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    env = {
        "PATH": f"{venv / 'bin'}:/usr/bin:/bin",
        "HOME": str(home),
        "LOOPDECK_TRUST_HOME": os.environ["LOOPDECK_TRUST_HOME"],
        "LOOPDECK_DEMO_PACE": "0 0",
        "LANG": "C.UTF-8",
        **{k: v for k, v in os.environ.items() if k.startswith("GIT_")},
    }
    where = _sh(python, "-c", "import loop, tui; print(loop.__file__, tui.__file__)", cwd=empty, env=env)
    assert str(REPO) not in where.stdout and str(site) in where.stdout, where.stdout + where.stderr

    version = _sh("loopdeck", "--version", cwd=empty, env=env)
    assert version.returncode == 0, version.stderr
    assert version.stdout.startswith("loopdeck ") and "installed as a tool" in version.stdout, version.stdout

    checked = _sh("loopdeck", "doctor", "--json", cwd=empty, env=env)
    assert checked.returncode in (0, 1) and "Traceback" not in checked.stderr, checked.stderr
    report = json.loads(checked.stdout)
    first = report["checks"][0]
    assert first["status"] == "ok" and "installed as a tool" in first["found"]

    demo = _sh("loopdeck", "demo", "--headless", cwd=empty, env=env)
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    assert "completed" in demo.stdout

    # The tool's hooks in a project; then its environment moves (a reinstall elsewhere, a
    # deleted folder): doctor says what broke and how to fix it.
    project = tmp_path / "project"
    project.mkdir()
    hooked = _sh("loopdeck", "install", cwd=project, env=env)
    assert hooked.returncode == 0, hooked.stderr
    assert str(python) in (project / ".claude" / "settings.local.json").read_text()
    assert "development clone" not in hooked.stderr
    venv.rename(venv.with_name("moved"))
    from loop.cli import doctor
    from loop.store.paths import Workspace

    checks = [c for c in doctor.report(Workspace(project)) if c.name == "hooks"]
    assert [c.status for c in checks] == ["FAIL"], checks
    assert f"{python} does not exist" in checks[0].found and "launcher.py does not exist" in checks[0].found
    assert checks[0].fix is not None and "loopdeck install" in checks[0].fix and str(project) in checks[0].fix


def test_the_screenshot_tool_runs_as_the_docs_say_from_any_folder(tmp_path: Path) -> None:
    """`python tools/screenshots.py` from a clone: the file finds the project's own modules (its
    `tools` package included) wherever it is started from. Loaded, not run: shooting every
    picture takes a minute."""
    script = REPO / "tools" / "screenshots.py"
    load = f"import runpy; runpy.run_path({str(script)!r}, run_name='loaded')"
    done = subprocess.run([sys.executable, "-I", "-c", load], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
