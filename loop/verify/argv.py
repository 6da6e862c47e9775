"""Reading a verification command's words the way its program will, and keeping the paths it
names inside the workspace: the groundwork of `loop/verify_options.py`.

A rule such as "make's --eval is refused" is only as good as the reading that finds `--eval`.
Programs read their options in a few well-known ways, and each way has forms a naive scan misses:

* GNU getopt_long (make) and the parsers that imitate it (argparse, clap, click, Ruby's
  OptionParser, commons-cli): short flags bundle (`-sE CODE` is `-s -E CODE`, `-sfFILE` gives
  `-f` the value FILE), a long option may be shortened to any unambiguous prefix (`--ev=` is
  `--eval=`), takes its value after `=` or as the next word, options may follow operands, and
  `--` ends them;
* Go's flag package: one or two dashes, a whole name, `-name=value` or `-name value`.

Where we cannot know how a program reads a word (an option no table here names), the word is
judged both ways: what could be its value is checked as a path, and the words after it are still
read as options and operands. A path is resolved as the program would resolve it, symlinks
included (`os.path.realpath` against the workspace), so a link inside the workspace that points
out of it does not count as inside.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, cast, get_args

Kind = Literal["flag", "value", "path", "write", "code", "config", "net", "end"]
"""What an option does with its value: `flag` and `value` nothing to fear; `path` reads and
`write` writes (or deletes) where it names, which must stay inside the workspace; `code` runs or
loads something it names, `config` sets the program's configuration and `net` reaches the
network, none of which a command may do unless a person allowed that exact command; `end`
passes every later word to another program (go test's `-args`)."""

Arg = Literal["none", "required", "optional", "next", "two", "many"]
"""How an option takes its value: not at all; always (`--x=v`, `--x v`, `-xv`, `-x v`); only
attached (getopt's optional arguments: `--jobs=4`, `-j4`); attached or the next word unless it
is an option (argparse's `nargs="?"`); the next two words; the words up to the next option."""

_RISK: dict[str, int] = {"code": 6, "config": 5, "net": 4, "end": 3, "write": 2, "path": 1}


@dataclass(frozen=True)
class Context:
    root: str
    """The workspace, symlinks resolved: every path is judged against it."""
    program: str
    """The program as the person knows it, for the reasons ("sets cargo's configuration")."""


Judge = Callable[["Use", Context], "str | None"]
"""A rule for one option's use, or for an operand: the reason to refuse it, or None."""


@dataclass(frozen=True)
class Opt:
    kind: Kind
    arg: Arg = "none"
    why: str | None = None
    """What the option does, in the refusal's words: "loads a plugin given on the command line"
    (then the option as written), or "reads a makefile" (then "outside the workspace")."""
    judge: Judge | None = None
    """A rule for its value that replaces its kind's (`-p no:NAME` only disables a plugin)."""


@dataclass(frozen=True)
class Use:
    """One option as the program reads it, or one operand (`name` None)."""

    name: str | None
    """The option's full name (`--eval` for `--ev`); None for an operand."""
    opt: Opt | None
    """None for an operand, or an option no table names."""
    values: tuple[str, ...]
    """Its value(s); for `-xVALUE` both readings when VALUE starts with `=` (argparse and clap
    drop the `=`, getopt keeps it)."""
    shown: str
    """The words as the person wrote them, for the reason."""
    passed: bool = False
    """An operand after `--` (or go test's `-args`), handed to another program as it is."""


@dataclass(frozen=True)
class Spec:
    """A program's options and how it reads them."""

    program: str
    options: Mapping[str, Opt]
    """By name as written: `-f`, `--file`, and single-dash long names (`-exec` for go, `-gs`
    for Maven)."""
    operand: Judge
    after_dashes: Judge | None = None
    """The rule for words after `--`; None: the operand rule."""
    style: Literal["gnu", "go"] = "gnu"
    unknown: Literal["check", "refuse"] = "check"
    """An option no table names: its possible value is checked as a path, or it is refused
    (programs whose option surface is too large to list what is risky)."""
    abbrev: bool = True
    """Long options may be shortened to an unambiguous prefix (getopt, argparse by default,
    OptionParser, commons-cli). Assumed unless the program is known not to."""
    response_files: bool = False
    """`@FILE` operands name a file of more arguments (argparse's fromfile_prefix_chars)."""
    unknown_hint: str = ""
    """Said after the refusal of an unknown option (where a script's arguments go)."""
    casefold: bool = False
    """Option names are read whatever their case (tsc's `--outdir` is `--outDir`)."""


def table(text: str, judges: Mapping[str, Judge] | None = None) -> dict[str, Opt]:
    """Options from lines `KIND ARG NAME... [| WHY]` (KIND and ARG as above); `judges` gives an
    option its own rule for its value, by any of its names."""
    found: dict[str, Opt] = {}
    for line in filter(str.strip, text.splitlines()):
        spec, _, why = line.partition("|")
        kind, arg, *names = spec.split()
        if kind not in get_args(Kind) or arg not in get_args(Arg) or not names:
            raise ValueError(f"not an option line: {line!r}")
        judge = next((judges[n] for n in names if judges and n in judges), None)
        opt = Opt(cast(Kind, kind), cast(Arg, arg), why.strip() or None, judge)
        found.update(dict.fromkeys(names, opt))
    return found


# --- paths ------------------------------------------------------------------------------------


def workspace_root(cwd: str | None) -> str:
    return os.path.realpath(cwd if cwd is not None else os.getcwd())


def inside(value: str, root: str) -> bool:
    """Does the path `value` (relative to the workspace, or absolute) stay inside it once `..`
    and symlinks are resolved? `~` and `$` count as outside: a program may expand them."""
    if value in ("", "-", os.devnull):
        return True
    if value.startswith("~") or "$" in value:
        return False
    target = os.path.realpath(os.path.join(root, value))
    return target == root or target.startswith(root.rstrip("/") + "/")


_PIECES = re.compile(r"[\s=:,;]+")


def stray_path(text: str, root: str) -> str | None:
    """The first piece of a free-form value (`-javaagent:/x.jar`, `K=/a;L=b`, a URL) that names
    a path outside the workspace, or None."""
    for piece in _PIECES.split(text):
        if piece and not inside(piece, root):
            return piece
    return None


_SHELL_ACTIVE = re.compile(r"[;&|<>`$()\n\r]")


def shell_active(text: str) -> bool:
    """Would this text, pasted into a shell command line, start another command, substitute
    one or redirect? (A recipe or script that interpolates an argument runs it in a shell.)"""
    return bool(_SHELL_ACTIVE.search(text))


def _clip(text: str) -> str:
    return text if len(text) <= 80 else text[:77] + "..."


# --- operand rules ------------------------------------------------------------------------------


def path_operand(what: str, strip: Callable[[str], str] | None = None) -> Judge:
    """Operands are paths (files to test, lint or format) kept inside the workspace."""

    def judge(use: Use, ctx: Context) -> str | None:
        word = use.values[0]
        path = strip(word) if strip is not None else word
        if not inside(path, ctx.root):
            return f"{what} outside the workspace ({_clip(word)})"
        return None

    return judge


def free_operand(use: Use, ctx: Context) -> str | None:
    """Operands that are names, not paths (cargo's test filter, gradle's tasks)."""
    return None


def passed_operand(use: Use, ctx: Context) -> str | None:
    """A word handed to another program as it is (a test binary): no path out of the
    workspace in it."""
    stray = stray_path(use.values[0], ctx.root)
    return f"passes a path outside the workspace ({_clip(stray)})" if stray is not None else None


def script_operand(use: Use, ctx: Context) -> str | None:
    """A word that reaches a script or recipe, which may paste it into a shell command: no
    shell syntax in it, no path out of the workspace."""
    word = use.values[0]
    if shell_active(word):
        return f"passes shell syntax to a script or recipe ({_clip(word)})"
    return passed_operand(use, ctx)


# --- reading the words --------------------------------------------------------------------------


def _lookup(spec: Spec, name: str) -> tuple[str | None, Opt | None]:
    """The option `name` (with its dashes) means, and its full name: the exact one, else the
    long option it abbreviates, else the riskiest of several it could abbreviate (the program
    refuses an ambiguous one; a table may miss an option that would have matched exactly, so
    an abbreviation is only ever a guess: see `take`)."""
    opt = spec.options.get(name)
    if opt is not None:
        return name, opt
    if not spec.abbrev or not name.startswith("--") or len(name) < 3:
        return None, None
    found = [(full, o) for full, o in spec.options.items() if full.startswith("--") and full.startswith(name)]
    if not found:
        return None, None
    return max(found, key=lambda f: _RISK.get(f[1].kind, 0))


def _attached(rest: str) -> tuple[str, ...]:
    return (rest, rest[1:]) if rest.startswith("=") else (rest,)


def read(spec: Spec, args: Sequence[str]) -> Iterator[Use]:
    """The options and operands of `args` as `spec`'s program reads them."""
    i = 0
    n = len(args)
    ended = False

    def take(opt: Opt, attached: tuple[str, ...] | None, consume: bool) -> tuple[tuple[str, ...], list[str]]:
        """The values of `opt` given what was attached, and the next words it takes. When the
        reading is a guess (`consume` False: an abbreviation), those words are judged as its
        values and then read again as what follows."""
        nonlocal i
        if attached is not None or opt.arg in ("none", "optional"):
            return attached or (), []
        if opt.arg in ("required", "next"):
            taken = list(args[i : i + 1])
            if opt.arg == "next" and taken and taken[0].startswith("-"):
                taken = []  # argparse's nargs="?" takes no option-looking word
        else:
            count = 2 if opt.arg == "two" else n
            taken = []
            while i + len(taken) < n and len(taken) < count and not args[i + len(taken)].startswith("-"):
                taken.append(args[i + len(taken)])
        if consume:
            i += len(taken)
        return tuple(taken), list(taken)

    while i < n:
        word = args[i]
        i += 1
        if ended or word == "-" or not word.startswith("-"):
            yield Use(None, None, (word,), word, ended)
            continue
        if word == "--":
            ended = True
            continue
        long_form = spec.style == "go" or word.startswith("--")
        head, eq, tail = word.partition("=")
        if spec.casefold:
            head = head.lower()
        if not long_form and len(head) > 2 and head in spec.options:
            long_form = True  # a single-dash long name: Maven's -gs, dotnet's -bl
        if long_form:
            name = "-" + head.lstrip("-") if spec.style == "go" else head
            full, opt = _lookup(spec, name)
            attached = (tail,) if eq else None
            if opt is None:
                yield Use(head, None, attached or (), word)
                continue
            values, more = take(opt, attached, consume=full == name)
            yield Use(full, opt, values, " ".join([word, *more]))
            if opt.kind == "end":
                for rest in args[i:]:
                    yield Use(None, None, (rest,), rest, True)
                return
            continue
        j = 1  # a bundle of short options
        while j < len(word):
            name = "-" + word[j]
            opt = spec.options.get(name)
            rest = word[j + 1 :]
            if opt is None:
                yield Use(name, None, _attached(rest) if rest else (), word)
                j += 1  # its value or more flags: both are judged
                continue
            if opt.arg == "none":
                yield Use(name, opt, (), word)
                j += 1
                continue
            values, more = take(opt, _attached(rest) if rest else None, consume=True)
            yield Use(name, opt, values, " ".join([word, *more]))
            break


def judge_use(spec: Spec, use: Use, ctx: Context) -> str | None:
    """The reason to refuse one option or operand, or None."""
    if use.name is None:
        word = use.values[0]
        if spec.response_files and not use.passed and word.startswith("@"):
            if not inside(word[1:], ctx.root):
                return f"reads its arguments from a file outside the workspace ({_clip(word)})"
            return None
        rule = spec.after_dashes if use.passed and spec.after_dashes is not None else spec.operand
        return rule(use, ctx)
    opt = use.opt
    if opt is None:
        if spec.unknown == "refuse":
            return (
                f"gives {ctx.program} an option loopdeck does not know to be harmless "
                f"({_clip(use.shown)}){spec.unknown_hint}"
            )
        for value in use.values:
            stray = stray_path(value, ctx.root)
            if stray is not None:
                return f"names a path outside the workspace ({_clip(use.shown)})"
        return None
    if opt.judge is not None:
        return opt.judge(use, ctx)
    return judge_kind(opt, use, ctx)


def judge_kind(opt: Opt, use: Use, ctx: Context) -> str | None:
    """The rule of the option's kind."""
    shown = _clip(use.shown)
    if opt.kind == "code":
        return f"{opt.why or 'runs code given on the command line'} ({shown})"
    if opt.kind == "config":
        return f"{opt.why or f'sets {ctx.program} configuration on the command line'} ({shown})"
    if opt.kind == "net":
        return f"{opt.why or 'reaches the network'} ({shown})"
    if opt.kind in ("path", "write"):
        for value in use.values:
            if not inside(value, ctx.root):
                what = opt.why or ("reads a file" if opt.kind == "path" else "writes")
                return f"{what} outside the workspace ({shown})"
            if opt.kind == "write" and in_git_dir(value, ctx.root):
                return f"writes into the .git folder ({shown}); the rest of the workspace is fine"
    return None


def in_git_dir(value: str, root: str) -> bool:
    """Does the path `value` fall in a `.git` folder of the workspace (its hooks, its config)?"""
    target = os.path.realpath(os.path.join(root, value))
    return ".git" in os.path.relpath(target, root).split(os.sep)


def scan(spec: Spec, args: Sequence[str], ctx: Context) -> str | None:
    """The first reason to refuse `args` under `spec`, or None."""
    for use in read(spec, args):
        reason = judge_use(spec, use, ctx)
        if reason:
            return reason
    return None


# --- shared by the programs' rules -------------------------------------------------------------

Rule = Callable[[Sequence[str], Sequence[str], Context], "str | None"]
"""A program's rule: (its arguments, the allow entry matched as words, the context) → the
reason to refuse, or None."""

NAMES_PATH = path_operand("names a path")
CHECKS_FILES = path_operand("checks files")
REWRITES_FILES = path_operand("reads or rewrites files")


def operands(spec: Spec, args: Sequence[str]) -> list[str]:
    """The operands before any `--` (a subcommand is the first)."""
    return [u.values[0] for u in read(spec, args) if u.name is None and not u.passed]


def scanning(spec: Spec) -> Rule:
    """The rule of a program whose options its table says all about."""
    return lambda args, matched, ctx: scan(spec, args, ctx)


def stray_value(why: str) -> Judge:
    """A free-form value (`-Dkey=value`, a logger's settings) with no path out of the workspace."""

    def judge(use: Use, ctx: Context) -> str | None:
        if any(stray_path(v, ctx.root) is not None for v in use.values):
            return f"{why} outside the workspace ({use.shown})"
        return None

    return judge


def one_of(*allowed: str) -> Judge:
    """A value from a short list the program documents (npm's log levels)."""

    def judge(use: Use, ctx: Context) -> str | None:
        if all(v in allowed for v in use.values):
            return None
        return f"gives {ctx.program} a value loopdeck does not know to be harmless ({use.shown})"

    return judge


def config_or_path(what: str, inline: Callable[[str], bool]) -> Judge:
    """`--config`: a file inside the workspace, or configuration written out on the command line."""

    def judge(use: Use, ctx: Context) -> str | None:
        if any(inline(v) for v in use.values):
            return f"sets {what} configuration on the command line ({use.shown})"
        return judge_kind(Opt("path", why="reads a configuration file"), use, ctx)

    return judge
