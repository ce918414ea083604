"""jest.from_runner: the runner's `jest` answer to a JestResult, decided from evidence.

No Docker: the answers are written out by hand in the shape runner.js sends (jestRun and hostCall
in harness/sandbox/image/recipe/runner/runner.js). test_tools_and_jest.py has the everyday cases; this file
pins down what makes a run count at all (the nonce), what a file that failed to load becomes
(``execError``) and how a run cut short is named (timeout, memory, output limits), each field
checked, because mutation testing runs these tests hundreds of times and must see every change.
"""

from __future__ import annotations

import pytest

from harness.grading import jest
from harness.grading.jest import FailedTest, JestResult, Location, TestOutcome
from harness.sandbox import Status

A, B = "tests/a.test.js", "tests/b.test.js"


def _test(name: str, status: str = "passed", *messages: str) -> dict:
    return {"name": name, "status": status, "failureMessages": list(messages)}


def _report(results: list[dict], **over) -> dict:
    tests = [t for r in results for t in r["tests"]]
    failed = sum(t["status"] == "failed" for t in tests)
    rep = {
        "success": failed == 0 and not any(r.get("execError") for r in results),
        "numTotalTestSuites": len(results),
        "numTotalTests": len(tests),
        "numPassedTests": sum(t["status"] == "passed" for t in tests),
        "numFailedTests": failed,
        "numPendingTests": sum(t["status"] == "pending" for t in tests),
        "testResults": results,
    }
    return rep | over


def _guard(results: list[dict], asserts: int | None = 1) -> dict:
    def rec(t):
        return {"name": t["name"], "status": t["status"]} | (
            {} if asserts is None else {"asserts": asserts}
        )

    return {
        "tamper": [],
        "files": {
            r["file"]: {"checked": True, "tamper": [], "tests": [rec(t) for t in r["tests"]]}
            for r in results
        },
    }


def _answer(results: list[dict], *, expected=None, evidence="nonce", **report_over) -> dict:
    return {
        "evidence": evidence,
        "workspace": "/w",
        "duration_ms": 250,
        "expected_files": [r["file"] for r in results] if expected is None else expected,
        "report": _report(results, **report_over),
        "guard": _guard(results),
    }


PASSING = [{"file": A, "execError": None, "tests": [_test("one"), _test("two")]}]


# ------------------------------------------------------------------------------ the nonce
def test_a_full_passing_report_without_the_nonce_is_not_a_pass():
    """The report is all green, but the answer does not carry the request's nonce (a test printed
    a forged record, or the host died): nothing in it is believed."""
    good = _answer(PASSING)
    assert jest.from_runner(good).status == Status.PASSED  # the same answer with the nonce passes
    for evidence in ("none", "forged", None):
        r = jest.from_runner(good | {"evidence": evidence})
        assert r == JestResult(
            Status.FAILED,
            1,
            0,
            0,
            0,
            0,
            duration_s=0.25,
            reason="no_result_record",
            evidence="none",
        ), evidence
    r = jest.from_runner({k: v for k, v in good.items() if k != "evidence"})
    assert (r.status, r.evidence, r.passed_tests, r.tests) == (Status.FAILED, "none", [], [])


def test_a_nonce_answer_without_a_report_is_a_failure_naming_jests_error():
    r = jest.from_runner(
        {
            "evidence": "nonce",
            "report": None,
            "error": "Cannot find module 'jest-circus'",
            "duration_ms": 40,
        }
    )
    assert r == JestResult(
        Status.FAILED,
        1,
        0,
        0,
        0,
        0,
        duration_s=0.04,
        reason="jest error: Cannot find module 'jest-circus'",
        evidence="none",
    )
    long = jest.from_runner({"evidence": "nonce", "report": {}, "error": "x" * 1000})
    assert long.reason == "jest error: " + "x" * 300 and long.duration_s == 0
    assert jest.from_runner({"evidence": "nonce"}).reason == "no_result_record"
    # the runner's own reason wins over Jest's error
    r = jest.from_runner({"evidence": "none", "reason": "timeout", "error": "boom"})
    assert (r.status, r.reason) == (Status.TIMEOUT, "timeout")


@pytest.mark.parametrize(
    "reason,status",
    [
        ("timeout", Status.TIMEOUT),
        ("memory_limit", Status.MEMORY_LIMIT),
        ("output_limit", Status.OUTPUT_LIMIT),
        ("no_result_record", Status.FAILED),
        ("something else", Status.FAILED),
    ],
)
def test_a_run_cut_short_is_named_by_the_runners_reason(reason, status):
    r = jest.from_runner(
        {"evidence": "none", "reason": reason, "exit_code": None, "duration_ms": 1500}
    )
    assert r == JestResult(status, 1, 0, 0, 0, 0, duration_s=1.5, reason=reason, evidence="none")
    assert r.to_dict()["status"] == status.value


