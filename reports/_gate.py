"""The gate: rules over one agent of a candidate run, absolute or against a baseline run.

Rules read ``METRIC OP VALUE`` (``pass@1>=0.6``, ``tamper_rate == 0``, ``infra_error==0``,
``special_case_rate==0``: no episode green on the visible verification tests and red on a
held-out near twin of one; ``incomplete_rate<=0.1``: few red on held-out cases that are not) or ``METRIC OP baseline [- MARGIN]`` (``pass@1 >= baseline - 0.05``), optionally
followed by ``alpha=0.01``. A baseline rule is a non-inferiority check on the sessions both runs
have: it fails when a one-sided paired test shows, at level alpha, that the candidate is worse
than the baseline by more than the margin. Which test decided is named in the result: the exact
McNemar test (an exact sign test on per-session pass rates with several samples) for pass@1 with
no margin, a paired bootstrap over sessions otherwise. With few sessions these tests have little
power: a gate that must catch small regressions needs a margin of zero, a larger suite, or both.

Every suite kind is gated under its own metric names (reports/_kinds.py): a HumanEval run takes
``pass@N`` and the status counts, a plug-in kind also the metrics its summary states
(``counted>=3``). Several candidate runs (one per suite) are gated at once; a rule prefixed with a
suite or kind name applies to that suite's run only (``humaneval:pass@1>=0.6``), one without a
prefix to every run. Each candidate is paired with the baseline of its suite, by the suite's name
(never by the kind, which runs of different suites share), whatever order they are given in; a
candidate that a baseline rule applies to and that has no baseline of its suite is refused, naming
the baselines left unpaired, unless --allow-mismatch, which pairs it with the first of those.

A candidate that is the run of a suite set (`etai run --suite SET`: one run folder per project,
reports/_sets.py) is gated once on its members' rows pooled: one verdict, its standard errors
clustered by project; a baseline set pairs with it member by member. A member not run yet makes
the gate unable to decide (exit 3), as an incomplete run does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from harness.base.errors import InputError
from harness.session.records import NON_TERMINAL
from harness.session.window import Window
from reports import _clusters, _sets, _stats
from reports._compare import arm_metrics, session_values, task_metrics
from reports._complete import for_gate
from reports._dates import restrict
from reports._kinds import SESSIONS, own_names, summary_value
from reports._load import STATUSES, SuiteMismatch, load
from reports._rules import ALPHA, OPS, Rule, check_metric, paired, parse_rule, value_of


@dataclass(frozen=True)
class RuleResult:
    rule: str
    passed: bool
    value: float | None
    detail: str
    baseline: float | None = None
    test: str | None = None
    p: float | None = None
    undefined: bool = False  # measured over no valid episode: neither a pass nor a model failure
    # Standard errors of what the rule measures (the value, or the paired difference for a
    # baseline rule), by session and by project (reports/_clusters.py), and the smallest
    # difference the gate's test detects at the rule's alpha with 80% power (``mde_by``: which
    # standard error it used: project, or session where every session is of one project).
    se_session: float | None = None
    se_project: float | None = None
    projects: int | None = None
    mde: float | None = None
    mde_by: str | None = None


@dataclass(frozen=True)
class SessionResult:
    agent: str
    session_id: str
    status: (
        str  # passed | failed | skipped (reference_broken) | error (infra_error, skipped_budget)
    )
    passed: int
    samples: int
    message: str
    duration_s: float
    project: str | None = None  # the session's project (its rows' ``project``), where it names one


@dataclass(frozen=True)
class GateResult:
    candidate: str
    agent: str
    baseline: str | None
    baseline_agent: str | None
    rules: list[RuleResult]
    sessions: list[SessionResult]
    incomplete: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # rows left out, sessions --allow-partial let by

    @property
    def passed(self) -> bool:
        return not self.incomplete and all(r.passed for r in self.rules)

    @property
    def undecided(self) -> str | None:
        """Why the gate cannot decide (exit 3), or None: the run is incomplete, or a rule measured
        no valid episode. Either is the infrastructure or the suite, never the model failing."""
        if self.incomplete:
            return "a run is incomplete, which is not the model failing: " + "; ".join(
                self.incomplete
            )
        empty = [r.rule for r in self.rules if r.undefined]
        if empty:
            return (
                f"{', '.join(empty)}: no valid episode to measure (every row infra_error, "
                "skipped_budget or reference_broken): the suite or the infrastructure, not the model"
            )
        return None

    @property
    def exit_code(self) -> int:
        """0 pass, 1 a rule failed, 3 the gate cannot decide (a run incomplete: its numbers are
        not final, a rerun retries; or a rule over no valid episode)."""
        return 3 if self.undecided else (0 if self.passed else 1)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "passed": self.passed, "exit_code": self.exit_code}


def _pick(df: pd.DataFrame, agent: str | None, what: str, lenient: bool = False) -> str:
    arms = list(dict.fromkeys(df["arm"])) or [
        a for s in df.attrs["summaries"].values() for a in (s.get("agents") or {})
    ]
    if lenient and agent not in arms and len(arms) == 1:
        agent = None  # gating several suites: a run of one agent is that agent's, whatever its name
    if agent is None:
        if len(arms) == 1:
            return arms[0]
        raise InputError(
            f"the {what} run has {len(arms)} agents ({', '.join(arms)}); name one with "
            f"--{'agent' if what == 'candidate' else 'baseline-agent'}"
        )
    if agent not in arms:
        raise InputError(f"no agent {agent!r} in the {what} run; it has {', '.join(arms)}")
    return agent


def gate(
    candidate: str | Path | Sequence[str | Path],
    rules: Sequence[str | Rule],
    *,
    baseline: str | Path | Sequence[str | Path] | None = None,
    agent: str | None = None,
    baseline_agent: str | None = None,
    alpha: float = ALPHA,
    allow_mismatch: bool = False,
    allow_partial: bool = False,
    window: Window | None = None,
) -> GateResult:
    """Check ``rules`` on one agent of each candidate run (one per suite); see the module doc.
    A run missing rows of some session cannot pass unless ``allow_partial`` (reports/_complete.py).
    ``window``: only the sessions fixed inside it (reports/_dates.py; a session of the run without
    rows still counts as missing: it is not known to be outside). Bad input raises InputError."""
    parsed = [r if isinstance(r, Rule) else parse_rule(r, alpha) for r in rules]
    if not parsed:
        raise InputError("no rules: give --rule EXPR (repeatable) or --config gate.yaml")
    cands, bases = _many(candidate), _many(baseline)
    if any(r.against_baseline for r in parsed) and not bases:
        raise InputError("a rule compares with the baseline, but no --baseline run was given")
    runs = [(c, _read(c, window)) for c in cands]
    names = [_names(df) for _, df in runs]
    for r in parsed:
        if r.suite and not any(r.suite in n for n in names):
            raise InputError(
                f"no candidate run is of suite {r.suite!r}; they are of "
                + ", ".join(sorted({x for n in names for x in n})),
                where=r.text,
            )
    based = [(b, _read(b, window)) for b in bases]
    several = len(runs) > 1
    pairs, notes = _pairs(runs, based, parsed, allow_mismatch)
    arms, results, sessions, incomplete = [], [], [], []
    base_arms = []
    for (path, df), mine, base in zip(runs, names, pairs):
        applies = [r for r in parsed if r.suite is None or r.suite in mine]
        one = _gate_run(
            path, df, applies, base, agent, baseline_agent, (allow_mismatch, allow_partial), several
        )
        label = f"{_title(df)}: " if several else ""
        arms.append(one.agent)
        base_arms.append(one.baseline_agent)
        results += [replace(x, rule=label + x.rule) for x in one.rules]
        sessions += [
            replace(x, session_id=label.replace(": ", "/") + x.session_id) for x in one.sessions
        ]
        incomplete += one.incomplete
        if "window" in df.attrs:  # what --since/--until left out (reports/_dates.py)
            notes.append(f"{path}: {df.attrs['window']}")
        notes += one.notes
    return GateResult(
        ", ".join(map(str, cands)),
        ", ".join(dict.fromkeys(arms)),
        ", ".join(map(str, bases)) or None,
        ", ".join(dict.fromkeys(a for a in base_arms if a)) or None,
        results,
        sessions,
        incomplete,
        notes,
    )


def _many(paths: str | Path | Sequence[str | Path] | None) -> list[str | Path]:
    return [] if paths is None else [paths] if isinstance(paths, (str, Path)) else list(paths)


def _read(path: str | Path, window: Window | None) -> pd.DataFrame:
    """A run's rows, or a suite set run's rows pooled (reports/_sets.py), inside ``window``."""
    if _sets.is_set(path):
        return _sets.pooled(path, window)
    return restrict(load(path), window, str(path))


def _title(df: pd.DataFrame) -> str:
    return df.attrs.get("set") or df.attrs["runs"][0]["suite"]


def _suites(df: pd.DataFrame) -> set[str]:
    """What pairs a candidate with its baseline: its suite's name (a set's name for a suite set
    run). Not its kind: runs of every session suite are of kind ``sessions``."""
    if "set" in df.attrs:
        return {df.attrs["set"]}
    return {str(r["suite"]) for r in df.attrs["runs"]}


def _pairs(
    runs: list[tuple[str | Path, pd.DataFrame]],
    based: list[tuple[str | Path, pd.DataFrame]],
    rules: list[Rule],
    allow_mismatch: bool,
) -> tuple[list[tuple[str | Path, pd.DataFrame] | None], list[str]]:
    """Each candidate's baseline (None: it has none and no baseline rule applies to it), and notes
    naming the baselines paired with no candidate. One candidate and one baseline are paired
    whatever their suites: comparing them is _same_sessions' to refuse, with its own reasons."""
    if len(runs) == 1 and len(based) == 1:
        return [based[0]], []
    out: list[tuple[str | Path, pd.DataFrame] | None] = []
    for path, df in runs:
        mine = _suites(df)
        same = [b for b in based if _suites(b[1]) & mine]
        if len(same) > 1:
            raise InputError(
                f"{len(same)} --baseline runs are of the suite of {path} ({_of(df)}): "
                f"{', '.join(str(b) for b, _ in same)}; give one"
            )
        out.append(same[0] if same else None)
    left = [b for b in based if not any(b is o for o in out)]
    for i, (path, df) in enumerate(runs):
        mine = _names(df)
        if out[i] is not None or not any(
            r.against_baseline and (r.suite is None or r.suite in mine) for r in rules
        ):
            continue
        if allow_mismatch and left:
            out[i] = left.pop(0)  # compared although of another suite, as asked
            continue
        where = f"no --baseline run is of the suite of candidate {path} (suite {_of(df)})"
        if not left:
            raise InputError(f"{where}; every baseline given is paired with another candidate")
        raise InputError(
            f"{where}; baselines paired with no candidate: "
            + ", ".join(f"{b} (suite {_of(bdf)})" for b, bdf in left)
            + "; compare the first of them with it anyway with --allow-mismatch"
        )
    return out, [
        f"baseline {b} (suite {_of(bdf)}) is paired with no candidate: no candidate is of its suite"
        for b, bdf in left
    ]


