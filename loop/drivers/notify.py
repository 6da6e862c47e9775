"""Telling a person when they are needed or the loop ends: escalations, questions, usage-limit
waits, completion, failure.

The targets are the person's (`--notify`, kept in the state): `desktop` (notify-send where it
exists), an `http(s)://` webhook (a JSON POST whose `text` field Slack-compatible services
show), `cmd:PROGRAM ARGS…` (run with the message as its last argument: argv, never a shell),
and `apprise:URL` for the services Apprise speaks (Discord, Telegram, ntfy, e-mail…) when it is
installed. `bell` is the monitor's own bell and needs nothing sent.

Sending is never on the loop's path: the writer hands the messages to a detached process
(`python -m loop.drivers.notify`), so the Stop hook pays a fork at most, and a slow or failing target
is journaled as a warning and never stops or delays the loop.

What is sent is redacted (an agent's question can quote a token), and a failing target is
journaled by its scheme and host only: a Slack or Discord webhook's path is its secret.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from loop.core.redact import redact, redact_obj, target_shown
from loop.store.journal import Journal
from loop.store.paths import Workspace

if TYPE_CHECKING:  # annotations only: the Stop hook does not pay for typing
    from typing import Any


NOTIFY_KINDS = ("escalation", "question", "usage-limit", "completed", "failed")
"""The events a person is told about."""
REPORTED_KINDS = ("escalation", "completed", "failed")
"""The endings whose notification links the loop's report (`loopdeck report`)."""

TIMEOUT_S = 10.0
TARGETS = "use desktop, bell, an http(s) URL, cmd:PROGRAM or apprise:URL"


def messages(events: list[tuple[str, dict[str, Any]]], where: str, iteration: int) -> list[dict[str, Any]]:
    """The notifications due for these journaled events (pure: what to say, not how). An ending
    whose events name the loop's archive folder links the report kept there (`report.html`)."""
    out = []
    folder = next(
        (str(d["folder"]) for k, d in events if k in ("archived", "summary-kept") and d.get("folder")), None
    )
    for kind, data in events:
        if kind not in NOTIFY_KINDS:
            continue
        if kind == "escalation":
            text = f"loopdeck needs you: {data.get('reason', 'the loop escalated')}"
        elif kind == "question":
            text = f"loopdeck: the agent asks: {data.get('question', '')}"
        elif kind == "usage-limit":
            text = f"loopdeck: usage limit reached; waiting until {data.get('until', '?')}"
        elif kind == "completed":
            text = f"loopdeck: loop complete ({data.get('reason', '')})"
        else:
            text = f"loopdeck: loop FAILED ({data.get('reason', '')})"
        text = f"{text} [{where}, iteration {iteration}]"
        message: dict[str, Any] = {"kind": kind, "iteration": iteration}
        if folder is not None and kind in REPORTED_KINDS:
            message["report"] = os.path.join(folder, "report.html")
            text += f" Report: {message['report']}"
        out.append({**message, "text": redact(text)})
    return out


