"""Error bars by project (reports/_clusters.py) through the real `etai report` and `etai gate`, on
run folders whose rows the run's own writer appended (harness.runs.results.ResultStore), with the
standard errors checked against numbers worked out by hand."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from conftest import row
from etai_cmd import etai

from harness.runs.results import ResultStore, write_json_atomic

# Seven sessions: p1's three pass, p2's three fail, and one written by hand (no project) passes.
# mean 4/7; residuals +3/7 (pass) and -4/7 (fail).
#   by session: s² = (4·9/49 + 3·16/49)/6 = 2/7, SE = sqrt(2/7/7) = sqrt(2)/7 = 0.2020
#   by project: cluster sums +9/7, -12/7, +3/7; V = 3/2 · (81+144+9)/49 / 49 = 351/2401,
#   SE = 0.3823; three projects (the hand-written session is one of its own)
SE_SESSION = 2**0.5 / 7
SE_PROJECT = (351 / 2401) ** 0.5
PROJECTS = {"s1": "p1", "s2": "p1", "s3": "p1", "s4": "p2", "s5": "p2", "s6": "p2", "s7": None}


def write_rows(folder: Path, outcomes, summary: dict, agent: str = "m", steps: int = 2) -> Path:
    """A finished run of ``outcomes`` ((session, project or None, passed) each), its rows appended
    by the run's ResultStore."""
    store = ResultStore(folder)
    for sid, project, ok in outcomes:
        extra = {"project": project} if project else {}
        store.append(
            row(
                sid,
                agent,
                "passed" if ok else "failed",
                steps_to_green=steps if ok else None,
                **extra,
            )
        )
    write_json_atomic(folder / "summary.json", summary)
    return folder


def write_run(folder: Path, passed: set[str], agent: str = "m") -> Path:
    """A finished run of the seven sessions."""
    summary = {"suite": "hand", "k": 3, "samples": 1, "complete": True, "agents": {}}
    outcomes = [(sid, project, sid in passed) for sid, project in PROJECTS.items()]
    return write_rows(folder, outcomes, summary, agent)


HAND = {"suite": "hand", "k": 3, "complete": True}


def test_report_gives_both_standard_errors(tmp_path):
    run = write_run(tmp_path / "run", {"s1", "s2", "s3", "s7"})
    p = etai(
        "report", str(run), "--out", str(tmp_path / "rep"), "--format", "json", "--format", "md"
    )
    assert p.returncode == 0, p.stderr
    got = json.loads((tmp_path / "rep" / "report.json").read_text())["clustered"]["m"]
    for name in ("pass@1", "PA@2", "PA@3"):
        cell = got[name]
        assert cell["value"] == pytest.approx(4 / 7)
        assert cell["se_session"] == pytest.approx(SE_SESSION)
        assert cell["se_project"] == pytest.approx(SE_PROJECT)
        assert (cell["sessions"], cell["projects"]) == (7, 3)
    assert got["PA@1"]["value"] == 0.0 and got["PA@1"]["se_session"] == 0.0  # green at step 2
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "## Error bars by project" in md
    assert "| m | pass@1 | 0.571 | 0.202 | 0.382 | 1.89 | 7 | 3 |" in md


def test_one_project_leaves_the_project_error_undefined(tmp_path):
    outcomes = [(f"s{i}", "only", ok) for i, ok in enumerate([1, 1, 0, 1])]
    write_rows(tmp_path / "run", outcomes, HAND, steps=1)
    p = etai(
        "report",
        str(tmp_path / "run"),
        "--out",
        str(tmp_path / "rep"),
        "--format",
        "json",
        "--format",
        "md",
    )
    assert p.returncode == 0, p.stderr
    cell = json.loads((tmp_path / "rep" / "report.json").read_text())["clustered"]["m"]["pass@1"]
    assert cell["se_project"] is None and cell["projects"] == 1
    assert cell["se_session"] == pytest.approx((0.75 * 0.25 * 4 / 3 / 4) ** 0.5)  # s/sqrt(n)
    assert "by-project error is undefined" in (tmp_path / "rep" / "report.md").read_text()


def test_gate_states_the_errors_and_the_smallest_detectable_difference(tmp_path):
    run = write_run(tmp_path / "run", {"s1", "s2", "s3", "s7"})
    p = etai("gate", str(run), "--rule", "pass@1>=0.5", "--json", str(tmp_path / "g.json"))
    assert p.returncode == 0, p.stdout + p.stderr
    r = json.loads((tmp_path / "g.json").read_text())["rules"][0]
    assert r["se_session"] == pytest.approx(SE_SESSION)
    assert r["se_project"] == pytest.approx(SE_PROJECT)
    assert r["projects"] == 3 and r["mde_by"] == "project"
    assert r["mde"] == pytest.approx((1.644854 + 0.841621) * SE_PROJECT, rel=1e-5)
    assert "smallest detectable difference 0.951" in p.stdout
    p = etai(
        "gate",
        str(run),
        "--rule",
        "pass@1>=0.5",
        "--alpha",
        "0.01",
        "--json",
        str(tmp_path / "g.json"),
    )
    # absolute rules take the gate's alpha for their detectable difference too
    r = json.loads((tmp_path / "g.json").read_text())["rules"][0]
    assert r["mde"] == pytest.approx((2.326348 + 0.841621) * SE_PROJECT, rel=1e-5)


