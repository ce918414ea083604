"""Build a suite from a real Jest project: base snapshot, baseline, mutants, sessions, summary.

Every Jest run happens in one sandbox (the docker one unless asked otherwise) holding the base
snapshot, with the project's node_modules mounted read-only: the baseline runs the whole suite R
times; each mutant is written into the sandbox, the whole suite runs once, the files of the tests
it broke run R-1 more times, and the reference trace is recorded with the real tools (its
``file_edit`` puts the original back). Every verdict is appended to ``OUT/mutants.jsonl`` as it is
reached, so a build that stops resumes where it was; ``OUT/summary.json`` says what was tried.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import shutil
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from harness.authoring import MEMORY_MB, coverage, eligibility
from harness.authoring.build import compose, held_out, mutants
from harness.authoring.jest_config import JestAdditions, add_to_jest_config, additions
from harness.authoring.record import replay_steps
from harness.base.errors import InputError, SandboxDead
from harness.base.progress import bar as progress_bar
from harness.grading import jest
from harness.runs.results import RunFolder, append_line, write_json_atomic, write_text_atomic
from harness.sandbox import Limits, Status, close_quietly, provider
from harness.sandbox.deps import has_lockfile, node_modules, resolve_lockfile
from harness.session.workspace import workspace_paths

DROP_REASONS = (
    "survived",  # no baseline-passing test fails
    "flaky_kill",  # the tests it broke did not fail in every one of the R runs
    "fixes_a_failing_test",  # a test that failed in the baseline passes with the mutant
    "timeout",
    "tampered",
    "capped",  # its file or function already has its share of kept mutants
    "caught_beside_a_failing_test",  # only tests in files that hold a baseline-failing test fail
)


@dataclasses.dataclass(frozen=True)
class BuildOptions:
    max_sessions: int | None = None
    runs: int = 3
    seed: int = 0
    src: tuple[str, ...] = ()  # source folders/files; default: src/, lib/ or index.js
    env: tuple[tuple[str, str], ...] = ()  # the suite's sandbox variables (TZ, LANG, ...)
    module_map: tuple[tuple[str, str], ...] = ()  # moduleNameMapper entries (jest_config.py)
    entry: str | None = None  # package.json's main in the workspace (jest_config.py)
    per_file: int = 6
    per_function: int = 2
    timeout_s: float = 180.0
    sandbox: str = "docker"
    related: bool = True  # a mutant runs only the test files that depend on its file (Jest's graph)
    resolve_lockfile: bool = False  # a project without a lockfile gets one resolved into the base
    held_out: str = "split"  # split: hold out part of each mutant's killing cases (held_out.py)


def _default_src(project: Path) -> tuple[str, ...]:
    found = tuple(d for d in ("src", "lib") if (project / d).is_dir())
    return found or tuple(f for f in ("index.js",) if (project / f).is_file())


def _snapshot(project: Path, base: Path) -> str:
    """Copy what a sandbox receives of ``project`` to ``base`` (once); return its digest."""
    h = hashlib.sha256()
    for rel, p in workspace_paths(project):
        h.update(rel.encode() + b"\0" + hashlib.sha256(p.read_bytes()).digest())
    digest = h.hexdigest()[:16]
    stamp = base.parent / "base.digest"
    if base.is_dir() and stamp.is_file():
        if stamp.read_text().strip() != digest:
            raise InputError(
                f"{base.parent} holds a suite built from another version of the project",
                where="--out",
            )
        return digest
    shutil.rmtree(base, ignore_errors=True)
    for rel, p in workspace_paths(project):
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(p, base / rel)
    stamp.write_text(digest + "\n")
    return digest


class Box:
    """The build's sandbox on the base snapshot, restarted when a mutant kills it (timeouts)."""

    def __init__(self, sandbox: str, base: Path, limits: Limits):
        self._prov, self._base, self.limits = provider(sandbox), base, limits
        self.sb = self._prov.start(base, limits=limits)

    def restart(self) -> None:
        close_quietly(self.sb)
        self.sb = self._prov.start(self._base, limits=self.limits)

    def jest(
        self, files: list[str] | None, timeout: float, *, related: list[str] | None = None
    ) -> tuple[jest.JestResult, dict]:
        req = {"test_files": files, "timeout_ms": int(timeout * 1000), "output_cap": 1 << 20}
        if related:
            req["related"] = related
        answer = self.sb.request("jest", req, timeout=timeout)
        return jest.from_runner(answer, guarded=self.limits.guard), answer

    def close(self) -> None:
        close_quietly(self.sb)


def file_of(tid: str) -> str:
    """The test file of a test id (``file::full name``)."""
    return tid.split("::", 1)[0]


