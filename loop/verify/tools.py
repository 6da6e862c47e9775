"""The rules for the other allowed programs: make, cargo, go, just, gradle, mvn, dotnet, rspec,
git and find. See `loop/verify_options.py` for what is refused and why.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from loop.verify.argv import (
    Context,
    Judge,
    Opt,
    Rule,
    Spec,
    Use,
    free_operand,
    inside,
    operands,
    passed_operand,
    path_operand,
    scan,
    scanning,
    script_operand,
    shell_active,
    stray_path,
    stray_value,
    table,
)

# --- make ----------------------------------------------------------------------------------------

_MAKE_CONTROL = {
    *("SHELL", ".SHELLFLAGS", "MAKESHELL", "MAKEFLAGS", "GNUMAKEFLAGS", "MFLAGS", "MAKEFILES"),
    *("MAKE", "MAKEOVERRIDES", ".RECIPEPREFIX", ".INCLUDE_DIRS", ".LIBPATTERNS", "VPATH"),
}
_ASSIGNMENT = re.compile(r"(?s)([^=]*?)(:::=|::=|:=|\+=|\?=|!=|=)(.*)")


def _make_operand(use: Use, ctx: Context) -> str | None:
    """A target, or a variable assignment, which make reads as a line of its own language: the
    value of `x:=…` is expanded at once, `$(shell …)` and all, and `x!=…` runs a shell."""
    word = use.values[0]
    if "$" in word:
        return f"passes make a $ reference, which make expands and can run a shell with ({word})"
    assignment = _ASSIGNMENT.fullmatch(word)
    if assignment is None:
        return None if inside(word, ctx.root) else f"names a target outside the workspace ({word})"
    name, op = assignment.group(1).strip(), assignment.group(2)
    if op == "!=":
        return f"assigns a make variable the output of a shell command ({word})"
    if name in _MAKE_CONTROL:
        return f"overrides make's {name} ({word})"
    # Any other: a recipe runs `$(PYTEST) …`, so `PYTEST=perl -e …` or `PYTEST=true #` is a
    # command of the command line's choosing, whatever its characters.
    return f"sets the make variable {name or '?'} on the command line ({word}); make takes only targets here"


MAKE = Spec(
    "make",
    table("""
        code   required -E --eval | evaluates make code given on the command line
        path   required -f --file --makefile | reads a makefile
        path   required -C --directory | changes to a directory
        path   required -I --include-dir | looks for makefiles
        config required --jobserver-auth --jobserver-fds | passes make one of its internal options
        config required --jobserver-style | passes make one of its internal options
        config required --sync-mutex --temp-stdin | passes make one of its internal options
        value  required -o --old-file --assume-old -W --what-if --new-file --assume-new
        value  optional -j --jobs -l --load-average --max-load -O --output-sync --debug --shuffle
        config none -e --environment-overrides | lets the environment override the makefile's variables
        flag   none -b -m -B --always-make -d -h --help -i -k -L -n -p
        flag   none --ignore-errors --keep-going --check-symlink-times --just-print --dry-run --recon
        flag   none --print-data-base -q --question -r --no-builtin-rules -R --no-builtin-variables
        flag   none -s --silent --quiet --no-silent -S --no-keep-going --stop -t --touch --trace
        flag   none -v --version -w --print-directory --no-print-directory --warn-undefined-variables
    """),
    operand=_make_operand,
)

# --- Rust, Go -------------------------------------------------------------------------------------

CARGO = Spec(
    "cargo",
    table("""
        config required --config | sets cargo configuration on the command line
        config required -Z | turns on unstable cargo features
        path   required --manifest-path | builds a manifest (and runs its build script)
        path   required -C | changes to a directory
        path   required --lockfile-path
        path   next     --target
        write  required --target-dir --artifact-dir --out-dir
        value  required --message-format --color --exclude -F --features -j --jobs --profile
        value  required --explain
        value  optional --timings
        value  next     -p --package --bin --example --test --bench
    """),
    operand=free_operand,  # the subcommand, then a test-name filter
    after_dashes=passed_operand,  # to the test binary, or to rustfmt
    abbrev=False,  # clap takes whole names only
)
_LINT_LEVELS = ("-D", "-W", "-A", "-F", "--deny", "--warn", "--allow", "--forbid", "--cap-lints")


def _clippy_flags(words: Sequence[str]) -> str | None:
    """After `cargo clippy --` come compiler flags: only lint levels (`-D warnings`)."""
    i = 0
    while i < len(words):
        word = words[i]
        if word in _LINT_LEVELS:
            i += 2
        elif word.startswith(_LINT_LEVELS):  # -Dwarnings, --deny=warnings
            i += 1
        else:
            return f"passes the compiler an option other than a lint level ({word})"
    return None


def _cargo(args: Sequence[str], matched: Sequence[str], ctx: Context) -> str | None:
    if operands(CARGO, args)[:1] == ["clippy"] and "--" in args:
        reason = _clippy_flags(args[args.index("--") + 1 :])
        if reason:
            return reason
        args = args[: args.index("--")]
    return scan(CARGO, args, ctx)


def _go_table(text: str, judges: dict[str, Judge] | None = None) -> dict[str, Opt]:
    """go's flags, each also as `-test.NAME` (go test reads both)."""
    found = table(text, judges)
    return {**found, **{f"-test.{name[1:]}": opt for name, opt in found.items()}}


