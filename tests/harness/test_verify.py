"""verify.py: the gold record of a reference run and its rule, the protected set (which must agree
with the guard's, in recipe/runner/guard.js), every check of verify() and take_baseline on a fake
sandbox with the runner's answers written out (milliseconds each: scripts/mutation runs them per
mutant), and the rules a fake could get wrong once through a real Docker sandbox."""

from __future__ import annotations

import dataclasses
import json
import subprocess

import pytest

from harness.base.errors import InputError
from harness.grading import jest
from harness.grading.jest import TestOutcome
from harness.grading.verify import (
    CONFIG_FILES,
    REGRESSION_MODES,
    Baseline,
    Gold,
    Verdict,
    _gold_problem,
    is_protected,
    protected_paths,
    take_baseline,
    verify,
)
from harness.sandbox import Limits, Status, image

F = "tests/a.test.js"


def t(name: str, status: str = "passed", asserts: int = 2, file: str = F) -> TestOutcome:
    return TestOutcome(file, name, status, asserts)


def test_gold_takes_tests_passing_in_every_run_with_their_fewest_assertions():
    runs = [
        [
            t("x", asserts=3),
            t("y", asserts=2),
            t("y", asserts=5),
            t("flaky"),
            t("other", file="tests/b.test.js"),
        ],
        [t("x", asserts=2), t("y", asserts=4), t("y", asserts=5), t("flaky", "failed")],
    ]
    gold = Gold.from_outcomes(runs, [F])
    assert dict(gold.tests) == {f"{F}::x": (1, 2), f"{F}::y": (2, 2)}
    assert Gold.from_json(gold.to_json()) == gold and Gold.from_json(None) is None
    assert Gold.from_outcomes([], [F]) == Gold({})  # no reference run: nothing to hold an agent to


def test_gold_rule_names_the_first_shortfall():
    gold = Gold({f"{F}::x": (1, 2), f"{F}::y": (2, 1)})
    ok = [t("x", asserts=2), t("y", asserts=1), t("y", asserts=9)]
    assert _gold_problem(gold, ok) is None
    assert (
        _gold_problem(gold, [t("x", asserts=3), t("y", asserts=1), t("y")]) is None
    )  # more is fine
    assert "passed with 0 passing assertion(s), the reference made 2" in _gold_problem(
        gold, [t("x", asserts=0), t("y"), t("y")]
    )
    assert "1 test(s) with this name ran, the reference had 2" in _gold_problem(
        gold, [t("x"), t("y")]
    )
    assert "3 test(s) with this name ran" in _gold_problem(gold, [t("x"), t("y"), t("y"), t("y")])
    assert _gold_problem(gold, [t("x", "pending"), t("y"), t("y")]) == f"{F}::x: pending"
    assert "0 test(s) with this name ran" in _gold_problem(gold, [t("y"), t("y")])
    assert (
        _gold_problem(Gold({f"{F}::z": (1, 0)}), [t("z", asserts=0)]) is None
    )  # no expect at all: allowed


PATHS = [
    "tests/a.test.js",
    "tests/helpers/data.json",
    "test/x.js",
    "spec/y.js",
    "src/__tests__/z.js",
    "src/__mocks__/api.js",
    "src/__snapshots__/a.snap",
    "lib/__fixtures__/f.txt",
    "src/a.test.js",
    "src/a.spec.ts",
    "package.json",
    "jest.config.js",
    "babel.config.cjs",
    ".babelrc",
    "src/.babelrc.json",
    ".babelrc.cts",
    ".babelignore",
    "tsconfig.build.json",
    "src/a.js",
    "src/tests.js",
    "src/test/a.js",
    "node_modules/x/package.json",
    "lib/fixtures/data.json",
    "README.md",
    "src/testing.js",
    "tests",
    "spec",
]  # a file named like a test folder, at the top: not a folder of tests


def test_protected_set_is_the_same_in_the_guard_and_in_verify():
    want = {p: is_protected(p) for p in PATHS}
    assert [p for p, v in want.items() if v] == PATHS[:18]
    script = (
        f"const g = require({json.dumps(str(image.RECIPE / 'runner' / 'guard.js'))});"
        f"console.log(JSON.stringify({json.dumps(PATHS)}.map((p) => g.isProtected('/w/' + p))));"
    )
    out = subprocess.run(
        ["node", "-e", script],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/local/bin:/usr/bin:/bin", "ETAI_WORKSPACE": "/w"},
    ).stdout
    assert dict(zip(PATHS, json.loads(out))) == want


