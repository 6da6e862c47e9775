"""`loopdeck doctor`: is this machine and this project set up to run loops? One line a check,
what was found, and the fix for whatever fails; exit status 1 when something fails (scripts).

What it looks at: loopdeck itself (a tool install, or a development clone whose moving breaks
installed hooks), the agent CLIs (on PATH, their versions; the one the project uses must be
there), `gh` when a GitHub project is configured, loopdeck's hooks in this project (the Python
and the launcher they name must exist: a clone moved or deleted shows here), the notification
targets (usable here; nothing is sent), the trust record of this folder's loop and of its
project file, the configuration files, git's identity for `run --commit`.

It runs nothing a workspace names: only the known agent CLIs found on PATH are asked their
`--version`, and `gh auth status` when a project is configured. `run` and `start` check the
part that concerns them before a loop starts (`loop.drivers.preflight`), `install` the hooks
it writes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import loop
from loop import agents, trust
from loop.cli import install, protection, settings_file
from loop.core.errors import FileProblem, LoopdeckError
from loop.core.redact import target_shown
from loop.drivers import preflight
from loop.drivers.preflight import notify_problem
from loop.processes import sandbox
from loop.repo import gitstate
from loop.store.config import Config, ConfigError, load
from loop.store.paths import Workspace, find_workspace
from loop.store.state import LoopState, StateError, StateStore

VERSION_TIMEOUT_S = 10.0

OK, FAIL, WARN, INFO = "ok", "FAIL", "warn", "--"


@dataclass(frozen=True)
class Check:
    """One check's outcome: what was checked, what was found, and how to fix a failure."""

    status: str
    name: str
    found: str
    fix: str | None = None


Which = Callable[[str], str | None]
Version = Callable[[str], str | None]


