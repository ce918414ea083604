"""Suite loading and validation: every malformed session is named with its field and reason, exit 2."""

from __future__ import annotations

import copy
import json
import math
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.base.errors import InputError
from harness.cli import main
from harness.suites.load import load_suite

BUNDLED = Path(__file__).resolve().parents[2] / "suites" / "jest-bugfix"


def test_bundled_suite_is_valid_and_covers_the_brief():
    suite = load_suite("jest-bugfix")
    assert suite.name == "jest-bugfix" and len(suite.sessions) >= 12
    assert len({s.intent for s in suite.sessions}) >= 6
    for s in suite.sessions:
        assert 2 <= len(s.execution_trace) <= 4
        assert all(st.execution_result for st in s.execution_trace), (
            f"{s.session_id} is not recorded"
        )
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
    if first.get("held_out_tests"):
        shutil.copytree(BUNDLED / first["held_out_tests"], root / first["held_out_tests"])

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
    (
        "intent",
        "make_it_work",
        f"{SID}: intent: unknown intent 'make_it_work'; known: fix_test_failure, ",
    ),
    (
        "execution_trace.0.tool_called",
        "run_shell",
        f"{SID}: execution_trace[0].tool_called: unknown tool 'run_shell'; known: jest_run, ",
    ),
    (
        "execution_trace.1.tool_args",
        {"path": "src/profile.js"},
        f"{SID}: execution_trace[1].tool_args: bad arguments for file_read (arguments): ",
    ),
    (
        "execution_trace.2.tool_args.old",
        7,
        f"{SID}: execution_trace[2].tool_args: bad arguments for file_edit (old): 7 is not of type 'string'",
    ),
    (
        "execution_trace.1.step",
        5,
        f"{SID}: execution_trace[1].step: steps must be numbered 1..n in order; expected 2, got 5",
    ),
    ("execution_trace", [], f"{SID}: execution_trace: must hold at least one step"),
    (
        "workspace",
        "workspaces/nowhere",
        f"{SID}: workspace: folder workspaces/nowhere does not exist",
    ),
    (
        "ide_context.cursor_position.line",
        999,
        f"{SID}: ide_context.cursor_position.line: line 999 is outside tests/profile.test.js (1..",
    ),
    (
        "ide_context.cursor_position.column",
        500,
        f"{SID}: ide_context.cursor_position.column: column 500 is outside line ",
    ),
    (
        "ide_context.open_files",
        ["src/missing.js"],
        f"{SID}: ide_context.open_files[0]: src/missing.js is not a file of the workspace",
    ),
    (
        "ide_context.viewport.line_height_px",
        0,
        f"{SID}: ide_context.viewport.line_height_px: must be positive, got 0",
    ),
    (
        "ide_context.viewport.zoom",
        "big",
        f"{SID}: ide_context.viewport.zoom: must be a number, got str",
    ),
    (
        "cursor_target.placement",
        "middle",
        f"{SID}: cursor_target.placement: must be 'before' or 'after', got 'middle'",
    ),
    (
        "cursor_target.file",
        "src/nope.js",
        f"{SID}: cursor_target.file: src/nope.js is not a text file of the workspace",
    ),
    ("cursor_target", _DELETE, f"{SID}: cursor_target: missing"),
    (
        "verify.test_files",
        ["tests/ghost.test.js"],
        f"{SID}: verify.test_files: tests/ghost.test.js is not a file of the workspace",
    ),
    (
        "ide_context.git_status",
        None,
        f"{SID}: ide_context.git_status: must be a string, got NoneType",
    ),
    ("session_id", 12, "line 1: session_id: must be a string, got int"),
]


@pytest.mark.parametrize("path,value,expected", CASES, ids=[c[0] for c in CASES])
def test_malformed_session_names_session_field_and_reason(
    one_session_suite, capsys, path, value, expected
):
    first, write = one_session_suite
    root = write(_mutate(first, path, value))
    with pytest.raises(InputError) as e:
        load_suite(root)
    assert expected in str(e.value)
    assert main(["suite", "validate", str(root)]) == 2
    assert expected in capsys.readouterr().err