def test_protected_paths_add_the_listed_and_the_usual_config_names():
    got = protected_paths(["src/a.js", "tests/a.test.js"], ["setup/jest.setup.js"])
    assert "tests/a.test.js" in got and "setup/jest.setup.js" in got and "jest.config.js" in got
    assert "src/a.js" not in got


# ------------------------------------------------------------------------------ verify() on canned runner answers
# Why a fake sandbox: verify() only talks to the in-sandbox runner through Sandbox.request, and the
# real Docker path is covered end to end by test_tamper.py, test_hostile.py and the Docker test
# below. Mutation testing runs these tests hundreds of times, so each check of verify() gets a test
# here that runs in milliseconds, with the runner's answers written out by hand.

W = "tests/w.test.js"  # a verification file
OTHER = "tests/o.test.js"  # another test file of the workspace (not verified)
CLEAN = {
    "package.json": "pkg-hash",
    W: "w-hash",
    OTHER: "o-hash",
}  # protected file -> sha256 (None: absent)


def _jest_answer(
    tests: dict[str, list[tuple[str, str]]],
    *,
    evidence: str = "nonce",
    expected=None,
    reason: str | None = None,
    guard_tamper=(),
    asserts: int = 1,
) -> dict:
    """The runner's `jest` answer for ``tests`` ({file: [(name, status)]}), guard record included."""
    if evidence != "nonce":
        return {"evidence": evidence, "reason": reason, "duration_ms": 7}
    results = [
        {
            "file": f,
            "execError": None,
            "tests": [
                {
                    "name": n,
                    "status": s,
                    "failureMessages": [f"Error: {n} broke"] if s == "failed" else [],
                }
                for n, s in ts
            ],
        }
        for f, ts in tests.items()
    ]
    flat = [s for ts in tests.values() for _, s in ts]
    n_failed = flat.count("failed")
    return {
        "evidence": "nonce",
        "workspace": "/w",
        "duration_ms": 7,
        "expected_files": list(tests) if expected is None else expected,
        "report": {
            "success": n_failed == 0,
            "numTotalTestSuites": len(tests),
            "numTotalTests": len(flat),
            "numPassedTests": flat.count("passed"),
            "numFailedTests": n_failed,
            "numPendingTests": 0,
            "testResults": results,
        },
        "guard": {
            "tamper": list(guard_tamper),
            "files": {
                f: {
                    "checked": True,
                    "tamper": [],
                    "tests": [{"name": n, "status": s, "asserts": asserts} for n, s in ts],
                }
                for f, ts in tests.items()
            },
        },
    }


class FakeSandbox:
    """A Sandbox whose runner answers from dicts: ``files`` (path -> hash, every file of the
    workspace) and ``jest`` (the answer of the next full run). Records each request."""

    kind, image = "fake", None

    def __init__(
        self,
        files: dict[str, str],
        jest_answer: dict,
        *,
        test_files=(W, OTHER),
        config_files=(),
        support_files=(),
        limits: Limits | None = None,
    ):
        self.files, self.jest = dict(files), jest_answer
        self.test_files, self.config_files = list(test_files), list(config_files)
        self.support_files = list(support_files)
        self.limits = limits or Limits()
        self.requests: list[tuple[str, dict, float | None]] = []

    def request(self, op: str, payload: dict, *, timeout: float | None = None) -> dict:
        self.requests.append((op, payload, timeout))
        if op == "hash":
            return {"hashes": {p: self.files.get(p) for p in payload["paths"]}}
        if op == "list":
            assert (payload["path"], payload["max"]) == (".", 1_000_000)
            return {"files": sorted(self.files)}
        if op == "jest":
            return self.jest
        raise AssertionError(f"verify asked the runner for {op!r}")

    def ops(self) -> list[str]:
        return [op for op, _, _ in self.requests]


ALL_PASS = {W: [("fixed", "passed"), ("still", "passed")], OTHER: [("old", "passed")]}
PASSING = frozenset(
    {f"{OTHER}::old", f"{W}::still"}
)  # at the start: W::fixed failed (the bug), the rest passed


