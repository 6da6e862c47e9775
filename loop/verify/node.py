"""The rules for JavaScript's package managers and the tools `npx` runs: npm, pnpm, yarn, tsc,
jest, vitest, eslint. Their option surfaces are too large to list what is risky (npm reads any
`--name=value` as its configuration), so only options known to be harmless pass, and a
script's own arguments go after `--`. See `loop/verify_options.py` for the policy.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from loop.verify.argv import (
    CHECKS_FILES,
    NAMES_PATH,
    REWRITES_FILES,
    Context,
    Judge,
    Opt,
    Rule,
    Spec,
    Use,
    config_or_path,
    free_operand,
    inside,
    judge_use,
    one_of,
    read,
    scanning,
    script_operand,
    table,
)

# --- value rules ---------------------------------------------------------------------------------


def _module(*builtins: str, why: str = "loads a module given on the command line") -> Judge:
    """A reporter, environment or formatter: one of the program's own, a path inside the
    workspace, or a package the workspace's node_modules holds."""

    def judge(use: Use, ctx: Context) -> str | None:
        for value in use.values:
            if value in builtins:
                continue
            if "/" in value or value.startswith("."):
                if inside(value, ctx.root):
                    continue
            elif _installed(value, ctx.root):
                continue
            return f"{why} ({use.shown})"
        return None

    return judge


def _installed(package: str, root: str) -> bool:
    """Is `package` in the workspace's own node_modules (not one above it, where node would
    also look)?"""
    path = os.path.join("node_modules", package)
    return bool(package) and os.path.exists(os.path.join(root, path)) and inside(path, root)


# --- JavaScript tools (through npx) --------------------------------------------------------------


def _camel_kebab(text: str, judges: dict[str, Judge] | None = None) -> dict[str, Opt]:
    """jest and vitest read `--runInBand` and `--run-in-band` alike."""
    found = table(text, judges)
    kebab = {re.sub(r"(?<=[a-z])([A-Z])", r"-\1", name).lower(): opt for name, opt in found.items()}
    return {**kebab, **found}


TSC = Spec(
    "tsc",
    table("""
        path   required -p --project --rootdir --baseurl --typeroots --rootdirs
        write  required --outdir --outfile --declarationdir --tsbuildinfofile --generatetrace
        write  required --generatecpuprofile
    """),
    operand=CHECKS_FILES,
    casefold=True,  # tsc reads --outdir as --outDir
)

_NOT_KNOWN = "; a person can allow this exact command instead"

JEST = Spec(
    "jest",
    _camel_kebab(
        """
        flag   none     --ci --coverage --collectCoverage --runInBand -i --silent --verbose
        flag   none     --passWithNoTests --detectOpenHandles --forceExit --onlyChanged -o
        flag   none     --lastCommit --listTests --logHeapUsage --noStackTrace --colors --json
        flag   none     -u --updateSnapshot --no-cache --randomize --showSeed --errorOnDeprecated
        flag   none     --useStderr --findRelatedTests --no-watchman --watchman --clearCache
        value  optional --bail -b --watchAll --watch --cache
        value  required --maxWorkers -w --testNamePattern -t --seed --testPathPattern
        value  required --testPathPatterns --testTimeout --testPathIgnorePatterns --changedSince
        value  required --shard --selectProjects --coverageProvider --collectCoverageFrom
        value  required --coverageReporters
        code   required --reporters
        code   required --env --testEnvironment
        path   required -c --config
        path   required --rootDir --roots
        write  required --outputFile --coverageDirectory --cacheDirectory
        """,
        {
            "--reporters": _module("default", "verbose", "summary", "github-actions"),
            "--env": _module("node", "jsdom"),
            "-c": config_or_path("jest", lambda v: v.lstrip().startswith("{")),  # JSON
        },
    ),
    operand=CHECKS_FILES,
    unknown="refuse",
    unknown_hint=_NOT_KNOWN,
)

VITEST = Spec(
    "vitest",
    _camel_kebab(
        """
        flag   none     --run --coverage --silent --passWithNoTests -u --update --globals --dom
        flag   none     --no-file-parallelism --fileParallelism --logHeapUsage --allowOnly
        flag   none     --no-color --color --hideSkippedTests --typecheck
        value  optional --watch --isolate --coverage.enabled --changed
        value  required --bail --retry --testNamePattern -t --shard --sequence.shuffle
        value  required --sequence.seed --maxWorkers --minWorkers --project --mode --testTimeout
        value  required --hookTimeout --exclude --coverage.include --coverage.exclude --coverage.all
        code   required --reporter
        code   required --pool
        code   required --environment
        code   required --coverage.provider
        code   required --coverage.reporter
        path   required -c --config -r --root --dir
        write  required --outputFile --coverage.reportsDirectory
        """,
        {
            "--reporter": _module(
                *("default", "basic", "verbose", "dot", "json", "junit", "tap", "tap-flat"),
                *("hanging-process", "github-actions", "html", "blob", "tree"),
            ),
            "--pool": _module("threads", "forks", "vmThreads", "vmForks"),
            "--environment": _module("node", "jsdom", "happy-dom", "edge-runtime"),
            "--coverage.provider": _module("v8", "istanbul"),
            "--coverage.reporter": _module(
                *("text", "text-summary", "html", "json", "json-summary", "lcov", "lcovonly"),
                *("clover", "cobertura"),
            ),
        },
    ),
    operand=free_operand,  # `run`, then file-name filters
    unknown="refuse",
    unknown_hint=_NOT_KNOWN,
)

