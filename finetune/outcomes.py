"""Rollout outcomes as the reward head's targets: every rollout of a run folder, green or not.

The reward head (``finetune/model.py``) reads the hidden state at each ``<RESULT>`` and outputs
one logit, trained with BCE. On a session's reference trace its target is whether that step's
execution succeeded (``examples.step_succeeded``). On a rollout of ``etai run`` it is the outcome
of the whole episode, from the reward registry (``reward:`` section, ``finetune/rewards.py``):
every ``<RESULT>`` of the rollout gets

    target = clip((reward(row) − low) / (high − low), 0, 1),    [low, high] = data.reward_range

With the default reward and range ``[0, 1]``: ``1 − 0.05·(j − 1)`` (less 0.1 per invalid action)
for a rollout first green at step j, and 0 for every other outcome (failed, limits, invalid,
special-cased, tampered). So the head learns, at each step, how likely the episode is to end green
and how soon (a Monte-Carlo value: no discount, the same target at every step of an episode). A
wider range (``[-2, 1]``) keeps the order of the bad outcomes too (tampered below special-cased:
green on the visible verification tests, red on the held-out ones; that below a limit, below
failed). Rows without signal
(reward None: ``infra_error``, ``reference_broken``, ...) and rows without a step are left out.

Only the head learns from these examples: the LM's labels are all IGNORE (a failed rollout's
actions must not be imitated) and the intent, tool, cursor and exit labels are MISSING (the tools
a rollout chose are not the ones to route to). The examples join any unpaired trainer's (``sft``,
``rft``) through ``data.reward_rollouts``; the composite loss trains the head.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from finetune.errors import ConfigError
from finetune.examples import IGNORE, MISSING, Example, build_example, uid_of
from finetune.rewards import Reward
from finetune.rollouts import check_prompts, rollout_text, trajectory

DEFAULT_RANGE = (0.0, 1.0)


def outcome_target(
    row: Mapping[str, Any], reward: Reward, reward_range: Sequence[float] = DEFAULT_RANGE
) -> float | None:
    """The row's reward scaled from ``reward_range`` to [0, 1] and clipped; None: no signal."""
    low, high = check_range(reward_range)
    value = reward(row)
    if value is None:
        return None
    return min(max((float(value) - low) / (high - low), 0.0), 1.0)


def check_range(reward_range: Sequence[float]) -> tuple[float, float]:
    try:
        low, high = (float(x) for x in reward_range)
    except (TypeError, ValueError):
        raise ConfigError(
            "data.reward_range", f"expected [low, high], got {reward_range!r}"
        ) from None
    if not high > low:
        raise ConfigError("data.reward_range", f"needs low < high, got [{low}, {high}]")
    return low, high


def outcome_example(
    row: Mapping[str, Any],
    target: float,
    tokenizer: Any,
    max_seq_len: int,
    max_result_chars: int,
) -> Example:
    """The rollout as the agent saw it, with ``target`` at every ``<RESULT>`` and nothing else to
    learn. The row's prompts are checked against the hashes its agent stored first."""
    check_prompts(row)
    session = {**trajectory(row), "intent": None, "cursor_target": None}
    rendered = rollout_text(row, max_result_chars)
    ex = build_example(session, tokenizer, max_seq_len, max_result_chars, rendered=rendered)
    return replace(
        ex,
        # one uid per row (the reference cache is keyed by it), never a session's own
        uid=uid_of("outcome", row["session_id"], row.get("sample"), row.get("cache_key")),
        labels=(IGNORE,) * len(ex.labels),
        tool_label=(MISSING,) * len(ex.tool_pos),
        reward_label=(float(target),) * len(ex.reward_pos),
        exit_label=MISSING,
    )


def outcome_examples(
    rows: Iterable[Mapping[str, Any]],
    reward: Reward,
    tokenizer: Any,
    max_seq_len: int,
    max_result_chars: int,
    reward_range: Sequence[float] = DEFAULT_RANGE,
) -> list[Example]:
    """One reward-head example per row with a signal and at least one step."""
    return [
        outcome_example(row, target, tokenizer, max_seq_len, max_result_chars)
        for row, target in outcome_rows(rows, reward, reward_range)
    ]


def outcome_rows(
    rows: Iterable[Mapping[str, Any]],
    reward: Reward,
    reward_range: Sequence[float] = DEFAULT_RANGE,
) -> list[tuple[Mapping[str, Any], float]]:
    """The rows that become examples (a signal and at least one step), each with its target:
    what the held-out check is given before anything is tokenised."""
    out = []
    for row in rows:
        target = outcome_target(row, reward, reward_range)
        if target is not None and row.get("observations"):
            out.append((row, target))
    return out
