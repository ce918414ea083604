"""Crash-safe result storage: torn lines, duplicates, infra retries, atomic JSON."""

from __future__ import annotations

import json

from harness.results import ResultStore, cache_key, read_rows, write_json_atomic


def test_cache_key_is_stable_and_order_sensitive():
    assert cache_key("a", 1, {"x": 1, "y": 2}) == cache_key("a", 1, {"y": 2, "x": 1})
    assert cache_key("a", 1) != cache_key(1, "a")
    assert len(cache_key("a")) == 32


def test_append_resume_and_terminal_status(tmp_path):
    s = ResultStore(tmp_path)
    s.append({"cache_key": "k1", "status": "passed"})
    s.append({"cache_key": "k2", "status": "infra_error"})
    again = ResultStore(tmp_path)
    assert again.has("k1") and not again.has("k2")  # infra errors are retried
    again.append({"cache_key": "k2", "status": "failed"})
    rows = {r["cache_key"]: r["status"] for r in read_rows(tmp_path / "results.jsonl")}
    assert rows == {"k1": "passed", "k2": "failed"}
    assert [r["cache_key"] for r in again.rows(["k2"])] == ["k2"]


def test_torn_last_line_is_ignored_and_cut_before_the_next_append(tmp_path):
    p = tmp_path / "results.jsonl"
    p.write_text(json.dumps({"cache_key": "k1", "status": "passed"}) + "\n" + '{"cache_key": "k2", "sta')
    assert [r["cache_key"] for r in read_rows(p)] == ["k1"]
    s = ResultStore(tmp_path)
    assert not s.has("k2")
    s.append({"cache_key": "k2", "status": "passed"})
    lines = p.read_text().splitlines()
    assert len(lines) == 2 and all(json.loads(line) for line in lines)


def test_duplicates_first_terminal_row_wins(tmp_path):
    p = tmp_path / "results.jsonl"
    rows = [{"cache_key": "k", "status": "passed", "n": 1}, {"cache_key": "k", "status": "failed", "n": 2}]
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert read_rows(p) == [rows[0]]


def test_write_json_atomic_leaves_no_temp_file(tmp_path):
    write_json_atomic(tmp_path / "s.json", {"a": 1})
    write_json_atomic(tmp_path / "s.json", {"a": 2})
    assert json.loads((tmp_path / "s.json").read_text()) == {"a": 2}
    assert [f.name for f in tmp_path.iterdir()] == ["s.json"]