# ------------------------------------------------------------------------------ execError
def test_a_test_file_that_failed_to_run_is_a_failed_test_with_its_message_and_place():
    msg = (
        "\x1b[1m\x1b[31m  ● Test suite failed to run\x1b[39m\x1b[22m\n\n"
        "    SyntaxError: Unexpected token (3:1)\n      at parse (/w/node_modules/@babel/parser/lib/index.js:1:1)\n"
        "      at Object.<anonymous> (/w/src/b.js:3:1)\n"
    )
    results = PASSING + [
        {"file": B, "execError": {"message": "SyntaxError"}, "failureMessage": msg, "tests": []}
    ]
    r = jest.from_runner(_answer(results, numFailedTestSuites=1))
    assert r.status == Status.FAILED and r.reason is None and not r.tamper
    assert r.failed_tests == [
        FailedTest(
            "(test file failed to run)",
            B,
            "SyntaxError: Unexpected token (3:1)",
            Location("src/b.js", 3, 1),
        )
    ]
    assert (r.num_passed, r.num_failed, r.num_total, r.num_test_files) == (2, 1, 2, 2)
    assert r.passed_tests == [f"{A}::one", f"{A}::two"]
    # without Jest's failureMessage the execError itself is the message
    results = [
        {
            "file": B,
            "execError": "Error: Cannot find module './gone' from 'tests/b.test.js'",
            "tests": [],
        }
    ]
    r = jest.from_runner(_answer(results))
    assert r.failed_tests == [
        FailedTest(
            "(test file failed to run)",
            B,
            "Error: Cannot find module './gone' from 'tests/b.test.js'",
            None,
        )
    ]
    assert (r.status, r.num_failed, r.num_total, r.reason) == (Status.FAILED, 1, 0, "no test ran")


def test_a_typescript_error_is_named_with_its_place_not_jests_header():
    """ts-jest reports a file that does not type-check as the file failing to run, with the
    diagnostic (a path relative to the project) below Jest's header and no stack frame."""
    msg = (
        "\x1b[1m\x1b[31m  ● Test suite failed to run\x1b[39m\x1b[22m\n\n"
        "    \x1b[96msrc/CronFileParser.ts\x1b[0m:\x1b[93m21\x1b[0m:\x1b[93m13\x1b[0m - "
        "\x1b[91merror\x1b[0m\x1b[90m TS2339: \x1b[0mProperty 'readFile' does not exist.\n"
    )
    results = [{"file": B, "execError": {"message": "TS"}, "failureMessage": msg, "tests": []}]
    (failed,) = jest.from_runner(_answer(results, numFailedTestSuites=1)).failed_tests
    assert failed.message.startswith("src/CronFileParser.ts:21:13 - error TS2339: Property")
    assert failed.location == Location("src/CronFileParser.ts", 21, 13)
    # (a diagnostic of a file outside the project names no place in it)
    assert jest.error_location("../x.ts:1:2 - error TS1: no", "/w") is None


def test_an_exec_error_after_the_tests_ran_is_a_failure_of_the_file():
    """An afterAll hook that throws: every test of the file passed, and Jest still fails the file
    ("Test suite failed to run", numRuntimeErrorTestSuites; the answer below is what the runner sent
    for such a file). It was a FAILED run naming no failure, and verify called it green."""
    msg = (
        "\n\n  \u25cf Test suite failed to run\n\n    close failed\n\n"
        "      at Object.close (src/x.js:1:63)\n      at Object.close (tests/a.test.js:2:18)\n"
    )
    results = [
        {"file": A, "execError": "[object Object]", "failureMessage": msg, "tests": [_test("one")]}
    ]
    r = jest.from_runner(_answer(results, success=False, numRuntimeErrorTestSuites=1))
    assert (r.status, r.num_passed, r.num_failed) == (Status.FAILED, 1, 1)
    assert r.failed_tests == [FailedTest("(test file failed to run)", A, "close failed", None)]
    assert r.passed_tests == [f"{A}::one"]
    # a failing test in the same file is named too, after the file's own failure
    results = [
        {
            "file": A,
            "execError": "afterAll",
            "failureMessage": "afterAll threw",
            "tests": [
                _test("one"),
                _test("two", "failed", "Error: nope\n    at /w/tests/a.test.js:9:5"),
            ],
        }
    ]
    r = jest.from_runner(_answer(results))
    assert r.failed_tests == [
        FailedTest("(test file failed to run)", A, "afterAll threw", None),
        FailedTest("two", A, "Error: nope", Location("tests/a.test.js", 9, 5)),
    ]
    assert r.num_failed == 2