def _of(df: pd.DataFrame) -> str:
    return ", ".join(sorted(_suites(df)))


def _names(df: pd.DataFrame) -> set[str]:
    """What a suite prefix may name for this run: its suite (a set's name for a suite set run,
    whose rules apply to the pooled rows) and its kind."""
    if "set" in df.attrs:
        return {df.attrs["set"], SESSIONS}
    return {str(x) for r in df.attrs["runs"] for x in (r["suite"], r["kind"])}


def _same_sessions(candidate: str | Path, baseline: str | Path, allow: bool) -> None:
    """SuiteMismatch (reports/_load.py) where the baseline was run on other sessions, unless
    ``allow``: for suite set runs, member by member, and on the same members."""
    if not (_sets.is_set(candidate) or _sets.is_set(baseline)):
        load([candidate, baseline], allow_mismatch=allow)
        return
    if not (_sets.is_set(candidate) and _sets.is_set(baseline)):
        if not allow:
            raise SuiteMismatch(
                f"one of {candidate} and {baseline} is the run of a suite set, the other of one "
                "suite; compare them anyway with --allow-mismatch"
            )
        return
    c, b = (_sets.members(x)[0] for x in (candidate, baseline))
    if (c.name, c.members) != (b.name, b.members) and not allow:
        raise SuiteMismatch(
            f"the sets differ ({c.name}: {', '.join(c.members)}; {b.name}: "
            f"{', '.join(b.members)}); compare them anyway with --allow-mismatch"
        )
    for x, y in _sets.member_pairs(candidate, baseline):
        load([x, y], allow_mismatch=allow)


