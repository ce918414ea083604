"""Results by fix date (reports/_dates.py) through the real `etai report` and `etai gate`: a
--since/--until window keeps the sessions fixed in it and counts those left out (those without a
fix date too), bad dates are exit 2 with nothing written, and the report shows each arm by year."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from conftest import row
from etai_cmd import etai

from harness.runs.results import ResultStore, write_json_atomic

# session -> (fix date, passed): two fixes of 2018 (one failed), three of 2023 (all passed), one
# of 2023-12-31 23:30 -02:00 (a fix of 2024 in UTC, failed) and one written by hand (passed)
SESSIONS = {
    "old-1": ("2018-11-02T08:59:35+01:00", True),
    "old-2": ("2018-11-05T21:38:01+01:00", False),
    "new-1": ("2023-01-10T10:00:00Z", True),
    "new-2": ("2023-06-01T10:00:00Z", True),
    "new-3": ("2023-12-31T10:00:00Z", True),
    "edge": ("2023-12-31T23:30:00-02:00", False),
    "hand": (None, True),
}


def write_run(folder: Path, agent: str = "m", flip: set[str] = frozenset()) -> Path:
    store = ResultStore(folder)
    for sid, (fixed, ok) in SESSIONS.items():
        ok = ok != (sid in flip)
        extra = {"fix_date": fixed, "project": "p"} if fixed else {}
        store.append(
            row(sid, agent, "passed" if ok else "failed", steps_to_green=1 if ok else None, **extra)
        )
    write_json_atomic(
        folder / "summary.json",
        {"suite": "hand", "k": 3, "samples": 1, "complete": True, "sessions": list(SESSIONS)},
    )
    return folder


def test_report_window_keeps_the_sessions_fixed_in_it(tmp_path):
    run = write_run(tmp_path / "run")
    out = tmp_path / "rep"
    p = etai("report", str(run), "--out", str(out), "--format", "json", "--format", "md",
             "--since", "2023-01-01", "--until", "2023-12-31")  # fmt: skip
    assert p.returncode == 0, p.stderr
    doc = json.loads((out / "report.json").read_text())
    assert doc["sessions"] == ["new-1", "new-2", "new-3"]  # "edge" is 2024-01-01 in UTC
    assert doc["arms"][0]["pass@1"]["value"] == 1.0
    note = (
        "--since/--until: 3 session(s) fixed from 2023-01-01 to 2023-12-31 kept; 3 outside the "
        "window left out; 1 without a fix date left out"
    )
    assert note in doc["notes"]
    assert note in (out / "report.md").read_text()


def test_report_shows_each_arm_by_year(tmp_path):
    run = write_run(tmp_path / "run")
    p = etai("report", str(run), "--out", str(tmp_path / "rep"), "--format", "md")
    assert p.returncode == 0, p.stderr
    md = (tmp_path / "rep" / "report.md").read_text()
    table = md.split("## Results by fix date")[1].split("\n## ")[0]
    lines = [x for x in table.splitlines() if x.startswith("| m |")]
    assert lines == [
        "| m | 2018 | 2 | 2 | 0.500 [0.095, 0.905] | 0.500 [0.095, 0.905] |",
        "| m | 2023 | 3 | 3 | 1.000 [0.439, 1.000] | 1.000 [0.439, 1.000] |",
        "| m | 2024 | 1 | 1 | 0.000 [0.000, 0.793] | 0.000 [0.000, 0.793] |",
        "| m | no fix date | 1 | 1 | 1.000 [0.207, 1.000] | 1.000 [0.207, 1.000] |",
    ]


def test_gate_window(tmp_path):
    run = write_run(tmp_path / "run")
    p = etai("gate", str(run), "--rule", "pass@1>=0.9", "--json", str(tmp_path / "g.json"))
    assert p.returncode == 1  # 4 of 7 over every session
    p = etai("gate", str(run), "--rule", "pass@1>=0.9", "--since", "2023-01-01",
             "--until", "2023-12-31", "--json", str(tmp_path / "g.json"))  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    result = json.loads((tmp_path / "g.json").read_text())
    assert result["rules"][0]["value"] == 1.0
    assert [s["session_id"] for s in result["sessions"]] == ["new-1", "new-2", "new-3"]
    assert result["notes"] == [
        f"{run}: --since/--until: 3 session(s) fixed from 2023-01-01 to 2023-12-31 kept; "
        "3 outside the window left out; 1 without a fix date left out"
    ]
    cfg = tmp_path / "gate.yaml"
    cfg.write_text("rules: ['pass@1 >= baseline']\nsince: 2023-01-01\nuntil: 2023-12-31\n")
    base = write_run(tmp_path / "base", flip={"old-1", "old-2"})  # differs only before 2023
    p = etai("gate", str(run), "--baseline", str(base), "--config", str(cfg))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "on 3 sessions" in p.stdout


def test_bad_windows_are_exit_2_and_write_nothing(tmp_path):
    run = write_run(tmp_path / "run")
    for args in (
        ["report", str(run), "--out", str(tmp_path / "rep"), "--since", "2023-02-30"],
        ["report", str(run), "--out", str(tmp_path / "rep"), "--since", "2030-01-01"],
        ["gate", str(run), "--rule", "pass@1>=0.5", "--until", "Dec 2023",
         "--json", str(tmp_path / "g.json")],
        ["gate", str(run), "--rule", "pass@1>=0.5", "--since", "2024-01-02",
         "--until", "2024-01-01", "--json", str(tmp_path / "g.json")],
    ):  # fmt: skip
        p = etai(*args)
        assert p.returncode == 2, (args, p.stdout, p.stderr)
        assert "--since" in p.stderr or "--until" in p.stderr
    assert not (tmp_path / "rep").exists() and not (tmp_path / "g.json").exists()
    p = etai("report", str(run), "--out", str(tmp_path / "rep"), "--since", "2030-01-01")
    assert "no session of the runs was fixed on or after 2030-01-01" in p.stderr
    assert "(6 outside the window, 1 without a fix date)" in p.stderr
