"""`etai suite mine`'s coverage rule (harness/authoring/eligibility.py ``uncovered``, measured by
harness/authoring/coverage.py in the sandbox with the image's Jest): a commit that fixes one
function and extends another, with new tests for both, holds out only the case of the fixed
function; the case of the other feature runs a changed line no visible case runs. Real git, real
Docker, real Jest."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from harness.authoring import coverage
from harness.cli import main

sys.path.insert(0, str(Path(__file__).parent))  # the helper modules beside this file
from test_suite_mine_e2e import _git_project, _rows  # noqa: E402

pytestmark = [pytest.mark.docker]

PARENT = """exports.half = function half(x) {
  return x / 3;
};

exports.label = function label(x, unit) {
  return String(x);
};
"""
# The fix of half, and a unit for label: a second feature of the same commit.
FIXED = """exports.half = function half(x) {
  return x / 2;
};

exports.label = function label(x, unit) {
  if (unit) {
    return x + ' ' + unit;
  }
  return String(x);
};
"""
TESTS = """const { half, label } = require('../lib/calc');

test('halves four', () => expect(half(4)).toBe(2));
test('halves six', () => expect(half(6)).toBe(3));
test('labels', () => expect(label(3)).toBe('3'));
test('labels with a unit', () => expect(label(3, 'kg')).toBe('3 kg'));
"""


def test_the_changed_lines_are_those_the_fix_adds_or_changes():
    assert coverage.changed_lines({"lib/calc.js": PARENT}, {"lib/calc.js": FIXED}) == {
        "lib/calc.js": {2, 6, 7, 8}
    }
    assert coverage.span_lines("a\nbc\nd", 2, 4) == {2}
    assert coverage.span_lines("a\nb {\n c }\nd", 2, 10) == {2, 3}
    # Jest compiles the pattern as a JavaScript RegExp: a name's own syntax characters are escaped
    assert coverage.pattern(["a (b) c?", "x|y"]) == r"^(?:a \(b\) c\?|x\|y)$"


# A config whose rootDir is the source folder, as fastest-validator's: Jest's own
# collectCoverageFrom globs are relative to it, and the measurement must still see lib/calc.js.
def _mine(tmp_path: Path, monkeypatch, jest: dict | None) -> tuple[dict, Path]:
    """The commit mined: its row, and the suite's folder."""
    repo, commit = _git_project(tmp_path, monkeypatch, jest)
    calc, test = repo / "lib" / "calc.js", repo / "test" / "calc.test.js"
    loads = "const { half, label } = require('../lib/calc');\n\ntest('loads', () => {});\n"
    commit("calc", {calc: PARENT, test: loads})
    commit("fix: half halves; label takes a unit", {calc: FIXED, test: TESTS})
    out = tmp_path / "mined"
    argv = ["suite", "mine", str(repo), "--out", str(out), "--range", "HEAD~1..HEAD"]
    assert main([*argv, "--src", "lib", "--runs", "1", "--no-progress"]) == 0
    (row,) = _rows(out)
    return row, out


@pytest.mark.parametrize("jest", [None, {"rootDir": "./lib", "roots": ["../test"]}])
def test_a_case_of_another_feature_of_the_commit_is_not_held_out(
    tmp_path, image, monkeypatch, jest
):
    row, out = _mine(tmp_path, monkeypatch, jest)
    assert row["verdict"] == "kept", row
    assert sorted(row["session"]["fail_to_pass"]) == [
        "test/calc.test.js::halves four",
        "test/calc.test.js::halves six",
        "test/calc.test.js::labels with a unit",
    ], row
    held = row["held_out"]
    # 'labels' (visible, passing at the parent too) runs `if (unit)` but not the unit's return
    assert held["tests"] == ["test/calc.test.js::halves six"], held
    assert held["cases"] == {
        "considered": 2, "twin": 0, "vacuous": 0, "new_api": 0, "uncovered": 1,
        "coverage_unknown": 0, "held_out": 1,
    }, held  # fmt: skip
    assert held["coverage"] == "measured", held
    summary = json.loads((out / "summary.json").read_text())
    assert summary["held_out_cases"] == held["cases"], summary
    assert summary["held_out_coverage_not_measured"] == 0, summary


def test_a_session_whose_coverage_is_not_measured_holds_nothing_out(tmp_path, image, monkeypatch):
    """'labels with a unit' runs a line the visible cases do not, so each candidate would need a
    run of its own: with none allowed, the session is not measured, and either candidate could be
    one that runs a changed line no visible case runs. Both stay visible."""
    monkeypatch.setattr(coverage, "MAX_CANDIDATES", 0)
    row, out = _mine(tmp_path, monkeypatch, None)
    assert row["verdict"] == "kept", row
    held = row["held_out"]
    assert held["coverage"] == "not_measured" and "0 one by one" in held["why"], held
    assert held["why_none"] == "coverage_not_measured" and "tests" not in held, held
    assert held["cases"] == {
        "considered": 2, "twin": 0, "vacuous": 0, "new_api": 0, "uncovered": 0,
        "coverage_unknown": 2, "held_out": 0,
    }, held  # fmt: skip
    assert "held_out_tests" not in row["session"], row["session"]
    assert not (out / "held_out").exists() or not any((out / "held_out").iterdir())
    summary = json.loads((out / "summary.json").read_text())
    assert summary["held_out_coverage_not_measured"] == 1, summary
    assert summary["held_out_none"] == {"coverage_not_measured": 1}, summary
    assert summary["held_out_cases"]["held_out"] == 0, summary
