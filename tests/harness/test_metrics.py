"""Metrics against values computed by hand (the arithmetic is in the comments)."""

from __future__ import annotations

import math

import pytest

from harness import metrics

VP = {"scroll_top_line": 0, "line_height_px": 18, "char_width_px": 7.2, "gutter_px": 48, "zoom": 1.0}


def row(sid, status, stg=None, **kw):
    return {"session_id": sid, "status": status, "steps_to_green": stg, **kw}


ROWS = [
    row("a", "passed", 1),
    row("b", "passed", 3),
    row("c", "failed"),
    row("d", "passed", 2),
    row("e", "reference_broken"),  # never in a denominator
    row("f", "infra_error"),  # incomplete work, reported, not counted
]


def test_path_accuracy_curve_excludes_broken_and_infra():
    # valid rows: a, b, c, d (4). green within 1: a -> 1/4; within 2: a, d -> 2/4; within 3: a, b, d -> 3/4
    assert metrics.path_accuracy(ROWS, 3) == {1: 0.25, 2: 0.5, 3: 0.75}


def test_path_accuracy_empty_is_none_not_zero():
    assert metrics.path_accuracy([], 2) == {1: None, 2: None}
    assert metrics.path_accuracy([row("x", "reference_broken")], 1) == {1: None}


def test_steps_to_green():
    # green rows: 1, 3, 2 -> mean 2, median 2
    assert metrics.steps_to_green(ROWS) == {"n": 3, "mean": 2.0, "median": 2}
    assert metrics.steps_to_green([]) == {"n": 0, "mean": None, "median": None}


def test_lcs_and_path_match():
    assert metrics.lcs("ABCBDAB", "BDCABA") == 4  # textbook example: BCBA
    human = [["jest_run", "t.js"], ["file_read", "a.js"], ["file_edit", "a.js"]]
    agent = [["file_read", "a.js"], ["jest_run", "t.js"], ["file_edit", "a.js"], ["jest_run", "t.js"]]
    # first 3 of each: agent (read a, jest t, edit a) vs human (jest t, read a, edit a): LCS 2 of 3
    assert metrics.path_match(agent, human, 3) == pytest.approx(2 / 3)
    assert metrics.path_match([], [], 3) == 1.0
    assert metrics.path_match([], human, 3) == 0.0
    # k=1: (read a) vs (jest t): 0
    assert metrics.path_match(agent, human, 1) == 0.0


def test_pass_at_k_uses_unbiased_estimator():
    rows = [row("a", "passed"), row("a", "failed"), row("a", "failed"),  # n=3, c=1
            row("b", "passed"), row("b", "passed"), row("b", "failed"),  # n=3, c=2
            row("z", "reference_broken")]
    # pass@1 = mean(c/n) = (1/3 + 2/3) / 2 = 0.5
    # pass@2: a: 1 - C(2,2)/C(3,2) = 1 - 1/3 = 2/3; b: 1 - C(1,2)/C(3,2) = 1 - 0 = 1 -> mean 5/6
    got = metrics.pass_at_k(rows, [1, 2, 5])
    assert got[1] == pytest.approx(0.5) and got[2] == pytest.approx(5 / 6)
    assert 5 not in got  # k larger than samples per session is not reported
    assert metrics.pass_at_k([], [1]) == {}


def test_pixel_position_through_viewport():
    # x = 48 + (10-1)*7.2*1 = 112.8; y = (5-1-0)*18*1 = 72
    assert metrics.pixel(5, 10, VP) == pytest.approx((112.8, 72.0))
    zoomed = {**VP, "zoom": 2.0, "scroll_top_line": 2}
    # x = 48 + 9*7.2*2 = 177.6; y = (5-1-2)*18*2 = 72
    assert metrics.pixel(5, 10, zoomed) == pytest.approx((177.6, 72.0))


def test_cursor_error():
    t = {"file": "a.js", "line": 5, "column": 10, "placement": "before"}
    rows = [
        row("a", "passed", cursor={"file": "a.js", "line": 5, "column": 10, "placement": "before"}, cursor_target=t, viewport=VP),
        # 3 lines down, 4 columns right: dx = 4*7.2 = 28.8, dy = 3*18 = 54 -> 61.2 px
        row("b", "failed", cursor={"file": "a.js", "line": 8, "column": 14, "placement": "after"}, cursor_target=t, viewport=VP),
        row("c", "failed", cursor={"file": "b.js", "line": 1, "column": 1, "placement": "before"}, cursor_target=t, viewport=VP),
        row("d", "failed", cursor=None, cursor_target=t, viewport=VP),
        row("e", "reference_broken", cursor={"file": "b.js", "line": 1, "column": 1}, cursor_target=t, viewport=VP),
    ]
    c = metrics.cursor_error(rows)
    assert c["n"] == 3 and c["n_missing"] == 1
    assert c["median_px"] == pytest.approx((0 + math.hypot(28.8, 54)) / 2)
    assert c["mean_px"] == pytest.approx(math.hypot(28.8, 54) / 2)
    assert c["mean_line_error"] == pytest.approx(1.5)
    assert c["placement_accuracy"] == pytest.approx(0.5)
    assert c["wrong_file_rate"] == pytest.approx(1 / 3)


def test_cursor_error_empty():
    assert metrics.cursor_error([]) == {"n": 0, "n_missing": 0, "median_px": None, "mean_px": None,
                                        "mean_line_error": None, "placement_accuracy": None, "wrong_file_rate": None}


def test_summarize_reports_broken_and_infra_separately():
    s = metrics.summarize(ROWS, k=3)
    assert s["n_rows"] == 6 and s["n_valid"] == 4
    assert s["reference_broken"] == ["e"] and s["n_infra_error"] == 1
    assert s["status_counts"] == {"failed": 1, "infra_error": 1, "passed": 3, "reference_broken": 1}
    assert s["pass_at_k"] == {1: 0.75}
