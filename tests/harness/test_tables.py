"""The table printed after a run: a ``skipped`` column only when a time budget kept episodes
from starting, so a plain run's table (the README's) is unchanged."""

from __future__ import annotations

from harness.base.tables import grid, session_table
from harness.runs import metrics


def _summary(rows_by_agent: dict[str, list[dict]], *, complete: bool) -> dict:
    return {
        "suite": "s",
        "n_sessions": 2,
        "k": 1,
        "max_steps": 2,
        "samples": 1,
        "image": "img",
        "out": "runs/s",
        "complete": complete,
        "agents": {a: metrics.summarize(rows, k=1) for a, rows in rows_by_agent.items()},
    }


def _row(sid: str, status: str, stg: int | None = None) -> dict:
    return {"session_id": sid, "status": status, "steps_to_green": stg}


def test_no_skipped_column_without_skipped_rows():
    table = session_table(_summary({"oracle": [_row("a", "passed", 1)]}, complete=True))
    head = table.splitlines()[1].split()
    assert head[-2:] == ["infra", "broken"] and "INCOMPLETE" not in table


def test_skipped_rows_get_a_column_and_an_incomplete_run():
    rows = {
        "hfmem:x": [_row("a", "passed", 1), _row("b", "skipped_budget")],
        "noop": [_row("a", "failed"), _row("b", "failed")],
    }
    lines = session_table(_summary(rows, complete=False)).splitlines()
    assert lines[1].split()[-1] == "skipped"
    hf, noop = lines[2].split(), lines[3].split()
    # hf: PA@1 over its one run episode (1/1), 1 skipped; noop: 0/2, none skipped
    assert (hf[1], hf[-1], noop[1], noop[-1]) == ("1.000", "1", "0.000", "0")
    assert "INCOMPLETE" in lines[-1] and "skipped" in lines[-1]


def test_a_grid_of_no_rows_is_its_header():
    # `etai suite mine` prints its left-out reasons as a grid, and a mine may leave none out.
    assert grid(["left out because", "commits"], []) == ["left out because  commits"]
