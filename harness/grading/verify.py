"""Green: the verification tests pass on their own merits, tests are unchanged, nothing regressed.

``take_baseline`` describes the pristine workspace (before the agent acts); ``verify`` runs one
graded Jest run and applies every check below.
A graded run runs the verification files and the test files Jest's dependency graph relates to
the workspace files that differ from the pristine ones (``regression="related"``, the default;
``_scope`` says when it runs every test file instead, and docs/grading.md why that is sound);
``regression="whole"`` always runs every test file. Each check that fails is named in the verdict,
so a result row shows which one fired:

- ``protected_files``: test files, fixtures, snapshots, mocks, setup files and Jest/Babel config are
  byte-for-byte as they were, and no file appeared in or vanished from a test folder;
- ``tamper``: the guard in the Jest hosts refused nothing and found nothing changed (then the
  verdict is ``tampered``, never merely failed);
- ``run``: the run finished with the runner's evidence (no timeout, memory or output limit);
- ``verification``: no test of the verification files fails, and at least one passes;
- ``gold``: every verification test the reference passed (``Gold``) passes again, as many times as
  it exists, each with at least as many passing assertions as the reference made (see ``Gold``);
- ``regression``: no test that passed on the pristine workspace, in a test file the run ran, fails
  now;
- ``reported``: every test file the run was to run reported, the verification files among them;
- ``held_out``: (after a green verdict of a session with held-out tests, ``held_out=True``) the
  held-out test files, written into the workspace for one run of them alone, pass as the
  reference's did.
  A workspace green on its visible tests and red here special-cased them (harness/runs/loop.py).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from harness.base.errors import InputError
from harness.grading import jest
from harness.sandbox import Sandbox, Status

CONFIG_FILES = (
    "package.json",
    "jest.config.js",
    "jest.config.cjs",
    "jest.config.mjs",
    "jest.config.json",
    "jest.config.ts",
    "babel.config.js",
    ".babelrc",
)
# Mirrors isProtected in recipe/runner/guard.js: the guard refuses workspace code that reaches these,
# and verify refuses a workspace where they changed.
TEST_DIRS = frozenset({"__tests__", "__mocks__", "__snapshots__", "__fixtures__"})
TOP_TEST_DIRS = frozenset({"test", "tests", "spec", "__test__"})
_CONFIG_RE = re.compile(
    r"^(package\.json|jest\.config\.[cm]?[jt]s|jest\.config\.json|babel\.config\.[cm]?[jt]s|"
    r"babel\.config\.json|\.babelrc(\.[cm]?[jt]s|\.json)?|\.babelignore|tsconfig(\.[\w-]+)?\.json)$"
)
_TEST_NAME_RE = re.compile(r"\.(test|spec)\.[cm]?[jt]sx?$")

# A run stopped by a limit of the sandbox: it answers for nothing it did not finish.
CUT_SHORT = (Status.TIMEOUT, Status.MEMORY_LIMIT, Status.OUTPUT_LIMIT)

REGRESSION_MODES = ("related", "whole")
# Files whose readers Jest's dependency graph knows: modules of Jest's default moduleFileExtensions
# that code loads with require/import. JSON is left out (often read with fs, which the graph does
# not see), as is every other file (fixtures, templates, data): a change to one makes a run whole.
_MODULE_EXTS = frozenset({".js", ".mjs", ".cjs", ".jsx", ".ts", ".tsx"})


def is_protected(rel: str) -> bool:
    """Whether a workspace path belongs to the tests (by place or name; test files and config-named
    files the sandbox listed are added by ``protected_paths``)."""
    parts = PurePosixPath(rel).parts
    if not parts or "node_modules" in parts:
        return False
    if len(parts) > 1 and parts[0] in TOP_TEST_DIRS:
        return True
    if any(p in TEST_DIRS for p in parts):
        return True
    return bool(_CONFIG_RE.match(parts[-1]) or _TEST_NAME_RE.search(parts[-1]))


def protected_paths(files: Iterable[str], listed: Iterable[str] = ()) -> list[str]:
    """The protected set: workspace files that are protected, the files Jest and its config name
    (``listed``), and the usual config names even when absent (so that adding one is seen)."""
    return sorted({f for f in files if is_protected(f)} | set(listed) | set(CONFIG_FILES))


@dataclass(frozen=True)
class Gold:
    """What the reference solution's verification run showed, test by test (from the preflight).

    ``tests`` maps a test id (``file::full name``) to (how many tests carry that id, the fewest
    passing assertions any of them made over the reference's verification runs). The rule: each id
    must be there exactly that many times, every one passed, each with at least that many passing
    assertions. A test whose count legitimately varies is covered by taking the minimum over the
    preflight's two runs; a test that makes no ``expect`` call has 0 and relies on the other checks.
    """

    tests: Mapping[str, tuple[int, int]]

    @classmethod
    def from_outcomes(cls, runs: list[list[jest.TestOutcome]], verify_files: Iterable[str]) -> Gold:
        """From the reference's verification runs: the ids that passed in every run, each with its
        fewest count over the runs and its fewest passing assertions."""
        wanted = set(verify_files)
        per_run = []
        for outcomes in runs:
            seen: dict[str, list[int]] = {}
            for t in outcomes:
                if t.file in wanted and t.status == "passed":
                    seen.setdefault(t.id, []).append(t.asserts)
            per_run.append(seen)
        common = set.intersection(*(set(r) for r in per_run)) if per_run else set()
        return cls(
            {
                tid: (min(len(r[tid]) for r in per_run), min(min(r[tid]) for r in per_run))
                for tid in sorted(common)
            }
        )

    def to_json(self) -> dict[str, list[int]]:
        return {k: list(v) for k, v in sorted(self.tests.items())}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any] | None) -> Gold | None:
        return None if obj is None else cls({k: (int(v[0]), int(v[1])) for k, v in obj.items()})


@dataclass(frozen=True)
class Baseline:
    protected: dict[str, str | None]  # path -> sha256 at the start (None: absent)
    passing: frozenset[str]  # "file::test name" passing at the start
    test_files: tuple[str, ...]
    protected_listing: frozenset[str] = frozenset()  # protected-by-place files present at the start
    gold: Gold | None = None
    # The session's held-out test files (path -> content) and what the reference's runs with them
    # showed: used only by a verification with ``held_out=True``.
    held_out: Mapping[str, bytes] = field(default_factory=dict, compare=False, repr=False)
    held_out_gold: Gold | None = None
    # sha256 of every other workspace file at the start (what a scoped run compares against; None:
    # not taken, every run is whole) and the regression mode (REGRESSION_MODES).
    sources: Mapping[str, str | None] | None = field(default=None, compare=False, repr=False)
    regression: str = "related"
    # The Jest run this baseline made of the pristine workspace, if it made one: a verdict on that
    # same workspace needs no second run (the preflight's "not green at the start"; #15).
    run: jest.JestResult | None = field(default=None, compare=False, repr=False)
    # That run was scoped (``FromBase``): it answers for the files it ran, not for every test file.
    run_scoped: bool = False


@dataclass(frozen=True)
class FromBase:
    """A base + patch workspace's baseline from its suite's base (harness/runs/base_runs.py): the
    tests passing in a whole run of the base, the files the patch changes, and the verification
    files. The pristine workspace then needs a run of the tests related to the change alone: a test
    file Jest's graph does not relate to a changed module runs the same code as in the base."""

    passing: frozenset[str]
    changed: tuple[str, ...]
    include: tuple[str, ...]


@dataclass(frozen=True)
class Verdict:
    green: bool
    reason: str | None
    status: Status  # of the verification Jest run
    failed_tests: list[dict[str, Any]] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)  # the checks that failed, in the order above
    tamper: list[str] = field(default_factory=list)
    tests: list[jest.TestOutcome] = field(default_factory=list)  # the guard's record of this run
    scoped: int | None = None  # test files a scoped graded run ran (None: every test file)
    jest_s: float = 0.0  # Jest's own seconds in the run this verdict read (jest.JestResult.jest_s)
    # A run of the verification files alone (``only_verification``): it answers for those files,
    # never for a final workspace (harness/runs/loop.py ``_grade_step``).
    only_verification: bool = False
    # The test files a scoped run ran, by name (``scoped`` counts them; None: every test file).
    ran: tuple[str, ...] | None = None

    @property
    def tampered(self) -> bool:
        return bool(self.tamper)

    def to_dict(self) -> dict[str, Any]:
        return {
            "green": self.green,
            "reason": self.reason,
            "status": self.status.value,
            "failed_tests": self.failed_tests,
            "checks": self.checks,
            "tamper": self.tamper,
            **({} if self.scoped is None else {"scoped_files": self.scoped}),
        }


