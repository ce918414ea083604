"""`etai suite validate --jest` (harness/authoring/check.py): the reference trace read as text, then
every reference replayed in the sandbox; each broken session named, exit 2."""

from __future__ import annotations

import pytest

from harness.authoring.check import held_out_audit, trace_problems
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


HELD = "held_out/semver-unescaped-dot/tests/semver.held-out.test.js"
VISIBLE = "workspaces/semver-unescaped-dot/tests/semver.test.js"
# A visible case of VISIBLE under another name, and a case of its own.
TWIN = (
    "\ntest('a plain release, again', () => {\n"
    "  expect(parse('v1.12.3')).toEqual({ major: 1, minor: 12, patch: 3, prerelease: null });\n});\n"
)
OWN = "\ntest('a release with a build tag', () => {\n  expect(parse('1.2.3+7')).toBeNull();\n});\n"


def test_held_out_cases_are_read_against_the_visible_ones(tmp_path, make_suite, capsys):
    root = make_suite(tmp_path / "ok", [SID])
    [s] = load_suite(root).sessions
    audit = held_out_audit(s)
    assert len(audit.held_out) >= 3 and audit.twins == (), audit
    assert main(["suite", "validate", str(root)]) == 0
    assert f"held-out cases: {len(audit.held_out)} in 1 sessions, 0 with a visible twin" in (
        capsys.readouterr().out
    )

    # A held-out case that is a visible one renamed: refused, named with its twin.
    with (root / HELD).open("a") as f:
        f.write(TWIN)
    [s] = load_suite(root).sessions
    assert held_out_audit(s).twins == (
        (
            "tests/semver.held-out.test.js::a plain release, again",
            "tests/semver.test.js::parse parses a plain release with a leading v",
        ),
    )
    assert main(["suite", "validate", str(root)]) == 2
    captured = capsys.readouterr()
    assert (
        f"FAIL  {SID}: held-out case tests/semver.held-out.test.js::a plain release, again has a "
        "visible twin tests/semver.test.js::parse parses a plain release with a leading v"
    ) in captured.out
    assert "1 of " in captured.err and "held-out cases have a visible twin" in captured.err


def test_a_held_out_file_that_replaces_a_visible_one_holds_out_only_what_it_adds(
    tmp_path, make_suite
):
    root = make_suite(tmp_path / "s", [SID])
    held_dir = root / "held_out" / SID / "tests"
    for f in held_dir.iterdir():
        f.unlink()
    # The workspace ships the file stripped; the held-out copy is the whole file.
    (held_dir / "semver.test.js").write_text((root / VISIBLE).read_text() + OWN)
    [s] = load_suite(root).sessions
    audit = held_out_audit(s)
    assert audit.held_out == ("tests/semver.test.js::a release with a build tag",)
    assert audit.twins == ()


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
