"""The agent adapters read each CLI's real output (tests/fixtures/agents) into the same facts,
and `judge` makes of them the engine's Turn: text, tokens and cost, usage limits and their
resets, refused tools and how to allow them, and the live lines of the monitor."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loop import agents
from loop.agents import prices
from loop.agents.turn import judge
from tests.conftest import FIXTURES

AGENT_FIXTURES = FIXTURES / "agents"
NOW = datetime(2026, 11, 26, 14, 13, 30, tzinfo=UTC)


def output(name: str) -> tuple[str, int]:
    """A captured output and its exit status (in the file's name)."""
    (path,) = AGENT_FIXTURES.glob(f"{name}.exit*.log")
    return path.read_text(encoding="utf-8"), int(path.name.rsplit(".exit", 1)[1].split(".")[0])


def codex_home(tmp_path: Path, name: str) -> dict[str, str]:
    """A CODEX_HOME holding the run's session file where Codex keeps it."""
    text, _code = output(name)
    thread = next(json.loads(line)["thread_id"] for line in text.splitlines() if "thread.started" in line)
    folder = tmp_path / "codex" / "sessions" / "2026" / "11" / "26"
    folder.mkdir(parents=True)
    source = AGENT_FIXTURES / f"{name}.session.jsonl"
    (folder / f"rollout-2026-11-26T14-13-15-{thread}.jsonl").write_text(source.read_text())
    return {"CODEX_HOME": str(tmp_path / "codex"), "HOME": str(tmp_path)}


def read(adapter: str, name: str, env: dict[str, str] | None = None) -> agents.Facts:
    text, code = output(name)
    return agents.get(adapter).read(text, code, NOW, env)


# --- Codex CLI --------------------------------------------------------------------------------


def test_codex_turn_with_the_session_files_model_and_an_estimated_cost(tmp_path: Path) -> None:
    facts = read("codex", "codex-success", codex_home(tmp_path, "codex-success"))
    assert facts.text == "Ticked one task." and not facts.failed
    # 2 requests of 1000 input (200 cached) and 50 output: input excludes what the cache served
    assert facts.tokens == {"input_tokens": 1600, "cache_read_input_tokens": 400, "output_tokens": 100}
    assert facts.model == "gpt-5" and facts.estimated
    assert facts.cost_usd == pytest.approx((1600 * 1.25 + 400 * 0.125 + 100 * 10.0) / 1e6)


def test_codex_without_its_session_file_reports_tokens_but_no_made_up_cost() -> None:
    facts = read("codex", "codex-success", {"HOME": "/nonexistent"})
    assert facts.total_tokens == 2100 and facts.model is None
    assert facts.cost_usd is None and not facts.estimated


def test_codex_read_only_sandbox_is_a_refusal_found_in_the_session_file(tmp_path: Path) -> None:
    facts = read("codex", "codex-readonly", codex_home(tmp_path, "codex-readonly"))
    assert not facts.failed and facts.denied == ("exec_command",)
    assert facts.denied_hint is not None and "--sandbox workspace-write" in facts.denied_hint
    assert "sed -i" in facts.denied_hint
    # the stream alone does not say (the CLI prints nothing about it)
    assert read("codex", "codex-readonly", {"HOME": "/nonexistent"}).denied == ()


def test_codex_usage_limit_resets_at_the_epoch_in_the_session_file(tmp_path: Path) -> None:
    facts = read("codex", "codex-usage-limit", codex_home(tmp_path, "codex-usage-limit"))
    assert facts.failed and facts.limited is not None and "usage limit" in facts.limited
    assert facts.resets_at == datetime.fromtimestamp(1795702486, UTC).isoformat()


def test_codex_quota_is_a_limit_without_a_reset() -> None:
    facts = read("codex", "codex-quota", {"HOME": "/nonexistent"})
    assert facts.failed and facts.limited == "Quota exceeded. Check your plan and billing details."
    assert facts.resets_at is None


def test_codex_session_lookup_refuses_a_thread_id_that_is_a_path(tmp_path: Path) -> None:
    from loop.agents.codex import session_file

    env = codex_home(tmp_path, "codex-success")
    assert session_file("../../etc/passwd", env, NOW) is None
    assert session_file("", env, NOW) is None


# --- Gemini CLI -------------------------------------------------------------------------------

GEMINI_COST = (1600 * 1.25 + 400 * 0.125 + 100 * 10.0) / 1e6  # genai-prices' gemini-2.5-pro base rates


@pytest.mark.parametrize("name", ["gemini-stream", "gemini-json"])
def test_gemini_turn_in_both_output_formats(name: str) -> None:
    facts = read("gemini", name)
    assert facts.text == "Ticked one task." and not facts.failed
    assert facts.tokens == {"input_tokens": 1600, "cache_read_input_tokens": 400, "output_tokens": 100}
    assert facts.model == "gemini-2.5-pro" and facts.estimated
    assert facts.cost_usd == pytest.approx(GEMINI_COST)


@pytest.mark.parametrize("name", ["gemini-denied", "gemini-denied-json"])
def test_gemini_tool_not_offered_is_a_refusal(name: str) -> None:
    facts = read("gemini", name)
    assert not facts.failed and facts.denied == ("run_shell_command",)
    assert facts.denied_hint is not None and "--approval-mode yolo" in facts.denied_hint


@pytest.mark.parametrize("name", ["gemini-quota", "gemini-quota-json"])
def test_gemini_quota_exit_173_waits_for_the_servers_retry_hint(name: str) -> None:
    facts = read("gemini", name)
    assert facts.failed and facts.api_status == 429
    assert facts.limited is not None and "exhausted your daily quota" in facts.limited
    assert facts.resets_at == (NOW + timedelta(seconds=3)).isoformat()


def test_gemini_exit_173_without_words_is_still_a_limit() -> None:
    facts = agents.get("gemini").read("boom\n", 173, NOW)
    assert facts.limited is not None and facts.resets_at is None


def test_a_model_gemini_routes_to_without_a_price_gives_tokens_only() -> None:
    line = {
        "type": "result",
        "status": "success",
        "stats": {
            "models": {
                "gemini-2.5-pro": {"input_tokens": 100, "output_tokens": 10, "cached": 0, "input": 100},
                "gemini-9-unpriced": {"input_tokens": 100, "output_tokens": 10, "cached": 0, "input": 100},
            }
        },
    }
    facts = agents.get("gemini").read(json.dumps(line), 0, NOW)
    assert facts.total_tokens == 220 and facts.cost_usd is None and not facts.estimated


# --- OpenCode ---------------------------------------------------------------------------------


def test_opencode_reports_its_own_cost() -> None:
    facts = read("opencode", "opencode-success")
    assert facts.text == "Ticked one task." and not facts.failed
    assert facts.tokens == {"input_tokens": 1600, "cache_read_input_tokens": 400, "output_tokens": 100}
    assert facts.cost_usd == pytest.approx(0.0063) and not facts.estimated


def test_opencode_rate_limit_resets_after_the_longest_header() -> None:
    facts = read("opencode", "opencode-rate-limit")
    assert facts.failed and facts.api_status == 429 and facts.limited is not None
    assert facts.resets_at == (NOW + timedelta(seconds=3)).isoformat()


def test_opencode_rejected_permission_is_a_refusal() -> None:
    facts = read("opencode", "opencode-rejected")
    assert not facts.failed and facts.denied == ("bash",)
    assert facts.denied_hint is not None and "--auto" in facts.denied_hint


def test_opencode_denied_tool_called_anyway_is_a_refusal() -> None:
    line = {
        "type": "tool_use",
        "sessionID": "ses_1",
        "part": {
            "tool": "invalid",
            "state": {
                "status": "completed",
                "output": "Model tried to call unavailable tool 'bash'. Available tools: read",
            },
        },
    }
    assert agents.get("opencode").read(json.dumps(line), 0, NOW).denied == ("bash",)


def test_opencode_reset_headers_take_every_form() -> None:
    from loop.agents.opencode import _reset

    assert _reset({"Retry-After": "20"}, NOW) == (NOW + timedelta(seconds=20)).isoformat()
    assert _reset({"retry-after-ms": "1500"}, NOW) == (NOW + timedelta(seconds=1.5)).isoformat()
    assert (
        _reset({"x-ratelimit-reset-tokens": "1m30s", "retry-after": "2"}, NOW)
        == (NOW + timedelta(seconds=90)).isoformat()
    )
    assert _reset({"retry-after": "Thu, 26 Nov 2026 15:00:00 GMT"}, NOW) == "2026-11-26T15:00:00+00:00"
    assert _reset({"retry-after": "soon"}, NOW) is None and _reset("nope", NOW) is None


# --- any other command -------------------------------------------------------------------------


def test_text_commands_keep_todays_reading() -> None:
    text = agents.get("text")
    facts = text.read("did things\nALL_TASKS_COMPLETE\n", 0, NOW)
    assert facts.text is not None and facts.text.endswith("ALL_TASKS_COMPLETE\n")
    limited = text.read("Error: rate limit exceeded, retry in 40s\n", 1, NOW)
    assert limited.limited is not None and limited.resets_at == (NOW + timedelta(seconds=40)).isoformat()
    assert text.read("rate limit mentioned in passing\n", 0, NOW).limited is None  # exit 0: no limit
    claude_like = json.dumps({"type": "result", "subtype": "success", "result": "hi", "total_cost_usd": 0.4})
    facts = text.read(claude_like, 0, NOW)
    assert facts.agent == "text" and facts.text == "hi" and facts.cost_usd == 0.4


# --- choosing an adapter ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "name"),
    [
        ("claude -p --output-format json", "claude"),
        ("codex exec --json {prompt}", "codex"),
        ("/usr/local/bin/codex exec --json", "codex"),
        ("env OPENAI_API_KEY=x codex exec --json", "codex"),
        ("npx @openai/codex@0.171.0 exec --json", "codex"),
        ("npx @google/gemini-cli -p {prompt}", "gemini"),
        ("timeout 30s gemini --output-format json", "gemini"),
        ("opencode run --format json {prompt}", "opencode"),
        ("python -m loop.demo.agent", "text"),
        ("./my-agent.sh {prompt}", "text"),
        ("'unclosed", "text"),
    ],
)
def test_a_full_command_is_matched_by_its_program(command: str, name: str) -> None:
    assert agents.adapter_for(command).name == name


