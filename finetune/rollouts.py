"""Run folders as data: the rows of ``etai run`` -> trajectories, RFT sets and execution DPO pairs.

A session row of ``etai run`` keeps what the agent was given (``task``: instruction and IDE
context; ``observations``: each step's tool call and execution result, invalid steps included) and,
for a text agent, a ``transcript`` (the render settings, a sha256 of every prompt, every raw
output). So a row re-renders each prompt through ``harness.agents.etai_format``; ``check_prompts``
compares that text with the hash the agent stored, which is what proves that training text and
prompt text are the same bytes.

A trajectory has the shape of a session record (``session_id``, ``user_instruction``,
``ide_context``, ``execution_trace``, ``final_output``), so ``examples.build_example`` turns it into
an example with SFT's loss mask unchanged. ``final_output`` is None when the episode ended without
an answer (then no answer is learned).
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from finetune.errors import DataError
from harness.agents import etai_format as fmt

GREEN = "passed"


def read_run(folder: str | Path) -> list[dict[str, Any]]:
    """The session rows of a run folder (``results.jsonl``, deduplicated as the runner reads it)."""
    from harness.base.errors import InputError
    from harness.runs.results import read_rows

    path = Path(folder)
    results = path / "results.jsonl" if path.is_dir() else path
    if not results.is_file():
        raise DataError(f"{folder}: no results.jsonl (not a run folder of `etai run`)")
    try:
        rows = read_rows(results)
    except InputError as exc:
        raise DataError(str(exc)) from None
    return [r for r in rows if "session_id" in r and "status" in r]


def read_runs(folders: str | Path | Sequence[str | Path]) -> list[dict[str, Any]]:
    folders = [folders] if isinstance(folders, (str, Path)) else list(folders)
    return [row for folder in folders for row in read_run(folder)]


def is_rollout(row: Mapping[str, Any]) -> bool:
    """Whether the row carries what a trajectory needs (rows of older harness versions do not)."""
    task, texts = row.get("task"), row.get("observation_texts")
    return (
        isinstance(task, Mapping)
        and isinstance(task.get("context_text"), str)
        and isinstance(row.get("observations"), list)
        and isinstance(texts, list)
        and len(texts) == len(row["observations"])
    )


def prompt_text(row: Mapping[str, Any], step: int, max_result_chars: int | None = None) -> str:
    """The prompt before decision ``step`` (0-based), from the texts the row kept: the same
    bytes as ``etai_format.render_prompt`` gave the agent (JSON objects on disk are key-sorted,
    so re-rendering the stored observations would not be)."""
    chars = max_result_chars_of(row) if max_result_chars is None else max_result_chars
    steps = row["observation_texts"][:step]
    return row["task"]["context_text"] + "".join(
        action + fmt.render_result_json(result, chars) + "\n" for action, result in steps
    )


def rollout_text(
    row: Mapping[str, Any], max_result_chars: int
) -> tuple[str, list[tuple[int, int]]]:
    """The whole rollout as training text and the spans learned (its actions and its answer),
    laid out as ``etai_format.render_training_example`` lays out a session."""
    text, spans = row["task"]["context_text"], []
    for action, result in row["observation_texts"]:
        spans.append((len(text), len(text) + len(action)))
        text += action + fmt.render_result_json(result, max_result_chars) + "\n"
    if row.get("final_output") is not None:
        final = fmt.render_final(row["final_output"])
        spans.append((len(text), len(text) + len(final)))
        text += final
    return text, spans


def trajectory(row: Mapping[str, Any]) -> dict[str, Any]:
    """The row as a session record: the steps the agent took with the results it saw."""
    if not is_rollout(row):
        raise DataError(
            f"row {row.get('session_id')!r} (sample {row.get('sample')}) lacks task.context_text, "
            "observations or observation_texts: it was written by an older etai; rerun it"
        )
    task = row["task"]
    return {
        "session_id": row["session_id"],
        "intent": row.get("intent"),
        "user_instruction": task.get("user_instruction", ""),
        "ide_context": task.get("ide_context", {}),
        "execution_trace": [dict(o) for o in row["observations"]],
        "final_output": row.get("final_output"),
        "cursor_target": row.get("cursor_target"),
    }


def max_result_chars_of(row: Mapping[str, Any], default: int = fmt.DEFAULT_MAX_RESULT_CHARS) -> int:
    transcript = row.get("transcript") or {}
    return int(transcript.get("max_result_chars", default))


def prompt_sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def check_prompts(row: Mapping[str, Any]) -> int:
    """Re-render every prompt of the row and compare it with the agent's hash; returns the count.

    A mismatch is a DataError naming the row and the step: the text a model would be trained on
    would differ from the text it was prompted with.
    """
    hashes = (row.get("transcript") or {}).get("prompt_sha256") or []
    trajectory(row)  # the row is a rollout, or a DataError says why not
    for i, want in enumerate(hashes):
        if prompt_sha256(prompt_text(row, i)) != want:
            raise DataError(
                f"row {row['session_id']!r} (sample {row.get('sample')}), step {i + 1}: the "
                "re-rendered prompt differs from the one the agent was given"
            )
    return len(hashes)


def _clean(row: Mapping[str, Any]) -> bool:
    return not row.get("tamper") and not int(row.get("n_invalid") or 0)


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _actions_key(row: Mapping[str, Any]) -> str:
    steps = [(o.get("tool_called"), o.get("tool_args")) for o in row.get("observations") or []]
    return _key([steps, row.get("final_output")])


def select_green(
    rows: Iterable[dict[str, Any]], per_session: int = 1, allow_invalid: bool = False
) -> list[dict[str, Any]]:
    """Rejection sampling's filter: verified-green rollouts only, shortest first, deduplicated.

    Kept: status ``passed`` (green at the end by the harness's verification, no tampering), no
    invalid step unless ``allow_invalid``; per session at most ``per_session`` distinct action
    sequences, ordered by first green step, then steps used. Returns the kept rows.
    """
    by_session: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        green = row.get("status") == GREEN and row.get("green") is True
        if green and not row.get("tamper") and (allow_invalid or _clean(row)) and is_rollout(row):
            by_session[row["session_id"]].append(row)
    kept: list[dict[str, Any]] = []
    for sid in sorted(by_session):
        ranked = sorted(
            by_session[sid],
            key=lambda r: (r.get("steps_to_green") or 10**9, r.get("steps_used") or 0),
        )
        seen: set[str] = set()
        for row in ranked:
            key = _actions_key(row)
            if key in seen:
                continue
            seen.add(key)
            kept.append(row)
            if len(seen) >= per_session:
                break
    return kept


def _completion_at(row: Mapping[str, Any], i: int) -> dict[str, Any] | None:
    """What the agent emitted at step i (0-based): an action, an answer, or the raw invalid text."""
    observations = row.get("observations") or []
    if i < len(observations):
        o = observations[i]
        if o.get("tool_called") == "invalid_action":
            outputs = (row.get("transcript") or {}).get("outputs") or []
            return {"text": outputs[i]} if i < len(outputs) else None
        return {"text": row["observation_texts"][i][0]}  # as rendered, in the agent's key order
    if i == len(observations) and row.get("final_output") is not None:
        return {"final_output": row["final_output"]}
    return None


def execution_pairs(
    rows: Iterable[Mapping[str, Any]], reward: Any, margin: float = 0.0
) -> list[dict[str, Any]]:
    """DPO pairs from rollouts: same session, same prompt (the same steps and results seen so
    far), then two different next outputs, the one whose best rollout is green and better
    rewarded (by more than ``margin``) chosen over the other.

    A decision's value at a prompt is the best reward of the rollouts that took it there, so a
    step that led to green in one rollout is never rejected because another rollout failed
    after it. Returns pair records for ``examples.build_pair``: {session_id, step, prompt,
    prompt_sha256, chosen, rejected}, the prompt being the exact text both outputs followed and
    each side ``{"text": ...}`` as emitted (an action as rendered, or a raw invalid output) or
    ``{"final_output": ...}``.
    """
    # (session, prompt hash) -> decision key -> (value, row, step, completion)
    nodes: dict[tuple[str, str], dict[str, tuple[float, Mapping[str, Any], int, dict]]] = (
        defaultdict(dict)
    )
    for row in rows:
        value = reward(row)
        if value is None or not is_rollout(row):
            continue
        for i, (prompt, _) in enumerate(_prompts(row)):
            completion = _completion_at(row, i)
            if completion is None:
                continue
            options = nodes[(row["session_id"], prompt)]
            key = _key(completion)
            if key not in options or value > options[key][0]:
                options[key] = (value, row, i, completion)
    pairs = []
    for (sid, prompt), options in sorted(nodes.items(), key=lambda kv: kv[0]):
        ranked = sorted(options.values(), key=lambda o: -o[0])
        for a, (va, ra, step, chosen) in enumerate(ranked):
            if ra.get("status") != GREEN or not _clean(ra):
                continue
            for vb, _, _, rejected in ranked[a + 1 :]:
                if va - vb <= margin:
                    continue
                pairs.append(
                    {
                        "session_id": sid,
                        "step": step,
                        "prompt": prompt_text(ra, step),
                        "prompt_sha256": prompt,
                        "chosen": chosen,
                        "rejected": rejected,
                    }
                )
    return pairs


def _prompts(row: Mapping[str, Any]) -> list[tuple[str, int]]:
    """(sha256 of the prompt, step) before each decision of the row: steps, and the answer."""
    n = len(row["observations"]) + (1 if row.get("final_output") is not None else 0)
    return [(prompt_sha256(prompt_text(row, i)), i) for i in range(n)]
