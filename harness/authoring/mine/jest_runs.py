"""The mine's Jest runs of a candidate commit in its sandbox: the commit's test files at the parent
R times and at the commit R times, and the verdict they give (``fail_to_pass``)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from harness.authoring.box import Box, file_of
from harness.authoring.build.compose import Failure
from harness.authoring.build.jest_runs import failure_records
from harness.authoring.mine import fix, history, reasons
from harness.authoring.mine.options import MineOptions
from harness.base.errors import SandboxDead
from harness.grading import jest


@dataclasses.dataclass(frozen=True)
class Candidate:
    """A commit under check: the parent's files with the commit's tests in ``work``, the source
    files at the parent (``before``) and at the commit (``after``), and the fix as edits."""

    name: str  # the project's, in session ids
    commit: history.Commit
    opts: MineOptions
    work: Path
    out: Path  # the suite folder
    tests: list[str]  # the commit's test scripts; Jest's listing says which are test files
    before: dict[str, str]
    after: dict[str, str]
    edits: list[fix.Edit]


def write(box: Box, files: dict[str, str]) -> None:
    """``files`` (path: text) into the sandbox: the parent's source or the commit's."""
    for f, text in files.items():
        box.sb.write_file(f, text.encode())


def _jest(box: Box, tests: list[str], timeout: float):
    r, answer = box.jest(tests, timeout)
    if r.tamper:  # what the guard refused, for the row
        return None, answer, reasons.refused(r.tamper)
    if r.evidence != "nonce" or r.reason in ("timeout", "memory_limit"):
        return None, answer, r.reason or "no_result"
    return r, answer, None


def runs(cand: Candidate, box: Box) -> dict[str, Any] | tuple[list[Failure], dict[str, Any]]:
    """The commit's test files run at the parent and at the commit: a verdict row when the commit
    is not kept; otherwise the tests it makes pass, as Failures at the parent, and its verdict
    (``fail_to_pass``'s, with ``asserts``: each test's fewest passing assertions at the commit)."""
    opts, before, after = cand.opts, cand.before, cand.after
    listed = set(box.sb.test_files)  # the workspace's test files, as its Jest config finds them
    tests = [t for t in cand.tests if t in listed]
    if not tests:
        return {"verdict": "no_test_file", "scripts": cand.tests[:5]}
    # A fix of the tests' own helper (runner/test-support.js) edits what every episode protects.
    helpers = sorted(set(cand.after) & set(box.sb.support_files))
    if helpers:
        return {"verdict": "fix_in_test_helper", "files": helpers}
    timeout = opts.timeout_s
    parent = _parent_runs(box, tests, opts)
    if isinstance(parent, dict):
        return parent
    parent_runs, first, hung = parent
    commit_runs: list[dict] = []
    asserts: dict[str, int] = {}  # each test's fewest passing assertions at the commit
    slowest = 0.0
    write(box, after)
    for _ in range(opts.runs):
        r, answer, bad = _jest(box, tests, timeout)
        if bad or not answer.get("report"):
            why = bad or r.reason
            return {"verdict": "does_not_run_at_commit", "why": why, "tail": _tail(answer)}
        if not any(t.status == "passed" for t in r.tests):  # e.g. an API the suite's Jest lacks
            return {"verdict": "nothing_passes_at_commit", "why": reasons.run_error(r, answer)}
        commit_runs.append({t.id: t.status for t in r.tests})
        slowest = max(slowest, r.duration_s)
        for t in r.tests:
            if t.status == "passed":
                asserts[t.id] = min(asserts.get(t.id, t.asserts), t.asserts)
    write(box, before)
    limit = opts.test_timeout_s or opts.timeout_s
    if hung and slowest > limit / 4:
        why = (
            f"the parent's run passed the {limit:g} s limit and the commit's took "
            f"{slowest:.1f} s: a slow run, not a hang that the fix mends"
        )
        return {"verdict": "does_not_run", "why": why}
    verdict = fail_to_pass(parent_runs, commit_runs)
    if "verdict" in verdict:
        return verdict
    f2p = set(verdict["fail_to_pass"])
    if first is None:  # every run at the parent hung: each test's failure is that it did not end
        failures = _hung(cand.work, f2p, limit)
    else:
        r, answer = first
        failures = failure_records(r, answer, f2p, answer.get("workspace") or "/scratch/ws")
    return failures, {**verdict, "asserts": asserts}


def _parent_runs(box: Box, tests: list[str], opts: MineOptions):
    """The commit's tests at the parent, R times: (each run's statuses, the first run that
    reported, how many runs passed ``test_timeout_s``), or a verdict. A run past the limit has no
    test passing (each counts as failed); a test that passes in another run is then flaky."""
    runs: list[dict] = []
    first, hung = None, 0
    for _ in range(opts.runs):
        try:
            r, answer, bad = _jest(box, tests, opts.test_timeout_s or opts.timeout_s)
        except SandboxDead:  # the run took the sandbox with it (still at the parent's files)
            box.restart()
            r, answer, bad = None, {}, "timeout"
        if bad == "timeout":
            hung += 1
            runs.append({})
            continue
        if bad:
            return {"verdict": "does_not_run", "why": bad, "tail": _tail(answer)}
        runs.append({t.id: t.status for t in r.tests})
        if first is None:
            first = (r, answer)
            if r.num_failed == 0 and not r.failed_tests:
                return {"verdict": "no_failing_test"}
    return runs, first, hung


def _hung(work: Path, tids: set[str], limit: float) -> list:
    """Failures of tests whose run at the parent did not end within ``limit`` seconds, each placed
    at the first line of its file that names it (1:1 where none does)."""
    out = []
    for tid in sorted(tids):
        file, name = tid.split("::", 1)
        lines = (work / file).read_text(encoding="utf-8", errors="replace").splitlines()
        title = name.split(" ")[-1] if name else name
        line = next((i for i, x in enumerate(lines, 1) if name in x), None) or next(
            (i for i, x in enumerate(lines, 1) if title and title in x), 1
        )
        out.append(Failure(file, name, f"did not finish within {limit:g} s", line, 1))
    return out


def _tail(answer: dict) -> str:
    return jest.plain(str(answer.get("output_tail") or answer.get("error") or ""))[-400:]


def fail_to_pass(parent_runs: list[dict], commit_runs: list[dict]) -> dict[str, Any]:
    """FAIL_TO_PASS (failing or absent at the parent in every run, passing at the commit in every
    run), PASS_TO_PASS, the flaky tests left out, and the files a verification runs; or a verdict
    ({"verdict": reason}) when nothing sound is left."""
    ids = set().union(*parent_runs, *commit_runs)
    passes = {t: sum(run.get(t) == "passed" for run in commit_runs) for t in ids}
    failed_at_commit = {t for t in ids if any(run.get(t) == "failed" for run in commit_runs)}
    before = {t: sum(run.get(t) == "passed" for run in parent_runs) for t in ids}
    n, m = len(commit_runs), len(parent_runs)
    f2p = sorted(t for t in ids if passes[t] == n and before[t] == 0)
    p2p = sorted(t for t in ids if passes[t] == n and before[t] == m)
    flaky = sorted(t for t in ids if 0 < passes[t] < n or 0 < before[t] < m)
    if not f2p:
        return {"verdict": "flaky" if flaky else "no_failing_test", "flaky": flaky}
    files = sorted({file_of(t) for t in f2p})
    # A verification runs whole files, every test of which must pass at the commit.
    unsound = sorted(t for t in failed_at_commit if file_of(t) in files)
    if unsound:
        flaky_there = [t for t in unsound if passes[t] > 0]
        return {"verdict": "flaky" if flaky_there else "fails_at_commit", "tests": unsound[:5]}
    return {"fail_to_pass": f2p, "pass_to_pass": p2p, "flaky": flaky, "verify_files": files}