def test_names_mean_default_commands_and_the_format_can_be_forced() -> None:
    for name in agents.NAMES:
        choice = agents.resolve(name)
        assert choice.adapter.name == name and choice.command == agents.get(name).default_command
    assert "--sandbox workspace-write" in agents.resolve("codex").command
    assert "{prompt}" in agents.resolve("gemini").command and "yolo" in agents.resolve("gemini").command
    assert agents.resolve("my-wrapper --json", "codex").adapter.name == "codex"
    assert agents.resolve("codex exec", "nonsense").adapter.name == "codex"  # a bad format: by program


def test_install_hints_name_each_clis_package() -> None:
    assert agents.install_hint("codex") == "install Codex CLI (npm install -g @openai/codex)"
    assert "@google/gemini-cli" in str(agents.install_hint("gemini"))
    assert "opencode-ai" in str(agents.install_hint("opencode"))
    assert "@anthropic-ai/claude-code" in str(agents.install_hint("claude"))
    assert agents.install_hint("my-agent") is None


# --- prices -------------------------------------------------------------------------------------


def test_prices_by_exact_name_only(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    tokens = {"input_tokens": 1_000_000, "output_tokens": 1_000_000}
    assert prices.estimate("gpt-5", tokens) == pytest.approx(11.25)
    assert prices.estimate("openai/GPT-5-2025-08-07", tokens) == pytest.approx(11.25)
    assert prices.estimate("gpt-5.9", tokens) is None  # not gpt-5's price by prefix
    assert prices.estimate(None, tokens) is None


def test_a_persons_prices_file_adds_and_corrects(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    (tmp_path / "loopdeck").mkdir()
    (tmp_path / "loopdeck" / "prices.json").write_text(
        json.dumps(
            {
                "my-model": {"input": 2, "output": 4},
                "gpt-5": {"input": 1, "output": 1},
                "bad": {"input": "x"},
                "worse": 3,
            }
        )
    )
    tokens = {"input_tokens": 1_000_000, "output_tokens": 1_000_000}
    assert prices.estimate("my-model", tokens) == pytest.approx(6.0)
    assert prices.estimate("gpt-5", tokens) == pytest.approx(2.0)
    assert prices.estimate("bad", tokens) is None
    (tmp_path / "loopdeck" / "prices.json").write_text("{not json")
    assert prices.estimate("gpt-5", tokens) == pytest.approx(11.25)


# --- the judgement ------------------------------------------------------------------------------


def test_judge_a_worked_turn_with_an_estimated_cost(tmp_path: Path) -> None:
    text, code = output("codex-success")
    judged = judge(
        agents.get("codex"), text.encode(), code, now=NOW, env=codex_home(tmp_path, "codex-success")
    )
    assert judged.ok and judged.failure is None and judged.text == "Ticked one task."
    assert judged.usage == {
        "input_tokens": 1600,
        "cache_read_input_tokens": 400,
        "output_tokens": 100,
        "cost_micro_usd": 3050,
        "estimated_cost_micro_usd": 3050,
    }
    turn = judged.turn()
    assert turn.failure is None and turn.limited is None and turn.usage == judged.usage


def test_judge_tokens_without_a_price_count_an_unpriced_turn() -> None:
    text, code = output("codex-success")
    judged = judge(agents.get("codex"), text, code, now=NOW, env={"HOME": "/nonexistent"})
    assert (
        judged.usage is not None
        and judged.usage["unpriced_turns"] == 1
        and "cost_micro_usd" not in judged.usage
    )


def test_judge_a_limit_is_no_failure(tmp_path: Path) -> None:
    text, code = output("codex-usage-limit")
    judged = judge(agents.get("codex"), text, code, now=NOW, env=codex_home(tmp_path, "codex-usage-limit"))
    assert not judged.ok and judged.failure is None and judged.limited is not None
    turn = judged.turn()
    assert turn.limited == judged.limited and turn.resets_at == judged.resets_at and turn.failure is None


def test_judge_failures_timeouts_and_starts() -> None:
    gemini = agents.get("gemini")
    failed = judge(gemini, '{"type":"result","status":"error","error":{"message":"boom"}}', 1, now=NOW)
    assert not failed.ok and failed.failure == "exit 1: boom"
    turn = failed.turn()
    assert turn.failure == failed.failure and turn.error == failed.failure
    timed = judge(gemini, "", None, now=NOW, timed_out=True, timeout_s=30)
    assert timed.failure == "timed out after 30 s"
    start = judge(gemini, "", None, now=NOW, start_error="cannot start the agent 'gemini': not found")
    assert start.failure is not None and start.failure.startswith("cannot start")
    opencode = judge(agents.get("opencode"), output("opencode-rate-limit")[0], 0, now=NOW)
    assert opencode.limited is not None  # the error line decides, whatever the exit status


def test_judge_reads_the_signal_and_the_question() -> None:
    def said(text: str) -> str:
        return json.dumps({"type": "item.completed", "item": {"type": "agent_message", "text": text}})

    judged = judge(agents.get("codex"), said("All done.\nALL_TASKS_COMPLETE"), 0, now=NOW)
    assert judged.signal == "ALL_TASKS_COMPLETE" and judged.question is None
    judged = judge(agents.get("codex"), said("Which one? <question>SQLite or files?</question>"), 0, now=NOW)
    assert judged.question == "SQLite or files?" and judged.signal is None


def test_a_refused_turn_is_never_progress() -> None:
    judged = judge(agents.get("opencode"), output("opencode-rejected")[0], 0, now=NOW)
    turn = judged.turn()
    assert turn.denied == ("bash",) and turn.denied_hint is not None and "--auto" in turn.denied_hint


@pytest.mark.parametrize(
    "name",
    ["codex-success", "gemini-stream", "gemini-json", "opencode-success"],
)
def test_a_workers_last_words_whichever_cli_printed_them(name: str) -> None:
    """The parallel driver reads a worker's log without knowing its CLI (`agent.final_text`):
    the adapter that recognises the output gives the final message, never the echoed prompt."""
    from loop.processes.agent import final_text

    text, _code = output(name)
    assert final_text(text.encode()) == "Ticked one task."
    assert agents.detect(text).name == name.split("-")[0]
    assert agents.detect("just words\n").name == "text"


# --- what the monitor shows ---------------------------------------------------------------------


def live(name: str, hint: str | None) -> list[str]:
    text, _code = output(name)
    shown = [agents.live_line(line, hint) for line in text.splitlines()]
    return [line for item in shown if item for line in item.splitlines()]


@pytest.mark.parametrize("hint", [None, "codex", "gemini", "opencode", "claude", "text"])
def test_live_lines_of_every_cli_whatever_the_hint(hint: str | None) -> None:
    codex = live("codex-success", hint)
    assert "● session started" in codex and "Ticked one task." in codex
    assert any(line.startswith("▸ shell") and "sed -i" in line for line in codex)
    assert any(line.startswith("■ done") for line in codex)
    gemini = live("gemini-stream", hint)
    assert (
        any(line.startswith("▸ run_shell_command sed -i") for line in gemini) and "Ticked one task." in gemini
    )
    assert "Work through TODO.md" not in gemini  # the echoed prompt is not the agent's words
    opencode = live("opencode-success", hint)
    assert any(line.startswith("▸ bash sed -i") for line in opencode) and "Ticked one task." in opencode
    assert any(line.startswith("■ done") and "$0.003" in line for line in opencode)
    refused = live("opencode-rejected", hint)
    assert any("✗" in line and "rejected permission" in line for line in refused)
    denied = live("gemini-denied", hint)
    assert any("tool_not_registered" in line for line in denied)
    assert "Ripgrep is not available. Falling back to GrepTool." in gemini  # stderr text as it is


def test_live_lines_of_claude_code() -> None:
    stream = (FIXTURES / "claude-result" / "stream.jsonl").read_text()
    shown = [agents.live_line(line, "claude") for line in stream.splitlines()]
    assert any(s and s.startswith("■ success") for s in shown)
    assert agents.live_line('{"type":"system","subtype":"init","model":"m"}') == "● session started (m)"
    tool = {
        "type": "assistant",
        "message": {"content": [{"type": "tool_use", "name": "Bash", "input": {"command": "ls"}}]},
    }
    assert agents.live_line(json.dumps(tool)) == "▸ Bash ls"


def test_live_lines_hide_bookkeeping_and_unknown_json() -> None:
    assert agents.live_line('{"type":"turn.started"}', "codex") == ""
    assert agents.live_line('{"type":"something-else","x":1}') is None
    assert agents.live_line("[1, 2]") == "[1, 2]"
    assert agents.live_line("plain words") == "plain words"


# --- hostile output -----------------------------------------------------------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=5)
    ),
    max_leaves=20,
)
KEYS = st.sampled_from(
    ["type", "item", "part", "state", "error", "usage", "stats", "tokens", "models", "message"]
)
EVENTS = st.dictionaries(KEYS, JSON_VALUES, max_size=6).map(
    lambda d: {
        **d,
        "type": d.get("type") if isinstance(d.get("type"), str) else "item.completed",
        "sessionID": "s",
    }
)