def test_a_file_with_neither_error_nor_tests_adds_nothing():
    r = jest.from_runner(_answer([{"file": A, "execError": None, "tests": []}]))
    assert (r.failed_tests, r.status, r.reason) == ([], Status.FAILED, "no test ran")


# ------------------------------------------------------------------------------ a run with the nonce
def test_a_passing_run_field_by_field():
    r = jest.from_runner(_answer(PASSING))
    assert r == JestResult(
        Status.PASSED,
        0,
        2,
        0,
        2,
        1,
        [],
        [f"{A}::one", f"{A}::two"],
        0.25,
        None,
        "nonce",
        [TestOutcome(A, "one", "passed", 1), TestOutcome(A, "two", "passed", 1)],
        [],
        (A,),  # the files the run was to run (the runner's expected_files)
    )
    assert "files_run" not in r.to_dict()  # the harness's, not the agent's
    assert (
        jest.from_runner({k: v for k, v in _answer(PASSING).items() if k != "workspace"}).status
        == Status.PASSED
    )


def test_jests_own_time_is_kept_for_the_harness_and_not_shown_to_the_agent():
    r = jest.from_runner(_answer(PASSING) | {"jest_ms": 180.0})
    assert r.jest_s == 0.18 and r.duration_s == 0.25
    assert "jest_s" not in r.to_dict() and "jest_ms" not in r.to_dict()
    assert jest.from_runner(_answer(PASSING)).jest_s == 0.0  # a runner that did not say
    # A run without the host's answer (cut short) claims no Jest time, whatever else it carries:
    # a floor is measured only from runs that ran to an answer.
    cut = {"evidence": "none", "reason": "timeout", "duration_ms": 9000, "jest_ms": 8500}
    assert jest.from_runner(cut).jest_s == 0.0


def test_failed_tests_make_the_run_fail_whatever_the_summary_says():
    results = [
        {
            "file": A,
            "execError": None,
            "tests": [
                _test("one"),
                _test("two", "failed", "AssertionError: 1 != 2", "second message"),
            ],
        }
    ]
    # Jest's summary claims success and no failures; the per-test outcomes say otherwise
    r = jest.from_runner(_answer(results, success=True, numFailedTests=0))
    assert (r.status, r.exit_code, r.num_failed) == (Status.FAILED, 1, 1)
    assert r.failed_tests == [FailedTest("two", A, "AssertionError: 1 != 2", None)]
    # and the summary's count wins when it is the larger one
    assert jest.from_runner(_answer(results, numFailedTests=5)).num_failed == 5


def test_a_report_that_says_it_failed_is_a_failure_even_with_no_failed_test():
    r = jest.from_runner(_answer(PASSING, success=False))
    assert (r.status, r.exit_code, r.reason) == (Status.FAILED, 1, None)


def test_skipped_tests_are_named_and_a_missing_file_wins():
    results = [{"file": A, "execError": None, "tests": [_test("one"), _test("later", "pending")]}]
    r = jest.from_runner(_answer(results))
    assert (r.status, r.reason) == (Status.PASSED, "1 test(s) skipped")
    r = jest.from_runner(_answer(results, expected=[A, B, "tests/c.test.js"]))
    assert (r.status, r.reason) == (
        Status.FAILED,
        "test files did not report: tests/b.test.js, tests/c.test.js",
    )
    r = jest.from_runner(_answer([], expected=[A]))
    assert (r.status, r.reason) == (Status.FAILED, f"test files did not report: {A}")
    assert jest.from_runner(_answer(PASSING) | {"expected_files": None}).status == Status.PASSED


def test_guard_record_without_assertion_counts_reads_zero():
    answer = _answer(PASSING) | {"guard": _guard(PASSING, asserts=None)}
    assert [t.asserts for t in jest.from_runner(answer).tests] == [0, 0]


def test_tampering_is_the_status_and_the_reason():
    answer = _answer(PASSING)
    answer["guard"]["tamper"] = ["Object.prototype changed", "second"]
    r = jest.from_runner(answer)
    assert (r.status, r.exit_code, r.reason) == (
        Status.TAMPERED,
        1,
        "tampered: Object.prototype changed",
    )
    assert r.tamper == ["Object.prototype changed", "second"]
    answer = _answer(PASSING)
    answer["guard"]["files"][A]["tamper"] = ["fs.writeFileSync on a protected file"]
    r = jest.from_runner(answer)
    assert (
        r.tamper == [f"{A}: fs.writeFileSync on a protected file"] and r.status == Status.TAMPERED
    )
    # a file that failed to load is checked for the guard's refusals too
    results = [{"file": B, "execError": "boom", "tests": []}]
    answer = _answer(results) | {
        "guard": {"tamper": [], "files": {B: {"tamper": ["require of the guard"]}}}
    }
    assert jest.from_runner(answer).tamper == [f"{B}: require of the guard"]
    # and a guarded=False run ignores the record entirely
    assert jest.from_runner(_answer(PASSING) | {"guard": "junk"}, guarded=False).tamper == []


