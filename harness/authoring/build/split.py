"""A kept mutant's held-out split in the build's sandbox (held_out.py has the rule): the
candidates screened, their coverage measured where the mutant spans several lines, the split
chosen, and the cut files run on the fixed code before it is kept."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from harness.authoring import coverage, eligibility
from harness.authoring.box import Box, file_of, statuses
from harness.authoring.build import held_out, mutants
from harness.authoring.build.options import BuildOptions
from harness.runs.results import write_text_atomic


class Workspace:
    """What the eligibility rule reads of the base (the same for every session): its test files,
    their cases (parsed once, on first use) and the words of its other files."""

    def __init__(self, base: Path, test_files: list[str]):
        self.base, self.test_files = base, test_files
        self._found: tuple | None = None

    def read(self) -> tuple[dict[str, str], dict[str, list[dict]], set[str]]:
        if self._found is None:
            tests = {
                f: (self.base / f).read_text(encoding="utf-8", errors="replace")
                for f in self.test_files
            }
            known = held_out.known_words(self.base, tests)
            self._found = (tests, held_out.all_cases(tests), known)
        return self._found


def hold_out(
    box: Box,
    ws: Workspace,
    opts: BuildOptions,
    m: mutants.Mutant,
    failures: list,
    row: dict[str, Any],
    base: dict[str, Any],
    timeout: float,
) -> tuple[list, held_out.Split | None]:
    """The session's failures (the first one's line as in its cut file) and its split, if any;
    the row records which held-out cases, or why none (held_out.py has the rule)."""
    if opts.held_out != "split":
        return failures, None
    tests, found, known = ws.read()
    texts = {
        f: tests[f] if f in tests else (ws.base / f).read_text(encoding="utf-8")
        for f in sorted({x.test_file for x in failures})
    }
    sc = held_out.screen(failures, tests, known, base.get("asserts"), found)
    cov, measured = _coverage(box, ws, m, sorted(texts), sc, timeout)
    if cov is not None:
        sc = held_out.screen(failures, tests, known, base.get("asserts"), found, cov)
    # Seeded per mutant: the choice does not depend on which mutants were kept before it.
    rng = random.Random(f"{opts.seed}:{m.id}")
    got, unknown = held_out.split_measured(failures, texts, rng, sc, measured)
    if isinstance(got, str):
        row["held_out"] = {
            "why_none": got,
            "cases": eligibility.counts(len(sc.considered), sc.why, 0, unknown),
            **measured,
        }
        return failures, None
    broken = _cut_breaks(box, got, base, timeout)
    n = 0 if broken else len(got.held)
    cases = eligibility.counts(len(sc.considered), sc.why, n, unknown)
    if broken:
        row["held_out"] = {"why_none": "cut_breaks_a_visible_case", "broken": broken[:3]}
        row["held_out"].update(cases=cases, **measured)
        return failures, None
    row["held_out"] = {"tests": got.held, "cases": cases, **measured}
    return [got.first, *failures[1:]], got


def _coverage(
    box: Box, ws: Workspace, m: mutants.Mutant, files: list[str], sc: held_out.Screen, timeout
) -> tuple[eligibility.Coverage | None, dict[str, Any]]:
    """The Coverage of ``m``'s candidates that the other rules leave, when there is one to apply,
    and what the row says of its measurement. A mutant on one line needs none (eligibility.py's
    module doc: every killing case executes that line); one over several lines is measured on
    the base, the fixed code, as a mined fix is."""
    left = [t for t in sc.considered if t not in sc.why]
    text = (ws.base / m.file).read_text(encoding="utf-8")
    lines = coverage.span_lines(text, m.start, m.end)
    if not left or len(lines) == 1:
        return None, {"coverage": "one_line" if left else "no_candidate", "candidates": len(left)}
    return coverage.measured(box, {m.file: lines}, files, left, timeout)


def _cut_breaks(box: Box, cut: held_out.Split, base: dict[str, Any], timeout: float) -> list[str]:
    """The visible cases that fail on the fixed code once ``cut`` is applied (none for a sound cut).

    A cut case may set up what later cases use (fastest-validator's `it("should compile without
    error", () => { check = v.compile(...) })`, then cases that call `check`): without it those
    cases fail whatever the fix, and the session could never verify green. The source file is the
    base's here (``evaluate`` restored it)."""
    for f, t in cut.stripped.items():
        box.sb.write_file(f, t.encode())
    try:
        r, _ = box.jest(sorted(cut.stripped), timeout)
    finally:
        for f, t in cut.whole.items():
            box.sb.write_file(f, t.encode())
    held = set(cut.held)
    now = statuses(r)
    visible = [t for t in base["passing"] if file_of(t) in cut.stripped and t not in held]
    broken = [t for t in visible if now.get(t) != "passed"]
    if r.evidence != "nonce" or r.tamper or not now:
        return broken or [f"{f}::(test file failed to run)" for f in sorted(cut.stripped)]
    return broken


def write_held_out(folder: Path, cut: held_out.Split) -> None:
    for f, t in cut.whole.items():
        (folder / f).parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(folder / f, t)
