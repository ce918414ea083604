"""scripts/mutation: its parsing (fast), and the CI slice run for real (slow): the score reached,
the working tree untouched, and a bug planted in the scratch copy seen by the tests."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "mutation"


def load_script():
    loader = importlib.machinery.SourceFileLoader("etai_mutation_script", str(SCRIPT))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def m():
    return load_script()


def test_mutant_names_map_to_functions(m):
    metrics, results = "harness/runs/metrics.py", "harness/runs/results.py"
    assert m.function_of("harness.runs.metrics.x_row_cursor__mutmut_30", metrics) == "row_cursor"
    assert m.function_of("harness.runs.results.xǁResultStoreǁappend__mutmut_3", results) == (
        "ResultStore.append"
    )
    assert m.function_of("harness.runs.results.xǁRunFolderǁ__init____mutmut_4", results) == (
        "RunFolder.__init__"
    )


def test_mutated_code_is_the_added_lines_or_the_deleted_ones(m):
    diff = "--- a.py\n+++ a.py\n@@ -1,2 +1,2 @@\n-    x = 1\n+    x = 2\n     y = 3"
    assert m.mutated_code(diff) == "x = 2"
    assert m.mutated_code("--- a.py\n+++ a.py\n@@ -1 +0 @@\n-        ignore_index=IGNORE,") == (
        "- ignore_index=IGNORE,"
    )


def test_equivalent_list_needs_a_reason_for_each_entry(m, tmp_path):
    good = tmp_path / "eq.txt"
    good.write_text(
        "# comment\n\nharness/runs/metrics.py::lcs  prev = [0] * (len(b) + 2)\n    why: never read\n"
    )
    assert m.load_equivalent(good) == [
        {
            "module": "harness/runs/metrics.py",
            "function": "lcs",
            "code": "prev = [0] * (len(b) + 2)",
            "why": "never read",
            "line": "3",
        }
    ]
    bad = tmp_path / "bad.txt"
    bad.write_text("harness/runs/metrics.py::lcs  prev = [0]\n")
    with pytest.raises(SystemExit, match="needs a `why:` line"):
        m.load_equivalent(bad)
    bad.write_text("harness/runs/metrics.py  prev = [0]\n    why: x\n")
    with pytest.raises(SystemExit, match="expected `MODULE::FUNCTION  MUTATED CODE`"):
        m.load_equivalent(bad)


def test_the_checked_in_equivalent_list_parses(m):
    entries = m.load_equivalent(m.EQUIVALENT)
    assert entries and all(e["why"] and (ROOT / e["module"]).is_file() for e in entries)


def test_targets_default_to_each_modules_fast_tests(m):
    assert m.parse_targets(["harness/runs/metrics.py"]) == [
        ("harness/runs/metrics.py", ["tests/harness/test_metrics.py"])
    ]
    assert m.parse_targets(["harness/grading/jest.py=tests/harness/test_verify.py"]) == [
        ("harness/grading/jest.py", ["tests/harness/test_verify.py"])
    ]
    with pytest.raises(SystemExit, match="no such module"):
        m.parse_targets(["harness/nope.py"])
    with pytest.raises(SystemExit, match="no default tests"):
        m.parse_targets(["harness/cli/__init__.py"])
    for module, tests in m.MODULES.items():  # every default names files that exist
        assert (ROOT / module).is_file() and all((ROOT / t).is_file() for t in tests)


@pytest.mark.slow
def test_quick_slice_reaches_the_threshold_and_leaves_the_tree_alone(tmp_path):
    # the CI slice: harness/runs/metrics.py against tests/harness/test_metrics.py (about a minute or two
    # on 2 cores). A score at all proves the tests imported the mutants: tests that imported the
    # checkout would kill nothing (and mutmut's forced-fail step would stop the run first).
    before = (ROOT / "harness" / "runs" / "metrics.py").read_bytes()
    out = tmp_path / "summary.json"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--json", str(out)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads(out.read_text())
    (metrics,) = summary["modules"]
    assert metrics["module"] == "harness/runs/metrics.py" and metrics["ok"] and summary["ok"]
    assert metrics["killed"] > 300 and metrics["score"] >= 0.9
    assert metrics["detected"] + len(metrics["survivors"]) == metrics["considered"]
    assert not metrics["stale_equivalents"]  # every declared equivalent still exists and survives
    assert (ROOT / "harness" / "runs" / "metrics.py").read_bytes() == before
    assert not (ROOT / "mutants").exists()


@pytest.mark.slow
def test_a_bug_planted_in_the_scratch_copy_is_seen_by_the_tests(tmp_path):
    # the scratch copy, not the checkout, is what the tests import: a bug put into the copy's
    # harness/runs/metrics.py (the gutter one pixel wider) fails mutmut's clean test run there
    m = load_script()
    scratch = m.make_scratch(tmp_path, "harness/runs/metrics.py", ["tests/harness/test_metrics.py"])
    source = scratch / "harness" / "runs" / "metrics.py"
    planted = source.read_text().replace('vp.get("gutter_px", 48.0)', 'vp.get("gutter_px", 49.0)')
    assert planted != source.read_text()
    source.write_text(planted)
    (scratch / "mutants").mkdir()
    env = {**os.environ, "PYTHONPATH": str(scratch / "mutants")}
    proc = subprocess.run(
        [sys.executable, "-m", "mutmut", "run", "--max-children", "1"],
        cwd=scratch,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode != 0
    assert "test_pixel_defaults_of_a_viewport_without_fields" in proc.stdout + proc.stderr
