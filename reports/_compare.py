"""The comparison a report shows and a gate reads: per-arm metrics with 95% intervals, curves,
breakdowns and paired tests, all over the sessions every arm has.

An *arm* is one agent of one run (a training step is an arm of its own). Rates leave out
``reference_broken`` and ``infra_error`` rows, as harness.runs.metrics does, so the point estimates
here equal the run's summary.json on the same rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from harness.base.errors import InputError
from harness.runs import metrics
from reports import _stats
from reports._clusters import episode_values, headline
from reports._kinds import SESSIONS, TASK_KS, flatten
from reports._load import STATUSES

# The metrics with an interval that the comparison and training tables show, in their order.
CELLS = (
    "pass@1",
    "tamper_rate",
    "special_case_rate",
    "incomplete_rate",
    "steps_to_green",
    "path_match",
    "cursor_px",
)


def _rate(hits: int, n: int) -> dict[str, Any]:
    lo, hi = _stats.wilson(hits, n)
    return {"value": hits / n if n else None, "lo": lo, "hi": hi, "n": n}


def _by_session(df: pd.DataFrame, col: str) -> list[np.ndarray]:
    return [
        g[col].dropna().to_numpy(dtype=float) for _, g in df.groupby("session_id", observed=True)
    ]


def _mean_ci(df: pd.DataFrame, col: str, stat=np.mean) -> dict[str, Any]:
    values = df[col].dropna().to_numpy(dtype=float)
    lo, hi = _stats.bootstrap_ci(_by_session(df, col), stat)
    return {
        "value": float(stat(values)) if len(values) else None,
        "lo": lo,
        "hi": hi,
        "n": len(values),
    }


def pass_at(df: pd.DataFrame, k: int) -> float | None:
    """Unbiased pass@k over sessions (harness.runs.metrics.pass_at_k_of); None when k > some session's samples."""
    v = df[df["valid"]]
    per = {sid: list(g) for sid, g in v.groupby("session_id", observed=True)["passed"]}
    return metrics.pass_at_k_of(per, [k]).get(k)


def arm_metrics(df: pd.DataFrame, k: int) -> dict[str, Any]:
    """Every metric of one arm's rows: point estimates with 95% intervals (Wilson for rates over
    valid episodes, bootstrap over sessions for means and the median), and the counts."""
    v = df[df["valid"]]
    stg = v["steps_to_green"]
    counts = df["status"].value_counts().reindex(list(STATUSES), fill_value=0)
    px = v.dropna(subset=["cursor_px"])
    with_cursor = v[v["cursor_wrong_file"].notna()]
    return {
        "n_sessions": int(df["session_id"].nunique()),
        "n_rows": len(df),
        "n_valid": len(v),
        "path_accuracy": {
            j: _rate(int((stg.fillna(10**9) <= j).sum()), len(v)) for j in range(1, k + 1)
        },
        "pass@1": _rate(int(v["passed"].sum()), len(v)),
        "tamper_rate": _rate(int((v["status"] == "tampered").sum()), len(v)),
        "special_case_rate": _rate(int(v["special_cased"].sum()), len(v)),
        "incomplete_rate": _rate(int(v["incomplete"].sum()), len(v)),
        "steps_to_green": _mean_ci(v, "steps_to_green"),
        "path_match": _mean_ci(v, "path_match"),
        "cursor_px": _mean_ci(px, "cursor_px", np.median),
        "wrong_file_rate": _rate(int(with_cursor["cursor_wrong_file"].sum()), len(with_cursor)),
        "invalid_actions": int(df["n_invalid"].sum()),
        "status_counts": {s: int(n) for s, n in counts.items()},
    }


