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

from harness.authoring import MEMORY_MB, eligibility
from harness.authoring.box import Box
from harness.authoring.build import compose, jest_runs, mutants, split
from harness.authoring.build.options import BuildOptions
from harness.authoring.jest_config import JestAdditions, add_to_jest_config, additions
from harness.base.errors import InputError
from harness.base.progress import bar as progress_bar
from harness.runs.results import RunFolder, append_line, write_json_atomic, write_text_atomic
from harness.sandbox import Limits, provider
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
            base = jest_runs.baseline(box, opts.runs, opts.timeout_s, progress)
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
        ws = split.Workspace(out / "base", box.sb.test_files)
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
                verdict, details = jest_runs.evaluate(
                    box, m, text, base, timeout, related=opts.related
                )
                row["verdict"] = verdict
                if verdict == "kept":
                    failures, cut = split.hold_out(
                        box, ws, opts, m, details["failures"], row, base, timeout
                    )
                    sess = compose.session(name, m, text, failures, rng)
                    if cut is not None:
                        sess["workspace"]["patch"] += cut.patch
                        sess["held_out_tests"] = f"held_out/{sess['session_id']}"
                    steps = jest_runs.record(box, sess, m, text, cut)
                    if steps[-1]["execution_result"].get("status") != "ok":
                        row["verdict"] = "reference_fails"
                    else:
                        sess["execution_trace"] = steps
                        if cut is not None:
                            split.write_held_out(out / sess["held_out_tests"], cut)
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
