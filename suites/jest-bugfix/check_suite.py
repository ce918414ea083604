#!/usr/bin/env python3
"""Checks the jest-bugfix suite against real Jest: every session is well formed, its pristine
workspace has at least one failing test, and its reference trace turns every test green.

For each session the workspace is copied to a temporary folder and Jest runs there twice: on the
pristine copy (at least one test must fail, at least one must pass) and after the trace's edits
are applied in order (every test must pass, the same tests must have run). Alongside it checks the
record itself: fields, intents, tool names and arguments, the fix at step <= 3, edits that touch
only source files with an `old` string that occurs exactly once, a cursor_target that points into
the text the fix edits, and a cursor_position inside its file.

Stdlib only. Prints one line per session and exits 1 if anything is wrong.

    python suites/jest-bugfix/check_suite.py [--jest PATH] [--jobs N] [--tz ZONE] [SESSION_ID ...]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

SUITE_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(SUITE_DIR))
DEFAULT_JEST = os.path.join(
    REPO_ROOT, "harness", "image", "recipe", "runner", "node_modules", "jest", "bin", "jest.js"
)

# Mirrors harness/intents.py (kept literal so this script runs without the package installed).
INTENTS = (
    "fix_test_failure",
    "refactor_function_signature",
    "add_type_annotation",
    "debug_runtime_error",
    "fix_async_bug",
    "fix_off_by_one",
    "fix_data_mutation",
    "fix_regex",
    "fix_date_handling",
    "fix_error_handling",
    "fix_module_export",
    "update_test_mock",
)
# tool -> (required args, optional args)
TOOLS = {
    "jest_run": (set(), {"test_file", "name_pattern"}),
    "file_read": ({"file"}, set()),
    "file_edit": ({"file", "old", "new"}, set()),
    "file_write": ({"file", "content"}, set()),
    "git_diff": (set(), set()),
    "git_status": (set(), set()),
    "list_files": (set(), {"path", "max"}),
    "search": ({"pattern"}, {"path", "ignore_case", "max"}),
}
SESSION_FIELDS = {
    "session_id",
    "intent",
    "user_instruction",
    "ide_context",
    "execution_trace",
    "final_output",
    "workspace",
    "verify",
    "cursor_target",
}
VIEWPORT_FIELDS = {"scroll_top_line", "line_height_px", "char_width_px", "gutter_px", "zoom"}
MAX_FIX_STEP = 3  # the reference must be green within k=3 tool calls
MIN_INTENTS = 6


class Problem(Exception):
    pass


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def _offset(text: str, line: int, column: int) -> int:
    """0-based offset of a 1-based (line, column); column may point one past the line's end."""
    lines = text.split("\n")
    if not (isinstance(line, int) and isinstance(column, int)) or line < 1 or line > len(lines):
        raise Problem(f"line {line} outside the file ({len(lines)} lines)")
    if column < 1 or column > len(lines[line - 1]) + 1:
        raise Problem(f"column {column} outside line {line} ({len(lines[line - 1])} chars)")
    return sum(len(s) + 1 for s in lines[: line - 1]) + column - 1


def _safe_rel(rel: str) -> str:
    if not isinstance(rel, str) or not rel or os.path.isabs(rel) or ".." in rel.split("/"):
        raise Problem(f"bad workspace path {rel!r}")
    return rel


def check_record(s: dict) -> None:
    missing = SESSION_FIELDS - s.keys()
    if missing:
        raise Problem(f"missing fields {sorted(missing)}")
    if s["intent"] not in INTENTS:
        raise Problem(f"unknown intent {s['intent']!r}")
    if s["workspace"] != f"workspaces/{s['session_id']}":
        raise Problem(f"workspace {s['workspace']!r} is not workspaces/<session_id>")
    for key in ("user_instruction", "final_output"):
        if not isinstance(s[key], str) or not s[key].strip():
            raise Problem(f"{key} is empty")
    ide = s["ide_context"]
    for key in ("open_files", "cursor_position", "git_status", "viewport"):
        if key not in ide:
            raise Problem(f"ide_context.{key} missing")
    if set(ide["viewport"]) != VIEWPORT_FIELDS:
        raise Problem(f"ide_context.viewport fields {sorted(ide['viewport'])}")
    target = s["cursor_target"]
    if set(target) != {"file", "line", "column", "placement"} or target["placement"] not in (
        "before",
        "after",
    ):
        raise Problem(f"bad cursor_target {target}")
    trace = s["execution_trace"]
    if not 2 <= len(trace) <= 4:
        raise Problem(f"trace has {len(trace)} steps (want 2-4)")
    for i, step in enumerate(trace, 1):
        if step.get("step") != i:
            raise Problem(f"step numbers are not 1..n at position {i}")
        tool, args = step.get("tool_called"), step.get("tool_args")
        if tool not in TOOLS:
            raise Problem(f"step {i}: unknown tool {tool!r}")
        if not isinstance(args, dict):
            raise Problem(f"step {i}: tool_args is not an object")
        required, optional = TOOLS[tool]
        if not required <= args.keys() or not args.keys() <= required | optional:
            raise Problem(f"step {i}: {tool} args {sorted(args)} (required {sorted(required)})")
        if not isinstance(step.get("execution_result"), dict):
            raise Problem(f"step {i}: execution_result is not an object")
        if tool == "search":
            try:
                re.compile(args["pattern"])
            except re.error as e:
                raise Problem(f"step {i}: search pattern does not compile: {e}") from None
    edit_steps = [st["step"] for st in trace if st["tool_called"] in ("file_edit", "file_write")]
    if not edit_steps:
        raise Problem("trace has no file_edit/file_write")
    if max(edit_steps) > MAX_FIX_STEP:
        raise Problem(f"last edit at step {max(edit_steps)} (must be <= {MAX_FIX_STEP})")
    tests = s["verify"].get("test_files")
    if not tests or not isinstance(tests, list):
        raise Problem("verify.test_files is empty")