def _hashes(sb: Sandbox, paths: list[str]) -> dict[str, str | None]:
    return sb.request("hash", {"paths": paths})["hashes"]


def _files(sb: Sandbox) -> tuple[list[str], bool]:
    """Every workspace file outside node_modules and .git (which no tool writes), and whether
    that is all of them (the listing has a bound)."""
    answer = sb.request("list", {"path": ".", "max": 1_000_000})
    return list(answer["files"]), not answer.get("truncated")


def workspace_digest(sb: Sandbox) -> str | None:
    """Every workspace file (outside node_modules and .git, which no tool writes) by path and
    content, as one digest; None when the listing is bounded and so not all of them."""
    files, complete = _files(sb)
    if not complete:
        return None
    hashes = _hashes(sb, sorted(files))
    return hashlib.sha256(json.dumps(sorted(hashes.items())).encode()).hexdigest()


def _listing(files: Iterable[str]) -> frozenset[str]:
    return frozenset(f for f in files if is_protected(f))


def _full_run(
    sb: Sandbox,
    timeout: float | None,
    only: list[str] | None = None,
    scope: Mapping[str, list[str]] | None = None,
) -> jest.JestResult:
    """A graded run: in Jest hosts that have run no workspace code before and end after it
    (``fresh``, runner.js), so nothing an earlier run of the episode left behind can answer it.
    ``only``: these test files; ``scope``: the files those hosts list (``_scope``); else every one."""
    t = timeout or sb.limits.timeout_s
    req: dict[str, Any] = {
        "timeout_ms": int(t * 1000), "output_cap": sb.limits.output_cap, "fresh": True
    }  # fmt: skip
    if only:
        req["test_files"] = only
    elif scope is not None:
        req["scope"] = dict(scope)
    answer = sb.request("jest", req, timeout=t)
    if host_killed(answer):
        answer = sb.request("jest", req, timeout=t)
    return jest.from_runner(answer, guarded=sb.limits.guard)


