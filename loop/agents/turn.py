"""One judgement of a turn: what an agent run means, the same for every driver.

A driver runs the agent and hands over what it saw (the exit status, the output, whether it
timed out or could not start); `judge` asks the CLI's adapter for the facts and decides what
the engine is told: the turn worked, failed (and why: the text the journal shows and whose
signature finds the same error repeating), or hit a usage limit (not a failure: no retry is
spent, the loop waits for the reset); its usage as the state sums it; the tools refused and how
to allow them; the agent's last words, with the completion signal and the question read from
them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from loop.agents.base import Adapter, Facts
from loop.core.model import Turn
from loop.core.signals import completion_signal, question

TEXT_CHARS = 64 * 1024


SIGNATURE_CHARS = 400
"""The engine compares (and the state keeps) at most this much of a signature."""
_READ_CHARS = 32 * 1024
"""How much of a failure's end is read for its signature: test runners name the failed tests
at the end of their output."""

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_VOLATILE = (
    # timestamps: ISO dates and times, clock times, Unix times in seconds or milliseconds
    (re.compile(r"\b\d{4}-\d\d-\d\d(?:[T ]\d\d:\d\d(?::\d\d)?(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)?"), "<time>"),
    (re.compile(r"\b\d{1,2}:\d\d:\d\d(?:[.,]\d+)?\b"), "<time>"),
    (re.compile(r"\b1[5-9]\d{8}(?:\d{3})?(?:\.\d+)?\b"), "<time>"),
    # durations: "in 0.80s", "(0.00s)", "12ms", "1.2 seconds", "0m1.2s", "duration_ms: 0.51"
    (re.compile(r"\bduration_ms:?\s*\d+(?:\.\d+)?"), "duration_ms <t>"),
    (re.compile(r"\b\d+m\d+(?:\.\d+)?s\b"), "<t>"),
    (re.compile(r"\b\d+(?:\.\d+)?\s?(?:ns|us|µs|ms|s|sec|secs|seconds?)\b"), "<t>"),
    # object and memory addresses
    (re.compile(r"\b0x[0-9a-fA-F]{4,16}\b"), "0x<addr>"),
    # temporary folders: pytest's, Python's tempfile, mktemp's, go's, macOS's
    (re.compile(r"pytest-of-[^/\s]{1,64}/pytest-\d+"), "pytest-of-<u>/pytest-<n>"),
    (re.compile(r"\btmp[a-z0-9_]{8}\b"), "tmp<x>"),
    (re.compile(r"\btmp\.[A-Za-z0-9]{6,16}\b"), "tmp.<x>"),
    (re.compile(r"\bgo-build\d+"), "go-build<n>"),
    (re.compile(r"/var/folders/[^/\s]{1,16}/[^/\s]{1,64}/"), "/var/folders/<x>/"),
    # process ids, and the random seeds test runners print
    (re.compile(r"\b(pid|PID|process|seed)([ =:]{1,3})\d+"), r"\1\2<n>"),
)

_UNITTEST = re.compile(r"(?:FAIL|ERROR): (\w+ \([\w.]+\))")


def error_signature(text: str) -> str:
    """What makes two failures "the same error". Where the output names its failing tests
    (pytest, unittest, node's test runner, go test, cargo test), the signature is the commands
    run, their exit codes and those names; otherwise it is the output's end. Either way what
    changes between two runs of the same failure is taken out first: durations, addresses,
    temporary folders, timestamps, process ids (pytest's "1 failed in 0.80s" made every run of
    one failing test a new error)."""
    text = _ANSI.sub("", text.split("(timed out")[0][-_READ_CHARS:])
    for pattern, replacement in _VOLATILE:
        text = pattern.sub(replacement, text)
    lines = [" ".join(line.split()) for line in text.splitlines()]
    names = failing_tests(lines)
    if names:
        heads = [line for line in lines if line.startswith(("$ ", "(exit "))]
        return "\n".join([*heads, "failing: " + ", ".join(names)])[-SIGNATURE_CHARS:]
    return "\n".join(line for line in lines if line)[-SIGNATURE_CHARS:]


def failing_tests(lines: list[str]) -> list[str]:
    """The failing tests a test runner's output names, sorted, each once."""
    names: set[str] = set()
    for line in lines:
        name = _failed_test(line)
        if name:
            names.add(name)
    return sorted(names)


def _failed_test(line: str) -> str | None:
    """The test a line names as failed, if it is one of the runners' failure lines."""
    if line.startswith(("FAILED ", "ERROR ")):  # pytest: FAILED tests/x.py::test_y - assert …
        name = line.split(" ", 1)[1].partition(" - ")[0].strip()
        return name if "::" in name or name.endswith(".py") else None
    if line.startswith(("FAIL: ", "ERROR: ")):  # unittest: FAIL: test_y (mod.Class.test_y)
        found = _UNITTEST.match(line)
        return found.group(1) if found else None
    if line.startswith("not ok "):  # node --test (TAP): not ok 2 - name # comment
        number, dash, name = line[7:].partition(" - ")
        return name.partition(" # ")[0].strip() or None if dash and number.isdigit() else None
    if line.startswith("--- FAIL: "):  # go test: --- FAIL: TestX (0.00s)
        return line[10:].split(" ", 1)[0] or None
    if line.startswith("test ") and line.endswith(" ... FAILED"):  # cargo test
        return line[5:-11].strip() or None
    if line.startswith("✖ "):  # node --test (spec): ✖ name (1.2ms)
        return line[2:].removesuffix("(<t>)").strip() or None
    return None


@dataclass(frozen=True)
class Judgement:
    facts: Facts
    ok: bool
    """The agent did its turn: it started, ended by itself with exit 0, and its CLI did not say
    the turn failed."""
    failure: str | None = None
    """Why it did not (None when it did, or when it only hit a usage limit)."""
    text: str | None = None
    """The agent's last words (its final message, or the tail of what it printed)."""
    signal: str | None = None
    """The completion signal in those words (`ALL_TASKS_COMPLETE` or `promise`), if any."""
    question: str | None = None
    """A `<question>` to a person in those words, if any."""

    @property
    def limited(self) -> str | None:
        return self.facts.limited

    @property
    def resets_at(self) -> str | None:
        return self.facts.resets_at

    @property
    def usage(self) -> dict[str, int] | None:
        """What the state sums: token counts, the cost in millionths of a dollar, the part of it
        that is loopdeck's estimate, and a turn whose cost nobody knows (tokens, no price)."""
        return usage_of(self.facts)

    def turn(self, usage: dict[str, int] | None = None) -> Turn:
        """The engine's account of this turn (`usage`: when several attempts add up)."""
        spent = usage if usage is not None else self.usage
        if self.facts.limited is not None:
            return Turn(limited=self.facts.limited, resets_at=self.facts.resets_at, usage=spent)
        if self.failure is not None:
            return Turn(failure=self.failure, error=error_signature(self.failure), usage=spent)
        return Turn(
            usage=spent,
            denied=self.facts.denied,
            denied_hint=self.facts.denied_hint,
        )


def usage_of(facts: Facts) -> dict[str, int] | None:
    usage = {key: int(value) for key, value in facts.tokens.items() if value}
    if facts.cost_usd is not None:
        usage["cost_micro_usd"] = round(facts.cost_usd * 1_000_000)
        if facts.estimated:
            usage["estimated_cost_micro_usd"] = usage["cost_micro_usd"]
    elif usage:
        usage["unpriced_turns"] = 1
    return usage or None


def judge(
    adapter: Adapter,
    output: str | bytes,
    exit_code: int | None,
    *,
    now: datetime,
    timed_out: bool = False,
    timeout_s: float | None = None,
    start_error: str | None = None,
    env: Mapping[str, str] | None = None,
    promise: str | None = None,
    echoed: str = "",
) -> Judgement:
    """The judgement of one agent run, from what the driver saw of it.

    `start_error`: the agent could not be started; `timed_out`: the driver killed it after
    `timeout_s`; `env`: the environment it ran in (an adapter may find the CLI's own files
    through it); `promise` and `echoed` (the prompt it was given) for reading the signal."""
    text_out = output.decode("utf-8", "replace") if isinstance(output, bytes) else output
    facts = adapter.read(text_out, exit_code, now, env)
    text = facts.text
    failure: str | None = None
    if start_error is not None:
        failure = start_error
    elif facts.limited is not None:
        failure = None  # not a failure of the work: the loop waits
    elif timed_out:
        failure = f"timed out after {timeout_s:g} s" if timeout_s is not None else "timed out"
    elif facts.failed or exit_code != 0:
        status = f" (HTTP {facts.api_status})" if facts.api_status else ""
        detail = facts.error or _last(text) or ""
        failure = f"exit {exit_code}{status}" + (f": {detail[-300:]}" if detail else "")
    ok = failure is None and facts.limited is None
    return Judgement(
        facts=facts,
        ok=ok,
        failure=failure,
        text=text,
        signal=completion_signal(text, promise, echoed) if ok else None,
        question=question(text) if ok and text else None,
    )


def _last(text: str | None) -> str:
    lines = [line.strip() for line in (text or "").strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""
