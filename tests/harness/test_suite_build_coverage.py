"""`etai suite build` and the coverage rule (harness/authoring/eligibility.py ``uncovered``): a
mutant on one line needs no measurement, since every killing case executes that line; one that
spans several lines (drop_return of a function written over lines) is measured on the fixed code as
a mined fix is (harness/authoring/coverage.py), and a killing case that executes a line of the
block no visible case executes is not held out. Real Docker, real Jest."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from harness.authoring import coverage
from harness.authoring.build import mutants
from harness.authoring.coverage import span_lines
from harness.cli import main

sys.path.insert(0, str(Path(__file__).parent))  # the helper modules beside this file
from test_suite_build_e2e import _lockfile  # noqa: E402

PICK = """exports.pick = function pick(kind) {
  return (x) => {
    if (kind === 'up') {
      return x.toUpperCase();
    }
    return x.toLowerCase();
  };
};
"""
# drop_return of pick's return spans lines 2-7. 'picks down' comes first by name: the
# instruction's case; it runs lines 2, 3 and 6, 'picks up' runs 4 instead of 6, and no other
# case runs line 4.
TESTS = """const { pick } = require('../src/pick');

test('picks down', () => expect(pick('down')('A')).toBe('a'));
test('picks up', () => expect(pick('up')('a')).toBe('A'));
"""


def test_only_mutants_over_several_lines_need_measuring():
    """The argument for one-line mutants rests on each mutant being one span: a Mutant has one
    (start, end) and replaces it; the build measures a mutant whose span holds code on several
    lines, and only those."""
    assert [f.name for f in mutants.Mutant.__dataclass_fields__.values()][:4] == [
        "file", "start", "end", "new",
    ]  # fmt: skip
    found, _ = mutants.find({"src/pick.js": PICK})
    spans = {(m.operator, m.line): span_lines(PICK, m.start, m.end) for m in found}
    assert spans[("drop_return", 2)] == {2, 3, 4, 5, 6, 7}
    assert spans[("drop_return", 4)] == {4} and spans[("negate_equality", 3)] == {3}


def _build(tmp_path: Path, make_project) -> tuple[list[dict], Path]:
    """pick.js's mutants built: their rows, and the suite's folder."""
    project = make_project(tmp_path / "proj", {"src/pick.js": PICK, "tests/pick.test.js": TESTS})
    _lockfile(project)
    out = tmp_path / "suite"
    argv = ["suite", "build", str(project), "--out", str(out), "--no-progress", "--runs", "1"]
    assert main([*argv, "--per-function", "9"]) == 0
    return [json.loads(x) for x in (out / "mutants.jsonl").read_text().splitlines()], out


@pytest.mark.docker
def test_a_killing_case_of_a_line_no_visible_case_runs_is_not_held_out(tmp_path, make_project):
    rows, out = _build(tmp_path, make_project)
    (outer,) = [r for r in rows if r["operator"] == "drop_return" and r["line"] == 2]
    assert outer["verdict"] == "kept", outer
    held = outer["held_out"]
    assert held["why_none"] == "ineligible_uncovered" and held["coverage"] == "measured", held
    assert held["cases"]["uncovered"] == held["cases"]["considered"] == 1, held
    # a mutant on one line is not measured, and its other killing cases may be held out
    (cond,) = [r for r in rows if r["operator"] == "negate_equality"]
    assert cond["verdict"] == "kept" and cond["held_out"]["coverage"] == "one_line", cond
    assert cond["held_out"]["tests"] == ["tests/pick.test.js::picks up"], cond
    summary = json.loads((out / "summary.json").read_text())
    assert summary["held_out"]["cases"]["uncovered"] >= 1, summary
    assert summary["held_out"]["coverage_not_measured"] == 0, summary


@pytest.mark.docker
def test_a_mutant_whose_coverage_is_not_measured_holds_nothing_out(
    tmp_path, make_project, monkeypatch
):
    """drop_return of lines 2-7 needs 'picks up' measured alone (it runs line 4, which the
    instruction's case does not): with no run of its own allowed, it is not measured, could be a
    case of a line no visible case runs, and stays visible. The one-line mutant is not measured
    and still holds 'picks up' out."""
    monkeypatch.setattr(coverage, "MAX_CANDIDATES", 0)
    rows, out = _build(tmp_path, make_project)
    (outer,) = [r for r in rows if r["operator"] == "drop_return" and r["line"] == 2]
    assert outer["verdict"] == "kept", outer
    held = outer["held_out"]
    assert held["coverage"] == "not_measured" and "0 one by one" in held["why"], held
    assert held["why_none"] == "coverage_not_measured" and "tests" not in held, held
    assert held["cases"]["coverage_unknown"] == held["cases"]["considered"] == 1, held
    assert held["cases"]["held_out"] == 0, held
    assert "held_out_tests" not in outer["session"], outer
    (cond,) = [r for r in rows if r["operator"] == "negate_equality"]
    assert cond["held_out"]["coverage"] == "one_line", cond
    assert cond["held_out"]["tests"] == ["tests/pick.test.js::picks up"], cond
    summary = json.loads((out / "summary.json").read_text())
    assert summary["held_out"]["coverage_not_measured"] == 1, summary
    assert summary["held_out"]["without"].get("coverage_not_measured") == 1, summary
