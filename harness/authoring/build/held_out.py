"""Which of a mutant's killing tests a built session holds out (the held-out tests of README.md, for `suite build`).

The rule: a mutant killed by at least two test cases holds out half of them (rounded down), chosen
with the build's seed among the killing cases that are plain test cases of their file
(testcases.js) with a name found once there, never the case the instruction names. The session's
workspace is the base with the mutant and with those cases cut out of their test files (each cut a
patch entry whose text occurs once in the file at that point); its held-out folder holds each such
test file whole, so the final verification runs every killing case. Everything the agent sees (the
instruction, the IDE context, the recorded trace) comes from the cut files. A mutant killed by one
case, or whose other killing cases cannot be cut by text, keeps every test visible and holds none
out; the build's summary counts both. A test file keeps at least one of its cases visible, and
the build runs the cut files on the fixed code before it keeps a split: when a visible case fails
there (a cut case set up what it uses), the session holds nothing out
(`cut_breaks_a_visible_case`). Only cases that harness/authoring/eligibility.py finds eligible
(no twin in the workspace, an assertion reached on the reference, no API only the fix introduces,
no changed line that no visible case executes) are held out; ``screen`` says why the others are not, and a session whose every candidate is
ineligible holds nothing out (`ineligible_<reason>`).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from harness.authoring import eligibility
from harness.authoring.build.compose import Failure
from harness.grading.cases import all_cases
from harness.session.workspace import workspace_paths


def test_cases(files: dict[str, str]) -> dict[str, list[dict]]:
    """Each test file's plain test cases: {name, start, end, ...} (testcases.js)."""
    return {f: [c for c in found if c["plain"]] for f, found in all_cases(files).items()}


def _plain(cases: dict[str, list[dict]]) -> dict[tuple[str, str], dict]:
    """The plain cases whose name occurs once in their file: the ones a split can cut by name."""
    plain: dict[tuple[str, str], dict] = {}
    for file, found in cases.items():
        names = [c["name"] for c in found if c["plain"]]
        for c in found:
            if c["plain"] and names.count(c["name"]) == 1:
                plain[(file, c["name"])] = c
    return plain


def known_words(folder: Path, test_files: Iterable[str]) -> set[str]:
    """The words of the workspace ``folder``'s files other than its test files: the names the
    starting workspace gives a held-out case (eligibility.py's ``new_api``)."""
    skip = set(test_files)
    known: set[str] = set()
    for rel, p in workspace_paths(folder):
        if rel not in skip:
            known |= eligibility.words(p.read_text(encoding="utf-8", errors="replace"))
    return known


@dataclass(frozen=True)
class Screen:
    considered: list[str]  # the killing cases a split could hold out (test ids)
    why: dict[str, str]  # the ineligible ones: test id -> reason (eligibility.py)
    groups: list[set[str]]  # eligible twins of each other: held out together or not at all


def screen(
    failures: list[Failure],
    tests: dict[str, str],
    known: set[str],
    asserts: Mapping[str, int] | None,
    found: dict[str, list[dict]] | None = None,
    coverage: eligibility.Coverage | None = None,
) -> Screen:
    """Which of ``failures`` a split could hold out, and why each ineligible one may not be.
    ``tests``: every test file of the session's workspace; ``known``: the words of its non-test
    files; ``asserts``: passing assertions per test id on the reference; ``found``: all_cases of
    ``tests`` when the caller has it already; ``coverage``: the changed lines cases execute
    (harness/authoring/coverage.py; None: the ``uncovered`` rule is not applied)."""
    found = all_cases(tests) if found is None else found
    plain = _plain(found)
    considered = [
        f"{x.test_file}::{x.test}" for x in failures[1:] if (x.test_file, x.test) in plain
    ]
    cases = eligibility.cases_of(found, tests)
    why = eligibility.screen(considered, cases, asserts, known, coverage)
    eligible = [t for t in considered if t not in why]
    return Screen(considered, why, eligibility.groups(eligible, cases))


