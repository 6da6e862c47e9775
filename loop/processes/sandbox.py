"""Every agent turn in a sandbox: the workspace writable, loopdeck's own files not.

An agent loopdeck starts may edit its workspace and run what it likes there; it must not
steer the loop that drives it (the state file, the journal, the control queue), rewrite its
own permissions (`.claude/settings*.json`), plant a git hook or a `core.fsmonitor` command
that the runner's next `git` would run, read the person's trust records, or leave a process
behind. On Linux the turn runs under bubblewrap (`bwrap`): the whole file system read-only,
the workspace (or the task's worktree) and the agent CLIs' own folders writable, loopdeck's
files mounted read-only on top, its config and trust folders hidden, a private `/tmp`, and a
PID namespace of its own, so everything the agent started (`setsid` children, daemons) dies
with the turn. On macOS the same rules are a `sandbox-exec` profile. `--sandbox auto` (the
default) uses whichever can start here and says so when none can; `on` refuses to run
without one; `off` runs the agent as it is.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from loop.core.errors import LoopdeckError
from loop.core.model import RUNNER_ENV
from loop.store.gitexclude import repository

MODES = ("auto", "on", "off")
ENV_MODE = "LOOPDECK_SANDBOX"
"""The mode when the command line gives none (it wins over the configuration files): how the
test suite and CI, whose scripted agents live outside their workspaces, run without one."""
SANDBOX_EXEC = "/usr/bin/sandbox-exec"
INSTALL_HINT = "apt-get install bubblewrap"


@dataclass(frozen=True)
class Status:
    """Whether agent turns run in a sandbox here, and which."""

    kind: str
    """`bwrap`, `sandbox-exec` or `off`."""
    why: str
    """One line for people: `bubblewrap 0.8.0`, or why there is none."""

    @property
    def on(self) -> bool:
        return self.kind != "off"


@dataclass(frozen=True)
class Spec:
    """What one turn's sandbox lets the agent write, reach and see."""

    root: Path
    """The writable folder: the workspace, or the task's worktree."""
    workspace: Path
    """The loop's workspace, whose loopdeck files are protected (the root, for the runner)."""
    network: bool = True
    env_names: tuple[str, ...] = ()
    """Variables passed on by name beyond the ones an agent needs (`--sandbox-env NAME`)."""
    beside: bool = False
    """Other turns run beside this one (parallel workers), and loopdeck runs git on the
    repository meanwhile: its git folder is read-only to the agent but for the objects and a
    worktree's own index (loopdeck commits the agent's work), so that no agent can point
    loopdeck's git at a config of its own (`commondir`, `info/attributes`) while it runs."""
    read_only: tuple[Path, ...] = ()
    """Files of the root the agent may read but not write: the loop's design, its contract."""
    scratch: tuple[Path, ...] = ()
    """Folders outside the root it may write too: loopdeck's private folder for the report a
    verification's test runner writes (pytest's JUnit XML)."""


# --- which sandbox -----------------------------------------------------------------------------


def choose(given: str | None, saved: object = None, env: Mapping[str, str] | None = None) -> str:
    """The mode: the command line's, else `LOOPDECK_SANDBOX`, else the saved default, else
    `auto`. A value that is not a mode is refused in one line."""
    env = os.environ if env is None else env
    for value, where in ((given, "--sandbox"), (env.get(ENV_MODE), ENV_MODE), (saved, "sandbox")):
        if value is None or value == "":
            continue
        if value not in MODES:
            raise LoopdeckError(f"{where}: expected one of {', '.join(MODES)}, got {value!r}")
        return str(value)
    return "auto"


def settings(
    mode: str | None, net: str | None, names: list[str] | None, saved: object = None
) -> tuple[str, bool, tuple[str, ...]]:
    """The sandbox's mode, network and extra variables: the command line's (`--sandbox`,
    `--sandbox-net`, `--sandbox-env`), else the saved defaults' (`saved.get(key)`), else
    LOOPDECK_SANDBOX's mode, else auto, network on."""

    def get(key: str) -> object:
        getter = getattr(saved, "get", None)
        return getter(key) if getter is not None else None

    chosen = choose(mode, get("sandbox"))
    network = net == "on" if net is not None else get("sandbox_net") is not False
    saved_names = get("sandbox_env")
    extra = list(names or (saved_names if isinstance(saved_names, list) else []))
    for name in extra:
        if not name or "=" in name or "\0" in name:
            raise LoopdeckError(f"--sandbox-env: expected a variable's name, got {name!r}")
    return chosen, network, tuple(extra)