def test_gate_baseline_rule_clusters_the_paired_differences(tmp_path):
    # the candidate loses p1 (three sessions) and wins s4: per-session differences
    # -1 -1 -1 +1 0 0 0, mean -2/7; residuals -5/7 ×3, +9/7, +2/7 ×3
    #   by session: s² = (3·25 + 81 + 3·4)/49/6 = 168/294 = 4/7, SE = sqrt(4/49) = 2/7
    #   by project: sums p1 = -15/7, p2 = 9/7 + 4/7 = 13/7, s7 = 2/7; V = 3/2·(225+169+4)/49/49
    base = write_run(tmp_path / "base", {"s1", "s2", "s3", "s7"})
    cand = write_run(tmp_path / "cand", {"s4", "s7"})
    p = etai(
        "gate", str(cand), "--baseline", str(base), "--rule", "pass@1 >= baseline - 0.5",
        "--json", str(tmp_path / "g.json"),
    )  # fmt: skip
    assert p.returncode in (0, 1), p.stdout + p.stderr
    r = json.loads((tmp_path / "g.json").read_text())["rules"][0]
    assert r["se_session"] == pytest.approx(2 / 7)
    assert r["se_project"] == pytest.approx((1.5 * 398 / 49 / 49) ** 0.5)
    assert "SE of the difference" in r["detail"]


def test_nothing_varied_states_no_detectable_difference(tmp_path):
    run = write_run(tmp_path / "run", set(PROJECTS))
    p = etai("gate", str(run), "--rule", "pass@1>=0.5", "--json", str(tmp_path / "g.json"))
    assert p.returncode == 0, p.stdout + p.stderr
    r = json.loads((tmp_path / "g.json").read_text())["rules"][0]
    assert r["se_project"] == 0.0 and r["mde"] is None
    assert "nothing varied between sessions" in r["detail"]


def test_report_by_suite_pools_one_suite_per_project(tmp_path):
    """A benchmark fetched as one suite per project: each suite alone has one project (no
    project-level error), the pooled rate has both. p1's three sessions pass, p2's three fail:
    mean 0.5, by session sqrt(0.05), by project 0.5 (the example of tests/reports/test_stats.py)."""
    runs = []
    for suite, project, ok in (("bench-p1", "p1", True), ("bench-p2", "p2", False)):
        store = ResultStore(tmp_path / suite)
        for i in range(3):
            store.append(
                row(f"s{i}", "m", "passed" if ok else "failed", steps_to_green=1 if ok else None,
                    project=project, suite=suite)
            )  # fmt: skip
        write_json_atomic(
            tmp_path / suite / "summary.json", {"suite": suite, "k": 3, "complete": True}
        )
        runs.append(str(tmp_path / suite))
    out = tmp_path / "rep"
    p = etai(
        "report", *runs, "--by", "suite", "--out", str(out), "--format", "json", "--format", "md"
    )
    assert p.returncode == 0, p.stderr
    doc = json.loads((out / "report.json").read_text())
    assert doc["pooled"]["suites"] == ["bench-p1", "bench-p2"]
    for name in ("pass@1", "PA@3"):
        cell = doc["pooled"]["arms"]["m"][name]
        assert cell["value"] == 0.5 and (cell["sessions"], cell["projects"]) == (6, 2)
        assert cell["se_session"] == pytest.approx(0.05**0.5)
        assert cell["se_project"] == pytest.approx(0.5)
    alone = doc["suites"][0]["clustered"]["m"]["pass@1"]
    assert alone["projects"] == 1 and alone["se_project"] is None
    md = (out / "report.md").read_text()
    assert "## Pooled over suites: error bars by project" in md
    assert "| m | pass@1 | 0.500 | 0.224 | 0.500 | 2.24 | 6 | 2 |" in md


def test_gate_sizes_by_the_larger_error_when_projects_agree_by_chance(tmp_path):
    # p1 and p2 both pass, fail, pass: every project's residuals sum to 0, so the project SE is 0
    # (two projects that happen to agree). By session: mean 2/3, residuals +1/3 (four) and -2/3
    # (two), s² = (4/9 + 8/9)/5 = 4/15, SE = sqrt(4/15/6) = sqrt(2/45)
    pairs = [("p1", 1), ("p1", 0), ("p1", 1), ("p2", 1), ("p2", 0), ("p2", 1)]
    outcomes = [(f"s{i}", project, ok) for i, (project, ok) in enumerate(pairs)]
    write_rows(tmp_path / "run", outcomes, HAND, steps=1)
    p = etai(
        "gate", str(tmp_path / "run"), "--rule", "pass@1>=0.5", "--json", str(tmp_path / "g.json")
    )
    assert p.returncode == 0, p.stdout + p.stderr
    r = json.loads((tmp_path / "g.json").read_text())["rules"][0]
    assert r["se_project"] == pytest.approx(0.0, abs=1e-12)
    assert r["se_session"] == pytest.approx((2 / 45) ** 0.5)
    assert r["mde_by"] == "session"
    assert r["mde"] == pytest.approx((1.644854 + 0.841621) * (2 / 45) ** 0.5, rel=1e-5)
    assert "session-level SE: the larger here" in r["detail"]