def _base(**kw) -> Baseline:
    """The baseline the preflight would hand over (no Jest run of its own)."""
    sb = FakeSandbox(CLEAN, _jest_answer(ALL_PASS))
    base = take_baseline(sb, [W, OTHER], passing=kw.pop("passing", PASSING), **kw)
    assert sb.ops() == ["list", "hash"]  # a baseline with a known passing set runs no Jest
    return base


def _verdict(tests=ALL_PASS, *, files=CLEAN, base=None, verify_files=(W,), **answer) -> Verdict:
    sb = FakeSandbox(files, _jest_answer(tests, **answer))
    return verify(sb, base or _base(), list(verify_files) if verify_files is not None else None)


def test_verify_green_when_every_check_holds():
    v = _verdict()
    assert (v.green, v.reason, v.status, v.checks, v.failed_tests, v.tamper) == (
        True,
        None,
        Status.PASSED,
        [],
        [],
        [],
    )
    assert [t.id for t in v.tests] == [f"{W}::fixed", f"{W}::still", f"{OTHER}::old"]
    assert v.to_dict() == {
        "green": True,
        "reason": None,
        "status": "passed",
        "failed_tests": [],
        "checks": [],
        "tamper": [],
        "scoped_files": 2,  # nothing but protected files here: the fake's run named both
    }


def test_verify_regression_a_test_that_passed_at_the_start_fails_now():
    """The verification tests pass, but a test of another file that passed on the pristine workspace
    fails now: not green (the `regression` check, and only it)."""
    v = _verdict({W: [("fixed", "passed"), ("still", "passed")], OTHER: [("old", "failed")]})
    assert (v.green, v.checks) == (False, ["regression"])
    assert v.reason == "1 test(s) that passed at the start no longer pass"
    assert v.status == Status.FAILED
    assert v.failed_tests == [{"name": "old", "file": OTHER, "message": "Error: old broke"}]


def test_verify_regression_counts_a_test_that_vanished():
    """A test that passed at the start and no longer runs at all (renamed, removed) also regressed."""
    v = _verdict({W: [("fixed", "passed"), ("still", "passed")], OTHER: [("renamed", "passed")]})
    assert (v.green, v.checks, v.reason) == (
        False,
        ["regression"],
        "1 test(s) that passed at the start no longer pass",
    )


def test_verify_failing_verification_test_with_a_cached_baseline():
    """One verification test fails and another passes; the baseline came from the preflight cache
    (the failing test was failing at the start, so it is no regression) and there is no gold: only
    the `verification` check can refuse it."""
    v = _verdict({W: [("fixed", "failed"), ("still", "passed")], OTHER: [("old", "passed")]})
    assert (v.green, v.checks, v.reason) == (False, ["verification"], "1 verification test(s) fail")
    assert v.failed_tests == [{"name": "fixed", "file": W, "message": "Error: fixed broke"}]


def test_verify_failing_test_outside_the_verification_files_is_not_a_verification_failure():
    base = _base(passing=frozenset({f"{W}::still"}))  # OTHER::old was already failing at the start
    v = _verdict(
        {W: [("fixed", "passed"), ("still", "passed")], OTHER: [("old", "failed")]}, base=base
    )
    assert (v.green, v.checks) == (True, [])


def test_verify_files_default_to_the_baselines_test_files():
    """Without verify_files every test file listed at the start is a verification file."""
    base = _base(passing=frozenset())
    v = _verdict(
        {W: [("fixed", "passed")], OTHER: [("old", "failed")]}, base=base, verify_files=None
    )
    assert (v.checks, v.reason) == (["verification"], "1 verification test(s) fail")
    v = _verdict(
        {W: [("fixed", "passed")], OTHER: [("old", "failed")]}, base=base, verify_files=(W,)
    )
    assert v.green


def test_verify_a_verification_file_whose_afterall_hook_throws_is_not_green():
    """Every test of the file passed, then its afterAll hook threw (say, the fixed module's close()):
    Jest fails the file, and so does verification. This was green."""
    answer = _jest_answer(ALL_PASS)
    answer["report"]["success"] = False
    answer["report"]["testResults"][0] |= {
        "execError": "[object Object]",
        "failureMessage": "  \u25cf Test suite failed to run\n\n    close failed",
    }
    v = verify(FakeSandbox(CLEAN, answer), _base(), [W])
    assert (v.green, v.checks, v.reason) == (False, ["verification"], "1 verification test(s) fail")
    assert v.failed_tests == [
        {
            "name": "(test file failed to run)",
            "file": W,
            "message": "close failed",
        }
    ]


