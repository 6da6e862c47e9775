"""Every git loopdeck runs starts here: `git_argv(*args)`.

The repository is the agent's to write, `.git/config` and `.git/hooks/` included (and on a
Temporal worker, whoever started the workflow chose the remote). git runs programs that
configuration names: an fsmonitor on every `git status`, hooks on commit, merge and checkout, an
external diff, an ssh or proxy command. The prefix turns those off, so a git that loopdeck runs
runs no program of the repository:

- `core.fsmonitor=false`, `core.hooksPath=/dev/null` (no hook is found there),
  `core.sshCommand=ssh`, `core.gitProxy=`, `core.askPass=`, `protocol.ext.allow=never` (a
  remote `ext::` runs a command), no signing and no signature checks (`gpg.program`);
- `--no-ext-diff --no-textconv` (`NO_DIFF_PROGRAMS`) on every diff and log that shows changes;
- `--literal-pathspecs` where paths come from a task or a file name: `:/` and `:(glob)` are
  then file names, not pathspec magic.

What the prefix cannot turn off: clean/smudge filters and merge drivers named by
`.gitattributes` and the repository's config under names of its own choosing.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

SAFE_CONFIG = (
    *("-c", "core.fsmonitor=false"),
    *("-c", "core.hooksPath=/dev/null"),
    *("-c", "core.sshCommand=ssh"),
    *("-c", "core.gitProxy="),
    *("-c", "core.askPass="),
    *("-c", "core.pager=cat"),
    *("-c", "protocol.ext.allow=never"),
    *("-c", "commit.gpgSign=false"),
    *("-c", "tag.gpgSign=false"),
    *("-c", "merge.verifySignatures=false"),
    *("-c", "log.showSignature=false"),
    *("-c", "gc.auto=0"),
    *("-c", "maintenance.auto=false"),
)
"""Configuration given on the command line wins over the repository's: these name no program,
and start no housekeeping in the background (the merge train's gits run beside the workers'; a
`gc --auto` packing refs under them makes their ref updates fail)."""

NO_DIFF_PROGRAMS = ("--no-ext-diff", "--no-textconv")
"""For `git diff`, `log -p` and `show`: no `diff.external`, no textconv program."""

_programs: dict[str, str] = {}
PROGRAMS_KEPT = 8


def git_program() -> str:
    """The `git` an exec of a bare `git` would run, found on PATH once per PATH: the runner
    looks with git every iteration and the monitor at every change of the tree, and an exec of
    a bare name tries each folder of PATH in turn (eight failed execs a look on a PATH led by
    version managers' shims). A PATH with a relative folder before the one that has git leaves
    the search to the exec, which takes that folder from where git runs; so does a git gone
    since it was found."""
    path = os.environ.get("PATH", os.defpath)
    found = _programs.get(path)
    if found is not None and os.access(found, os.X_OK):
        return found
    found = "git"
    for folder in path.split(os.pathsep):
        if not os.path.isabs(folder):
            break
        candidate = os.path.join(folder, "git")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            found = candidate
            break
    if found != "git":
        if len(_programs) >= PROGRAMS_KEPT:
            _programs.clear()
        _programs[path] = found
    return found


def git_argv(*args: str, literal: bool = False) -> list[str]:
    """`git` with the prefix that runs no program of the repository, then `args`; `literal`:
    pathspecs are plain paths (`--literal-pathspecs`)."""
    return [git_program(), *SAFE_CONFIG, *(("--literal-pathspecs",) if literal else ()), *args]


def safe_config_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """`SAFE_CONFIG` as environment variables (`GIT_CONFIG_COUNT`, `GIT_CONFIG_KEY_<n>`,
    `GIT_CONFIG_VALUE_<n>`, git 2.31+), for git run by a library that builds its own argv
    (GitPython): every git it starts then runs no program of the repository. Entries already in
    `environ` (a CI's own) are kept; ours follow them, and the last of a key wins."""
    environ = os.environ if environ is None else environ
    try:
        start = max(int(environ.get("GIT_CONFIG_COUNT", "0")), 0)
    except ValueError:
        start = 0
    pairs = [SAFE_CONFIG[i + 1].partition("=") for i in range(0, len(SAFE_CONFIG), 2)]
    env = {"GIT_CONFIG_COUNT": str(start + len(pairs))}
    for n, (key, _eq, value) in enumerate(pairs, start):
        env[f"GIT_CONFIG_KEY_{n}"] = key
        env[f"GIT_CONFIG_VALUE_{n}"] = value
    return env