def send_detached(root: Path, targets: list[str], due: list[dict[str, Any]]) -> None:
    """Hand `due` to a detached sender process and return at once."""
    if not targets or not due:
        return
    import subprocess  # ~7 ms (`-X importtime`): on the Stop hook's path, paid only when one is due

    payload = json.dumps({"root": str(root), "targets": targets, "messages": due}).encode("utf-8")
    proc = subprocess.Popen(
        [sys.executable, "-I", "-m", "loop.drivers.notify"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # outlives a hook that exits at once; never gets its signals
        cwd=root,
    )
    assert proc.stdin is not None
    try:
        proc.stdin.write(payload)
        proc.stdin.close()
    except OSError:
        pass


def send(target: str, message: dict[str, Any], root: Path) -> None:
    """Deliver one message to one target; raises on failure (the caller journals it). The
    text is redacted here too, whoever built the message."""
    text = redact(str(message.get("text", "")))
    if target == "bell":
        return  # the monitor rings its own bell on these events
    if target == "desktop":
        # Here, not at the top: ~7 ms and ~3 ms (`-X importtime`) the Stop hook's path would pay
        import shutil
        import subprocess

        exe = shutil.which("notify-send")
        if exe is None:
            raise RuntimeError("notify-send is not installed")
        subprocess.run([exe, "loopdeck", text], check=True, timeout=TIMEOUT_S, capture_output=True)
        return
    if target.startswith(("http://", "https://")):
        import urllib.request  # ~40 ms (`-X importtime`): the Stop hook's path would pay it

        body = json.dumps(
            redact_obj(
                {
                    "text": text,
                    "kind": message.get("kind"),
                    "workspace": str(root),
                    "iteration": message.get("iteration"),
                }
            )
        ).encode("utf-8")
        request = urllib.request.Request(
            target, data=body, headers={"Content-Type": "application/json"}, method="POST"
        )
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            response.read(1024)
        return
    if target.startswith("cmd:"):
        import subprocess  # ~7 ms (`-X importtime`): the Stop hook's path would pay it

        argv = shlex.split(target[4:])
        if not argv:
            raise ValueError("cmd: names no program")
        subprocess.run([*argv, text], check=True, timeout=TIMEOUT_S, capture_output=True, cwd=root)
        return
    if target.startswith("apprise:"):
        try:
            import apprise  # type: ignore[import-not-found]  # optional: may not be installed
        except ImportError:
            raise RuntimeError("apprise is not installed (pip install apprise)") from None
        sender = apprise.Apprise()
        if not sender.add(target[len("apprise:") :]) or not sender.notify(body=text, title="loopdeck"):
            raise RuntimeError("apprise could not deliver it")
        return
    raise ValueError(
        f"unknown notification target {target!r} (desktop, bell, an http(s) URL, cmd:…, apprise:…)"
    )


def check_target(target: str) -> str | None:
    """Why `target` can never work, or None: refused when the loop is configured, not at 3 a.m."""
    if target in ("bell", "desktop") or target.startswith(("http://", "https://", "apprise:")):
        return None
    if target.startswith("cmd:"):
        try:
            return None if shlex.split(target[4:]) else "cmd: names no program"
        except ValueError as exc:
            return f"cmd: cannot be read ({exc})"
    return f"unknown notification target {target!r}: {TARGETS}"


def main() -> int:
    """The detached sender: every message to every target, failures journaled."""
    try:
        job = json.loads(sys.stdin.buffer.read(1024 * 1024))
        root = Path(job["root"])
        targets = [str(t) for t in job["targets"]]
        due = [m for m in job["messages"] if isinstance(m, dict)]
    except (OSError, ValueError, KeyError, TypeError):
        return 2
    journal = Journal(Workspace(root).journal)
    for message in due:
        if message.get("report"):
            ensure_report(root, Path(str(message["report"])))
        for target in targets:
            try:
                send(target, message, root)
            except Exception as exc:  # a target failing must never stop anything: say it
                journal.append("warning", message.get("iteration"), {"message": failure_line(target, exc)})
    return 0


def ensure_report(root: Path, path: Path) -> None:
    """The report a notification links, written here when no driver wrote it (the Stop hook
    leaves it to this detached sender: it is not cheap enough for the hook's path)."""
    if path.exists():
        return
    # Here, not at the top: the report's modules and its plotting library (~60 ms) load only in
    # this detached process, and only for a notification that links one.
    from loop.views.report.files import ending_report

    ending_report(Workspace(root), path.parent)


def failure_line(target: str, exc: BaseException) -> str:
    """The journal's line for a failed notification: the target by its scheme and host (its
    path, query and user part can be its secret), and why, without the target in it again
    (urllib quotes the URL it refuses) nor the message (a failed command's argv holds it)."""
    import subprocess  # ~7 ms (`-X importtime`): the Stop hook's path would pay it

    shown = target_shown(target)
    if isinstance(exc, subprocess.CalledProcessError):
        why = f"exit status {exc.returncode}"
    elif isinstance(exc, subprocess.TimeoutExpired):
        why = f"no answer within {TIMEOUT_S:g} s"
    else:
        why = str(exc)
        for secret in {target, target.removeprefix("apprise:"), target.split("?")[0]}:
            if secret:
                why = why.replace(secret, shown)
    return redact(f"notification to {shown} failed: {type(exc).__name__}: {why}")


if __name__ == "__main__":
    os.umask(0o077)
    sys.exit(main())
