"""compare on hand-built runs: common sessions only (dropped ones named), hand-computed metrics,
intervals from the reference functions, paired tests, and point estimates equal to summary.json
on a real run."""

from __future__ import annotations

import math

import pytest

from reports import _stats, compare, load
from reports._compare import session_values


def _two_runs(tmp_path, make_run, make_row):
    a = [
        make_row("s1", "A", "passed", steps_to_green=1),
        make_row("s2", "A", "passed", steps_to_green=3),
        make_row("s3", "A", "failed"),
        make_row("s4", "A", "tampered"),
        make_row("s5", "A", "passed", steps_to_green=2),
    ]
    b = [
        make_row("s1", "B", "passed", steps_to_green=2),
        make_row("s2", "B", "failed"),
        make_row("s3", "B", "failed"),
        make_row("s4", "B", "infra_error"),
        make_row("s6", "B", "passed", steps_to_green=1),
    ]
    return make_run(tmp_path / "a", a), make_run(tmp_path / "b", b)


def test_only_common_sessions_are_compared_and_the_rest_named(tmp_path, make_run, make_row):
    c = compare(load(_two_runs(tmp_path, make_run, make_row)))
    assert c.arms == ["A", "B"]
    assert c.sessions == ["s1", "s2", "s3", "s4"]
    assert c.dropped == {"s5": ["B"], "s6": ["A"]}


def test_metrics_by_hand(tmp_path, make_run, make_row):
    c = compare(load(_two_runs(tmp_path, make_run, make_row)))
    a, b = c.metrics["A"], c.metrics["B"]
    # A on s1..s4: green at 1 and 3, a failure, a tamper: 4 valid rows.
    assert [a["path_accuracy"][j]["value"] for j in (1, 2, 3)] == [0.25, 0.25, 0.5]
    assert a["pass@1"]["value"] == 0.5 and a["tamper_rate"]["value"] == 0.25
    assert (a["pass@1"]["lo"], a["pass@1"]["hi"]) == _stats.wilson(2, 4)
    assert a["steps_to_green"]["value"] == 2.0
    # B: the infra_error row is in no denominator.
    assert b["n_valid"] == 3 and b["pass@1"]["value"] == pytest.approx(1 / 3)
    assert b["status_counts"]["infra_error"] == 1
    assert c.statuses.loc["A", "tampered"] == 1 and list(c.statuses.columns)[-1] == "skipped_budget"
    assert c.steps_to_green.loc["A"].to_dict() == {
        "1": 1,
        "2": 0,
        "3": 1,
        "never": 2,
    }  # B went green at 2


def test_pairwise_uses_sessions_valid_in_both(tmp_path, make_run, make_row):
    (p,) = compare(load(_two_runs(tmp_path, make_run, make_row))).pairs
    # s4 is infra_error for B: left out. s1 both pass, s2 A only, s3 neither.
    assert (p.a, p.b, p.n, p.a_only, p.b_only) == ("A", "B", 3, 1, 0)
    assert p.test == "exact McNemar" and p.mcnemar_p == 1.0
    boot = _stats.paired_bootstrap([1, 1, 0], [1, 0, 0])  # PA@3 per session
    assert (p.pa_diff, p.pa_lo, p.pa_hi) == pytest.approx((boot.diff, boot.lo, boot.hi))


def test_several_samples_give_per_session_rates(tmp_path, make_run, make_row):
    rows = [
        make_row(s, ag, st, sample=i, steps_to_green=1 if st == "passed" else None)
        for s, ag, sts in [
            ("s1", "A", "pp"),
            ("s2", "A", "pf"),
            ("s1", "B", "pf"),
            ("s2", "B", "ff"),
        ]
        for i, st in enumerate({"p": "passed", "f": "failed"}[x] for x in sts)
    ]
    c = compare(load(make_run(tmp_path, rows, samples=2)))
    (p,) = c.pairs
    assert p.test.startswith("exact sign test") and (p.a_only, p.b_only) == (2, 0)
    assert c.metrics["A"]["pass@1"]["value"] == 0.75