def check_workspace(ws: str, s: dict) -> None:
    pkg = json.loads(_read(os.path.join(ws, "package.json")))
    for key in ("dependencies", "devDependencies", "peerDependencies", "optionalDependencies"):
        if pkg.get(key):
            raise Problem(f"package.json declares {key}")
    if pkg.get("private") is not True or pkg.get("jest", {}).get("testEnvironment") != "node":
        raise Problem("package.json must be private with jest.testEnvironment 'node'")
    for root, dirs, _ in os.walk(ws):
        if "node_modules" in dirs:
            raise Problem(f"node_modules present under {os.path.relpath(root, ws)}")
    src = sorted(f for f in os.listdir(os.path.join(ws, "src")) if f.endswith(".js"))
    tests = sorted(f for f in os.listdir(os.path.join(ws, "tests")) if f.endswith(".test.js"))
    if not 1 <= len(src) <= 3 or not 1 <= len(tests) <= 2:
        raise Problem(f"{len(src)} source files / {len(tests)} test files (want 1-3 / 1-2)")
    for f in src:
        n = _read(os.path.join(ws, "src", f)).count("\n")
        if not 10 <= n <= 60:
            raise Problem(f"src/{f} has {n} lines (want 10-60)")
    for rel in s["verify"]["test_files"] + s["ide_context"]["open_files"]:
        if not os.path.isfile(os.path.join(ws, _safe_rel(rel))):
            raise Problem(f"{rel} does not exist")
    cur = s["ide_context"]["cursor_position"]
    try:
        _offset(_read(os.path.join(ws, _safe_rel(cur["file"]))), cur["line"], cur["column"])
    except (Problem, OSError) as e:
        raise Problem(f"cursor_position: {e}") from None


def apply_edits(tmp: str, s: dict) -> list[tuple[str, int, int]]:
    """Applies the trace's edits to the copy; returns (file, start, end) spans of each edit's
    `old` text in the file as it was just before that edit."""
    spans = []
    for step in s["execution_trace"]:
        tool, args = step["tool_called"], step["tool_args"]
        if tool not in ("file_edit", "file_write"):
            continue
        rel = _safe_rel(args["file"])
        if rel.startswith("tests/") or rel == "package.json" or ".test." in rel:
            raise Problem(
                f"step {step['step']} edits {rel}: the reference may only change source files"
            )
        path = os.path.join(tmp, rel)
        if tool == "file_write":
            text = args["content"]
            spans.append((rel, 0, len(text)))
        else:
            text = _read(path)
            count = text.count(args["old"])
            if count != 1 or not args["old"]:
                raise Problem(f"step {step['step']}: `old` occurs {count} times in {rel}")
            start = text.index(args["old"])
            spans.append((rel, start, start + len(args["old"])))
            text = text[:start] + args["new"] + text[start + len(args["old"]) :]
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    return spans


def check_cursor_target(ws: str, s: dict, spans: list[tuple[str, int, int]]) -> None:
    target = s["cursor_target"]
    file_spans = [(a, b) for f, a, b in spans if f == target["file"]]
    if not file_spans:
        raise Problem(f"cursor_target file {target['file']} is not edited by the trace")
    # Spans of the first edit on a file are in pristine coordinates, which is what the target uses.
    text = _read(os.path.join(ws, _safe_rel(target["file"])))
    try:
        off = _offset(text, target["line"], target["column"])
    except Problem as e:
        raise Problem(f"cursor_target: {e}") from None
    a, b = file_spans[0]
    if not a <= off <= b:
        raise Problem(
            f"cursor_target {target['line']}:{target['column']} is outside the edited text"
        )


def run_jest(jest: str, root: str, cache: str, tz: str) -> dict:
    out = os.path.join(cache, "result.json")
    if os.path.exists(out):
        os.remove(out)
    cmd = [
        "node",
        jest,
        "--ci",
        "--json",
        f"--outputFile={out}",
        "--rootDir",
        root,
        "--cacheDirectory",
        os.path.join(cache, "jest"),
        "--no-watchman",
        "--silent",
    ]
    env = dict(os.environ, TZ=tz, CI="1")
    proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=180, env=env)
    if not os.path.exists(out):
        raise Problem(
            f"jest wrote no report (exit {proc.returncode}): {proc.stderr.strip()[-400:]}"
        )
    report = json.loads(_read(out))
    if report.get("numRuntimeErrorTestSuites"):
        msgs = [
            r.get("message", "")[:300] for r in report["testResults"] if r.get("status") == "failed"
        ]
        raise Problem(f"test suite failed to run: {msgs}")
    statuses = {}
    for file_result in report["testResults"]:
        rel = os.path.relpath(file_result["name"], root)
        for t in file_result["assertionResults"]:
            statuses[(rel, t["fullName"])] = t["status"]
    return {"statuses": statuses, "files": {f for f, _ in statuses}}