def detect(mode: str) -> Status:
    """The sandbox agent turns run in for `mode`; LoopdeckError when `mode` is `on` and none
    can start here (the run refuses to start rather than run the agent unconfined)."""
    if mode not in MODES:
        raise LoopdeckError(f"--sandbox: expected one of {', '.join(MODES)}, got {mode!r}")
    if mode == "off":
        return Status("off", "off: turned off")
    status = _available()
    if mode == "on" and not status.on:
        raise LoopdeckError(
            f"the sandbox cannot start: {status.why.removeprefix('off: ')}; "
            "run with --sandbox off to run the agent without one"
        )
    return status


def describe(status: Status, network: bool) -> str:
    """The status as `status` shows it: `bwrap (bubblewrap 0.8.0), network on`, or why off."""
    if not status.on:
        return status.why
    return f"{status.kind} ({status.why}), network {'on' if network else 'off'}"


@functools.cache
def _available() -> Status:
    """What can start on this machine, looked at once per process."""
    if sys.platform.startswith("linux"):
        return _probe_bwrap(shutil.which("bwrap"))
    if sys.platform == "darwin":
        if not os.access(SANDBOX_EXEC, os.X_OK):
            return Status("off", f"off: {SANDBOX_EXEC} is missing")
        return Status("sandbox-exec", "sandbox-exec")
    return Status("off", "off: no sandbox on this system (bubblewrap on Linux, sandbox-exec on macOS)")