def test_held_out_tests_are_a_folder_of_test_files_and_part_of_the_hash(one_session_suite):
    first, write = one_session_suite
    root = write(first)
    held = root / "held" / first["session_id"]
    problems = {
        "held/none": "held_out_tests: must name a folder inside the suite",
        "../outside": "held_out_tests: must name a folder inside the suite",
        "held/empty": "held_out_tests: held/empty holds no file",
        f"held/{first['session_id']}": "src/extra.js is not a test path",
    }
    (root / "held" / "empty").mkdir(parents=True)
    (held / "tests").mkdir(parents=True)
    (held / "src").mkdir()
    (held / "tests" / "more.test.js").write_text("test('x', () => {});\n")
    (held / "src" / "extra.js").write_text("module.exports = 1;\n")
    for rel, expected in problems.items():
        with pytest.raises(InputError) as e:
            load_suite(write({**first, "held_out_tests": rel}))
        assert expected in str(e.value), (rel, str(e.value))
    (held / "src" / "extra.js").unlink()
    s = load_suite(write({**first, "held_out_tests": f"held/{first['session_id']}"})).sessions[0]
    assert s.held_out == {"tests/more.test.js": b"test('x', () => {});\n"}
    before = s.content_hash
    (held / "tests" / "more.test.js").write_text("test('y', () => {});\n")
    again = load_suite(root).sessions[0]
    assert again.content_hash != before  # a held-out test changed: no cached verdict is reused


def test_duplicate_ids_bad_json_and_non_object_lines(one_session_suite):
    first, write = one_session_suite
    root = write(first, first, "{not json", "[1, 2]")
    with pytest.raises(InputError) as e:
        load_suite(root)
    msg = str(e.value)
    assert "3 problem(s)" in msg
    assert (
        "line 2 (session profile-display-name-null): session_id: duplicate id, first on line 1"
        in msg
    )
    assert (
        "line 3: json: not valid JSON (Expecting property name enclosed in double quotes at column 2)"
        in msg
    )
    assert "line 4: session: must be a JSON object, got list" in msg


def test_unknown_suite_name_lists_bundled_ones():
    with pytest.raises(
        InputError, match="no suite folder or bundled suite named 'nope'; bundled: .*jest-bugfix"
    ):
        load_suite("nope")


def test_run_refuses_a_bad_suite_before_anything_runs(one_session_suite, tmp_path, capsys):
    first, write = one_session_suite
    root = write(_mutate(first, "intent", "???"))
    out = tmp_path / "run"
    assert main(["run", "--suite", str(root), "--agent", "noop", "--out", str(out)]) == 2
    assert not out.exists()
    assert "unknown intent" in capsys.readouterr().err


def test_run_refuses_an_unknown_agent(tmp_path, capsys):
    assert (
        main(
            ["run", "--suite", "jest-bugfix", "--agent", "gpt-magic", "--out", str(tmp_path / "r")]
        )
        == 2
    )
    assert "unknown agent 'gpt-magic'; known: " in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    "yaml, expected",
    [
        ("defaults: {k: three}\n", "defaults.k: must be a whole number of at least 1, got 'three'"),
        ("defaults: {k: -1}\n", "defaults.k: must be a whole number of at least 1, got -1"),
        (
            "defaults: {max_steps: 2.5}\n",
            "defaults.max_steps: must be a whole number of at least 1, got 2.5",
        ),
        ("defaults: {k: true}\n", "defaults.k: must be a whole number of at least 1, got True"),
        ("defaults: {max_step: 5}\n", "defaults.max_step: unknown key (known: k, max_steps)"),
        (
            "defaults: {k: 4, max_steps: 3}\n",
            "defaults: max_steps must be at least k (max_steps=3, k=4)",
        ),
        ("defaults: [3, 10]\n", "defaults: must be a mapping of k and max_steps"),
        ("default: {k: 3}\n", "default: unknown key (known: name, description, defaults, sandbox)"),
    ],
    ids=["word", "negative", "fraction", "bool", "typo", "steps-below-k", "list", "top-level-typo"],
)
def test_validate_and_run_refuse_the_same_suite_defaults(
    one_session_suite, tmp_path, capsys, yaml, expected
):
    # One schema: what `etai run` would refuse (or silently ignore), `etai suite validate` names.
    first, write = one_session_suite
    root = write(first)
    (root / "suite.yaml").write_text("name: tiny\n" + yaml)
    assert main(["suite", "validate", str(root)]) == 2
    err = capsys.readouterr().err
    assert f"{root / 'suite.yaml'}: 1 problem(s):\n  {expected}" in err, err
    out = tmp_path / "run"
    assert main(["run", "--suite", str(root), "--agent", "noop", "--out", str(out)]) == 2
    assert expected in capsys.readouterr().err
    assert not out.exists()


