"""verify.py's scoped graded runs through a real sandbox and real Jest (test_verify.py pins the
request on fakes): the files Jest's graph relates to a change, a regression reached through a
dependency of a dependency, a change to a file the tests read with fs (a whole run), and whole
mode. Without scoping, ``scoped`` is None and every test file runs: each assertion below fails."""

from __future__ import annotations

import pytest

from harness.grading.verify import take_baseline, verify
from harness.sandbox import Limits

LIMITS = Limits(memory_mb=512, timeout_s=30)


def _started(root, image):
    """The project at ``root`` in a real sandbox, closed when the ``with`` block ends."""
    from harness import sandbox

    return sandbox.start("docker", root, image=image, limits=LIMITS)


A_TEST = "tests/a.test.js"
FILES = {
    # the bug: double triples; b.js builds on a.js's triple, c.js on nothing
    "src/a.js": "exports.double = (x) => x * 3;\nexports.triple = (x) => x * 3;\n",
    "src/b.js": "const { triple } = require('./a');\nexports.nine = (x) => triple(triple(x));\n",
    "src/c.js": "exports.id = (x) => x;\n",
    "src/greeting.txt": "hello\n",
    A_TEST: "const { double } = require('../src/a');\n"
    "test('doubles', () => expect(double(2)).toBe(4));\n",
    "tests/b.test.js": "const { nine } = require('../src/b');\n"
    "test('nines', () => expect(nine(1)).toBe(9));\n",
    "tests/c.test.js": "const { id } = require('../src/c');\ntest('ids', () => expect(id(1)).toBe(1));\n",
    "tests/text.test.js": "const fs = require('fs');\nconst path = require('path');\n"
    "const text = () => fs.readFileSync(path.join(__dirname, '../src/greeting.txt'), 'utf8');\n"
    "test('greets', () => expect(text()).toBe('hello\\n'));\n",
}
FIX = "exports.double = (x) => x * 2;\nexports.triple = (x) => x * 3;\n"


@pytest.mark.docker
@pytest.mark.slow
def test_a_graded_run_runs_what_the_change_can_reach(tmp_path, make_project, image):
    from harness import tools

    root = make_project(tmp_path / "scope", FILES)
    with _started(root, image) as sb:
        base = take_baseline(sb, sb.test_files)
        assert len(base.passing) == 3 and f"{A_TEST}::doubles" not in base.passing
        whole = take_baseline(sb, sb.test_files, passing=base.passing, regression="whole")

        def write(path: str, text: str) -> None:
            assert tools.call(sb, "file_write", {"file": path, "content": text}).ok

        # the fix: a.test.js and b.test.js (through b.js) can see it, the other two cannot
        write("src/a.js", FIX)
        v = verify(sb, base, [A_TEST])
        assert (v.green, v.scoped) == (True, 2), v.reason
        assert {t.file for t in v.tests} == {A_TEST, "tests/b.test.js"}
        v = verify(sb, whole, [A_TEST])
        assert (v.green, v.scoped, len({t.file for t in v.tests})) == (True, None, 4)

        # a "fix" that breaks triple: b.test.js fails through b.js, a dependency's dependant
        write("src/a.js", "exports.double = (x) => x * 2;\nexports.triple = (x) => x;\n")
        v = verify(sb, base, [A_TEST])
        assert (v.green, v.checks, v.scoped) == (False, ["regression"], 2)

        # a file read with fs is not in Jest's graph: the run is whole and sees the regression
        write("src/a.js", FIX)
        write("src/greeting.txt", "bye\n")
        v = verify(sb, base, [A_TEST])
        assert (v.green, v.checks, v.scoped) == (False, ["regression"], None)
        assert "tests/text.test.js" in {f["file"] for f in v.failed_tests}


# The project narrows Jest's roots to its tests, which reach the code through files outside them:
# the top index.js (as fastest-validator's TypeScript tests do), a folder's index file, and a
# moduleNameMapper alias. A change under lib/ is reached by every one of these test files.
ROOTS = {
    "index.js": "module.exports = require('./lib/calc');\n",
    "lib/calc.js": "exports.add = (a, b) => a + b;\nexports.sub = (a, b) => a - b;\n",
    "pkg/index.js": "module.exports = require('../lib/calc').sub;\n",
    "lib/other.js": "exports.one = () => 1;\n",
    "test/top.test.js": "const { add } = require('..');\ntest('adds', () => expect(add(1, 2)).toBe(3));\n",
    "test/folder.test.js": "const sub = require('../pkg');\ntest('subs', () => expect(sub(3, 1)).toBe(2));\n",
    "test/alias.test.js": "const { add } = require('@calc');\n"
    "test('adds by alias', () => expect(add(2, 2)).toBe(4));\n",
    "test/other.test.js": "const { one } = require('../lib/other');\n"
    "test('ones', () => expect(one()).toBe(1));\n",
}
ROOTS_CONFIG = {
    "roots": ["<rootDir>/test"],
    "moduleNameMapper": {"^@calc$": "<rootDir>/lib/calc.js"},
}


