"""`etai suite record` (harness/authoring/record.py): real results written back, sessions in parallel."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.cli import main

pytestmark = [pytest.mark.docker, pytest.mark.slow]

BUNDLED = Path(__file__).resolve().parents[2] / "suites" / "jest-bugfix"


def _small_suite(root: Path, n: int) -> tuple[Path, list[dict]]:
    """The bundled suite's first ``n`` sessions, each step's recorded result replaced by a stale one."""
    lines = [json.loads(x) for x in (BUNDLED / "sessions.jsonl").read_text().splitlines() if x]
    root.mkdir()
    shutil.copy(BUNDLED / "suite.yaml", root / "suite.yaml")
    kept = lines[:n]
    for s in kept:
        shutil.copytree(
            BUNDLED / "workspaces" / s["session_id"], root / "workspaces" / s["session_id"]
        )
        shutil.copytree(BUNDLED / s["held_out_tests"], root / s["held_out_tests"])
        for step in s["execution_trace"]:
            step["execution_result"] = {"status": "stale"}
    (root / "sessions.jsonl").write_text("".join(json.dumps(s) + "\n" for s in kept))
    return root, kept


def test_record_writes_what_the_tools_return_with_sessions_in_parallel(tmp_path, capsys):
    suite, before = _small_suite(tmp_path / "suite", 3)
    assert main(["suite", "record", str(suite), "--workers", "2"]) == 0
    assert "recorded 3 sessions" in capsys.readouterr().out
    after = [json.loads(x) for x in (suite / "sessions.jsonl").read_text().splitlines()]
    assert [s["session_id"] for s in after] == [s["session_id"] for s in before]  # order kept
    runs_before_edit = 0
    for old, new in zip(before, after, strict=True):
        assert {k: v for k, v in new.items() if k != "execution_trace"} == {
            k: v for k, v in old.items() if k != "execution_trace"
        }
        for step in new["execution_trace"]:
            result = step["execution_result"]
            assert result["status"] != "stale" and "duration_s" not in result, step
        # A test run before the first edit ran the session's failing tests: Jest said failed.
        for step in new["execution_trace"]:
            if step["tool_called"] in ("file_edit", "file_write"):
                break
            if step["tool_called"] == "jest_run":
                assert step["execution_result"]["status"] == "failed", step
                runs_before_edit += 1
    assert runs_before_edit > 0  # the check above was not vacuous


def test_record_refuses_zero_workers_and_writes_nothing(tmp_path, capsys):
    suite, _ = _small_suite(tmp_path / "suite", 1)
    text = (suite / "sessions.jsonl").read_text()
    assert main(["suite", "record", str(suite), "--workers", "0"]) == 2
    assert "workers must be at least 1" in capsys.readouterr().err
    assert (suite / "sessions.jsonl").read_text() == text