def host_killed(answer: Mapping[str, Any]) -> bool:
    """A Jest host of the run died of SIGKILL before it answered, and not for memory (the runner
    names that ``memory_limit``). Something outside the run does that (the machine, an operator,
    an injected fault), and so can workspace code, so the graded run is made once more, in new
    fresh hosts: a second run is a whole graded run, as good as a first, and code that kills its
    host every time still fails on the second."""
    return (
        answer.get("evidence") != "nonce"
        and answer.get("reason") == "no_result_record"
        and answer.get("signal") == "SIGKILL"
    )


def take_baseline(
    sb: Sandbox,
    test_files: list[str],
    *,
    passing: Iterable[str] | None = None,
    gold: Gold | None = None,
    timeout: float | None = None,
    held_out: Mapping[str, bytes] | None = None,
    held_out_gold: Gold | None = None,
    regression: str = "related",
    from_base: FromBase | None = None,
) -> Baseline:
    """The pristine workspace. ``passing`` (tests passing at the start) comes from the preflight when
    it has measured them; otherwise one Jest run measures it here: with ``from_base``, a run of the
    tests related to the patch, the base's record answering for the others (``FromBase``); else a
    run of every test file. ``regression``: REGRESSION_MODES."""
    check_regression(regression)
    run, scoped = None, False
    if passing is None and from_base is not None and _modules(from_base.changed):
        scope = {
            "changed": list(from_base.changed),
            "keep": sorted(test_files),
            "include": sorted(from_base.include or test_files),
        }
        run = _full_run(sb, timeout, scope=scope)
        if run.evidence == "nonce" and not run.tamper:
            ran = set(run.files_run)
            others = {t for t in from_base.passing if t.split("::", 1)[0] not in ran}
            passing, scoped = others | _passed(run), True
        else:  # no answer to read: the whole run below says what is wrong, as it did without
            run = None
    if passing is None:
        run = _full_run(sb, timeout)
        passing = _passed(run)
    files, complete = _files(sb)
    listing = _listing(files)
    listed = set(test_files) | set(sb.config_files) | set(sb.support_files)
    protected = protected_paths(listing, listed)
    others = sorted(set(files) - set(protected)) if complete else []
    hashes = _hashes(sb, protected + others)
    return Baseline(
        {p: hashes[p] for p in protected}, frozenset(passing), tuple(test_files), listing, gold,
        dict(held_out or {}), held_out_gold, {p: hashes[p] for p in others} if complete else None,
        regression, run, scoped,
    )  # fmt: skip


def _modules(files: Iterable[str]) -> bool:
    """Every one of ``files`` is a module Jest's graph follows (``_MODULE_EXTS``)."""
    return all(PurePosixPath(f).suffix in _MODULE_EXTS for f in files)


