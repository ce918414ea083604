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
import shutil
import statistics
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from harness.authoring import MEMORY_MB, eligibility
from harness.authoring.box import Box
from harness.authoring.build.build import append_row, read_rows
from harness.authoring.jest_config import JestAdditions, add_to_jest_config, additions
from harness.authoring.mine import fix, history, jest_runs, session
from harness.authoring.mine.jest_runs import Candidate
from harness.authoring.mine.jest_runs import (
    fail_to_pass as fail_to_pass,  # the verdict rule, named here too
)
from harness.authoring.mine.options import MineOptions
from harness.base.errors import ConfigIsCode, InputError, SandboxDead
from harness.base.progress import bar as progress_bar
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


def _check(cand: Candidate, limits: Limits) -> dict[str, Any]:
    box = Box(cand.opts.sandbox, cand.work, limits)
    try:
        got = jest_runs.runs(cand, box)  # a verdict, or what a kept commit's session is made of
        return got if isinstance(got, dict) else session.session(cand, box, *got)
    except SandboxDead:
        return {"verdict": "timeout"}
    finally:
        box.close()


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
