"""The rules for Python's test and lint programs: pytest (and `python -m pytest`), mypy,
ruff, black, flake8, pyright, tox, nox. See `loop/verify_options.py` for what is refused and why.
"""

from __future__ import annotations

from collections.abc import Sequence

from loop.verify.argv import (
    CHECKS_FILES,
    NAMES_PATH,
    REWRITES_FILES,
    Context,
    Rule,
    Spec,
    Use,
    config_or_path,
    inside,
    operands,
    path_operand,
    scan,
    scanning,
    script_operand,
    table,
)

# --- pytest --------------------------------------------------------------------------------------


def _plugin(use: Use, ctx: Context) -> str | None:
    if use.values and all(v.strip().startswith("no:") for v in use.values):
        return None  # -p no:NAME only disables one
    return f"loads a plugin given on the command line ({use.shown})"


def _warning_filter(use: Use, ctx: Context) -> str | None:
    """`-W action:message:CATEGORY`: pytest imports a dotted category's module."""
    for value in use.values:
        fields = value.split(":")
        module = fields[2].strip().rpartition(".")[0] if len(fields) > 2 else ""
        if module and module.split(".")[0] not in ("builtins", "warnings", "pytest", "_pytest"):
            return f"imports the module a warning filter names ({use.shown})"
    return None


def _cov_report(use: Use, ctx: Context) -> str | None:
    """`--cov-report TYPE:DEST` writes DEST."""
    if any(not inside(v.partition(":")[2], ctx.root) for v in use.values):
        return f"writes outside the workspace ({use.shown})"
    return None


PYTEST = Spec(
    "pytest",
    table(
        """
        code   required -p | loads a plugin given on the command line
        code   none     --pyargs | imports the modules it names instead of test files
        code   required --pdbcls | loads a debugger class given on the command line
        code   required --tx --px | starts test workers through a gateway of its choosing
        code   required -W --pythonwarnings
        config required -o --override-ini | overrides pytest's configuration on the command line
        net    required --pastebin | sends the test report to a pastebin service
        path   required -c --config-file | reads a configuration file
        path   required --confcutdir | loads conftest.py files up to a directory
        path   required --rsyncdir --cov-config
        path   next     --cov
        config required --basetemp | chooses the folder pytest empties first (only its default is allowed)
        write  required --rootdir --junitxml --junit-xml --log-file --resultlog
        write  required --result-log --report-log --html --json-report-file --alluredir
        write  required --benchmark-json --cov-report
        write  next     --debug
        value  required -k -m --maxfail --capture --lfnf --last-failed-no-failures --durations
        value  required --durations-min --verbosity -r --tb --show-capture --color --code-highlight
        value  required --junitprefix --junit-prefix --ignore --ignore-glob --deselect --import-mode
        value  required --doctest-report --doctest-glob --assert --log-level --log-format
        value  required --log-date-format --log-cli-level --log-cli-format --log-cli-date-format
        value  required --log-file-mode --log-file-level --log-file-format --log-file-date-format
        value  required --log-auto-indent --log-disable -n --numprocesses --maxprocesses --dist
        value  required --max-worker-restart --rsyncignore --testrunuid --maxschedchunk --timeout
        value  required --reruns --randomly-seed --hypothesis-profile --hypothesis-seed
        value  required --asyncio-mode --cov-fail-under
        value  next     --cache-show
        """,
        {"-p": _plugin, "-W": _warning_filter, "--cov-report": _cov_report},
    ),
    operand=path_operand("runs tests", strip=lambda w: w.split("::", 1)[0]),
    abbrev=False,  # pytest builds its parser with allow_abbrev=False
    response_files=True,
)


def _pytest(args: Sequence[str], matched: Sequence[str], ctx: Context) -> str | None:
    # pytest loads `-p NAME` and `-pNAME` before it parses anything, from any word: the value
    # of another option, a word after `--`.
    for i, word in enumerate(args):
        if word.startswith("-p") and not word.startswith("--"):
            name = word[2:] or (args[i + 1] if i + 1 < len(args) else "")
            if not name.strip().startswith("no:"):
                return f"loads a plugin given on the command line (-p {name})"
    return scan(PYTEST, args, ctx)


# --- Python linters, type checkers, tox, nox -----------------------------------------------------


MYPY = Spec(
    "mypy",
    table("""
        code   required --python-executable | runs a Python interpreter of its choosing
        code   none     --install-types | installs packages from the network
        path   required --config-file | reads a configuration file (which can load plugins)
        path   required --custom-typeshed-dir --package-root
        path   two      --shadow-file
        write  required --cache-dir --junit-xml --quickstart-file --timing-stats
        write  required --line-checking-stats --any-exprs-report --cobertura-xml-report
        write  required --html-report --linecount-report --linecoverage-report --lineprecision-report
        write  required --txt-report --xml-report --xslt-html-report --xslt-txt-report
        write  many     --cache-map
        value  required -O --output --follow-imports --python-version --platform --always-true
        value  required --always-false --untyped-calls-exclude --deprecated-calls-exclude
        value  required --disable-error-code --enable-error-code --soft-error-limit --exclude
        value  required --sqlite-num-shards --custom-typing-module --enable-incomplete-feature
        value  required -n --num-workers -a --junit-format --find-occurrences
        value  required -m --module -p --package -c --command
    """),
    operand=CHECKS_FILES,
    response_files=True,  # mypy reads `@FILE` as more arguments
)

