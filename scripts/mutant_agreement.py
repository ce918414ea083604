"""`make mutant-agreement`: a selected graded run's verdict against a whole run's, mutant by mutant.

A graded run runs the test files a change can reach (harness/grading/verify.py, the rule of
docs/grading.md); a whole run runs every test file. The selection is sound when, for any change, the
two verdicts agree. Here the change is a mutant of a real project's source (every source file of a
session's workspace, from harness/authoring/build/mutants.py) written over the reference's fixed
workspace, in the sandbox a suite's episodes get:

    pristine workspace -> baseline (a whole run: the tests passing at the start)
    the reference's writes -> must be green (else the session is skipped, with the reason)
    for each mutant: write it, verify selected, verify whole, put the file back

A mutant *agrees* when green and the failed checks are the same in both runs. A selected run that
left out a test the whole run saw regress is counted apart (``missed``) even when the verdict
agrees (another test of the run had already made it red): that is a gap in the selection the
verdict did not show. A disagreement is run once more in both modes; one that does not repeat is
``unstable`` (timing-dependent), not a disagreement.

Resumable: one JSON line per mutant in OUT/results.jsonl; OUT/report.json holds the counts and
every disagreement. Exit status: 0 every compared mutant agrees (and at least one was compared),
1 a disagreement, 2 bad input, 3 infra errors or nothing compared.

Usage: python scripts/mutant_agreement.py --suite DIR [--suite DIR ...] [--mutants N]
       [--sessions N] [--only SESSION] [--seed S] [--workers W] [--out DIR]
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SEED = 20261208
EXIT_OK, EXIT_DISAGREE, EXIT_BAD_INPUT, EXIT_INFRA = 0, 1, 2, 3
MUTATING = ("file_edit", "file_write")


def fixed_files(session) -> dict[str, str]:
    """The session's source files as its reference's writes leave them."""
    from harness.authoring.build.mutants import source_files

    files = source_files(session.workspace, ["."])
    for st in session.execution_trace:
        rel = st.tool_args.get("file")
        if st.tool_called == "file_write" and isinstance(rel, str):
            files[rel] = st.tool_args["content"]
        elif st.tool_called == "file_edit" and rel in files:
            files[rel] = files[rel].replace(st.tool_args["old"], st.tool_args["new"], 1)
    return files


def draw(session, n: int, seed: int) -> list:
    """Up to ``n`` mutants of the session's fixed source, the operators mixed, in an order seeded
    by ``seed`` and the session (the sessions of a built suite share most of their source: one
    order for all would draw the same mutants in each)."""
    from harness.authoring.build.mutants import find, ordered

    files = fixed_files(session)
    mutants, _ = find(files) if files else ([], 0)
    own = int(hashlib.sha256(f"{seed}/{session.session_id}".encode()).hexdigest()[:12], 16)
    return ordered(mutants, own)[:n]


def regressed(base, verdict) -> set[str]:
    """The tests passing at the start that this run saw fail (a scoped run: of the files it ran,
    a file that failed to load among them)."""
    passed = {t.id for t in verdict.tests if t.status == "passed"}
    ran = None if verdict.ran is None else set(verdict.ran)
    could = {t for t in base.passing if ran is None or t.split("::", 1)[0] in ran}
    return could - passed


def reading(verdict) -> dict[str, Any]:
    return {
        "green": verdict.green,
        "checks": list(verdict.checks),
        "reason": verdict.reason,
        "files": verdict.scoped,
        "jest_s": round(verdict.jest_s, 3),
    }


def agree(a: dict, b: dict) -> bool:
    return (a["green"], a["checks"]) == (b["green"], b["checks"])


def _pair(sb, base, whole, session, text_for, m) -> tuple[dict, dict, list[str]]:
    from harness.grading.verify import verify

    vf = list(session.verify_files)
    sb.write_file(m.file, text_for(m).encode())
    try:
        a, b = verify(sb, base, vf), verify(sb, whole, vf)
    finally:
        sb.write_file(m.file, text_for(None, m.file).encode())
    missed = sorted(regressed(whole, b) - regressed(base, a))
    return reading(a), reading(b), missed


def run_session(prepared, st, session, mutants, done, skip) -> None:
    """The session's mutants in one sandbox; each result passed to ``done``."""
    from harness import tools
    from harness.grading.verify import take_baseline, verify

    todo = [m for m in mutants if key(st, session, m) not in skip]
    if not todo:
        return
    fixed = fixed_files(session)

    def text_for(m, file: str | None = None) -> str:
        return fixed[file] if m is None else m.apply(fixed[m.file])

    sb = prepared.start(session.workspace)
    try:
        base = take_baseline(sb, sb.test_files, regression="related")
        whole = dataclasses.replace(base, regression="whole")
        for step in session.execution_trace:
            if step.tool_called in MUTATING:
                r = tools.call(sb, step.tool_called, dict(step.tool_args))
                if not r.ok:
                    raise RuntimeError(f"the reference's {step.tool_called} failed: {r.error}")
        ref = verify(sb, base, list(session.verify_files))
        if not ref.green:
            for m in todo:
                done(st, session, m, {"skipped": f"the reference is not green: {ref.reason}"})
            return
        for m in todo:
            a, b, missed = _pair(sb, base, whole, session, text_for, m)
            row = {"selected": a, "whole": b, "missed": missed, "agree": agree(a, b)}
            if not row["agree"]:  # once more: a disagreement that does not repeat is timing
                a2, b2, _ = _pair(sb, base, whole, session, text_for, m)
                row["again"] = {"selected": a2, "whole": b2}
                row["unstable"] = not (agree(a, a2) and agree(b, b2))
            done(st, session, m, row)
    except Exception as e:  # one session's machinery failing is counted, not the end of the run
        for m in todo:
            done(st, session, m, {"infra_error": f"{type(e).__name__}: {e}"})
    finally:
        sb.close()


