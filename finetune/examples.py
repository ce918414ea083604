"""ETAI sessions -> token-level training examples (no torch here; ``data.py`` batches them).

The text comes from ``harness.agents.etai_format`` so training and prompting share one serialisation.
Each example carries what the four heads learn from, at the token position of their marker:
the intent (at <TRACE_START>), the tool of each step (at its <TOOL>), whether each step's
execution succeeded (at its <RESULT>) and the cursor target in pixels (at <OUTPUT>).
"""

from __future__ import annotations

import json
import random
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from finetune.errors import DataError
from harness.agents import etai_format as fmt
from harness.session.intents import ALLOWED_TOOLS, INTENTS
from harness.tools import tool_names

IGNORE = -100  # label of tokens the LM loss skips (torch's cross_entropy ignore_index)
MISSING = -1  # head label / position that is absent (or cut by truncation)
PLACEMENTS = ("before", "after")
DEFAULT_VIEWPORT = {
    "scroll_top_line": 0,
    "line_height_px": 18,
    "char_width_px": 7.2,
    "gutter_px": 48,
    "zoom": 1.0,
}
_REQUIRED = ("session_id", "user_instruction", "execution_trace", "final_output")


@dataclass(frozen=True)
class Example:
    uid: int  # stable id (crc32 of the session id): keys the reference-model cache
    input_ids: tuple[int, ...]
    labels: tuple[int, ...]  # IGNORE outside the learned spans
    intent: int
    intent_pos: int
    tool_pos: tuple[int, ...]
    tool_label: tuple[int, ...]
    reward_pos: tuple[int, ...]
    # 1 the step's execution succeeded, 0 failed, MISSING unknown; a rollout's outcome in [0, 1]
    # for every step instead (finetune.outcomes)
    reward_label: tuple[float, ...]
    cursor_pos: int
    cursor_xy: tuple[float, float]  # target in pixels (docs/metrics.md#viewport-geometry)
    placement: int  # index in PLACEMENTS or MISSING
    exit_label: int  # 1 if the session's last jest_run exited 0, 0 if not, MISSING if none ran
    truncated: int  # tokens cut from the end to fit max_seq_len


@dataclass(frozen=True)
class PairExample:
    """A DPO pair; both sides share the prompt, labels cover only the completion."""

    uid: int
    chosen_ids: tuple[int, ...]
    chosen_labels: tuple[int, ...]
    rejected_ids: tuple[int, ...]
    rejected_labels: tuple[int, ...]
    truncated: int
    ref_logps: tuple[float, float] | None = None  # the reference's summed log-probs, if stored


@dataclass(frozen=True)
class TruncationReport:
    examples: int
    truncated_examples: int
    tokens_cut: int

    def __str__(self) -> str:
        return (
            f"{self.truncated_examples} of {self.examples} examples truncated, "
            f"{self.tokens_cut} tokens cut"
        )


def load_sessions(paths: str | Path | Sequence[str | Path]) -> list[dict[str, Any]]:
    """Sessions from JSONL files; a bad line is a DataError naming file, line and field."""
    paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
    sessions: list[dict[str, Any]] = []
    for path in map(Path, paths):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as exc:
                raise DataError(f"{path}:{number}: not JSON: {exc}") from None
            if not isinstance(record, dict):
                raise DataError(f"{path}:{number}: expected a JSON object")
            for field in _REQUIRED:
                if field not in record:
                    raise DataError(
                        f"{path}:{number}: session {record.get('session_id')!r} lacks {field!r}"
                    )
            sessions.append(record)
    if not sessions:
        raise DataError(f"no sessions in {', '.join(map(str, paths))}")
    return sessions


def cursor_pixels(
    target: Mapping[str, Any], viewport: Mapping[str, Any] | None
) -> tuple[float, float]:
    """The target's screen position (harness.runs.metrics.pixel: the formula cursor error is scored with)."""
    from harness.runs.metrics import pixel

    x, y = pixel(target["line"], target["column"], {**DEFAULT_VIEWPORT, **(viewport or {})})
    return float(x), float(y)