RUFF = Spec(
    "ruff",
    table(
        """
        path   required --config
        path   required --python
        write  required -o --output-file --cache-dir
        value  optional --add-noqa --add-ignore
        value  required --color --output-format --target-version --extension --select --ignore
        value  required --extend-select --extend-ignore --per-file-ignores --extend-per-file-ignores
        value  required --fixable --unfixable --extend-fixable --extend-unfixable --exclude
        value  required --extend-exclude --stdin-filename --line-length --range
        value  required --dummy-variable-rgx --direction --min-dots
        flag   none     --fix --no-fix --unsafe-fixes --no-unsafe-fixes --show-fixes --diff -w
        flag   none     --watch --fix-only --ignore-noqa --preview --no-preview --statistics
        flag   none     --show-files --show-settings --respect-gitignore --force-exclude -n -e
        flag   none     --no-cache --exit-zero --exit-non-zero-on-fix --check --isolated -v -q -s
        flag   none     --exit-non-zero-on-format
        """,
        {"--config": config_or_path("ruff", lambda v: "=" in v)},  # `--config "key = value"`
    ),
    operand=REWRITES_FILES,
    abbrev=False,  # clap takes whole names only
)

BLACK = Spec(
    "black",
    table("""
        path   required --config | reads a configuration file
        value  required -c --code -l --line-length -t --target-version --include --exclude
        value  required --extend-exclude --force-exclude --stdin-filename -W --workers
        value  required --python-cell-magics --required-version --line-ranges
        value  required --enable-unstable-feature
    """),
    operand=REWRITES_FILES,
    abbrev=False,  # click takes whole names only
)

FLAKE8 = Spec(
    "flake8",
    table("""
        path   required --config --append-config | reads a configuration file
        write  required --output-file
        value  required --format --exclude --extend-exclude --filename --stdin-display-name
        value  required --select --extend-select --ignore --extend-ignore --per-file-ignores
        value  required --max-line-length --max-doc-length --indent-size --max-complexity
        value  required --builtins -j --jobs --require-plugins --color --enable-extensions
    """),
    operand=CHECKS_FILES,
)

PYRIGHT = Spec(
    "pyright",
    table("""
        path   required --pythonpath | runs a Python interpreter
        path   required -p --project -v --venvpath -t --typeshedpath
        value  required --level --pythonplatform --pythonversion --createstub --verifytypes
        value  next     --threads
    """),
    operand=CHECKS_FILES,
)

TOX = Spec(
    "tox",
    table("""
        path   required -c --conf | reads a tox configuration (which runs commands)
        path   required --root
        path   required --installpkg | installs a package
        path   many     --discover | runs Python interpreters
        code   required --force-dep | installs a dependency given on the command line
        config required -x --override | overrides tox's configuration on the command line
        write  required --workdir --result-json --devenv
        write  next     --no-provision
        value  required -e --exit-and-dump-after --runner --hashseed --colored --stderr-color
        value  required --skip-env
        value  many     -m --labels -f --factors
        value  next     -p --parallel
    """),
    operand=NAMES_PATH,
    after_dashes=script_operand,  # {posargs} of the workspace's commands
)


def _tox(args: Sequence[str], matched: Sequence[str], ctx: Context) -> str | None:
    verb = next(iter(operands(TOX, args)), "")
    if verb in ("exec", "e"):
        return f"runs a command given on the command line (tox {verb})"
    return scan(TOX, args, ctx)


NOX = Spec(
    "nox",
    table("""
        path   required -f --noxfile | reads a noxfile (Python code)
        path   required -P --force-python | runs a Python interpreter
        path   many     -p --python --pythons --extra-pythons --extra-python
        write  required --envdir --report
        value  many     -s -e --session --sessions -t --tags
        value  required -k --keywords -db --default-venv-backend -fb --force-venv-backend
        value  required --script-venv-backend --script-mode --download-python
        flag   none     -r -R -x -l --list --no-venv --no-install
    """),
    operand=NAMES_PATH,
    after_dashes=script_operand,  # the sessions' posargs
)


RULES: dict[str, Rule] = {
    "pytest": _pytest,
    "py.test": _pytest,
    "mypy": scanning(MYPY),
    "ruff": scanning(RUFF),
    "black": scanning(BLACK),
    "flake8": scanning(FLAKE8),
    "pyright": scanning(PYRIGHT),
    "tox": _tox,
    "nox": scanning(NOX),
}
