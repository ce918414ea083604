"""harness/authoring/coverage.py's ``run``: the image's Jest, started as a graded run's host starts
it, measures the changed lines of a small hand-written project in a real Docker sandbox. Two
projects that it could not measure when it ran `node jest/bin/jest.js <options>`: a test that
parses its process's argv (as commander's `program.parse()` without arguments does) and exits on
an option it does not know, and a workspace with a Jest of its own installed, to which Jest's bin
hands the run (redux 4's Jest 24 reported no coverage of its files)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from harness.authoring import coverage
from harness.sandbox import Limits, close_quietly, provider

sys.path.insert(0, str(Path(__file__).parent))  # the helper modules beside this file
from test_suite_mine_coverage import FIXED as CALC  # noqa: E402  (half, and label with a unit)

pytestmark = [pytest.mark.docker]

CHANGED = {"lib/calc.js": {2, 6, 7}}
# As commander's parse(): the arguments after the script are the program's options, and an
# unknown one ends the process (commander's _exit calls process.exit).
TESTS = """const { half, label } = require('../lib/calc');

function parseArgv() {
  const opts = process.argv.slice(2);
  if (opts.length) {
    console.error(`error: unknown option '${opts[0]}'`);
    process.exit(1);
  }
  return opts;
}

test('halves four', () => expect(half(4)).toBe(2));
test('parses its argv', () => expect(parseArgv()).toEqual([]));
test('labels with a unit', () => expect(label(3, 'kg')).toBe('3 kg'));
"""
ARGV_CASE = "test/calc.test.js::parses its argv"
# A stand-in for a project's own older Jest under node_modules (installing a real Jest 24 needs
# the registry, which tests do not reach): Jest's bin (jest/bin/jest.js, through import-local)
# would run it instead of the image's Jest. It writes no report.
OWN_JEST = "console.log('the workspace\\'s own jest'); process.exit(1);\n"


def _measure(tmp_path: Path, make_project, image: str, tests: str, node_modules: Path | None):
    ws = make_project(tmp_path / "ws", {"lib/calc.js": CALC, "test/calc.test.js": tests})
    nm = str(node_modules) if node_modules else None
    limits = Limits(memory_mb=1024, timeout_s=60, node_modules=nm)
    sb = provider("docker").start(ws, limits=limits, image=image)
    try:
        files = ["test/calc.test.js"]
        visible = coverage.run(sb, CHANGED, files, coverage.pattern(["labels with a unit"], exclude=True), 60)  # fmt: skip
        unit = coverage.run(sb, CHANGED, files, coverage.pattern(["labels with a unit"]), 60)
    finally:
        close_quietly(sb)
    return visible, unit


def _check(visible, unit, others: set[str]):
    lines, ran = visible
    assert ran == {"test/calc.test.js::halves four", *others}, ran
    assert lines == {"lib/calc.js:2"}, lines  # `if (unit)` is line 6: label never ran
    lines, ran = unit
    assert ran == {"test/calc.test.js::labels with a unit"}, ran
    assert lines == {"lib/calc.js:6", "lib/calc.js:7"}, lines


def test_a_test_that_reads_its_argv_sees_no_jest_option(tmp_path, make_project, image):
    _check(*_measure(tmp_path, make_project, image, TESTS, None), {ARGV_CASE})


def test_the_image_jest_runs_whatever_jest_the_workspace_installs(tmp_path, make_project, image):
    nm = tmp_path / "node_modules"
    (nm / "jest" / "bin").mkdir(parents=True)
    (nm / "jest" / "package.json").write_text(json.dumps({"name": "jest", "version": "24.8.0"}))
    (nm / "jest" / "bin" / "jest.js").write_text(OWN_JEST)
    tests = TESTS.replace("test('parses its argv'", "test.skip('parses its argv'")
    _check(*_measure(tmp_path, make_project, image, tests, nm), set())
