"""Test helpers outside the places tests are named by (runner/test-support.js), through a real
sandbox and real Jest: the helper that makes the assertions is protected like a test file, so an
agent that rewrites it to assert nothing is not green; the sources (an entry only the tests load,
a module of the sources that loads `assert`) stay the agent's to fix. Without the support listing,
``support_files`` is empty and the weakened helper passes every test (a false green)."""

from __future__ import annotations

import pytest

from harness.grading.verify import take_baseline, verify
from harness.sandbox import Limits

SPEC = "src/sum.spec.js"
FILES = {
    # the bug: sum subtracts
    "src/sum.js": "const { counted } = require('./util');\n"
    "exports.sum = (a, b) => counted(a - b);\n",
    # a source module that loads assert: the sources load it, so it is not the tests' code
    "src/util.js": "const assert = require('assert');\n"
    "exports.counted = (x) => { assert(typeof x === 'number'); return x; };\n",
    # the package's entry: only the tests load it, and it asserts nothing
    "src/index.js": "module.exports = require('./sum');\n",
    # the tests' helper, beside the sources: the assertion is made here
    "src/check.js": "exports.same = (got, want) => expect(got).toBe(want);\n",
    # a table of cases only the tests load: asserts nothing, not found (README's limit)
    "src/cases.js": "module.exports = [[1, 2, 3], [2, 2, 4]];\n",
    SPEC: "const { same } = require('./check');\nconst { sum } = require('./index');\n"
    "const cases = require('./cases');\n"
    "test.each(cases)('sum %i %i', (a, b, c) => same(sum(a, b), c));\n"
    "test('re.test is not the test API', () => same(/x/.test('x'), true));\n",
}
WEAK = "exports.same = (got, want) => expect(want).toBe(want);\n"
FIX = "const { counted } = require('./util');\nexports.sum = (a, b) => counted(a + b);\n"


@pytest.mark.docker
@pytest.mark.slow
def test_a_helper_that_asserts_is_protected_and_the_sources_are_not(tmp_path, make_project, image):
    from harness import sandbox, tools

    root = make_project(tmp_path / "support", FILES)
    sb = sandbox.start("docker", root, image=image, limits=Limits(memory_mb=512, timeout_s=30))
    try:
        assert sb.test_files == [SPEC]
        assert sb.support_files == ["src/check.js"]
        base = take_baseline(sb, sb.test_files)
        assert "src/check.js" in base.protected and "src/sum.js" not in base.protected
        assert base.passing == {f"{SPEC}::re.test is not the test API"}

        def write(path: str, text: str) -> None:
            assert tools.call(sb, "file_write", {"file": path, "content": text}).ok

        # the helper rewritten to assert nothing: every test passes, and the verdict is not green
        write("src/check.js", WEAK)
        assert tools.call(sb, "jest_run", {}).ok
        v = verify(sb, base, [SPEC])
        assert not v.green and v.checks == ["protected_files"], v.reason
        assert "src/check.js" in v.reason

        # the helper back as it was, the bug fixed in the sources: green
        write("src/check.js", FILES["src/check.js"])
        write("src/sum.js", FIX)
        v = verify(sb, base, [SPEC])
        assert v.green, v.reason
    finally:
        sb.close()


FORWARDED = {
    # Jest's graph covers `src` alone; the helper folder beside it is followed from the test
    "package.json": '{"name": "p", "version": "1.0.0", "jest": {"roots": ["<rootDir>/src"]}}\n',
    "support/check.js": "const { deep } = require('./deep');\nexports.same = (a, b) => deep(a, b);\n",
    "support/deep.js": "exports.deep = (got, want) => expect(got).toEqual(want);\n",
    "src/sum.js": FILES["src/sum.js"],
    "src/util.js": FILES["src/util.js"],
    SPEC: "const { same } = require('../support/check');\nconst { sum } = require('./sum');\n"
    "test('adds', () => same(sum(1, 2), 3));\n",
}


@pytest.mark.docker
@pytest.mark.slow
def test_a_helper_that_hands_the_assertion_on_is_protected_too(tmp_path, make_project, image):
    """A forwarder that asserts nothing itself, outside the config's `roots`, in front of the
    module that asserts: both are the tests' code, since an agent would empty the forwarder."""
    from harness import sandbox, tools

    root = make_project(tmp_path / "forwarded", FORWARDED)
    sb = sandbox.start("docker", root, image=image, limits=Limits(memory_mb=512, timeout_s=30))
    try:
        assert sb.support_files == ["support/check.js", "support/deep.js"]
        base = take_baseline(sb, sb.test_files)
        empty = "exports.same = () => {};\n"
        assert tools.call(sb, "file_write", {"file": "support/check.js", "content": empty}).ok
        v = verify(sb, base, [SPEC])
        assert not v.green and v.checks == ["protected_files"], v.reason
    finally:
        sb.close()


HELPER = (
    "exports.same = (got, want) => {\n"
    "  if (got === undefined) throw new Error('no value');\n"
    "  expect(got).toBe(want);\n"
    "};\n"
)
PROJECT = {
    "package.json": '{"name": "tiny", "version": "1.0.0", "private": true}\n',
    "package-lock.json": '{"name": "tiny", "version": "1.0.0", "lockfileVersion": 3, '
    '"requires": true, "packages": {"": {"name": "tiny", "version": "1.0.0"}}}\n',
    "src/sum.js": "exports.sum = (a, b) => a + b;\nexports.small = (x) => x < 10;\n",
    "src/check.js": HELPER,
    SPEC: "const { same } = require('./check');\nconst { sum, small } = require('./sum');\n"
    "test('adds', () => same(sum(1, 2), 3));\ntest('small', () => same(small(3), true));\n"
    "test('not small', () => same(small(12), false));\n",
}


@pytest.mark.docker
@pytest.mark.slow
def test_the_builder_puts_no_bug_in_a_helper(tmp_path, make_project, image):
    """`suite build` leaves the helper's sites out of its candidates: a session whose reference
    edits a protected file would be broken in every run."""
    import json

    from harness.authoring.build import mutants
    from harness.authoring.build.build import build
    from harness.authoring.build.options import BuildOptions

    root = make_project(tmp_path / "tiny", PROJECT)
    assert mutants.find({"src/check.js": HELPER})[0]  # the helper has sites a builder would try
    sources = mutants.find({"src/sum.js": PROJECT["src/sum.js"]})[0]
    summary = build(root, tmp_path / "out", BuildOptions(runs=1), progress=False)
    assert summary["candidates"] == len(sources) and summary["kept"] >= 1, summary
    rows = [json.loads(line) for line in (tmp_path / "out" / "mutants.jsonl").open()]
    assert rows and {r["file"] for r in rows} == {"src/sum.js"}
