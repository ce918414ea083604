"""`etai run --suite SET`: every suite of a suite set (harness/session/suite_set.py) run as one
benchmark, each member into ``OUT/<member>/`` by the runner as it runs any suite, so each keeps its
own workspaces, dependency folder and sandbox settings; ``OUT/suite-set.json`` then names those run
folders for `etai report OUT` and `etai gate OUT`, which pool them (reports/_sets.py).

Every member is loaded and checked first (its sessions, the session ids asked for, the fix window,
one k for all): bad input stops the command before any member runs or anything is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.base.errors import InputError
from harness.runs.results import write_text_atomic
from harness.session import suite_set
from harness.session.window import Window
from harness.suites.load import DEFAULTS, load_suite

KIND = "suite-set"


def plan(
    path: str | Path,
    *,
    k: int | None,
    session_ids: Sequence[str] | None,
    since: str | None,
    until: str | None,
) -> tuple[suite_set.SuiteSet, dict[str, Any]]:
    """The set and its members to run (member -> loaded Suite, in the set's order), each holding
    at least one session asked for; InputError naming what is wrong."""
    st = suite_set.load_set(path)
    where = str(st.path / suite_set.SET_FILE)
    suites = {}
    for member in st.members:
        folder = st.folder(member)
        if not (folder / "sessions.jsonl").is_file():
            raise InputError(f"member {member}: {folder} is not a suite folder", where=where)
        suites[member] = load_suite(folder)
    if k is None:  # pooled rates over members of different budgets would mix PA@k's
        ks = {m: s.defaults.get("k", DEFAULTS["k"]) for m, s in suites.items()}
        if len(set(ks.values())) > 1:
            each = ", ".join(f"{m}: {v}" for m, v in ks.items())
            raise InputError(f"its suites default to different k ({each}): give -k", where=where)
    if session_ids:
        ids = {s.session_id: m for m, st_ in suites.items() for s in st_.sessions}
        unknown = sorted(set(session_ids) - set(ids))
        if unknown:
            raise InputError(
                f"unknown session id(s) in {st.name}: {', '.join(unknown)}", where="--session"
            )
        suites = {m: s for m, s in suites.items() if m in {ids[i] for i in session_ids}}
    window = Window.of(since, until)
    if window:
        suites = {
            m: s
            for m, s in suites.items()
            if window.pick(list(s.sessions), lambda x: x.fix_date, lambda x: x.session_id).kept
        }
        if not suites:
            raise InputError(
                f"no session of {st.name} was {window.describe()}", where="--since/--until"
            )
    return st, suites


def run_set(
    path: str | Path,
    agents: Sequence[str],
    *,
    out: str | Path | None = None,
    k: int | None = None,
    session_ids: Sequence[str] | None = None,
    since: str | None = None,
    until: str | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Run ``agents`` on every member of the set at ``path``; returns {"kind", "name", "out",
    "suites": {member: its run's summary}, "complete"}. ``options`` go to the runner as they are."""
    from harness.runs.runner import run  # the runner and its kinds: loaded when a run starts

    st, suites = plan(path, k=k, session_ids=session_ids, since=since, until=until)
    # not runs/<name>: that is where `etai suite fetch` puts the suites themselves
    dest = Path(out or Path("runs") / f"{st.name}-run")
    if dest.resolve() == st.path or st.path in dest.resolve().parents:
        raise InputError(
            "is inside the suite set it would run: choose another --out", where=str(dest)
        )
    if (dest / "results.jsonl").is_file():
        raise InputError("is the run folder of one suite, not of a suite set", where=str(dest))
    if suite_set.is_set(dest) and suite_set.load_set(dest).name != st.name:
        raise InputError(
            f"holds the runs of {suite_set.load_set(dest).name}, not {st.name}: choose another "
            "--out",
            where=str(dest),
        )
    dest.mkdir(parents=True, exist_ok=True)
    # Written before any member runs: a report or gate on a run stopped half way sees the members
    # that have not run yet (incomplete) rather than a smaller benchmark.
    write_text_atomic(dest / suite_set.SET_FILE, suite_set.dump(st.name, list(suites)))
    summaries = {}
    for member, suite in suites.items():
        ids = [x.session_id for x in suite.sessions if x.session_id in set(session_ids or ())]
        summaries[member] = run(
            suite, agents, out=dest / member, k=k, session_ids=ids or None, since=since,
            until=until, **options,
        )  # fmt: skip
    return {
        "kind": KIND,
        "name": st.name,
        "out": str(dest),
        "suites": summaries,
        "complete": all(s["complete"] for s in summaries.values()),
    }
