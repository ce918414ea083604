"""What the session kind writes on every row besides the episode: the session's project and fix
date (what reports cluster by and window on), from a suite whose sessions carry provenance as a
mined or etai-js session does; and the sessions a --since/--until window runs. The planner writes the rows of a session whose reference is broken
at once, with no sandbox, so the real writer is seen here without Docker."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from harness.agents import AgentContext, from_spec
from harness.runs.results import ResultStore, read_rows
from harness.runs.session_kind import KIND, OpenSessions, _plan, _summary
from harness.session.window import Window
from harness.suites.kinds import RunSettings
from harness.suites.load import BUNDLED, load_suite

SOURCE = BUNDLED / "jest-bugfix"
PROVENANCE = {"repo": "left-pad", "commit": "c" * 40, "parent": "p" * 40,
              "date": "2019-03-04T23:30:00-02:00", "subject": "fix"}  # fmt: skip


def dated_suite(root: Path, n: int = 3, dates: dict[int, str | None] | None = None) -> Path:
    """The first ``n`` bundled sessions; each but the last with provenance (``dates``: a fix date
    per index, None for none), the last as written by hand."""
    lines = (SOURCE / "sessions.jsonl").read_text().splitlines()[:n]
    out = []
    for i, line in enumerate(lines):
        s = json.loads(line)
        s.pop("held_out_tests", None)  # not copied: what is tested here is the record
        if i < n - 1:
            date = (dates or {}).get(i, PROVENANCE["date"])
            s["provenance"] = {**PROVENANCE, "date": date} if date else dict(PROVENANCE, date="")
        shutil.copytree(
            SOURCE / "workspaces" / s["session_id"], root / "workspaces" / s["session_id"]
        )
        out.append(json.dumps(s))
    (root / "sessions.jsonl").write_text("".join(x + "\n" for x in out))
    (root / "suite.yaml").write_text("name: dated\ndescription: bundled sessions with provenance\n")
    return root


def test_rows_name_the_sessions_project_and_fix_date(tmp_path):
    suite = load_suite(dated_suite(tmp_path / "suite"))
    ctx = AgentContext(suite, {})
    op = OpenSessions(suite, list(suite.sessions), [from_spec("noop", ctx)], ctx,
                      RunSettings(k=3, max_steps=10))  # fmt: skip
    store = ResultStore(tmp_path / "run")
    flights = {s.session_id: {"ok": False, "reason": "broken on purpose"} for s in suite.sessions}
    _plan(op, store, None, flights)
    rows = {r["session_id"]: r for r in read_rows(tmp_path / "run" / "results.jsonl")}
    first, _, hand = (s.session_id for s in suite.sessions)
    assert rows[first]["project"] == "left-pad"
    assert rows[first]["fix_date"] == "2019-03-04T23:30:00-02:00"
    assert "project" not in rows[hand] and "fix_date" not in rows[hand]
    assert {r["status"] for r in rows.values()} == {"reference_broken"}


def test_a_window_runs_the_sessions_fixed_in_it_and_counts_the_rest(tmp_path):
    # session 0 fixed 2019-03-05 UTC, session 1 on 2021-06-01, session 2 written by hand
    root = dated_suite(tmp_path / "suite", dates={1: "2021-06-01T12:00:00+00:00"})
    settings = RunSettings(k=3, max_steps=10, sandbox="docker", fix_window=Window.of("2020-01-01"))
    op = KIND.open(root, ["noop"], settings)
    try:
        assert [s.fix_date for s in op.sessions] == ["2021-06-01T12:00:00+00:00"]
        store = ResultStore(tmp_path / "run")
        flights = {s.session_id: {"ok": False, "reason": "broken on purpose"} for s in op.sessions}
        keys, _, _ = _plan(op, store, None, flights)
        summary = _summary(op, store, keys, None)
    finally:
        op.close()
    hand = load_suite(root).sessions[2].session_id
    assert summary["sessions"] == [op.sessions[0].session_id]
    assert summary["fix_window"] == {
        "since": "2020-01-01", "until": None, "kept": 1, "outside": 1, "undated": [hand],
    }  # fmt: skip
    assert {r["session_id"] for r in store.rows()} == {op.sessions[0].session_id}