def _statuses(r: jest.JestResult) -> dict[str, str]:
    return {t.id: t.status for t in r.tests}


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
        for tid, st in _statuses(r).items():
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
        now = {t: st for t, st in _statuses(r).items() if file_of(t) in known}
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
            killed = {t for t in killed if _statuses(again).get(t) != "passed"}
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


def build(
    project: str | Path,
    out: str | Path,
    opts: BuildOptions = BuildOptions(),
    *,
    progress: bool = True,
    log: Callable[[str], None] = lambda m: None,
) -> dict[str, Any]:
    project, out = Path(project).resolve(), Path(out).resolve()
    if not (project / "package.json").is_file():
        raise InputError("not a Node project (no package.json)", where=str(project))
    if not (opts.resolve_lockfile or has_lockfile(project)):  # before anything is written
        raise InputError(
            "no package-lock.json: `npm ci` needs a lockfile (--resolve-lockfile resolves one from "
            "package.json now and keeps it in the suite)",
            where=str(project),
        )
    if opts.runs < 1:
        raise InputError(f"must be at least 1, got {opts.runs}", where="--runs")
    env, adds = additions(opts.env, opts.module_map, opts.entry)  # before anything is written
    opts = dataclasses.replace(opts, env=env)
    src = opts.src or _default_src(project)
    files = mutants.source_files(project, list(src))
    if not files:
        raise InputError(f"no source files under {', '.join(src) or '(none)'}", where="--src")
    t0 = time.monotonic()
    # One build per folder at a time, held as `etai run` holds its run folder: two builds on one
    # --out would each append every verdict to mutants.jsonl (70 lines for 35 mutants).
    with RunFolder(out):
        return _build(project, out, opts, files, t0, adds, progress=progress, log=log)


def _build(
    project: Path,
    out: Path,
    opts: BuildOptions,
    files: dict[str, str],
    t0: float,
    adds: JestAdditions,
    *,
    progress: bool,
    log: Callable[[str], None],
) -> dict[str, Any]:

    name = project.name
    _snapshot(project, out / "base")
    add_to_jest_config(out / "base", adds)
    if not has_lockfile(out / "base"):
        resolve_lockfile(out / "base", log=log)
    deps = node_modules(out / "base", log=log)
    limits = Limits(
        memory_mb=MEMORY_MB, timeout_s=opts.timeout_s, env=opts.env, node_modules=str(deps)
    )
    write_text_atomic(out / "suite.yaml", _suite_yaml(name, opts))
    # What a killed build left (its process gone, its container labelled), as a run's prepare does.
    provider(opts.sandbox).prune()
    box = Box(opts.sandbox, out / "base", limits)
    # The tests' own helpers (runner/test-support.js) are protected in every episode: a bug put
    # there would have a reference that edits a protected file.
    files = {f: t for f, t in files.items() if f not in set(box.sb.support_files)}
    try:
        base_file = out / "baseline.json"
        base = json.loads(base_file.read_text()) if base_file.is_file() else None
        # A baseline written before it counted assertions is run again (the vacuous rule needs them).
        if base is None or base.get("runs") != opts.runs or "asserts" not in base:
            log(f"baseline: the whole suite {opts.runs} times")
            base = baseline(box, opts.runs, opts.timeout_s, progress)
            write_json_atomic(base_file, base)
        timeout = min(opts.timeout_s, max(20.0, 4 * max(base["seconds"])))
        found, unparsed = mutants.find(files)
        order = mutants.ordered(found, opts.seed)
        done = read_rows(out / "mutants.jsonl")
        kept_per: Counter = Counter()
        for v in done.values():
            if v["verdict"] == "kept":
                kept_per[v["file"]] += 1
                kept_per[(v["file"], v["function"])] += 1
        n_kept = sum(1 for v in done.values() if v["verdict"] == "kept")
        bar = progress_bar(opts.max_sessions or len(order), "mutants", enabled=progress, unit="it")
        bar.update(min(n_kept, bar.total))
        rng = random.Random(opts.seed)
        ws = _Workspace(out / "base", box.sb.test_files)
        for m in order:
            if opts.max_sessions is not None and n_kept >= opts.max_sessions:
                break
            if m.id in done:
                continue
            row: dict[str, Any] = {
                "id": m.id, "operator": m.operator, "intent": m.intent, "file": m.file,
                "line": m.line, "function": m.fn,
            }  # fmt: skip
            if kept_per[m.file] >= opts.per_file or kept_per[(m.file, m.fn)] >= opts.per_function:
                row["verdict"] = "capped"
            else:
                text = files[m.file]
                t_m = time.monotonic()
                verdict, details = evaluate(box, m, text, base, timeout, related=opts.related)
                row["verdict"] = verdict
                if verdict == "kept":
                    failures, cut = _held_out(
                        box, ws, opts, m, details["failures"], row, base, timeout
                    )
                    sess = compose.session(name, m, text, failures, rng)
                    if cut is not None:
                        sess["workspace"]["patch"] += cut.patch
                        sess["held_out_tests"] = f"held_out/{sess['session_id']}"
                    steps = record(box, sess, m, text, cut)
                    if steps[-1]["execution_result"].get("status") != "ok":
                        row["verdict"] = "reference_fails"
                    else:
                        sess["execution_trace"] = steps
                        if cut is not None:
                            _write_held_out(out / sess["held_out_tests"], cut)
                        row["session"] = sess
                        n_kept += 1
                        kept_per[m.file] += 1
                        kept_per[(m.file, m.fn)] += 1
                        bar.update(1)
                row["seconds"] = round(time.monotonic() - t_m, 2)
                if not opts.max_sessions:
                    bar.update(0 if verdict == "kept" else 1)
            append_row(out / "mutants.jsonl", row)
            done[m.id] = row
        bar.close()
    finally:
        box.close()
    kept = [v["session"] for v in done.values() if v["verdict"] == "kept"]
    write_text_atomic(
        out / "sessions.jsonl", "".join(json.dumps(s, ensure_ascii=False) + "\n" for s in kept)
    )
    summary = _summary(name, done, base, unparsed, len(order), time.monotonic() - t0)
    write_json_atomic(out / "summary.json", summary)
    return summary


