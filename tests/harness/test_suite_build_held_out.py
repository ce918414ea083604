"""harness/authoring/build/held_out.py and testcases.js: which killing cases a built session holds out,
cut out of their test files by text. Runs the host's node on the runner's @babel/parser (no
sandbox); the build's end-to-end use is in test_suite_build_e2e.py."""

from __future__ import annotations

import random

from harness.authoring.build.compose import Failure
from harness.authoring.build.held_out import split
from harness.authoring.build.held_out import test_cases as find_cases

TEXT = """'use strict';
const { f } = require('../src/f');

describe('f', () => {
  test('one', () => {
    expect(f(1)).toBe(2);
  });

  it(`two`, () => expect(f(2)).toBe(3));

  describe('nested', () => {
    test('three', () => {
      expect(f(3)).toBe(4);
    });
  });

  test.each([[4, 5]])('each %i', (a, b) => expect(f(a)).toBe(b));
  test('dup', () => {});
  test('dup', () => {});
  const name = 'dyn';
  test(name, () => {});
  for (const n of [5]) test(`loop ${n}`, () => {});
});

test('top', () => expect(f(0)).toBe(1));
"""


def test_plain_cases_with_full_names_and_whole_line_spans():
    found = find_cases({"t.test.js": TEXT})["t.test.js"]
    names = [c["name"] for c in found]
    assert names == ["f one", "f two", "f nested three", "f dup", "f dup", "top"]
    one = found[0]
    cut = TEXT[one["start"] : one["end"]]
    assert cut == "  test('one', () => {\n    expect(f(1)).toBe(2);\n  });\n"
    assert (
        TEXT[found[-1]["start"] : found[-1]["end"]] == "test('top', () => expect(f(0)).toBe(1));\n"
    )


def _failure(name: str, line: int = 1) -> Failure:
    return Failure("t.test.js", name, "boom", line, 5)


def test_split_holds_out_half_never_the_named_case_and_cuts_by_text():
    top = TEXT.splitlines().index("test('top', () => expect(f(0)).toBe(1));") + 1
    failures = [_failure("top", top), _failure("f one"), _failure("f two"), _failure("f dup")]
    got = split(failures, {"t.test.js": TEXT}, random.Random(0))
    assert not isinstance(got, str)
    # four killing cases: two held out, chosen among the plain, uniquely named ones but the first
    assert len(got.held) == 2 and set(got.held) <= {"t.test.js::f one", "t.test.js::f two"}
    assert got.whole == {"t.test.js": TEXT}
    cut = got.stripped["t.test.js"]
    assert "test('one'" not in cut and "it(`two`" not in cut and "test('top'" in cut
    applied = TEXT
    for p in got.patch:
        assert applied.count(p["old"]) == 1 and p["new"] == ""
        applied = applied.replace(p["old"], "", 1)
    assert applied == cut
    # the instruction's case moved up by the lines cut above it
    removed = TEXT.count("\n") - cut.count("\n")
    assert got.first.test == "top" and got.first.line == top - removed
    assert cut.splitlines()[got.first.line - 1].startswith("test('top'")


def test_no_split_for_one_case_or_none_that_can_be_cut():
    assert split([_failure("f one")], {"t.test.js": TEXT}, random.Random(0)) == "one_killing_case"
    dyn = [_failure("f one"), _failure("f dup"), _failure("f each 4")]
    assert split(dyn, {"t.test.js": TEXT}, random.Random(0)) == "no_plain_case_to_hold_out"


def test_a_cut_file_keeps_a_test_case():
    # Jest fails a test file left with no test, whatever the fix: luhn.spec.js of a
    # fastest-validator build lost both its cases and its session could never be green
    one = "test('a', () => expect(1).toBe(2));\n"
    two = one + "test('b', () => expect(1).toBe(2));\n"
    texts = {"x.test.js": two, "y.test.js": one, "z.test.js": two}
    failures = [
        Failure("z.test.js", "a", "boom", 1, 5),
        Failure("x.test.js", "a", "boom", 1, 5),
        Failure("x.test.js", "b", "boom", 2, 5),
        Failure("y.test.js", "a", "boom", 1, 5),
    ]
    for seed in range(20):
        got = split(failures, texts, random.Random(seed))
        assert not isinstance(got, str)
        # two to hold out: one of x's (never both), and never y's only case
        assert len(got.held) == 1 and got.held[0].startswith("x.test.js::")
        assert all("test(" in t for t in got.stripped.values())
    only = [Failure("y.test.js", "a", "boom", 1, 5), Failure("y.test.js", "a", "boom", 1, 5)]
    assert split(only, {"y.test.js": one}, random.Random(0)) == "no_case_leaves_its_file_a_test"