def check_session(s: dict, jest: str, tz: str) -> str:
    sid = s.get("session_id", "<no id>")
    check_record(s)
    ws = os.path.join(SUITE_DIR, s["workspace"])
    if not os.path.isdir(ws):
        raise Problem(f"workspace {s['workspace']} does not exist")
    check_workspace(ws, s)
    work = tempfile.mkdtemp(prefix=f"jest-bugfix-{sid}-")
    try:
        tmp, cache = os.path.join(work, "ws"), os.path.join(work, "cache")
        shutil.copytree(ws, tmp)
        os.makedirs(cache)
        before = run_jest(jest, tmp, cache, tz)
        st = before["statuses"]
        failed = [k for k, v in st.items() if v == "failed"]
        passed = [k for k, v in st.items() if v == "passed"]
        if not failed:
            raise Problem("no test fails on the pristine workspace")
        if not passed:
            raise Problem("no test passes on the pristine workspace")
        if not 3 <= len(st) <= 8:
            raise Problem(f"{len(st)} tests (want 3-8)")
        if not set(s["verify"]["test_files"]) <= before["files"]:
            raise Problem(f"verify.test_files {s['verify']['test_files']} did not all run")
        spans = apply_edits(tmp, s)
        check_cursor_target(ws, s, spans)
        after = run_jest(jest, tmp, cache, tz)
        if set(after["statuses"]) != set(st):
            raise Problem("a different set of tests ran after the fix")
        still = [name for (_, name), v in after["statuses"].items() if v != "passed"]
        if still:
            raise Problem(f"not green after the reference edits: {still}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    steps = "->".join(step["tool_called"] for step in s["execution_trace"])
    return f"{len(failed)} failing -> {len(st)}/{len(st)} passing; {len(s['execution_trace'])} steps ({steps})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("session_ids", nargs="*", help="check only these sessions")
    ap.add_argument(
        "--jest",
        default=os.environ.get("ETAI_JEST_BIN", DEFAULT_JEST),
        help="path to jest/bin/jest.js",
    )
    ap.add_argument("--jobs", type=int, default=min(8, os.cpu_count() or 1))
    # Not UTC on purpose: the sessions must not depend on the machine's time zone.
    ap.add_argument(
        "--tz", default="Asia/Kolkata", help="TZ for the Jest runs (default: %(default)s)"
    )
    args = ap.parse_args(argv)
    if not os.path.isfile(args.jest):
        print(f"jest not found at {args.jest} (use --jest)", file=sys.stderr)
        return 2

    problems = 0
    suite_yaml = _read(os.path.join(SUITE_DIR, "suite.yaml"))
    if not re.search(r"^name:\s*jest-bugfix\s*$", suite_yaml, re.M):
        print("suite.yaml: name is not jest-bugfix")
        problems += 1

    sessions = []
    with open(os.path.join(SUITE_DIR, "sessions.jsonl"), encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    sessions.append(json.loads(line))
                except json.JSONDecodeError as e:
                    print(f"sessions.jsonl:{n}: invalid JSON: {e}")
                    problems += 1
    ids = [s.get("session_id") for s in sessions]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        print(f"duplicate session ids: {dupes}")
        problems += 1
    orphans = sorted(set(os.listdir(os.path.join(SUITE_DIR, "workspaces"))) - set(ids))
    if orphans:
        print(f"workspaces without a session: {orphans}")
        problems += 1
    intents = {s.get("intent") for s in sessions}
    if len(intents) < MIN_INTENTS:
        print(f"only {len(intents)} distinct intents (want >= {MIN_INTENTS})")
        problems += 1

    selected = [
        s for s in sessions if not args.session_ids or s.get("session_id") in args.session_ids
    ]

    def one(s):
        try:
            return True, check_session(s, args.jest, args.tz)
        except (Problem, OSError, ValueError, KeyError, TypeError, subprocess.TimeoutExpired) as e:
            return False, f"{type(e).__name__}: {e}" if not isinstance(e, Problem) else str(e)

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(one, selected))
    width = max((len(str(s.get("session_id"))) for s in selected), default=0)
    for s, (ok, msg) in zip(selected, results):
        print(
            f"{'ok  ' if ok else 'FAIL'} {str(s.get('session_id')):<{width}}  {s.get('intent', '?'):<20} {msg}"
        )
        problems += not ok
    print(
        f"{len(selected) - sum(not ok for ok, _ in results)}/{len(selected)} sessions ok, "
        f"{len(intents)} intents, {problems} problem(s)"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