def _unrun(df: pd.DataFrame, path: str | Path, what: str) -> list[str]:
    """Why a suite set run cannot be gated yet: members that have not run."""
    return [
        f"{m} of the {what} set {path} has not run (no run folder); rerun `etai run` on the set"
        for m in df.attrs.get("unrun", [])
    ]


def _gate_run(
    candidate: str | Path,
    cand: pd.DataFrame,
    rules: list[Rule],
    base: tuple[str | Path, pd.DataFrame] | None,
    agent: str | None,
    baseline_agent: str | None,
    allow: tuple[bool, bool],  # (allow_mismatch, allow_partial)
    lenient: bool,
) -> GateResult:
    kind = cand.attrs["runs"][0]["kind"]
    summaries = cand.attrs["summaries"]
    own = [] if kind == SESSIONS else own_names(kind, list(summaries.values()))
    for r in rules:
        check_metric(r, kind, own)
    arm = _pick(cand, agent, "candidate", lenient)
    rows = cand[cand["arm"] == arm]
    k = int(rows["k"].max()) if len(rows) else 1
    if kind == SESSIONS:
        m = arm_metrics(rows, k)
    else:
        spec = rows["agent"].iloc[0] if len(rows) else arm
        m = task_metrics(
            rows,
            {
                n: v
                for n in own
                if (v := summary_value(summaries, list(summaries), spec, n)) is not None
            },
        )
    incomplete = _incomplete(cand, arm, "candidate") + _unrun(cand, candidate, "candidate")
    stop, notes = for_gate(cand, arm, "candidate", allow[1])
    incomplete += stop
    unmeasured = ""
    if len(rows) and not rows["valid"].any():  # a kind that keeps only its summary has no rows
        statuses = " or ".join(sorted(set(rows["status"].astype(str))))
        unmeasured = f"undefined: no valid episode (every row of {arm} is {statuses})"
    base_rows, base_arm = None, None
    if base is not None:
        baseline, bdf = base
        base_arm = _pick(
            bdf,
            baseline_agent or (agent if agent in set(bdf["arm"]) else None),
            "baseline",
            lenient,
        )
        base_rows = bdf[bdf["arm"] == base_arm]
        _same_sessions(candidate, baseline, allow[0])  # refuses runs of other sessions
        incomplete += _incomplete(bdf, base_arm, "baseline") + _unrun(bdf, baseline, "baseline")
        stop, more = for_gate(bdf, base_arm, "baseline", allow[1])
        incomplete, notes = incomplete + stop, notes + more
    results = []
    for r in rules:
        if r.against_baseline:
            results.append(_vs_baseline(r, rows, base_rows, base_arm, k))
            continue
        if unmeasured and r.metric not in STATUSES and r.metric != "n_valid":
            # counts of rows hold whatever the statuses; every other metric is over valid episodes
            # (invalid_actions too: 0 of an episode never run is no evidence)
            results.append(RuleResult(r.text, False, None, unmeasured, undefined=True))
            continue
        v = value_of(r.metric, rows, m, k)
        if v is None:
            results.append(
                RuleResult(r.text, False, None, f"{r.metric} is undefined: no valid episode has it")
            )
        else:
            ok = OPS[r.op](v, r.value)
            one = RuleResult(
                r.text,
                ok,
                v,
                f"{r.metric} = {v:.4g} ({'meets' if ok else 'fails'} {r.op} {r.value:g})",
            )
            results.append(_with_errors(one, r, _spread(r.metric, rows)))
    return GateResult(
        str(candidate),
        arm,
        str(base[0]) if base is not None else None,
        base_arm,
        results,
        _sessions(rows, arm),
        incomplete,
        notes,
    )