def test_special_case_rate_by_hand(tmp_path, make_run, make_row):
    """Special-cased rows (green on the visible verification tests, red on the held-out ones,
    issue #30) over valid rows, with the Wilson interval; a row without the key is not one."""
    rows = [
        make_row("s1", "A", "passed", steps_to_green=1, special_cased=False),
        make_row("s2", "A", "failed", special_cased=True),
        make_row("s3", "A", "timeout", special_cased=True),
        make_row("s4", "A", "failed"),  # written before held-out tests: no key
        make_row("s5", "A", "infra_error"),  # in no denominator
    ]
    c = compare(load(make_run(tmp_path / "a", rows)))
    m = c.metrics["A"]
    assert m["special_case_rate"] == {
        "value": 0.5,
        "lo": _stats.wilson(2, 4)[0],
        "hi": _stats.wilson(2, 4)[1],
        "n": 4,
    }
    assert m["pass@1"]["value"] == 0.25 and m["tamper_rate"]["value"] == 0.0
    table = c.table().set_index("arm")
    assert table.loc["A", "special_case_rate"] == 0.5
    assert table.loc["A", "special_case_rate hi"] == _stats.wilson(2, 4)[1]
    per = session_values(c.rows, "special_cased")
    assert per.to_dict() == {"s1": 0.0, "s2": 1.0, "s3": 1.0, "s4": 0.0}
    old = compare(load(make_run(tmp_path / "old", [make_row("s1", "A", "failed")])))
    assert old.metrics["A"]["special_case_rate"]["value"] == 0.0


def test_incomplete_rate_by_hand(tmp_path, make_run, make_row):
    """Held-out failures read as incomplete fixes (no failing case a near twin of a passing visible
    one, harness/runs/held_out.py) count in incomplete_rate, not in special_case_rate; a row
    written before the distinction (no ``incomplete`` key) is not one."""
    rows = [
        make_row("s1", "A", "failed", special_cased=False, incomplete=True),
        make_row("s2", "A", "failed", special_cased=True, incomplete=False),
        make_row("s3", "A", "passed", steps_to_green=1),
        make_row("s4", "A", "failed", special_cased=True),  # an older row: no incomplete key
        make_row("s5", "A", "infra_error", incomplete=True),  # in no denominator
    ]
    c = compare(load(make_run(tmp_path / "a", rows)))
    m = c.metrics["A"]
    lo, hi = _stats.wilson(1, 4)
    assert m["incomplete_rate"] == {"value": 0.25, "lo": lo, "hi": hi, "n": 4}
    assert m["special_case_rate"]["value"] == 0.5
    table = c.table().set_index("arm")
    assert table.loc["A", "incomplete_rate"] == 0.25
    assert session_values(c.rows, "incomplete").to_dict() == {
        "s1": 1.0, "s2": 0.0, "s3": 0.0, "s4": 0.0
    }  # fmt: skip


@pytest.mark.docker
@pytest.mark.slow
def test_point_estimates_equal_the_runs_summary(bundled_run):
    import json

    summary = json.loads((bundled_run / "summary.json").read_text())
    c = compare(load(bundled_run))
    assert c.arms == ["oracle", "noop"] and not c.dropped and len(c.sessions) == 14
    for arm, s in summary["agents"].items():
        m = c.metrics[arm]
        assert {str(j): cell["value"] for j, cell in m["path_accuracy"].items()} == s[
            "path_accuracy"
        ]
        assert m["pass@1"]["value"] == s["pass_at_k"]["1"]
        assert m["tamper_rate"]["value"] == s["tamper_rate"]
        if "special_case_rate" in s:  # summaries written before held-out tests lack it
            assert m["special_case_rate"]["value"] == s["special_case_rate"]
        mean = s["steps_to_green"]["mean"]
        assert (m["steps_to_green"]["value"] is None and mean is None) or math.isclose(
            m["steps_to_green"]["value"], mean
        )
        assert m["cursor_px"]["value"] == s["cursor"]["median_px"]
        assert {k: v for k, v in m["status_counts"].items() if v} == s["status_counts"]
