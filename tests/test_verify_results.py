"""Verification results as data: what each test runner's output says, read from its machine
output (pytest's JUnit XML, `go test -json`, node's TAP, libtest's summary) or its closing
lines, and a command whose output cannot be read counted by its exit status."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loop import verify
from loop.processes import sandbox
from loop.processes.sandbox import Spec
from loop.verify import results
from loop.verify.results import TestCounts
from loop.verify.suite import Verdict, run_all

PYTEST_PROJECT = {
    "tests/test_calc.py": """\
def add(a, b):
    return a + b

def test_one(): assert add(1, 1) == 2
def test_two(): assert add(2, 2) == 4
def test_three(): assert add(0, 0) == 0
def test_four(): assert add(1, 2) == 4

class TestMore:
    def test_five(self):
        raise ValueError(f"bad object at {hex(id(self))}")
""",
}


def make(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


# --- real runners ------------------------------------------------------------------------------------


def test_pytest_is_read_from_the_junit_report_loopdeck_asks_for_in_the_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make(tmp_path / "proj", PYTEST_PROJECT)
    status = sandbox.detect("auto")
    boxed = (Spec(root, root, env_names=("PYTEST_DISABLE_PLUGIN_AUTOLOAD",)), status) if status.on else None
    item = verify.check(f"{sys.executable} -m pytest -q -p no:cacheprovider", [sys.executable], cwd=root)
    private = tmp_path / "private"
    private.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private))  # where loopdeck makes its folder
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    outcome = verify.run(item, root, timeout=60, env=env, sandbox=boxed)
    assert outcome.exit_code == 1 and outcome.kind == "tests"
    tests = outcome.tests
    assert tests is not None and tests.reader == "junit", outcome.tail
    assert (tests.passed, tests.failed, tests.errors, tests.skipped) == (3, 2, 0, 0)
    assert tests.failing == ("tests/test_calc.py::TestMore::test_five", "tests/test_calc.py::test_four")
    assert tests.first_error == "assert 3 == 4"
    assert not list(private.iterdir())  # the private folder is gone
    assert "generated xml file" not in outcome.tail  # nor does its varying path reach the agent
    assert not list(root.rglob("*.xml"))  # nothing written in the workspace


def test_a_workspace_that_turned_pytests_report_off_still_runs_its_tests(tmp_path: Path) -> None:
    root = make(tmp_path, {**PYTEST_PROJECT, "pytest.ini": "[pytest]\naddopts = -p no:junitxml\n"})
    item = verify.Check(
        "python -m pytest -q", (sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider")
    )
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    outcome = verify.run(item, root, timeout=60, env=env)
    assert outcome.exit_code == 1, outcome.tail
    assert outcome.tests is not None and outcome.tests.reader == "pytest"
    assert (outcome.tests.passed, outcome.tests.failed) == (3, 2)


def test_loopdecks_own_report_option_is_added_after_the_check_and_never_replaces_the_persons() -> None:
    argv = ["python3", "-m", "pytest", "-q", "--", "tests"]
    assert results.junit_argv(argv, "/r/j.xml") == [
        "python3",
        "-m",
        "pytest",
        "--junitxml=/r/j.xml",
        "-q",
        "--",
        "tests",
    ]
    assert results.junit_argv(["pytest", "--junitxml=mine.xml"], "/r/j.xml") is None
    assert results.junit_argv(["pytest", "-p", "no:junitxml"], "/r/j.xml") is None
    assert results.junit_argv(["tox"], "/r/j.xml") is None
    with pytest.raises(verify.CommandRefused, match="outside the workspace"):
        verify.check("pytest --junitxml=/tmp/elsewhere.xml", cwd=Path.cwd())


def test_a_unittest_run_is_read_from_its_summary(tmp_path: Path) -> None:
    root = make(
        tmp_path,
        {
            "test_m.py": """\
import unittest
class T(unittest.TestCase):
    def test_ok(self): pass
    def test_ok2(self): pass
    def test_fail(self): self.assertEqual(1, 2)
    def test_err(self): raise ValueError("oops at " + hex(id(self)))
    @unittest.skip("later")
    def test_skip(self): pass