def check_regression(mode: str) -> None:
    if mode not in REGRESSION_MODES:
        raise InputError(
            f"regression must be one of {', '.join(REGRESSION_MODES)} (got {mode!r})",
            where="--regression",
        )


def _scope(
    base: Baseline, wanted: set[str], files: list[str], hashes: Mapping[str, str | None]
) -> dict[str, list[str]] | None:
    """What a scoped graded run lists (runner.js ``jestRun``), or None for a run of every test file:
    in ``whole`` mode, without a baseline of the other files, when a file was removed (what required
    it is not in Jest's graph of the workspace now), or when a changed or added file is not a module
    the graph follows (``_MODULE_EXTS``). ``changed``: the module files that differ from the start;
    ``keep``: the files that can show a regression (a test passing at the start) and the
    verification files, which ``include`` always runs."""
    if base.regression == "whole" or base.sources is None:
        return None
    if set(base.sources) - set(files):
        return None
    changed = sorted(
        f
        for f in files
        if f not in base.protected and not is_protected(f) and hashes.get(f) != base.sources.get(f)
    )
    if not _modules(changed):
        return None
    keep = {t.split("::", 1)[0] for t in base.passing} | wanted
    return {"changed": changed, "keep": sorted(keep), "include": sorted(wanted)}


def _passed(run: jest.JestResult) -> set[str]:
    if run.tests:
        return {t.id for t in run.tests if t.status == "passed"}
    return set(run.passed_tests)


def verify(
    sb: Sandbox,
    base: Baseline,
    verify_files: list[str] | None = None,
    *,
    timeout: float | None = None,
    run: jest.JestResult | None = None,
    held_out: bool = False,
    only_verification: bool = False,
) -> Verdict:
    """Is the workspace green now (module docstring)? ``run``: a Jest run already made of the
    workspace as it is now (the baseline's, when nothing has been done since), else one is made.
    ``held_out``: a run of the session's held-out test files alone (``base.held_out``), written
    in after the protected files are checked and put back after the run. It answers for a
    workspace whose visible verdict, on this very state, was green: the visible tests and the
    regression were checked by that whole run, and this one adds the held-out tests, the guard's
    findings and the held-out gold record. ``only_verification``: a run of the verification files
    alone, read as a scoped run of those files (the preflight's repeat of a green verdict whose
    regression check the whole run before it made: harness/runs/loop.py ``preflight``)."""
    fired: list[tuple[str, str]] = []
    given_scoped = run is not None and run is base.run and base.run_scoped
    extra = set(base.held_out)
    wanted = set(verify_files or base.test_files)
    files, complete = _files(sb)
    # Whether this verdict may be a scoped run's (then the other files' hashes are needed too).
    may_scope = (
        run is None
        and not (held_out and extra)
        and not only_verification
        and base.sources is not None
        and complete
    )
    others = [f for f in files if f not in base.protected] if may_scope else []
    hashes = _hashes(sb, list(base.protected) + others)
    changed = sorted(p for p in base.protected if hashes[p] != base.protected[p])
    listing = _listing(files)
    added, removed = (  # a held-out file left by an earlier final verification is the runner's
        sorted(listing - base.protected_listing - extra),
        sorted(base.protected_listing - listing),
    )
    if changed or added or removed:
        fired.append(
            (
                "protected_files",
                "protected files changed: "
                + ", ".join(
                    changed
                    + [f"{p} (added)" for p in added if p not in changed]
                    + [f"{p} (removed)" for p in removed if p not in changed]
                ),
            )
        )
    scope, alone = None, False
    if held_out and extra:
        run = _held_out_run(sb, base, timeout)
    else:
        held_out = False
        if only_verification and run is None:
            scope = {"include": sorted(wanted)}  # what the run answers for: these files alone
            alone = True
            run = _full_run(sb, timeout, only=sorted(wanted))
        else:
            scope = _scope(base, wanted, files, hashes) if may_scope else None
            run = run or _full_run(sb, timeout, scope=scope)
    failed = [{"name": f.name, "file": f.file, "message": f.message} for f in run.failed_tests]
    if run.tamper:
        fired.append(("tamper", f"tampered: {run.tamper[0]}"))
    if run.status in CUT_SHORT or run.evidence != "nonce":
        fired.append(("run", _run_problem(run, sb.limits)))
    passed_now = _passed(run)
    bad = [f for f in run.failed_tests if f.file in wanted]
    # (A held-out run leaves the visible tests' verdict to the whole run on the same workspace.)
    if bad and not held_out:
        fired.append(("verification", f"{len(bad)} verification test(s) fail"))
    elif not held_out and not any(t.split("::", 1)[0] in wanted for t in passed_now):
        fired.append(("verification", "no verification test passed"))
    if held_out:
        bad = [f for f in run.failed_tests if f.file in extra]
        if bad:
            fired.append(("held_out", f"{len(bad)} held-out test(s) fail"))
        elif not any(t.split("::", 1)[0] in extra for t in passed_now):
            fired.append(("held_out", "no held-out test passed"))
    gold = base.held_out_gold if held_out else base.gold
    if gold is not None and run.evidence == "nonce":
        problem = _gold_problem(gold, run.tests)
        if problem:
            fired.append(("held_out" if held_out else "gold", problem))
    # A scoped run answers for the files it ran (``_scope``): each reported, the verification
    # files among them (below), and a test of any other file was not run to fail. (A run without
    # evidence ran nothing to answer with: every test that passed at the start counts.)
    scoped = scope is not None or given_scoped
    ran = set(run.files_run) if scoped and run.evidence == "nonce" else None
    could = base.passing if ran is None else {t for t in base.passing if t.split("::")[0] in ran}
    regressed = [] if held_out else sorted(could - passed_now)
    if regressed:
        fired.append(
            ("regression", f"{len(regressed)} test(s) that passed at the start no longer pass")
        )
    if run.reason and "did not report" in run.reason and not held_out:
        fired.append(("reported", run.reason))
    elif ran is not None and wanted - ran:
        fired.append(("reported", f"verification files not run: {', '.join(sorted(wanted - ran))}"))
    return Verdict(
        not fired,
        fired[0][1] if fired else None,
        run.status,
        failed,
        list(dict.fromkeys(c for c, _ in fired)),
        run.tamper,
        run.tests,
        None if ran is None else len(ran),
        run.jest_s,
        alone,
        None if ran is None else tuple(sorted(ran)),
    )