def test_verify_needs_a_passing_verification_test():
    base = _base(passing=frozenset({f"{OTHER}::old"}))
    v = _verdict({W: [("fixed", "pending")], OTHER: [("old", "passed")]}, base=base)
    assert (v.green, v.checks, v.reason) == (False, ["verification"], "no verification test passed")
    # a test passing in another file does not count for the verification file
    v = _verdict({W: [], OTHER: [("old", "passed")]}, base=base, expected=[W, OTHER])
    assert "verification" in v.checks and v.reason == "no verification test passed"


def test_verify_test_names_may_hold_the_id_separator():
    """A test id is ``file::full name``; a name may itself hold "::" (``describe("Cart::add")``):
    the file is what comes before the first one."""
    tests = {W: [("Cart::add works", "passed")], OTHER: [("old", "passed")]}
    v = _verdict(tests, base=_base(passing=frozenset({f"{OTHER}::old"})))
    assert (v.green, v.checks) == (True, [])


def test_verify_protected_file_changed_added_or_removed():
    changed = dict(CLEAN, **{W: "edited"})
    v = _verdict(files=changed)
    assert (v.green, v.checks, v.reason) == (
        False,
        ["protected_files"],
        f"protected files changed: {W}",
    )
    added = dict(CLEAN, **{"tests/extra.test.js": "new", "src/a.js": "src"})
    v = _verdict(files=added)
    assert (v.checks, v.reason) == (
        ["protected_files"],
        "protected files changed: tests/extra.test.js (added)",
    )
    removed = {p: h for p, h in CLEAN.items() if p != OTHER}
    v = _verdict(files=removed)
    # a removed file is both changed (its hash is gone) and gone from the listing: named once
    assert (v.checks, v.reason) == (["protected_files"], f"protected files changed: {OTHER}")
    # a config file absent at the start and added now is named once, as changed
    v = _verdict(files=dict(CLEAN, **{"jest.config.js": "new"}))
    assert v.reason == "protected files changed: jest.config.js"


def test_verify_protected_listing_added_and_removed_are_named():
    """Files protected by place that appear or vanish are named even where hashes do not show it."""
    base = Baseline(
        protected={"package.json": "pkg-hash"},
        passing=PASSING,
        test_files=(W, OTHER),
        protected_listing=frozenset({"tests/gone.json", "package.json"}),
    )
    v = _verdict(files={"package.json": "pkg-hash", W: "w", OTHER: "o"}, base=base)
    assert v.reason == (
        f"protected files changed: {OTHER} (added), {W} (added), tests/gone.json (removed)"
    )


def test_verify_tampered_run():
    v = _verdict(guard_tamper=["expect.extend() from workspace code"])
    assert (v.green, v.checks, v.status) == (False, ["tamper"], Status.TAMPERED)
    assert v.reason == "tampered: expect.extend() from workspace code"
    assert v.tamper == ["expect.extend() from workspace code"] and v.tampered
    assert not _verdict().tampered


@pytest.mark.parametrize(
    "reason,status,words",
    [
        ("timeout", Status.TIMEOUT, "ran past its deadline (30 s; suite.yaml sandbox.timeout_s)"),
        ("memory_limit", Status.MEMORY_LIMIT,
         "hit the sandbox's memory limit (1024 MiB; suite.yaml sandbox.memory_mb)"),
        ("output_limit", Status.OUTPUT_LIMIT, "output_limit"),
        ("no_result_record", Status.FAILED, "failed: no_result_record"),
    ],
)  # fmt: skip
def test_verify_run_without_evidence(reason, status, words):
    v = _verdict(evidence="none", reason=reason)
    assert (v.green, v.status, v.reason) == (False, status, f"verification run {words}")
    # nothing ran, so nothing passed: verification and regression fire too, after `run`
    assert v.checks == ["run", "verification", "regression"]


def test_verify_run_check_alone_catches_a_limit_status(monkeypatch):
    """A run with a limit status is not green even when it carries the runner's evidence and every
    test in it passed (from_runner gives such runs no evidence today; verify does not rely on it)."""
    for status in (Status.TIMEOUT, Status.MEMORY_LIMIT, Status.OUTPUT_LIMIT):
        run = dataclasses.replace(
            FROM_RUNNER(_jest_answer(ALL_PASS)), status=status, reason="cut short"
        )
        v = _verify_run(monkeypatch, run)
        assert (v.green, v.checks) == (False, ["run"])
        assert v.reason.startswith("verification run ") and v.reason.endswith(": cut short")
    assert _verify_run(monkeypatch, FROM_RUNNER(_jest_answer(ALL_PASS))).green


