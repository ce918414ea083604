"""The records every writer and reader of results shares: one status enum, the result row, the
summary, and the schema version both carry (README "Records").

Rows stay JSON objects on disk (one per line of ``results.jsonl``), so a row is a ``TypedDict``:
the fields are named and typed here once, and ``stamp`` (on every append) and ``problem`` (on every
read) hold writers and readers to them. A kind adds its own fields beside the common ones.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, TypedDict

# 1: the first versioned rows. Rows without the field were written before it and read as version 0.
SCHEMA_VERSION = 1


class Status(str, enum.Enum):
    """The one status taxonomy: of an execution (exec, a Jest run), a step, and a result row.
    Decided by the harness from evidence, never from an exit code alone."""

    PASSED = "passed"
    FAILED = "failed"
    TIMEOUT = "timeout"
    MEMORY_LIMIT = "memory_limit"
    OUTPUT_LIMIT = "output_limit"
    INVALID_ACTION = "invalid_action"  # a step that was no valid tool call (counted as a step)
    TAMPERED = (
        "tampered"  # the evidence shows workspace code interfered with the tests or framework
    )
    INFRA_ERROR = "infra_error"  # the machinery failed (engine, server): never the agent's fault
    REFERENCE_BROKEN = "reference_broken"  # a row's session whose reference never reaches green
    # Not run: a time-boxed evaluation (HarnessEval's budget_s) ran out before the episode started
    # its sandbox. Nothing of the agent's was judged, so it is in no denominator, and a rerun runs it.
    SKIPPED_BUDGET = "skipped_budget"


STATUSES: tuple[str, ...] = tuple(s.value for s in Status)
# In no denominator: the session cannot be scored, or the episode did not run (to the end).
EXCLUDED = (
    Status.REFERENCE_BROKEN.value,
    Status.INFRA_ERROR.value,
    Status.SKIPPED_BUDGET.value,
)
# Retried by the next run of the same command; a run holding one is not complete.
NON_TERMINAL = frozenset({Status.INFRA_ERROR.value, Status.SKIPPED_BUDGET.value})


class Row(TypedDict, total=False):
    """One job's result: for sessions one episode (session, agent, sample), for HumanEval one check."""

    schema_version: int
    cache_key: str  # what the job depends on: rerunning the same command skips stored keys
    suite: str
    session_id: str  # a HumanEval row: the task id
    session_hash: str
    agent: str
    sample: int
    status: str  # a Status value
    reason: str | None  # why, in words, when not passed
    duration_s: float
    # where the episode's time went, in seconds: acquire (a sandbox holding the workspace),
    # baseline, agent (its decisions), tools, verify, close
    phases: dict[str, float]
    # Jest's own seconds: agent (its jest_run steps), graded (every graded run), final (the run of
    # the final visible verdict); agent + final is the episode's floor (harness/runs/loop.py)
    jest_s: dict[str, float]
    harness_version: str
    image: str | None
    # session episodes
    intent: str
    project: str  # the session's project (provenance.repo); absent for a session written by hand
    fix_date: str  # the fixing commit's author date (provenance.date, ISO 8601); absent if unknown
    k: int
    max_steps: int
    steps: list[dict[str, Any]]  # each: step, tool, args, status, result (and error)
    steps_used: int
    actions: list[dict[str, Any]]
    agent_path: list[list[str | None]]
    human_path: list[list[str | None]]
    green: bool
    steps_to_green: int | None  # the first step after which the workspace verified green
    n_invalid: int
    cursor: dict[str, Any] | None
    cursor_source: str | None  # "agent" (its prediction) or "first_edit"
    cursor_target: dict[str, Any]
    viewport: dict[str, Any]
    checks: list[str]  # the verification checks that failed
    tamper: list[str]
    verification: dict[str, Any]
    final_output: str | None
    # rollouts as data (finetune.rollouts re-renders every prompt from these)
    agent_fingerprint: str  # the model weights' fingerprint ("" for rule-based agents)
    task: dict[str, Any]  # user_instruction, ide_context, and context_text (the rendered context)
    observations: list[dict[str, Any]]  # per step: step, tool_called, tool_args, execution_result
    observation_texts: list[list[str]]  # per step: [action as rendered, result_json], agent's order
    transcript: dict[str, Any]  # text agents: format, max_result_chars, prompt_sha256, outputs


class Summary(TypedDict, total=False):
    """``summary.json``: the run as a whole; ``agents`` maps each agent spec to its metrics."""

    schema_version: int
    kind: str  # the suite kind that ran it (harness.suites.kinds)
    suite: str
    samples: int
    out: str
    complete: bool  # every job has a terminal row (no infra_error or skipped_budget left)
    agents: dict[str, dict[str, Any]]


def stamp(row: Mapping[str, Any]) -> dict[str, Any]:
    """The row as written: with ``schema_version``; ValueError (a harness bug) if malformed."""
    if "cache_key" not in row:
        raise ValueError("a result row needs a cache_key")
    status = row.get("status")
    if status is not None and status not in STATUSES:
        raise ValueError(f"a result row has an unknown status {status!r}")
    return {**row, "schema_version": SCHEMA_VERSION}


def summary(**fields: Any) -> dict[str, Any]:
    """A summary with ``schema_version``."""
    return {"schema_version": SCHEMA_VERSION, **fields}


def problem(obj: object) -> str | None:
    """What keeps ``obj`` from being a row this version reads, or None."""
    if not isinstance(obj, dict) or not isinstance(obj.get("cache_key"), str):
        return "not a result row (no cache_key)"
    version = obj.get("schema_version", 0)
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        return f"schema_version {version!r} is newer than this etai reads ({SCHEMA_VERSION}); upgrade etai"
    status = obj.get("status")
    if status is not None and status not in STATUSES:
        return f"unknown status {status!r}"
    return None