"""
        },
    )
    item = verify.Check("python -m unittest", (sys.executable, "-m", "unittest", "test_m"))
    outcome = verify.run(item, root, timeout=60)
    assert outcome.kind == "tests" and not outcome.passed
    assert outcome.tests == TestCounts(
        passed=2,
        failed=1,
        errors=1,
        skipped=1,
        failing=("test_m.T.test_err", "test_m.T.test_fail"),
        first_error="ValueError: oops at 0x…",
        duration_s=outcome.tests.duration_s if outcome.tests else None,
        reader="unittest",
    )


NODE_TEST = """\
const test = require('node:test');
const assert = require('node:assert');
test('adds', () => { assert.strictEqual(1 + 1, 2); });
test('fails here', () => { assert.strictEqual(1 + 1, 3); });
test.skip('later', () => {});
test('group', async (t) => {
  await t.test('inner ok', () => {});
  await t.test('inner bad', () => { throw new Error('boom at 0xdeadbeef'); });
});
"""


NODE_SPEC = """\
✔ adds (3.804106ms)
✖ fails here (1.543319ms)
  AssertionError [ERR_ASSERTION]: Expected values to be strictly equal:

  2 !== 3

      at TestContext.<anonymous> (/tmp/vn/a.test.js:4:35)
﹣ later (0.136786ms) # SKIP
▶ group
  ✔ inner ok (0.146615ms)
  ✖ inner bad (0.109252ms)
    Error: boom at 0xdeadbeef
        at TestContext.<anonymous> (/tmp/vn/a.test.js:8:43)
✖ group (1.2ms)
ℹ tests 6
ℹ suites 0
ℹ pass 2
ℹ fail 3
ℹ cancelled 0
ℹ skipped 1
ℹ todo 0
ℹ duration_ms 253.698504

✖ failing tests:

test at a.test.js:4:1
✖ fails here (1.543319ms)
  AssertionError [ERR_ASSERTION]: Expected values to be strictly equal:

  2 !== 3

test at a.test.js:8:11
✖ inner bad (0.109252ms)
  Error: boom at 0xdeadbeef
"""


def test_nodes_spec_reporter_is_read_from_its_summary_and_failing_list() -> None:
    tests = results.read(NODE_SPEC)
    assert tests == TestCounts(
        passed=2,
        failed=3,
        skipped=1,
        failing=("fails here", "inner bad"),
        first_error="AssertionError [ERR_ASSERTION]: Expected values to be strictly equal:",
        duration_s=0.254,
        reader="node",
    )


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_a_node_test_run_is_read_from_its_tap_output(tmp_path: Path) -> None:
    root = make(tmp_path, {"calc.test.js": NODE_TEST})
    node = shutil.which("node") or "node"
    outcome = verify.run(verify.Check("node --test", (node, "--test")), root, timeout=60)
    tests = outcome.tests
    assert tests is not None and tests.reader == "node", outcome.tail
    assert (tests.passed, tests.failed, tests.skipped) == (2, 3, 1)  # node counts the group too
    assert tests.failing == ("fails here", "inner bad")
    assert tests.first_error is not None and "Expected values to be strictly equal" in tests.first_error


# --- text samples (go and cargo are not on every machine) -----------------------------------------------

GO_JSON = """\
{"Action":"start","Package":"example.com/calc"}
{"Action":"run","Package":"example.com/calc","Test":"TestAdd"}
{"Action":"output","Package":"example.com/calc","Test":"TestAdd","Output":"=== RUN   TestAdd\\n"}
{"Action":"pass","Package":"example.com/calc","Test":"TestAdd","Elapsed":0}
{"Action":"run","Package":"example.com/calc","Test":"TestDiv"}
{"Action":"run","Package":"example.com/calc","Test":"TestDiv/by_zero"}
{"Action":"output","Package":"example.com/calc","Test":"TestDiv/by_zero","Output":"=== RUN   TestDiv/by_zero\\n"}
{"Action":"output","Package":"example.com/calc","Test":"TestDiv/by_zero","Output":"    calc_test.go:21: Div(1, 0) = 0xc000012345, want an error\\n"}
{"Action":"output","Package":"example.com/calc","Test":"TestDiv/by_zero","Output":"    --- FAIL: TestDiv/by_zero (0.00s)\\n"}
{"Action":"fail","Package":"example.com/calc","Test":"TestDiv/by_zero","Elapsed":0}
{"Action":"pass","Package":"example.com/calc","Test":"TestDiv/simple","Elapsed":0}
{"Action":"fail","Package":"example.com/calc","Test":"TestDiv","Elapsed":0.01}
{"Action":"skip","Package":"example.com/calc","Test":"TestLater","Elapsed":0}
{"Action":"output","Package":"example.com/calc","Output":"coverage: 71.4% of statements\\n"}
{"Action":"fail","Package":"example.com/calc","Elapsed":0.012}
{"Action":"output","Package":"example.com/broken","Output":"# example.com/broken\\n"}
{"Action":"output","Package":"example.com/broken","Output":"broken/x.go:3:8: undefined: Foo\\n"}
{"Action":"fail","Package":"example.com/broken","Elapsed":0}
"""

CARGO = """\
   Compiling calc v0.1.0 (/home/u/calc)
    Finished `test` profile [unoptimized + debuginfo] target(s) in 0.52s
     Running unittests src/lib.rs (target/debug/deps/calc-1a2b3c4d5e6f7a8b)