FROM_RUNNER = jest.from_runner  # the real one, for building runs while a test has replaced it


def _verify_run(monkeypatch, run: jest.JestResult, base: Baseline | None = None) -> Verdict:
    """verify() on a JestResult built here, for combinations the runner's answers cannot express."""
    monkeypatch.setattr(jest, "from_runner", lambda answer, guarded=True: run)
    return verify(FakeSandbox(CLEAN, {}), base or _base(), [W])


def test_verify_gold_holds_the_run_to_the_reference():
    gold = Gold({f"{W}::fixed": (1, 2), f"{W}::still": (1, 1)})
    v = _verdict(base=_base(gold=gold), asserts=1)
    assert (v.green, v.checks, v.reason) == (
        False,
        ["gold"],
        (f"{W}::fixed: passed with 1 passing assertion(s), the reference made 2"),
    )
    assert _verdict(base=_base(gold=gold), asserts=2).green
    # without the runner's evidence the gold rule is not applied (the run check already refuses it)
    v = _verdict(base=_base(gold=gold), evidence="none", reason="timeout")
    assert "gold" not in v.checks


def test_verify_reported_every_listed_file():
    v = _verdict(expected=[W, OTHER, "tests/gone.test.js"])
    assert (v.green, v.checks) == (False, ["reported"])
    assert v.reason == "test files did not report: tests/gone.test.js"


def test_verify_names_every_failing_check_in_order_and_the_first_as_reason(monkeypatch):
    base = _base(gold=Gold({f"{W}::fixed": (1, 1)}))
    v = _verdict(
        {W: [("fixed", "failed")], OTHER: [("old", "failed")]},
        files=dict(CLEAN, **{OTHER: "x"}),
        base=base,
        expected=[W, OTHER, "tests/gone.test.js"],
    )
    assert v.checks == ["protected_files", "verification", "gold", "regression", "reported"]
    assert v.reason == f"protected files changed: {OTHER}"
    # every check at once (a run no real runner answer gives: evidence, a limit, tampering, a missing file)
    run = FROM_RUNNER(_jest_answer({W: [("fixed", "failed")], OTHER: [("old", "failed")]}))
    run = dataclasses.replace(
        run, status=Status.TIMEOUT, tamper=["t"], reason="test files did not report: x"
    )
    v = _verify_run(monkeypatch, run, base)
    assert v.checks == ["tamper", "run", "verification", "gold", "regression", "reported"]
    assert v.reason == "tampered: t"


def test_verify_full_run_asks_for_the_sandboxs_limits_or_the_given_timeout():
    limits = Limits(timeout_s=12.5, output_cap=4096)
    sb = FakeSandbox(CLEAN, _jest_answer(ALL_PASS), limits=limits)
    verify(sb, _base(), [W])
    [(_, payload, timeout)] = [r for r in sb.requests if r[0] == "jest"]
    # A graded run, in fresh Jest hosts (runner.js `fresh`), scoped (nothing changed: no related)
    scope = {"changed": [], "keep": [OTHER, W], "include": [W]}
    want = {"timeout_ms": 12500, "output_cap": 4096, "fresh": True, "scope": scope}
    assert (payload, timeout) == (want, 12.5)
    sb = FakeSandbox(CLEAN, _jest_answer(ALL_PASS), limits=limits)
    verify(sb, _base(regression="whole"), [W], timeout=3)
    [(_, payload, timeout)] = [r for r in sb.requests if r[0] == "jest"]
    assert (payload, timeout) == ({"timeout_ms": 3000, "output_cap": 4096, "fresh": True}, 3)


def test_verify_unguarded_sandbox_reads_the_report():
    """With the guard off (benchmarks) there is no per-test record: passes come from the report."""
    sb = FakeSandbox(CLEAN, _jest_answer(ALL_PASS) | {"guard": None}, limits=Limits(guard=False))
    v = verify(sb, _base(), [W])
    assert (v.green, v.tests) == (True, [])
    sb = FakeSandbox(
        CLEAN,
        _jest_answer({W: [("fixed", "passed"), ("still", "passed")], OTHER: [("old", "failed")]})
        | {"guard": None},
        limits=Limits(guard=False),
    )
    assert verify(sb, _base(), [W]).checks == ["regression"]