class _Workspace:
    """What the eligibility rule reads of the base (the same for every session): its test files,
    their cases (parsed once, on first use) and the words of its other files."""

    def __init__(self, base: Path, test_files: list[str]):
        self.base, self.test_files = base, test_files
        self._found: tuple | None = None

    def read(self) -> tuple[dict[str, str], dict[str, list[dict]], set[str]]:
        if self._found is None:
            tests = {
                f: (self.base / f).read_text(encoding="utf-8", errors="replace")
                for f in self.test_files
            }
            known = held_out.known_words(self.base, tests)
            self._found = (tests, held_out.all_cases(tests), known)
        return self._found


def _held_out(
    box: Box,
    ws: _Workspace,
    opts: BuildOptions,
    m: mutants.Mutant,
    failures: list,
    row: dict[str, Any],
    base: dict[str, Any],
    timeout: float,
) -> tuple[list, held_out.Split | None]:
    """The session's failures (the first one's line as in its cut file) and its split, if any;
    the row records which held-out cases, or why none (held_out.py has the rule)."""
    if opts.held_out != "split":
        return failures, None
    tests, found, known = ws.read()
    texts = {
        f: tests[f] if f in tests else (ws.base / f).read_text(encoding="utf-8")
        for f in sorted({x.test_file for x in failures})
    }
    sc = held_out.screen(failures, tests, known, base.get("asserts"), found)
    cov, measured = _coverage(box, ws, m, sorted(texts), sc, timeout)
    if cov is not None:
        sc = held_out.screen(failures, tests, known, base.get("asserts"), found, cov)
    unknown = measured["candidates"] if measured["coverage"] == "not_measured" else 0
    # Seeded per mutant: the choice does not depend on which mutants were kept before it.
    got = held_out.split(failures, texts, random.Random(f"{opts.seed}:{m.id}"), sc.why, sc.groups)
    if isinstance(got, str):
        row["held_out"] = {
            "why_none": got,
            "cases": eligibility.counts(len(sc.considered), sc.why, 0, unknown),
            **measured,
        }
        return failures, None
    broken = _cut_breaks(box, got, base, timeout)
    n = 0 if broken else len(got.held)
    cases = eligibility.counts(len(sc.considered), sc.why, n, unknown)
    if broken:
        row["held_out"] = {"why_none": "cut_breaks_a_visible_case", "broken": broken[:3]}
        row["held_out"].update(cases=cases, **measured)
        return failures, None
    row["held_out"] = {"tests": got.held, "cases": cases, **measured}
    return [got.first, *failures[1:]], got


def _coverage(
    box: Box, ws: _Workspace, m: mutants.Mutant, files: list[str], sc: held_out.Screen, timeout
) -> tuple[eligibility.Coverage | None, dict[str, Any]]:
    """The Coverage of ``m``'s candidates that the other rules leave, when there is one to apply,
    and what the row says of its measurement. A mutant on one line needs none (eligibility.py's
    module doc: every killing case executes that line); one over several lines is measured on
    the base, the fixed code, as a mined fix is."""
    left = [t for t in sc.considered if t not in sc.why]
    text = (ws.base / m.file).read_text(encoding="utf-8")
    lines = coverage.span_lines(text, m.start, m.end)
    if not left or len(lines) == 1:
        return None, {"coverage": "one_line" if left else "no_candidate", "candidates": len(left)}
    return coverage.measured(box, {m.file: lines}, files, left, timeout)


