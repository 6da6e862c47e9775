"""Source 2: a GitHub Project (v2), read through the `gh` CLI.

`gh project item-list N --owner O --format json --limit L` prints `{"items": [...],
"totalCount": N}`; an item whose `status` is not a done name is pending. Answers are cached on
disk (default 60 s) because an agent may stop every few seconds and GitHub rate-limits; `gh`
gets a timeout (default 10 s), so a hung network cannot hang the hook. Every way `gh` can fail
becomes `available: false` with the reason.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loop.sources.base import MAX_ITEMS, SourceReport, TaskItem, unavailable
from loop.store.frontmatter import atomic_write

NAME = "github"
IN_PROGRESS = frozenset({"in progress", "in_progress", "doing", "in review"})


@dataclass(frozen=True, slots=True)
class GithubConfig:
    project: str
    """`NUMBER` (owner `@me`) or `OWNER/NUMBER`."""
    limit: int = 200
    timeout: float = 10.0
    cache_ttl: float = 60.0
    done_names: frozenset[str] = frozenset({"done"})

    def owner_number(self) -> tuple[str, str]:
        text = self.project.strip()
        if "/" in text:
            owner, number = text.rsplit("/", 1)
        else:
            owner, number = "@me", text
        if not number.isdigit() or not _owner_ok(owner):
            raise ValueError(
                f"GitHub project {self.project!r}: expected NUMBER or OWNER/NUMBER (e.g. octo-org/5)"
            )
        return owner, number


def _owner_ok(owner: str) -> bool:
    """A GitHub user or organisation (`@me` too), never an option of `gh`."""
    return owner == "@me" or (
        0 < len(owner) <= 100 and owner[0].isalnum() and all(c.isalnum() or c in "-_." for c in owner)
    )


def fetch(config: GithubConfig) -> dict[str, Any]:
    """Run gh and return its JSON; raises RuntimeError with a reason a person can act on."""
    # Here, not at the top: every Stop loads this module, GitHub on or off, and these two
    # imports cost it ~12 ms (subprocess ~10 ms, shutil ~2 ms, measured with `-X importtime`).
    import shutil
    import subprocess

    owner, number = config.owner_number()
    gh = shutil.which("gh")
    if gh is None:
        raise RuntimeError("the GitHub CLI `gh` is not on PATH (install it and run `gh auth login`)")
    argv = [
        gh,
        "project",
        "item-list",
        number,
        "--owner",
        owner,
        "--format",
        "json",
        "--limit",
        str(config.limit),
    ]
    try:
        done = subprocess.run(argv, capture_output=True, timeout=config.timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"`gh project item-list` did not answer within {config.timeout:g} s") from None
    except OSError as exc:
        raise RuntimeError(f"`gh` could not be started: {exc.strerror}") from None
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()
        first = message[0] if message else f"exit status {done.returncode}"
        if "auth login" in " ".join(message):
            first = "gh is not logged in (run `gh auth login`): " + first
        raise RuntimeError(f"`gh project item-list` failed: {first}")
    try:
        data = json.loads(done.stdout)
    except ValueError:
        excerpt = done.stdout[:60].decode("utf-8", "replace")
        raise RuntimeError(f"`gh` printed invalid JSON: {excerpt!r}") from None
    if not isinstance(data, dict) or not isinstance(data.get("items"), list):
        raise RuntimeError("`gh` printed JSON without an `items` list")
    return data


def report(data: dict[str, Any], config: GithubConfig, now: str) -> SourceReport:
    counts = {"pending": 0, "in_progress": 0, "done": 0}
    items: list[TaskItem] = []
    done_names = {name.lower() for name in config.done_names}
    for item in data["items"]:
        if not isinstance(item, dict):
            continue
        raw = item.get("status")
        name = raw.strip().lower() if isinstance(raw, str) else ""
        if name in done_names:
            status = "done"
        elif name in IN_PROGRESS:
            status = "in_progress"
        else:
            status = "pending"
        counts[status] += 1
        content = item.get("content")
        if not isinstance(content, dict):
            content = {}
        title = item.get("title") or content.get("title") or "(untitled)"
        if len(items) < MAX_ITEMS:
            url = content.get("url")
            items.append(
                TaskItem(
                    title=str(title),
                    status=status,
                    id=str(item.get("id", "")) or None,
                    url=url if isinstance(url, str) and url else None,
                )
            )
    total = data.get("totalCount")
    warnings: tuple[str, ...] = ()
    if isinstance(total, int) and total > len(data["items"]):
        warnings = (
            f"the project has {total} items; only the first {len(data['items'])} were read (raise the limit)",
        )
    return SourceReport(
        NAME,
        enabled=True,
        available=True,
        items=tuple(items),
        checked_at=now,
        detail=f"project {config.project}",
        warnings=warnings,
        pending=counts["pending"],
        in_progress=counts["in_progress"],
        done=counts["done"],
    )


def check(
    config: GithubConfig | None, now: str, cache_dir: Path | None, clock: float | None = None
) -> SourceReport:
    if config is None or not config.project.strip():
        return SourceReport(
            NAME,
            enabled=False,
            available=False,
            checked_at=now,
            error="no GitHub project configured (--github-project)",
        )
    moment = time.time() if clock is None else clock
    cache = cache_dir / "github-cache.json" if cache_dir is not None else None
    key = [config.project, config.limit, sorted(config.done_names)]
    if cache is not None:
        try:
            cached = json.loads(cache.read_bytes())
            if cached.get("key") == key and 0 <= moment - float(cached["at"]) < config.cache_ttl:
                if cached.get("error"):
                    return unavailable(
                        NAME, str(cached["error"]), cached.get("now", now), detail=f"project {config.project}"
                    )
                return report(cached["data"], config, cached.get("now", now))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            pass
    record: dict[str, Any] = {"key": key, "at": moment, "now": now}
    try:
        data = fetch(config)
        result = report(data, config, now)
        record["data"] = data
    except (RuntimeError, ValueError) as exc:
        result = unavailable(NAME, str(exc), now, detail=f"project {config.project}")
        record["error"] = str(exc)  # failures are cached too: a dead network is not asked each Stop
    if cache is not None:
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(cache, json.dumps(record).encode())
        except OSError:
            pass  # a cache that cannot be written only costs time
    return result