def key(st, session, m) -> str:
    return f"{st.name}/{session.session_id}/{m.id}"


def summarise(rows: list[dict]) -> dict[str, Any]:
    compared = [r for r in rows if "agree" in r]
    disagree = [r for r in compared if not r["agree"] and not r.get("unstable")]
    return {
        "mutants": len(rows),
        "compared": len(compared),
        "agree": sum(1 for r in compared if r["agree"]),
        "disagree": len(disagree),
        "unstable": sum(1 for r in compared if not r["agree"] and r.get("unstable")),
        "killed": sum(1 for r in compared if not r["whole"]["green"]),
        "missed": sum(1 for r in compared if r["missed"]),
        "skipped": sum(1 for r in rows if "skipped" in r),
        "infra_errors": sum(1 for r in rows if "infra_error" in r),
        "selected_jest_s": round(sum(r["selected"]["jest_s"] for r in compared), 1),
        "whole_jest_s": round(sum(r["whole"]["jest_s"] for r in compared), 1),
        "disagreements": disagree,
    }


def exit_status(report: dict[str, Any]) -> int:
    if report["disagree"]:
        return EXIT_DISAGREE
    if report["infra_errors"] or not report["compared"]:
        return EXIT_INFRA
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description="Selected against whole graded runs on mutants of real projects' sources.",
        epilog="Exit: 0 all agree, 1 a disagreement, 2 bad input, 3 infra errors or nothing compared.",
    )
    ap.add_argument(
        "--suite", action="append", type=Path, required=True, help="a suite folder (repeatable)"
    )
    ap.add_argument("--mutants", type=int, default=1000, help="mutants in all (default 1000)")
    ap.add_argument("--sessions", type=int, help="sessions per suite (default: every one)")
    ap.add_argument("--only", action="append", default=[], help="only this session (repeatable)")
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--workers", type=int, default=2, help="sessions at once (default 2)")
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "mutant-agreement")
    a = ap.parse_args(argv)
    from harness import sandbox
    from harness.base.errors import EtaiError
    from harness.runs.session_jobs import sandbox_profile
    from harness.suites.load import load_suite

    if a.mutants < 1 or a.workers < 1:
        print("mutant_agreement: --mutants and --workers must be at least 1", file=sys.stderr)
        return EXIT_BAD_INPUT
    jobs = []
    try:
        suites = [load_suite(p) for p in a.suite]
    except EtaiError as e:
        print(f"mutant_agreement: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    for st in suites:
        sessions = [s for s in st.sessions if not a.only or s.session_id in a.only]
        jobs += [(st, s) for s in sessions[: a.sessions]]
    if not jobs:
        print("mutant_agreement: no session selected (--only, --sessions)", file=sys.stderr)
        return EXIT_BAD_INPUT
    per = math.ceil(a.mutants / len(jobs))
    a.out.mkdir(parents=True, exist_ok=True)
    results = a.out / "results.jsonl"
    rows = [json.loads(x) for x in results.read_text().splitlines()] if results.exists() else []
    skip = {r["key"] for r in rows}
    lock, t0 = threading.Lock(), time.monotonic()

    def done(st, session, m, row) -> None:
        row = {"key": key(st, session, m), "operator": m.operator, "file": m.file, **row}
        with lock:
            rows.append(row)
            with results.open("a") as f:
                f.write(json.dumps(row, sort_keys=True) + "\n")
            mark = "=" if row.get("agree") else "!" if "agree" in row else "-"
            print(f"[{len(rows)}] {mark} {row['key']} {m.operator}", file=sys.stderr, flush=True)

    by_suite: dict[str, list] = {}
    for st, s in jobs:
        by_suite.setdefault(str(st.path), []).append((st, s))
    for pairs in by_suite.values():
        st = pairs[0][0]
        prepared = sandbox.provider("docker").prepare(sandbox_profile(st), workers=a.workers)
        try:
            with ThreadPoolExecutor(a.workers) as ex:
                futures = [
                    ex.submit(run_session, prepared, st, s, draw(s, per, a.seed), done, skip)
                    for _, s in pairs
                ]
                for f in futures:
                    f.result()
        finally:
            prepared.cleanup()
    report = summarise(rows)
    report["seconds"] = round(time.monotonic() - t0, 1)
    (a.out / "report.json").write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    print(
        f"mutant_agreement: {report['compared']} compared, {report['agree']} agree, "
        f"{report['disagree']} disagree, {report['unstable']} unstable, {report['killed']} killed, "
        f"{report['missed']} with a missed regression, {report['skipped']} skipped, "
        f"{report['infra_errors']} infra errors; Jest {report['selected_jest_s']} s selected, "
        f"{report['whole_jest_s']} s whole ({a.out / 'report.json'})"
    )
    return exit_status(report)


if __name__ == "__main__":
    sys.exit(main())