@settings(max_examples=150, deadline=None)
@given(
    lines=st.lists(EVENTS.map(json.dumps) | st.text(max_size=40), max_size=8),
    code=st.none() | st.integers(min_value=-255, max_value=255),
)
def test_no_output_breaks_an_adapter(lines: list[str], code: int | None) -> None:
    text = "\n".join(lines)
    for adapter in agents.ADAPTERS.values():
        facts = adapter.read(text, code, NOW, {"HOME": "/nonexistent"})
        assert all(isinstance(v, int) and v >= 0 for v in facts.tokens.values())
        judge(adapter, text.encode("utf-8", "surrogatepass"), code, now=NOW)
        for line in lines:
            adapter.live_line(line)
        agents.live_line(text, adapter.name)


def test_negative_and_absurd_numbers_are_ignored() -> None:
    line = {
        "type": "turn.completed",
        "usage": {"input_tokens": -5, "output_tokens": True, "cached_input_tokens": "9"},
    }
    facts = agents.get("codex").read(json.dumps(line), 0, NOW)
    assert facts.tokens == {}
    step = {"type": "step_finish", "sessionID": "s", "part": {"tokens": {"input": 2**70}, "cost": -1}}
    facts = agents.get("opencode").read(json.dumps(step), 0, NOW)
    assert facts.cost_usd is None and facts.tokens == {"input_tokens": 2**70}


def test_binary_garbage() -> None:
    for adapter in agents.ADAPTERS.values():
        judged = judge(adapter, b"\xff\xfe\x00garbage {not json\n", 0, now=NOW)
        assert judged.ok or judged.failure


def test_fixture_paths_are_placeholders() -> None:
    for path in AGENT_FIXTURES.iterdir():
        assert not re.search(r"/tmp/exp|/root/", path.read_text()), path
