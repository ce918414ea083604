"""Which killing test cases a suite may hold out (`etai suite build` and `etai suite mine`; the
held-out tests of docs/held-out-tests.md). Pure functions over the cases' prints
(harness/grading/js/case-print.js, listed by testcases.js there); held_out.py runs the parser and
applies the verdicts.

A held-out case exists to catch code that special-cases the visible tests. It is held out only
when all of these hold, checked in this order, and otherwise stays visible with its reason counted:

- ``twin``: no case that stays visible (any test file of the workspace) has the same shape (its
  callback with the names bound inside it renamed by first occurrence, comments, layout and
  TypeScript types left out) or the same non-empty sequence of literal values (its inputs and
  expected values). Code keyed on a visible twin's inputs passes its held-out copy:
  fastest-validator's `.ts` tests mirror its `.js` tests. Names from outside the case are kept,
  so two literal-free cases calling different functions are not twins. Candidates that are twins
  only of each other (a commit that adds a `.js` case and its `.ts` mirror) form a group
  (``groups``) that the split holds out whole or not at all.
- ``vacuous``: the case reached at least one passing assertion on the reference (the guard's
  count, ``asserts`` of a test outcome): one that asserts nothing passes whatever the code does.
- ``new_api``: every name it takes from the project (a named import it uses, a member of a value
  made from an import) is a word of the starting workspace's non-test files or of a case that is
  not a candidate (the instruction's case among them), which stays visible whatever is chosen: a
  held-out case must not call API that only the fix introduces.
- ``uncovered``: every changed line it executes at the fix (the lines of non-test files the fix
  adds or changes, as they are at the fix; ``Coverage``, measured by harness/authoring/coverage.py)
  is executed by some case that stays visible. A held-out case tests the behaviour the visible
  tests specify on other inputs, not another feature of the same commit: a commit that fixes
  ``half`` and gives ``label`` a unit holds out no case of the unit when no visible case runs
  that code. Decided once, after the three rules above and their twin closure (an ineligible
  candidate stays visible, so its lines count as visible), and never reversed: the candidates it
  makes ineligible stay visible too, which only adds visible lines, so neither the order of the
  candidates nor a second pass would change a verdict, and every held-out case's lines stay
  within the visible ones. Two candidates that alone execute the same line are both ineligible,
  though keeping one visible would let the other be held out: the rule does not choose between
  them. The granularity is the line (a line counts when a statement starting on it ran). Coverage
  not known (None) leaves the rule unapplied here, as ``asserts=None`` does for ``vacuous``; the
  callers then hold none of the session's candidates out (``why_none`` ``NOT_MEASURED``: an
  unmeasured case could be one the rule makes ineligible) and count them (``coverage_unknown``).

Build's mutants need no measurement where the mutated span has code on one line: a mutant is one
contiguous span (mutants.py's ``Mutant``), a test whose run never reaches it behaves the same with
and without it, so every killing case (the instruction's, which stays visible, among them) executes
that line, and no candidate executes a changed line the instruction's case does not (what reads
source text rather than running it, such as ``Function.prototype.toString``, aside). A span with
code on several lines (a ``return`` of a function written over lines, a condition over lines) is
measured on the fixed code as a mined fix is (build/split.py's ``_coverage``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

REASONS = ("twin", "vacuous", "new_api", "uncovered")
# A session's ``why_none`` when its candidates' coverage was not measured: it holds none out.
NOT_MEASURED = "coverage_not_measured"

# Any identifier-like word, short ones included (`v.is` is as much an API name as `v.compile`).
_WORD = re.compile(r"[A-Za-z_$][\w$]*")


@dataclass(frozen=True)
class Case:
    id: str  # file::full name for a plain case, file::@offset for the others
    shape: str | None  # None: no callback to print (it then has no twin by shape)
    literals: tuple[str, ...]
    api: frozenset[str]
    words: frozenset[str]  # the words of its callback's text


@dataclass(frozen=True)
class Coverage:
    """The changed lines (``file:line``) that cases execute at the fix: ``visible``, those some case
    that stays visible executes (the caller may count a candidate already ineligible for another
    reason among them: it stays visible); ``of``, each candidate's own. A candidate missing from
    ``of`` is not judged by the rule (the callers measure every candidate or none)."""

    visible: frozenset[str]
    of: Mapping[str, frozenset[str]]


def words(text: str) -> set[str]:
    return set(_WORD.findall(text))


def cases_of(found: Mapping[str, list[dict]], texts: Mapping[str, str]) -> list[Case]:
    """The Cases of testcases.js's answer ``found`` for the files' ``texts``."""
    out = []
    for file, listed in found.items():
        for c in listed:
            body = c.get("body")
            out.append(
                Case(
                    f"{file}::{c['name']}" if c["plain"] else f"{file}::@{c['start']}",
                    c.get("shape"),
                    tuple(c.get("literals") or ()),
                    frozenset(c.get("api") or ()),
                    frozenset(words(texts[file][body[0] : body[1]])) if body else frozenset(),
                )
            )
    return out


def is_twin(a: Case, b: Case) -> bool:
    """Same shape, or the same literal values in the same order (two cases without any literal
    are not twins by that alone)."""
    return (a.shape is not None and a.shape == b.shape) or (
        bool(a.literals) and a.literals == b.literals
    )


def twins(candidates: Iterable[str], cases: Iterable[Case]) -> set[str]:
    """The candidates (case ids) that have a twin among the other ``cases``."""
    cases = list(cases)
    by_id = {c.id: c for c in cases}
    out = set()
    for tid in candidates:
        me = by_id.get(tid)
        if me is not None and any(c is not me and is_twin(me, c) for c in cases):
            out.add(tid)
    return out


def screen(
    candidates: list[str],
    cases: list[Case],
    asserts: Mapping[str, int] | None,
    known: set[str],
    coverage: Coverage | None = None,
) -> dict[str, str]:
    """Why each ineligible candidate may not be held out ({case id: reason}); the rest may.

    ``asserts``: each test id's passing assertions on the reference (None: not known, the rule is
    not applied). ``known``: the words of the starting workspace's non-test files. ``coverage``:
    the changed lines cases execute (None: not known, ``uncovered`` is not applied). A candidate
    not listed in ``cases`` (the parser did not find it) is left to the split's own rule."""
    listed = {c.id: c for c in cases}
    maybe = set(candidates)
    fixed = [c for c in cases if c.id not in maybe]  # visible whatever the split chooses
    why: dict[str, str] = {}
    for tid in candidates:
        if tid in listed and any(is_twin(listed[tid], c) for c in fixed):
            why[tid] = "twin"
    for tid in candidates:
        if tid not in why and asserts is not None and asserts.get(tid, 0) < 1:
            why[tid] = "vacuous"
    # A held-out case may use the names of what surely stays visible: every case but the
    # candidates (the instruction's case among them), and the starting workspace's other files.
    seen = set(known).union(*(c.words for c in fixed))
    for tid in candidates:
        if tid not in why and tid in listed and not listed[tid].api <= seen:
            why[tid] = "new_api"
    _twin_closure(candidates, listed, why)
    if coverage is not None:
        # The lines of what stays visible so far; decided once for every candidate (module doc).
        seen_lines = set(coverage.visible).union(*(coverage.of.get(t, frozenset()) for t in why))
        for tid in candidates:
            if tid not in why and tid in coverage.of and not coverage.of[tid] <= seen_lines:
                why[tid] = "uncovered"
        _twin_closure(candidates, listed, why)
    return why


