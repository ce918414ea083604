"""bench/real_suite_throughput.py: each oracle episode's floor and ratio, read from the rows'
``jest_s`` (harness/runs/loop.py records it; tests/harness/test_loop.py checks it on a real
episode). The rows here are written by hand: what the bench makes of them is the subject."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from script_module import load  # noqa: E402

bench = load("bench/real_suite_throughput.py")


def _row(session: str, wall: float, agent: float, final: float, graded: float = 0.0) -> dict:
    return {
        "session_id": session,
        "duration_s": wall,
        "jest_s": {"agent": agent, "graded": graded or final, "final": final},
    }


def test_the_floor_is_the_agents_jest_time_plus_the_final_graded_run():
    rows = [_row("b", 9.0, 1.0, 2.0, graded=5.0), _row("a", 4.0, 0.5, 1.5), _row("c", 6.0, 0, 1.0)]
    got = bench.floors(rows)
    assert [e["session"] for e in got["episodes"]] == ["a", "b", "c"]
    a, b, c = got["episodes"]
    assert (a["floor_s"], a["ratio"]) == (2.0, 2.0)
    assert (b["floor_s"], b["ratio"], b["graded_jest_s"]) == (3.0, 3.0, 5.0)
    assert (c["floor_s"], c["ratio"]) == (1.0, 6.0)
    assert got["floor_p50_s"] == 2.0 and got["ratio_p50"] == 3.0


def test_rows_without_a_floor_are_left_out_and_none_leaves_nothing():
    old = {"session_id": "x", "duration_s": 5.0}  # a checkout older than jest_s
    assert bench.floors([old]) == {}
    assert bench.floors([_row("z", 3.0, 0.0, 0.0)]) == {}  # no Jest ran: no ratio to give
    assert [e["session"] for e in bench.floors([old, _row("y", 3.0, 1, 1)])["episodes"]] == ["y"]


def test_a_suite_folder_without_sessions_is_refused_before_anything_runs(tmp_path, capsys):
    import pytest

    with pytest.raises(SystemExit) as e:
        bench.main(["--suite", str(tmp_path)])
    assert e.value.code == 2 and "holds no sessions.jsonl" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:  # one of the two ways to name the suite, not both
        bench.main(["--suite", str(tmp_path), "--project", "dayjs"])
    assert e.value.code == 2
