"""Run folders and HarnessEval training folders into one typed DataFrame, one row per episode.

A run folder holds ``results.jsonl`` (+ ``summary.json`` once the run ended); a training folder
is a Composer save folder (or its ``harness-eval/``) whose ``harness-eval/ba<N>/`` are run folders
written by ``finetune.callbacks.HarnessEval`` at batch N. Rows are checked at this edge: a row
without a session, agent or known status is bad input, named by file and line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from harness import metrics
from harness.errors import InputError
from harness.records import NON_TERMINAL, STATUSES

_STEP = re.compile(r"^ba(\d+)$")
_STEP_SUFFIX = re.compile(r"-ba\d+$")


class SuiteMismatch(InputError):
    """The runs were made on different sessions (content hashes or suite names differ)."""


@dataclass(frozen=True)
class RunInfo:
    """One loaded run folder: where it is, what its summary says, and its training step if any."""

    label: str
    path: str
    suite: str
    k: int
    max_steps: int | None
    samples: int
    complete: bool
    has_summary: bool
    step: int | None = None
    series: str | None = None  # the training folder a step belongs to

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def find_runs(path: str | Path) -> list[tuple[Path, int | None, Path | None]]:
    """(run folder, training step, training folder) for a run folder or a training folder."""
    p = Path(path)
    if (p / "results.jsonl").is_file():
        return [(p, None, None)]
    evals = p if p.name == "harness-eval" else p / "harness-eval"
    if evals.is_dir():
        steps = sorted(
            (int(m.group(1)), d)
            for d in evals.iterdir()
            if d.is_dir() and (m := _STEP.match(d.name)) and (d / "results.jsonl").is_file()
        )
        if steps:
            root = evals.parent
            return [(d, n, root) for n, d in steps]
    if not p.exists():
        raise InputError("no such folder", where=str(p))
    raise InputError(
        "not a run folder (no results.jsonl) nor a training folder (no harness-eval/ba<N>/)",
        where=str(p),
    )


def _rows(path: Path) -> list[dict[str, Any]]:
    from harness.results import read_rows

    rows = read_rows(path / "results.jsonl")
    for i, r in enumerate(rows, 1):
        missing = [f for f in ("session_id", "agent", "status") if not isinstance(r.get(f), str)]
        if missing:
            raise InputError(
                f"row {i} has no {', '.join(missing)}", where=str(path / "results.jsonl")
            )
        if r["status"] not in STATUSES:
            raise InputError(
                f"row {i} has an unknown status {r['status']!r}", where=str(path / "results.jsonl")
            )
    if not rows:
        raise InputError("results.jsonl holds no rows", where=str(path))
    return rows


def _summary(path: Path) -> dict[str, Any] | None:
    f = path / "summary.json"
    if not f.is_file():
        return None  # a run that was stopped before it could summarise: incomplete
    try:
        return json.loads(f.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise InputError(f"not JSON: {e}", where=str(f)) from None


def _episode(r: dict[str, Any]) -> dict[str, Any]:
    cur = metrics.row_cursor(r)
    k = int(r.get("k") or 3)
    return {
        "session_id": r["session_id"],
        "agent": r["agent"],
        "sample": int(r.get("sample", 0)),
        "session_hash": r.get("session_hash"),
        "suite": r.get("suite"),
        "intent": r.get("intent") or "unknown",
        "status": r["status"],
        "steps_to_green": r.get("steps_to_green"),
        "steps_used": r.get("steps_used"),
        "n_invalid": int(r.get("n_invalid") or 0),
        "k": k,
        "max_steps": r.get("max_steps"),
        "cursor_px": cur["px"] if cur else None,
        "cursor_line_error": cur["line_error"] if cur else None,
        "cursor_wrong_file": cur["wrong_file"] if cur else None,
        "path_match": (
            metrics.path_match(r.get("agent_path", []), r.get("human_path", []), k)
            if r["status"] not in metrics.EXCLUDED
            else None
        ),
        "duration_s": r.get("duration_s"),
    }


def _label(paths: Sequence[Path]) -> dict[Path, str]:
    """Short, distinct run labels: the folder name, or more of the path where names collide."""
    labels: dict[Path, str] = {}
    for p in paths:
        parts = p.resolve().parts
        depth = 1
        while (
            depth < len(parts)
            and sum(1 for q in paths if q.resolve().parts[-depth:] == parts[-depth:]) > 1
        ):
            depth += 1
        labels[p] = "/".join(parts[-depth:])
    return labels


def load(paths: str | Path | Iterable[str | Path], *, allow_mismatch: bool = False) -> pd.DataFrame:
    """Every episode of the given run and training folders, typed; ``df.attrs["runs"]`` describes
    each run folder and ``df.attrs["notes"]`` says what could not be checked.

    Runs of different suites (a session whose content hash differs, or other suite names) raise
    SuiteMismatch unless ``allow_mismatch``.
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    found = [f for p in paths for f in find_runs(p)]
    if not found:
        raise InputError("no run folders given")
    run_labels = _label([d for d, _, _ in found])
    series_labels = _label(sorted({root for _, _, root in found if root is not None}))
    frames, infos = [], []
    for folder, step, root in found:
        rows = _rows(folder)
        summary = _summary(folder)
        ep = pd.DataFrame([_episode(r) for r in rows])
        label = run_labels[folder]
        series = series_labels[root] if root is not None else None
        ep["run"], ep["step"], ep["series"] = label, step, series
        samples = int(summary["samples"]) if summary else int(ep["sample"].max()) + 1
        k = int(summary["k"]) if summary else int(ep["k"].max())
        complete = (
            bool(summary and summary.get("complete"))
            and not ep["status"].isin(list(NON_TERMINAL)).any()
        )
        infos.append(
            RunInfo(
                label,
                str(folder),
                str((summary or {}).get("suite") or ep["suite"].iloc[0]),
                k,
                (summary or {}).get("max_steps"),
                samples,
                complete,
                summary is not None,
                step,
                series,
            )
        )
        frames.append(ep)
    df = pd.concat(frames, ignore_index=True)
    df["arm"] = _arms(df)
    notes = _check_same_suite(df, infos, allow_mismatch)
    df = _typed(df)
    df.attrs["runs"] = [i.to_dict() for i in infos]
    df.attrs["notes"] = notes
    return df


