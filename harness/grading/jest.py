"""Jest results: from the runner's report to a typed, JSON-serialisable record, with evidence checks.

A run counts only with positive evidence: the answer came from the trusted runner tagged with the
request's nonce, and every test file that Jest listed on the pristine workspace (or every requested
one) appears in the report. A test file that prints "Tests: 5 passed", exits early with
``process.exit(0)`` or deletes itself therefore never reads as a pass.

A guarded run (the default; recipe/runner/guard.js) also carries the guard's own record of every
test (its outcome and passing assertions, kept where workspace code cannot reach) and what the
guard refused. Each test's outcome is taken from that record; a report that disagrees with it, a
file whose tests ran without the guard's end-of-file check, or any refusal makes the run
``tampered``.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.sandbox import Status

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# "at fn (/scratch/ws/src/a.js:2:15)" or "at /scratch/ws/src/a.js:2:15"
_FRAME = re.compile(r"at (?:.*? \()?(?P<path>/[^\s():]+):(?P<line>\d+):(?P<col>\d+)\)?")
# A TypeScript diagnostic as ts-jest words it: a path relative to the project, then the code.
_TS_ERROR = re.compile(
    r"^[ \t]*(?P<path>[^\s:]+):(?P<line>\d+):(?P<col>\d+) - error TS\d+", re.MULTILINE
)
# Jest's header of a file that failed to load: what follows it says why.
_SUITE_FAILED = "● Test suite failed to run"


@dataclass(frozen=True)
class Location:
    file: str
    line: int
    column: int


@dataclass(frozen=True)
class FailedTest:
    name: str
    file: str
    message: str
    location: Location | None


@dataclass(frozen=True)
class TestOutcome:
    """One test as the guard recorded it: ``status`` is Jest's (passed, failed, pending, todo)."""

    __test__ = False  # not a pytest class, whatever its name says
    file: str
    name: str
    status: str
    asserts: int  # passing assertions (expect matcher calls) while the test ran

    @property
    def id(self) -> str:
        return f"{self.file}::{self.name}"


@dataclass(frozen=True)
class JestResult:
    status: Status
    exit_code: int
    num_passed: int
    num_failed: int
    num_total: int
    num_test_files: int
    failed_tests: list[FailedTest] = field(default_factory=list)
    passed_tests: list[str] = field(default_factory=list)
    duration_s: float = 0.0
    reason: str | None = None  # why it is not a pass/fail on the tests' merits
    evidence: str = "none"
    tests: list[TestOutcome] = field(
        default_factory=list
    )  # the guard's record (empty when unguarded)
    tamper: list[str] = field(default_factory=list)  # what the guard refused or found changed
    # The test files this run was to run, each of which reported (else the status says which did
    # not): every test file of the workspace, or those a scoped graded run listed (verify._scope).
    files_run: tuple[str, ...] = ()
    # Seconds Jest itself ran in the host (runner.js ``jest_ms``, the slowest host of a sharded
    # run): the part of ``duration_s`` a harness cannot go below for these files (bench floors).
    jest_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """The tool result an agent sees (the per-test record and Jest's own time stay with the
        harness: an observation reads the same whatever the machine's speed inside Jest)."""
        d = asdict(self)
        d["status"] = self.status.value
        del d["tests"], d["files_run"], d["jest_s"]
        if not self.tamper:
            del d["tamper"]
        return d


def error_location(message: str, workspace: str) -> Location | None:
    """Where the error happened: the first stack frame inside the workspace (outside node_modules).

    Jest's frames name absolute paths; the first workspace frame is where the error was thrown (the
    source file for a TypeError, the test file's assertion line for an ``expect`` failure).
    """
    prefix = workspace.rstrip("/") + "/"
    text = _ANSI.sub("", message)
    for m in _FRAME.finditer(text):
        path = m.group("path")
        if path.startswith(prefix) and "/node_modules/" not in path:
            return Location(path[len(prefix) :], int(m.group("line")), int(m.group("col")))
    # A file that did not compile has no frame of its own: ts-jest names where, relative.
    for m in _TS_ERROR.finditer(text):
        path = m.group("path")
        if not path.startswith(("/", "../")) and "node_modules/" not in path:
            return Location(path, int(m.group("line")), int(m.group("col")))
    return None


def plain(text: str) -> str:
    """``text`` without its terminal colours (Jest and ts-jest colour what they print)."""
    return _ANSI.sub("", text)


def _first_line(message: str) -> str:
    """The message's first line that says something: not Jest's header of a file that failed to
    load, which would stand for every such failure alike (a TypeScript error, a missing module)."""
    text = _ANSI.sub("", message).strip()
    for line in text.splitlines():
        if line.strip() and line.strip() != _SUITE_FAILED:
            return line.strip()[:500]
    return ""