def test_take_baseline_measures_what_the_preflight_did_not():
    files = dict(
        CLEAN,
        **{
            "src/a.js": "a",
            "setup/jest.setup.js": "s",
            "tests/data.json": "d",
            "src/check.js": "c",
        },
    )
    sb = FakeSandbox(
        files,
        _jest_answer({W: [("fixed", "failed"), ("still", "passed")], OTHER: [("old", "passed")]}),
        config_files=["setup/jest.setup.js"],
        support_files=["src/check.js"],
        limits=Limits(timeout_s=4, output_cap=99),
    )
    base = take_baseline(sb, [W, OTHER])
    assert sb.ops() == ["jest", "list", "hash"]
    assert sb.requests[0][1:] == ({"timeout_ms": 4000, "output_cap": 99, "fresh": True}, 4)
    assert base.passing == PASSING and base.test_files == (W, OTHER) and base.gold is None
    assert base.protected_listing == {"package.json", W, OTHER, "tests/data.json"}
    assert base.protected == {
        "package.json": "pkg-hash",
        W: "w-hash",
        OTHER: "o-hash",
        "tests/data.json": "d",
        "setup/jest.setup.js": "s",
        "src/check.js": "c",  # a helper only the tests load that asserts (runner/test-support.js)
        **{c: None for c in CONFIG_FILES if c != "package.json"},
    }
    assert "src/a.js" not in base.protected
    sb = FakeSandbox(files, _jest_answer(ALL_PASS), limits=Limits(timeout_s=4))
    take_baseline(sb, [W, OTHER], timeout=2.5)
    want = {"timeout_ms": 2500, "output_cap": Limits().output_cap, "fresh": True}
    assert sb.requests[0] == ("jest", want, 2.5)
    base = take_baseline(FakeSandbox(files, {}), [W], passing=[f"{W}::x"], gold=Gold({}), timeout=1)
    assert (base.passing, base.test_files, base.gold) == ({f"{W}::x"}, (W,), Gold({}))


# ------------------------------------------------------------------------------ scoped graded runs
SOURCES = {"src/a.js": "a", "src/b.js": "b", "README.md": "r", "src/data.json": "d"}


def _scoped(now: dict[str, str], *, regression="related", tests=ALL_PASS, expected=None):
    """verify() after the workspace's other files went from SOURCES to ``now``: (the graded run's
    request, the verdict)."""
    sb = FakeSandbox({**CLEAN, **SOURCES}, {})
    base = take_baseline(sb, [W, OTHER], passing=PASSING, regression=regression)
    assert base.sources == SOURCES and set(base.protected) >= set(CLEAN)
    sb = FakeSandbox({**CLEAN, **now}, _jest_answer(tests, expected=expected))
    v = verify(sb, base, [W])
    [(_, payload, _)] = [r for r in sb.requests if r[0] == "jest"]
    return payload, v


def test_a_graded_run_lists_the_tests_related_to_the_changed_modules():
    """Changed and added module files are asked about; the run keeps the files with a test passing
    at the start and the verification files, and always runs the verification files."""
    payload, v = _scoped({**SOURCES, "src/a.js": "a2", "src/new.ts": "n"})
    assert payload["scope"] == {
        "changed": ["src/a.js", "src/new.ts"],
        "keep": [OTHER, W],
        "include": [W],
    }
    assert "test_files" not in payload and (v.green, v.scoped) == (True, 2)
    assert v.to_dict()["scoped_files"] == 2


@pytest.mark.parametrize(
    "now",
    [
        {k: v for k, v in SOURCES.items() if k != "src/b.js"},  # removed: who required it?
        {**SOURCES, "src/data.json": "d2"},  # JSON may be read with fs
        {**SOURCES, "README.md": "r2", "src/a.js": "a2"},  # any non-module file
        {**SOURCES, "src/tpl.html": "t"},  # added, not a module
    ],
)
def test_a_graded_run_is_whole_when_a_change_is_not_a_module_or_a_file_went(now):
    payload, v = _scoped(now)
    assert "scope" not in payload and v.scoped is None and "scoped_files" not in v.to_dict()


def test_whole_mode_runs_every_test_file():
    payload, v = _scoped({**SOURCES, "src/a.js": "a2"}, regression="whole")
    assert "scope" not in payload and (v.green, v.scoped) == (True, None)