running 4 tests
test tests::adds ... ok
test tests::divides ... FAILED
test tests::later ... ignored
test tests::subtracts ... ok

failures:

---- tests::divides stdout ----

thread 'tests::divides' panicked at src/lib.rs:20:9:
assertion `left == right` failed
  left: 2
 right: 3
note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace


failures:
    tests::divides

test result: FAILED. 2 passed; 1 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.01s

     Running unittests src/main.rs (target/debug/deps/calc-9f8e7d6c5b4a3921)

running 1 test
test it_runs ... ok

test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.02s

error: test failed, to rerun pass `--lib`
"""

PYTEST_TEXT = """\
============================= test session starts ==============================
platform linux -- Python 3.11.9, pytest-8.2.0, pluggy-1.5.0
rootdir: /home/u/proj
plugins: cov-5.0.0
collected 10 items

tests/test_a.py ..F....                                                  [ 70%]
tests/test_b.py .sF                                                      [100%]

=================================== FAILURES ===================================
____________________________________ test_c ____________________________________

    def test_c():
>       assert add(1, 2) == 4
E       assert 3 == 4

tests/test_a.py:12: AssertionError
---------- coverage: platform linux, python 3.11.9-final-0 -----------
Name              Stmts   Miss  Cover
-------------------------------------
src/calc.py          40      5    88%
TOTAL                52      7    87%

