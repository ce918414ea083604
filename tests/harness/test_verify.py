"""verify.py's pure parts: the gold record of a reference run, its rule, and the protected set
(which must agree with the guard's, in recipe/runner/guard.js)."""

from __future__ import annotations

import json
import subprocess

from harness import image
from harness.jest import TestOutcome
from harness.verify import Gold, _gold_problem, is_protected, protected_paths

F = "tests/a.test.js"


def t(name: str, status: str = "passed", asserts: int = 2, file: str = F) -> TestOutcome:
    return TestOutcome(file, name, status, asserts)


def test_gold_takes_tests_passing_in_every_run_with_their_fewest_assertions():
    runs = [[t("x", asserts=3), t("y", asserts=2), t("y", asserts=5), t("flaky"), t("other", file="tests/b.test.js")],
            [t("x", asserts=2), t("y", asserts=4), t("y", asserts=5), t("flaky", "failed")]]
    gold = Gold.from_outcomes(runs, [F])
    assert dict(gold.tests) == {f"{F}::x": (1, 2), f"{F}::y": (2, 2)}
    assert Gold.from_json(gold.to_json()) == gold and Gold.from_json(None) is None


def test_gold_rule_names_the_first_shortfall():
    gold = Gold({f"{F}::x": (1, 2), f"{F}::y": (2, 1)})
    ok = [t("x", asserts=2), t("y", asserts=1), t("y", asserts=9)]
    assert _gold_problem(gold, ok) is None
    assert _gold_problem(gold, [t("x", asserts=3), t("y", asserts=1), t("y")]) is None  # more is fine
    assert "passed with 0 passing assertion(s), the reference made 2" in _gold_problem(
        gold, [t("x", asserts=0), t("y"), t("y")])
    assert "1 test(s) with this name ran, the reference had 2" in _gold_problem(gold, [t("x"), t("y")])
    assert "3 test(s) with this name ran" in _gold_problem(gold, [t("x"), t("y"), t("y"), t("y")])
    assert _gold_problem(gold, [t("x", "pending"), t("y"), t("y")]) == f"{F}::x: pending"
    assert "0 test(s) with this name ran" in _gold_problem(gold, [t("y"), t("y")])
    assert _gold_problem(Gold({f"{F}::z": (1, 0)}), [t("z", asserts=0)]) is None  # no expect at all: allowed


PATHS = ["tests/a.test.js", "tests/helpers/data.json", "test/x.js", "spec/y.js", "src/__tests__/z.js",
         "src/__mocks__/api.js", "src/__snapshots__/a.snap", "lib/__fixtures__/f.txt", "src/a.test.js",
         "src/a.spec.ts", "package.json", "jest.config.js", "babel.config.cjs", ".babelrc", "src/.babelrc.json",
         "tsconfig.build.json", "src/a.js", "src/tests.js", "src/test/a.js", "node_modules/x/package.json",
         "lib/fixtures/data.json", "README.md", "src/testing.js"]


def test_protected_set_is_the_same_in_the_guard_and_in_verify():
    want = {p: is_protected(p) for p in PATHS}
    assert [p for p, v in want.items() if v] == PATHS[:16]
    script = (f"const g = require({json.dumps(str(image.RECIPE / 'runner' / 'guard.js'))});"
              f"console.log(JSON.stringify({json.dumps(PATHS)}.map((p) => g.isProtected('/w/' + p))));")
    out = subprocess.run(["node", "-e", script], capture_output=True, text=True, check=True,
                         env={"PATH": "/usr/local/bin:/usr/bin:/bin", "ETAI_WORKSPACE": "/w"}).stdout
    assert dict(zip(PATHS, json.loads(out))) == want


def test_protected_paths_add_the_listed_and_the_usual_config_names():
    got = protected_paths(["src/a.js", "tests/a.test.js"], ["setup/jest.setup.js"])
    assert "tests/a.test.js" in got and "setup/jest.setup.js" in got and "jest.config.js" in got
    assert "src/a.js" not in got
