"""The build's Jest runs in its sandbox: the baseline (the whole suite R times), a mutant's
evaluation (its verdict and, when kept, the tests it broke as Failures), and the reference trace
recorded with the real tools."""

from __future__ import annotations

from collections import Counter
from typing import Any

from harness.authoring.box import Box, file_of, statuses
from harness.authoring.build import compose, held_out, mutants
from harness.authoring.record import replay_steps
from harness.base.errors import InputError, SandboxDead
from harness.grading import jest
from harness.sandbox import Status


def baseline(box: Box, runs: int, timeout: float, progress: bool) -> dict[str, Any]:
    """The whole suite ``runs`` times: per test, how often it passed; flaky and failing tests."""
    counts: dict[str, Counter] = {}
    asserts: dict[str, int] = {}  # each passing test's fewest passing assertions over the runs
    seconds = []
    for _ in range(runs):
        r, answer = box.jest(None, timeout)
        if r.evidence != "nonce" or r.tamper:
            tail = str(answer.get("output_tail") or "").strip()[-1500:]
            raise InputError(
                f"the project's tests do not run in the sandbox: {r.reason}"
                + (f"; Jest's output ends:\n{tail}" if tail else ""),
                where="baseline",
            )
        seconds.append(round(r.duration_s, 2))
        for tid, st in statuses(r).items():
            counts.setdefault(tid, Counter())[st] += 1
        for t in r.tests:
            if t.status == "passed":
                asserts[t.id] = min(asserts.get(t.id, t.asserts), t.asserts)
        for f in r.failed_tests:  # a file that fails to load has no test records
            if f.name == "(test file failed to run)":
                counts.setdefault(f"{f.file}::(test file failed to run)", Counter())["failed"] += 1
    tests = {tid: dict(c) for tid, c in sorted(counts.items())}
    passing = sorted(t for t, c in tests.items() if c.get("passed", 0) == runs)
    # No test passing: every mutant would "survive", and nothing ran as it should.
    if not passing:
        first = next(iter(r.failed_tests), None)
        raise InputError(
            f"no test passes in the sandbox ({len(tests)} tests or files ran, all failing or flaky)"
            + (f"; the first failure, {first.file}: {first.message[:1500]}" if first else ""),
            where="baseline",
        )
    flaky = sorted(t for t, c in tests.items() if 0 < c.get("passed", 0) < runs)
    failing = sorted(t for t, c in tests.items() if c.get("passed", 0) == 0)
    first = next(iter(r.failed_tests), None)  # of the last run: what a failing test said
    return {
        "runs": runs,
        "seconds": seconds,
        "tests": tests,
        "passing": passing,
        "flaky": flaky,
        "failing": failing,
        "asserts": {t: asserts[t] for t in passing if t in asserts},
        "first_failure": f"{first.file}: {first.name}: {first.message[:1500]}" if first else None,
    }


def failure_records(
    r: jest.JestResult, answer: dict, killed: set[str], base_ws: str
) -> list[compose.Failure]:
    """The killed tests as Failures, in file order, each with its first message and assertion site."""
    messages: dict[str, list[str]] = {}
    for tr in (answer.get("report") or {}).get("testResults", []):
        for t in tr["tests"]:
            messages[f"{tr['file']}::{t['name']}"] = t.get("failureMessages") or []
        if tr.get("execError"):
            for tid in killed:
                if tid.startswith(tr["file"] + "::"):
                    messages.setdefault(tid, [tr.get("failureMessage") or tr["execError"]])
    first = {f"{f.file}::{f.name}": f.message for f in r.failed_tests}
    out = []
    for tid in sorted(killed):
        file, name = tid.split("::", 1)
        msg = first.get(tid) or first.get(f"{file}::(test file failed to run)") or ""
        line, col = compose.assertion_site(messages.get(tid, []), file, base_ws)
        out.append(compose.Failure(file, name, msg, line, col))
    return out


def evaluate(
    box: Box,
    m: mutants.Mutant,
    text: str,
    base: dict[str, Any],
    timeout: float,
    *,
    related: bool = True,
) -> tuple[str, dict[str, Any]]:
    """('kept', details) or (reason, details): the mutant run in the sandbox (file restored after).

    With ``related``, only the test files that depend on the mutated file run (Jest's
    findRelatedTests); a test in a file that did not run keeps its baseline status."""
    passing, ever = set(base["passing"]), set(base["passing"]) | set(base["flaky"])
    box.sb.write_file(m.file, m.apply(text).encode())
    restored = False
    try:
        r, answer = box.jest(None, timeout, related=[m.file] if related else None)
        if r.status is Status.TIMEOUT or r.reason in ("timeout", "memory_limit"):
            return "timeout", {}
        if r.tamper:
            return "tampered", {"tamper": r.tamper[:1]}
        if not answer.get("report"):  # Jest failed as a whole, or its host died: no test verdicts
            return "no_report", {"reason": r.reason}
        # Only the baseline's test files count: a related run's wider roots may reach others.
        known = {file_of(t) for t in base["tests"]}
        now = {t: st for t, st in statuses(r).items() if file_of(t) in known}
        if {t for t, st in now.items() if st == "passed"} - ever:
            return "fixes_a_failing_test", {}
        ran = {tr["file"] for tr in answer["report"]["testResults"]} & known
        killed = {t for t in passing if file_of(t) in ran and now.get(t) != "passed"}
        if not killed:
            return "survived", {}
        # A session is verified by whole test files, every test of which must pass: a file that
        # holds a test failing in the baseline can never verify green (dayjs: 8 of 60 sessions
        # whose caught test shared test/plugin/timezone.test.js with a failing DST test).
        unsound = {file_of(t) for t in base["failing"]}
        killed = {t for t in killed if file_of(t) not in unsound}
        if not killed:
            return "caught_beside_a_failing_test", {}
        files = sorted({file_of(t) for t in killed})
        for _ in range(base["runs"] - 1):
            again, _ = box.jest(files, timeout)
            killed = {t for t in killed if statuses(again).get(t) != "passed"}
        if not killed:
            return "flaky_kill", {}
        failures = failure_records(r, answer, killed, answer.get("workspace") or "/scratch/ws")
        return "kept", {"failures": failures}
    except SandboxDead:  # a mutant that hangs past the outer deadline takes the sandbox with it
        box.restart()
        restored = True
        return "timeout", {}
    finally:
        if not restored:
            box.sb.write_file(m.file, text.encode())


def record(
    box: Box,
    sess: dict[str, Any],
    m: mutants.Mutant,
    text: str,
    cut: held_out.Split | None = None,
) -> list[dict]:
    """The reference trace run with the real tools on the mutated file (what `etai suite record`
    returns for it), on test files with the held-out cases cut when ``cut``: the trace records
    only what the agent will see. Its file_edit restores the original, which the caller checks."""

    box.sb.write_file(m.file, m.apply(text).encode())
    for f, t in (cut.stripped if cut else {}).items():
        box.sb.write_file(f, t.encode())
    try:
        return replay_steps(box.sb, sess["execution_trace"])
    finally:
        box.sb.write_file(m.file, text.encode())
        for f, t in (cut.whole if cut else {}).items():
            box.sb.write_file(f, t.encode())
