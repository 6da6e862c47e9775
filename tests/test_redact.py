"""Secrets never reach a file loopdeck writes: the forms, then each kind of file."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from loop import agent, archive
from loop.journal import Journal
from loop.paths import Workspace
from loop.redact import redact
from loop.state import LoopState

ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
UPPER_DIGITS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
B64URL = ALNUM + "_-"


def chars(alphabet: str, lo: int, hi: int = 40) -> st.SearchStrategy[str]:
    return st.text(alphabet=alphabet, min_size=lo, max_size=hi)


def prefixed(prefix: str, alphabet: str, lo: int) -> st.SearchStrategy[tuple[str, list[str]]]:
    """A token that is a secret as a whole."""
    return chars(alphabet, lo).map(lambda body: (prefix + body, [prefix + body]))


TOKENS = st.one_of(
    prefixed("sk-ant-", ALNUM, 4),
    prefixed("sk-ant-api03-", B64URL, 4),
    prefixed("sk-", ALNUM, 16),
    prefixed("sk-proj-", B64URL, 16),
    prefixed("sk_live_", ALNUM, 8),
    prefixed("ghp_", ALNUM, 20),
    prefixed("gho_", ALNUM, 20),
    prefixed("ghs_", ALNUM, 20),
    prefixed("github_pat_", ALNUM + "_", 20),
    prefixed("glpat-", B64URL, 16),
    prefixed("hf_", ALNUM, 16),
    prefixed("xoxb-", ALNUM + "-", 10),
    prefixed("xoxa-", ALNUM + "-", 10),
    prefixed("xoxp-", ALNUM + "-", 10),
    chars(UPPER_DIGITS, 16, 16).map(lambda b: ("AKIA" + b, ["AKIA" + b])),
    st.tuples(chars(B64URL, 4), chars(B64URL, 4), chars(B64URL, 8)).map(
        lambda p: (f"eyJ{p[0]}.eyJ{p[1]}.{p[2]}", [f"eyJ{p[0]}.eyJ{p[1]}.{p[2]}"])
    ),
)
"""(text as it appears, the parts that must not survive)"""

SECRET_VALUE = chars(ALNUM, 12)

CONTEXTUAL = st.one_of(
    st.tuples(chars(ALNUM, 1, 12), SECRET_VALUE)
    .filter(lambda p: p[1] not in p[0])
    .map(lambda p: (f"https://{p[0]}:{p[1]}@example.com/x", [p[1]])),
    st.tuples(st.sampled_from(["Basic", "Bearer"]), chars(ALNUM + "+/=", 16)).map(
        lambda p: (f"Authorization: {p[0]} {p[1]}", [p[1]])
    ),
    chars(ALNUM + "._-", 16).map(lambda v: (f"bearer {v}", [v])),
    st.tuples(
        st.sampled_from(["AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "OPENAI_API_KEY", "github_token", "Secret"]),
        st.sampled_from(["=", ": ", " = ", '="', '": "', "='"]),
        SECRET_VALUE,
    ).map(lambda p: (f"{p[0]}{p[1]}{p[2]}", [p[2]])),
    st.lists(chars(ALNUM + "+/", 16, 64), min_size=1, max_size=5).map(
        lambda body: (
            "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(body) + "\n-----END RSA PRIVATE KEY-----",
            body,
        )
    ),
    st.lists(chars(ALNUM + "+/", 16, 64), min_size=1, max_size=3).map(
        lambda body: ("-----BEGIN OPENSSH PRIVATE KEY-----\n" + "\n".join(body), body)  # cut off
    ),
)

FILLER = st.text(alphabet=ALNUM + " .,:;()\n\t-", max_size=60)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(FILLER, st.one_of(TOKENS, CONTEXTUAL)), min_size=1, max_size=5), FILLER)
def test_no_secret_survives_redaction(pieces: list[tuple[str, tuple[str, list[str]]]], end: str) -> None:
    fillers = " ".join([*(filler for filler, _ in pieces), end])
    assume(not any(part in fillers for _, (_, parts) in pieces for part in parts))
    text = "".join(f"{filler} {secret} " for filler, (secret, _parts) in pieces) + end
    out = redact(text)
    for _filler, (_secret, parts) in pieces:
        for part in parts:
            assert part not in out, (part, out)
    assert redact(out) == out  # idempotent: redacting twice changes nothing


def test_ordinary_output_is_left_alone() -> None:
    text = (
        '{"type": "result", "usage": {"input_tokens": 123, "output_tokens": 45}}\n'
        "basic functionality works; max_tokens=4096; 12 passed in 0.5s\n"
        "see https://github.com/org/repo and git@github.com:org/repo.git"
    )
    assert redact(text) == text


def test_the_journal_redacts_every_string_it_is_given(ws: Workspace) -> None:
    Journal(ws.journal).append(
        "agent-failed",
        1,
        {
            "reason": "OPENAI_API_KEY=sk-abcdefghijklmnopqrstuv",
            "nested": [{"auth": "Bearer abcdefghijklmnopqrstuv"}],
        },
    )
    raw = ws.journal.read_text()
    assert "abcdefghijklmnopqrstuv" not in raw and raw.count("[REDACTED]") == 2
    assert json.loads(raw)["data"]["nested"][0]["auth"] == "Bearer [REDACTED]"


def test_the_iteration_log_is_redacted(ws: Workspace) -> None:
    code = (
        "import sys; w = sys.stdout.write; "
        "w('token ghp_'); sys.stdout.flush(); "  # a secret split across two writes
        "w('abcdefghijklmnopqrstuvwxyz0123\\n'); w('DB_PASSWORD=hunter2hunter2\\ndone\\n')"
    )
    log = ws.private_dir / "iterations" / "0001.log"
    run = agent.run(
        f"{sys.executable} -c {json.dumps(code)}", "p", ws.root, log, timeout=60, interrupt=lambda: None
    )
    assert run.exit_code == 0, run
    text = log.read_text()
    assert "abcdefghijklmnopqrstuvwxyz0123" not in text and "hunter2" not in text
    assert text.endswith("done\n") and text.count("[REDACTED]") == 2


def test_the_archived_summary_and_state_are_redacted(ws: Workspace) -> None:
    state = LoopState.new("Deploy with AWS_SECRET_ACCESS_KEY=abcdefghijklmnop1234 set")
    folder = archive.archive(
        ws, state, "failed", {"agent_failures": ["curl https://bob:hunter2hunter2@example.com failed"]}
    )
    summary = (folder / "summary.json").read_text()
    assert "abcdefghijklmnop1234" not in summary and "hunter2" not in summary
    assert json.loads(summary)["agent_failures"] == ["curl https://bob:[REDACTED]@example.com failed"]
    assert "abcdefghijklmnop1234" not in (folder / "state.md").read_text()


def test_verify_keeps_its_redact_name() -> None:
    from loop import verify

    assert verify.redact("sk-ant-abcd") == "[REDACTED]"


def test_redact_module_imports_nothing_heavy(tmp_path: Path) -> None:
    import subprocess

    code = "import sys, loop.redact; print(' '.join(sorted(m for m in sys.modules if m.startswith('loop'))))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["loop", "loop.redact"]


@pytest.mark.parametrize(
    "unit", ["a_", "x.", "key", "KEY_", "sk-", "eyJa.", "https://a", "bearer ", "ghp_", "a:b@"]
)
def test_redaction_stays_linear_on_hostile_output(unit: str) -> None:
    text = unit * (300_000 // len(unit))
    start = time.monotonic()
    redact(text)
    assert time.monotonic() - start < 10  # quadratic backtracking took minutes here