def _probe_bwrap(path: str | None) -> Status:
    if path is None:
        return Status("off", f"off: bwrap is not installed ({INSTALL_HINT})")
    probe = [path, "--ro-bind", "/", "/", "--unshare-pid", "--die-with-parent"]
    probe += ["--proc", "/proc", "--dev", "/dev", "--", "true"]
    try:
        done = subprocess.run(probe, capture_output=True, timeout=10, check=False)
        version = subprocess.run([path, "--version"], capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Status("off", f"off: bwrap cannot start here ({exc})")
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().splitlines()
        reason = said[-1][:200] if said else f"exit {done.returncode}"
        return Status("off", f"off: bwrap cannot start here ({reason})")
    return Status("bwrap", version.stdout.decode("utf-8", "replace").strip() or "bubblewrap")


# --- what the agent may write, and what it may not -----------------------------------------------


LOOP_FILES = (
    "orchestrator-loop.local.md",
    "orchestrator-loop.local.md.bak",
    "orchestrator-loop.events.jsonl",
    "orchestrator-loop.control.jsonl",
    "orchestrator-loop.lock",
)
MADE_EMPTY = ("orchestrator-loop.events.jsonl", "orchestrator-loop.control.jsonl", "orchestrator-loop.lock")
"""Created before the turn when absent: a read-only mount can only cover a file that exists,
and the agent must not be able to create them either (a queued `complete`)."""
LOOP_FOLDERS = ("loopdeck", "loops")
SETTINGS = (".claude/settings.json", ".claude/settings.local.json", ".loopdeck.toml")
AGENT_DIRS = (".claude", ".codex", ".gemini")
"""The agent CLIs' folders in HOME, made (0700) when missing: they keep sessions and logins."""
AGENT_PATHS = (
    ".claude.json",
    ".config/opencode",
    ".local/share/opencode",
    ".local/state/opencode",
    ".cache/opencode",
)


AGENT_SETTINGS = (
    ".claude/settings.json",
    ".claude/settings.local.json",
    ".claude.json",
    ".codex/config.toml",
    ".gemini/settings.json",
)
OPENCODE_SETTINGS = ("opencode.json", "opencode.jsonc", "config.json", "plugin", "plugins")
"""In OpenCode's config folder, which it writes as it runs: its settings and its plugins (code
it loads)."""
"""The agent CLIs' own settings in HOME: read-only (and taken back when the agent makes one),
since their hooks, MCP servers and notify programs run outside any sandbox in the person's
next session."""
AGENT_SETTING_VARIABLES = (
    ("CLAUDE_CONFIG_DIR", "settings.json"),
    ("CODEX_HOME", "config.toml"),
)
AGENT_VARIABLES = (
    ("CODEX_HOME", ""),
    ("CLAUDE_CONFIG_DIR", ""),
    ("XDG_CONFIG_HOME", "opencode"),
    ("XDG_DATA_HOME", "opencode"),
    ("XDG_STATE_HOME", "opencode"),
    ("XDG_CACHE_HOME", "opencode"),
)
"""The agent CLIs' folders that a variable moves out of HOME, and the CLI's name in it."""


def git_dirs(root: Path) -> tuple[Path, Path] | None:
    """The git folder of the repository `root` is in, and its common folder (the main
    repository's, for a worktree)."""
    found = repository(root)
    return None if found is None else (found[1], found[2])


def protected(spec: Spec) -> list[Path]:
    """What stays read-only inside the writable root: loopdeck's files (those that must be
    there are made first), the agent CLIs' settings in the root, and git's config and hooks
    (a `core.fsmonitor` or a hook would run in the runner's next git command)."""
    root = spec.root
    found: list[Path] = []
    if _same(root, spec.workspace):
        claude = root / ".claude"
        claude.mkdir(exist_ok=True)
        for name in LOOP_FOLDERS:
            (claude / name).mkdir(exist_ok=True)
            found.append(claude / name)
        for name in MADE_EMPTY:
            _touch(claude / name)
        found += [claude / name for name in LOOP_FILES]
    found += [root / name for name in SETTINGS]
    found += [p for p in spec.read_only if _under(p, root)]
    if (root / ".git").is_file():
        found.append(root / ".git")  # a worktree's pointer to its git folder: never another's
    dirs = git_dirs(root)
    if dirs is not None:
        gitdir, common = dirs
        if common.is_dir():
            (common / "hooks").mkdir(exist_ok=True)
        found += [common / "config", common / "hooks", common / "config.worktree"]
        if gitdir != common:  # a worktree's own git folder: where its config comes from
            found += [gitdir / "config.worktree", gitdir / "commondir"]
    return [p for p in dict.fromkeys(found) if os.path.lexists(p)]


def agent_settings(env: Mapping[str, str]) -> list[Path]:
    """Where the agent CLIs keep their settings (`AGENT_SETTINGS`), present or not."""
    found: list[Path] = []
    home = env.get("HOME", "")
    opencode: list[Path] = []
    if os.path.isabs(home):
        found += [Path(home) / name for name in AGENT_SETTINGS]
        opencode.append(Path(home) / ".config" / "opencode")
    for variable, name in AGENT_SETTING_VARIABLES:
        value = env.get(variable, "")
        if os.path.isabs(value):
            found.append(Path(value) / name)
    if os.path.isabs(env.get("XDG_CONFIG_HOME", "")):
        opencode.append(Path(env["XDG_CONFIG_HOME"]) / "opencode")
    found += [folder / name for folder in opencode for name in OPENCODE_SETTINGS]
    return list(dict.fromkeys(found))


def shared_git(spec: Spec) -> tuple[list[Path], list[Path]]:
    """For a turn `beside` others: the repository's git folder read-only, then its objects and
    a worktree's own folder writable again (its `commondir` and config stay read-only)."""
    dirs = git_dirs(spec.root) if spec.beside else None
    if dirs is None:
        return [], []
    gitdir, common = dirs
    writable = [common / "objects"] + ([gitdir] if gitdir != common else [])
    return [common] if common.is_dir() else [], [p for p in writable if p.is_dir()]


def unmade(spec: Spec, env: Mapping[str, str] | None = None) -> list[Path]:
    """What the agent must not create, though a read-only mount can only cover what exists:
    the root's settings files (its own permissions, a project config), the agent CLIs' settings
    in HOME, and a `commondir` in the repository's git folder (it would point every git,
    loopdeck's too, at a config of the agent's choosing). Those absent now, for `take_back`
    after the turn."""
    found = [spec.root / name for name in SETTINGS]
    found += agent_settings(os.environ if env is None else env)
    dirs = git_dirs(spec.root)
    if dirs is not None:
        found.append(dirs[1] / "commondir")  # the main repository's folder never has one
    return [p for p in found if not os.path.lexists(p)]


def take_back(spec: Spec, paths: list[Path]) -> list[str]:
    """Move what the agent made of `unmade`'s paths into `.claude/loopdeck/refused/` (kept,
    never deleted), and say so in a line each, worded as the sandbox's other refusals."""
    lines = []
    for path in paths:
        if not os.path.lexists(path):
            continue
        keep = spec.workspace / ".claude" / "loopdeck" / "refused"
        try:
            keep.mkdir(parents=True, exist_ok=True)
            target = keep / f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}-{path.name}"
            shutil.move(path, target)
        except OSError as exc:
            lines.append(f"loopdeck: the agent created {path}, which could not be moved away: {exc}")
            continue
        lines.append(
            f"loopdeck: the sandbox refused creating {path} (Read-only file system for the agent); "
            f"it was moved to {target}"
        )
    return lines