GO = Spec(
    "go",
    _go_table(
        """
        code   required -exec | runs the tests through a program of its choosing
        code   required -toolexec -vettool | runs a tool of its choosing
        code   required -gcflags -ldflags -asmflags -gccgoflags | passes the compiler flags of its choosing
        config required -modfile -overlay | replaces the module's go.mod or source files with others
        path   required -C | changes to a directory
        path   required -pgo
        write  required -o -pkgdir -coverprofile -cpuprofile -memprofile -blockprofile
        write  required -mutexprofile -trace -outputdir
        end    none     -args
        value  required -run -skip -bench -benchtime -count -cpu -parallel -timeout
        value  required -covermode -coverpkg -p -tags -mod
        value  required -buildmode -compiler -installsuffix -vet -shuffle -fuzz -fuzztime -list
        value  required -fuzzminimizetime -blockprofilerate -memprofilerate -mutexprofilefraction
        flag   none     -v -a -n -x -race -msan -asan -cover -work -trimpath -linkshared -short
        flag   none     -modcacherw -failfast -json -benchmem -c -i -fullpath -buildvcs
        """,
    ),
    operand=path_operand("names a package"),
    after_dashes=passed_operand,  # to the test binary
    style="go",
    abbrev=False,
)

# --- just, gradle, maven, dotnet ------------------------------------------------------------------


def _just_set(use: Use, ctx: Context) -> str | None:
    """`--set NAME VALUE`: the value reaches recipes as a recipe argument does."""
    return script_operand(Use(None, None, (" ".join(use.values),), use.shown), ctx)


JUST = Spec(
    "just",
    table(
        """
        code   required --shell --shell-arg | runs recipes through a shell of its choosing
        code   required -c --command | runs a command given on the command line
        code   none     --shell-command | runs a command given on the command line
        code   required --chooser | runs a chooser program of its choosing
        code   none     -e --edit | opens an editor
        code   none     -g --global-justfile | runs the justfile of the home directory
        value  two      --set
        path   required -f --justfile | reads a justfile
        path   required -d --working-directory | changes to a directory
        path   required -E --dotenv-path --dotenv-filename | reads an environment file
        path   required --ceiling
        write  required --tempdir
        value  required --color --command-color --dump-format --list-heading --list-prefix
        value  required --timestamp-format -s --show --usage --completions
        """,
        {"--set": _just_set},
    ),
    operand=script_operand,  # just pastes recipe arguments into the recipe's shell lines
)


def _gradle_project_prop(use: Use, ctx: Context) -> str | None:
    """`-PNAME=VALUE`: a property the build reads, but not Gradle's own settings (`org.gradle.*`,
    `systemProp.*`: JVM arguments, a daemon's options)."""
    for value in use.values:
        key = value.partition("=")[0].strip().lower()
        if key.startswith(("org.gradle.", "systemprop.")):
            return (
                f"sets one of Gradle's own settings on the command line ({use.shown}); "
                "only build properties are allowed"
            )
    return stray_value("names a path")(use, ctx)


_MVN_PROPERTIES = frozenset(
    {"test", "it.test", "skiptests", "skipits", "maven.test.skip", "groups", "excludedgroups"}
    | {"surefire.failifnospecifiedtests", "failifnotests", "maven.test.failure.ignore"}
)
"""The `-D` properties a Maven test run may get: which tests, skipped or not. Any other can be
a plugin's setting that runs a program (`exec.executable`) or starts a JVM with options of the
command line's choosing (`argLine=-XX:OnOutOfMemoryError=…`)."""