def test_valid_suite_defaults_are_what_a_run_uses(one_session_suite):
    first, write = one_session_suite
    root = write(first)
    (root / "suite.yaml").write_text("name: tiny\ndefaults: {k: 2}\n")
    assert load_suite(root).defaults == {"k": 2}


# ------------------------------------------------------------------------------ properties (hypothesis)
# The loader's promise over inputs no list of cases covers: whatever a line of sessions.jsonl holds,
# load_suite returns the suite or raises one InputError whose problems each name their line, never
# another exception. Examples are derandomized (the same ones every run, so a failure reproduces and
# mutation testing sees a fixed test) and not stored (no .hypothesis folder in the checkout).
PROPERTY = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
# A junk line: text (no newline: one line each), any JSON value, bytes that may not be UTF-8, or
# JSON that Python's parser refuses with something other than JSONDecodeError (an integer over its
# 4300-digit limit, nesting deeper than its recursion limit).
JUNK = st.one_of(
    st.text(max_size=40).map(lambda s: s.replace("\n", " ")),
    JSON.map(lambda v: json.dumps(v)),
    st.binary(max_size=20).map(lambda b: b.replace(b"\n", b" ")),
    st.integers(3000, 6000).map(lambda n: "7" * n),
    st.integers(100, 50_000).map(lambda n: "[" * n + "]" * n),
)


@pytest.fixture(scope="module")
def property_suite(tmp_path_factory):
    """A suite folder with the bundled first session's workspace; each example rewrites sessions.jsonl."""
    first = json.loads((BUNDLED / "sessions.jsonl").read_text(encoding="utf-8").splitlines()[0])
    root = tmp_path_factory.mktemp("prop") / "suite"
    shutil.copytree(BUNDLED / first["workspace"], root / first["workspace"])
    shutil.copytree(BUNDLED / first["held_out_tests"], root / first["held_out_tests"])
    return first, root


def _write_lines(root: Path, lines: list[str | bytes]) -> None:
    (root / "sessions.jsonl").write_bytes(
        b"\n".join(x if isinstance(x, bytes) else x.encode("utf-8", "surrogatepass") for x in lines)
        + b"\n"
    )


def _problem_lines(err: InputError) -> list[str]:
    head, *items = str(err).split("\n")
    assert head.endswith("problem(s):") and len(items) == int(head.rsplit(": ", 2)[-1].split()[0])
    return [i.strip() for i in items]


def _blank(line: str | bytes) -> bool:
    if isinstance(line, bytes):
        try:
            line = line.decode("utf-8")
        except UnicodeDecodeError:
            return False
    return not line.strip()


@PROPERTY
@given(junk=st.lists(JUNK, min_size=1, max_size=4))
def test_property_junk_lines_are_named_by_line(property_suite, junk):
    """A valid session on line 1, junk after it: every non-blank junk line is named, nothing else."""
    first, root = property_suite
    _write_lines(root, [json.dumps(first), *junk])
    bad = {n for n, line in enumerate(junk, 2) if not _blank(line)}
    if not bad:
        assert [s.session_id for s in load_suite(root).sessions] == [first["session_id"]]
        return
    with pytest.raises(InputError) as e:
        load_suite(root)
    named = {int(p.split(":")[0].split()[1]) for p in _problem_lines(e.value)}
    assert named == bad, str(e.value)


def _paths(value, prefix=()) -> list[tuple]:
    """Every place in a JSON value (dict keys and list indices), outermost first."""
    out = []
    items = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, list)
        else ()
    )
    for k, v in items:
        out.append((*prefix, k))
        out += _paths(v, (*prefix, k))
    return out


FIRST = json.loads((BUNDLED / "sessions.jsonl").read_text(encoding="utf-8").splitlines()[0])
DELETE = object()


@PROPERTY
@given(where=st.sampled_from(_paths(FIRST)), value=st.one_of(st.just(DELETE), JSON))
def test_property_any_field_of_a_session_replaced_is_a_named_problem_or_still_valid(
    property_suite, where, value
):
    """One field of a valid session replaced by any JSON value (or removed): the session loads, or
    each problem names line 1 and the field's top-level name; never another exception."""
    first, root = property_suite
    s = copy.deepcopy(first)
    obj = s
    for k in where[:-1]:
        obj = obj[k]
    if value is DELETE:
        del obj[where[-1]]
    else:
        obj[where[-1]] = value
    _write_lines(root, [json.dumps(s)])
    try:
        suite = load_suite(root)
    except InputError as e:
        problems = _problem_lines(e)
        assert problems and all(p.startswith("line 1") for p in problems), problems
        top = str(where[0])
        # the field is named, or the session could not be named (its id is the field replaced)
        assert any(top in p for p in problems) or top == "session_id", problems
    else:
        assert len(suite.sessions) == 1