def anchors(spec: Spec) -> list[Path]:
    """The folders holding protected files, pinned in place: renamed away with what is mounted
    in them, a new one in their place would hold an agent's own control queue or git config.
    Each is bound onto itself (a mount point cannot be renamed or removed), still writable."""
    found = [spec.root / ".claude"] if _same(spec.root, spec.workspace) else []
    if (spec.root / ".git").is_dir():
        found.append(spec.root / ".git")
    return [p for p in found if p.is_dir()]


def writable_git(spec: Spec) -> list[Path]:
    """The git folders outside the root that git inside needs to write (a worktree's commits
    go to the main repository's objects and refs)."""
    dirs = git_dirs(spec.root)
    if dirs is None:
        return []
    found = [d for d in dict.fromkeys(dirs) if d.is_dir() and not _under(d, spec.root)]
    return [d for d in found if not any(o != d and _under(d, o) for o in found)]


def hidden(env: Mapping[str, str]) -> list[Path]:
    """loopdeck's folders that an agent must not read or write: the person's configuration
    and the trust records (what a person confirmed). Those that exist."""
    from loop import trust
    from loop.store.config import user_path

    found = [user_path(env).parent, trust.home()]
    override = env.get(trust.HOME_ENV, "")
    if os.path.isabs(override):
        found.append(Path(override))
    found.append(Path(_user_home()) / ".local" / "state" / "loopdeck")
    state = env.get("XDG_STATE_HOME", "")
    if os.path.isabs(state):
        found.append(Path(state) / "loopdeck")
    out: list[Path] = []
    for path in dict.fromkeys(found):
        if path.is_dir() and not any(_under(path, kept) for kept in out):
            out = [kept for kept in out if not _under(kept, path)] + [path]
    return out


def agent_dirs(env: Mapping[str, str]) -> list[Path]:
    """The agent CLIs' own folders (sessions, logins, caches, their config): writable. In
    HOME the usual three are made when missing, the others bound only when they exist; the
    folders the CLIs' variables name (`CODEX_HOME`, `$XDG_CONFIG_HOME/opencode`...) too."""
    found: list[Path] = []
    home = env.get("HOME", "")
    if os.path.isabs(home) and os.path.isdir(home):
        base = Path(home)
        for name in AGENT_DIRS:
            path = base / name
            if not os.path.lexists(path):
                try:
                    path.mkdir(mode=0o700)
                except OSError:
                    continue
        found += [base / name for name in (*AGENT_DIRS, *AGENT_PATHS)]
    for variable, name in AGENT_VARIABLES:
        value = env.get(variable, "")
        if os.path.isabs(value):
            found.append(Path(value) / name)
    return [path for path in dict.fromkeys(found) if path.exists()]


# --- the agent's environment ---------------------------------------------------------------------


