"""The ETAI serialisation: rendering is exact, training spans line up, parsing is total."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.agents import etai_format as fmt
from harness.tools import tool_names

FIXTURES = Path(__file__).parents[1] / "finetune" / "fixtures" / "sessions.jsonl"


def _sessions() -> list[dict]:
    return [json.loads(line) for line in FIXTURES.read_text().splitlines() if line.strip()]


SESSION = _sessions()[0]  # date-null-check, the first bundled session


def test_special_tokens_are_the_eleven_markers():
    assert fmt.SPECIAL_TOKENS == (
        "<INST>",
        "<CONTEXT>",
        "<FILE>",
        "<CURSOR>",
        "<STEP>",
        "<TOOL>",
        "<ARGS>",
        "<RESULT>",
        "<OUTPUT>",
        "<TRACE_START>",
        "<TRACE_END>",
    )
    assert set(fmt.HEAD_MARKERS.values()) <= set(fmt.SPECIAL_TOKENS)


def test_render_prompt_exact_text():
    prompt = fmt.render_prompt(SESSION, SESSION["execution_trace"][:1])
    assert prompt == (
        "<INST>Jest test fails with \"Cannot read properties of undefined (reading 'toISOString')\""
        " in date.test.js. Fix it.\n"
        "<CONTEXT><FILE>src/date.js\n<FILE>tests/date.test.js\n"
        "<CURSOR>tests/date.test.js:12:5\n"
        "git_status: clean\n"
        "viewport: scroll_top_line=0 line_height_px=18 char_width_px=7.2 gutter_px=48 zoom=1.0\n"
        "<TRACE_START>\n"
        '<STEP><TOOL>jest_run<ARGS>{"test_file": "tests/date.test.js"}<RESULT>{"exit_code": 1, '
        '"num_failed": 1, "failed_tests": [{"name": "formatDate returns null for undefined", '
        '"message": "TypeError: Cannot read properties of undefined (reading \'toISOString\')", '
        '"location": {"file": "src/date.js", "line": 2, "column": 15}}]}\n'
    )


def test_render_action_and_final_end_with_stop_markers():
    assert (
        fmt.render_action("file_read", {"file": "a.js"})
        == '<STEP><TOOL>file_read<ARGS>{"file": "a.js"}<RESULT>'
    )
    assert fmt.render_final("done") == "<OUTPUT>done<TRACE_END>"
    assert fmt.STOP_MARKERS == ("<RESULT>", "<TRACE_END>")


@pytest.mark.parametrize("session", _sessions(), ids=lambda s: s["session_id"])
def test_training_example_spans_are_actions_and_final(session):
    text, spans = fmt.render_training_example(session, max_result_chars=300)
    trace = session["execution_trace"]
    assert len(spans) == len(trace) + 1
    for i, ((start, end), step) in enumerate(zip(spans, trace)):
        # the prompt the agent would see before step i is exactly the text before the span
        assert text[:start] == fmt.render_prompt(session, trace[:i], max_result_chars=300)
        assert text[start:end] == fmt.render_action(step["tool_called"], step["tool_args"])
    start, end = spans[-1]
    assert text[start:end] == fmt.render_final(session["final_output"]) and end == len(text)
    # what is learned parses back into the recorded actions
    for (start, end), step in zip(spans, trace):
        assert fmt.parse_action(text[start:end]) == fmt.Action(
            step["tool_called"], step["tool_args"]
        )
    assert fmt.parse_action(text[spans[-1][0] :]) == fmt.FinalAnswer(session["final_output"])


def test_long_results_are_truncated_with_visible_marker():
    result = {"content": "x" * 5000 + "TAIL"}
    rendered = fmt.render_result(result, max_chars=200)
    assert len(rendered) <= 200
    # 5019 chars of JSON; the 30-char marker leaves 170 kept, so 4849 cut (hand-computed)
    assert "[... 4849 chars truncated ...]" in rendered and len(rendered) == 200
    assert rendered.endswith('TAIL"}')  # the tail survives: Jest summaries come last
    assert fmt.render_result(result, max_chars=0) == json.dumps(result)  # 0 = no limit


def test_special_tokens_in_free_text_are_defused_and_round_trip_through_json():
    args = {"file": "a.js", "new": "// emits <STEP> and <RESULT> literally"}
    action = fmt.render_action("file_edit", args)
    assert action.count("<STEP>") == 1 and action.count("<RESULT>") == 1
    assert fmt.parse_action(action) == fmt.Action("file_edit", args)
    session = dict(
        SESSION, user_instruction="why does <OUTPUT> appear", final_output="<TRACE_END> early"
    )
    text, _ = fmt.render_training_example(session)
    assert text.count("<OUTPUT>") == 1 and text.count("<TRACE_END>") == 1
    assert "<\\u004fUTPUT>" in text


def test_rendering_is_total_on_odd_sessions():
    odd = {
        "ide_context": {"open_files": "one.js", "viewport": None},
        "execution_trace": [
            {"tool_called": "file_read", "tool_args": "not-a-dict", "execution_result": {1, 2}}
        ],
    }
    text, spans = fmt.render_training_example(odd)
    assert text.startswith("<INST>\n<CONTEXT><FILE>one.js\n<TRACE_START>\n") and len(spans) == 2
    assert fmt.render_prompt({}, ()) == "<INST>\n<CONTEXT>\n<TRACE_START>\n"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "no action: empty output"),
        ("I would run the tests", "must start with"),
        ("<STEP>jest_run", "missing <TOOL>"),
        ("<STEP><TOOL><ARGS>{}", "missing tool name"),
        ('<STEP><TOOL>rm_rf<ARGS>{"path": "/"}<RESULT>', "unknown tool 'rm_rf'; known: jest_run,"),
        ("<STEP><TOOL>file_read<RESULT>", "missing args"),
        ("<STEP><TOOL>file_read<ARGS>  <RESULT>", "missing args"),
        ('<STEP><TOOL>file_read<ARGS>{"file": <RESULT>', "malformed JSON args"),
        ('<STEP><TOOL>file_read<ARGS>["a.js"]<RESULT>', "must be a JSON object, got list"),
        ("<STEP><TOOL>file_read<ARGS>" + "[" * 100_000, "too long"),
        (None, "output is NoneType"),
    ],
)
def test_invalid_outputs_give_clear_reasons(text, reason):
    got = fmt.parse_action(text)
    assert isinstance(got, fmt.InvalidAction), got
    assert reason in got.reason
    assert len(got.raw) <= 200


def test_parse_accepts_missing_end_marker_and_ignores_text_after_it():
    assert fmt.parse_action("  <STEP><TOOL>git_diff<ARGS>{}") == fmt.Action("git_diff", {})
    got = fmt.parse_action('<STEP><TOOL>git_diff<ARGS>{}<RESULT>{"diff": ""}\n<STEP>')
    assert got == fmt.Action("git_diff", {})
    assert fmt.parse_action("<OUTPUT> fixed it ") == fmt.FinalAnswer("fixed it")


def test_deep_nesting_is_invalid_not_a_crash():
    deep = "<STEP><TOOL>search<ARGS>" + '{"a":' * 20_000 + "1" + "}" * 20_000
    assert isinstance(fmt.parse_action(deep, max_chars=10**6), fmt.InvalidAction)


def test_fuzz_parse_action_never_raises():
    rng = random.Random(1234)
    pieces = (
        list(fmt.SPECIAL_TOKENS)
        + list(tool_names())
        + [
            "{",
            "}",
            "[",
            "]",
            '"',
            ":",
            ",",
            "null",
            "1e999",
            "\\u0000",
            "\x00",
            "\ud800",
            "é",
            " ",
            "\n",
            '{"file": "a.js"}',
            "{}",
            "NaN",
            "-",
            "rm_rf",
            "<STEP",
            "TOOL>",
            "\\",
        ]
    )
    valid = fmt.render_action("file_read", {"file": "src/a.js"})
    outcomes = {fmt.Action: 0, fmt.FinalAnswer: 0, fmt.InvalidAction: 0}
    for i in range(600):
        kind = i % 3
        if kind == 0:  # token soup
            text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        elif kind == 1:  # a valid action with random corruption
            chars = list(valid)
            for _ in range(rng.randint(1, 4)):
                pos = rng.randrange(len(chars))
                chars[pos] = rng.choice(["", "x", "{", "<", '"', "\n"])
            text = "".join(chars)
        else:  # random unicode and bytes-as-text
            text = "".join(chr(rng.randint(0, 0x2FFF)) for _ in range(rng.randint(0, 80)))
        got = fmt.parse_action(text)  # any exception fails the test
        outcomes[type(got)] += 1
        if isinstance(got, fmt.Action):
            assert got.tool in tool_names() and isinstance(got.args, dict)
    assert outcomes[fmt.InvalidAction] > 300 and outcomes[fmt.Action] > 0


def test_import_is_pure_stdlib():
    code = "import sys, harness.agents.etai_format; bad = {'torch', 'composer', 'transformers'} & set(sys.modules); print(sorted(bad))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_final_answer_ends_at_either_stop_marker():
    from harness.agents.etai_format import FinalAnswer, parse_action

    assert parse_action("<OUTPUT>done<RESULT>junk") == FinalAnswer("done")
    assert parse_action("<OUTPUT>done<TRACE_END>junk") == FinalAnswer("done")


# ------------------------------------------------------------------------------ properties (hypothesis)
# Derandomized (the same examples every run: a failure reproduces, mutation testing sees a fixed
# test) and not stored (no .hypothesis folder in the checkout).
PROPERTY = settings(max_examples=300, deadline=None, derandomize=True, database=None)

JSON_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=10,
)
# Free text biased toward what could break the format: the markers themselves, near-markers,
# backslashes and JSON escapes, newlines, NUL and lone surrogates.
PIECES = list(fmt.SPECIAL_TOKENS) + [
    "<",
    ">",
    "<STEP",
    "TOOL>",
    "\\",
    "\\u",
    '"',
    "\n",
    " ",
    "\0",
    "\ud800",
    "é",
    "{",
    "}",
    "[",
    "]",
    ":",
    ",",
    "x",
]
FREE_TEXT = st.one_of(
    st.text(max_size=20), st.lists(st.sampled_from(PIECES), max_size=10).map("".join)
)
ARGS = st.dictionaries(FREE_TEXT, st.one_of(FREE_TEXT, JSON_VALUE), max_size=4)
TOOLS = st.sampled_from(tool_names())


# Arguments nested deeper than Python's recursion limit (json.loads raises RecursionError).
DEEP = st.tuples(TOOLS, st.integers(1_000, 15_000)).map(
    lambda t: f"<STEP><TOOL>{t[0]}<ARGS>" + '{"a":' * t[1]
)


@PROPERTY
@given(
    text=st.one_of(
        FREE_TEXT,
        st.lists(st.one_of(st.sampled_from(PIECES), TOOLS, FREE_TEXT), max_size=12).map("".join),
        DEEP,
    )
)
def test_property_parse_action_is_total(text):
    """Every text parses to exactly one of the three outcomes; an Action names a known tool and an object."""
    got = fmt.parse_action(text)
    assert type(got) in (fmt.Action, fmt.FinalAnswer, fmt.InvalidAction)
    if isinstance(got, fmt.Action):
        assert got.tool in tool_names() and isinstance(got.args, dict)
    if isinstance(got, fmt.InvalidAction):
        assert got.reason and got.raw == text[:200]


WHITESPACE = st.sampled_from(["", " ", "\n\t "])


@PROPERTY
@given(tool=TOOLS, args=ARGS, lead=WHITESPACE, gap=WHITESPACE, after=FREE_TEXT)
def test_property_an_action_round_trips_whatever_its_arguments_hold(tool, args, lead, gap, after):
    """What render_action writes, parse_action reads back exactly: markers inside arguments are
    defused, and whatever follows the end marker (the environment's result) is ignored; whitespace
    a model puts before or between the markers is allowed."""
    text = fmt.render_action(tool, args)
    assert (
        text.count("<STEP>")
        == text.count("<TOOL>")
        == text.count("<ARGS>")
        == text.count("<RESULT>")
        == 1
    )
    assert fmt.parse_action(lead + text + after) == fmt.Action(tool, args)
    spaced = text.replace("<STEP>", "<STEP>" + gap).replace("<ARGS>", gap + "<ARGS>" + gap)
    assert fmt.parse_action(lead + spaced + after) == fmt.Action(tool, args)


@PROPERTY
@given(text=FREE_TEXT, after=FREE_TEXT)
def test_property_a_final_answer_round_trips(text, after):
    rendered = fmt.render_final(text)
    assert rendered.count("<OUTPUT>") == rendered.count("<TRACE_END>") == 1
    got = fmt.parse_action(rendered + after)
    assert isinstance(got, fmt.FinalAnswer)
    if not any(
        tok in text for tok in fmt.SPECIAL_TOKENS
    ):  # otherwise defused: readable, not identical
        assert got.text == text.strip()


STEP_RECORD = st.fixed_dictionaries(
    {
        "tool_called": st.one_of(TOOLS, FREE_TEXT),
        "tool_args": st.one_of(ARGS, JSON_VALUE),
        "execution_result": JSON_VALUE,
    }
)
SESSION_LIKE = st.fixed_dictionaries(
    {
        "user_instruction": FREE_TEXT,
        "final_output": FREE_TEXT,
        "execution_trace": st.lists(STEP_RECORD, max_size=4),
        "ide_context": st.fixed_dictionaries(
            {
                "open_files": st.one_of(st.lists(FREE_TEXT, max_size=3), JSON_VALUE),
                "cursor_position": st.one_of(
                    st.fixed_dictionaries(
                        {"file": FREE_TEXT, "line": st.integers(), "column": st.integers()}
                    ),
                    JSON_VALUE,
                ),
                "git_status": st.one_of(FREE_TEXT, JSON_VALUE),
                "viewport": st.one_of(
                    st.dictionaries(FREE_TEXT, JSON_VALUE, max_size=3), JSON_VALUE
                ),
            }
        ),
    }
)


@PROPERTY
@given(session=SESSION_LIKE, max_chars=st.sampled_from([0, 1, 40, 2000]))
def test_property_training_text_has_one_marker_per_structural_place(session, max_chars):
    """Whatever the free text holds, the rendered example has each marker only where the format
    puts it: one <INST>, <CONTEXT>, <TRACE_START>, <OUTPUT>, <TRACE_END>; one <STEP>, <TOOL>,
    <ARGS>, <RESULT> per step. The prompt before each step is the text before its span, and each
    span parses back into that step (when it names a known tool with an object of arguments)."""
    text, spans = fmt.render_training_example(session, max_result_chars=max_chars)
    trace = session["execution_trace"]
    for tok in ("<INST>", "<CONTEXT>", "<TRACE_START>", "<OUTPUT>", "<TRACE_END>"):
        assert text.count(tok) == 1, tok
    for tok in ("<STEP>", "<TOOL>", "<ARGS>", "<RESULT>"):
        assert text.count(tok) == len(trace), tok
    assert text.count("<CURSOR>") == (
        1 if isinstance(session["ide_context"]["cursor_position"], dict) else 0
    )
    assert len(spans) == len(trace) + 1 and spans[-1][1] == len(text)
    for i, (start, end) in enumerate(spans[:-1]):
        assert text[:start] == fmt.render_prompt(session, trace[:i], max_chars)
        step = trace[i]
        if step["tool_called"] in tool_names() and isinstance(step["tool_args"], dict):
            assert fmt.parse_action(text[start:end]) == fmt.Action(
                step["tool_called"], step["tool_args"]
            )
    assert isinstance(fmt.parse_action(text[spans[-1][0] :]), fmt.FinalAnswer)


@PROPERTY
@given(text=st.text(max_size=300), max_chars=st.integers(0, 400))
def test_property_truncate_keeps_head_and_tail_within_the_limit(text, max_chars):
    got = fmt.truncate(text, max_chars)
    if max_chars == 0 or len(text) <= max_chars:
        assert got == text
        return
    marker = next(
        m for m in (f"[... {n} chars truncated ...]" for n in range(len(text) + 1)) if m in got
    )
    head, tail = got.split(marker, 1)
    removed = int(marker.split()[1])
    assert (
        text.startswith(head)
        and text.endswith(tail)
        and len(head) + len(tail) + removed == len(text)
    )
    assert len(got) <= max(max_chars, len(marker))


def test_wall_clock_noise_is_not_rendered_and_key_order_is_kept():
    live = {"status": "failed", "exit_code": 1, "duration_s": 3.034, "evidence": "nonce"}
    recorded = {"status": "failed", "exit_code": 1, "evidence": "nonce"}
    assert fmt.render_result(live, 0) == fmt.render_result(recorded, 0)
    assert fmt.result_json(live) == '{"status": "failed", "exit_code": 1, "evidence": "nonce"}'
    assert fmt.render_result_json(fmt.result_json(live), 30) == fmt.render_result(live, 30)
    nested = {"data": {"duration_s": 1.0}}  # only the result's own field is noise
    assert "duration_s" in fmt.render_result(nested, 0)