def _incomplete(df: pd.DataFrame, arm: str, what: str) -> list[str]:
    out = []
    statuses = df.loc[df["arm"] == arm, "status"].astype(str)
    if len(statuses) and statuses.isin(list(NON_TERMINAL)).all():  # e.g. a model server down
        return [
            f"every row of the {what} run for {arm} is {' or '.join(sorted(set(statuses)))}: "
            "the infrastructure failed, not the model (a model server or the engine did not "
            "answer); rerun `etai run` once it does"
        ]
    for status in sorted(NON_TERMINAL):  # not run to the end: a rerun runs them
        n = int((statuses == status).sum())
        if n:
            out.append(
                f"the {what} run has {n} {status} row(s) for {arm}; rerun `etai run` to retry them"
            )
    run_labels = set(df.loc[df["arm"] == arm, "run"])
    for info in df.attrs["runs"]:
        if info["label"] in run_labels and not info["has_summary"]:
            out.append(f"the {what} run {info['path']} has no summary.json: it did not finish")
    return out


def _vs_baseline(
    r: Rule, rows: pd.DataFrame, base_rows: pd.DataFrame, base_arm: str, k: int
) -> RuleResult:
    kind, j = paired(r.metric, r.text)
    if kind == "pa" and j > k:
        raise InputError(f"{r.metric}: the candidate's budget is k={k}", where=r.text)
    cand, base = session_values(rows, kind, j), session_values(base_rows, kind, j)
    common = cand.index.intersection(base.index)
    if len(common) == 0:
        return RuleResult(
            r.text,
            False,
            None,
            "undefined: no valid episode of a session in both runs",
            undefined=True,
        )
    higher_better = r.op in (">=", ">")
    sign = 1.0 if higher_better else -1.0
    c, b = cand[common].to_numpy(), base[common].to_numpy()
    several = max(rows["sample"].max(), base_rows["sample"].max()) > 0
    if kind == "pass" and r.margin == 0:
        worse, better = int((c < b).sum()), int((c > b).sum())
        p = _stats.mcnemar_exact(worse, better, "a-worse")
        test = (
            "exact sign test on per-session pass rates" if several else "exact McNemar"
        ) + " (one-sided)"
        how = f"{worse} session(s) worse, {better} better"
    else:
        boot = _stats.paired_bootstrap(sign * c, sign * b)
        p = boot.p_worse_than(r.margin)
        test = (
            f"paired bootstrap over {len(common)} sessions ({_stats.N_BOOT:,} resamples, one-sided)"
        )
        how = f"mean difference {sign * boot.diff:+.4g} [{sign * boot.lo:+.4g}, {sign * boot.hi:+.4g}]"
    ok = p >= r.alpha
    cv, bv = float(c.mean()), float(b.mean())
    verdict = "not shown worse" if ok else "worse"
    detail = (
        f"{r.metric}: candidate {cv:.4g} vs baseline {bv:.4g} ({base_arm}) on {len(common)} sessions; {how}; "
        f"{verdict} by more than {r.margin:g} at alpha={r.alpha:g} ({test}, p={p:.4g})"
    )
    one = RuleResult(r.text, ok, cv, detail, baseline=bv, test=test, p=p)
    return _with_errors(one, r, _clusters.paired(rows, base_rows, kind, j), "difference")


