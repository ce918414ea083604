"""Mine a suite from a project's history: each candidate commit (history.py) checked in a sandbox,
kept when a test it brings fails at its parent and passes at the commit in all R runs.

The workspace of a session is the parent's files with the commit's test files (what the developer
had when the new test went red); its reference is the commit's source change as ``file_edit``
steps (fix.py). One set of dependencies serves the whole suite, as one environment serves each
version of a project in SWE-bench-style harnesses: ``--deps`` names a folder with the manifest
and lockfile to install (default: the range's newest commit's own), and a commit whose tests do
not run with it is left out with its reason. Every verdict is appended to ``OUT/commits.jsonl``
as it is reached (a mine that stops resumes there); ``OUT/summary.json`` counts them by reason.
"""

from __future__ import annotations

import dataclasses
import json
import random
import shutil
import statistics
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from harness.authoring import MEMORY_MB, coverage, eligibility
from harness.authoring.build import held_out
from harness.authoring.build.build import Box, append_row, failure_records, file_of, read_rows
from harness.authoring.build.compose import Failure
from harness.authoring.jest_config import JestAdditions, add_to_jest_config, additions
from harness.authoring.mine import fix, history, reasons
from harness.authoring.record import replay_steps
from harness.base.errors import ConfigIsCode, InputError, SandboxDead
from harness.base.progress import bar as progress_bar
from harness.grading import jest
from harness.grading.verify import take_baseline, verify
from harness.runs.results import RunFolder, write_json_atomic, write_text_atomic
from harness.sandbox import Limits, provider
from harness.sandbox.deps import (
    INSTALL_FILES,
    has_lockfile,
    lockfile_digest,
    node_modules,
    resolve_lockfile,
)
from harness.session.workspace import MAX_WORKSPACE_BYTES, workspace_paths


@dataclasses.dataclass(frozen=True)
class MineOptions:
    rev_range: str = "HEAD"  # ``A..B`` or a revision (its whole history)
    max_sessions: int | None = None
    runs: int = 3
    seed: int = 0
    src: tuple[str, ...] = ("src", "lib", "index.js", "index.ts")
    env: tuple[tuple[str, str], ...] = ()
    deps: str | None = None  # a folder holding package.json and a lockfile
    max_files: int = 3  # source files a fix may change
    max_hunks: int = 6
    max_lines: int = 60  # source lines added + removed
    max_steps: int = 10  # the reference: a test run, a read per file, an edit per hunk
    since: str | None = None  # ISO dates, on the author date
    until: str | None = None
    skip: tuple[str, ...] = ()  # commit ids (or prefixes) never tried
    timeout_s: float = 180.0
    # A run of the commit's test files at the parent past this limit counts as a failure of each of
    # its tests, where the commit runs them in a quarter of it: the hang is the bug that a fix of a
    # catastrophic regular expression mends (_parent_runs). None: timeout_s, so that a run slow
    # but not hung is never cut shorter than the sandbox's deadline would cut it.
    test_timeout_s: float | None = None
    sandbox: str = "docker"
    held_out: str = "split"
    resolve_lockfile: bool = False
    name: str | None = None  # the project's name in session ids (default: the folder's or bundle's)
    module_map: tuple[tuple[str, str], ...] = ()  # moduleNameMapper entries (jest_config.py)
    entry: str | None = None  # package.json's main in the workspace (jest_config.py)


