"""Tool registry and Jest report parsing (no Docker: the runner's answers are built by hand)."""

from __future__ import annotations

import subprocess
import sys

from harness import tools
from harness.grading import jest
from harness.sandbox import Status


def test_registry_order_is_the_public_tool_list():
    assert tools.tool_names() == tools.TOOL_NAMES
    names = [s["function"]["name"] for s in tools.schemas()]
    assert names == list(tools.TOOL_NAMES)
    assert all(s["function"]["parameters"]["type"] == "object" for s in tools.schemas())


def test_validate_names_the_problem():
    assert tools.validate("file_read", {"file": "a.js"}) is None
    assert "unknown tool 'rm'" in tools.validate("rm", {})
    assert (
        tools.validate("file_read", []) == "arguments of file_read must be a JSON object, got list"
    )
    assert "'file' is a required property" in tools.validate("file_read", {})
    assert "(timeout_s)" in tools.validate("jest_run", {"timeout_s": -1})


def test_a_lone_surrogate_in_an_argument_is_a_named_problem():
    # JSON spells it ("\\ud800"), Python holds it, no pipe to the sandbox carries it as UTF-8.
    args = {"file": "src/a.js", "content": "ok \ud800 then"}
    assert tools.validate("file_write", args) == (
        "bad arguments for file_write (content): not Unicode text "
        "(a lone surrogate '\\ud800' at index 3)"
    )
    edit = {"file": "src/a.js", "old": "x", "new": "\udfff"}
    assert "(new): not Unicode text" in tools.validate("file_edit", edit)
    assert tools.validate("file_write", {"file": "src/a.js", "content": "😀 é"}) is None


def _record(tests, **file_fields):
    """The guard's record of tests/a.test.js as the Jest hosts send it (guard.js)."""
    return {
        "files": {
            "tests/a.test.js": {
                "tests": [{"name": t["name"], "status": t["status"], "asserts": 1} for t in tests],
                "tamper": [],
                "checked": True,
                **file_fields,
            }
        },
        "tamper": [],
    }


def _answer(tests, *, expected=("tests/a.test.js",), evidence="nonce", guard=None):
    failed = sum(t["status"] == "failed" for t in tests)
    return {
        "evidence": evidence,
        "workspace": "/w",
        "expected_files": list(expected),
        "duration_ms": 120,
        "report": {
            "success": failed == 0,
            "numTotalTestSuites": 1,
            "numTotalTests": len(tests),
            "numPassedTests": len(tests) - failed,
            "numFailedTests": failed,
            "numPendingTests": 0,
            "testResults": [{"file": "tests/a.test.js", "execError": None, "tests": tests}],
        },
        "guard": _record(tests) if guard is None else guard,
    }


def test_from_runner_pass_fail_and_error_location():
    msg = (
        "TypeError: Cannot read properties of undefined (reading 'x')\n"
        "    at get (/w/node_modules/lib/index.js:1:1)\n    at read (/w/src/a.js:2:15)\n"
        "    at Object.<anonymous> (/w/tests/a.test.js:4:3)"
    )
    r = jest.from_runner(
        _answer(
            [
                {"name": "ok", "status": "passed"},
                {"name": "bad", "status": "failed", "failureMessages": [msg]},
            ]
        )
    )
    assert (r.status, r.num_passed, r.num_failed, r.duration_s) == (Status.FAILED, 1, 1, 0.12)
    [f] = r.failed_tests
    assert f.message == "TypeError: Cannot read properties of undefined (reading 'x')"
    assert f.location == jest.Location("src/a.js", 2, 15)
    assert jest.from_runner(_answer([{"name": "ok", "status": "passed"}])).status == Status.PASSED


def test_no_evidence_is_never_a_pass():
    r = jest.from_runner({"evidence": "none", "reason": "no_result_record", "duration_ms": 5})
    assert (r.status, r.reason) == (Status.FAILED, "no_result_record")
    assert jest.from_runner({"evidence": "none", "reason": "timeout"}).status == Status.TIMEOUT
    assert (
        jest.from_runner({"evidence": "none", "reason": "memory_limit"}).status
        == Status.MEMORY_LIMIT
    )
    # a test file that never reported (deleted itself, exited early) makes the run a failure
    r = jest.from_runner(
        _answer(
            [{"name": "ok", "status": "passed"}], expected=("tests/a.test.js", "tests/b.test.js")
        )
    )
    assert r.status == Status.FAILED and r.reason == "test files did not report: tests/b.test.js"
    # zero tests is not a pass
    assert jest.from_runner(_answer([])).status == Status.FAILED


def test_guard_record_gives_each_test_its_outcome_and_assertions():
    tests = [
        {"name": "ok", "status": "passed"},
        {"name": "bad", "status": "failed", "failureMessages": ["x"]},
    ]
    r = jest.from_runner(_answer(tests))
    assert r.status == Status.FAILED and not r.tamper
    assert [(t.id, t.status, t.asserts) for t in r.tests] == [
        ("tests/a.test.js::ok", "passed", 1),
        ("tests/a.test.js::bad", "failed", 1),
    ]
    assert "tests" not in r.to_dict() and "tamper" not in r.to_dict()  # the agent sees neither


def test_a_run_without_a_trustworthy_record_is_tampered():
    ok = [{"name": "ok", "status": "passed"}]
    cases = {
        "no integrity record": _answer(ok, guard={}) | {"guard": None},
        "disagrees with the guard": _answer(
            ok, guard=_record([{"name": "ok", "status": "failed"}])
        ),
        "check did not run": _answer(ok, guard=_record(ok, checked=False)),
        "expect.extend() from workspace code": _answer(
            ok, guard=_record(ok, tamper=["expect.extend() from workspace code"])
        ),
    }
    for why, answer in cases.items():
        r = jest.from_runner(answer)
        assert r.status == Status.TAMPERED and why in r.reason and r.tamper, (why, r)
        assert r.to_dict()["tamper"] == r.tamper
    host = _record(ok) | {"tamper": ["code generation in the host realm (Function constructor)"]}
    assert jest.from_runner(_answer(ok, guard=host)).status == Status.TAMPERED
    # a file that failed to load has no tests to vouch for: a failure, not tampering
    answer = _answer([], guard={"files": {}, "tamper": []})
    assert jest.from_runner(answer).status == Status.FAILED
    # with the guard off (benchmarks only) the report alone decides
    assert jest.from_runner(_answer(ok) | {"guard": None}, guarded=False).status == Status.PASSED


def test_import_harness_is_cheap():
    code = (
        "import sys, harness, harness.suites.load, harness.runs.metrics, harness.tools, harness.agents, harness.runs.runner;"
        "heavy = [m for m in ('docker', 'torch', 'composer', 'transformers', 'pandas') if m in sys.modules];"
        "print(','.join(heavy))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "", f"heavy modules imported by `import harness`: {out}"
