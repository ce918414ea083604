"""harness/authoring/eligibility.py (with harness/grading/js/case-print.js, read through testcases.js): which
killing cases a suite may hold out. Runs the host's node on the runner's @babel/parser (no
sandbox); the rule through a real build is in test_suite_build_e2e.py."""

from __future__ import annotations

import random

from harness.authoring import eligibility
from harness.authoring.build.compose import Failure
from harness.authoring.build.held_out import all_cases, screen, split

JS = """'use strict';
const Validator = require('../lib/validator');
const v = new Validator();

describe('email', () => {
  it('checks values', () => {
    // the JavaScript original
    const check = v.compile({ type: 'email' });
    expect(check('a@b.c')).toEqual(true);
    expect(check(-1)).toEqual([{ type: 'string', actual: -1 }]);
  });
});
"""

# fastest-validator's TypeScript tests mirror its .js tests in this way: other imports, other
# local names, type annotations and `as` casts, other layout and comments.
TS = """import Validator, { RuleEmail } from '../../';

const v: Validator = new Validator();

describe('email (typescript)', () => {
  it('checks the values', (): void => {
    const validate = v.compile({ type: "email" } as RuleEmail);
    expect(validate("a@b.c")).toEqual(true);
    expect(validate(-1)).toEqual([{ type: "string", actual: -1 }]!);
  });
});
"""


def _cases(files: dict[str, str]) -> dict[str, eligibility.Case]:
    return {c.id: c for c in eligibility.cases_of(all_cases(files), files)}


def test_a_js_case_and_its_typescript_mirror_are_twins():
    got = _cases({"test/email.spec.js": JS, "test/ts/email.spec.ts": TS})
    js, ts = (
        got["test/email.spec.js::email checks values"],
        got["test/ts/email.spec.ts::email (typescript) checks the values"],
    )
    assert js.shape == ts.shape and js.literals == ts.literals
    assert js.literals == ('s"email"', 's"a@b.c"', "btrue", "n-1", 's"string"', "n-1")
    assert eligibility.is_twin(js, ts)
    assert eligibility.twins([js.id], got.values()) == {js.id}
    # the API it uses: `compile` on a value made from the required module
    assert js.api == frozenset({"compile"}) == ts.api


def _one(body: str, name: str = "t.test.js") -> eligibility.Case:
    text = f"const {{ f, g, h }} = require('../src/f');\ntest('x', () => {{\n{body}\n}});\n"
    (case,) = eligibility.cases_of(all_cases({name: text}), {name: text})
    return case


def test_the_same_shape_with_other_literals_is_not_a_twin():
    a = _one("expect(f(1, 'a')).toBe(2);")
    b = _one("expect(f(3, 'a')).toBe(2);")
    assert a.shape != b.shape and a.literals != b.literals
    assert not eligibility.is_twin(a, b)
    # other literals in another order are not the same inputs either
    assert not eligibility.is_twin(_one("expect(f(1)).toBe(2);"), _one("expect(f(2)).toBe(1);"))


def test_the_same_literals_in_another_shape_are_twins():
    # code keyed on the inputs 1 -> 2 passes both
    a = _one("expect(f(1)).toBe(2);")
    b = _one("const got = f(1);\nexpect(got).toEqual(2);")
    assert a.shape != b.shape and eligibility.is_twin(a, b)


def test_literal_free_cases_are_twins_only_by_shape():
    calls_f = _one("expect(f()).toBeTruthy();")
    calls_g = _one("expect(g()).toBeTruthy();")
    assert calls_f.literals == calls_g.literals == ()
    assert not eligibility.is_twin(calls_f, calls_g)  # no literal at all: not twins by literals
    # the same calls with other local names and comments: twins by shape
    a = _one("const made = h();\nexpect(made).toBeTruthy();")
    b = _one("// again\nconst other = h();   expect(other).toBeTruthy();")
    assert eligibility.is_twin(a, b)


def test_cases_the_split_cannot_cut_are_listed_for_the_twin_rule():
    text = (
        "const { f } = require('../src/f');\n"
        "test.each([[1, 2]])('each %i', (a, b) => expect(f(a)).toBe(b));\n"
        "for (const n of [5]) test(`loop ${n}`, () => expect(f(5)).toBe(6));\n"
        "test('plain', () => expect(f(5)).toBe(6));\n"
    )
    got = eligibility.cases_of(all_cases({"t.test.js": text}), {"t.test.js": text})
    assert [c.id for c in got if "@" not in c.id] == ["t.test.js::plain"]
    assert len(got) == 3
    # the plain case has a twin in the loop's case
    assert eligibility.twins(["t.test.js::plain"], got) == {"t.test.js::plain"}