def mine(
    source: str | Path,
    out: str | Path,
    opts: MineOptions = MineOptions(),
    *,
    progress: bool = True,
    log: Callable[[str], None] = lambda m: None,
) -> dict[str, Any]:
    if opts.runs < 1:
        raise InputError(f"must be at least 1, got {opts.runs}", where="--runs")
    # NODE_PATH=./ jest becomes modulePaths; --entry and --map-module reach the source
    env, adds = additions(opts.env, opts.module_map, opts.entry)
    opts = dataclasses.replace(opts, env=env)
    repo = history.open_repo(source)
    name = opts.name or Path(source).name.removesuffix(".bundle").removesuffix(".git")
    found = history.commits(repo, opts.rev_range)
    if not found:
        raise InputError(f"no commit in {opts.rev_range}", where="--range")
    out = Path(out).resolve()
    t0 = time.monotonic()
    with RunFolder(out):
        done = read_rows(out / "commits.jsonl", "commit")
        deps, digest = _deps(repo, found[-1].sha, out / "deps", opts, log, resumed=len(done))
        limits = Limits(
            memory_mb=MEMORY_MB, timeout_s=opts.timeout_s, env=opts.env, node_modules=str(deps)
        )
        write_text_atomic(out / "suite.yaml", _suite_yaml(name, opts, 3))
        provider(opts.sandbox).prune()  # what a killed mine left, as a run's prepare does
        todo = [c for c in found if c.sha not in done]
        kept = sum(1 for r in done.values() if r["verdict"] == "kept")
        bar = progress_bar(len(found), "commits", enabled=progress, unit="commit", own_eta=True)
        bar.update(len(found) - len(todo))
        # Only candidates reach a sandbox (seconds each, the others none): the ETA is their median
        # time by the candidates left, where tqdm's rate would follow the last slow ones.
        tried = {c.sha for c in found if _skip_reason(c, opts) is None}
        times = [done[s].get("seconds", 0.0) for s in tried if s in done]
        left = sum(1 for c in todo if c.sha in tried)
        for c in todo:
            if opts.max_sessions is not None and kept >= opts.max_sessions:
                break
            t_c = time.monotonic()
            row = examine(repo, name, c, opts, limits, out, adds)
            row["seconds"] = round(time.monotonic() - t_c, 2)
            append_row(out / "commits.jsonl", row)
            done[c.sha] = row
            kept += row["verdict"] == "kept"
            if c.sha in tried:
                times.append(row["seconds"])
                left -= 1
            bar.set_postfix_str(f"ETA {eta(times, left)}", refresh=False)
            bar.update(1)
        bar.close()
    sessions = [r["session"] for r in done.values() if r["verdict"] == "kept"]
    longest = max((len(s["execution_trace"]) for s in sessions), default=3)
    write_text_atomic(out / "suite.yaml", _suite_yaml(name, opts, longest))
    write_text_atomic(
        out / "sessions.jsonl", "".join(json.dumps(s, ensure_ascii=False) + "\n" for s in sessions)
    )
    summary = _summary(name, list(done.values()), len(found), time.monotonic() - t0)
    summary["deps_digest"] = digest  # the dependencies every verdict was reached with
    write_json_atomic(out / "summary.json", summary)
    return summary


