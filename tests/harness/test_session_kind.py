"""What the session kind writes on every row besides the episode: the session's project and fix
date (what reports cluster by and window on), from a suite whose sessions carry provenance as a
mined or etai-js session does. The planner writes the rows of a session whose reference is broken
at once, with no sandbox, so the real writer is seen here without Docker."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from harness.agents import AgentContext, from_spec
from harness.runs.results import ResultStore, read_rows
from harness.runs.session_kind import OpenSessions, _plan
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
