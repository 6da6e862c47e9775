"""What a person reads when a loop ends and as it goes (the progress line): how it ended,
what was done, what failed, what is left, how long, what to do next."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from loop.model import Aggregate, LoopState
from loop.redact import redact


@dataclass
class Tally:
    """What the summary reports, gathered as the run goes."""

    started: float = field(default_factory=time.monotonic)
    iterations: int = 0
    agent_failures: list[str] = field(default_factory=list)
    verify_failures: int = 0
    commits: list[str] = field(default_factory=list)


def cost_line(usage: dict[str, int] | None, limits: dict[str, int] | None = None) -> str:
    """`$1.23 (45,678 tokens) of a $5.00 budget`, from what the agent reported."""
    usage = usage or {}
    cost = usage.get("cost_micro_usd")
    tokens = sum(v for k, v in usage.items() if k.endswith("_tokens"))
    text = f"${cost / 1e6:.2f}" if cost is not None else "cost not reported"
    if tokens:
        text += f" ({tokens:,} tokens)"
    budget = (limits or {}).get("max_cost_micro_usd")
    if budget:
        text += f" of a ${budget / 1e6:.2f} budget"
    return text


def progress_line(done: int, total: int, width: int = 10) -> str:
    """`Progress: [3 of 8] ▰▰▰▱▱▱▱▱▱▱ 37%`."""
    ratio = done / total if total else 1.0
    filled = int(ratio * width)
    return f"Progress: [{done} of {total}] {'▰' * filled}{'▱' * (width - filled)} {int(ratio * 100)}%"


def summary_lines(
    how: str,
    reason: str,
    tally: Tally,
    counts: Aggregate | None,
    folder: Path | None,
    state: LoopState | None,
) -> list[str]:
    seconds = time.monotonic() - tally.started
    minutes, secs = divmod(int(seconds), 60)
    remaining = counts.pending_total if counts else 0
    done = sum(r.done for r in counts.sources if r.available) if counts else None
    next_step = {
        "completed": "review the work and the commits; nothing is left in the task sources",
        "stopped": "`loopdeck run` continues the loop; `loopdeck start --force` starts anew",
        "interrupted": "`loopdeck run` resumes where it paused",
        "limit": "raise the limit (`loopdeck set-max-iterations N`) and `loopdeck run`, or finish by hand",
        "escalated": "read the journal (`loopdeck log`), fix what blocks the agent, then `loopdeck run`",
        "failed": "read the journal (`loopdeck log`) and the iteration logs",
        "question": "answer it in the monitor (`loopdeck`), then the loop resumes",
    }.get(how, "read the journal (`loopdeck log`)")
    lines = [
        "",
        "== loopdeck summary ==",
        f"Ended:       {how} ({reason})",
        f"Iterations:  {tally.iterations} this run" + (f", {state.iteration} in all" if state else ""),
        f"Duration:    {minutes}m {secs}s",
    ]
    if done is not None:
        lines.append(f"Done:        {done} task(s)")
    lines.append(f"Remaining:   {remaining} task(s)" if counts else "Remaining:   0 task(s)")
    if tally.agent_failures:
        lines.append(f"Failed:      {len(tally.agent_failures)} agent run(s): {tally.agent_failures[-1]}")
    if tally.verify_failures:
        lines.append(f"Verification failed {tally.verify_failures} time(s) along the way")
    if tally.commits:
        lines.append(f"Commits:     {len(tally.commits)} ({tally.commits[-1][:8]} last)")
    if state is not None and state.usage:
        lines.append(f"Cost:        {cost_line(state.usage, state.limits)}")
    if folder is not None:
        lines.append(f"Archive:     {folder}")
    lines.append(f"Next:        {next_step}")
    return [redact(line) for line in lines]  # printed, and copied into bug reports