def step_succeeded(result: Any) -> int:
    """1/0 from an execution result's own evidence (exit_code, success, error), MISSING if none."""
    if not isinstance(result, Mapping):
        return MISSING
    if isinstance(result.get("exit_code"), int):
        return int(result["exit_code"] == 0)
    if isinstance(result.get("success"), bool):
        return int(result["success"])
    if result.get("error"):
        return 0
    return 1 if result else MISSING  # a read/list/diff that returned data ran fine


def _exit_label(trace: Sequence[Mapping[str, Any]]) -> int:
    runs = [s for s in trace if s.get("tool_called") == "jest_run"]
    return step_succeeded(runs[-1].get("execution_result")) if runs else MISSING


def uid_of(*parts: object) -> int:
    return zlib.crc32("\x1f".join(map(str, parts)).encode())


def encode_segments(
    tokenizer: Any, segments: Sequence[tuple[str, bool]]
) -> tuple[list[int], list[int]]:
    """Token ids and labels for (text, learned) segments.

    Segments are encoded one by one so every learned token is known exactly; their borders sit
    at special tokens, which the tokenizer splits on anyway, so this equals encoding the whole
    text. Only the first segment gets the tokenizer's own prefix (a BOS for Llama, none for
    GPT-2), as ``tokenizer(prompt)`` would at inference.
    """
    ids: list[int] = []
    labels: list[int] = []
    for i, (text, learned) in enumerate(segments):
        piece = tokenizer(text, add_special_tokens=i == 0)["input_ids"]
        ids.extend(piece)
        labels.extend(piece if learned else [IGNORE] * len(piece))
    return ids, labels


def _segments(text: str, spans: Sequence[tuple[int, int]]) -> list[tuple[str, bool]]:
    out, at = [], 0
    for start, end in spans:
        if start > at:
            out.append((text[at:start], False))
        out.append((text[start:end], True))
        at = end
    if at < len(text):
        out.append((text[at:], False))
    return out


def _positions(ids: Sequence[int], token_id: int) -> list[int]:
    return [i for i, t in enumerate(ids) if t == token_id]


def build_example(
    session: Mapping[str, Any],
    tokenizer: Any,
    max_seq_len: int,
    max_result_chars: int = fmt.DEFAULT_MAX_RESULT_CHARS,
    rendered: tuple[str, Sequence[tuple[int, int]]] | None = None,
) -> Example:
    """``rendered`` (text, learned spans) replaces the rendering of ``session``: a rollout's text
    is assembled from the texts its row kept (``rollouts.rollout_text``)."""
    text, spans = rendered or fmt.render_training_example(session, max_result_chars)
    ids, labels = encode_segments(tokenizer, _segments(text, spans))
    cut = max(len(ids) - max_seq_len, 0)
    # Cut the end: the instruction and context are what every later token depends on.
    ids, labels = ids[:max_seq_len], labels[:max_seq_len]
    marker = {name: tokenizer.convert_tokens_to_ids(tok) for name, tok in fmt.HEAD_MARKERS.items()}
    trace = session.get("execution_trace") or []
    tools = tool_names()
    tool_pos = _positions(ids, marker["tool"])
    reward_pos = _positions(ids, marker["reward"])
    intent_pos = _positions(ids, marker["intent"])
    cursor_pos = _positions(ids, marker["cursor"])
    target = session.get("cursor_target")
    viewport = (session.get("ide_context") or {}).get("viewport")
    intent = session.get("intent")
    return Example(
        uid=uid_of(session["session_id"]),
        input_ids=tuple(ids),
        labels=tuple(labels),
        intent=INTENTS.index(intent) if intent in INTENTS else MISSING,
        intent_pos=intent_pos[0] if intent_pos else MISSING,
        tool_pos=tuple(tool_pos),
        tool_label=tuple(
            tools.index(s["tool_called"]) if s.get("tool_called") in tools else MISSING
            for s in trace[: len(tool_pos)]
        ),
        reward_pos=tuple(reward_pos),
        reward_label=tuple(
            step_succeeded(s.get("execution_result")) for s in trace[: len(reward_pos)]
        ),
        cursor_pos=cursor_pos[0] if cursor_pos and target else MISSING,
        cursor_xy=cursor_pixels(target, viewport) if target else (0.0, 0.0),
        placement=PLACEMENTS.index(target["placement"])
        if target and target.get("placement") in PLACEMENTS
        else MISSING,
        exit_label=_exit_label(trace),
        truncated=cut,
    )