@pytest.mark.docker
@pytest.mark.slow
def test_a_scoped_run_follows_what_jest_resolves_outside_its_roots(tmp_path, make_project, image):
    from harness import tools

    root = make_project(tmp_path / "roots", ROOTS, ROOTS_CONFIG)
    with _started(root, image) as sb:
        base = take_baseline(sb, sb.test_files)
        assert len(base.passing) == 4, base.passing
        # A regression in lib/calc.js: the verification file (other.test.js) does not see it, the
        # three test files that reach calc.js through index.js, pkg/ and the alias do.
        broken = "exports.add = (a, b) => a - b;\nexports.sub = (a, b) => a + b;\n"
        assert tools.call(sb, "file_write", {"file": "lib/calc.js", "content": broken}).ok
        v = verify(sb, base, ["test/other.test.js"])
        assert (v.green, v.checks, v.scoped) == (False, ["regression"], 4), (v.reason, v.scoped)
        failed = {f["file"] for f in v.failed_tests}
        assert failed == {"test/top.test.js", "test/folder.test.js", "test/alias.test.js"}, failed
        # The suite builder's runs of the tests related to a mutated file: the same three.
        answer = sb.request(
            "jest",
            {"related": ["lib/calc.js"], "timeout_ms": 60000, "output_cap": 1 << 20},
            timeout=90,
        )
        ran = {r["file"] for r in answer["report"]["testResults"]}
        assert ran == {"test/top.test.js", "test/folder.test.js", "test/alias.test.js"}, ran


# Modules loaded by a path the code builds, which Jest's graph cannot follow: a test that requires
# every file of a folder (dayjs's test/locale/keys.test.js), and a source module that loads a
# plugin by name (what tests reach through src/plugins.js).
COMPUTED = {
    "src/locale/en.js": "module.exports = { name: 'en', months: 12 };\n",
    "src/locale/eo.js": "module.exports = { name: 'eo', months: 12 };\n",
    "src/plugin/up.js": "module.exports = (s) => s.toUpperCase();\n",
    "src/plugins.js": "const path = require('path');\n"
    "module.exports = (name) => require(path.join(__dirname, 'plugin', name));\n",
    "src/one.js": "exports.one = () => 1;\n",
    "tests/keys.test.js": "const fs = require('fs');\nconst path = require('path');\n"
    "const dir = path.join(__dirname, '../src/locale');\n"
    "for (const f of fs.readdirSync(dir)) {\n"
    "  const l = require(path.join(dir, f));\n"
    "  test(`keys of ${f}`, () => expect(l.months).toBe(12));\n}\n",
    "tests/plugins.test.js": "const load = require('../src/plugins');\n"
    "test('up', () => expect(load('up')('a')).toBe('A'));\n",
    "tests/one.test.js": "const { one } = require('../src/one');\n"
    "test('one', () => expect(one()).toBe(1));\n",
}


@pytest.mark.docker
@pytest.mark.slow
def test_a_scoped_run_runs_every_test_that_loads_by_a_computed_path(tmp_path, make_project, image):
    from harness import tools

    root = make_project(tmp_path / "computed", COMPUTED)
    with _started(root, image) as sb:
        base = take_baseline(sb, sb.test_files)
        assert len(base.passing) == 4, base.passing
        # A regression in one locale: only keys.test.js sees it, through a require Jest cannot follow.
        write = {"file": "src/locale/eo.js", "content": "module.exports = { name: 'eo' };\n"}
        assert tools.call(sb, "file_write", write).ok
        v = verify(sb, base, ["tests/one.test.js"])
        assert (v.green, v.checks) == (False, ["regression"]), (v.reason, v.scoped)
        assert {f["file"] for f in v.failed_tests} == {"tests/keys.test.js"}
        # A regression in a plugin that src/plugins.js loads by name.
        assert tools.call(sb, "file_write", {**write, "content": COMPUTED["src/locale/eo.js"]}).ok
        broken = {"file": "src/plugin/up.js", "content": "module.exports = (s) => s;\n"}
        assert tools.call(sb, "file_write", broken).ok
        v = verify(sb, base, ["tests/one.test.js"])
        assert (v.green, v.checks) == (False, ["regression"]), (v.reason, v.scoped)
        assert {f["file"] for f in v.failed_tests} == {"tests/plugins.test.js"}
        # Still scoped: one.test.js and the two that load by computed paths, not more.
        assert v.scoped == 3, v.scoped
