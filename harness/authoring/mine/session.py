"""A kept commit written as a session: its held-out split (the coverage of the changed lines
measured for the candidates), the instruction, the reference trace replayed with the real tools,
the grader's verdict on it, and the workspace and held-out files written into the suite."""

from __future__ import annotations

import random
import shutil
from typing import Any

from harness.authoring import coverage, eligibility
from harness.authoring.box import Box
from harness.authoring.build import held_out
from harness.authoring.mine import fix, reasons
from harness.authoring.mine.jest_runs import Candidate, write
from harness.authoring.record import replay_steps
from harness.grading.verify import take_baseline, verify
from harness.runs.results import write_text_atomic
from harness.session.workspace import workspace_paths


def session(cand: Candidate, box: Box, failures: list, verdict: dict[str, Any]) -> dict:
    name, c, opts, work, out = cand.name, cand.commit, cand.opts, cand.work, cand.out
    before, edits = cand.before, cand.edits
    sid = f"{name}-{c.sha[:10]}"
    rng = random.Random(f"{opts.seed}:{c.sha}")
    cut, held = None, {}
    if opts.held_out == "split":
        texts = {f: (work / f).read_text(encoding="utf-8") for f in verdict["verify_files"]}
        sc, measured = _screen(cand, box, failures, verdict)
        got, unknown = held_out.split_measured(failures, texts, rng, sc, measured)
        n = 0 if isinstance(got, str) else len(got.held)
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
        "pass_to_pass": verdict["pass_to_pass"],  # test ids (manifest rows list them)
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
    write(box, cand.after)
    cov, measured = coverage.measured(
        box, changed, verdict["verify_files"], left, cand.opts.timeout_s
    )
    # back to the parent's source (a sandbox started again after dying already holds it)
    write(box, cand.before)
    if cov is not None:
        sc = held_out.screen(failures, tests, known, verdict["asserts"], found, cov)
    return sc, measured