def test_a_scoped_run_answers_for_the_files_it_ran():
    """A test passing at the start, in a file the run did not run, is no regression; one in a
    file it ran is. The verification files must be among those run (else `reported`)."""
    only_w = {W: [("fixed", "passed"), ("still", "passed")]}
    _, v = _scoped({**SOURCES, "src/a.js": "a2"}, tests=only_w)
    assert (v.green, v.scoped) == (True, 1)
    _, v = _scoped({**SOURCES, "src/a.js": "a2"}, tests={**only_w, OTHER: [("gone", "passed")]})
    assert (v.green, v.checks) == (False, ["regression"])
    _, v = _scoped({**SOURCES, "src/a.js": "a2"}, tests={OTHER: [("old", "passed")]})
    assert (v.checks, v.reason) == (["verification", "reported"], "no verification test passed")
    # the same run in whole mode holds every test that passed at the start
    _, v = _scoped({**SOURCES, "src/a.js": "a2"}, regression="whole", tests=only_w)
    assert (v.green, v.checks) == (False, ["regression"])


def test_a_regression_mode_not_known_is_refused_before_anything_runs():
    sb = FakeSandbox(CLEAN, {})
    with pytest.raises(InputError, match="regression must be one of related, whole"):
        take_baseline(sb, [W], passing=[], regression="some")
    assert sb.requests == []
    # `etai run --regression` offers exactly these (written out there: see harness/cli/run.py)
    import argparse

    from harness.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    [choices] = [a.choices for a in sub.choices["run"]._actions if a.dest == "regression"]
    assert tuple(choices) == REGRESSION_MODES


# ------------------------------------------------------------------------------ the same rules in a real sandbox
@pytest.mark.docker
@pytest.mark.slow
def test_verify_in_docker_regression_and_failing_verification(project, image):
    """The two rules the fakes above pin down, once through a real sandbox and real Jest.

    ``project``: tests/sum.test.js passes at the start, tests/str.test.js (the verification file)
    fails. Each edit below makes the str test's outcome one thing and sum's another.
    """
    from harness import sandbox, tools

    sb = sandbox.start(
        "docker", project, image=image, limits=Limits(memory_mb=512, timeout_s=20, cpus=1)
    )
    try:
        base = take_baseline(
            sb, sb.test_files
        )  # measured here, as when the preflight cache is empty
        assert base.passing == {
            "tests/sum.test.js::adds small numbers",
            "tests/sum.test.js::adds negatives",
        }
        fixed_str = (
            "function shout(s) {\n  return s.toUpperCase() + '!';\n}\nmodule.exports = { shout };\n"
        )
        broken_sum = "function sum(a, b) {\n  return a - b;\n}\nmodule.exports = { sum };\n"
        # the verification test passes, a test that passed at the start fails now
        tools.call(sb, "file_write", {"file": "src/str.js", "content": fixed_str})
        tools.call(sb, "file_write", {"file": "src/sum.js", "content": broken_sum})
        v = verify(sb, base, ["tests/str.test.js"])
        assert (v.green, v.checks, v.reason) == (
            False,
            ["regression"],
            "2 test(s) that passed at the start no longer pass",
        )
        # nothing regressed, the verification test still fails (a baseline as the preflight cache hands it over)
        cached = take_baseline(sb, sb.test_files, passing=base.passing)
        tools.call(
            sb,
            "file_write",
            {"file": "src/sum.js", "content": "module.exports = { sum: (a, b) => a + b };\n"},
        )
        tools.call(
            sb,
            "file_write",
            {"file": "src/str.js", "content": "module.exports = { shout: (s) => s + '!' };\n"},
        )
        v = verify(sb, cached, ["tests/str.test.js"])
        assert (v.green, v.checks, v.reason) == (
            False,
            ["verification"],
            "1 verification test(s) fail",
        )
        tools.call(sb, "file_write", {"file": "src/str.js", "content": fixed_str})
        assert verify(sb, cached, ["tests/str.test.js"]).green
    finally:
        sb.close()


