"""The ETAI format as chat messages, for OpenAI-compatible servers; and the chat template that turns
those messages back into the exact ETAI text.

Two protocols:
  tools  the context is the user message, each step an assistant message with one tool call and a
         ``tool`` message with its result; the server's function calling returns the next call.
  text   one user message holding ``render_prompt`` (the ETAI text itself), generation stopped at
         the ETAI markers, the reply parsed by ``parse_action`` — for servers without tool calling.

``ETAI_CHAT_TEMPLATE`` renders both message shapes into byte-for-byte the text ``render_prompt``
gives (system messages are dropped: an ETAI model was never trained on them). A fine-tuned model
saved with it can be served by vLLM or ``transformers serve`` and see what it was trained on.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from harness.agents.etai_format import (
    OUTPUT,
    STEP,
    Action,
    FinalAnswer,
    InvalidAction,
    defuse,
    parse_action,
    render_action,
    render_context,
    render_final,
    render_prompt,
    render_result,
)

ETAI_CHAT_TEMPLATE = (
    "{%- for m in messages -%}"
    "{%- if m['role'] == 'user' -%}{{ m['content'] }}"
    "{%- elif m['role'] == 'assistant' -%}"
    "{%- if m.get('tool_calls') -%}{%- for c in m['tool_calls'] -%}"
    "<STEP><TOOL>{{ c['function']['name'] }}<ARGS>"
    "{%- if c['function']['arguments'] is string -%}{{ c['function']['arguments'] }}"
    "{%- else -%}{{ c['function']['arguments'] | tojson }}{%- endif -%}<RESULT>"
    "{%- endfor -%}"
    "{%- elif m['content'] -%}{{ m['content'] }}{%- endif -%}"
    "{%- elif m['role'] == 'tool' -%}{{ m['content'] + '\n' }}"
    "{%- endif -%}"
    "{%- endfor -%}"
)

SYSTEM_TOOLS = (
    "You are a coding agent working in a Node.js project with Jest tests. The user message holds "
    "the task and the IDE context. Call exactly one tool per turn and read its result. When the "
    "task is done, reply with a one-paragraph summary and no tool call."
)
SYSTEM_TEXT = (
    "You are a coding agent working in a Node.js project with Jest tests. The user message is an "
    "ETAI trace: the task, the IDE context, and the steps so far. Reply with exactly one of\n"
    '  <STEP><TOOL>tool_name<ARGS>{"json": "arguments"}<RESULT>\n'
    "  <OUTPUT>a one-paragraph summary<TRACE_END>\n"
    "and nothing else. Tools (name: JSON schema of the arguments):\n"
)

Decision = Action | FinalAnswer | InvalidAction
Message = dict[str, Any]


def text_messages(
    record: Mapping[str, Any],
    observations: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]],
    max_result_chars: int,
) -> list[Message]:
    listing = "\n".join(
        f"  {t['function']['name']}: {json.dumps(t['function'].get('parameters', {}))}"
        for t in tools
    )
    return [
        {"role": "system", "content": SYSTEM_TEXT + listing},
        {"role": "user", "content": render_prompt(record, observations, max_result_chars)},
    ]


def tool_messages(
    record: Mapping[str, Any],
    observations: Sequence[Mapping[str, Any]],
    sent: Sequence[Message],
    max_result_chars: int,
) -> list[Message]:
    """The conversation so far. ``sent[i]`` is the assistant message recorded at step i (what the
    model really said, one tool call kept); steps without one are rebuilt from the observation."""
    messages: list[Message] = [
        {"role": "system", "content": SYSTEM_TOOLS},
        {"role": "user", "content": render_context(record)},
    ]
    for i, obs in enumerate(observations):
        said = sent[i] if i < len(sent) else _rebuilt(obs, i)
        result = render_result(obs.get("execution_result"), max_result_chars)
        messages.append(said)
        if said.get("tool_calls"):
            messages.append(
                {"role": "tool", "tool_call_id": said["tool_calls"][0]["id"], "content": result}
            )
        else:
            messages.append({"role": "user", "content": result + "\n"})
    return messages


def _rebuilt(obs: Mapping[str, Any], i: int) -> Message:
    tool, args = obs.get("tool_called"), obs.get("tool_args")
    if tool == "invalid_action" or not isinstance(tool, str):
        return {"role": "assistant", "content": "(invalid action)"}
    return _call_message(f"call_{i + 1}", tool, _json_args(args if isinstance(args, dict) else {}))


def _call_message(call_id: str, name: str, arguments: str, content: str | None = None) -> Message:
    return {
        "role": "assistant",
        "content": content,
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
        ],
    }


def _json_args(args: Mapping[str, Any]) -> str:
    return defuse(json.dumps(dict(args), ensure_ascii=False, default=str))


def message_of(response: Any) -> Mapping[str, Any]:
    """``choices[0].message`` of a chat-completions response; ValueError if the shape is wrong."""
    try:
        message = response["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        raise ValueError(
            f"no choices[0].message in the response: {json.dumps(response)[:300]}"
        ) from None
    if not isinstance(message, Mapping):
        raise ValueError("choices[0].message is not an object")  # noqa: TRY004  (one error type for bad shapes)
    return message


def decide_tools(
    message: Mapping[str, Any], tools: Sequence[str], step: int
) -> tuple[Decision, Message]:
    """The decision in a function-calling reply, and the assistant message to replay next turn.

    The first tool call is taken (the loop runs one action per step); a reply without one is the
    final answer, unless it is ETAI text (a served ETAI model without a tool-call parser).
    """
    content = message.get("content")
    content = content if isinstance(content, str) else ""
    calls = message.get("tool_calls")
    if isinstance(calls, list) and calls:
        call = calls[0] if isinstance(calls[0], Mapping) else {}
        fn = call.get("function") if isinstance(call.get("function"), Mapping) else {}
        name, raw = fn.get("name"), fn.get("arguments", "{}")
        call_id = (
            call.get("id") if isinstance(call.get("id"), str) and call.get("id") else f"call_{step}"
        )
        decision = _tool_decision(name, raw, tools)
        # Arguments that are not JSON are replayed as {}: some servers re-parse them and would fail
        # the whole request; the tool result says what was wrong.
        replay = (
            raw
            if isinstance(raw, str) and isinstance(decision, Action)
            else (_json_args(decision.args) if isinstance(decision, Action) else "{}")
        )
        return decision, _call_message(call_id, str(name or "")[:100], replay, content or None)
    if content.lstrip().startswith((STEP, OUTPUT)):
        return text_decision(content, tools)
    if content.strip():
        return FinalAnswer(content.strip()), {"role": "assistant", "content": content}
    return (
        InvalidAction(
            "no action: the reply had neither a tool call nor text", json.dumps(dict(message))[:200]
        ),
        {"role": "assistant", "content": ""},
    )


def _tool_decision(name: Any, raw: Any, tools: Sequence[str]) -> Decision:
    if not isinstance(name, str) or not name:
        return InvalidAction("tool call without a function name", repr(name)[:200])
    if name not in tools:
        return InvalidAction(f"unknown tool {name[:60]!r}; known: {', '.join(tools)}", name[:200])
    if isinstance(raw, Mapping):  # some servers send the arguments already decoded
        return Action(name, dict(raw))
    if not isinstance(raw, str):
        return InvalidAction(f"arguments of tool {name!r} must be a JSON string", repr(raw)[:200])
    try:
        args = json.loads(raw) if raw.strip() else {}
    except (ValueError, RecursionError) as e:
        return InvalidAction(f"malformed JSON arguments for tool {name!r}: {e}", raw[:200])
    if not isinstance(args, dict):
        return InvalidAction(
            f"arguments of tool {name!r} must be a JSON object, got {type(args).__name__}",
            raw[:200],
        )
    return Action(name, args)


def text_decision(content: str, tools: Sequence[str]) -> tuple[Decision, Message]:
    """Parse ETAI text (the server stripped the stop marker: parse_action accepts that).

    The message replayed next turn is the trained text of the step, as ``render_prompt`` writes
    it: the action, the answer, or for an invalid output the ``invalid_action`` step the loop
    records (not the raw reply, which a served model may have run on past its end marker).
    """
    decision = parse_action(content, tools=tools)
    if isinstance(decision, Action):
        said = render_action(decision.tool, decision.args)
    elif isinstance(decision, FinalAnswer):
        said = render_final(decision.text)
    else:
        said = render_action("invalid_action", {})  # the step harness.runs.loop records
    return decision, {"role": "assistant", "content": said}