def _cut_breaks(box: Box, cut: held_out.Split, base: dict[str, Any], timeout: float) -> list[str]:
    """The visible cases that fail on the fixed code once ``cut`` is applied (none for a sound cut).

    A cut case may set up what later cases use (fastest-validator's `it("should compile without
    error", () => { check = v.compile(...) })`, then cases that call `check`): without it those
    cases fail whatever the fix, and the session could never verify green. The source file is the
    base's here (``evaluate`` restored it)."""
    for f, t in cut.stripped.items():
        box.sb.write_file(f, t.encode())
    try:
        r, _ = box.jest(sorted(cut.stripped), timeout)
    finally:
        for f, t in cut.whole.items():
            box.sb.write_file(f, t.encode())
    held = set(cut.held)
    now = _statuses(r)
    visible = [t for t in base["passing"] if file_of(t) in cut.stripped and t not in held]
    broken = [t for t in visible if now.get(t) != "passed"]
    if r.evidence != "nonce" or r.tamper or not now:
        return broken or [f"{f}::(test file failed to run)" for f in sorted(cut.stripped)]
    return broken


def _write_held_out(folder: Path, cut: held_out.Split) -> None:
    for f, t in cut.whole.items():
        (folder / f).parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(folder / f, t)


def _suite_yaml(name: str, opts: BuildOptions) -> str:
    meta = {
        "name": f"{name}-bugfix",
        "description": f"Bug-fix sessions made by `etai suite build` from {name}: one mutant of its "
        f"source per session, each failing a test in all {opts.runs} runs.",
        "defaults": {"k": 3, "max_steps": 10},
        # A real project's first run in a fresh sandbox transforms every file (several seconds
        # for redux on an idle machine, 15-25 s on a loaded one): the toy suites' 30 s is too short.
        "sandbox": {
            "env": dict(opts.env),
            "node_modules": "base",
            "timeout_s": opts.timeout_s,
            "memory_mb": MEMORY_MB,
        },  # fmt: skip
    }
    return yaml.safe_dump(meta, sort_keys=False)


def read_rows(path: Path, key: str = "id") -> dict[str, dict[str, Any]]:
    """The rows of a verdicts file (one JSON object a line) by ``key``; the last row of a key wins."""
    if not path.is_file():
        return {}
    rows = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:  # a line cut short by a kill: that one is tried again
            continue
        rows[row[key]] = row
    return rows


def append_row(path: Path, row: dict[str, Any]) -> None:
    append_line(path, json.dumps(row, ensure_ascii=False).encode() + b"\n")


def _summary(name, done, base, unparsed, candidates, seconds) -> dict[str, Any]:
    rows = list(done.values())
    tried = [r for r in rows if r["verdict"] != "capped"]
    kept = [r for r in rows if r["verdict"] == "kept"]
    per_op: dict[str, dict[str, int]] = {}
    for r in tried:
        d = per_op.setdefault(r["operator"], {"tried": 0, "kept": 0})
        d["tried"] += 1
        d["kept"] += r["verdict"] == "kept"
    return {
        "project": name,
        "candidates": candidates,
        "did_not_parse": unparsed,
        "tried": len(tried),
        "kept": len(kept),
        "dropped": dict(Counter(r["verdict"] for r in rows if r["verdict"] != "kept")),
        "per_operator": dict(sorted(per_op.items())),
        "per_intent": dict(Counter(r["intent"] for r in kept)),
        # Sessions with held-out tests, and why the others have none (held_out.py's rule).
        "held_out": {
            "with": sum(1 for r in kept if "tests" in r.get("held_out", {})),
            "without": dict(
                Counter(
                    r.get("held_out", {}).get("why_none", "not_split")
                    for r in kept
                    if "tests" not in r.get("held_out", {})
                )
            ),
            # The killing cases a split could hold out, how many were ineligible for each reason
            # (eligibility.py), and how many were held out.
            "cases": eligibility.total(
                r["held_out"]["cases"] for r in kept if "cases" in r.get("held_out", {})
            ),
            # Sessions whose multi-line mutant's candidates could not be measured (the rule
            # `uncovered` was not applied there: their candidates are the cases' coverage_unknown).
            "coverage_not_measured": sum(
                1 for r in kept if r.get("held_out", {}).get("coverage") == "not_measured"
            ),
        },
        "baseline": {
            "runs": base["runs"],
            "seconds": base["seconds"],
            "tests": len(base["tests"]),
            "passing": len(base["passing"]),
            "flaky": base["flaky"],
            "failing": base["failing"],
            "first_failure": base.get("first_failure"),
        },
        "build_seconds": round(seconds, 1),  # this invocation's
        # Over every invocation of a resumed build: the baseline runs and each mutant's runs
        # (rows written before rows had ``seconds`` count as 0).
        "seconds_spent": round(sum(base["seconds"]) + sum(r.get("seconds", 0) for r in rows), 1),
    }
