"""The report's per-session sections: every session with each arm's outcome, linked to the episode
pages of the view.html written beside the report (reports/view), and the sessions whose outcome
changed between two arms — fixed or broken by the later arm (the candidate, when the baseline's
run is given first)."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

import pandas as pd

from reports._compare import Comparison
from reports._section import Section

VIEW = "view.html"


@dataclass(frozen=True)
class Link:
    """A table cell that links into the viewer: ``href`` is built here, never taken from a row."""

    text: str
    href: str


Cell = str | Link
# (run folder, agent, session, sample) -> the episode's id in view.html
Links = dict[tuple[str, str, str, int], int]


def links_of(view) -> Links:
    """Every episode of a reports.view.View by what identifies it in a Comparison's rows."""
    path = {r["label"]: r["path"] for r in view.runs}
    c = {name: i for i, name in enumerate(view.index_json()["columns"])}
    return {
        (path[x[c["run"]]], x[c["agent"]], x[c["session"]], x[c["sample"]]): x[c["id"]]
        for x in view.index
    }


def _outcomes(c: Comparison) -> pd.DataFrame:
    """Per session and arm: passed samples, valid samples, and the statuses."""
    g = c.rows.groupby(["session_id", "arm"], observed=True)
    return pd.DataFrame(
        {
            "passed": g["passed"].sum(),
            "valid": g["valid"].sum(),
            "statuses": g["status"].agg(lambda s: ", ".join(dict.fromkeys(map(str, s)))),
        }
    )


def _cell(c: Comparison, out: pd.DataFrame, links: Links | None, sid: str, arm: str) -> Cell:
    if (sid, arm) not in out.index:
        return "–"
    o = out.loc[(sid, arm)]
    text = str(o["statuses"]) if o["valid"] <= 1 else f"{int(o['passed'])}/{int(o['valid'])} passed"
    if not links:
        return text
    paths = {r["label"]: r["path"] for r in c.runs}
    # the lowest sample, not the first row: rows are in the order episodes finished
    mine = c.rows[(c.rows["session_id"] == sid) & (c.rows["arm"] == arm)]
    first = mine.sort_values("sample", kind="stable").iloc[0]
    key = (paths.get(str(first["run"])), str(first["agent"]), sid, int(first["sample"]))
    return Link(text, f"{VIEW}#e/{links[key]}") if key in links else text


def sessions_table(c: Comparison, links: Links | None) -> tuple[list[str], list[list[Cell]]]:
    """Every session compared, each arm's outcome linked to its episode page."""
    out = _outcomes(c)
    rows: list[list[Cell]] = []
    for sid in c.sessions:
        name: Cell = Link(sid, f"{VIEW}#s/{quote(sid, safe='')}") if links else sid
        rows.append([name, *(_cell(c, out, links, sid, a) for a in c.arms)])
    return ["session" if c.kind == "sessions" else "task", *c.arms], rows


def changes(c: Comparison, links: Links | None) -> tuple[list[str], list[list[Cell]]]:
    """Sessions whose pass rate differs between two arms: fixed or broken by the later one."""
    out = _outcomes(c)
    rate = (out["passed"] / out["valid"].where(out["valid"] > 0)).dropna()
    rows: list[list[Cell]] = []
    for i, a in enumerate(c.arms):
        for b in c.arms[i + 1 :]:
            for sid in c.sessions:
                if (sid, a) not in rate.index or (sid, b) not in rate.index:
                    continue
                ra, rb = rate[(sid, a)], rate[(sid, b)]
                if ra == rb:
                    continue
                what = f"fixed by {b}" if rb > ra else f"broken by {b}"
                name: Cell = Link(sid, f"{VIEW}#s/{quote(sid, safe='')}") if links else sid
                rows.append(
                    [a, b, name, _cell(c, out, links, sid, a), _cell(c, out, links, sid, b), what]
                )
    return ["A", "B", "session", "under A", "under B", "change"], rows


def session_sections(c: Comparison, links: Links | None) -> list:
    """ "Every session" (or task) and "Sessions whose status changed", as report Sections."""

    what = "session" if c.kind == "sessions" else "task"
    every = Section(
        "sessions",
        f"Every {what}",
        text=[
            f"Each arm's outcome on every {what} compared"
            + (f"; each links to the episode in {VIEW} beside this report." if links else ".")
        ],
        tables=[sessions_table(c, links)],
    )
    changed = Section(
        "changes",
        "Sessions whose status changed",
        text=[
            f"For each pair of arms A, B (in the order of the per-agent table): the {what}s whose "
            "pass rate differs, fixed or broken by B."
        ],
    )
    heads, rows = changes(c, links)
    if rows:
        changed.tables.append((heads, rows))
    else:
        changed.text.append("None." if len(c.arms) > 1 else "Only one arm: nothing to compare.")
    return [every, changed]
