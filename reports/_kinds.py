"""What a report and the gate measure on a run of each suite kind, under the kind's own names.

Two shapes of kind (harness/suites/kinds.py is the registry of kinds; this module adds no second
one): ``sessions`` replays IDE sessions, whose rows carry steps, paths and cursors (Path
Accuracy@k, tamper rate, special-cased rate, cursor error: reports/_compare.py ``arm_metrics``);
every other kind (``humaneval``, plug-ins) is read as tasks with sampled outcomes: pass@k with its
interval and the status counts, from the rows. A kind's own per-agent summary fields
(``SuiteKind.metrics``, e.g. the demo plug-in's ``counted``) are readable by name too, as the
run's summary states them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from harness.base.errors import InputError
from harness.suites.kinds import SUITE_KINDS

SESSIONS = "sessions"
# The pass@k values a task kind reports: those of harness.suites.kinds.pass_ks (k <= samples).
TASK_KS = (1, 2, 5, 10, 20, 50, 100)


def kind_of_run(summary: Mapping[str, Any] | None, rows: Sequence[Mapping[str, Any]]) -> str:
    """The kind a run folder was written by: its summary's ``kind``; `etai humaneval` writes none
    but names its suite ``humaneval``; older session runs name neither."""
    s = summary or {}
    if s.get("kind"):
        return str(s["kind"])
    suite = s.get("suite") or (rows[0].get("suite") if rows else None)
    return "humaneval" if suite == "humaneval" else SESSIONS


def headline(kind: str, k: int, samples: int) -> list[str]:
    """The metrics a model × suite matrix shows for a suite of this kind."""
    if kind == SESSIONS:
        return [f"pa@{k}", "pass@1"]
    most = max(x for x in TASK_KS if x <= max(samples, 1))
    return ["pass@1"] + ([f"pass@{most}"] if most > 1 else [])


def own_names(kind: str, summaries: Sequence[Mapping[str, Any]]) -> list[str]:
    """The kind's own per-agent summary metrics that hold a number (or numbers by key): the names
    the kind declares when it is installed, else every such field the summaries hold."""

    try:
        declared: Sequence[str] | None = SUITE_KINDS.get(kind).metrics
    except InputError:
        declared = None  # a kind not installed here: its summary still names its metrics
    names: dict[str, None] = {}
    for s in summaries:
        for agent in (s.get("agents") or {}).values():
            if isinstance(agent, Mapping):
                for name, value in flatten(agent).items():
                    if declared is None or name.split(".")[0] in declared:
                        names[name] = None
    return list(names)


def flatten(agent: Mapping[str, Any]) -> dict[str, float]:
    """One agent's summary as ``name`` or ``name.key`` -> number (``metrics`` entries unprefixed)."""
    out: dict[str, float] = {}
    for name, value in agent.items():
        if name == "metrics" and isinstance(value, Mapping):
            out.update(flatten(value))
        elif isinstance(value, bool):
            continue
        elif isinstance(value, (int, float)):
            out[name] = float(value)
        elif isinstance(value, Mapping):
            out.update(
                {
                    f"{name}.{key}": float(v)
                    for key, v in value.items()
                    if isinstance(v, (int, float)) and not isinstance(v, bool)
                }
            )
    return out


def summary_value(
    summaries: Mapping[str, Mapping[str, Any]], runs: Sequence[str], agent: str, name: str
) -> float | None:
    """``name`` from the summary of the run holding ``agent`` (None where no summary states it)."""
    for run in runs:
        a = (summaries.get(run) or {}).get("agents") or {}
        if isinstance(a.get(agent), Mapping):
            value = flatten(a[agent]).get(name)
            if value is not None:
                return value
    return None