def _version(path: str) -> str | None:
    """The first line `PROGRAM --version` prints (a known agent CLI found on PATH), or None."""
    try:
        done = subprocess.run(
            [path, "--version"],
            capture_output=True,
            text=True,
            timeout=VERSION_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    lines = (done.stdout or done.stderr).strip().splitlines()
    return lines[0][:80] if lines and done.returncode == 0 else None


# --- the checks --------------------------------------------------------------------------------


def itself() -> list[Check]:
    kind, folder = install.where_installed()
    python = f"Python {sys.version.split()[0]} ({sys.executable})"
    if kind == "tool":
        return [Check(OK, "loopdeck", f"{loop.__version__}, installed as a tool in {folder}; {python}")]
    return [
        Check(
            WARN,
            "loopdeck",
            f"{loop.__version__}, runs from a development clone ({folder}); {python}: the hooks "
            "`loopdeck install` writes name this clone by path, so moving or deleting it breaks them",
            f"install loopdeck as a tool (`pipx install {folder}` or `uv tool install {folder}`), then "
            "run `loopdeck install` again in each project",
        )
    ]


def agents_in_use(ws: Workspace, state: object, config: object) -> list[tuple[str, str]]:
    """The agent commands this project uses (`role`, command): the loop's recorded ones, else
    the saved defaults', else Claude Code (the default)."""
    found: list[tuple[str, str]] = []
    runner = getattr(state, "extra", {}).get("runner") if state is not None else None
    if isinstance(runner, dict):
        for role in ("agent", "fallback_agent"):
            if isinstance(runner.get(role), str) and runner[role]:
                found.append((role, runner[role]))
    if not found and isinstance(config, Config):
        for role in ("agent", "fallback_agent"):
            value = config.get(role)
            if isinstance(value, str):
                found.append((role, agents.resolve(value).command))
    return found or [("agent", agents.resolve("claude").command)]


def agent_checks(ws: Workspace, used: list[tuple[str, str]], which: Which, version: Version) -> list[Check]:
    out: list[Check] = []
    used_programs = set()
    for role, command in used:
        option = "--fallback-agent" if role == "fallback_agent" else "--agent"
        program = agents.program(command) or command
        used_programs.add(program)
        problems = preflight._agent_problems(ws.root, command, option, which)
        what = "the fallback agent" if role == "fallback_agent" else "the agent"
        if problems:
            out.append(
                Check(
                    FAIL,
                    f"agent {program}",
                    f"{what} this project uses is missing: {_short(problems[0])}",
                    (agents.install_hint(program) or f"install {program}")
                    + ", or choose another with `agent = …` in your config file (loopdeck config)",
                )
            )
            continue
        path = which(program) if "/" not in program else program
        shown = version(path) if path and program in _known_programs() else None
        out.append(Check(OK, f"agent {program}", f"{what} this project uses: {shown or 'found'} ({path})"))
    for name in agents.NAMES:
        adapter = agents.get(name)
        if any(p in used_programs for p in adapter.programs):
            continue
        path = next((found for p in adapter.programs if (found := which(p))), None)
        if path is None:
            out.append(
                Check(
                    INFO,
                    f"agent {name}",
                    f"{adapter.label} is not installed (not used here): {adapter.install}",
                )
            )
        else:
            out.append(
                Check(
                    INFO,
                    f"agent {name}",
                    f"{adapter.label} {version(path) or ''} ({path})".replace("  ", " "),
                )
            )
    return out


def _short(problem: str) -> str:
    """A preflight line without its advice (the check's fix gives it)."""
    return problem.split(": install ", 1)[0].split(", or name another", 1)[0]


def _known_programs() -> set[str]:
    return {p for name in agents.NAMES for p in agents.get(name).programs}


def gh_check(state: object, which: Which, logged_in: Callable[[str], bool]) -> list[Check]:
    project = None
    if state is not None and getattr(state, "check_github", False):
        project = getattr(state, "github_project_id", None) or None
    if not project:
        return [Check(INFO, "gh", "no GitHub project is configured for this folder's loop: not needed")]
    gh = which("gh")
    if gh is None:
        return [
            Check(
                FAIL,
                "gh",
                f"GitHub project {project} is configured but gh is not installed",
                "install the GitHub CLI (https://cli.github.com), or start the loop with --no-github",
            )
        ]
    if not logged_in(gh):
        return [
            Check(FAIL, "gh", f"gh is not logged in, needed for GitHub project {project}", "gh auth login")
        ]
    return [Check(OK, "gh", f"logged in ({gh}), for GitHub project {project}")]


def hook_checks(ws: Workspace) -> list[Check]:
    """loopdeck's hooks in this project: each names a Python and a launcher that must exist."""
    try:
        hooks = install.installed(ws)
    except FileProblem as exc:
        return [Check(FAIL, "hooks", str(exc), "fix the settings file, then run `loopdeck install`")]
    if not hooks:
        return [
            Check(
                INFO,
                "hooks",
                f"not installed in {ws.root} (needed only for loops inside Claude Code)",
                None,
            )
        ]
    here = install.hook_runner()
    out: list[Check] = []
    for runner in dict.fromkeys(h.runner for h in hooks):
        files = sorted({str(h.settings.relative_to(ws.root)) for h in hooks if h.runner == runner})
        events = sorted({h.event for h in hooks if h.runner == runner})
        where = f"{', '.join(files)} ({', '.join(events)})"
        problems = install.runner_problems(runner)
        if problems:
            out.append(
                Check(
                    FAIL,
                    "hooks",
                    f"the hooks in {where} run a loopdeck that is gone: {'; '.join(problems)} (was it "
                    "moved, deleted or uninstalled?); Claude Code's Stop hook fails on every turn",
                    f"run `loopdeck install` in {ws.root} with the loopdeck you use now: it points the hooks "
                    f"at it ({here})",
                )
            )
        elif runner != here:
            out.append(
                Check(
                    WARN,
                    "hooks",
                    f"the hooks in {where} run another loopdeck ({runner}) than this one ({here})",
                    f"run `loopdeck install` in {ws.root} to point them at this one, if it is the one "
                    "you use",
                )
            )
        else:
            out.append(Check(OK, "hooks", f"installed in {where}: {runner}"))
    return out


@dataclass(frozen=True)
class ClaudeSettings:
    """What Claude Code's settings files say of its sandbox and deny rules (the most local
    file that sets a value wins; deny rules add up)."""

    enabled: bool | None
    where: Path | None
    may_leave: bool | None
    denied: frozenset[str]


def claude_settings(ws: Workspace) -> ClaudeSettings:
    files = [
        ws.claude_dir / settings_file.LOCAL,
        ws.claude_dir / settings_file.SHARED,
        Path(os.path.expanduser("~")) / ".claude" / "settings.json",
    ]
    enabled, where, leave, denied = None, None, None, set()
    for path in files:
        try:
            data = settings_file.load(path)
        except (FileProblem, OSError):
            continue  # the hooks check says what is wrong with the file
        rules = protection.walk(data, "permissions.deny")
        denied |= {r for r in rules if isinstance(r, str)} if isinstance(rules, list) else set()
        value = protection.walk(data, "sandbox.enabled")
        if enabled is None and isinstance(value, bool):
            enabled, where = value, path
        may_leave = protection.walk(data, "sandbox.allowUnsandboxedCommands")
        if leave is None and isinstance(may_leave, bool):
            leave = may_leave
    return ClaudeSettings(enabled, where, leave, frozenset(denied))


def claude_sandbox_checks(
    ws: Workspace, which: Which = shutil.which, platform: str | None = None
) -> list[Check]:
    """Claude Code's own Bash sandbox: whether the settings it reads turn it on, and what keeps
    it from starting here; and whether loopdeck's deny rules are in place."""
    found = claude_settings(ws)
    enabled, where, leave, denied = found.enabled, found.where, found.may_leave, found.denied
    out: list[Check] = []
    wanted = protection.deny_rules(ws)
    missing = [r for r in wanted if r not in denied]
    if not missing:
        out.append(
            Check(OK, "claude rules", "the agent's Edit and Write tools may not change loopdeck's files")
        )
    elif install.installed_quietly(ws):
        out.append(
            Check(
                WARN,
                "claude rules",
                f"{len(missing)} of loopdeck's {len(wanted)} deny rules are missing from the settings "
                f"(first: {missing[0]}): the agent's Edit and Write tools may change those files",
                f"run `loopdeck install` in {ws.root}",
            )
        )
    shown = _shown(where, ws) if where is not None else None
    if not enabled:
        said = (
            f"off ({shown} sets sandbox.enabled to false)" if shown else "off (no settings file turns it on)"
        )
        out.append(
            Check(
                INFO,
                "claude sandbox",
                f"{said}: the agent's Bash commands are not confined (`loopdeck install --sandbox` "
                "turns it on)",
                None,
            )
        )
        return out
    missing_parts = protection.sandbox_missing(which, platform)
    if missing_parts:
        out.append(
            Check(
                FAIL,
                "claude sandbox",
                f"on in {shown}, but it cannot start here: {'; '.join(missing_parts)}; Claude Code runs "
                "the agent's commands unsandboxed",
                "install them (Debian/Ubuntu: apt-get install bubblewrap socat)",
            )
        )
    elif leave is not False:
        out.append(
            Check(
                WARN,
                "claude sandbox",
                f"on in {shown}, but a command may still run outside it (sandbox.allowUnsandboxedCommands "
                "is not false)",
                f"run `loopdeck install --sandbox` in {ws.root}, or set it to false",
            )
        )
    else:
        out.append(Check(OK, "claude sandbox", f"on in {shown}: the agent's Bash commands run in it"))
    return out


def _shown(path: Path, ws: Workspace) -> str:
    try:
        return str(path.relative_to(ws.root))
    except ValueError:
        home = os.path.expanduser("~")
        return "~/" + str(path.relative_to(home)) if path.is_relative_to(home) else str(path)


def sandbox_check(config: object, ws: Workspace | None = None) -> list[Check]:
    """loopdeck's own sandbox for the agent turns it starts (`run`, `start`): the mode saved in
    the configuration (or LOOPDECK_SANDBOX, else auto) and what can start on this machine."""
    saved = config.get("sandbox") if isinstance(config, Config) else None
    net = not (isinstance(config, Config) and config.get("sandbox_net") is False)
    try:
        mode = sandbox.choose(None, saved)
    except LoopdeckError as exc:
        return [Check(FAIL, "sandbox", str(exc), "set sandbox to auto, on or off (`loopdeck config`)")]
    if mode == "off":
        origin = config.origin("sandbox") if isinstance(config, Config) else None
        where = origin.shown if origin is not None and saved == "off" else sandbox.ENV_MODE
        return [
            Check(
                INFO,
                "sandbox",
                f"off — turned off ({where}): the agent turns loopdeck starts are not confined",
            )
        ]
    status = sandbox.detect("auto")
    if status.on:
        shown = f"on ({status.why}, network {'on' if net else 'off'})"
        if status.kind == "bwrap" and os.geteuid() == 0 and ws is not None and claude_settings(ws).enabled:
            return [
                Check(
                    WARN,
                    "sandbox",
                    f"{shown}; as root, Claude Code's own sandbox cannot start inside it (bwrap: setting up "
                    "uid map: Operation not permitted), so every command of the agents `run` starts fails",
                    "run loopdeck as another user, or choose one sandbox: `--sandbox off` for run and "
                    "start, or `loopdeck install` again without --sandbox after `--uninstall`",
                )
            ]
        return [Check(OK, "sandbox", shown)]
    why = status.why.removeprefix("off: ")
    if mode == "on":
        return [
            Check(
                FAIL,
                "sandbox",
                f"off — {why}; the sandbox is set to on, so run and start refuse to begin",
                sandbox.INSTALL_HINT,
            )
        ]
    return [Check(WARN, "sandbox", f"off — {why}", sandbox.INSTALL_HINT)]


def notify_checks(targets: list[tuple[str, str]], which: Which) -> list[Check]:
    if not targets:
        return [Check(INFO, "notify", "no notification target is configured")]
    out = []
    for target, where in dict.fromkeys(targets):
        problem = notify_problem(target, which)
        name = f"notify {target_shown(target)}"
        if problem:
            out.append(Check(FAIL, name, f"{problem} (from {where})", _notify_fix(target)))
        else:
            out.append(Check(OK, name, f"usable here (from {where}; nothing was sent)"))
    return out


def _notify_fix(target: str) -> str:
    if target == "desktop":
        return "install notify-send (Debian/Ubuntu: apt install libnotify-bin), or use another target"
    return "correct the target where it is set (`loopdeck config` shows where), or remove it"


def trust_checks(ws: Workspace, state: object, config: object, error: str | None) -> list[Check]:
    out: list[Check] = []
    if error is not None:
        out.append(
            Check(
                FAIL, "loop", f"the state file is corrupt: {error}", "loopdeck resume (restore or rebuild it)"
            )
        )
    elif state is None:
        out.append(Check(INFO, "trust", "no loop in this folder"))
    else:
        assert isinstance(state, LoopState)
        pending = trust.unconfirmed(ws, state)
        if pending:
            listed = "; ".join(pending[:4]) + (f"; and {len(pending) - 4} more" if len(pending) > 4 else "")
            out.append(
                Check(
                    FAIL,
                    "trust",
                    f"this folder's loop names what nobody on this machine confirmed: {listed}; "
                    "nothing of it runs",
                    "review and confirm it: loopdeck trust",
                )
            )
        else:
            out.append(Check(OK, "trust", "this folder's loop was confirmed on this machine"))
    if isinstance(config, Config) and config.project.values:
        pending = trust.config_unconfirmed(ws, config.from_workspace())
        if pending:
            out.append(
                Check(
                    WARN,
                    "trust",
                    f"{config.project.shown} names values nobody on this machine confirmed "
                    f"({'; '.join(pending[:4])}): run and start refuse them",
                    "review them with `loopdeck config`, confirm with `loopdeck config --trust`",
                )
            )
        else:
            out.append(
                Check(OK, "trust", f"the values of {config.project.shown} were confirmed on this machine")
            )
    return out


def git_checks(ws: Workspace) -> list[Check]:
    try:
        missing = gitstate.missing_identity(ws.root)
    except Exception:  # not a repository git can read: nothing to say here
        return []
    if missing:
        return [
            Check(
                WARN,
                "git",
                "git has no identity (user.name, user.email): `run --commit` commits as "
                "loopdeck <loopdeck@localhost>",
                gitstate.IDENTITY_HELP,
            )
        ]
    return []


def report(
    ws: Workspace,
    *,
    which: Which = shutil.which,
    version: Version = _version,
    gh_logged_in: Callable[[str], bool] | None = None,
) -> list[Check]:
    """Every check, in the order a person fixes things."""
    checks = itself()
    config = None
    try:
        config = load(ws.root)
    except ConfigError as exc:
        checks.append(Check(FAIL, "config", str(exc), "correct the file (`loopdeck config` reads it again)"))
    else:
        for file in (config.user, config.project):
            if file.ignored:
                checks.append(Check(WARN, "config", f"{file.shown} is not used: {file.ignored}"))
            elif file.exists:
                checks.append(Check(OK, "config", f"{file.shown} reads ({len(file.values)} value(s))"))
    state, error = None, None
    try:
        state = StateStore(ws).read()
    except StateError as exc:
        error = str(exc)
    checks += agent_checks(ws, agents_in_use(ws, state, config), which, version)
    checks += gh_check(state, which, gh_logged_in or preflight._gh_logged_in)
    checks += hook_checks(ws)
    checks += claude_sandbox_checks(ws, which)
    checks += sandbox_check(config, ws)
    targets = [(t, str(ws.state)) for t in (state.notify if state is not None else [])]
    if config is not None and config.get("notify"):
        origin = config.origin("notify")
        targets += [(t, origin.shown if origin else "config") for t in config.get("notify")]
    checks += notify_checks(targets, which)
    checks += trust_checks(ws, state, config, error)
    checks += git_checks(ws)
    return checks


def cmd_doctor(args: argparse.Namespace) -> int:
    ws = Workspace(Path(args.workspace).resolve()) if args.workspace else find_workspace()
    checks = report(ws)
    failed = [c for c in checks if c.status == FAIL]
    if args.json:
        data = {"workspace": str(ws.root), "ok": not failed, "checks": [asdict(c) for c in checks]}
        print(json.dumps(data, indent=2, ensure_ascii=False))
        return 1 if failed else 0
    print(f"loopdeck doctor: {ws.root}")
    for check in checks:
        print(f"  {check.status:<5} {check.name}: {check.found}")
        if check.fix and check.status in (FAIL, WARN):
            print(f"        fix: {check.fix}")
    summary = f"{len(failed)} problem(s) to fix" if failed else "nothing to fix"
    warned = sum(1 for c in checks if c.status == WARN)
    print(f"loopdeck doctor: {summary}" + (f", {warned} warning(s)" if warned else ""))
    return 1 if failed else 0


def require_usable() -> None:
    """Raise when this loopdeck could not run a hook (no interpreter path, no launcher): what
    `install` checks before it writes anything."""
    problems = install.runner_problems(install.hook_runner())
    if problems:
        raise LoopdeckError(f"this loopdeck cannot run hooks: {'; '.join(problems)}")