ESLINT = Spec(
    "eslint",
    table(
        """
        flag   none     --fix --fix-dry-run --quiet --no-eslintrc --no-config-lookup --cache
        flag   none     --no-ignore --no-inline-config --color --no-color --debug --stats
        flag   none     --no-error-on-unmatched-pattern --exit-on-fatal-error --pass-on-no-patterns
        flag   none     --report-unused-disable-directives
        value  required --fix-type --ext --max-warnings --cache-strategy --ignore-pattern --rule
        value  required --env --global --parser-options --concurrency
        value  required --report-unused-disable-directives-severity
        code   required -f --format
        code   required --plugin --parser | loads a module given on the command line
        path   required --rulesdir | loads rules from a directory
        path   required -c --config --ignore-path --resolve-plugins-relative-to --print-config
        write  required -o --output-file --cache-location
        """,
        {
            "-f": _module(
                *("stylish", "json", "json-with-metadata", "html", "compact", "unix"),
                *("visualstudio", "checkstyle", "junit", "jslint-xml", "tap", "table"),
                why="loads a formatter given on the command line",
            )
        },
    ),
    operand=REWRITES_FILES,
    unknown="refuse",
    unknown_hint=_NOT_KNOWN,
)

# --- npm, pnpm, yarn ------------------------------------------------------------------------------


def _workspace_name(use: Use, ctx: Context) -> str | None:
    """A workspace of the project, by name or by folder: inside the workspace."""
    return NAMES_PATH(Use(None, None, use.values, use.shown), ctx)


_LOGLEVEL = one_of("silent", "error", "warn", "notice", "http", "timing", "info", "verbose", "silly")
_MANAGER_COMMON = """
    flag   none     --silent -s --if-present --color --no-color --offline
    value  required --loglevel
"""
MANAGERS = {
    "npm": table(
        _MANAGER_COMMON
        + """
        flag   none     --quiet -q -d --ignore-scripts --foreground-scripts --workspaces --ws
        flag   none     --include-workspace-root --no-workspaces --no-progress --no-audit
        flag   none     --no-update-notifier --no-fund --prefer-offline
        path   required --workspace -w
        """,
        {"--loglevel": _LOGLEVEL, "-w": _workspace_name},
    ),
    "pnpm": table(
        _MANAGER_COMMON
        + """
        flag   none     -r --recursive --parallel --stream --no-bail --bail --sequential -w
        flag   none     --aggregate-output --report-summary --workspace-root --fail-if-no-match
        flag   none     --no-sort --reverse
        value  required --reporter --resume-from
        path   required --filter -F
        """,
        {
            "--loglevel": _LOGLEVEL,
            "--reporter": one_of("default", "append-only", "ndjson", "silent"),
            "-F": _workspace_name,
        },
    ),
    "yarn": table(
        _MANAGER_COMMON
        + """
        flag   none     --verbose --frozen-lockfile --immutable --non-interactive --no-progress
        flag   none     --top-level --binaries-only
        path   required --cwd | changes to a directory
        """,
        {"--loglevel": _LOGLEVEL},
    ),
}
_MANAGER_CODE_VERBS = ("run", "run-script", "exec", "x", "dlx", "node", "create", "init", "explore", "edit")


def _package_manager(name: str) -> Rule:
    """npm reads any `--name=value` as its configuration (`--script-shell`, `--node-options`,
    `--prefix`, `--registry`…), and pnpm and yarn have their own: only options known harmless
    pass. The verb and the script's name are the manager's; other operands reach the script."""
    spec = Spec(
        name,
        MANAGERS[name],
        operand=script_operand,
        unknown="refuse",
        abbrev=False,
        unknown_hint=(
            f"; {name} reads any --name=value as its configuration, and a script's own arguments"
            " go after `--`"
        ),
    )

    def rule(args: Sequence[str], matched: Sequence[str], ctx: Context) -> str | None:
        uses = list(read(spec, args))
        operands = [u for u in uses if u.name is None and not u.passed]
        verb = operands[0].values[0] if operands else ""
        if verb in _MANAGER_CODE_VERBS and len(matched) < 3:
            words = " ".join([name, *args[: args.index(verb) + 2]])
            return f"runs a {name} script or package the allowlist does not name ({words})"
        own = operands[: 2 if verb in _MANAGER_CODE_VERBS else 1]
        for use in uses:
            reason = None if any(use is o for o in own) else judge_use(spec, use, ctx)
            if reason:
                return reason
        return None

    return rule


RULES: dict[str, Rule] = {
    "tsc": scanning(TSC),
    "jest": scanning(JEST),
    "vitest": scanning(VITEST),
    "eslint": scanning(ESLINT),
    "npm": _package_manager("npm"),
    "pnpm": _package_manager("pnpm"),
    "yarn": _package_manager("yarn"),
}