def _trusted_outcomes(
    guard: dict[str, Any] | None, report: dict[str, Any]
) -> tuple[list[TestOutcome], list[str]]:
    """The guard's per-test record, and every reason the run cannot be trusted."""
    if not isinstance(guard, dict):
        return [], ["no integrity record came back with the report"]
    tamper = [str(t) for t in guard.get("tamper") or []]
    files = guard.get("files") or {}
    outcomes: list[TestOutcome] = []
    for tr in report["testResults"]:
        rec = files.get(tr["file"]) or {}
        tamper += [f"{tr['file']}: {t}" for t in rec.get("tamper") or []]
        if not tr["tests"]:
            continue  # the file failed to load: nothing ran that a record would vouch for
        if not rec.get("checked"):
            tamper.append(f"{tr['file']}: the end-of-file integrity check did not run")
            continue
        ours = sorted((t["status"], t["name"]) for t in rec.get("tests") or [])
        theirs = sorted((t["status"], t["name"]) for t in tr["tests"])
        if ours != theirs:
            tamper.append(
                f"{tr['file']}: the report disagrees with the guard's record of its tests"
            )
        outcomes += [
            TestOutcome(tr["file"], t["name"], t["status"], int(t.get("asserts") or 0))
            for t in rec.get("tests") or []
        ]
    return outcomes, tamper


def from_runner(answer: dict[str, Any], *, guarded: bool = True) -> JestResult:
    """Turn the runner's ``jest`` answer into a JestResult, deciding the status from evidence.

    ``guarded=False`` is for sandboxes started with the guard off (benchmarks of its cost only).
    """
    workspace = answer.get("workspace") or "/scratch/ws"
    duration = answer.get("duration_ms", 0) / 1000
    jest_s = float(answer.get("jest_ms") or 0) / 1000
    guard = answer.get("guard") if guarded and answer.get("evidence") == "nonce" else None
    refused = [str(t) for t in guard.get("tamper") or []] if isinstance(guard, dict) else []
    if refused and not answer.get("report"):
        # Jest failed as a whole because the guard refused something (a changed file the config loads)
        return JestResult(
            Status.TAMPERED,
            1,
            0,
            0,
            0,
            0,
            duration_s=duration,
            reason=f"tampered: {refused[0]}",
            evidence="none",
            tamper=refused,
            jest_s=jest_s,
        )
    if answer.get("evidence") != "nonce" or not answer.get("report"):
        reason = answer.get("reason") or (
            "jest error: " + str(answer.get("error"))[:300]
            if answer.get("error")
            else "no_result_record"
        )
        status = {
            "timeout": Status.TIMEOUT,
            "memory_limit": Status.MEMORY_LIMIT,
            "output_limit": Status.OUTPUT_LIMIT,
        }.get(reason, Status.FAILED)
        return JestResult(
            status, 1, 0, 0, 0, 0, duration_s=duration, reason=reason, evidence="none"
        )
    rep = answer["report"]
    failed: list[FailedTest] = []
    passed: list[str] = []
    for tr in rep["testResults"]:
        if tr.get("execError"):
            # The file failed to load, or (its tests reported) an afterAll hook threw: Jest fails the
            # file either way ("Test suite failed to run"), so it is a failure of that file here too.
            msg = tr.get("failureMessage") or tr["execError"]
            failed.append(
                FailedTest(
                    "(test file failed to run)",
                    tr["file"],
                    _first_line(msg),
                    error_location(msg, workspace),
                )
            )
        for t in tr["tests"]:
            if t["status"] == "passed":
                passed.append(f"{tr['file']}::{t['name']}")
            elif t["status"] == "failed":
                msg = "\n".join(t.get("failureMessages") or [])
                failed.append(
                    FailedTest(
                        t["name"], tr["file"], _first_line(msg), error_location(msg, workspace)
                    )
                )
    ran = {tr["file"] for tr in rep["testResults"]}
    missing = sorted(set(answer.get("expected_files") or []) - ran)
    n_failed = len(failed)
    reason = None
    ok = rep["success"] and n_failed == 0 and rep["numTotalTests"] > 0
    if missing:
        ok, reason = False, f"test files did not report: {', '.join(missing)}"
    elif rep["numTotalTests"] == 0:
        reason = "no test ran"
    elif rep.get("numPendingTests"):
        reason = f"{rep['numPendingTests']} test(s) skipped"
    outcomes, tamper = _trusted_outcomes(answer.get("guard"), rep) if guarded else ([], [])
    status = Status.TAMPERED if tamper else Status.PASSED if ok else Status.FAILED
    return JestResult(
        status=status,
        exit_code=0 if status is Status.PASSED else 1,
        num_passed=rep["numPassedTests"],
        num_failed=max(rep["numFailedTests"], n_failed),
        num_total=rep["numTotalTests"],
        num_test_files=rep["numTotalTestSuites"],
        failed_tests=failed,
        passed_tests=passed,
        duration_s=duration,
        reason=f"tampered: {tamper[0]}" if tamper else reason,
        evidence="nonce",
        tests=outcomes,
        tamper=tamper,
        files_run=tuple(answer.get("expected_files") or ()),
        jest_s=jest_s,
    )
