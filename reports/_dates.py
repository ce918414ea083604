"""Results by the fix date: the rows a report or gate keeps under ``--since``/``--until``
(harness/session/window.py), and the report's section of each agent's rates by the year its
sessions were fixed.

A session's fix date is on its rows (``fix_date``, harness/runs/session_kind.py). A session whose
rows name none is left out of a window and counted in a note, never silently kept or dropped.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from harness.base.errors import InputError
from harness.session.window import Window, fix_day
from reports import _stats
from reports._section import Section, fmt

NO_DATE = "no fix date"


def _dates(df: pd.DataFrame) -> dict[str, str | None]:
    """Each session's fix date (the first of its rows that names one)."""
    first = df.dropna(subset=["fix_date"]).drop_duplicates("session_id")
    dated = dict(zip(first["session_id"].astype(str), first["fix_date"].astype(str)))
    return {str(s): dated.get(str(s)) for s in df["session_id"].unique()}


def restrict(df: pd.DataFrame, window: Window | None, what: str = "the runs") -> pd.DataFrame:
    """The rows of the sessions fixed inside ``window`` (all rows without one), with a note in
    ``attrs["notes"]`` and ``attrs["window"]`` counting what was left out; InputError where no
    session is left."""
    if not window:
        return df
    dates = _dates(df)
    got = window.pick(sorted(dates), dates.get, lambda s: f"session {s}")
    if not got.kept:
        raise InputError(
            f"no session of {what} was {window.describe()} ({len(got.outside)} outside the "
            f"window, {len(got.undated)} without a fix date)",
            where="--since/--until",
        )
    out = df[df["session_id"].isin(got.kept)].copy()
    note = _note(window, got)
    out.attrs = {**df.attrs, "notes": [*df.attrs.get("notes", []), note], "window": note}
    return out


def _note(window: Window, got: Any) -> str:
    text = (
        f"--since/--until: {len(got.kept)} session(s) {window.describe()} kept; "
        f"{len(got.outside)} outside the window left out"
    )
    if got.undated:
        text += f"; {len(got.undated)} without a fix date left out"
    return text


def year_of(fix_date: Any) -> str:
    if fix_date is None or pd.isna(fix_date):
        return NO_DATE
    return str(fix_day(str(fix_date), where="fix_date").year)


def section(rows: pd.DataFrame, arms: list[str], k: int) -> Section:
    """pass@1 and PA@k of every arm by the UTC year of its sessions' fixes, with 95% Wilson
    intervals over valid episodes."""
    s = Section(
        "dates",
        "Results by fix date",
        text=[
            "Each arm's rates over the sessions fixed in each year (the fixing commit's author "
            "date, in UTC), with 95% Wilson intervals over valid episodes: a model that does "
            "better on fixes from before its training cut-off than after may have seen them. "
            "--since/--until keep one window (docs/metrics.md)."
        ],
    )
    v = rows[rows["valid"]]
    if rows["fix_date"].isna().all():
        s.text.append("No session here names a fix date (only mined and etai-js sessions do).")
        return s
    year = v["fix_date"].map(year_of)
    body = []
    for arm in arms:
        mine = v["arm"] == arm
        for y in sorted(set(year[mine]), key=lambda x: (x == NO_DATE, x)):
            g = v[mine & (year == y)]
            body.append(
                [
                    arm,
                    y,
                    str(g["session_id"].nunique()),
                    str(len(g)),
                    _rate(int(g["passed"].sum()), len(g)),
                    _rate(int((g["steps_to_green"].fillna(10**9) <= k).sum()), len(g)),
                ]
            )
    s.tables.append((["arm", "fixed in", "sessions", "episodes", "pass@1", f"PA@{k}"], body))
    return s


def _rate(hits: int, n: int) -> str:
    lo, hi = _stats.wilson(hits, n)
    return "–" if not n else f"{fmt(hits / n)} [{fmt(lo)}, {fmt(hi)}]"