@dataclass(frozen=True)
class Split:
    patch: list[dict]  # patch entries after the mutant's: each cuts one held-out case
    stripped: dict[str, str]  # test file -> its text with the held-out cases cut
    whole: dict[str, str]  # test file -> its whole text: the held-out folder's files
    held: list[str]  # the held-out test ids
    first: Failure  # the instruction's failure, its line as in the cut file


def split(
    failures: list[Failure],
    texts: dict[str, str],
    rng: random.Random,
    ineligible: Mapping[str, str] | None = None,
    together: Iterable[set[str]] = (),
) -> Split | str:
    """The split of ``failures`` (the killing cases, the instruction's first) over the test files'
    ``texts``, or why there is none; no case of ``ineligible`` (screen's ``why``) is held out, and
    each group of ``together`` (screen's ``groups``) is held out whole or not at all."""
    if len(failures) < 2:
        return "one_killing_case"
    first = failures[0]
    cases = test_cases({f: texts[f] for f in sorted({x.test_file for x in failures})})
    plain = _plain(cases)
    candidates = [x for x in failures[1:] if (x.test_file, x.test) in plain]
    ids = {_tid(x) for x in candidates}
    why = {tid: r for tid, r in (ineligible or {}).items() if tid in ids}
    if candidates and len(why) == len(candidates):
        return eligibility.none_held(why)
    candidates = [x for x in candidates if _tid(x) not in why]
    want = min(len(failures) // 2, len(candidates))
    if want == 0:
        return "no_plain_case_to_hold_out"
    # Every cut file keeps a test case: Jest fails a test file with none ("Your test suite must
    # contain at least one test"), which no fix could make pass.
    left = {f: len(found) for f, found in cases.items()}
    group = {tid: set(g) for g in together for tid in g}
    chosen: list[Failure] = []
    for x in rng.sample(candidates, len(candidates)):
        g = [y for y in candidates if _tid(y) in group.get(_tid(x), {_tid(x)})]
        if x in chosen or len(g) != len(group.get(_tid(x), g)) or len(chosen) + len(g) > want:
            continue
        need = Counter(y.test_file for y in g)
        if all(left[f] - n >= 1 for f, n in need.items()):
            for f, n in need.items():
                left[f] -= n
            chosen += g
    if not chosen:
        return "no_case_leaves_its_file_a_test"
    chosen.sort(key=lambda x: (x.test_file, x.test))
    stripped = dict(texts)
    patch = []
    shift = 0
    for x in chosen:
        c = plain[(x.test_file, x.test)]
        cut = texts[x.test_file][c["start"] : c["end"]]
        if stripped[x.test_file].count(cut) != 1:
            return "case_text_not_unique"
        stripped[x.test_file] = stripped[x.test_file].replace(cut, "", 1)
        patch.append({"file": x.test_file, "old": cut, "new": ""})
        if (
            x.test_file == first.test_file
            and texts[x.test_file][: c["start"]].count("\n") < first.line - 1
        ):
            shift += cut.count("\n")
    files = sorted({x.test_file for x in chosen})
    return Split(
        patch,
        {f: stripped[f] for f in files},
        {f: texts[f] for f in files},
        [_tid(x) for x in chosen],
        replace(first, line=max(1, first.line - shift)),
    )


def split_measured(
    failures: list[Failure],
    texts: dict[str, str],
    rng: random.Random,
    sc: Screen,
    measured: Mapping[str, Any],
) -> tuple[Split | str, int]:
    """``split`` under the screen ``sc`` where the coverage row ``measured`` (coverage.measured's)
    allows one, and how many candidates went unmeasured. Build and mine both split through here: a
    session whose candidates' coverage was not measured holds none out (eligibility.NOT_MEASURED),
    as one of them could execute a changed line no visible case executes."""
    unknown = measured["candidates"] if measured["coverage"] == "not_measured" else 0
    if unknown:
        return eligibility.NOT_MEASURED, unknown
    return split(failures, texts, rng, sc.why, sc.groups), 0


def _tid(x: Failure) -> str:
    return f"{x.test_file}::{x.test}"
