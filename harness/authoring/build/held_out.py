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
(`cut_breaks_a_visible_case`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from pathlib import Path

from harness.authoring.build.compose import Failure
from harness.authoring.build.mutants import parse_with

TESTCASES_JS = Path(__file__).with_name("testcases.js")


def test_cases(files: dict[str, str]) -> dict[str, list[dict]]:
    """Each test file's plain test cases: {name, start, end} (testcases.js)."""
    return parse_with(TESTCASES_JS, files)


@dataclass(frozen=True)
class Split:
    patch: list[dict]  # patch entries after the mutant's: each cuts one held-out case
    stripped: dict[str, str]  # test file -> its text with the held-out cases cut
    whole: dict[str, str]  # test file -> its whole text: the held-out folder's files
    held: list[str]  # the held-out test ids
    first: Failure  # the instruction's failure, its line as in the cut file


def split(failures: list[Failure], texts: dict[str, str], rng: random.Random) -> Split | str:
    """The split of ``failures`` (the killing cases, the instruction's first) over the test files'
    ``texts``, or why there is none."""
    if len(failures) < 2:
        return "one_killing_case"
    first = failures[0]
    cases = test_cases({f: texts[f] for f in sorted({x.test_file for x in failures})})
    plain: dict[tuple[str, str], dict] = {}
    for file, found in cases.items():
        names = [c["name"] for c in found]
        for c in found:
            if names.count(c["name"]) == 1:
                plain[(file, c["name"])] = c
    candidates = [x for x in failures[1:] if (x.test_file, x.test) in plain]
    want = min(len(failures) // 2, len(candidates))
    if want == 0:
        return "no_plain_case_to_hold_out"
    # Every cut file keeps a test case: Jest fails a test file with none ("Your test suite must
    # contain at least one test"), which no fix could make pass.
    left = {f: len(found) for f, found in cases.items()}
    chosen = []
    for x in rng.sample(candidates, len(candidates)):
        if len(chosen) < want and left[x.test_file] > 1:
            left[x.test_file] -= 1
            chosen.append(x)
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
        [f"{x.test_file}::{x.test}" for x in chosen],
        replace(first, line=max(1, first.line - shift)),
    )