def eta(times: list[float], left: int) -> str:
    """The time the ``left`` candidates take at the median of the candidates' ``times`` so far."""
    if not left:
        return "0:00"
    if not times:
        return "?"
    m, s = divmod(round(statistics.median(times) * left), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def _deps(
    repo: Path, newest: str, folder: Path, opts: MineOptions, log, *, resumed: int
) -> tuple[Path, str]:
    """The suite's dependency folder (manifest + lockfile), installed once by digest; and the digest.

    The dependencies are part of every verdict (a commit whose tests do not run with them is left
    out), so a mine resumes only with the dependencies its ``resumed`` verdicts were reached with:
    other ones are an InputError before anything is installed or written."""
    staged = folder.parent / ".deps-new"
    shutil.rmtree(staged, ignore_errors=True)
    staged.mkdir(parents=True)
    try:
        _stage_deps(repo, newest, staged, opts)
        same_manifest = (folder / "package.json").is_file() and (
            folder / "package.json"
        ).read_bytes() == (staged / "package.json").read_bytes()
        if not has_lockfile(staged) and same_manifest and has_lockfile(folder):
            # the lockfile an earlier run resolved for this very manifest: a resume keeps it
            shutil.rmtree(staged)
            shutil.copytree(folder, staged)
        if not has_lockfile(staged):
            if not opts.resolve_lockfile:
                raise InputError(
                    "no lockfile for the suite's dependencies (--deps names a folder with "
                    "package-lock.json, yarn.lock or pnpm-lock.yaml; --resolve-lockfile "
                    "resolves one from package.json now)",
                    where="--deps",
                )
            resolve_lockfile(staged, log=log)
        digest = lockfile_digest(staged)
        if resumed and has_lockfile(folder) and lockfile_digest(folder) != digest:
            raise InputError(
                f"{folder.parent} holds the verdicts of {resumed} commits reached with other "
                f"dependencies (digest {lockfile_digest(folder)}; these are {digest}): mine into "
                "another --out, or give the dependencies of that mine to resume it",
                where="--deps",
            )
        installed = node_modules(staged, log=log)
        shutil.rmtree(folder, ignore_errors=True)
        staged.rename(folder)
    finally:
        shutil.rmtree(staged, ignore_errors=True)
    return installed, digest


def _stage_deps(repo: Path, newest: str, folder: Path, opts: MineOptions) -> None:
    """The manifest and lockfile of ``--deps`` (or of the range's newest commit) into ``folder``."""
    if opts.deps:
        given = Path(opts.deps)
        if not (given / "package.json").is_file():
            raise InputError("no package.json in the folder", where="--deps")
        for f in INSTALL_FILES:
            if (given / f).is_file():
                shutil.copyfile(given / f, folder / f)
        return
    for f in INSTALL_FILES:
        try:
            (folder / f).write_bytes(history.read(repo, newest, f))
        except InputError:
            continue
    if not (folder / "package.json").is_file():
        raise InputError(f"{newest[:10]} has no package.json", where="--range")


def _skip_reason(c: history.Commit, opts: MineOptions) -> str | None:
    """Why a commit is not tried, before anything runs (None: try it)."""
    if any(c.sha.startswith(s) for s in opts.skip):
        return "skipped"
    day = c.date[:10]
    if (opts.since and day < opts.since) or (opts.until and day > opts.until):
        return "outside_dates"
    sources = c.sources(opts.src)
    if not sources or not c.tests():
        return "not_a_candidate"  # a fix needs source and tests changed together
    if not c.test_scripts():
        return "no_test_file"
    if any(s.status != "M" for s in sources):
        return "adds_or_removes_source"
    if len(sources) > opts.max_files:
        return "too_large"
    return None


def examine(
    repo: Path,
    name: str,
    c: history.Commit,
    opts: MineOptions,
    limits: Limits,
    out: Path,
    adds: JestAdditions = JestAdditions(),
) -> dict[str, Any]:
    """One commit's verdict row (with its session when kept)."""
    row: dict[str, Any] = {
        "commit": c.sha,
        "parent": c.parent,
        "date": c.date,
        "subject": c.subject,
    }
    reason = _skip_reason(c, opts)
    if reason:
        return {**row, "verdict": reason}
    sources = [s.path for s in c.sources(opts.src)]
    try:
        before = {f: history.read(repo, c.parent, f).decode("utf-8") for f in sources}
        after = {f: history.read(repo, c.sha, f).decode("utf-8") for f in sources}
    except UnicodeDecodeError:
        return {**row, "verdict": "not_text"}
    edits = [e for f in sources for e in fix.edits(f, before[f], after[f])]
    lines = sum(fix.changed_lines(before[f], after[f]) for f in sources)
    steps = 1 + len(sources) + len(edits)
    if len(edits) > opts.max_hunks or lines > opts.max_lines or steps > opts.max_steps:
        return {**row, "verdict": "too_large", "hunks": len(edits)}
    work = out / ".work" / c.sha[:12]
    shutil.rmtree(work, ignore_errors=True)
    try:
        absent = history.export_tree(repo, c.parent, work)
        if absent:  # a snapshot without its largest files: what it lacks is said in the row
            row["absent_files"] = absent[:10]
        for t in c.tests():
            if t.status == "D":
                (work / t.path).unlink(missing_ok=True)
            else:
                (work / t.path).parent.mkdir(parents=True, exist_ok=True)
                (work / t.path).write_bytes(history.read(repo, c.sha, t.path))
        try:  # one commit's config does not stop the mine: a history changes
            add_to_jest_config(work, adds)
        except ConfigIsCode as e:
            return {**row, "verdict": "config_not_json", "why": str(e)}
        except InputError as e:  # e.g. a package.json that is not JSON at this commit
            return {**row, "verdict": "config_unreadable", "why": str(e)}
        if sum(p.stat().st_size for _, p in workspace_paths(work)) > MAX_WORKSPACE_BYTES:
            return {**row, "verdict": "workspace_too_big"}
        cand = Candidate(name, c, opts, work, out, c.test_scripts(), before, after, edits)
        return {**row, **_check(cand, limits)}
    finally:
        shutil.rmtree(work, ignore_errors=True)


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


def _check(cand: Candidate, limits: Limits) -> dict[str, Any]:
    box = Box(cand.opts.sandbox, cand.work, limits)
    try:
        return _runs(cand, box)
    except SandboxDead:
        return {"verdict": "timeout"}
    finally:
        box.close()


def _jest(box: Box, tests: list[str], timeout: float):
    r, answer = box.jest(tests, timeout)
    if r.tamper:  # what the guard refused, for the row
        return None, answer, reasons.refused(r.tamper)
    if r.evidence != "nonce" or r.reason in ("timeout", "memory_limit"):
        return None, answer, r.reason or "no_result"
    return r, answer, None


def _runs(cand: Candidate, box: Box) -> dict[str, Any]:
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
    _write(box, after)
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
    _write(box, before)
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
    return _session(cand, box, failures, {**verdict, "asserts": asserts})


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


def _session(cand: Candidate, box: Box, failures: list, verdict: dict[str, Any]) -> dict:
    name, c, opts, work, out = cand.name, cand.commit, cand.opts, cand.work, cand.out
    before, edits = cand.before, cand.edits
    sid = f"{name}-{c.sha[:10]}"
    rng = random.Random(f"{opts.seed}:{c.sha}")
    cut, held = None, {}
    if opts.held_out == "split":
        texts = {f: (work / f).read_text(encoding="utf-8") for f in verdict["verify_files"]}
        sc, measured = _screen(cand, box, failures, verdict)
        got = held_out.split(failures, texts, rng, sc.why, sc.groups)
        n = 0 if isinstance(got, str) else len(got.held)
        unknown = 0 if measured["coverage"] == "measured" else measured["candidates"]
        held = {"cases": eligibility.counts(len(sc.considered), sc.why, n, unknown), **measured}
        if isinstance(got, str):
            held["why_none"] = got
        else:
            cut = got
            held["tests"] = got.held
            failures = [got.first, *failures[1:]]
    f = failures[0]
    sources = list(before)
    summary = fix.summary_line(c.subject, c.body)
    # What the developer has: every file of the workspace, its name and its text.
    seen = "\n".join(
        f"{rel}\n{p.read_text(encoding='utf-8', errors='replace')}"
        for rel, p in workspace_paths(work)
    )
    introduced = fix.new_identifiers("\n".join(e.new for e in edits), seen)
    text = fix.instruction(summary, f, sources, introduced, rng)
    if fix.leaks(text, introduced):
        return {"verdict": "instruction_leaks", "words": fix.leaks(text, introduced)}
    trace = [{"step": 1, "tool_called": "jest_run", "tool_args": {"test_file": f.test_file}}]
    trace += [{"tool_called": "file_read", "tool_args": {"file": s}} for s in sources]
    trace += [
        {"tool_called": "file_edit", "tool_args": {"file": e.file, "old": e.old, "new": e.new}}
        for e in edits
    ]
    trace = [{**st, "step": i, "execution_result": {}} for i, st in enumerate(trace, 1)]
    for tf, t in (cut.stripped if cut else {}).items():
        box.sb.write_file(tf, t.encode())
    # The grader's own verdict on the reference, as every run's preflight gives it: the whole suite
    # at the start and after the fix, where the check above ran the commit's test files alone (a
    # test elsewhere that the fix breaks; visible tests that lean on the held-out ones).
    base = take_baseline(box.sb, list(box.sb.test_files), timeout=opts.timeout_s)
    steps = replay_steps(box.sb, trace, where=sid)
    if any(s["execution_result"].get("status") != "ok" for s in steps[1:]):
        return {"verdict": "reference_fails"}
    graded = verify(box.sb, base, verdict["verify_files"], timeout=opts.timeout_s)
    if not graded.green:
        return {"verdict": "not_green_when_graded", **reasons.graded_failures(graded)}
    sess: dict[str, Any] = {
        "session_id": sid,
        "intent": fix.intent(summary, f.message),
        "user_instruction": text,
        "ide_context": {
            "open_files": [f.test_file, *sources],
            "cursor_position": {"file": f.test_file, "line": f.line, "column": f.column},
            "git_status": "clean",
            "viewport": {"scroll_top_line": max(0, f.line - 12)},
        },
        "execution_trace": steps,
        "final_output": f"Changed {' and '.join(sources)} as commit {c.sha[:10]} did; "
        f"{', '.join(verdict['verify_files'])} pass.",
        "verify": {"test_files": verdict["verify_files"]},
        "cursor_target": fix.cursor_target(edits[0], before[edits[0].file]),
        "provenance": {
            "repo": name,
            "commit": c.sha,
            "parent": c.parent,
            "date": c.date,
            "author_sha256": c.author,
            "subject": c.subject,
        },  # fmt: skip
        "fail_to_pass": verdict["fail_to_pass"],
        "pass_to_pass": len(verdict["pass_to_pass"]),
    }
    ws = out / "workspaces" / sid
    shutil.rmtree(ws, ignore_errors=True)
    shutil.copytree(work, ws)
    for tf, t in (cut.stripped if cut else {}).items():
        (ws / tf).write_text(t, encoding="utf-8")
    if cut is not None:
        sess["held_out_tests"] = f"held_out/{sid}"
        for tf, t in cut.whole.items():
            (out / sess["held_out_tests"] / tf).parent.mkdir(parents=True, exist_ok=True)
            write_text_atomic(out / sess["held_out_tests"] / tf, t)
    return {"verdict": "kept", "session": sess, "flaky": verdict["flaky"], "held_out": held}


def _screen(cand: Candidate, box: Box, failures: list, verdict: dict[str, Any]):
    """held_out.screen on the session's workspace (every test file Jest lists there, and the words
    of its other files: the parent's source with the commit's test files), with the coverage of
    the changed lines measured for the candidates the other rules leave (harness/authoring/
    coverage.py, the fix in place for it); and what the row says of that measurement."""
    work = cand.work
    tests = {f: (work / f).read_text(encoding="utf-8", errors="replace") for f in box.sb.test_files}
    known, found = held_out.known_words(work, tests), held_out.all_cases(tests)
    sc = held_out.screen(failures, tests, known, verdict["asserts"], found)
    left = [t for t in sc.considered if t not in sc.why]
    if not left:
        return sc, {"coverage": "no_candidate", "candidates": 0}
    changed = coverage.changed_lines(cand.before, cand.after)
    _write(box, cand.after)
    cov, measured = coverage.measured(
        box, changed, verdict["verify_files"], left, cand.opts.timeout_s
    )
    # back to the parent's source (a sandbox started again after dying already holds it)
    _write(box, cand.before)
    if cov is not None:
        sc = held_out.screen(failures, tests, known, verdict["asserts"], found, cov)
    return sc, measured


def _write(box: Box, files: dict[str, str]) -> None:
    for f, text in files.items():
        box.sb.write_file(f, text.encode())


def _suite_yaml(name: str, opts: MineOptions, longest: int) -> str:
    k = max(3, longest)
    meta = {
        "name": f"{name}-mined",
        "description": f"Sessions mined by `etai suite mine` from {name}'s history: each a real "
        f"commit whose tests fail at its parent and pass at the commit in all {opts.runs} runs.",
        # k covers the longest reference, so that the oracle's PA@k says whether every one holds.
        "defaults": {"k": k, "max_steps": max(10, k)},
        "sandbox": {
            "env": dict(opts.env),
            "node_modules": "deps",
            "timeout_s": opts.timeout_s,
            "memory_mb": MEMORY_MB,
        },  # fmt: skip
    }
    return yaml.safe_dump(meta, sort_keys=False)


def _summary(name: str, rows: list[dict], scanned: int, seconds: float) -> dict[str, Any]:
    candidates = [r for r in rows if r["verdict"] not in ("not_a_candidate", "outside_dates")]
    kept = [r for r in candidates if r["verdict"] == "kept"]
    return {
        "project": name,
        "commits_scanned": scanned,
        "candidates": len(candidates),
        "kept": len(kept),
        "skipped": dict(sorted(Counter(r["verdict"] for r in candidates if r not in kept).items())),
        "per_intent": dict(Counter(r["session"]["intent"] for r in kept)),
        "held_out": sum(1 for r in kept if (r.get("held_out") or {}).get("tests")),
        # The killing cases a split could hold out, how many were ineligible for each reason
        # (eligibility.py), how many were held out; and why the sessions holding none hold none.
        "held_out_cases": eligibility.total(
            r["held_out"]["cases"] for r in kept if "cases" in (r.get("held_out") or {})
        ),
        # Sessions whose candidates' coverage could not be measured (the rule `uncovered` was not
        # applied there; their candidates are counted as coverage_unknown above).
        "held_out_coverage_not_measured": sum(
            1 for r in kept if (r.get("held_out") or {}).get("coverage") == "not_measured"
        ),
        "held_out_none": dict(
            Counter(
                r["held_out"]["why_none"] for r in kept if "why_none" in (r.get("held_out") or {})
            )
        ),
        "flaky_tests_left_out": sum(len(r.get("flaky") or []) for r in candidates),
        "mine_seconds": round(seconds, 1),
        "seconds_spent": round(sum(r.get("seconds", 0) for r in rows), 1),
    }
