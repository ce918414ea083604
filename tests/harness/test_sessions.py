"""Suite loading and validation: every malformed session is named with its field and reason, exit 2."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest

from harness.cli import main
from harness.errors import InputError
from harness.sessions import load_suite

BUNDLED = Path(__file__).resolve().parents[2] / "suites" / "jest-bugfix"


def test_bundled_suite_is_valid_and_covers_the_brief():
    suite = load_suite("jest-bugfix")
    assert suite.name == "jest-bugfix" and len(suite.sessions) >= 12
    assert len({s.intent for s in suite.sessions}) >= 6
    for s in suite.sessions:
        assert 2 <= len(s.execution_trace) <= 4
        assert all(st.execution_result for st in s.execution_trace), f"{s.session_id} is not recorded"
        assert s.ide_context.viewport.line_height_px > 0


def test_cli_validate_passes_on_bundled_suite(capsys):
    assert main(["suite", "validate", str(BUNDLED)]) == 0
    assert "14 sessions ok" in capsys.readouterr().out


@pytest.fixture
def one_session_suite(tmp_path: Path):
    """A copy of the bundled suite's first session as a suite of its own, and a writer for variants."""
    first = json.loads((BUNDLED / "sessions.jsonl").read_text(encoding="utf-8").splitlines()[0])
    root = tmp_path / "suite"
    shutil.copytree(BUNDLED / first["workspace"], root / first["workspace"])

    def write(*sessions: dict | str) -> Path:
        lines = [s if isinstance(s, str) else json.dumps(s) for s in sessions]
        (root / "sessions.jsonl").write_text("\n".join(lines) + "\n")
        return root

    return first, write


def _mutate(session: dict, path: str, value) -> dict:
    s = copy.deepcopy(session)
    *parents, last = path.split(".")
    obj = s
    for p in parents:
        obj = obj[int(p)] if isinstance(obj, list) else obj[p]
    if value is _DELETE:
        del obj[last]
    elif isinstance(obj, list):
        obj[int(last)] = value
    else:
        obj[last] = value
    return s


_DELETE = object()
SID = "line 1 (session profile-display-name-null)"

# (mutation path, new value, the exact problem line expected)
CASES = [
    ("user_instruction", _DELETE, f"{SID}: user_instruction: missing"),
    ("final_output", 42, f"{SID}: final_output: must be a string, got int"),
    ("intent", "make_it_work", f"{SID}: intent: unknown intent 'make_it_work'; known: fix_test_failure, "),
    ("execution_trace.0.tool_called", "run_shell", f"{SID}: execution_trace[0].tool_called: unknown tool 'run_shell'; known: jest_run, "),
    ("execution_trace.1.tool_args", {"path": "src/profile.js"}, f"{SID}: execution_trace[1].tool_args: bad arguments for file_read (arguments): "),
    ("execution_trace.2.tool_args.old", 7, f"{SID}: execution_trace[2].tool_args: bad arguments for file_edit (old): 7 is not of type 'string'"),
    ("execution_trace.1.step", 5, f"{SID}: execution_trace[1].step: steps must be numbered 1..n in order; expected 2, got 5"),
    ("execution_trace", [], f"{SID}: execution_trace: must hold at least one step"),
    ("workspace", "workspaces/nowhere", f"{SID}: workspace: folder workspaces/nowhere does not exist"),
    ("ide_context.cursor_position.line", 999, f"{SID}: ide_context.cursor_position.line: line 999 is outside tests/profile.test.js (1.."),
    ("ide_context.cursor_position.column", 500, f"{SID}: ide_context.cursor_position.column: column 500 is outside line "),
    ("ide_context.open_files", ["src/missing.js"], f"{SID}: ide_context.open_files[0]: src/missing.js is not a file of the workspace"),
    ("ide_context.viewport.line_height_px", 0, f"{SID}: ide_context.viewport.line_height_px: must be positive, got 0"),
    ("ide_context.viewport.zoom", "big", f"{SID}: ide_context.viewport.zoom: must be a number, got str"),
    ("cursor_target.placement", "middle", f"{SID}: cursor_target.placement: must be 'before' or 'after', got 'middle'"),
    ("cursor_target.file", "src/nope.js", f"{SID}: cursor_target.file: src/nope.js is not a text file of the workspace"),
    ("cursor_target", _DELETE, f"{SID}: cursor_target: missing"),
    ("verify.test_files", ["tests/ghost.test.js"], f"{SID}: verify.test_files: tests/ghost.test.js is not a file of the workspace"),
    ("ide_context.git_status", None, f"{SID}: ide_context.git_status: must be a string, got NoneType"),
    ("session_id", 12, "line 1: session_id: must be a string, got int"),
]


@pytest.mark.parametrize("path,value,expected", CASES, ids=[c[0] for c in CASES])
def test_malformed_session_names_session_field_and_reason(one_session_suite, capsys, path, value, expected):
    first, write = one_session_suite
    root = write(_mutate(first, path, value))
    with pytest.raises(InputError) as e:
        load_suite(root)
    assert expected in str(e.value)
    assert main(["suite", "validate", str(root)]) == 2
    assert expected in capsys.readouterr().err


def test_duplicate_ids_bad_json_and_non_object_lines(one_session_suite):
    first, write = one_session_suite
    root = write(first, first, "{not json", "[1, 2]")
    with pytest.raises(InputError) as e:
        load_suite(root)
    msg = str(e.value)
    assert "3 problem(s)" in msg
    assert "line 2 (session profile-display-name-null): session_id: duplicate id, first on line 1" in msg
    assert "line 3: json: not valid JSON (Expecting property name enclosed in double quotes at column 2)" in msg
    assert "line 4: session: must be a JSON object, got list" in msg


def test_unknown_suite_name_lists_bundled_ones():
    with pytest.raises(InputError, match="no suite folder or bundled suite named 'nope'; bundled: .*jest-bugfix"):
        load_suite("nope")


def test_run_refuses_a_bad_suite_before_anything_runs(one_session_suite, tmp_path, capsys):
    first, write = one_session_suite
    root = write(_mutate(first, "intent", "???"))
    out = tmp_path / "run"
    assert main(["run", "--suite", str(root), "--agent", "noop", "--out", str(out)]) == 2
    assert not out.exists()
    assert "unknown intent" in capsys.readouterr().err


def test_run_refuses_an_unknown_agent(tmp_path, capsys):
    assert main(["run", "--suite", "jest-bugfix", "--agent", "gpt-magic", "--out", str(tmp_path / "r")]) == 2
    assert "unknown agent 'gpt-magic'; known: " in capsys.readouterr().err
    assert not (tmp_path / "r").exists()