KEEP = frozenset(
    {
        "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "COLORTERM", "NO_COLOR", "LANG",
        "LANGUAGE", "TZ", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy",
        "https_proxy", "no_proxy", "all_proxy", "SSL_CERT_FILE", "SSL_CERT_DIR",
        "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "XDG_CONFIG_HOME", "XDG_DATA_HOME",
        "XDG_CACHE_HOME", "XDG_STATE_HOME", "IS_SANDBOX", "PYTHONDONTWRITEBYTECODE",
        "LOOPDECK_RUN", "LOOPDECK_WORKER", "LOOPDECK_WORKER_NAME", "LOOPDECK_PORT_BASE",
        "LOOPDECK_TASK", "LOOPDECK_FILES", "LOOPDECK_CHANGED",
        *RUNNER_ENV,
    }
)  # fmt: skip
"""What an agent needs of the environment: where things are, how to reach the network,
loopdeck's markers (the sweep finds what the agent leaves by `LOOPDECK_RUN`)."""
KEEP_PREFIXES = (
    "LC_", "ANTHROPIC_", "CLAUDE_", "OPENAI_", "CODEX_", "GEMINI_", "GOOGLE_", "OPENCODE_",
    "AWS_", "AZURE_", "VERTEX_", "DISABLE_",
)  # fmt: skip
"""The agent CLIs' keys and settings (`ANTHROPIC_API_KEY`, `CLAUDE_CODE_*`, `CODEX_HOME`,
`GOOGLE_GEMINI_BASE_URL`, `DISABLE_AUTOUPDATER`...)."""
KEEP_SUFFIXES = ("_API_KEY", "_BASE_URL", "_API_BASE")
"""A model provider's key and address, whatever the provider (Codex's and OpenCode's
providers name their own: `OPENROUTER_API_KEY`, `GROQ_API_KEY`...)."""


def env_for(base_env: Mapping[str, str], spec: Spec) -> dict[str, str]:
    """Only what an agent needs of `base_env`, and the names `spec` adds: a token for GitHub,
    an SSH agent's socket or loopdeck's own settings stay out. TMPDIR is the sandbox's /tmp."""
    extra = set(spec.env_names)
    env = {
        name: value
        for name, value in base_env.items()
        if name in KEEP or name in extra or name.startswith(KEEP_PREFIXES) or name.endswith(KEEP_SUFFIXES)
    }
    env["TMPDIR"] = "/tmp"
    return env


def kept(base_env: Mapping[str, str], adapter_env: Mapping[str, str], spec: Spec) -> dict[str, str]:
    """`env_for`, with what the agent's own adapter sets kept whatever its name."""
    return {**env_for(base_env, spec), **{k: base_env[k] for k in adapter_env if k in base_env}}


# --- the sandboxes ---------------------------------------------------------------------------------


def bwrap_argv(argv: list[str], spec: Spec, env: Mapping[str, str], bwrap: str = "bwrap") -> list[str]:
    """`argv` under bubblewrap: everything read-only, a private /tmp and /proc, the root (and
    the git folders it needs) writable, loopdeck's files read-only on top, its folders hidden,
    the agent CLIs' folders writable; a PID namespace of its own (what the agent starts dies
    with the turn) and, with the network off, a network namespace of its own. The order
    matters: a later mount covers an earlier one (the root under /tmp is bound after /tmp)."""
    out = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    out += ["--unshare-pid", "--unshare-ipc", "--die-with-parent", "--cap-drop", "ALL"]
    if not spec.network:
        out.append("--unshare-net")
    for folder in _hidden_path_dirs(env, argv[0] if argv else ""):  # the programs stay visible
        out += ["--ro-bind", folder, folder]
    root = str(spec.root)
    out += ["--bind", root, root]
    for path in spec.scratch:
        out += ["--bind", str(path), str(path)]
    shielded = protected(spec)  # first: it makes the folders `anchors` pins
    for path in [*anchors(spec), *writable_git(spec)]:
        out += ["--bind", str(path), str(path)]
    read_only, writable = shared_git(spec)
    for path in read_only:
        out += ["--ro-bind", str(path), str(path)]
    for path in writable:
        out += ["--bind", str(path), str(path)]
    for path in shielded:
        out += ["--ro-bind", str(path), str(path)]
    roots = (spec.root, spec.workspace)
    secret = [h for h in hidden(env) if not any(_under(r, h) for r in roots)]
    for path in secret:
        out += ["--tmpfs", str(path)]
    for path in agent_dirs(env):
        if not any(_under(path, h) for h in secret):
            out += ["--bind", str(path), str(path)]
    for path in agent_settings(env):
        if os.path.lexists(path):
            out += ["--ro-bind", str(path), str(path)]
    out += ["--chdir", root, "--", *argv]
    return out


