"""`etai suite validate --jest` re-checks the coverage rule on a finished suite
(harness/authoring/check.py ``coverage_audit``; eligibility.py's ``uncovered``, measured by
coverage.py): a held-out case that executes a changed line of the reference no visible case
executes is a problem of its session; moved into the visible tests, the same case is not. A suite
written by hand, as a suite author would write one. Real Docker, real Jest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.authoring.check import (
    CoverageAudit,
    SessionCheck,
    coverage_line,
    held_out_audit,
)
from harness.cli import main
from harness.suites.load import load_suite

SID = "calc-half"
PARENT = """exports.half = function half(x) {
  return x / 3;
};

exports.label = function label(x, unit) {
  return String(x);
};
"""
# The reference fixes half and gives label a unit: lines 2 and 6-8 change, and only a case of the
# unit executes line 7.
UNIT_CODE = "  if (unit) {\n    return x + ' ' + unit;\n  }\n  return String(x);"
FIXED = PARENT.replace("x / 3", "x / 2").replace("  return String(x);", UNIT_CODE)
HEAD = "const { half, label } = require('../src/calc');\n"
HALVES_FOUR = "\ntest('halves four', () => expect(half(4)).toBe(2));\n"
LABELS = "\ntest('labels', () => expect(label(3)).toBe('3'));\n"
HALVES_SIX = "\ntest('halves six', () => expect(half(6)).toBe(3));\n"
UNIT = "\ntest('labels with a unit', () => expect(label(3, 'kg')).toBe('3 kg'));\n"


def _suite(root: Path, visible: str, held: str) -> Path:
    """One session: src/calc.js at PARENT, ``visible`` cases in tests/calc.test.js, ``held`` ones
    in the held-out tests/calc.held-out.test.js, and the fix as two file_edits."""
    ws, held_dir = root / "workspaces" / SID, root / "held_out" / SID
    files = {
        ws / "package.json": json.dumps({"name": SID, "private": True}),
        ws / "src" / "calc.js": PARENT,
        ws / "tests" / "calc.test.js": HEAD + visible,
        held_dir / "tests" / "calc.held-out.test.js": HEAD + held,
    }
    for p, text in files.items():
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    (root / "suite.yaml").write_text(
        "name: calc\ndescription: one session\ndefaults:\n  k: 4\n  max_steps: 10\n"
    )
    edits = [("x / 3", "x / 2"), ("  return String(x);", UNIT_CODE)]
    trace = [{"tool_called": "file_read", "tool_args": {"file": "src/calc.js"}}]
    trace += [
        {"tool_called": "file_edit", "tool_args": {"file": "src/calc.js", "old": o, "new": n}}
        for o, n in edits
    ]
    trace += [{"tool_called": "jest_run", "tool_args": {"test_file": "tests/calc.test.js"}}]
    session = {
        "session_id": SID,
        "intent": "fix_off_by_one",
        "user_instruction": "half(4) is not 2; fix half in src/calc.js, and let label take a unit.",
        "ide_context": {
            "open_files": ["src/calc.js", "tests/calc.test.js"],
            "cursor_position": {"file": "src/calc.js", "line": 1, "column": 1},
            "git_status": "clean",
        },
        "execution_trace": [
            {**st, "step": i, "execution_result": {}} for i, st in enumerate(trace, 1)
        ],
        "final_output": "half divides by 2; label takes a unit.",
        "workspace": f"workspaces/{SID}",
        "verify": {"test_files": ["tests/calc.test.js"]},
        "cursor_target": {"file": "src/calc.js", "line": 2, "column": 10, "placement": "before"},
        "held_out_tests": f"held_out/{SID}",
    }
    (root / "sessions.jsonl").write_text(json.dumps(session) + "\n")
    return root


def test_the_fixture_is_what_the_rule_reads():
    assert FIXED.split("\n")[5:9] == [
        "  if (unit) {", "    return x + ' ' + unit;", "  }", "  return String(x);",
    ]  # fmt: skip


def test_the_count_says_what_was_not_measured():
    def check(audit):
        return SessionCheck(audit.session_id, (), 2, audit)

    checks = [
        check(CoverageAudit("a", ("t::x", "t::y"), (("t::y", ("src/a.js:3",)),))),
        check(CoverageAudit("b", ("t::z",), not_measured="Jest ran none of the visible cases")),
        SessionCheck("c", (), 2),  # no held-out tests
    ]
    assert coverage_line(checks) == (
        "held-out coverage: 2 cases measured in 1 sessions, 1 executing a changed line no visible "
        "case executes; not measured: 1 cases in 1 sessions"
    )


@pytest.mark.docker
@pytest.mark.slow
def test_a_held_out_case_of_a_line_no_visible_case_runs_is_a_problem(tmp_path, image, capsys):
    argv = ["suite", "validate", "--jest", "--no-progress", "--workers", "1"]
    # 'labels' (visible) runs `if (unit)` but not the unit's return; 'labels with a unit' does.
    bad = _suite(tmp_path / "bad", HALVES_FOUR + LABELS, HALVES_SIX + UNIT)
    [s] = load_suite(bad).sessions
    assert len(held_out_audit(s).held_out) == 2 and held_out_audit(s).twins == ()
    assert main([*argv, str(bad)]) == 2
    captured = capsys.readouterr()
    assert (
        f"FAIL  {SID}: held-out case tests/calc.held-out.test.js::labels with a unit executes "
        "changed lines no visible case executes: src/calc.js:7"
    ) in captured.out, captured.out
    assert "halves six executes" not in captured.out, captured.out
    assert (
        "held-out coverage: 2 cases measured in 1 sessions, 1 executing a changed line no "
        "visible case executes; not measured: 0 cases in 0 sessions"
    ) in captured.out, captured.out
    assert "1 of 1 sessions fail against Jest" in captured.err

    # The same case visible: every held-out line is a visible one.
    good = _suite(tmp_path / "good", HALVES_FOUR + LABELS + UNIT, HALVES_SIX)
    assert main([*argv, str(good)]) == 0, capsys.readouterr()
    out = capsys.readouterr().out
    assert f"ok    {SID}: the reference reaches green at step" in out, out
    assert (
        "held-out coverage: 1 cases measured in 1 sessions, 0 executing a changed line no "
        "visible case executes; not measured: 0 cases in 0 sessions"
    ) in out, out


@pytest.mark.docker
@pytest.mark.slow
def test_coverage_not_measured_is_said_and_counted_never_passed(tmp_path, image, capsys):
    """A held-out case that Jest cannot name (a case of test.each has none the parser can give)
    leaves the session's coverage not measured: said, counted, never among the measured ones."""
    each = "\ntest.each([[6, 3]])('halves %i', (x, y) => expect(half(x)).toBe(y));\n"
    root = _suite(tmp_path / "each", HALVES_FOUR + LABELS + UNIT, each)
    assert main(["suite", "validate", "--jest", "--no-progress", str(root)]) == 0
    out = capsys.readouterr().out
    assert f"{SID}: held-out coverage not measured: held-out case " in out, out
    assert "has no name Jest reports" in out, out
    assert "0 cases measured in 0 sessions" in out and "not measured: 1 cases in 1 sessions" in out
