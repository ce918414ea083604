"""Loading run folders and training folders: typed columns, suites that differ refused, bad rows named."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from harness.base.errors import InputError
from reports import load
from reports._load import STATUSES, SuiteMismatch


def test_columns_are_typed(tmp_path, make_run, make_row):
    run = make_run(
        tmp_path / "a",
        [
            make_row("s1", "x", "passed", steps_to_green=2),
            make_row("s2", "x", "reference_broken"),
            make_row("s3", "x", "failed", cursor={"file": "b.js", "line": 1, "column": 1}),
        ],
    )
    df = load(run)
    assert list(df["status"].cat.categories) == list(STATUSES)
    assert str(df["steps_to_green"].dtype) == "Int64" and str(df["step"].dtype) == "Int64"
    assert str(df["cursor_wrong_file"].dtype) == "boolean" and df["cursor_px"].dtype == "float64"
    assert df["session_id"].dtype == "string" and df["intent"].dtype == "category"
    assert df["valid"].tolist() == [True, False, True] and df["passed"].tolist() == [
        True,
        False,
        False,
    ]
    assert df["cursor_wrong_file"].tolist() == [pd.NA, pd.NA, True]
    assert df.attrs["runs"][0]["complete"] and df.attrs["notes"] == []


def test_training_folder_gives_one_run_per_step(tmp_path, make_run, make_row):
    for n in (4, 12, 8):
        make_run(
            tmp_path / "ckpt" / "harness-eval" / f"ba{n}",
            [make_row("s1", f"hfmem:r-ba{n}", "failed")],
        )
    (tmp_path / "ckpt" / "harness-eval" / "notes").mkdir()
    for path in (tmp_path / "ckpt", tmp_path / "ckpt" / "harness-eval"):
        df = load(path)
        assert sorted(df["step"].tolist()) == [4, 8, 12]
        assert set(df["series"]) == {"ckpt"}
        assert [r["step"] for r in df.attrs["runs"]] == [4, 8, 12]


def test_different_sessions_are_refused_unless_asked(tmp_path, make_run, make_row):
    a = make_run(tmp_path / "a", [make_row("s1", "x", "passed", session_hash="v1")])
    b = make_run(tmp_path / "b", [make_row("s1", "y", "passed", session_hash="v2")])
    with pytest.raises(SuiteMismatch, match="s1") as e:
        load([a, b])
    assert e.value.exit_code == 2
    df = load([a, b], allow_mismatch=True)
    assert any("differ in content" in n for n in df.attrs["notes"])
    c = make_run(
        tmp_path / "c",
        [make_row("s1", "y", "passed", session_hash="v1", suite="other")],  # its rows say so too
        suite="other",
    )
    with pytest.raises(SuiteMismatch, match="different suites"):
        load([a, c])


def test_rows_without_hashes_are_matched_by_id_and_say_so(tmp_path, make_run, make_row):
    a = make_run(tmp_path / "a", [make_row("s1", "x", "passed", session_hash=None)])
    assert "matched by id only" in load(a).attrs["notes"][0]


def test_same_agent_in_two_runs_is_two_arms(tmp_path, make_run, make_row):
    a = make_run(tmp_path / "one" / "run", [make_row("s1", "hf:m", "passed")])
    b = make_run(
        tmp_path / "two" / "run",
        [make_row("s1", "hf:m", "failed"), make_row("s1", "noop", "failed")],
    )
    assert sorted(set(load([a, b])["arm"])) == ["noop", "one/run/hf:m", "two/run/hf:m"]


@pytest.mark.parametrize(
    "content,match",
    [
        (
            {"session_id": "s", "agent": "x", "status": "exploded", "cache_key": "1"},
            "unknown status",
        ),
        ({"agent": "x", "status": "passed", "cache_key": "1"}, "no session_id"),
    ],
)
def test_bad_rows_are_input_errors(tmp_path, content, match):
    (tmp_path / "results.jsonl").write_text(json.dumps(content) + "\n")
    with pytest.raises(InputError, match=match):
        load(tmp_path)


def test_not_a_run_folder(tmp_path):
    with pytest.raises(InputError, match="not a run folder"):
        load(tmp_path)
    with pytest.raises(InputError, match="no such folder"):
        load(tmp_path / "nope")


def test_a_run_without_summary_is_incomplete(tmp_path, make_run, make_row):
    df = load(make_run(tmp_path, [make_row("s1", "x", "passed")], summary=False))
    assert df.attrs["runs"][0]["complete"] is False and df.attrs["runs"][0]["has_summary"] is False


def test_special_cased_is_a_bool_column_false_where_a_row_lacks_it(tmp_path, make_run, make_row):
    """Green on the visible verification tests, red on the held-out ones (issue #30); rows written
    before held-out tests existed have no such key: not special-cased."""
    run = make_run(
        tmp_path / "r",
        [
            make_row("s1", "x", "failed", special_cased=True),
            make_row("s2", "x", "failed", special_cased=False),
            make_row("s3", "x", "failed"),  # an older row: no key
            make_row("s4", "x", "timeout", special_cased=None),
        ],
    )
    df = load(run)
    assert df["special_cased"].dtype == bool
    assert df["special_cased"].tolist() == [True, False, False, False]


def test_incomplete_is_a_bool_column_false_where_a_row_lacks_it(tmp_path, make_run, make_row):
    """A held-out failure read as an incomplete fix (harness/runs/held_out.py); rows written before
    the distinction have no such key and still load: not incomplete."""
    run = make_run(
        tmp_path / "r",
        [
            make_row("s1", "x", "failed", special_cased=False, incomplete=True),
            make_row("s2", "x", "failed", special_cased=True),  # an older row: no key
            make_row("s3", "x", "passed", steps_to_green=1, incomplete=None),
        ],
    )
    df = load(run)
    assert df["incomplete"].dtype == bool
    assert df["incomplete"].tolist() == [True, False, False]
    assert df["special_cased"].tolist() == [False, True, False]