TWINS = """const { f, added } = require('../src/f');
test('first', () => expect(f(1)).toBe(2));
test('twin', () => expect(f(1)).toBe(2));
test('twin again', () => { expect(f(1)).toBe(2); });
test('asserts nothing', () => { f(7); });
test('copies it', () => { expect(f(7)).toBeDefined(); });
test('new api', () => expect(added(3)).toBe(4));
test('fine', () => expect(f(5)).toBe(6));
"""
NAMES = ("first", "twin", "twin again", "asserts nothing", "copies it", "new api", "fine")


def test_screen_gives_each_ineligible_case_its_reason():
    failures = [Failure("t.test.js", n, "boom", 1, 1) for n in NAMES]
    asserts = {f"t.test.js::{x.test}": 1 for x in failures} | {"t.test.js::asserts nothing": 0}
    known = {"f", "module", "exports"}  # the source's words: no `added`
    sc = screen(failures, {"t.test.js": TWINS}, known, asserts)
    assert sc.considered == [f"t.test.js::{x.test}" for x in failures[1:]]
    # the twins of the instruction's case; a twin of a vacuous case, which stays visible
    assert sc.why == {
        "t.test.js::twin": "twin",
        "t.test.js::twin again": "twin",
        "t.test.js::asserts nothing": "vacuous",
        "t.test.js::copies it": "twin",
        "t.test.js::new api": "new_api",
    }
    assert eligibility.counts(len(sc.considered), sc.why, 1) == {
        "considered": 6,
        "twin": 3,
        "vacuous": 1,
        "new_api": 1,
        "uncovered": 0,
        "coverage_unknown": 0,
        "held_out": 1,
    }
    # the split holds out only the eligible case
    for seed in range(10):
        got = split(failures, {"t.test.js": TWINS}, random.Random(seed), sc.why, sc.groups)
        assert not isinstance(got, str) and got.held == ["t.test.js::fine"]
    # with `added` in the source it is eligible; without assertion counts, nothing is vacuous
    sc = screen(failures, {"t.test.js": TWINS}, known | {"added"}, None)
    assert set(sc.why.values()) == {"twin"}


def test_candidates_twin_only_of_each_other_are_held_out_together_or_not_at_all():
    # a commit that adds a case and its mirror: holding out both leaves no visible twin
    text = (
        "const { f } = require('../src/f');\n"
        "test('first', () => expect(f(0)).toBe(1));\n"
        "test('js', () => expect(f(5)).toBe(6));\n"
        "test('ts', () => {\n  const got: number = f(5);\n  expect(got).toBe(6);\n});\n"
        "test('other', () => expect(f(7)).toBe(8));\n"
        "test('more', () => expect(f(9)).toBe(10));\n"
    )
    texts = {"t.test.ts": text}
    failures = [
        Failure("t.test.ts", n, "boom", 1, 1) for n in ("first", "js", "ts", "other", "more")
    ]
    sc = screen(failures, texts, {"f"}, None)
    assert sc.why == {} and sc.groups == [{"t.test.ts::js", "t.test.ts::ts"}]
    both = 0
    for seed in range(20):
        got = split(failures, texts, random.Random(seed), sc.why, sc.groups)
        assert not isinstance(got, str) and len(got.held) <= 2
        assert ("t.test.ts::js" in got.held) == ("t.test.ts::ts" in got.held), got.held
        both += "t.test.ts::js" in got.held
    assert 0 < both < 20


def test_a_name_a_visible_case_uses_is_known():
    # `added` is only the fix's, but the instruction's case (always visible) calls it: a held-out
    # case calling it too asks for nothing the visible tests do not
    text = (
        "const { added } = require('../src/f');\n"
        "test('first', () => expect(added(1)).toBe(2));\n"
        "test('second', () => expect(added(5)).toBe(6));\n"
    )
    failures = [Failure("t.test.js", n, "boom", 1, 1) for n in ("first", "second")]
    assert screen(failures, {"t.test.js": text}, set(), None).why == {}
    # a name only other candidates use is not known: they may all be held out
    text = (
        "const { f, added } = require('../src/f');\n"
        "test('first', () => expect(f(1)).toBe(2));\n"
        "test('second', () => expect(added(5)).toBe(6));\n"
        "test('third', () => expect(added(7)).toBe(8));\n"
    )
    failures = [Failure("t.test.js", n, "boom", 1, 1) for n in ("first", "second", "third")]
    why = screen(failures, {"t.test.js": text}, {"f"}, None).why
    assert why == {"t.test.js::second": "new_api", "t.test.js::third": "new_api"}


def test_a_session_whose_every_candidate_is_ineligible_says_why():
    failures = [Failure("t.test.js", n, "boom", 1, 1) for n in ("first", "twin", "twin again")]
    why = screen(failures, {"t.test.js": TWINS}, {"f"}, None).why
    assert why == {"t.test.js::twin": "twin", "t.test.js::twin again": "twin"}
    assert split(failures, {"t.test.js": TWINS}, random.Random(0), why) == "ineligible_twin"
    why["t.test.js::twin"] = "vacuous"
    assert split(failures, {"t.test.js": TWINS}, random.Random(0), why) == "ineligible_mixed"
    assert eligibility.total([eligibility.counts(2, why, 0), eligibility.counts(3, {}, 1)]) == {
        "considered": 5,
        "twin": 1,
        "vacuous": 1,
        "new_api": 0,
        "uncovered": 0,
        "coverage_unknown": 0,
        "held_out": 1,
    }