=========================== short test summary info ============================
FAILED tests/test_a.py::test_c - assert 3 == 4
FAILED tests/test_b.py::test_z[a b] - KeyError: 'x'
==================== 2 failed, 7 passed, 1 skipped in 0.12s ====================
"""


def test_go_test_json_counts_leaf_tests_and_a_package_that_did_not_build() -> None:
    found = results.examine("go test -json ./...", ("go", "test", "-json", "./..."), GO_JSON)
    assert found.kind == "tests"
    assert found.tests == TestCounts(
        passed=2,
        failed=1,
        errors=1,
        skipped=1,
        failing=("example.com/broken", "example.com/calc.TestDiv/by_zero"),
        first_error="calc_test.go: Div(1, 0) = 0x…, want an error",
        duration_s=0.012,
        coverage=71.4,
        reader="go-json",
    )


def test_cargos_libtest_summaries_are_added_up_with_the_failing_tests_and_their_panic() -> None:
    found = results.examine("cargo test", ("cargo", "test"), CARGO)
    assert found.tests == TestCounts(
        passed=3,
        failed=1,
        skipped=1,
        failing=("tests::divides",),
        first_error="assertion `left == right` failed",
        duration_s=0.03,
        reader="cargo",
    )


def test_pytests_closing_lines_and_coverage_are_read_when_there_is_no_report() -> None:
    found = results.examine("make test", ("make", "test"), PYTEST_TEXT)
    assert found.tests == TestCounts(
        passed=7,
        failed=2,
        skipped=1,
        failing=("tests/test_a.py::test_c", "tests/test_b.py::test_z[a b]"),
        first_error="assert 3 == 4",
        duration_s=0.12,
        coverage=87.0,
        reader="pytest",
    )
    quiet = results.read(
        "..F\nFAILED t.py::test_x - ZeroDivisionError: division by zero\n1 failed, 2 passed in 0.05s\n"
    )
    assert quiet is not None and (quiet.passed, quiet.failed, quiet.failing) == (2, 1, ("t.py::test_x",))


def test_a_command_whose_output_cannot_be_read_counts_by_its_exit_status() -> None:
    assert results.examine("make test", ("make", "test"), "all good\n") == results.Examined("tests")
    assert results.examine("make", ("make",), "cc -o x x.c\n") == results.Examined("build")
    assert results.examine("sh: ./run-tests.sh && true", None, "ok\n").kind == "check"
    assert results.examine("test -f out.txt", ("test", "-f", "out.txt"), "") == results.Examined("check")
    assert results.examine("npm test", ("npm", "test"), "> x@1 test\n> mocha\n").kind == "tests"


@pytest.mark.parametrize(
    ("output", "counts"),
    [
        (
            "src/a.ts(3,7): error TS2322: Type 'string' is not assignable.\n\nFound 1 error in src/a.ts:3\n",
            (1, None),
        ),
        (
            "a.py:3: error: Incompatible types  [assignment]\nFound 4 errors in 2 files (checked 9 source files)\n",
            (4, None),
        ),
        ("Success: no issues found in 9 source files\n", (0, None)),
        (
            "a.py:1:8: F401 `os` imported but unused\nFound 3 errors.\n[*] 3 fixable with the `--fix` option.\n",
            (3, None),
        ),
        ("All checks passed!\n", (0, None)),
        (
            "warning: unused variable: `x`\n --> src/lib.rs:2:9\nerror[E0308]: mismatched types\n"
            "warning: `calc` (lib) generated 1 warning\nerror: could not compile `calc` due to 1 previous error\n",
            (1, 1),
        ),
        ("\n✖ 5 problems (3 errors, 2 warnings)\n", (3, 2)),
    ],
    ids=["tsc", "mypy", "mypy-clean", "ruff", "ruff-clean", "cargo", "eslint"],
)
def test_build_commands_give_their_error_and_warning_counts(
    output: str, counts: tuple[int, int | None]
) -> None:
    found = results.examine("x", ("x",), output)
    assert (found.kind, found.errors, found.warnings) == ("build", *counts)


# --- normalising, odd output ---------------------------------------------------------------------------


def test_the_same_failure_twice_gives_the_same_first_error() -> None:
    def failed(address: str, folder: str, seconds: str, line: int) -> str:
        return (
            f"FAILED tests/test_io.py::test_load - FileNotFoundError: no {folder}/data.json for "
            f"<Loader object at {address}> after {seconds} (loader.py:{line}, line {line}) "
            f"pid {line * 7} at 2026-11-28T21:55:{line}.639512\n"
            f"1 failed in {seconds}\n"
        )

    one = results.read(failed("0x7f3a2b1c0d90", "/tmp/pytest-of-u/pytest-3/test_load0", "0.31s", 12))
    two = results.read(failed("0x7f99aa001122", "/tmp/pytest-of-u/pytest-4/test_load0", "1.52s", 14))
    assert one is not None and two is not None
    assert (
        one.first_error
        == two.first_error
        == "FileNotFoundError: no <tmp> for <Loader object at 0x…> after <t> (loader.py, line) pid <n> at <time>"
    )
    other = results.read(failed("0x1", "/tmp/x", "1s", 1).replace("FileNotFound", "Permission"))
    assert other is not None and other.first_error != one.first_error


ODD = [
    "",
    "\x00\xff" * 100,
    "test result: FAILED. 99999999999999999999999 passed; x failed",
    "Ran 3 tests in 0.1s\n",
    "Ran 3 tests in 0.1s\nFAILED (failures=a, errors=)\n",
    "# pass 1\n# fail\n",
    "# pass 1\n# fail 1\nnot ok 1 - x\n  ---\n  error: |-\n",
    "✖ failing tests:\n✖\n# pass 0\n# fail 1\n",
    '{"Action": 1}\n{"Action":"fail","Test":["x"]}\n{"Action":"pass","Elapsed":"soon"}',
    "= 1 failed, 2 bananas in 0.1s =\n",
    "FAILED  - \n1 failed in 0.1s\n",
    "Tests:       x failed, 5 total\n",
    "TOTAL 10 1 900%\n",
    "x" * 300_000,
]


@pytest.mark.parametrize("output", ODD)
def test_odd_output_never_raises(output: str) -> None:
    found = results.examine("pytest", ("pytest",), output)
    assert found.kind in ("tests", "build")


@pytest.mark.parametrize(
    "xml",
    [
        b"",
        b"<testsuites><testsuite><testcase",
        b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;">]><testsuite>&b;</testsuite>',
        b"<html><body>not a report</body></html>",
        b'<testsuite name="pytest" time="NaN"><testcase classname="../../etc" name="x"><error/></testcase></testsuite>',
    ],
)
def test_a_bad_report_is_no_report(xml: bytes, tmp_path: Path) -> None:
    counts = results.read_junit(xml, tmp_path)
    assert counts is None or (counts.errors == 1 and counts.duration_s is None)


def test_a_report_replaced_by_a_symlink_is_not_followed(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("<testsuite><testcase name='t'/></testsuite>")
    (tmp_path / "junit.xml").symlink_to(secret)
    assert results.read_report(tmp_path / "junit.xml") is None
    assert results.read_report(secret) is not None


@settings(max_examples=60, deadline=None)
@given(
    st.text(alphabet=st.sampled_from(list('\n =-#:;.,()0123456789abFAILEDpassedRunTtok✖ℹ"{}'))), st.binary()
)
def test_no_output_makes_a_reader_raise(text: str, xml: bytes) -> None:
    results.examine("pytest", ("pytest",), text, junit=xml or None)
    for _, reader in results.READERS:
        reader(text)


# --- as data -----------------------------------------------------------------------------------------


def test_counts_go_to_json_and_back_tolerating_what_a_file_may_hold() -> None:
    counts = TestCounts(1, 2, 0, 3, ("a", "b"), "boom", 0.5, 80.0, "junit")
    assert TestCounts.from_json(counts.to_json()) == counts
    assert TestCounts(passed=1).to_json() == {"passed": 1, "failed": 0, "errors": 0, "skipped": 0}
    assert TestCounts.from_json(["x"]) is None
    bad: dict[str, Any] = {
        "passed": "3",
        "failed": True,
        "failing": "a",
        "coverage": float("nan"),
        "first_error": 4,
    }
    assert TestCounts.from_json(bad) == TestCounts()


def test_a_verdict_says_per_command_and_in_sum_whether_tests_and_build_passed(tmp_path: Path) -> None:
    make(
        tmp_path, {"test_m.py": "import unittest\nclass T(unittest.TestCase):\n    def test_a(self): pass\n"}
    )
    events: list[tuple[str, dict[str, Any]]] = []
    lint = "print('a.py:1: error: x'); print('Found 2 errors in 1 file (checked 1 source file)'); exit(1)"
    checks = [
        verify.Check("python -m unittest", (sys.executable, "-m", "unittest", "test_m")),
        verify.Check("mypy .", (sys.executable, "-c", lint)),
    ]
    verdict = run_all(checks, tmp_path, timeout=60, report=lambda kind, data: events.append((kind, data)))
    assert not verdict.passed and len(verdict.failures) == 1  # callers see what they always saw
    validation = verdict.validation()
    tests = dict(validation["tests"])
    assert tests.pop("duration_s") < 5
    assert tests == {"passed": 1, "failed": 0, "errors": 0, "skipped": 0, "reader": "unittest"}
    assert (validation["tests_pass"], validation["build_succeeds"]) == (True, False)
    first, second = validation["commands"]
    assert (first["kind"], first["exit_code"], first["tests"]["passed"]) == ("tests", 0, 1)
    assert (second["kind"], second["errors"], "tests" in second) == ("build", 2, False)
    passed = [data for kind, data in events if kind == "verification-passed"]
    assert passed[0]["tests"]["passed"] == 1 and "tail" in passed[0]
    assert Verdict().validation() == {"commands": [], "tests_pass": None, "build_succeeds": None}


def test_several_test_commands_are_summed() -> None:
    a = TestCounts(2, 1, 0, 0, ("x",), "boom", 1.0, None, "junit")
    b = TestCounts(3, 0, 1, 1, ("y",), "bang", 0.5, 50.0, "node")
    assert results.summed([a, None, b]) == TestCounts(5, 1, 1, 1, ("x", "y"), "boom", 1.5, 50.0, "junit+node")
    assert results.summed([None]) is None


def test_which_programs_run_tests() -> None:
    yes = [
        ["pytest"],
        ["python3", "-m", "pytest"],
        ["go", "test", "./..."],
        ["cargo", "test"],
        ["npm", "test"],
    ]
    yes += [["npm", "run", "test:unit"], ["node", "--test"], ["make", "test"], ["python", "-m", "unittest"]]
    no = [["ruff", "check"], ["mypy", "."], ["cargo", "build"], ["npm", "run", "build"], ["make"], []]
    assert all(results.is_test_runner(a) for a in yes)
    assert not any(results.is_test_runner(a) for a in no)


def test_only_build_and_lint_tools_say_whether_the_build_succeeds() -> None:
    """A command that is neither a test runner nor a build or lint tool is a check: its failure
    is not a failing build."""
    builds = [["tsc"], ["npx", "tsc", "--noEmit"], ["cargo", "clippy"], ["make"], ["cmake", "--build", "b"]]
    builds += [
        ["go", "vet", "./..."],
        ["npm", "run", "build"],
        ["yarn", "lint"],
        ["python", "-m", "mypy", "."],
    ]
    builds += [["ruff", "check"], ["eslint", "src"], ["flake8"], ["ninja"]]
    checks = [["test", "-f", "greeting.txt"], ["python", "-c", "import x"], ["./check.sh"], ["true"]]
    checks += [["git", "diff", "--check"], ["npm", "run", "start"], []]
    assert [results.kind_of("", a) for a in builds] == ["build"] * len(builds)
    assert [results.kind_of("", a) for a in checks] == ["check"] * len(checks)
    assert results.kind_of("pytest", ("pytest",)) == "tests"
