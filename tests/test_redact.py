"""Secrets never reach a file loopdeck writes: the forms, then each kind of file."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from loop.core.redact import redact
from loop.processes import agent
from loop.store import archive
from loop.store.journal import Journal
from loop.store.paths import Workspace
from loop.store.state import LoopState

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
    chars(ALNUM, 36, 36).map(lambda b: ("npm_" + b, ["npm_" + b])),
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

AT_PASSWORD = st.tuples(chars(ALNUM, 4, 12), chars(ALNUM, 8, 20)).map(lambda p: f"{p[0]}@{p[1]}")
"""A password holding `@`: everything up to the last `@` before the host is the password."""

CONTEXTUAL_NEW = st.one_of(
    SECRET_VALUE.map(lambda v: (f"redis://:{v}@cache.internal:6379/0", [v])),
    st.tuples(chars(ALNUM, 1, 12), AT_PASSWORD)
    .map(lambda p: (f"postgres://{p[0]}:{p[1]}@db.internal/app", [p[1], p[1].split("@", 1)[1]]))
    .filter(lambda s: all(part not in s[0].replace(part, "", 1) for part in s[1])),
    st.tuples(
        st.sampled_from(
            [
                "--password",
                "--passwd",
                "--token",
                "--api-key",
                "--secret",
                "--access-token",
                "--auth-token",
                "--db-password",
                "--github-token",
            ]
        ),
        st.sampled_from([" ", "=", "  "]),
        SECRET_VALUE,
    ).map(lambda p: (f"{p[0]}{p[1]}{p[2]}", [p[2]])),
    st.tuples(chars(UPPER_DIGITS, 8, 11), chars(UPPER_DIGITS, 8, 11), chars(ALNUM, 24, 24)).map(
        lambda p: (f"https://hooks.slack.com/services/T{p[0]}/B{p[1]}/{p[2]}", [p[2], f"T{p[0]}/B{p[1]}"])
    ),
    st.tuples(chars("0123456789", 17, 19), chars(B64URL, 60, 68)).map(
        lambda p: (f"https://discord.com/api/webhooks/{p[0]}/{p[1]}", [p[1]])
    ),
)
"""The forms added after a security review found them in webhook bodies, states and logs."""

FILLER = st.text(alphabet=ALNUM + " .,:;()\n\t-", max_size=60)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(FILLER, st.one_of(TOKENS, CONTEXTUAL, CONTEXTUAL_NEW)), min_size=1, max_size=5), FILLER
)
def test_no_secret_survives_redaction(pieces: list[tuple[str, tuple[str, list[str]]]], end: str) -> None:
    # What is not secret (fillers, user names, hosts) must not happen to spell a secret part:
    # a user name equal to another URL's password is not a leak.
    public = [*(filler for filler, _ in pieces), end]
    for _filler, (secret, parts) in pieces:
        for part in sorted(parts, key=len, reverse=True):
            secret = secret.replace(part, "\0")
        public.append(secret)
    assume(not any(part in "\0".join(public) for _, (_, parts) in pieces for part in parts))
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

    code = "import sys, loop.core.redact; print(' '.join(sorted(m for m in sys.modules if m.startswith('loop'))))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["loop", "loop.core", "loop.core.redact"]


@pytest.mark.parametrize(
    "unit",
    [
        "a_",
        "x.",
        "key",
        "KEY_",
        "sk-",
        "eyJa.",
        "https://a",
        "bearer ",
        "ghp_",
        "a:b@",
        "://:",
        "://a:b@",
        "://a:@",
        "--token ",
        "--a-b-c-d-e-",
        "--password=",
        "key=",
        "npm_a",
        "hooks.slack.com/services/",
        "discord.com/api/webhooks/1/",
        "apprise:a://",
        "--",
    ],
)
def test_redaction_stays_linear_on_hostile_output(unit: str) -> None:
    text = unit * (300_000 // len(unit))
    start = time.monotonic()
    redact(text)
    assert time.monotonic() - start < 10  # quadratic backtracking took minutes here


# --- the forms a security review found leaving unredacted ---------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("redis://:s3cretPass@cache:6379/0", "redis://:[REDACTED]@cache:6379/0"),
        ("amqp://bob:p@ss@w0rd@mq.internal/vhost", "amqp://bob:[REDACTED]@mq.internal/vhost"),
        ("mysql -h db --password hunter2hunter2 app", "mysql -h db --password [REDACTED] app"),
        ("--password=hunter2hunter2", "--password=[REDACTED]"),
        ("cli --db-password 'two words' --verbose", "cli --db-password [REDACTED] --verbose"),
        ('--api-key="sk_abc def"', "--api-key=[REDACTED]"),
        (
            "--passwd x1 --secret y2 --access-token z3 --auth_token w4",
            "--passwd [REDACTED] --secret [REDACTED] --access-token [REDACTED] --auth_token [REDACTED]",
        ),
        ("gh auth --GITHUB-TOKEN abc", "gh auth --GITHUB-TOKEN [REDACTED]"),
        ("//registry.npmjs.org/:_authToken=npm_" + "a1" * 18, "//registry.npmjs.org/:_authToken=[REDACTED]"),
        ("npm_" + "Ab3" * 12 + " ok", "[REDACTED] ok"),
        (
            "POST https://hooks.slack.com/services/T0ABCDEF1/B0ABCDEF2/abcdefABCDEF123456789012 failed",
            "POST https://hooks.slack.com/services/[REDACTED] failed",
        ),
        (
            "https://discord.com/api/webhooks/123456789012345678/AbC-dEf_123 (404)",
            "https://discord.com/api/webhooks/[REDACTED] (404)",
        ),
        ("apprise:tgram://123456:ABCdef/987 failed", "apprise:tgram://[REDACTED] failed"),
    ],
)
def test_the_forms_are_redacted(text: str, expected: str) -> None:
    assert redact(text) == expected
    assert redact(expected) == expected


@pytest.mark.parametrize(
    "text",
    [
        "--password-file /run/secrets/db",  # where a secret is, not the secret
        "--token-file ~/.config/tok --api-key-file k.txt",
        "mysql --password --host db",  # asks at the prompt; the next word is another option
        "pass the --token flag, or --secret and --password to it",  # prose about options
        "--token should be at least 8 characters; --password must be given",  # an error message
        "see --token.",
        "npm_" + "a" * 35,  # not npm's 36
        "xnpm_" + "a" * 36,
        "npm_" + "a" * 37,
        "https://hooks.slack.com/ and hooks.slack.com/services/",
        "https://discord.com/channels/123/456",
        "redis://cache:6379/0 and postgres://db/app and https://example.com:8443/x",
        "git@github.com:org/repo.git and ssh://git@github.com/org/repo",
        "the password and the token expired; passwords are hashed; tokenizer",
        "https://hooks.slack.com/\u2026 and apprise:tgram://\u2026",  # as a failure line shows them
    ],
)
def test_ordinary_words_and_near_misses_are_left_alone(text: str) -> None:
    assert redact(text) == text


def test_a_password_with_at_signs_leaks_nothing_after_the_first() -> None:
    out = redact("connecting to mongodb://admin:p@ss@w0rd!@mongo.internal:27017/db")
    assert out == "connecting to mongodb://admin:[REDACTED]@mongo.internal:27017/db"
    assert "ss" not in out.split("admin:")[1].split("@mongo")[0]


IDEMPOTENCE_SAMPLES = [
    "Authorization: Bearer abcdefghijklmnopqrstuv",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEabc\n",
    "https://u:p@ss@h/x?y=a@b",
    "--password [REDACTED] --token=[REDACTED]",
    "DB_PASSWORD=[REDACTED]",
    "apprise:tgram://[REDACTED]",
    "https://hooks.slack.com/services/[REDACTED]",
]


@pytest.mark.parametrize("text", IDEMPOTENCE_SAMPLES)
def test_redacting_twice_changes_nothing(text: str) -> None:
    once = redact(text)
    assert redact(once) == once


WORDS = st.lists(
    st.sampled_from(
        [
            "key",
            "KEY",
            "token",
            "Token",
            "secret",
            "passw",
            "password",
            "passphrase",
            "credential",
            "api",
            "db",
            "--",
            "-",
            "_",
            ".",
            "=",
            ":",
            " ",
            "\t",
            "\\",
            '"',
            "'",
            "x",
            "7",
            "ab",
            "\n",
            "[REDACTED]",
            "file",
        ]
    ),
    max_size=30,
).map("".join)


@settings(max_examples=400, deadline=None, derandomize=True)
@given(WORDS)
def test_a_gate_never_skips_a_text_its_pattern_would_change(text: str) -> None:
    """The two patterns prose triggers most (`NAME=value`, `--token X`) are compiled only when
    a cheap scan finds a name followed by a separator; that scan must never say no where the
    pattern would have found something."""
    from loop.core.redact import _SOURCES, _pattern

    gated = [(gate, source, repl) for gate, source, repl in _SOURCES if callable(gate)]
    assert len(gated) == 2
    for gate, source, repl in gated:
        if not gate(text.lower()):
            assert _pattern(source).sub(repl, text) == text, (source, text)


def test_prose_about_keys_and_tokens_compiles_no_pattern(tmp_path: Path) -> None:
    """The Stop hook redacts the loop's prompt on every write: prose that names API keys and
    tokens without giving one must not cost it the two largest patterns' compilation."""
    import subprocess

    code = (
        "import loop.core.redact as r\n"
        "text = 'Use the API key from the environment; tokens live in the vault. Each task: '\n"
        "text += 'write tests first -- then code. The password policy is strict.\\n' * 40\n"
        "assert r.redact(text) == text\n"
        "print(len(r._COMPILED))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "0"


def test_output_in_pieces_drops_a_private_key_that_spans_them() -> None:
    from loop.core.redact import LineRedactor

    lines = LineRedactor()
    pieces = [
        b"before\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n",
        b"QyNTUxOQAAACBzZWNyZXRrZXlib2R5\nProc-Type: 4,ENCRYPTED\n\n",
        b"c2Vjb25kbGluZW9mdGhla2V5\n-----END OPENSSH PRIVATE KEY-----\nafter\n",
        b"tail without newline token=abcdef123",
    ]
    out = b"".join(lines.feed(piece) for piece in pieces) + lines.close()
    assert b"QyNTUxOQ" not in out and b"c2Vjb25k" not in out and b"b3BlbnNz" not in out
    assert out.startswith(b"before\n-----BEGIN OPENSSH PRIVATE KEY-----[REDACTED]")
    assert out.endswith(b"\nafter\ntail without newline token=[REDACTED]")


def test_an_unfinished_key_stops_at_the_first_line_no_key_holds() -> None:
    from loop.core.redact import LineRedactor

    lines = LineRedactor()
    out = lines.feed(b"-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n")
    out += lines.feed(b"TUlJRWJhc2U2NA==\nerror: the key was cut short, carrying on\nnext\n")
    assert b"TUlJRWJh" not in out
    assert out.endswith(b"error: the key was cut short, carrying on\nnext\n")


def test_a_split_token_is_whole_when_redacted() -> None:
    from loop.core.redact import LineRedactor

    lines = LineRedactor(max_line=64)
    out = lines.feed(b"export GH=ghp_abcdefghij") + lines.feed(b"klmnopqrstuvwxyz\n")
    assert out == b"export GH=[REDACTED]\n"
    long = lines.feed(b"x" * 100)  # a line past max_line is written without waiting for its end
    assert long == b"x" * 100


@pytest.mark.parametrize(
    ("target", "shown"),
    [
        ("https://hooks.slack.com/services/T0/B0/secretpath", "https://hooks.slack.com/\u2026"),
        ("https://user:pw@ntfy.example:8443/topic?auth=x", "https://ntfy.example:8443/\u2026"),
        ("http://127.0.0.1:9/nobody-listens", "http://127.0.0.1:9/\u2026"),
        ("apprise:discord://1234/tokentoken", "apprise:discord://\u2026"),
        ("apprise:not a url", "apprise:\u2026"),
        ("cmd:notify-me --token abcdef", "cmd:notify-me --token [REDACTED]"),
        ("desktop", "desktop"),
    ],
)
def test_a_target_is_shown_by_its_scheme_and_host(target: str, shown: str) -> None:
    from loop.core.redact import target_shown

    assert target_shown(target) == shown


def test_output_that_is_not_utf8_passes_through_where_it_holds_no_secret() -> None:
    from loop.core.redact import LineRedactor

    lines = LineRedactor()
    assert lines.feed(b"\xff\xfe binary token=abcdef123\n") == b"\xff\xfe binary token=[REDACTED]\n"


# --- more forms: curl's and MySQL's passwords, SendGrid and npm tokens ----------------------------

SENDGRID = "SG." + "k" * 22 + "." + "Q" * 43
NPM = "npm_" + "Z9" * 18
MORE_FORMS = [
    ("curl -u alice:Wh1teRabbitPw https://api.example.com", "Wh1teRabbitPw"),
    ("curl --user alice:Wh1teRabbitPw https://api.example.com", "Wh1teRabbitPw"),
    ("mysql -h db -u root -pS3cr3tMysqlPw app", "S3cr3tMysqlPw"),
    ("mysql --password=S3cr3tMysqlPw app", "S3cr3tMysqlPw"),
    (f"SENDGRID={SENDGRID}", SENDGRID[3:]),
    (f"the mail key is {SENDGRID} ok", SENDGRID[3:]),
    (f"registry token {NPM} here", NPM[4:]),
]


@pytest.mark.parametrize(("text", "secret"), MORE_FORMS)
def test_more_forms_reach_no_journal_queue_or_notification(text: str, secret: str, tmp_path: Path) -> None:
    from loop.drivers import notify
    from loop.store import control
    from loop.store.journal import Journal
    from loop.store.paths import Workspace

    assert secret not in redact(text) and redact(redact(text)) == redact(text)
    ws = Workspace(tmp_path)
    (tmp_path / ".claude").mkdir()
    control.queue(ws, "say", reason=text)
    Journal(ws.journal).append("escalation", 1, {"reason": text})
    for path in (ws.control, ws.journal):
        assert secret not in path.read_text()
    bodies = notify.messages([("escalation", {"reason": text}), ("question", {"question": text})], "ws", 1)
    assert bodies and all(secret not in json.dumps(body) for body in bodies)


@pytest.mark.parametrize(
    "text",
    ["git push -u origin main", "curl --user-agent a:b x", "mkdir -pv a/b", "mysql -p db", "ssh -p 22 h"],
)
def test_look_alikes_are_left_alone(text: str) -> None:
    assert redact(text) == text