def _mvn_define(use: Use, ctx: Context) -> str | None:
    for value in use.values:
        key, _, setting = value.partition("=")
        if key.strip().lower() not in _MVN_PROPERTIES or setting.startswith("-") or shell_active(setting):
            return (
                f"sets a Maven property on the command line ({use.shown}); only test selection is "
                "allowed (-Dtest=…, -DskipTests, -Dgroups=…)"
            )
    return stray_value("names a path")(use, ctx)


GRADLE = Spec(
    "gradle",
    table(
        """
        path   required -I --init-script | runs an init script
        path   required -g --gradle-user-home | uses a Gradle home (and its init scripts)
        path   required -p --project-dir -c --settings-file -b --build-file
        path   required --include-build | includes a build
        write  required --project-cache-dir
        net    none     --scan | publishes a build scan
        config required -D --system-prop | sets JVM properties (org.gradle.jvmargs…) on the command line
        value  required -P --project-prop
        value  required -x --exclude-task --console --warning-mode --max-workers --priority
        value  required -F --dependency-verification --tests --configuration-cache-problems
        value  required --update-locks
        """,
        {"-P": _gradle_project_prop},
    ),
    operand=free_operand,  # task names, defined by the workspace's build
)


def _mvn_goal(use: Use, ctx: Context) -> str | None:
    goal = use.values[0]
    if ":" in goal:  # group:artifact:goal or prefix:goal, fetched from a repository
        return f"runs a Maven plugin goal given on the command line ({goal})"
    if goal == "install":
        return f"installs into the local Maven repository, outside the workspace ({goal})"
    if goal in ("deploy", "site-deploy"):
        return f"deploys to a remote repository ({goal})"
    return None


MVN = Spec(
    "mvn",
    table(
        """
        value  required -D --define
        path   required -f --file -t --toolchains -gt --global-toolchains
        path   required -s --settings -gs --global-settings | reads Maven settings
        write  required -l --log-file
        value  required -b --builder -pl --projects -rf --resume-from -P --activate-profiles
        value  required -T --threads --color -emp --encrypt-master-password -ep --encrypt-password
        flag   none     -am -amd -fae -ff -fn -ntp -nsu -npr -npu -cpu -llr -up -itr
        """,
        {"-D": _mvn_define},
    ),
    operand=_mvn_goal,
)

DOTNET = Spec(
    "dotnet",
    table(
        """
        write  required -o --output --results-directory -d --diag --artifacts-path
        path   required -a --test-adapter-path | loads test adapters
        path   required -s --settings --configfile --project
        config required -e --environment | sets the environment of the tests
        net    required --source | fetches packages from a source of its choosing
        value  required -l --logger -p --property
        value  required -c --configuration -f --framework -r --runtime -v --verbosity --filter
        value  required --collect --arch --os --blame-hang-timeout --blame-crash-dump-type
        value  required --blame-hang-dump-type --version-suffix --tl
        """,
        {"-l": stray_value("writes"), "-p": stray_value("names a path")},
    ),
    operand=path_operand("builds a project"),
    after_dashes=passed_operand,  # RunSettings: Key=Value
    response_files=True,
)
_MSBUILD = re.compile(r"(?is)(?:--?|/)([a-z][a-z0-9]*)(?::(.*))?")
_MSBUILD_WRITES = {"bl", "binarylogger", "pp", "preprocess", "orc", "outputresultscache", "prof"}
_MSBUILD_WRITES |= {"profileevaluation", "ts", "targets", "fileloggerparameters"}
_MSBUILD_IMPORTS = re.compile(r"(?i)targets|props|tasks?\b|import")


def _dotnet(args: Sequence[str], matched: Sequence[str], ctx: Context) -> str | None:
    """MSBuild's own switches (`-p:K=V`, `/bl:FILE`, `-logger:X`) reach it through dotnet, and
    dotnet reads `--option:value` as `--option=value`."""
    rest: list[str] = []
    for word in args:
        switch = _MSBUILD.fullmatch(word) if (":" in word or word.startswith("/")) else None
        if switch is not None and "--" not in rest:
            name, value = switch.group(1).lower(), switch.group(2) or ""
            reason, handled = _msbuild_switch(word, name, value, ctx)
            if reason or handled:
                if reason:
                    return reason
                continue
        if word.startswith("-") and ":" in word and "=" not in word.partition(":")[0] and "--" not in rest:
            word = word.replace(":", "=", 1)
        rest.append(word)
    return scan(DOTNET, rest, ctx)


