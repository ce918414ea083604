"""Why `etai suite mine` leaves a commit out (harness/authoring/mine/reasons.py): the first lines of
the error, and the grading guard named where it refused the code. A real sandbox on a tiny history;
the rule for a graded verdict on Jest-shaped records."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from harness.authoring.mine import reasons
from harness.cli import main
from harness.grading.verify import Verdict
from harness.sandbox import Status

sys.path.insert(0, str(Path(__file__).parent))  # the helper modules beside this file
from test_suite_mine_e2e import _git_project  # noqa: E402


@pytest.mark.docker
def test_a_fix_the_guard_refuses_says_it_was_the_guard(tmp_path, image, monkeypatch):
    """An ES5-style subclass of Map that overrides one of Map's own methods on its prototype
    (``get``: the guard accepts ``constructor`` and the other names of its override taming, not
    Map's methods) throws under the guard's frozen built-ins: the commit is left out as
    nothing_passes_at_commit, and the reason says the guard refused it and what it threw, not
    "Error:"."""
    repo, commit = _git_project(tmp_path, monkeypatch)
    cache, test = repo / "lib" / "cache.js", repo / "test" / "cache.test.js"
    commit("cache", {
        cache: "'use strict';\nmodule.exports = function Cache() { return {}; };\n",
        test: "const Cache = require('../lib/cache');\n\ntest('loads', () => expect(Cache).toBeTruthy());\n",
    })  # fmt: skip
    commit("fix: a cache is a map", {
        cache: "'use strict';\nfunction Cache() {\n  const m = new Map();\n"
        "  Object.setPrototypeOf(m, Cache.prototype);\n  return m;\n}\n"
        "Cache.prototype = Object.create(Map.prototype);\n"
        "Cache.prototype.get = function (k) { return Map.prototype.get.call(this, k); };\n"
        "module.exports = Cache;\n",
        test: "const Cache = require('../lib/cache');\n\n"
        "test('a cache is a map', () => expect(new Cache() instanceof Map).toBe(true));\n",
    })  # fmt: skip
    out = tmp_path / "mined"
    argv = ["suite", "mine", str(repo), "--out", str(out), "--range", "HEAD~1..HEAD"]
    assert main([*argv, "--src", "lib", "--runs", "1", "--no-progress"]) == 1
    (row,) = [json.loads(x) for x in (out / "commits.jsonl").read_text().splitlines()]
    assert row["verdict"] == "nothing_passes_at_commit", row
    assert row["why"].startswith(reasons.GUARD), row
    assert "Cannot assign to read only property 'get'" in row["why"], row


def test_a_graded_failure_names_each_test_with_its_error_and_the_guard_where_it_refused():
    failed = [{"file": "test/a.test.js", "name": "(test file failed to run)",
               "message": "\x1b[31mTypeError: x is not a function\x1b[39m"}]  # fmt: skip
    got = reasons.graded_failures(
        Verdict(False, "1 verification test(s) fail", Status.FAILED, failed)
    )
    assert got == {
        "why": "1 verification test(s) fail",
        "tests": ["test/a.test.js::(test file failed to run): TypeError: x is not a function"],
    }
    tampered = Verdict(False, "tampered: x", Status.TAMPERED, [], tamper=["a.js: wrote expect"])
    assert reasons.graded_failures(tampered)["why"] == reasons.GUARD + "a.js: wrote expect"


def test_the_first_error_lines_leave_out_headers_frames_and_colours():
    message = (
        "  \x1b[1m● Test suite failed to run\x1b[22m\n\n    Error:\n    ENOENT: no such file 'x'\n\n"
        "      1 | const x = require('x');\n\n      at Object.<anonymous> (test/a.test.js:1:1)\n"
    )
    assert reasons.error_lines(message) == "Error: / ENOENT: no such file 'x'"
    frozen = "TypeError: Cannot assign to read only property 'constructor' of object '#<Map>'"
    assert reasons.guarded(frozen).startswith(reasons.GUARD + frozen)
    assert reasons.guarded(
        "TypeError: Cannot assign to read only property 'a' of object '#<Foo>'"
    ) == ("TypeError: Cannot assign to read only property 'a' of object '#<Foo>'")


@pytest.mark.docker
def test_a_fix_of_a_hang_is_kept_with_the_hang_as_the_failure(tmp_path, image, monkeypatch):
    """A catastrophic regular expression hangs the parent's run past the per-run limit; the
    commit's runs end at once: the hang counts as the test's failure and the fix is kept, where it
    was left out as does_not_run (the sandbox's deadline is short here to keep the test small)."""
    from harness.authoring.mine.mine import mine
    from harness.authoring.mine.options import MineOptions

    repo, commit = _git_project(tmp_path, monkeypatch)
    is_a, test = repo / "lib" / "is-a.js", repo / "test" / "is-a.test.js"
    commit("is-a", {
        is_a: "module.exports = (s) => /^(a+)+$/.test(s);\n",
        test: "const isA = require('../lib/is-a');\n\ntest('aaa', () => expect(isA('aaa')).toBe(true));\n",
    })  # fmt: skip
    commit("fix: no catastrophic backtracking", {
        is_a: "module.exports = (s) => /^a+$/.test(s);\n",
        test: "const isA = require('../lib/is-a');\n\ntest('aaa', () => expect(isA('aaa')).toBe(true));\n"
        "test('rejects a long almost-match at once', () => {\n"
        "  expect(isA('a'.repeat(40) + 'b')).toBe(false);\n});\n",
    })  # fmt: skip
    opts = MineOptions(
        rev_range="HEAD~1..HEAD", src=("lib",), runs=1, timeout_s=12, test_timeout_s=4
    )
    summary = mine(repo, tmp_path / "mined", opts, progress=False)
    (row,) = [
        json.loads(x) for x in (tmp_path / "mined" / "commits.jsonl").read_text().splitlines()
    ]
    assert summary["kept"] == 1, row
    assert row["session"]["fail_to_pass"] == [
        "test/is-a.test.js::aaa",
        "test/is-a.test.js::rejects a long almost-match at once",
    ], row
    assert row["session"]["verify"] == {"test_files": ["test/is-a.test.js"]}, row