def _hidden_path_dirs(env: Mapping[str, str], program: str = "") -> list[str]:
    """The programs' folders that the private /tmp would hide (a test's or a tool's `bin` in a
    temporary folder): the folders on the agent's PATH, the program's own and loopdeck's
    interpreter's, bound back read-only; a virtual environment's whole folder, so that its
    interpreter finds its packages."""
    folders = env.get("PATH", "").split(os.pathsep)
    if os.path.isabs(program):
        folders.append(os.path.dirname(program))
    folders.append(os.path.dirname(sys.executable))
    # loopdeck itself: the hooks an agent CLI runs inside (a clone in a temporary folder)
    folders.append(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    found = []
    for folder in folders:
        if os.path.isabs(folder) and _under(Path(folder), Path("/tmp")) and os.path.isdir(folder):
            parent = os.path.dirname(os.path.realpath(folder))
            venv = os.path.isfile(os.path.join(parent, "pyvenv.cfg"))
            found.append(parent if venv else os.path.realpath(folder))
    return list(dict.fromkeys(found))


def _quote(path: Path | str) -> str:
    """A string of the profile's language: `"` and `\\` escaped, nothing else can break out."""
    text = str(path).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


def macos_profile(spec: Spec, env: Mapping[str, str] | None = None) -> str:
    """The same rules as a `sandbox-exec` profile (SBPL): everything allowed but writing,
    which only the root, the agent CLIs' folders and the temporary folders may take; then
    loopdeck's files and git's config denied again, its folders unreadable, and the network
    denied when it is off. The last matching rule wins."""
    env = os.environ if env is None else env
    writable = [spec.root, *spec.scratch, *writable_git(spec), *agent_dirs(env)]
    lines = ["(version 1)", "(allow default)", "(deny file-write*)", "(allow file-write*"]
    lines += [f"    (subpath {_quote(p)})" for p in writable]
    lines += [
        '    (subpath "/private/tmp")',
        '    (subpath "/private/var/folders")',
        '    (literal "/dev/null")',
        '    (literal "/dev/tty")',
        '    (regex #"^/dev/fd/"))',
    ]
    read_only, writable_again = shared_git(spec)
    denied = protected(spec) + anchors(spec) + read_only + agent_settings(env)
    if denied:
        lines.append("(deny file-write*")
        pinned = anchors(spec)
        for path in denied:
            kind = "subpath" if path.is_dir() and path not in pinned else "literal"
            lines.append(f"    ({kind} {_quote(path)})")
        lines[-1] += ")"
    if writable_again:
        lines.append("(allow file-write*")
        lines += [f"    (subpath {_quote(p)})" for p in writable_again]
        lines[-1] += ")"
        lines.append("(deny file-write*")  # the worktree's own config stays read-only
        lines += [f"    (literal {_quote(p)})" for p in protected(spec) if _under(p, writable_again[-1])]
        lines[-1] += ")"
    secret = hidden(env)
    if secret:
        lines.append("(deny file-read* file-write*")
        lines += [f"    (subpath {_quote(p)})" for p in secret]
        lines[-1] += ")"
    if not spec.network:
        lines.append('(deny network-outbound (remote ip "*:*"))')
        lines.append("(allow network-outbound (remote unix-socket))")
    return "\n".join(lines) + "\n"


def wrap(
    argv: list[str],
    spec: Spec,
    env: Mapping[str, str],
    status: Status,
    adapter_env: Mapping[str, str] | None = None,
) -> tuple[list[str], dict[str, str]]:
    """The argv and environment of one turn in the sandbox `status` names; as they are when it
    is off. `adapter_env`: what the agent's adapter sets, kept whatever its name."""
    if not status.on:
        return list(argv), dict(env)
    inner = kept(env, adapter_env or {}, spec)
    if status.kind == "sandbox-exec":
        return [SANDBOX_EXEC, "-p", macos_profile(spec, env), "--", *argv], inner
    return bwrap_argv(argv, spec, env, shutil.which("bwrap") or "bwrap"), inner


# --- small helpers -----------------------------------------------------------------------------------


def _user_home() -> str:
    """The home folder the password database names (HOME may say otherwise)."""
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_dir
    except (ImportError, KeyError):
        return os.path.expanduser("~")


def _touch(path: Path) -> None:
    """Make an empty file where none is; a symlink or a folder there is left as it is."""
    if os.path.lexists(path):
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except OSError:
        return
    os.close(fd)


def _same(a: Path, b: Path) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def _under(path: Path, folder: Path) -> bool:
    """Is `path` `folder` or inside it?"""
    p, f = os.path.realpath(path), os.path.realpath(folder)
    return p == f or p.startswith(f.rstrip(os.sep) + os.sep)
