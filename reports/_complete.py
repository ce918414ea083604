"""Whether a run folder's rows are its suite's, and all of them: what a report names and what a
gate refuses to pass on without ``--allow-partial``.

A results.jsonl is appended to by every `etai run` on its folder and can be edited or copied over
by hand: a row of a session the suite does not have, of another suite, or of another version of a
session (its content hash differs) is *foreign*: left out of the numbers, and named. A session of
the run without a row for every agent and sample is *missing*: a gate on the rest would pass on
13 of 14 sessions. summary.json says what the run is (harness/runs/session_kind.py): ``suite``,
``sessions`` (ids run), ``suite_sessions`` (every session of the suite, by content hash),
``samples`` and ``agents``. Summaries written before those keys are held to what they state:
rows of another suite are foreign, and a run with fewer sessions than ``n_sessions`` misses some,
unnamed. Only session runs are checked; task kinds (HumanEval, plug-ins) name no sessions.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

_SHOWN = 10  # ids named in a message; the rest counted


@dataclass(frozen=True)
class Gaps:
    """What is wrong with one run folder's rows: foreign sessions (id -> why) and, per agent, how
    many of the run's ``of`` sessions lack a row and which (unnamed for older summaries)."""

    foreign: dict[str, str] = field(default_factory=dict)
    lacking: dict[str, int] = field(default_factory=dict)
    missing: dict[str, list[str]] = field(default_factory=dict)
    of: int = 0

    def notes(self, where: str) -> list[str]:
        out = []
        if self.foreign:
            out.append(
                f"{where}: {len(self.foreign)} session(s) not of the run's suite were left out: "
                + named([f"{s} ({why})" for s, why in self.foreign.items()])
            )
        for agent, n in self.lacking.items():
            ids = self.missing.get(agent)
            out.append(
                f"{where}: {agent} has no row for {n} of the run's {self.of} session(s)"
                + (f": {named(ids)}" if ids else " (the summary, older, does not name them)")
            )
        return out


def named(items: Sequence[str]) -> str:
    more = len(items) - _SHOWN
    return ", ".join(items[:_SHOWN]) + (f" and {more} more" if more > 0 else "")


def split_foreign(
    rows: list[dict[str, Any]], summary: Mapping[str, Any]
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """(the rows of the summary's suite, foreign session id -> why)."""
    suite = summary.get("suite")
    known = summary.get("suite_sessions")
    known = known if isinstance(known, Mapping) else None
    own, foreign = [], {}
    for r in rows:
        sid, h = r["session_id"], r.get("session_hash")
        if suite and r.get("suite") not in (None, suite):
            foreign[sid] = f"a row of suite {r['suite']}"
        elif known is not None and sid not in known:
            foreign[sid] = f"not a session of {suite}"
        elif known is not None and h and known[sid] and h != known[sid]:
            foreign[sid] = "a row of another version of the session"
        else:
            own.append(r)
    return own, dict(sorted(foreign.items()))


def gaps(rows: list[dict[str, Any]], summary: Mapping[str, Any], foreign: dict[str, str]) -> Gaps:
    """The Gaps of a run's own ``rows`` (split_foreign's) against its summary."""
    ids = summary.get("sessions")
    named = isinstance(ids, list)
    n = len(ids) if named else int(summary.get("n_sessions") or 0)
    samples = int(summary.get("samples") or 1)
    agents = list(summary.get("agents") or {}) or sorted({r["agent"] for r in rows})
    have = {(r["agent"], r["session_id"], int(r.get("sample", 0))) for r in rows}
    per = Counter((a, sid) for a, sid, _ in have)  # distinct samples: a row twice counts once
    lacking, missing = {}, {}
    for agent in agents:
        if named:
            lack = [
                f"{sid} ({per[agent, sid]} of {samples} samples)" if per[agent, sid] else sid
                for sid in ids
                if per[agent, sid] < samples
            ]
            if lack:
                lacking[agent], missing[agent] = len(lack), lack
        else:
            full = sum(1 for (a, _), c in per.items() if a == agent and c >= samples)
            if full < n:
                lacking[agent] = n - full
    return Gaps(foreign, lacking, missing, n)


def for_gate(df: Any, arm: str, what: str, allow_partial: bool) -> tuple[list[str], list[str]]:
    """(why the gate cannot pass, notes) for one arm of a loaded run (reports.load): a session of
    the run lacking a row of the arm's agent keeps the gate from passing unless ``allow_partial``;
    foreign rows, left out already, are noted."""
    rows = df[df["arm"] == arm]
    labels, agents = set(rows["run"]), set(rows["agent"])
    stop, notes = [], []
    for info in df.attrs["runs"]:
        if info["label"] not in labels:
            continue
        g = info["gaps"]
        where = f"the {what} run {info['path']}"
        notes += Gaps(g["foreign"], of=g["of"]).notes(where)
        for agent in sorted(agents & set(g["lacking"])):
            one = Gaps(
                lacking={agent: g["lacking"][agent]},
                missing={agent: g["missing"].get(agent, [])},
                of=g["of"],
            ).notes(where)
            if allow_partial:
                notes += [f"{n}; gated on the sessions present (--allow-partial)" for n in one]
            else:
                stop += [
                    f"{n}; rerun `etai run` to fill them, or gate on the sessions present "
                    "with --allow-partial"
                    for n in one
                ]
    return stop, notes