def task_metrics(df: pd.DataFrame, own: dict[str, float] | None = None) -> dict[str, Any]:
    """One arm of a task kind (HumanEval, plug-ins): pass@1 with its Wilson interval over valid
    samples, pass@k for every k the fewest samples of a task allow with a bootstrap interval over
    tasks, the status counts, and the kind's own summary metrics (``own``, no interval)."""
    v = df[df["valid"]]
    counts = df["status"].value_counts().reindex(list(STATUSES), fill_value=0)
    per = {sid: list(g) for sid, g in v.groupby("session_id", observed=True)["passed"]}
    fewest = min((len(x) for x in per.values()), default=0)
    pass_k: dict[int, dict[str, Any]] = {1: _rate(int(v["passed"].sum()), len(v))}
    for k in (x for x in TASK_KS if 1 < x <= fewest):
        each = [np.array([metrics.pass_at_k_of({s: o}, [k])[k]]) for s, o in per.items()]
        lo, hi = _stats.bootstrap_ci(each)
        pass_k[k] = {"value": pass_at(df, k), "lo": lo, "hi": hi, "n": len(per)}
    return {
        "n_sessions": int(df["session_id"].nunique()),
        "n_rows": len(df),
        "n_valid": len(v),
        "pass@1": pass_k[1],
        "pass_at_k": pass_k,
        "status_counts": {s: int(n) for s, n in counts.items()},
        "own": dict(own or {}),
    }


def session_values(df: pd.DataFrame, metric: str, j: int = 1) -> pd.Series:
    """Per-session value of a metric over valid rows (the mean over samples): ``pass``, ``pa``
    (green within ``j`` steps), ``tampered``, ``special_cased`` (green on the visible verification
    tests, red on a held-out near twin of one), ``incomplete`` (red on held-out cases none of which
    is a near twin), ``path_match``, ``cursor_px``. Paired tests use these."""
    x = episode_values(df, metric, j)
    return x.groupby(df.loc[x.index, "session_id"], observed=True).mean().dropna()


@dataclass(frozen=True)
class PairTest:
    """Arm A against arm B on the sessions both have valid rows for."""

    a: str
    b: str
    n: int
    a_only: int  # sessions where A passed more often than B (with one sample: A passed, B failed)
    b_only: int
    mcnemar_p: float
    test: str  # "exact McNemar", or the exact sign test it generalises to with several samples
    pa_j: int | None
    pa_diff: float | None
    pa_lo: float | None
    pa_hi: float | None
    pa_p: float | None

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))


def pair_test(
    a_rows: pd.DataFrame, b_rows: pd.DataFrame, a: str, b: str, j: int | None
) -> PairTest:
    """McNemar on per-session pass, and a paired bootstrap on PA@j (``j`` None: a task kind, which
    has no steps)."""
    pa_, pb_ = session_values(a_rows, "pass"), session_values(b_rows, "pass")
    common = pa_.index.intersection(pb_.index)
    da, db = pa_[common], pb_[common]
    a_only, b_only = int((da > db).sum()), int((da < db).sum())
    several = max(a_rows["sample"].max(), b_rows["sample"].max()) > 0
    test = "exact sign test on per-session pass rates" if several else "exact McNemar"
    boot = None
    if j is not None and len(common):
        pj_a = session_values(a_rows, "pa", j)[common]
        pj_b = session_values(b_rows, "pa", j)[common]
        boot = _stats.paired_bootstrap(pj_a.to_numpy(), pj_b.to_numpy())
    return PairTest(
        a,
        b,
        len(common),
        a_only,
        b_only,
        _stats.mcnemar_exact(b_only, a_only),
        test,
        j,
        boot.diff if boot else None,
        boot.lo if boot else None,
        boot.hi if boot else None,
        boot.p_two_sided if boot else None,
    )