def truncation_report(examples: Iterable[Example | PairExample]) -> TruncationReport:
    examples = list(examples)
    cut = [e.truncated for e in examples]
    return TruncationReport(len(cut), sum(1 for c in cut if c), sum(cut))


# --- preference pairs (DPO) ------------------------------------------------------------------


def synthetic_pairs(sessions: Sequence[Mapping[str, Any]], seed: int = 0) -> list[dict[str, Any]]:
    """Preference records from sessions alone: the human's step is chosen over a corrupted one.

    The rejected action is a tool the session's intent does not allow (so DPO teaches the same
    constraint the routing mask enforces), or, when every tool is allowed, the same tool pointed
    at a file that was not open. Real preference data uses the same record shape.
    """
    rng = random.Random(seed)
    records = []
    for session in sessions:
        allowed = ALLOWED_TOOLS.get(session.get("intent"), tool_names())
        banned = [t for t in tool_names() if t not in allowed]
        for i, step in enumerate(session.get("execution_trace") or []):
            args = dict(step.get("tool_args") or {})
            if banned:
                rejected = {"tool_called": rng.choice(banned), "tool_args": args}
            else:
                rejected = {
                    "tool_called": step["tool_called"],
                    "tool_args": {**args, "file": "README.md"},
                }
            records.append(
                {
                    "session_id": session["session_id"],
                    "step": i,
                    "chosen": {"tool_called": step["tool_called"], "tool_args": args},
                    "rejected": rejected,
                }
            )
    return records


def build_pair(
    record: Mapping[str, Any],
    sessions_by_id: Mapping[str, Mapping[str, Any]],
    tokenizer: Any,
    max_seq_len: int,
    max_result_chars: int = fmt.DEFAULT_MAX_RESULT_CHARS,
) -> PairExample:
    """A preference record {session_id, step, chosen, rejected} -> token pair; with ``prompt``
    (the exact prompt text) the session is not needed.

    chosen/rejected are {tool_called, tool_args} actions, {final_output} answers or {text} (a
    model's raw output, e.g. an invalid action from a rollout). ``ref_logps`` ([chosen, rejected],
    the reference model's summed log-probs of the two completions) is kept when given, and the
    DPO loss then needs no reference forward pass.
    """
    try:
        step = int(record["step"])
        if "prompt" in record:  # the exact text, e.g. from a rollout (finetune.rollouts)
            prompt = str(record["prompt"])
        else:
            session = sessions_by_id[record["session_id"]]
            trace = (session.get("execution_trace") or [])[:step]
            prompt = fmt.render_prompt(session, trace, max_result_chars)
        sides = [_completion(record[side]) for side in ("chosen", "rejected")]
        ref = record.get("ref_logps")
        ref_logps = None if ref is None else (float(ref[0]), float(ref[1]))
        if ref is not None and len(ref) != 2:
            raise ValueError("ref_logps must be [chosen, rejected]")
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise DataError(f"bad preference record {dict(record)!r}: {exc!r}") from None
    out, cut = [], 0
    for completion in sides:
        ids, labels = encode_segments(tokenizer, [(prompt, False), (completion, True)])
        cut += max(len(ids) - max_seq_len, 0)
        out += [tuple(ids[:max_seq_len]), tuple(labels[:max_seq_len])]
    uid = uid_of(record["session_id"], step, sides[0], sides[1])
    return PairExample(uid, *out, truncated=cut, ref_logps=ref_logps)


def _completion(side: Mapping[str, Any]) -> str:
    if "text" in side:
        return str(side["text"])
    if "final_output" in side:
        return fmt.render_final(side["final_output"])
    return fmt.render_action(side["tool_called"], side.get("tool_args") or {})
