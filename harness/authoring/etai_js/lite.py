"""etai-js lite: a fixed, stratified subset of a manifest version (at most ``SIZE`` sessions) for
the CI gate and in-training evaluation, where the whole benchmark costs too much.

The rule (docs/guides/etai-js.md, "The lite subset"), deterministic from the rows alone:

1. A version with at most ``SIZE`` sessions is its own lite subset.
2. **Fix size** of a session: the lines its reference edits remove plus those they add, as
   ``git diff --numstat`` counts them. The sessions are ranked by it (ties broken by the seeded
   order below) and cut into three classes of near-equal count: small, medium, large.
3. **Per project**, a share of ``SIZE`` proportional to its sessions, at least one each (largest
   remainders, ties to the project named first).
4. **Within a project**, its share split over the three size classes in proportion to its sessions
   in each (largest remainders again), then each class's sessions taken in the seeded order:
   by sha256 of ``SEED``, a NUL and the session id.

The rows of a released version never change, so neither does its lite subset. A change of this
rule is a change of ``RULE``; it changes the subset's rows, and so the stamp a fetched suite is
recognised by (harness/authoring/etai_js/fetch.py), and a lite suite fetched before is refused
rather than taken for the new one.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
from collections.abc import Hashable, Mapping
from fractions import Fraction
from typing import Any

from harness.authoring.etai_js.manifest import Manifest

SIZE = 60
SEED = "etai-js-lite"
RULE = 1
CLASSES = ("small", "medium", "large")


def fix_size(row: Mapping[str, Any]) -> int:
    """Lines the row's reference edits remove plus lines they add."""
    n = 0
    for edit in row["reference"]:
        old, new = edit["old"].splitlines(), edit["new"].splitlines()
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new).get_opcodes():
            if tag != "equal":
                n += (i2 - i1) + (j2 - j1)
    return n


def _order(session_id: str, seed: str) -> str:
    return hashlib.sha256(f"{seed}\0{session_id}".encode()).hexdigest()


def size_classes(rows: list[Mapping[str, Any]], seed: str = SEED) -> dict[str, str]:
    """session id -> small | medium | large: thirds of the sessions ranked by fix size."""
    ranked = sorted(rows, key=lambda r: (fix_size(r), _order(r["session_id"], seed)))
    n = len(ranked)
    return {r["session_id"]: CLASSES[i * len(CLASSES) // n] for i, r in enumerate(ranked)}


def apportion(counts: Mapping[Hashable, int], total: int, *, floor: int = 0) -> dict:
    """``total`` seats over groups of ``counts`` members, proportional to their counts (largest
    remainders; ties to the group listed first), each group at least ``floor`` (where the total
    allows) and at most its count."""
    if sum(counts.values()) <= total:
        return dict(counts)
    base = {k: min(floor, c) for k, c in counts.items()}
    if sum(base.values()) > total:
        base = {k: 0 for k in counts}
    rest = total - sum(base.values())
    room = {k: counts[k] - base[k] for k in counts}
    whole = sum(room.values())
    exact = {k: Fraction(rest * room[k], whole) for k in counts}  # exact: ties stay ties
    seats = {k: base[k] + int(exact[k]) for k in counts}
    order = sorted(counts, key=lambda k: -(exact[k] - int(exact[k])))  # stable: first listed wins
    for k in order[: total - sum(seats.values())]:
        seats[k] += 1
    return seats


def select(rows: list[dict[str, Any]], size: int = SIZE, seed: str = SEED) -> list[dict[str, Any]]:
    """The lite subset of ``rows`` (a manifest's, in its order), by the rule in the module doc."""
    if len(rows) <= size:
        return list(rows)
    classes = size_classes(rows, seed)
    projects: dict[str, list[dict]] = {}
    for r in rows:
        projects.setdefault(r["project"], []).append(r)
    chosen: set[str] = set()
    shares = apportion({p: len(rs) for p, rs in projects.items()}, size, floor=1)
    for p, rs in projects.items():
        cells = {c: [r for r in rs if classes[r["session_id"]] == c] for c in CLASSES}
        seats = apportion({c: len(cells[c]) for c in CLASSES}, shares[p])
        for c in CLASSES:
            picked = sorted(cells[c], key=lambda r: _order(r["session_id"], seed))[: seats[c]]
            chosen.update(r["session_id"] for r in picked)
    return [r for r in rows if r["session_id"] in chosen]


def of(m: Manifest) -> Manifest:
    """The manifest restricted to its lite subset, labelled ``etai-js@N-lite``."""
    return dataclasses.replace(m, rows=select(m.rows), subset="lite")
