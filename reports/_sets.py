"""The runs of a suite set (harness/session/suite_set.py: `etai run --suite SET` writes one run
folder per member and ``suite-set.json`` naming them) read as one benchmark.

`etai report SET_RUN` compares each member's runs on their own and pools them (reports/_suites.py,
reports/_clusters.py ``pooled``); `etai gate SET_RUN` gates the pooled rows once (``pooled`` here):
one verdict whose standard errors are clustered by project, the sessions of one project being
correlated. A member's sessions are named ``MEMBER/ID`` in the pooled rows, so ids of two members
never meet and a baseline set pairs with the candidate member by member.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from harness.base.errors import InputError
from harness.session import suite_set
from harness.session.window import Window
from reports._dates import restrict
from reports._kinds import SESSIONS
from reports._load import load


def is_set(path: str | Path) -> bool:
    return suite_set.is_set(path)


def members(path: str | Path) -> tuple[suite_set.SuiteSet, list[Path], list[str]]:
    """The set at ``path``, its members' run folders that exist, and the members not run yet."""
    st = suite_set.load_set(path)
    ran = [st.folder(m) for m in st.members if _ran(st.folder(m))]
    return st, ran, [m for m in st.members if not _ran(st.folder(m))]


def _ran(folder: Path) -> bool:
    return (folder / "results.jsonl").is_file() or (folder / "summary.json").is_file()


def expand(paths: Iterable[str | Path]) -> tuple[list[str | Path], list[str]]:
    """``paths`` with every suite set replaced by its members' run folders, and a note for each
    member not run yet."""
    out: list[str | Path] = []
    notes = []
    for p in paths:
        if not is_set(p):
            out.append(p)
            continue
        st, ran, unrun = members(p)
        out += ran
        notes += [f"{p}: {m} of {st.name} has not run (no run folder)" for m in unrun]
    return out, notes


def pooled(path: str | Path, window: Window | None = None) -> pd.DataFrame:
    """Every member's rows of the set's run at ``path`` in one frame (as reports.load gives one
    run's), sessions named MEMBER/ID; ``attrs["set"]`` is the set's name, ``attrs["unrun"]`` the
    members not run yet. InputError where a member is not a session run, the members ran with
    different k, or none has run."""
    st, ran, unrun = members(path)
    if not ran:
        raise InputError(f"no member of {st.name} has run yet", where=str(path))
    frames, runs, windows, summaries = [], [], [], {}
    for folder in ran:
        df = load(folder)
        if window:
            try:
                df = restrict(df, window, str(folder))
            except InputError:  # no session of this member in the window: the others pool
                windows.append(f"{folder.name}: no session {window.describe()}")
                continue
            windows.append(f"{folder.name}: {df.attrs['window']}")
        info = df.attrs["runs"][0]
        if info["kind"] != SESSIONS:
            raise InputError(f"a {info['kind']} run: only session runs pool", where=str(folder))
        df["session_id"] = (folder.name + "/" + df["session_id"].astype(str)).astype("string")
        frames.append(df)
        runs += df.attrs["runs"]
        summaries.update(df.attrs["summaries"])
    if not frames:
        raise InputError(
            f"no session of {st.name} was {window.describe()}", where="--since/--until"
        )
    ks = {r["path"]: r["k"] for r in runs}
    if len(set(ks.values())) > 1:
        each = ", ".join(f"{p}: k={k}" for p, k in ks.items())
        raise InputError(
            f"its members ran with different k ({each}): rerun with one -k", where=str(path)
        )
    df = pd.concat(frames, ignore_index=True)
    df.attrs.update(runs=runs, notes=[], summaries=summaries, set=st.name, unrun=unrun)
    if windows:
        df.attrs["window"] = "; ".join(windows)
    return df


def member_pairs(candidate: str | Path, baseline: str | Path) -> list[tuple[Path, Path]]:
    """The (candidate, baseline) run folders of the members both sets have run."""
    _, mine, _ = members(candidate)
    _, theirs, _ = members(baseline)
    by_name = {f.name: f for f in theirs}
    return [(f, by_name[f.name]) for f in mine if f.name in by_name]