@dataclass(frozen=True)
class Comparison:
    """What ``reports.compare`` returns; every table is a DataFrame, every figure is drawn from them."""

    rows: pd.DataFrame  # the episodes compared (common sessions only)
    arms: list[str]
    k: int
    runs: list[dict[str, Any]]
    sessions: list[str]
    dropped: dict[str, list[str]]  # session -> the arms that have no row for it
    notes: list[str]
    metrics: dict[str, dict[str, Any]]
    pairs: list[PairTest]
    intents: pd.DataFrame
    statuses: pd.DataFrame
    steps_to_green: pd.DataFrame
    training: pd.DataFrame
    kind: str = SESSIONS  # the suite kind of every run compared (reports/_kinds.py)
    suite: str = ""
    # arm -> headline rate -> its standard errors by session and by project (reports/_clusters.py)
    clustered: dict[str, dict[str, Any]] = field(default_factory=dict)

    def table(self) -> pd.DataFrame:
        """The per-arm table: one row per arm, point estimates and interval bounds as columns."""
        out = []
        for arm in self.arms:
            m = self.metrics[arm]
            row: dict[str, Any] = {"arm": arm, "sessions": m["n_sessions"], "valid": m["n_valid"]}
            for name, cell in [
                *((f"PA@{j}", c) for j, c in m["path_accuracy"].items()),
                *((n, m[n]) for n in (*CELLS, "wrong_file_rate")),
            ]:
                row[name], row[f"{name} lo"], row[f"{name} hi"] = (
                    cell["value"],
                    cell["lo"],
                    cell["hi"],
                )
            row["invalid_actions"] = m["invalid_actions"]
            row.update({s: m["status_counts"][s] for s in ("infra_error", "reference_broken")})
            out.append(row)
        return pd.DataFrame(out)


def compare(df: pd.DataFrame, *, pa_j: int = 3) -> Comparison:
    """Compare every arm of loaded runs (``reports.load``) on the sessions they all have."""
    # pandas: loaded when a report or gate is made, not by `etai --help`
    from reports._load import load

    if not isinstance(df, pd.DataFrame):
        df = load(df)
    kinds = sorted({r["kind"] for r in df.attrs.get("runs", [])} or {SESSIONS})
    if len(kinds) > 1:
        raise InputError(
            f"the runs are of different suite kinds ({', '.join(kinds)}): "
            "report them side by side with --by suite"
        )
    if kinds[0] != SESSIONS:
        return _compare_tasks(df, kinds[0])
    arms = list(
        dict.fromkeys(df.sort_values(["step", "run"], na_position="first", kind="stable")["arm"])
    )
    have = {a: set(df.loc[df["arm"] == a, "session_id"]) for a in arms}
    every = set().union(*have.values())
    common = sorted(set.intersection(*have.values()))
    if not common:
        raise InputError(f"the runs share no session ({', '.join(arms)})")
    dropped = {s: [a for a in arms if s not in have[a]] for s in sorted(every - set(common))}
    rows = df[df["session_id"].isin(common)].copy()
    k = int(rows["k"].max()) if len(rows) else 1
    by_arm = {a: rows[rows["arm"] == a] for a in arms}
    metrics = {a: arm_metrics(by_arm[a], int(by_arm[a]["k"].max())) for a in arms}
    ks = {a: int(by_arm[a]["k"].max()) for a in arms}
    pairs = [
        pair_test(by_arm[a], by_arm[b], a, b, min(pa_j, ks[a], ks[b]))
        for i, a in enumerate(arms)
        for b in arms[i + 1 :]
    ]
    return Comparison(
        rows,
        arms,
        k,
        list(df.attrs.get("runs", [])),
        common,
        dropped,
        list(df.attrs.get("notes", [])),
        metrics,
        pairs,
        _intents(rows),
        _statuses(rows, arms),
        _steps(rows, arms),
        _training(rows, metrics),
        SESSIONS,
        _suite_of(df),
        {a: headline(by_arm[a], ks[a]) for a in arms},
    )


def _suite_of(df: pd.DataFrame) -> str:
    return ", ".join(sorted({str(r["suite"]) for r in df.attrs.get("runs", [])}))