def _arms(df: pd.DataFrame) -> pd.Series:
    """What a report compares: the agent spec where it names one run's agent, else run/agent."""
    runs_per_agent = df.groupby("agent")["run"].nunique()
    clash = set(runs_per_agent[runs_per_agent > 1].index)
    return df.apply(
        lambda r: f"{r['run']}/{r['agent']}" if r["agent"] in clash else r["agent"], axis=1
    )


def _check_same_suite(df: pd.DataFrame, infos: list[RunInfo], allow: bool) -> list[str]:
    notes = []
    suites = sorted({i.suite for i in infos})
    hashes = df.dropna(subset=["session_hash"]).groupby("session_id")["session_hash"].nunique()
    changed = sorted(hashes[hashes > 1].index)
    problems = []
    if len(suites) > 1:
        problems.append(f"the runs are of different suites ({', '.join(suites)})")
    if changed:
        problems.append(
            f"{len(changed)} session(s) differ in content between the runs: {', '.join(changed[:10])}"
            + (" …" if len(changed) > 10 else "")
        )
    if problems and not allow:
        raise SuiteMismatch("; ".join(problems) + "; compare them anyway with --allow-mismatch")
    notes += [f"compared although {p}" for p in problems]
    if df["session_hash"].isna().any():
        notes.append(
            "some rows name no session content hash (written before reports existed): "
            "their sessions were matched by id only"
        )
    return notes


def _typed(df: pd.DataFrame) -> pd.DataFrame:
    status = pd.Categorical(df["status"], categories=list(STATUSES))
    out = df.assign(
        status=status,
        valid=~df["status"].isin(metrics.EXCLUDED),
        passed=df["status"] == "passed",
        intent=df["intent"].astype("category"),
        step=df["step"].astype("Int64"),
        steps_to_green=pd.to_numeric(df["steps_to_green"]).astype("Int64"),
        steps_used=pd.to_numeric(df["steps_used"]).astype("Int64"),
        max_steps=pd.to_numeric(df["max_steps"]).astype("Int64"),
        cursor_px=pd.to_numeric(df["cursor_px"]).astype("float64"),
        cursor_line_error=pd.to_numeric(df["cursor_line_error"]).astype("Float64"),
        cursor_wrong_file=df["cursor_wrong_file"].astype("boolean"),
        path_match=pd.to_numeric(df["path_match"]).astype("float64"),
        duration_s=pd.to_numeric(df["duration_s"]).astype("float64"),
    )
    for col in ("run", "series", "suite", "agent", "arm", "session_id", "session_hash"):
        out[col] = out[col].astype("string")
    cols = [
        "run",
        "series",
        "step",
        "suite",
        "agent",
        "arm",
        "session_id",
        "session_hash",
        "sample",
        "intent",
        "status",
        "valid",
        "passed",
        "steps_to_green",
        "steps_used",
        "n_invalid",
        "k",
        "max_steps",
        "cursor_px",
        "cursor_line_error",
        "cursor_wrong_file",
        "path_match",
        "duration_s",
    ]
    return out[cols]