def _spread(metric: str, rows: pd.DataFrame) -> dict[str, Any] | None:
    """The clustered standard errors of an absolute rule's metric, for those that are a mean of
    per-episode values (pass@1, pa@J, the rates, path_match); None for the rest (a median, pass@N
    with N > 1, counts)."""
    try:
        kind, j = paired(metric, metric)
    except InputError:
        return None
    return None if kind == "cursor_px" else _clusters.clustered(rows, kind, j)


def _with_errors(
    one: RuleResult, r: Rule, spread: dict[str, Any] | None, what: str = "value"
) -> RuleResult:
    """``one`` with its standard errors, and the minimum detectable effect of a one-sided test at
    the rule's alpha with 80% power, by the larger of the two errors (said in the detail): the
    project-level one, unless every session is of one project (it is undefined) or it came out
    smaller, which a few projects allow by chance and a gate must not claim as precision."""
    if spread is None:
        return one
    s_se, p_se = spread["se_session"], spread["se_project"]
    by = "project" if p_se is not None and p_se >= (s_se or 0.0) else "session"
    smallest = _stats.mde(spread[f"se_{by}"], r.alpha)
    why = "" if by == "project" else ": one project" if p_se is None else ": the larger here"
    note = (
        f"; SE of the {what} {_se(s_se)} by session, "
        f"{_se(p_se)} by project ({spread['projects']} project(s))"
    )
    if smallest is not None:
        note += (
            f"; smallest detectable difference {smallest:.3g} (alpha={r.alpha:g} one-sided, "
            f"80% power, {by}-level SE{why})"
        )
    else:
        note += "; no detectable difference stated: nothing varied between sessions"
    return replace(
        one,
        detail=one.detail + note,
        se_session=spread["se_session"],
        se_project=spread["se_project"],
        projects=spread["projects"],
        mde=smallest,
        mde_by=by if smallest is not None else None,
    )