def _compare_tasks(df: pd.DataFrame, kind: str) -> Comparison:
    """A Comparison of a task kind: the arms' pass@k and status counts on their common tasks, and
    what each arm's summary states under the kind's own names (all there is without rows)."""

    summaries = df.attrs.get("summaries", {})
    named = {(r, a): arm for r, a, arm in zip(df["run"], df["agent"], df["arm"])}
    listed = [(run, a) for run, s in summaries.items() for a in (s.get("agents") or {})]
    twice = {a for _, a in listed if sum(1 for _, b in listed if b == a) > 1}
    own = {  # arm -> what its summary states under the kind's names
        named.get((run, a), f"{run}/{a}" if a in twice else a): flatten(summaries[run]["agents"][a])
        for run, a in listed
        if isinstance(summaries[run]["agents"][a], dict)
    }
    arms = list(dict.fromkeys([*df["arm"], *own]))
    have = {a: set(df.loc[df["arm"] == a, "session_id"]) for a in arms}
    with_rows = [a for a in arms if have[a]]
    common = sorted(set.intersection(*(have[a] for a in with_rows))) if with_rows else []
    if with_rows and not common:
        raise InputError(f"the runs share no task ({', '.join(with_rows)})")
    every = set().union(*have.values())
    dropped = {s: [a for a in with_rows if s not in have[a]] for s in sorted(every - set(common))}
    rows = df[df["session_id"].isin(common)].copy()
    by_arm = {a: rows[rows["arm"] == a] for a in arms}
    m = {a: task_metrics(by_arm[a], own.get(a)) for a in arms}
    pairs = [
        pair_test(by_arm[a], by_arm[b], a, b, None)
        for i, a in enumerate(with_rows)
        for b in with_rows[i + 1 :]
    ]
    no_table = pd.DataFrame()  # intents, steps and training: a task has none
    return Comparison(
        rows=rows,
        arms=arms,
        k=1,
        runs=list(df.attrs.get("runs", [])),
        sessions=common,
        dropped=dropped,
        notes=list(df.attrs.get("notes", [])),
        metrics=m,
        pairs=pairs,
        intents=no_table,
        statuses=_statuses(rows, arms),
        steps_to_green=no_table,
        training=pd.DataFrame(columns=["series", "step", "arm"]),
        kind=kind,
        suite=_suite_of(df),
    )


def _intents(rows: pd.DataFrame) -> pd.DataFrame:
    v = rows[rows["valid"]]
    out = v.groupby(["arm", "intent"], observed=True)["passed"].agg(["size", "sum"]).reset_index()
    out = out.rename(columns={"size": "n", "sum": "passed"})
    out["pass_rate"] = out["passed"] / out["n"]
    bounds = [_stats.wilson(int(p), int(n)) for p, n in zip(out["passed"], out["n"])]
    out["lo"], out["hi"] = [b[0] for b in bounds], [b[1] for b in bounds]
    return out


def _statuses(rows: pd.DataFrame, arms: list[str]) -> pd.DataFrame:
    t = pd.crosstab(rows["arm"], rows["status"], dropna=False)
    return t.reindex(index=arms, columns=list(STATUSES), fill_value=0)


def _steps(rows: pd.DataFrame, arms: list[str]) -> pd.DataFrame:
    """Valid episodes per arm by the step at which they first went green ("never" last)."""
    v = rows[rows["valid"]]
    label = v["steps_to_green"].astype("object").where(v["steps_to_green"].notna(), "never")
    t = pd.crosstab(v["arm"], label.astype(str))
    numeric = sorted((c for c in t.columns if c != "never"), key=int)
    return t.reindex(index=arms, columns=[*numeric, "never"], fill_value=0)


def _training(rows: pd.DataFrame, metrics: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """Every metric against the training step, for arms from training folders."""
    t = rows[rows["step"].notna()][["series", "step", "arm"]].drop_duplicates()
    out = []
    for series, step, arm in t.itertuples(index=False):
        m = metrics[arm]
        rec = {"series": series, "step": int(step), "arm": arm}
        rec.update({f"PA@{j}": c["value"] for j, c in m["path_accuracy"].items()})
        rec.update({n: m[n]["value"] for n in CELLS})
        rec["invalid_actions"] = m["invalid_actions"]
        rec["infra_error"] = m["status_counts"]["infra_error"]
        out.append(rec)
    return (
        pd.DataFrame(out).sort_values(["series", "step"])
        if out
        else pd.DataFrame(columns=["series", "step", "arm"])
    )
