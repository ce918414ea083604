"""The rule-based agents' input: a replay file is checked against the suite and the run's plan
before anything runs (exit 2 naming each problem), through the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from harness.runs.results import read_rows

ONE = "retry-default-attempts"
TWO = "duration-seconds-padding"


def _replay(tmp_path: Path, *rows: dict) -> Path:
    path = tmp_path / "replay.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _run(replay: Path, out: Path, *extra: str, sessions=(ONE, TWO)) -> list[str]:
    ids = [a for s in sessions for a in ("--session", s)]
    return ["run", "--suite", "jest-bugfix", "--agent", f"replay:{replay}", "--out", str(out),
            "--no-progress", "--workers", "1", *ids, *extra]  # fmt: skip


@pytest.mark.parametrize(
    "rows, extra, expected",
    [
        (
            [
                {"session_id": ONE, "actions": []},
                {"session_id": TWO, "actions": []},
                {"session_id": "no-such-session", "actions": []},
            ],
            (),
            "sessions not in suite jest-bugfix: no-such-session (line 3)",
        ),
        (
            [
                {"session_id": ONE, "actions": []},
                {"session_id": TWO, "actions": []},
                {"session_id": ONE, "sample": 0, "actions": [{"tool": "file_read"}]},
            ],
            (),
            f"the same session and sample more than once: {ONE} sample 0 (lines 1 and 3)",
        ),
        (
            [{"session_id": ONE, "actions": []}],
            (),
            f"no line for 1 of the run's 2 episodes: {TWO} (sample 0); --allow-missing",
        ),
        (
            [{"session_id": ONE, "actions": []}, {"session_id": TWO, "sample": 1, "actions": []}],
            ("--samples", "3"),
            f"no line for 4 of the run's 6 episodes: {ONE} (samples 1, 2), {TWO} (samples 0, 2)",
        ),
    ],
    ids=["unknown", "twice", "missing", "missing-samples"],
)
def test_a_replay_file_that_does_not_fit_the_run_exits_2_naming_it(
    tmp_path, capsys, sandbox_starts, rows, extra, expected
):
    # The file is fixed in advance: an episode it lacks would be scored as an empty rollout, a
    # line given twice silently replaced; both are the user's mistake, said before anything runs.
    replay, out = _replay(tmp_path, *rows), tmp_path / "run"
    assert main(_run(replay, out, *extra)) == 2
    err = capsys.readouterr().err
    assert f"etai: error: {replay}: {expected}" in err, err
    assert not out.exists() and sandbox_starts == []


@pytest.mark.docker
@pytest.mark.slow
def test_allow_missing_scores_a_missing_episode_as_no_actions(tmp_path, capsys):
    # Sample 1 has no line: with --allow-missing it is run, as a rollout of no actions.
    edit = {"tool": "file_read", "args": {"file": "src/retry.js"}}
    replay = _replay(tmp_path, {"session_id": ONE, "actions": [edit]})
    out = tmp_path / "run"
    argv = _run(replay, out, "--samples", "2", "--allow-missing", sessions=(ONE,))
    assert main(argv) == 0, capsys.readouterr().err
    rows = sorted(read_rows(out / "results.jsonl"), key=lambda r: r["sample"])
    assert [(r["sample"], r["steps_used"], r["status"]) for r in rows] == [
        (0, 1, "failed"),
        (1, 0, "failed"),
    ]


@pytest.mark.docker
@pytest.mark.slow
def test_bad_agent_output_is_an_invalid_action_never_infra(tmp_path, capsys):
    # A lone surrogate in an action's content, and replayed cursors at line 1e400 (a float Python
    # reads as inf) and 1e23: each is the agent's malformed output, an invalid step; an infra_error
    # row would be retried by every rerun, adding a row under the same cache key each time.
    write = {"tool": "file_write", "args": {"file": "src/retry.js", "content": "\ud800"}}
    cursor = '{"file": "src/retry.js", "line": %s, "column": 1}'
    replay = tmp_path / "replay.jsonl"
    replay.write_text(
        json.dumps({"session_id": ONE, "sample": 0, "actions": [write]}) + "\n"
        + f'{{"session_id": "{ONE}", "sample": 1, "actions": [], "cursor": {cursor % "1e400"}}}\n'
        + f'{{"session_id": "{ONE}", "sample": 2, "actions": [], "cursor": {cursor % "1e23"}}}\n'
    )  # fmt: skip
    out = tmp_path / "run"
    argv = [*_run(replay, out, "--samples", "3", sessions=(ONE,)), "--json"]
    assert main(argv) == 0, capsys.readouterr().err
    summary = json.loads(capsys.readouterr().out)["agents"][f"replay:{replay}"]
    rows = sorted(read_rows(out / "results.jsonl"), key=lambda r: r["sample"])
    assert [(r["status"], r["n_invalid"], r["cursor"]) for r in rows] == [
        ("invalid_action", 1, None)
    ] * 3
    errors = [r["steps"][0]["error"] for r in rows]
    assert "(content): not Unicode text (a lone surrogate '\\ud800' at index 0)" in errors[0]
    assert errors[1] == "replayed cursor: line must be a whole number in 1..33554433, got inf"
    assert errors[2] == "replayed cursor: line must be a whole number in 1..33554433, got 1e+23"
    assert summary["cursor"]["n_missing"] == 3, "no cursor error from a position that is none"
