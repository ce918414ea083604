"""The shared records: one status enum, rows stamped with their schema version on write and held
to it on read (a row from a newer etai is refused by file and line, an older one is read)."""

from __future__ import annotations

import json

import pytest

from harness.base.errors import InputError
from harness.runs.results import ResultStore, read_rows
from harness.session import records
from harness.session.records import SCHEMA_VERSION, Status


def test_one_status_enum_serves_sandboxes_rows_and_reports():
    from harness import sandbox
    from harness.runs import metrics
    from reports._load import STATUSES

    assert sandbox.Status is Status
    assert STATUSES == tuple(s.value for s in Status) == (
        "passed", "failed", "timeout", "memory_limit", "output_limit", "invalid_action", "tampered",
        "infra_error", "reference_broken", "skipped_budget",
    )  # fmt: skip
    assert metrics.EXCLUDED == ("reference_broken", "infra_error", "skipped_budget")
    assert records.NON_TERMINAL == {"infra_error", "skipped_budget"}


def test_a_skipped_budget_row_is_not_run_work_that_a_rerun_replaces(tmp_path):
    """An episode a time budget kept from starting is no verdict: the next run's row replaces it,
    as an infra_error row is replaced, and a terminal row is never replaced by one."""
    store = ResultStore(tmp_path)
    store.append({"cache_key": "a", "status": "skipped_budget", "reason": "not started"})
    assert not store.has("a")  # a rerun runs it
    store.append({"cache_key": "a", "status": "failed"})
    store.append({"cache_key": "b", "status": "passed"})
    store.append({"cache_key": "b", "status": "skipped_budget"})
    got = {r["cache_key"]: r["status"] for r in ResultStore(tmp_path).rows(["a", "b"])}
    assert got == {"a": "failed", "b": "passed"}


def test_append_stamps_the_schema_version_and_refuses_malformed_rows(tmp_path):
    store = ResultStore(tmp_path)
    store.append({"cache_key": "a", "status": "passed"})
    [line] = (tmp_path / "results.jsonl").read_text().splitlines()
    assert json.loads(line) == {
        "cache_key": "a",
        "status": "passed",
        "schema_version": SCHEMA_VERSION,
    }
    with pytest.raises(ValueError, match="unknown status 'green'"):
        store.append({"cache_key": "b", "status": "green"})
    with pytest.raises(ValueError, match="needs a cache_key"):
        store.append({"status": "passed"})
    assert [r["cache_key"] for r in read_rows(tmp_path / "results.jsonl")] == ["a"]


def test_rows_of_a_newer_etai_are_refused_by_line_and_older_ones_read(tmp_path):
    path = tmp_path / "results.jsonl"
    rows = [
        {"cache_key": "old", "status": "failed"},  # written before schema_version existed
        {"cache_key": "now", "status": "passed", "schema_version": SCHEMA_VERSION},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert [r["cache_key"] for r in read_rows(path)] == ["old", "now"]
    newer = {"cache_key": "new", "status": "passed", "schema_version": SCHEMA_VERSION + 1}
    with path.open("a") as f:
        f.write(json.dumps(newer) + "\n")
    with pytest.raises(
        InputError, match=rf"{path}: line 3: schema_version {SCHEMA_VERSION + 1} is newer"
    ):
        read_rows(path)


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        ({"cache_key": "k", "status": "passed"}, None),
        ({"cache_key": "k"}, None),  # a preflight verdict has no status
        ({"status": "passed"}, "not a result row (no cache_key)"),
        ([1], "not a result row (no cache_key)"),
        ({"cache_key": "k", "status": "won"}, "unknown status 'won'"),
        ({"cache_key": "k", "schema_version": "1"}, "schema_version '1' is newer"),
    ],
)
def test_problem_names_what_is_wrong(obj, expected):
    got = records.problem(obj)
    assert got == expected if expected is None else got.startswith(expected)


def test_summary_carries_the_schema_version():
    assert records.summary(kind="sessions") == {
        "schema_version": SCHEMA_VERSION,
        "kind": "sessions",
    }