def _se(x: float | None) -> str:
    return "– (one project)" if x is None else f"{x:.3g}"


def _sessions(rows: pd.DataFrame, arm: str) -> list[SessionResult]:
    out = []
    for sid, g in rows.groupby("session_id", observed=True, sort=True):
        statuses = g["status"].astype(str).tolist()
        valid = g[g["valid"]]
        n_pass = int(valid["passed"].sum())
        if NON_TERMINAL.intersection(statuses):  # not run to the end: no verdict either way
            status = "error"
        elif valid.empty:
            status = "skipped"
        else:
            status = "passed" if n_pass == len(valid) else "failed"
        msg = f"{n_pass}/{len(valid)} sample(s) passed; statuses: {', '.join(statuses)}"
        out.append(
            SessionResult(
                arm,
                str(sid),
                status,
                n_pass,
                len(valid),
                msg,
                float(g["duration_s"].fillna(0).sum()),
                next((str(x) for x in g["project"].dropna()), None),
            )
        )
    return out


def load_config(path: str | Path) -> dict[str, Any]:
    """A gate.yaml: ``rules`` (a list of rule strings) and optionally ``baseline``, ``agent``,
    ``baseline_agent``, ``alpha``, ``allow_mismatch``, ``allow_partial``, ``since``, ``until``. Relative run paths are taken as they are
    (from the working directory), as on the command line."""

    p = Path(path)
    try:
        cfg = yaml.safe_load(p.read_text(encoding="utf-8"))
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror or e}", where=str(p)) from None
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise InputError(f"not YAML: {e}", where=str(p)) from None
    known = {"rules", "baseline", "agent", "baseline_agent", "alpha", "allow_mismatch"}
    known |= {"allow_partial", "since", "until"}
    if not isinstance(cfg, dict) or not isinstance(cfg.get("rules"), list) or not cfg["rules"]:
        raise InputError("expected a mapping with a non-empty list `rules`", where=str(p))
    unknown = sorted(set(cfg) - known)
    if unknown:
        raise InputError(
            f"unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}", where=str(p)
        )
    if not all(isinstance(r, str) for r in cfg["rules"]):
        raise InputError("every rule is a string such as 'pass@1 >= 0.6'", where=str(p))
    return cfg
