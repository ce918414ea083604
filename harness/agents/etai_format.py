"""The ETAI text serialisation: session + observations -> model text, model output -> action.

One module, used by both the harness (to prompt a model agent and parse what it says) and the
fine-tuning stack (to build training examples), so the text a model is trained on is byte for byte
the text it is prompted with. Pure stdlib: importable without torch.

Layout of a prompt (one line per bracket; ``\\n`` separators shown as line breaks)::

    <INST>{user instruction}
    <CONTEXT><FILE>src/date.js
    <FILE>tests/date.test.js
    <CURSOR>tests/date.test.js:12:5
    git_status: clean
    viewport: scroll_top_line=0 line_height_px=18 char_width_px=7.2 gutter_px=48 zoom=1.0
    <TRACE_START>
    <STEP><TOOL>jest_run<ARGS>{"test_file": "tests/date.test.js"}<RESULT>{"exit_code": 1, ...}
    <STEP>...                                          (one line per earlier step)

What the model must emit next is either an action, ``<STEP><TOOL>name<ARGS>{json}<RESULT>``,
or a final answer, ``<OUTPUT>text<TRACE_END>``. The end markers are chosen so generation can stop
on them: ``<RESULT>`` hands the turn to the environment, which appends the tool result and a
newline; ``<TRACE_END>`` ends the episode. A decoder must keep special tokens when turning ids back
into text (``skip_special_tokens=False``), or the markers this parser needs are gone.

Free text (instructions, file names, tool results, final answers) never contains a special token:
each occurrence of ``<NAME>`` is written as ``<\\u004eAME>`` (the JSON escape of its first letter),
which JSON decoding turns back into the original and which a reader can still see.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.tools import tool_names

INST, CONTEXT, FILE, CURSOR = "<INST>", "<CONTEXT>", "<FILE>", "<CURSOR>"
STEP, TOOL, ARGS, RESULT = "<STEP>", "<TOOL>", "<ARGS>", "<RESULT>"
OUTPUT, TRACE_START, TRACE_END = "<OUTPUT>", "<TRACE_START>", "<TRACE_END>"

SPECIAL_TOKENS: tuple[str, ...] = (
    INST,
    CONTEXT,
    FILE,
    CURSOR,
    STEP,
    TOOL,
    ARGS,
    RESULT,
    OUTPUT,
    TRACE_START,
    TRACE_END,
)
ACTION_END = RESULT  # the model stops here; the environment writes the result after it
FINAL_END = TRACE_END
STOP_MARKERS: tuple[str, ...] = (ACTION_END, FINAL_END)

# Where the fine-tuned heads read the hidden state (see finetune/model.py): the intent once the
# instruction and context are read, the tool at each <TOOL> (just before the name is emitted),
# the step's success at each <RESULT> (action emitted, result not yet seen), the cursor when the
# agent commits to its answer.
HEAD_MARKERS: dict[str, str] = {
    "intent": TRACE_START,
    "tool": TOOL,
    "reward": RESULT,
    "cursor": OUTPUT,
}

DEFAULT_MAX_RESULT_CHARS = 2000
DEFAULT_MAX_OUTPUT_CHARS = 32_000
TRUNCATION_MARKER = "[... {n} chars truncated ...]"
_RAW_PREVIEW_CHARS = 200


@dataclass(frozen=True)
class Action:
    """A well-formed tool call the model asked for."""

    tool: str
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class FinalAnswer:
    """The model ended the episode with a final answer."""

    text: str


@dataclass(frozen=True)
class InvalidAction:
    """Output that is neither a valid action nor a final answer; counts as a step in the harness."""

    reason: str
    raw: str = ""  # the first characters of the offending output, for logs


def defuse(text: str) -> str:
    """Escape special-token strings inside free text (see the module docstring)."""
    for token in SPECIAL_TOKENS:
        if token in text:
            text = text.replace(token, f"<\\u{ord(token[1]):04x}{token[2:]}")
    return text


def truncate(text: str, max_chars: int) -> str:
    """Keep the head and the tail of ``text`` within ``max_chars``, with a visible marker between.

    The tail is kept because Jest and stack traces put the summary last.
    """
    if max_chars <= 0 or len(text) <= max_chars:
        return text
    # The marker counts what was really removed, which depends on the marker's own length.
    marker = TRUNCATION_MARKER.format(n=len(text) - max_chars)
    for _ in range(2):
        keep = max(max_chars - len(marker), 0)
        marker = TRUNCATION_MARKER.format(n=len(text) - keep)
    head = keep * 2 // 3
    tail = keep - head
    return text[:head] + marker + (text[-tail:] if tail else "")


def _dumps(value: Any) -> str:
    # default=str keeps rendering total for values JSON cannot encode (sets, bytes, objects).
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return json.dumps(str(value), ensure_ascii=False)


# Wall-clock noise, left out of what the model sees: it cannot act on it, recorded traces lack
# it, and it would make two runs of the same step render differently (a memorised action would not
# be recalled after a live jest_run, and no two rollouts would share a prompt after one).
VOLATILE_RESULT_FIELDS = ("duration_s",)


def result_json(result: Any) -> str:
    """A tool result's JSON text before truncation, keys in the result's own order, without
    ``VOLATILE_RESULT_FIELDS``.

    A result row keeps this text (``observation_texts``): JSON objects on disk are key-sorted, so
    re-encoding a stored result would not give back the bytes the model was prompted with.
    """
    if isinstance(result, Mapping) and any(k in result for k in VOLATILE_RESULT_FIELDS):
        result = {k: v for k, v in result.items() if k not in VOLATILE_RESULT_FIELDS}
    return _dumps(result)


def render_result_json(text: str, max_chars: int = DEFAULT_MAX_RESULT_CHARS) -> str:
    """``render_result`` of a result already encoded by ``result_json``."""
    return defuse(truncate(text, max_chars))


def render_result(result: Any, max_chars: int = DEFAULT_MAX_RESULT_CHARS) -> str:
    """A tool result as one JSON text, truncated with a marker, with special tokens defused."""
    return render_result_json(result_json(result), max_chars)


def render_action(tool: str, args: Mapping[str, Any] | None) -> str:
    """The exact text the model must emit for a tool call, end marker included."""
    return f"{STEP}{TOOL}{defuse(str(tool))}{ARGS}{defuse(_dumps(dict(args or {})))}{ACTION_END}"


def render_final(text: str) -> str:
    """The exact text the model must emit to end the episode."""
    return f"{OUTPUT}{defuse(str(text))}{FINAL_END}"


def _get(mapping: Any, key: str, default: Any = None) -> Any:
    return mapping.get(key, default) if isinstance(mapping, Mapping) else default


def render_context(session: Mapping[str, Any]) -> str:
    """Instruction and IDE context, up to and including <TRACE_START>."""
    ide = _get(session, "ide_context", {})
    lines = [f"{INST}{defuse(str(_get(session, 'user_instruction', '')))}"]
    files = _get(ide, "open_files", []) or []
    files = files if isinstance(files, (list, tuple)) else [files]
    context = CONTEXT + "\n".join(f"{FILE}{defuse(str(f))}" for f in files)
    lines.append(context)
    cursor = _get(ide, "cursor_position")
    if isinstance(cursor, Mapping):
        where = (
            f"{_get(cursor, 'file', '')}:{_get(cursor, 'line', '')}:{_get(cursor, 'column', '')}"
        )
        lines.append(f"{CURSOR}{defuse(where)}")
    if _get(ide, "git_status") is not None:
        lines.append(f"git_status: {defuse(str(_get(ide, 'git_status')))}")
    viewport = _get(ide, "viewport")
    if isinstance(viewport, Mapping):
        lines.append("viewport: " + defuse(" ".join(f"{k}={v}" for k, v in viewport.items())))
    lines.append(TRACE_START)
    return "\n".join(lines) + "\n"


def render_step(
    observation: Mapping[str, Any], max_result_chars: int = DEFAULT_MAX_RESULT_CHARS
) -> str:
    """One earlier step: the action as the model emitted it, then its result and a newline.

    ``observation`` has the shape of an ``execution_trace`` entry: tool_called, tool_args,
    execution_result.
    """
    action = render_action(
        _get(observation, "tool_called", ""), _as_args(_get(observation, "tool_args"))
    )
    return action + render_result(_get(observation, "execution_result"), max_result_chars) + "\n"


def _as_args(args: Any) -> Mapping[str, Any]:
    return args if isinstance(args, Mapping) else {"value": args} if args is not None else {}


def render_prompt(
    session: Mapping[str, Any],
    observations: Sequence[Mapping[str, Any]] = (),
    max_result_chars: int = DEFAULT_MAX_RESULT_CHARS,
) -> str:
    """Everything the model sees before its next output: context and the steps taken so far."""
    steps = "".join(render_step(o, max_result_chars) for o in observations)
    return render_context(session) + steps


def render_training_example(
    session: Mapping[str, Any], max_result_chars: int = DEFAULT_MAX_RESULT_CHARS
) -> tuple[str, tuple[tuple[int, int], ...]]:
    """The whole session as text, and the ``[start, end)`` character spans the model must learn.

    The spans cover each action (``<STEP>`` ... ``<RESULT>``) and the final answer
    (``<OUTPUT>`` ... ``<TRACE_END>``); the context and the tool results are given, not learned.
    For every step i, ``render_prompt(session, trace[:i])`` is a prefix of the text, so what the
    model is trained on is what it will be prompted with.
    """
    text = render_context(session)
    spans: list[tuple[int, int]] = []
    for step in _get(session, "execution_trace", []) or []:
        action = render_action(_get(step, "tool_called", ""), _as_args(_get(step, "tool_args")))
        spans.append((len(text), len(text) + len(action)))
        text += action + render_result(_get(step, "execution_result"), max_result_chars) + "\n"
    final = render_final(_get(session, "final_output", ""))
    spans.append((len(text), len(text) + len(final)))
    return text + final, tuple(spans)


def _invalid(reason: str, text: str) -> InvalidAction:
    return InvalidAction(reason=reason, raw=text[:_RAW_PREVIEW_CHARS])


def parse_action(
    text: Any,
    *,
    tools: Sequence[str] | None = None,
    max_chars: int = DEFAULT_MAX_OUTPUT_CHARS,
) -> Action | FinalAnswer | InvalidAction:
    """Parse one model output. Total: every input gives a value, nothing raises.

    Accepts ``<STEP><TOOL>name<ARGS>{json}<RESULT>`` (the end marker may be missing when the
    generator dropped its stop token; anything after it is ignored) or ``<OUTPUT>text<TRACE_END>``.
    Leading whitespace is allowed, any other leading text is not.
    """
    if not isinstance(text, str):
        return _invalid(f"output is {type(text).__name__}, not text", repr(text))
    if len(text) > max_chars:
        return _invalid(f"output too long: {len(text)} chars > {max_chars}", text)
    body = text.lstrip()
    if body.startswith(OUTPUT):
        answer = body[len(OUTPUT) :]
        for marker in STOP_MARKERS:  # a generator may stop on either marker
            answer = answer.split(marker, 1)[0]
        return FinalAnswer(text=answer.strip())
    if not body.startswith(STEP):
        if not body:
            return _invalid("no action: empty output", text)
        return _invalid(f"no action: output must start with {STEP} or {OUTPUT}", text)
    body = body[len(STEP) :].split(ACTION_END, 1)[0].lstrip()
    if not body.startswith(TOOL):
        return _invalid(f"missing {TOOL} after {STEP}", text)
    name, sep, raw_args = body[len(TOOL) :].partition(ARGS)
    name = name.strip()
    known = tuple(tools) if tools is not None else tool_names()
    if not name:
        return _invalid("missing tool name", text)
    if name not in known:
        return _invalid(f"unknown tool {name[:60]!r}; known: {', '.join(known)}", text)
    if not sep or not raw_args.strip():
        return _invalid(f"missing args for tool {name!r}: expected {ARGS}{{json object}}", text)
    try:
        args = json.loads(raw_args)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError
        return _invalid(f"malformed JSON args for tool {name!r}: {exc}", text)
    if not isinstance(args, dict):
        return _invalid(
            f"args for tool {name!r} must be a JSON object, got {type(args).__name__}", text
        )
    return Action(tool=name, args=args)
