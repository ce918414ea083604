"""Run folders and HarnessEval training folders into one typed DataFrame, one row per episode.

A run folder holds ``results.jsonl`` (+ ``summary.json`` once the run ended); a training folder
is a Composer save folder (or its ``harness-eval/``) whose ``harness-eval/ba<N>/`` are run folders
written by ``finetune.callbacks.HarnessEval`` at batch N. Rows are checked at this edge: a row
without a session, agent or known status is bad input, named by file and line; a row not of the
suite its summary names is left out and named, as is a session of the run without rows
(reports/_complete.py).

Every suite kind's run folder reads here (reports/_kinds.py says what is measured on it): a
sessions run and ``etai humaneval --out R`` keep their rows in ``R/results.jsonl``; ``etai run
--suite humaneval`` keeps each agent's under the folder its summary names (``<agent>/eval/``); a
plug-in kind may write only ``summary.json``, whose per-agent metrics are then all there is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from harness.base.errors import InputError
from harness.runs import metrics
from harness.runs.results import read_rows
from harness.session.records import NON_TERMINAL, STATUSES
from reports._complete import Gaps, gaps, named, split_foreign
from reports._kinds import SESSIONS, kind_of_run

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
    kind: str = SESSIONS  # the suite kind that wrote it (harness.suites.kinds)
    gaps: Gaps = field(default_factory=Gaps)  # rows left out as foreign, sessions lacking rows

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def find_runs(path: str | Path) -> list[tuple[Path, int | None, Path | None]]:
    """(run folder, training step, training folder) for a run folder or a training folder."""
    p = Path(path)
    if (p / "results.jsonl").is_file() or (p / "summary.json").is_file():
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


def _rows(path: Path, summary: dict[str, Any] | None) -> list[dict[str, Any]]:
    if (path / "results.jsonl").is_file() or summary is None:
        rows = _checked(read_rows(path / "results.jsonl"), path / "results.jsonl")
        if not rows:
            raise InputError("results.jsonl holds no rows", where=str(path))
        return rows
    # No rows beside the summary: each agent's rows are in the folder its summary names (etai run
    # --suite humaneval: <out>/<agent>/eval/), read under the agent's spec; none for a plug-in
    # kind that keeps only its summary.
    rows = []
    for spec, agent in (summary.get("agents") or {}).items():
        out = Path(agent.get("out") or "") if isinstance(agent, dict) else None
        if not out or not out.parts:
            continue
        out = out if out.is_absolute() else path / out.name
        found = next((f for f in (out / "eval", out) if (f / "results.jsonl").is_file()), None)
        if found is None:
            raise InputError(f"agent {spec!r}: no results.jsonl under {out}", where=str(path))
        rows += [
            {**r, "agent": spec}
            for r in _checked(read_rows(found / "results.jsonl"), found / "results.jsonl")
        ]
    return rows


def _checked(rows: list[dict[str, Any]], where: Path) -> list[dict[str, Any]]:
    for i, r in enumerate(rows, 1):
        missing = [f for f in ("session_id", "agent", "status") if not isinstance(r.get(f), str)]
        if missing:
            raise InputError(f"row {i} has no {', '.join(missing)}", where=str(where))
        if r["status"] not in STATUSES:
            raise InputError(f"row {i} has an unknown status {r['status']!r}", where=str(where))
    return rows


def _summary(path: Path) -> dict[str, Any] | None:
    f = path / "summary.json"
    if not f.is_file():
        return None  # a run that was stopped before it could summarise: incomplete
    try:
        return json.loads(f.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise InputError(f"not JSON: {e}", where=str(f)) from None


def _episode(r: dict[str, Any], kind: str) -> dict[str, Any]:
    cur = metrics.row_cursor(r)
    # a task of another kind (a HumanEval check) has no step budget: its rows count as k=1
    k = int(r.get("k") or (3 if kind == SESSIONS else 1))
    return {
        "session_id": r["session_id"],
        "agent": r["agent"],
        "sample": int(r.get("sample", 0)),
        "session_hash": r.get("session_hash"),
        "suite": r.get("suite"),
        "intent": r.get("intent") or "unknown",
        # the session's project and fix date (harness/runs/session_kind.py); None where the session
        # records neither (written by hand, or a row of an older etai)
        "project": r.get("project"),
        "fix_date": r.get("fix_date"),
        "status": r["status"],
        # green on the visible verification tests, red on the held-out ones, read as
        # special-casing (a near twin of a visible case failed) or as an incomplete fix
        # (harness/runs/held_out.py); rows written before either existed lack the key: not
        "special_cased": bool(r.get("special_cased")),
        "incomplete": bool(r.get("incomplete")),
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


_COLUMNS = (
    "run",
    "series",
    "step",
    "suite",
    "kind",
    "agent",
    "arm",
    "session_id",
    "session_hash",
    "sample",
    "intent",
    "project",
    "fix_date",
    "status",
    "valid",
    "passed",
    "special_cased",
    "incomplete",
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
)
# what _episode gives; load adds the rest
_EPISODE = [
    c for c in _COLUMNS if c not in ("run", "series", "step", "kind", "arm", "valid", "passed")
]


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
    frames, infos, summaries, gap_notes = [], [], {}, []
    for folder, step, root in found:
        summary = _summary(folder)
        rows = _rows(folder, summary)
        kind = kind_of_run(summary, rows)
        gap = Gaps()
        if kind == SESSIONS and summary:  # rows of another suite never count (reports/_complete.py)
            rows, foreign = split_foreign(rows, summary)
            if not rows:
                raise InputError(
                    f"no row is of the suite its summary.json names ({summary.get('suite')}): "
                    + named([f"{s} ({why})" for s, why in foreign.items()]),
                    where=str(folder / "results.jsonl"),
                )
            gap = gaps(rows, summary, foreign)
        ep = pd.DataFrame([_episode(r, kind) for r in rows], columns=_EPISODE)
        label = run_labels[folder]
        series = series_labels[root] if root is not None else None
        ep["run"], ep["step"], ep["series"], ep["kind"] = label, step, series, kind
        s = summary or {}
        # `etai humaneval` writes neither samples nor k: the rows say how many samples a task has
        samples = int(s.get("samples") or (ep["sample"].max() + 1 if len(ep) else 1))
        k = int(s.get("k") or (ep["k"].max() if len(ep) else 1))
        complete = bool(s.get("complete")) and not ep["status"].isin(list(NON_TERMINAL)).any()
        suite = s.get("suite") or (ep["suite"].iloc[0] if len(ep) else None) or kind
        infos.append(
            RunInfo(
                label,
                str(folder),
                str(suite),
                k,
                s.get("max_steps"),
                samples,
                complete,
                summary is not None,
                step,
                series,
                kind,
                gap,
            )
        )
        gap_notes += gap.notes(str(folder))
        ep["suite"] = ep["suite"].fillna(str(suite))
        summaries[label] = s
        frames.append(ep)
    df = pd.concat(frames, ignore_index=True)
    df["arm"] = _arms(df)
    notes = _check_same_suite(df, infos, allow_mismatch)
    df = _typed(df)
    df.attrs["runs"] = [i.to_dict() for i in infos]
    df.attrs["notes"] = notes + gap_notes
    df.attrs["summaries"] = summaries  # run label -> summary.json ({} without one)
    return df


def _arms(df: pd.DataFrame) -> pd.Series:
    """What a report compares: the agent spec where it names one run's agent, else run/agent."""
    runs_per_agent = df.groupby("agent")["run"].nunique()
    clash = set(runs_per_agent[runs_per_agent > 1].index)
    arms = [f"{r}/{a}" if a in clash else a for r, a in zip(df["run"], df["agent"])]
    return pd.Series(arms, index=df.index, dtype="object")


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
        raise SuiteMismatch(
            "; ".join(problems)
            + "; compare them anyway with --allow-mismatch, or side by side with --by suite"
        )
    notes += [f"compared although {p}" for p in problems]
    if df.loc[df["kind"] == SESSIONS, "session_hash"].isna().any():  # tasks have no content hash
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
        special_cased=df["special_cased"].fillna(False).astype(bool),
        incomplete=df["incomplete"].fillna(False).astype(bool),
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
    for col in (
        *("run", "series", "suite", "kind", "agent", "arm", "session_id", "session_hash"),
        *("project", "fix_date"),
    ):
        out[col] = out[col].astype("string")
    return out[list(_COLUMNS)]