def test_only_the_projects_own_modules_give_api_names():
    # fastest-validator's objectID tests take ObjectId from mongodb: not an API the fix could add
    text = (
        "const ObjectId = require('mongodb').ObjectId;\n"
        "import { isHex } from 'some-package';\n"
        "const { f } = require('../src/f');\n"
        "test('x', () => expect(f(new ObjectId('a'), isHex)).toBe(ObjectId.length));\n"
    )
    (case,) = eligibility.cases_of(all_cases({"t.test.ts": text}), {"t.test.ts": text})
    assert case.api == frozenset({"f"})


# A commit that fixes f and adds a unit to g: f's lines 2, g's lines 6 and 7.
COVERED = """const { f, g } = require('../src/f');
test('first', () => expect(f(1)).toBe(2));
test('f again', () => expect(f(5)).toBe(6));
test('g with a unit', () => expect(g(3, 'kg')).toBe('3 kg'));
test('g twice with a unit', () => expect(g(4, 'm')).toBe('4 m'));
test('g copied', () => expect(g(3, 'kg')).toBe('3 kg'));
"""
COVERED_NAMES = ("first", "f again", "g with a unit", "g twice with a unit", "g copied")


def _coverage(visible: set[str], **of: set[str]) -> eligibility.Coverage:
    return eligibility.Coverage(
        frozenset(visible),
        {f"t.test.js::{k.replace('_', ' ')}": frozenset(v) for k, v in of.items()},
    )


def test_a_case_running_a_changed_line_no_visible_case_runs_is_uncovered():
    failures = [Failure("t.test.js", n, "boom", 1, 1) for n in COVERED_NAMES]
    tests = {"t.test.js": COVERED}
    cov = _coverage(
        {"f.js:2", "f.js:6"},  # the instruction's case, and a visible one that calls g bare
        f_again={"f.js:2"},
        g_with_a_unit={"f.js:6", "f.js:7"},
        g_twice_with_a_unit={"f.js:6", "f.js:7"},
        g_copied={"f.js:6", "f.js:7"},
    )
    sc = screen(failures, tests, {"f", "g"}, None, coverage=cov)
    # the g cases run line 7 alone: each is uncovered (the rule does not choose one to keep
    # visible so that the others could be held out)
    assert sc.why == {
        "t.test.js::g with a unit": "uncovered",
        "t.test.js::g twice with a unit": "uncovered",
        "t.test.js::g copied": "uncovered",
    }
    for seed in range(10):
        got = split(failures, tests, random.Random(seed), sc.why, sc.groups)
        assert not isinstance(got, str) and got.held == ["t.test.js::f again"]
    # coverage not known: the rule is not applied
    assert "uncovered" not in screen(failures, tests, {"f", "g"}, None).why.values()
    # a candidate the rules before make ineligible stays visible: its lines count as visible (and
    # its copy is a twin of a visible case)
    asserts = dict.fromkeys((f"t.test.js::{n}" for n in COVERED_NAMES), 1)
    asserts["t.test.js::g with a unit"] = 0
    sc = screen(failures, tests, {"f", "g"}, asserts, coverage=cov)
    assert sc.why == {"t.test.js::g with a unit": "vacuous", "t.test.js::g copied": "twin"}


def test_the_coverage_rule_does_not_depend_on_the_candidates_order():
    cases = [eligibility.Case(f"t::{n}", n, (n,), frozenset(), frozenset()) for n in "abcd"]
    cases.append(eligibility.Case("t::e", "b", ("e",), frozenset(), frozenset()))  # b's twin
    cov = eligibility.Coverage(
        frozenset({"x:1"}),
        {"t::b": frozenset({"x:1", "x:2"}), "t::c": frozenset({"x:2"}), "t::d": frozenset()},
    )
    # e, not measured, is a twin of b, which stays visible once uncovered
    want = {"t::b": "uncovered", "t::c": "uncovered", "t::e": "twin"}
    for order in (["t::b", "t::c", "t::d", "t::e"], ["t::e", "t::d", "t::c", "t::b"]):
        assert eligibility.screen(order, cases, None, set(), cov) == want
    # a candidate the measurement left out is not judged by the rule
    cov = eligibility.Coverage(frozenset({"x:1"}), {"t::b": frozenset({"x:2"})})
    got = eligibility.screen(["t::b", "t::c", "t::e"], cases, None, set(), cov)
    assert got == {"t::b": "uncovered", "t::e": "twin"}
    row = eligibility.counts(4, want, 1, unmeasured=2)
    assert row["uncovered"] == 2 and row["coverage_unknown"] == 2
    assert "uncovered 2; coverage not measured for 2" in eligibility.line(eligibility.total([row]))