def _twin_closure(candidates: list[str], listed: Mapping[str, Case], why: dict[str, str]) -> None:
    """An ineligible candidate stays visible: a twin of it is a twin of a visible case."""
    while True:
        more = [
            tid
            for tid in candidates
            if tid not in why
            and tid in listed
            and any(is_twin(listed[tid], listed[o]) for o in why if o in listed)
        ]
        if not more:
            return
        why.update(dict.fromkeys(more, "twin"))


def groups(eligible: Iterable[str], cases: Iterable[Case]) -> list[set[str]]:
    """The eligible candidates linked by the twin relation (each group of two or more): a split
    holds out a group whole or none of it, so none of them has a visible twin."""
    by_id = {c.id: c for c in cases}
    ids = [t for t in eligible if t in by_id]
    parent = {t: t for t in ids}

    def top(t: str) -> str:
        while parent[t] != t:
            t = parent[t]
        return t

    for i, a in enumerate(ids):
        for b in ids[i + 1 :]:
            if is_twin(by_id[a], by_id[b]):
                parent[top(a)] = top(b)
    out: dict[str, set[str]] = {}
    for t in ids:
        out.setdefault(top(t), set()).add(t)
    return [g for g in out.values() if len(g) > 1]


def counts(
    considered: int, why: Mapping[str, str], held: int, unmeasured: int = 0
) -> dict[str, int]:
    """A session's row: the cases the split could hold out, each reason's count, those held out;
    and ``coverage_unknown``, those of them ``uncovered`` could not judge (coverage not measured,
    the row's ``coverage`` says why; the session then holds none out)."""
    per = Counter(why.values())
    return {
        "considered": considered,
        **{r: per.get(r, 0) for r in REASONS},
        "coverage_unknown": unmeasured,
        "held_out": held,
    }


def none_held(why: Mapping[str, str]) -> str:
    """The split's reason when every candidate was ineligible: the one reason, or ``mixed``."""
    reasons = set(why.values())
    return f"ineligible_{reasons.pop() if len(reasons) == 1 else 'mixed'}"


def total(rows: Iterable[Mapping[str, int]]) -> dict[str, int]:
    """The summary's sum of the sessions' ``counts`` rows."""
    out: Counter = Counter()
    for r in rows:
        out.update(r)
    keys = ("considered", *REASONS, "coverage_unknown", "held_out")
    return {k: out.get(k, 0) for k in keys}


def line(t: Mapping[str, int]) -> str:
    """``total`` as the build's and the mine's printed summaries say it."""
    why = ", ".join(f"{r} {t.get(r, 0)}" for r in REASONS)
    return (
        f"held-out cases: {t.get('held_out', 0)} held out of {t.get('considered', 0)} "
        f"candidates; ineligible: {why}; coverage not measured for "
        f"{t.get('coverage_unknown', 0)}\n"
    )