# Path fields: text that no file system holds (NUL bytes, lone surrogates) among ordinary names.
PATHISH = st.lists(
    st.sampled_from(["a", "b", ".", "/", "..", "src", "\0", "\ud800", "é", " "]), max_size=8
).map("".join)
PATH_FIELDS = [
    "workspace",
    "cursor_target.file",
    "ide_context.cursor_position.file",
    "ide_context.open_files.0",
    "verify.test_files.0",
]


@PROPERTY
@given(field=st.sampled_from(PATH_FIELDS), value=PATHISH)
def test_property_path_fields_are_named_problems_or_workspace_files(property_suite, field, value):
    first, root = property_suite
    _write_lines(root, [json.dumps(_mutate(first, field, value))])
    try:
        suite = load_suite(root)
    except InputError as e:
        problems = _problem_lines(e)
        name = field.replace(".0", "")
        assert problems and all(p.startswith("line 1 (session ") for p in problems), problems
        assert any(f": {name}" in p for p in problems), problems
    else:
        ws = suite.sessions[0].workspace
        assert ws.is_dir() and (field == "workspace" or (ws / value).is_file())


VIEWPORT_KEYS = ["scroll_top_line", "line_height_px", "char_width_px", "gutter_px", "zoom"]


@PROPERTY
@given(key=st.sampled_from(VIEWPORT_KEYS), value=st.one_of(st.floats(), st.integers(-10, 10**6)))
def test_property_a_loaded_viewport_is_finite_and_positive(property_suite, key, value):
    """Whatever number a viewport field holds, a session that loads has a usable one (cursor error
    in pixels divides and multiplies by these): finite, positive (scroll and gutter may be 0)."""
    first, root = property_suite
    _write_lines(root, [json.dumps(_mutate(first, f"ide_context.viewport.{key}", value))])
    try:
        suite = load_suite(root)
    except InputError as e:
        assert all(f"ide_context.viewport.{key}: must be" in p for p in _problem_lines(e))
    else:
        got = getattr(suite.sessions[0].ide_context.viewport, key)
        assert got == value and math.isfinite(got)
        assert got >= 0 if key in ("scroll_top_line", "gutter_px") else got > 0


@pytest.mark.parametrize(
    "line,problem",
    [
        ("1" * 5000, "line 1: json: not valid JSON (ValueError: Exceeds the limit (4300 digits)"),
        (
            "[" * 100_000 + "]" * 100_000,
            "line 1: json: not valid JSON (RecursionError: maximum recursion depth",
        ),
    ],
    ids=["huge-integer", "deep-nesting"],
)
def test_json_that_python_cannot_hold_is_a_named_problem(one_session_suite, line, problem):
    """These raised ValueError and RecursionError out of load_suite (the junk-line property finds them too)."""
    _, write = one_session_suite
    with pytest.raises(InputError) as e:
        load_suite(write(line))
    assert problem in str(e.value)


@pytest.mark.parametrize(
    "path,value,expected",
    [
        ("workspace", "work\0spaces", f"{SID}: workspace: 'work\\x00spaces' is not a usable path"),
        ("workspace", "\ud800", f"{SID}: workspace: '\\ud800' is not a usable path"),
        (
            "ide_context.viewport.zoom",
            float("nan"),
            f"{SID}: ide_context.viewport.zoom: must be a finite number, got nan",
        ),
        (
            "ide_context.viewport.line_height_px",
            float("inf"),
            f"{SID}: ide_context.viewport.line_height_px: must be a finite number, got inf",
        ),
    ],
    ids=["nul-byte", "lone-surrogate", "nan", "infinity"],
)
def test_fields_python_reads_but_the_sandbox_cannot_use(one_session_suite, path, value, expected):
    """A workspace path the OS cannot hold raised ValueError; NaN and Infinity (json.loads reads
    them) were accepted as viewport sizes, making every cursor error NaN (the properties above find
    both)."""
    first, write = one_session_suite
    with pytest.raises(InputError) as e:
        load_suite(write(_mutate(first, path, value)))
    assert expected in str(e.value)
