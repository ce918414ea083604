"""The fix-date window (harness/session/window.py) and `etai run --since/--until`: dates read as
UTC days, both ends inclusive, bad dates refused with exit 2 before anything runs, and a suite
windowed to nothing refused rather than run as an empty pass."""

from __future__ import annotations

import sys
from datetime import date
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from test_session_kind import dated_suite

from harness.base.errors import InputError
from harness.cli import main
from harness.session.window import Window, fix_day, note


def test_fix_dates_are_utc_days():
    assert fix_day("2019-03-04T23:30:00-02:00", where="s") == date(2019, 3, 5)
    assert fix_day("2019-03-05T00:30:00+01:00", where="s") == date(2019, 3, 4)
    assert fix_day("2019-03-04T10:00:00Z", where="s") == date(2019, 3, 4)
    assert fix_day("2019-03-04", where="s") == date(2019, 3, 4)
    with pytest.raises(InputError, match="session x: fix date 'last tuesday' is not ISO 8601"):
        fix_day("last tuesday", where="session x")


def test_window_bounds_are_inclusive_and_checked():
    w = Window.of("2019-03-01", "2019-03-31")
    assert w.holds(date(2019, 3, 1)) and w.holds(date(2019, 3, 31))
    assert not w.holds(date(2019, 2, 28)) and not w.holds(date(2019, 4, 1))
    assert Window.of(since="2020-01-01").holds(date(2999, 1, 1))
    assert not Window.of() and Window.of(until="2020-01-01")
    assert Window.of(date(2020, 1, 1)).since == date(2020, 1, 1)  # as YAML reads a date
    with pytest.raises(InputError, match=r"--since: not an ISO date \(YYYY-MM-DD\): '2019-13-01'"):
        Window.of("2019-13-01")
    with pytest.raises(InputError, match="--until: not an ISO date"):
        Window.of(until="yesterday")
    with pytest.raises(InputError, match="2020-02-01 is after --until 2020-01-01"):
        Window.of("2020-02-01", "2020-01-01")


def test_pick_splits_kept_outside_and_undated():
    items = {"a": "2019-03-04T23:30:00-02:00", "b": "2018-01-01T00:00:00Z", "c": None, "d": ""}
    got = Window.of("2019-03-05").pick(items, items.get, str)
    assert (got.kept, got.outside, got.undated) == (["a"], ["b"], ["c", "d"])
    with pytest.raises(InputError, match="item e: fix date 'soon'"):
        Window.of("2019-03-05").pick({"e": "soon"}, {"e": "soon"}.get, lambda x: f"item {x}")
    text = note({"since": "2019-03-05", "until": None, "kept": 1, "outside": 1, "undated": ["c"]})
    assert text == (
        "--since/--until: 1 session(s) fixed on or after 2019-03-05; 1 outside the window; "
        "1 without a fix date left out (c)"
    )


@pytest.mark.parametrize(
    "flags,message",
    [
        (["--since", "2019-02-30"], "--since: not an ISO date"),
        (["--until", "03/04/2019"], "--until: not an ISO date"),
        (["--since", "2020-01-02", "--until", "2020-01-01"], "is after --until"),
    ],
)
def test_etai_run_refuses_bad_dates_with_exit_2_and_writes_nothing(
    tmp_path, capsys, flags, message
):
    out = tmp_path / "run"
    code = main(["run", "--suite", "jest-bugfix", "--agent", "noop", "--out", str(out), *flags])
    assert code == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_etai_run_refuses_a_window_with_no_session(tmp_path, capsys):
    suite = dated_suite(tmp_path / "suite")  # two sessions fixed on 2019-03-05 UTC, one undated
    out = tmp_path / "run"
    code = main(["run", "--suite", str(suite), "--agent", "noop", "--out", str(out),
                 "--since", "2019-03-06"])  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err
    assert "no session of dated was fixed on or after 2019-03-06" in err
    assert "(2 outside the window, 1 without a fix date)" in err
    assert not out.exists()
    code = main(["run", "--suite", "humaneval", "--agent", "noop", "--out", str(out),
                 "--until", "2019-03-06"])  # fmt: skip
    assert code == 2 and "task has no fix date" in capsys.readouterr().err