def _msbuild_switch(word: str, name: str, value: str, ctx: Context) -> tuple[str | None, bool]:
    """The reason to refuse one MSBuild switch, and whether it was one (not a dotnet option)."""
    slash = word.startswith("/")
    vstest = word.startswith("--") or (name == "l" and not slash)  # dotnet test's --logger, -l
    if name in ("distributedlogger", "dl") or (name in ("logger", "l") and not vstest):
        return f"loads an MSBuild logger given on the command line ({word})", True
    stray = stray_path(value, ctx.root) is not None
    if name in ("p", "property", "rp", "restoreproperty"):
        if _MSBUILD_IMPORTS.search(value.partition("=")[0]):
            return f"sets an MSBuild property that imports build code ({word})", True
        return (f"names a path outside the workspace ({word})" if stray else None), True
    if name in _MSBUILD_WRITES or name.startswith("flp"):
        return (f"writes outside the workspace ({word})" if stray else None), True
    if slash:
        return (f"names a path outside the workspace ({word})" if stray else None), True
    return None, False


# --- Ruby ------------------------------------------------------------------------------------------


def _require(use: Use, ctx: Context) -> str | None:
    """`-r NAME`: a file of the workspace (spec/NAME.rb, lib/NAME.rb), not a library."""
    for value in use.values:
        if "/" in value or value.startswith("."):
            if inside(value, ctx.root):
                continue
        elif any(
            os.path.isfile(os.path.join(ctx.root, d, n)) and inside(os.path.join(d, n), ctx.root)
            for d in ("spec", "lib", "")
            for n in (value, value + ".rb")
        ):
            continue
        return f"loads code given on the command line ({use.shown})"
    return None


def _load_path(use: Use, ctx: Context) -> str | None:
    if any(not inside(p, ctx.root) for v in use.values for p in v.split(":")):
        return f"loads code from outside the workspace ({use.shown})"
    return None


RSPEC = Spec(
    "rspec",
    table(
        """
        code   required -r --require
        path   required -I
        path   required -O --options --default-path
        write  required -o --out --deprecation-out
        value  required -f --format -e --example -E --example-matches -t --tag --seed --order
        value  required -P --pattern --exclude-pattern --failure-exit-code --error-exit-code
        value  next     -p --profile
        value  optional --bisect --fail-fast
        """,
        {"-r": _require, "-I": _load_path},
    ),
    operand=path_operand("runs specs", strip=lambda w: re.split(r"[:\[]", w, maxsplit=1)[0]),
)

# --- git, find ----------------------------------------------------------------------------------


def _exec_path(use: Use, ctx: Context) -> str | None:
    """`--exec-path` alone prints where git's helpers are; with a value it runs them from there."""
    return f"runs git's helpers from a directory of its choosing ({use.shown})" if use.values else None


GIT_GLOBAL = Spec(
    "git",
    table(
        """
        config required -c --config-env | sets git configuration on the command line
        config required --super-prefix | passes git one of its internal options
        code   optional --exec-path
        path   required -C --git-dir --work-tree
        value  required --namespace
        """,
        {"--exec-path": _exec_path},
    ),
    operand=free_operand,
)
GIT = Spec(
    "git",
    table("""
        code   required --output | writes to a file of its choosing
        code   none     --ext-diff --textconv | runs a diff program from git's configuration
        code   required --upload-pack --receive-pack --exec | runs a program of its choosing
        path   required -O
    """),
    operand=path_operand("compares files"),
)
_GIT_GLOBAL_VALUES = ("-c", "-C", "--git-dir", "--work-tree", "--namespace", "--config-env", "--super-prefix")


def _git(args: Sequence[str], matched: Sequence[str], ctx: Context) -> str | None:
    i = 0  # git's own options come before the subcommand
    while i < len(args) and args[i].startswith("-"):
        i += 2 if args[i] in _GIT_GLOBAL_VALUES else 1
    return scan(GIT_GLOBAL, args[:i], ctx) or scan(GIT, args[i + 1 :], ctx)


_FIND_ACTIONS = ("-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls")


def _find(args: Sequence[str], matched: Sequence[str], ctx: Context) -> str | None:
    for arg in args:
        if arg in _FIND_ACTIONS:
            return f"runs or writes something for each file (find {arg})"
    return None


RULES: dict[str, Rule] = {
    "make": scanning(MAKE),
    "cargo": _cargo,
    "go": scanning(GO),
    "just": scanning(JUST),
    "gradle": scanning(GRADLE),
    "mvn": scanning(MVN),
    "dotnet": _dotnet,
    "rspec": scanning(RSPEC),
    "git": _git,
    "find": _find,
}
