"""`etai suite validate --jest` (harness/authoring/check.py): the reference trace read as text, then
every reference replayed in the sandbox; each broken session named, exit 2."""

from __future__ import annotations

import pytest

from harness.authoring.check import trace_problems
from harness.cli import main
from harness.suites.load import load_suite

SID = "semver-unescaped-dot"  # 1 file_read, 2 file_edit src/semver.js (the regex), 3 jest_run


def _step(s, n):
    return next(st for st in s["execution_trace"] if st["step"] == n)


def _edits_a_test(s):
    _step(s, 2)["tool_args"]["file"] = "tests/semver.test.js"
    return s


def _old_twice(s):
    _step(s, 2)["tool_args"]["old"] = "\\d"  # occurs many times in the file
    return s


def _cursor_elsewhere(s):
    s["cursor_target"].update(line=1, column=1)
    return s


def _cursor_in_an_unedited_file(s):
    s["cursor_target"]["file"] = "tests/semver.test.js"
    return s


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (None, []),
        # (a refused edit leaves the cursor target's file unedited: named too)
        (
            _edits_a_test,
            [
                "step 2 edits tests/semver.test.js: a reference changes source files only",
                "cursor_target file src/semver.js is not edited",
            ],
        ),
        (
            _old_twice,
            [
                "step 2: `old` occurs 3 times in src/semver.js",
                "cursor_target file src/semver.js is not edited",
            ],
        ),
        (_cursor_elsewhere, ["cursor_target 1:1 is outside the text the fix edits"]),
        (_cursor_in_an_unedited_file, ["cursor_target file tests/semver.test.js is not edited"]),
    ],
)
def test_the_trace_is_read_as_text(tmp_path, make_suite, mutate, expected):
    root = make_suite(tmp_path / "suite", [SID], mutate)
    [session] = load_suite(root).sessions
    got = trace_problems(session)
    assert len(got) == len(expected) and all(g.startswith(e) for g, e in zip(got, expected)), got


@pytest.mark.docker
@pytest.mark.slow
def test_validate_with_jest_names_each_broken_session_and_exits_2(tmp_path, make_suite, capsys):
    good = "retry-default-attempts"
    root = make_suite(tmp_path / "ok", [good, SID])
    assert main(["suite", "validate", str(root), "--jest", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert f"ok    {SID}: the reference reaches green at step 2" in out
    assert f"2 sessions ok against Jest at {root}" in out

    def never_green(s):  # the "fix" only reads the file: the pristine failure stays
        if s["session_id"] == SID:
            s["execution_trace"] = [_step(s, 1)]
        return s

    bad = make_suite(tmp_path / "bad", [good, SID], never_green)
    assert main(["suite", "validate", str(bad), "--jest", "--no-progress"]) == 2
    captured = capsys.readouterr()
    assert f"ok    {good}" in captured.out
    assert (
        f"FAIL  {SID}: cursor_target file src/semver.js is not edited by the reference; "
        in captured.out
    )
    assert "reference does not reach green" in captured.out
    assert f"{bad}: 1 of 2 sessions fail against Jest" in captured.err
