"""A damaged run through the real `etai gate` and `etai report`: a row of a session the suite does
not have, a row of another suite, a row of another version of a session, a session left without a
row. The gate passes on none of them unless told (--allow-partial), and both commands name what is
foreign and what is missing. The run is real (`etai run`, noop on three bundled sessions), then
edited as a hand or a stray copy would."""

from __future__ import annotations

import json
import shutil

import pytest

from harness.cli import main

SESSIONS = ["retry-default-attempts", "profile-display-name-null", "paginate-page-size-off-by-one"]


@pytest.fixture(scope="module")
def real_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "noop"
    argv = ["run", "--suite", "jest-bugfix", "--agent", "noop", "--out", str(out)]
    argv += [x for s in SESSIONS for x in ("--session", s)]
    assert main([*argv, "--no-progress", "--workers", "2"]) == 0
    return out


def _damaged(real_run, tmp_path, edit):
    """A copy of the real run whose rows ``edit`` changed (a list of row dicts in, out)."""
    run = tmp_path / "run"
    shutil.copytree(real_run, run)
    f = run / "results.jsonl"
    rows = edit([json.loads(line) for line in f.read_text().splitlines()])
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run


def _rename(rows, i, **fields):
    return [{**r, **fields} if j == i else r for j, r in enumerate(rows)]


DAMAGE = {
    "a session the suite lacks": (
        lambda rows: _rename(rows, 0, session_id="not-a-session"),
        "not-a-session (not a session of jest-bugfix)",
    ),
    "a row of another suite": (
        lambda rows: _rename(rows, 0, suite="humaneval"),
        "(a row of suite humaneval)",
    ),
    "another version of a session": (
        lambda rows: _rename(rows, 0, session_hash="0" * 64),
        "(a row of another version of the session)",
    ),
}


@pytest.mark.docker
@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_gate_on_a_run_missing_a_session_is_exit_3_unless_allow_partial(
    real_run, tmp_path, capsys, damage
):
    edit, foreign = DAMAGE[damage]
    run = _damaged(real_run, tmp_path, edit)
    gone = json.loads((real_run / "results.jsonl").read_text().splitlines()[0])["session_id"]
    assert main(["gate", str(run), "--rule", "pass@1>=0", "--rule", "tamper_rate==0"]) == 3
    out, err = capsys.readouterr()
    assert f"noop has no row for 1 of the run's 3 session(s): {gone}" in out, out
    assert "--allow-partial" in err and foreign in out, out + err
    rc = main(
        [
            "gate",
            str(run),
            "--rule",
            "pass@1>=0",
            "--allow-partial",
            "--json",
            str(tmp_path / "g.json"),
        ]
    )
    out, err = capsys.readouterr()
    assert rc == 0 and foreign in out and f"1 of the run's 3 session(s): {gone}" in out, out
    result = json.loads((tmp_path / "g.json").read_text())
    assert len(result["sessions"]) == 2 and gone not in {
        s["session_id"] for s in result["sessions"]
    }


@pytest.mark.docker
def test_a_foreign_row_beside_every_session_is_left_out_and_named(real_run, tmp_path, capsys):
    run = _damaged(
        real_run,
        tmp_path,
        lambda rows: [*rows, {**rows[0], "session_id": "stray", "cache_key": "stray"}],
    )
    js = tmp_path / "g.json"
    assert main(["gate", str(run), "--rule", "pass@1>=0", "--json", str(js)]) == 0
    assert "stray (not a session of jest-bugfix)" in capsys.readouterr().out
    assert sorted(s["session_id"] for s in json.loads(js.read_text())["sessions"]) == sorted(
        SESSIONS
    )


@pytest.mark.docker
def test_a_report_on_a_damaged_run_names_what_is_foreign_and_missing(real_run, tmp_path, capsys):
    run = _damaged(real_run, tmp_path, lambda rows: _rename(rows, 0, session_id="not-a-session"))
    gone = json.loads((real_run / "results.jsonl").read_text().splitlines()[0])["session_id"]
    assert main(["report", str(run), "--out", str(tmp_path / "rep"), "--format", "md"]) == 0
    err = capsys.readouterr().err
    md = (tmp_path / "rep" / "report.md").read_text()
    for text in (err, md):
        assert "not-a-session (not a session of jest-bugfix)" in text, text
        assert f"noop has no row for 1 of the run's 3 session(s): {gone}" in text, text
    assert "| not-a-session" not in md  # left out of the numbers


def test_an_older_summary_counts_what_it_cannot_name(tmp_path, make_run, make_row, capsys):
    """A summary written before runs named their sessions states n_sessions: a gate on an agent
    with fewer sessions than that is exit 3 all the same."""
    rows = [make_row(s, "a", "passed", steps_to_green=1) for s in ("s1", "s2")]
    run = make_run(tmp_path / "r", [*rows, make_row("s1", "b", "passed", steps_to_green=1)])
    assert main(["gate", str(run), "--agent", "b", "--rule", "pass@1>=0.5"]) == 3
    assert "b has no row for 1 of the run's 2 session(s) (the summary" in capsys.readouterr().out
    assert main(["gate", str(run), "--agent", "a", "--rule", "pass@1>=0.5"]) == 0


def test_a_file_of_another_suites_rows_only_is_refused(tmp_path, make_run, make_row, capsys):
    run = make_run(tmp_path / "r", [make_row("s1", "a", "passed", suite="humaneval")], suite="x")
    assert main(["gate", str(run), "--rule", "pass@1>=0.5"]) == 2
    err = capsys.readouterr().err
    assert "no row is of the suite its summary.json names (x): s1 (a row of suite humaneval)" in err
