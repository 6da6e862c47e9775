"""`--pr`'s rules on the host's word (`loop.core.pulls`), the fake host's GraphQL selection
(which gh's strict decoder depends on), and the token kept from the workers."""

from __future__ import annotations

from loop.core import pulls
from loop.core.pulls import Check, Pull, Review, judge
from loop.drivers.pulls import without_secrets
from tests.e2e.fakegithub import prune, selection

URL = "https://github.localhost/o/r/pull/7"


def test_a_failing_check_goes_back_with_its_name_and_link() -> None:
    verdict = judge(
        Pull(
            URL,
            head="b",
            checks=(Check("ci/test", "fail", "https://ci/1", "the tests"), Check("lint", "pass")),
        )
    )
    assert verdict.kind == pulls.REWORK and verdict.facts == {"checks": ["ci/test"]}
    assert "ci/test: fail (the tests) https://ci/1" in verdict.feedback and "lint" not in verdict.feedback
    assert (
        judge(Pull(URL, checks=(Check("ci", "cancel"),))).kind == pulls.REWORK
    )  # a cancelled run never passed


def test_pending_checks_and_a_review_not_given_wait() -> None:
    assert judge(Pull(URL, checks=(Check("ci", "pending"),), decision="APPROVED")).kind == pulls.WAIT
    assert judge(Pull(URL, checks=(Check("ci", "pass"),), decision="REVIEW_REQUIRED")).kind == pulls.WAIT


def test_a_change_request_on_the_newest_commit_goes_back_with_the_reviews_and_comments() -> None:
    asked = Review("bob", "CHANGES_REQUESTED", "Rename foo.", commit="b")
    verdict = judge(
        Pull(
            URL, head="b", decision="CHANGES_REQUESTED", reviews=(asked,), comments=(("carol", "Also bar."),)
        )
    )
    assert verdict.kind == pulls.REWORK and verdict.facts == {"reviewers": ["bob"]}
    assert "- bob: Rename foo." in verdict.feedback and "- carol: Also bar." in verdict.feedback


def test_a_change_request_on_an_older_commit_waits_for_the_reviewer() -> None:
    """The worker answered it already (a new head): asking again would loop on old words."""
    old = Review("bob", "CHANGES_REQUESTED", "Rename foo.", commit="a")
    assert judge(Pull(URL, head="b", decision="CHANGES_REQUESTED", reviews=(old,))).kind == pulls.WAIT


def test_green_and_approved_or_no_review_required_lands() -> None:
    green = (Check("ci", "pass"), Check("docs", "skipping"))
    assert judge(Pull(URL, checks=green, decision="APPROVED")).kind == pulls.LAND
    assert judge(Pull(URL, checks=green, decision="")).kind == pulls.LAND
    assert judge(Pull(URL, state="MERGED")).kind == pulls.MERGED
    closed = judge(Pull(URL, state="CLOSED"))
    assert closed.kind == pulls.PERSON and URL in closed.feedback


def test_a_conflict_with_the_base_goes_to_the_worker_as_the_trains_conflicts_do() -> None:
    green = (Check("ci", "pass"),)
    assert judge(Pull(URL, checks=green, mergeable="CONFLICTING", decision="APPROVED")).kind == pulls.CONFLICT
    failing = (Check("ci", "fail"),)
    assert (
        judge(Pull(URL, checks=failing, mergeable="CONFLICTING")).kind == pulls.REWORK
    )  # told both at once? the check first


def test_the_hosts_token_never_reaches_a_worker() -> None:
    env = {"GH_TOKEN": "x", "GITHUB_TOKEN": "y", "GH_ENTERPRISE_TOKEN": "z", "PATH": "/bin"}
    assert without_secrets(env) == {"PATH": "/bin"}


def test_the_fake_answers_only_the_fields_gh_asked_for() -> None:
    """gh decodes some answers strictly: a field it did not ask for fails the command."""
    query = """
    fragment pr on PullRequest{number,url}
    query PullRequestList($owner: String!, $state: [PullRequestState!] = OPEN) {
      repository(owner: $owner, name: "r") {
        pullRequests(states: $state, orderBy: {field: CREATED_AT, direction: DESC}) {
          nodes { ...pr, headRefName }
          alias: totalCount
        }
      }
    }"""
    wanted = selection(query)
    assert wanted == {
        "repository": {"pullRequests": {"nodes": {"number": {}, "url": {}, "headRefName": {}}, "alias": {}}}
    }
    data = {
        "repository": {
            "id": 1,
            "pullRequests": {"nodes": [{"number": 1, "url": "u", "x": 2, "headRefName": "h"}]},
        }
    }
    assert prune(data, wanted) == {
        "repository": {
            "pullRequests": {"nodes": [{"number": 1, "url": "u", "headRefName": "h"}], "alias": None}
        }
    }
