"""Standard errors that respect a benchmark's structure: sessions of one project are correlated
(one code base, one style of test, often one author), so a rate over many sessions of few projects
is less certain than the same rate over as many independent sessions.

Every rate here gets two standard errors of the mean of its valid episodes, both cluster-robust
(CR1, reports/_stats.py ``cluster_se``): *by session* (the samples of one session form a cluster;
with one sample the usual s/sqrt(n)) and *by project* (the sessions of one project form a cluster).
A session's project is its row's ``project`` (``provenance.repo`` of a mined or etai-js session,
harness/session/model.py); a session without one is a project of its own, so a suite written by
hand gets the per-session figure twice. docs/metrics.md ("Error bars by project") says how to read
them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from reports import _stats
from reports._section import Section, fmt

# Per-episode outcomes a rate or mean is taken over (reports/_compare.py session_values).
KINDS = ("pass", "pa", "tampered", "special_cased", "incomplete", "path_match", "cursor_px")


def episode_values(df: pd.DataFrame, metric: str, j: int = 1) -> pd.Series:
    """Each valid episode's value of a metric (index: the rows'): ``pass``, ``pa`` (green within
    ``j`` steps), ``tampered``, ``special_cased``, ``incomplete``, ``path_match``, ``cursor_px``."""
    v = df[df["valid"]]
    if metric == "pass":
        return v["passed"].astype(float)
    if metric == "pa":
        return (v["steps_to_green"].fillna(10**9) <= j).astype(float)
    if metric == "tampered":
        return (v["status"] == "tampered").astype(float)
    if metric in ("special_cased", "incomplete"):
        return v[metric].astype(float)
    if metric in ("path_match", "cursor_px"):
        return v[metric].astype(float)
    raise ValueError(f"no per-session values for {metric!r}")


def project_of(df: pd.DataFrame) -> pd.Series:
    """Each row's cluster: its project, or the session itself where the row names no project."""
    sessions = "session:" + df["session_id"].astype(str)
    return df["project"].astype("object").where(df["project"].notna(), sessions)


def clustered(df: pd.DataFrame, metric: str, j: int = 1) -> dict[str, Any] | None:
    """The mean of a metric over valid episodes with its standard errors by session and by project;
    None where no valid episode has a value."""
    x = episode_values(df, metric, j).dropna()
    if x.empty:
        return None
    rows = df.loc[x.index]
    return _both(x.to_numpy(), rows["session_id"].astype(str).tolist(), project_of(rows).tolist())


def paired(cand: pd.DataFrame, base: pd.DataFrame, metric: str, j: int = 1) -> dict[str, Any]:
    """The mean per-session difference candidate − baseline (each session's mean over its
    samples) on the sessions both have, with its standard errors by session and by project: what a
    gate's baseline rule tests."""
    c = episode_values(cand, metric, j).groupby(cand["session_id"], observed=True).mean().dropna()
    b = episode_values(base, metric, j).groupby(base["session_id"], observed=True).mean().dropna()
    common = c.index.intersection(b.index)
    if len(common) == 0:
        raise ValueError("no session in both runs")
    d = (c[common] - b[common]).to_numpy()
    firsts = cand.drop_duplicates("session_id").set_index("session_id")
    projects = project_of(firsts.reset_index()).set_axis(firsts.index)[common].tolist()
    return _both(d, [str(s) for s in common], projects)


def _both(values, sessions: list, projects: list) -> dict[str, Any]:
    by_session = _stats.cluster_se(values, sessions)
    by_project = _stats.cluster_se(values, projects)
    return {
        "value": by_session.mean,
        "se_session": by_session.se,
        "se_project": by_project.se,
        "sessions": by_session.clusters,
        "projects": by_project.clusters,
    }


def headline(df: pd.DataFrame, k: int) -> dict[str, dict[str, Any] | None]:
    """pass@1 and PA@1..k of one arm's rows, each with its clustered standard errors."""
    out = {"pass@1": clustered(df, "pass")}
    out.update({f"PA@{j}": clustered(df, "pa", j) for j in range(1, k + 1)})
    return out


def pooled(cs: list[Any]) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """pass@1 and PA@min(3, k) of every model over the rows of all the session suites of a report
    by suite (Comparisons), each with its clustered standard errors: the rate of a benchmark that
    comes as one suite per project (etai-js), where no single suite has more than one project.
    Returns (arm -> those cells, the suites pooled); only arms of every one of those suites."""
    sessions = [c for c in cs if c.kind == "sessions" and len(c.rows)]
    if len(sessions) < 2:
        return {}, []
    k = min(3, *(c.k for c in sessions))
    every = set.intersection(*(set(c.arms) for c in sessions))
    frames = []
    for c in sessions:
        rows = c.rows[c.rows["arm"].isin(every)].copy()
        rows["session_id"] = c.suite + "/" + rows["session_id"].astype(str)  # ids are per suite
        frames.append(rows)
    rows = pd.concat(frames, ignore_index=True)
    arms = [a for a in sessions[0].arms if a in every]
    out = {}
    for a in arms:
        mine = rows[rows["arm"] == a]
        out[a] = {"pass@1": clustered(mine, "pass"), f"PA@{k}": clustered(mine, "pa", k)}
    return out, [c.suite for c in sessions]


def pooled_section(cs: list[Any]) -> Section | None:
    by_arm, suites = pooled(cs)
    if not suites:
        return None
    s = section(list(by_arm), by_arm)
    s.id, s.title = "pooled", "Pooled over suites: error bars by project"
    s.text.insert(
        0,
        f"Every model run on all of {', '.join(suites)}, its episodes pooled: the rate of a "
        "benchmark that comes as one suite per project (etai suite fetch writes one per project), "
        "where only the pooled rate has more than one project to cluster by.",
    )
    return s


def section(arms: list[str], by_arm: dict[str, dict[str, dict[str, Any] | None]]) -> Section:
    """The report's table: every arm's headline rates with both standard errors."""
    names = list(dict.fromkeys(n for m in by_arm.values() for n in m))
    rows = []
    for a in arms:
        for n in names:
            cell = by_arm.get(a, {}).get(n)
            if cell is None:
                continue
            rows.append(
                [
                    a,
                    n,
                    fmt(cell["value"]),
                    fmt(cell["se_session"]),
                    fmt(cell["se_project"]),
                    _ratio(cell),
                    str(cell["sessions"]),
                    str(cell["projects"]),
                ]
            )
    projects = max((r[7] for r in rows), key=int, default="0")
    text = [
        "Standard errors of each rate over valid episodes, cluster-robust (CR1): by session (the "
        "samples of one session together) and by project (the sessions of one project together: "
        "they share a code base, so they are not independent). A session that names no project "
        "is a project of its own. The ratio is the design effect's square root: how much wider "
        "the project-level error bar is. With one project no spread between projects is seen, and "
        "the by-project error is –; with few projects it is imprecise itself and can come out "
        "smaller by chance (docs/metrics.md)."
    ]
    if projects == "1":
        text.append("Every session here is of one project: the by-project error is undefined.")
    return Section(
        "clusters",
        "Error bars by project",
        text=text,
        tables=[
            (
                [
                    "arm",
                    "metric",
                    "value",
                    "SE by session",
                    "SE by project",
                    "ratio",
                    "sessions",
                    "projects",
                ],
                rows,
            )
        ],
    )


def _ratio(cell: dict[str, Any]) -> str:
    s, p = cell["se_session"], cell["se_project"]
    if s is None or p is None or not s or np.isnan(s):
        return "–"
    return f"{p / s:.2f}"