@pytest.mark.docker
@pytest.mark.slow
def test_verify_in_docker_an_afterall_hook_that_throws(tmp_path, make_project, image):
    """The afterAll case above with the real runner's answer: the test passes, the hook throws."""
    from harness import sandbox, tools

    root = make_project(
        tmp_path / "hook",
        {
            "src/x.js": "module.exports = { add: (a, b) => a - b, close: () => {} };\n",
            "tests/x.test.js": (
                "const x = require('../src/x');\nafterAll(() => x.close());\n"
                "test('adds', () => { expect(x.add(1, 2)).toBe(3); });\n"
            ),
        },
    )
    sb = sandbox.start(
        "docker", root, image=image, limits=Limits(memory_mb=512, timeout_s=20, cpus=1)
    )
    try:
        base = take_baseline(sb, sb.test_files)
        tools.call(
            sb,
            "file_write",
            {
                "file": "src/x.js",
                "content": (
                    "module.exports = { add: (a, b) => a + b, close: () => { throw new Error('close failed'); } };\n"
                ),
            },
        )
        v = verify(sb, base)
        assert (v.green, v.checks, v.reason) == (
            False,
            ["verification"],
            "1 verification test(s) fail",
        )
        assert v.failed_tests[0]["name"] == "(test file failed to run)"
        tools.call(
            sb,
            "file_write",
            {
                "file": "src/x.js",
                "content": ("module.exports = { add: (a, b) => a + b, close: () => {} };\n"),
            },
        )
        assert verify(sb, base).green
    finally:
        sb.close()


class SequenceSandbox(FakeSandbox):
    """A FakeSandbox whose full runs answer in turn from ``answers``."""

    def __init__(self, answers: list[dict]):
        super().__init__(CLEAN, answers[0])
        self.answers = list(answers)

    def request(self, op: str, payload: dict, *, timeout: float | None = None) -> dict:
        if op == "jest":
            self.jest = self.answers.pop(0)
        return super().request(op, payload, timeout=timeout)


KILLED = {"evidence": "none", "reason": "no_result_record", "signal": "SIGKILL", "duration_ms": 9}


@pytest.mark.parametrize(
    "answers, green, runs",
    [
        ([KILLED, _jest_answer(ALL_PASS)], True, 2),  # killed once from outside: graded again
        ([KILLED, KILLED], False, 2),  # killed every time (workspace code can): fails
        ([KILLED | {"signal": None}, _jest_answer(ALL_PASS)], False, 1),  # exited: no second run
        ([KILLED | {"reason": "memory_limit"}, _jest_answer(ALL_PASS)], False, 1),
    ],
)
def test_a_graded_run_whose_host_was_killed_is_made_once_more(answers, green, runs):
    sb = SequenceSandbox(answers)
    v = verify(sb, _base(), [W])
    assert v.green is green and sb.ops().count("jest") == runs
    if not green:
        assert v.checks[0] == "run" and "verification run" in v.reason


@pytest.mark.docker
@pytest.mark.slow
def test_a_host_killed_from_outside_during_the_graded_run_does_not_fail_a_fix(
    tmp_path, make_project, image
):
    """The real runner: every Jest host of the container SIGKILLed from the machine one second
    into a 3-second graded run (what scripts/chaos's jest-host-kill does). Before the second run
    this fix was graded failed: verification run failed: no_result_record."""
    import threading
    import time

    from harness import sandbox

    root = make_project(
        tmp_path / "slow",
        {
            "src/x.js": "module.exports = { add: (a, b) => a + b };\n",
            "tests/x.test.js": (
                "const x = require('../src/x');\n"
                "test('adds, slowly', async () => {\n"
                "  await new Promise((r) => setTimeout(r, 3000));\n"
                "  expect(x.add(1, 2)).toBe(3);\n});\n"
            ),
        },
    )
    sb = sandbox.start(
        "docker", root, image=image, limits=Limits(memory_mb=512, timeout_s=30, cpus=1)
    )
    killed: list[int] = []

    def kill_hosts_in_a_second() -> None:
        time.sleep(1.0)
        top = subprocess.run(
            ["docker", "top", sb.name, "-eo", "pid,args"], capture_output=True, text=True
        ).stdout.splitlines()[1:]
        for pid, _, args in (line.strip().partition(" ") for line in top):
            if "jest-host.js" in args:
                subprocess.run(["kill", "-9", pid], check=False)
                killed.append(int(pid))

    try:
        base = take_baseline(sb, sb.test_files, passing=[])
        killer = threading.Thread(target=kill_hosts_in_a_second)
        killer.start()
        v = verify(sb, base)
        killer.join()
        assert killed, "no Jest host was running to kill"
        assert (v.green, v.reason) == (True, None)
    finally:
        sb.close()
