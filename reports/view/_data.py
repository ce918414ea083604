"""Run folders as what the viewer shows: a compact index (one line per episode, every column the
list filters and sorts on) and, per episode, a body read only when the episode is opened.

Every layout reports/_load.py reads is read here through its own functions (sessions runs,
training folders, both HumanEval layouts). A body keeps what a row says about the episode —
the task, each step's call and result, paths, cursor, verdict — and drops what repeats it
(``observation_texts``, ``transcript``). Nothing here trusts the text: the page escapes it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.runs import metrics
from reports._kinds import kind_of_run
from reports._load import _label, _rows, _summary, find_runs

# The index's columns, in the order each episode's line holds them (view.js reads them by name).
COLUMNS = (
    "id",
    "run",
    "suite",
    "kind",
    "agent",
    "session",
    "sample",
    "intent",
    "status",
    "tampered",
    # green on the visible tests and red on a held-out near twin of one (the row's special_cased),
    # or the gold check fired while the verification tests pass: they passed with fewer assertions
    # than the reference made (harness/grading/verify.py); both mark code special-cased to the tests
    "special",
    # green on the visible tests and red on held-out cases none of which is a near twin (the
    # row's incomplete, harness/runs/held_out.py): a fix that stops short
    "incomplete",
    "green",  # the step after which the tests went green
    "steps",
    "cursor_px",
    "duration_s",
)


@dataclass(frozen=True)
class View:
    """What one `etai view` shows: the index and every episode's body, by id."""

    runs: list[dict[str, Any]]
    index: list[list[Any]]
    bodies: list[dict[str, Any]]

    def index_json(self) -> dict[str, Any]:
        return {"columns": list(COLUMNS), "runs": self.runs, "rows": self.index}


def load_view(paths: Iterable[str | Path]) -> View:
    """Every episode of the given run and training folders (InputError naming a bad one)."""
    found = [f for p in paths for f in find_runs(p)]
    labels = _label([d for d, _, _ in found])
    runs, index, bodies = [], [], []
    for folder, step, _ in found:
        summary = _summary(folder)
        rows = _rows(folder, summary)
        kind = kind_of_run(summary, rows)
        suite = str((summary or {}).get("suite") or (rows[0].get("suite") if rows else kind))
        runs.append(
            {
                "label": labels[folder],
                "path": str(folder),
                "suite": suite,
                "kind": kind,
                "step": step,
                "episodes": len(rows),
            }
        )
        for r in sorted(
            rows, key=lambda r: (str(r["session_id"]), str(r["agent"]), r.get("sample", 0))
        ):
            n = len(index)
            index.append(_line(n, labels[folder], suite, kind, r))
            bodies.append(body(r))
    return View(runs, index, bodies)


def _line(n: int, run: str, suite: str, kind: str, r: Mapping[str, Any]) -> list[Any]:
    cur = metrics.row_cursor(r) if kind == "sessions" else None
    checks = r.get("checks") or []
    px = cur["px"] if cur else None
    return [
        n,
        run,
        suite,
        kind,
        str(r["agent"]),
        str(r["session_id"]),
        int(r.get("sample") or 0),
        str(r.get("intent") or ""),
        str(r["status"]),
        r["status"] == "tampered" or bool(r.get("tamper")),
        bool(r.get("special_cased")) or ("gold" in checks and "verification" not in checks),
        bool(r.get("incomplete")),
        r.get("steps_to_green"),
        r.get("steps_used"),
        round(px, 1) if px is not None else None,
        round(float(r["duration_s"]), 3) if r.get("duration_s") is not None else None,
    ]


def body(r: Mapping[str, Any]) -> dict[str, Any]:
    """One episode as its page shows it (see module doc)."""
    task = r.get("task") or {}
    observed = {o.get("step"): o for o in r.get("observations") or [] if isinstance(o, dict)}
    steps = []
    for i, s in enumerate(r.get("steps") or [], 1):
        o = observed.get(s.get("step", i), {})
        action = (r.get("actions") or [])[i - 1] if i <= len(r.get("actions") or []) else {}
        steps.append(
            {
                "step": s.get("step", i),
                "tool": s.get("tool") or o.get("tool_called"),
                "args": o.get("tool_args", action.get("args")),
                "status": s.get("status"),
                "error": s.get("error"),
                "latency_s": s.get("latency_s"),
                "result": o.get("execution_result"),
            }
        )
    cur = metrics.row_cursor(r) if r.get("cursor_target") else None
    return {
        "session": r["session_id"],
        "agent": r["agent"],
        "sample": r.get("sample", 0),
        "status": r["status"],
        "reason": r.get("reason"),
        "intent": r.get("intent"),
        "instruction": task.get("user_instruction"),
        "ide_context": task.get("ide_context"),
        "steps": steps,
        "steps_to_green": r.get("steps_to_green"),
        "k": r.get("k"),
        "human_path": r.get("human_path"),
        "agent_path": r.get("agent_path"),
        "cursor": r.get("cursor"),
        "cursor_source": r.get("cursor_source"),
        "cursor_target": r.get("cursor_target"),
        "cursor_error": cur,
        "viewport": r.get("viewport"),
        "checks": r.get("checks"),
        "tamper": r.get("tamper"),
        "held_out_failed": r.get("held_out_failed"),
        "held_out_cases": (r.get("held_out") or {}).get("failed_cases") or [],
        "verification": r.get("verification"),
        "final_output": r.get("final_output"),
        "duration_s": r.get("duration_s"),
        "phases": r.get("phases"),
        "files": _texts(steps),
    }


def _texts(steps: list[dict[str, Any]]) -> dict[str, str]:
    """Each file's text as the agent first read it, for showing the cursor on it."""
    out: dict[str, str] = {}
    for s in steps:
        res = s["result"] if isinstance(s["result"], dict) else {}
        if s["tool"] == "file_read" and isinstance(res.get("content"), str):
            out.setdefault(str(res.get("file") or (s["args"] or {}).get("file")), res["content"])
    return out