# ------------------------------------------------------------------------------ messages
def test_error_location_and_first_line():
    msg = (
        "\x1b[31mError: boom\x1b[39m\n    at helper (/w/node_modules/x/i.js:1:2)\n"
        "    at /elsewhere/a.js:5:6\n    at /w/src/a.js:12:34\n    at f (/w/src/b.js:1:1)"
    )
    assert jest.error_location(msg, "/w/") == Location("src/a.js", 12, 34)
    assert jest.error_location(msg, "/w") == Location("src/a.js", 12, 34)
    assert jest.error_location("Error: no frames", "/w") is None
    assert (
        jest.error_location("at /wx/a.js:1:1", "/w") is None
    )  # a sibling folder is not the workspace
    results = [
        {
            "file": A,
            "execError": None,
            "tests": [_test("t", "failed", "\n\n  " + "y" * 600 + "\nsecond")],
        }
    ]
    assert jest.from_runner(_answer(results)).failed_tests[0].message == "y" * 500
    results = [{"file": A, "execError": None, "tests": [_test("t", "failed")]}]
    assert jest.from_runner(_answer(results)).failed_tests[0].message == ""


def test_to_dict_hides_the_record_and_shows_tampering_only_when_there_is_some():
    d = jest.from_runner(_answer(PASSING)).to_dict()
    assert d == {
        "status": "passed",
        "exit_code": 0,
        "num_passed": 2,
        "num_failed": 0,
        "num_total": 2,
        "num_test_files": 1,
        "failed_tests": [],
        "passed_tests": [f"{A}::one", f"{A}::two"],
        "duration_s": 0.25,
        "reason": None,
        "evidence": "nonce",
    }
    answer = _answer(PASSING)
    answer["guard"]["tamper"] = ["x"]
    assert jest.from_runner(answer).to_dict()["tamper"] == ["x"]


def test_error_location_details():
    # a workspace whose name ends in characters rstrip would also eat is only stripped of its "/"
    assert jest.error_location("at /box/X/a.js:1:2", "/box/X") == Location("a.js", 1, 2)
    # colour codes inside a frame are removed before the frame is read
    assert jest.error_location("Error\n    at \x1b[2m/w/src/a.js:3:4\x1b[22m", "/w") == Location(
        "src/a.js", 3, 4
    )
    # without the runner naming its workspace, the sandbox's own path is assumed
    answer = _answer(
        [
            {
                "file": A,
                "execError": None,
                "tests": [_test("t", "failed", "Error: x\n    at /scratch/ws/src/a.js:7:8")],
            }
        ]
    )
    del answer["workspace"]
    assert jest.from_runner(answer).failed_tests[0].location == Location("src/a.js", 7, 8)


def test_no_integrity_record_is_named():
    r = jest.from_runner(_answer(PASSING) | {"guard": None})
    assert (r.status, r.reason, r.tamper) == (
        Status.TAMPERED,
        "tampered: no integrity record came back with the report",
        ["no integrity record came back with the report"],
    )


def test_every_file_of_a_run_is_checked_and_recorded():
    """Files are checked one by one: a file that failed to load or went unchecked does not end the
    check of the files after it, and every file's tests are in the record."""
    loaded = {"file": B, "execError": None, "tests": [_test("three")]}
    broken = {"file": A, "execError": "SyntaxError", "tests": []}
    r = jest.from_runner(_answer([broken, loaded]))
    assert [t.id for t in r.tests] == [f"{B}::three"] and r.status == Status.FAILED
    answer = _answer([PASSING[0], loaded])
    answer["guard"]["files"][A]["checked"] = False
    answer["guard"]["files"][B]["tamper"] = ["fs write"]
    r = jest.from_runner(answer)
    assert r.tamper == [f"{A}: the end-of-file integrity check did not run", f"{B}: fs write"]
    assert [t.id for t in r.tests] == [f"{B}::three"]
    r = jest.from_runner(_answer([PASSING[0], loaded]))
    assert [t.id for t in r.tests] == [
        f"{A}::one",
        f"{A}::two",
        f"{B}::three",
    ] and r.status == Status.PASSED


def test_plain_drops_terminal_colours():
    """What mine keeps of a failure (commits.jsonl `why`, `tail`) is read in files, not terminals."""
    assert (
        jest.plain("\x1b[1m\x1b[31m● boom\x1b[39m\x1b[22m at \x1b[96msrc/a.ts\x1b[0m")
        == "● boom at src/a.ts"
    )
