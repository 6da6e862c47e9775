from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from loop.sources import github
from loop.sources.github import GithubConfig
from tests.conftest import REPO, SAMPLES

NOW = "2026-01-01T00:00:00.000Z"
FAKES = REPO / "tests" / "fakes"


@pytest.fixture
def fake_gh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shutil.copy(FAKES / "gh", bin_dir / "gh")
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    log = tmp_path / "gh.log"
    monkeypatch.setenv("FAKE_GH_LOG", str(log))
    monkeypatch.setenv("FAKE_GH_OUTPUT", str(SAMPLES / "gh-project-item-list.json"))
    return log


def with_statuses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, statuses: list[str | None]) -> None:
    data = json.loads((SAMPLES / "gh-project-item-list.json").read_text())
    items = []
    for index, status in enumerate(statuses):
        item = dict(data["items"][index % 3], id=f"item{index}")
        if status is not None:
            item["status"] = status
        items.append(item)
    out = tmp_path / "items.json"
    out.write_text(json.dumps({"items": items, "totalCount": len(items)}))
    monkeypatch.setenv("FAKE_GH_OUTPUT", str(out))


def test_sample_output_items_without_status_are_pending(fake_gh: Path) -> None:
    report = github.check(GithubConfig("cli/5"), NOW, None)
    assert report.available and (report.pending, report.in_progress, report.done) == (3, 0, 0)
    assert [i.title for i in report.items] == ["an issue", "a pull request", "draft issue"]
    assert fake_gh.read_text().split() == [
        "project",
        "item-list",
        "5",
        "--owner",
        "cli",
        "--format",
        "json",
        "--limit",
        "200",
    ]


def test_statuses_and_configurable_done_names(
    fake_gh: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_statuses(tmp_path, monkeypatch, ["Todo", "In Progress", "Done", "DONE", "Shipped", None])
    report = github.check(GithubConfig("7"), NOW, None)
    assert (report.pending, report.in_progress, report.done) == (3, 1, 2)
    assert "--owner @me" in fake_gh.read_text()
    shipped = github.check(GithubConfig("7", done_names=frozenset({"Done", "shipped"})), NOW, None)
    assert shipped.done == 3


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("auth", "not logged in (run `gh auth login`)"),
        ("badjson", "invalid JSON"),
        ("error", "Could not resolve to a ProjectV2"),
    ],
)
def test_failures_are_unavailable_with_reason(
    fake_gh: Path, monkeypatch: pytest.MonkeyPatch, mode: str, expected: str
) -> None:
    monkeypatch.setenv("FAKE_GH_MODE", mode)
    report = github.check(GithubConfig("5"), NOW, None)
    assert report.enabled and not report.available and report.uncertain
    assert expected in (report.error or "")


def test_timeout(fake_gh: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_GH_MODE", "timeout")
    report = github.check(GithubConfig("5", timeout=0.5), NOW, None)
    assert not report.available and "did not answer within 0.5 s" in (report.error or "")


def test_gh_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    report = github.check(GithubConfig("5"), NOW, None)
    assert not report.available and "not on PATH" in (report.error or "")


def test_bad_project_id(fake_gh: Path) -> None:
    report = github.check(GithubConfig("octo/x"), NOW, None)
    assert not report.available and "expected NUMBER or OWNER/NUMBER" in (report.error or "")


def test_unconfigured_is_disabled_not_uncertain() -> None:
    report = github.check(None, NOW, None)
    assert not report.enabled and not report.uncertain


def test_cache_spares_github(fake_gh: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    config = GithubConfig("5", cache_ttl=60)
    for second in range(5):
        assert github.check(config, NOW, cache, clock=1000.0 + second).pending == 3
    assert len(fake_gh.read_text().splitlines()) == 1
    github.check(config, NOW, cache, clock=1061.0)
    assert len(fake_gh.read_text().splitlines()) == 2
    # Failures are cached too, so a dead network is not asked on every Stop.
    monkeypatch.setenv("FAKE_GH_MODE", "auth")
    github.check(config, NOW, cache, clock=2000.0)
    assert not github.check(config, NOW, cache, clock=2001.0).available
    assert len(fake_gh.read_text().splitlines()) == 3
    (cache / "github-cache.json").write_text("{broken")
    monkeypatch.setenv("FAKE_GH_MODE", "ok")
    assert github.check(config, NOW, cache, clock=2002.0).available


def test_total_count_beyond_limit_warns(
    fake_gh: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "o.json"
    out.write_text(json.dumps({"items": [{"id": "a", "title": "t", "status": "Todo"}], "totalCount": 500}))
    monkeypatch.setenv("FAKE_GH_OUTPUT", str(out))
    report = github.check(GithubConfig("5", limit=1), NOW, None)
    assert "500 items" in report.warnings[0]