def _run_problem(run: jest.JestResult, limits) -> str:
    """Why a verification run answers for nothing, in words: the limit it hit, or the runner's reason."""
    if run.status is Status.MEMORY_LIMIT:
        why = (
            f"hit the sandbox's memory limit ({limits.memory_mb} MiB; suite.yaml sandbox.memory_mb)"
        )
    elif run.status is Status.TIMEOUT:
        why = f"ran past its deadline ({limits.timeout_s:g} s; suite.yaml sandbox.timeout_s)"
    else:
        why = run.status.value
    detail = run.reason if run.reason and run.reason != run.status.value else ""
    return f"verification run {why}" + (f": {detail}" if detail else "")


def _held_out_run(sb: Sandbox, base: Baseline, timeout: float | None) -> jest.JestResult:
    """One graded run with the held-out files in the workspace. The runner writes them sealed: the
    sandbox user can neither write nor read them, so the code under test cannot take the expected
    values from them while they run (runner.js ``sealed``; docs/grading.md#sealed-held-out-tests).
    A replaced test file gets its shipped content back after the run, so its hash matches again; a
    new one stays, ignored by the listing check, until the container is reset (nothing of the
    agent's runs after the final verification)."""
    originals = {p: sb.read_file(p) for p in base.held_out if base.protected.get(p) is not None}
    try:
        for p, data in sorted(base.held_out.items()):
            payload = {"path": p, "content_b64": base64.b64encode(data).decode(), "sealed": True}
            sb.request("write", payload)
        return _full_run(sb, timeout, only=sorted(base.held_out))
    finally:
        for p, data in originals.items():
            sb.write_file(p, data)


def _gold_problem(gold: Gold, outcomes: list[jest.TestOutcome]) -> str | None:
    """The first way this run falls short of the reference's verification run, or None."""
    now: dict[str, list[jest.TestOutcome]] = {}
    for t in outcomes:
        now.setdefault(t.id, []).append(t)
    for tid, (n, low) in sorted(gold.tests.items()):
        got = now.get(tid, [])
        if len(got) != n:
            return f"{tid}: {len(got)} test(s) with this name ran, the reference had {n}"
        for t in got:
            if t.status != "passed":
                return f"{tid}: {t.status}"
            if t.asserts < low:
                return (
                    f"{tid}: passed with {t.asserts} passing assertion(s), the reference made {low}"
                )
    return None
