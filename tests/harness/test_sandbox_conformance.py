"""One conformance suite, run against every registered sandbox implementation."""

from __future__ import annotations

import json

import pytest

from harness import sandbox, tools
from harness.errors import InputError
from harness.sandbox import Status, ToolFailure

pytestmark = pytest.mark.docker


@pytest.fixture(params=sandbox.names())
def sb(request, project, image):
    kw = {"image": image} if request.param == "docker" else {}
    s = sandbox.start(request.param, project, limits=sandbox.Limits(timeout_s=20), **kw)
    yield s
    s.close()


def test_registry_knows_docker_and_local():
    assert {"docker", "local"} <= set(sandbox.names())


def test_unknown_implementation_is_an_input_error(project):
    with pytest.raises(InputError, match="unknown sandbox 'nope'; known: docker, local"):
        sandbox.start("nope", project)


def test_lists_test_files_of_pristine_workspace(sb):
    assert sorted(sb.test_files) == ["tests/str.test.js", "tests/sum.test.js"]


def test_exec_captures_output_and_exit_code(sb):
    r = sb.exec(["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (r.status, r.exit_code, r.stdout, r.stderr) == (Status.FAILED, 3, "out\n", "err\n")
    ok = sb.exec(["cat"], stdin=b"piped")
    assert (ok.status, ok.stdout) == (Status.PASSED, "piped")


def test_exec_deadline_kills_the_process_group(sb):
    r = sb.exec(["sh", "-c", "sleep 30 & sleep 30; echo never"], timeout=0.5)
    assert r.status == Status.TIMEOUT and "never" not in r.stdout
    # Both sleeps are gone (the background one too), rather than "it returned quickly".
    ps = sb.exec(["sh", "-c", "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done"])
    assert ps.status == Status.PASSED and "sleep 30" not in ps.stdout
    assert "/proc/[0-9]*" in ps.stdout, "the listing saw processes (its own shell at least)"
    assert sb.exec(["true"]).status == Status.PASSED  # the sandbox lives on


def test_exec_output_cap(sb):
    r = sb.exec(["sh", "-c", "yes flood"], output_cap=10_000, timeout=10)
    assert r.status == Status.OUTPUT_LIMIT and r.truncated
    assert len(r.stdout) + len(r.stderr) <= 10_000


def test_files_round_trip_and_workspace_confinement(sb):
    sb.write_file("notes/new.txt", b"hello \xff")
    assert sb.read_file("notes/new.txt") == b"hello \xff"
    for bad in ("../outside", "/etc/passwd", "notes/../../x"):
        with pytest.raises(ToolFailure, match="leaves the workspace"):
            sb.read_file(bad)
    with pytest.raises(ToolFailure, match="no such file"):
        sb.read_file("missing.js")


def test_jest_reports_pass_fail_and_location(sb):
    r = tools.call(sb, "jest_run", {})
    assert r.status == "failed"
    assert (r.data["num_passed"], r.data["num_failed"], r.data["num_total"], r.data["num_test_files"]) == (2, 1, 3, 2)
    [f] = r.data["failed_tests"]
    assert f["name"] == "shouts" and f["file"] == "tests/str.test.js"
    assert f["location"] == {"file": "tests/str.test.js", "line": 2, "column": 44}
    assert "toBe" in f["message"]


def test_edit_is_picked_up_by_warm_jest(sb):
    assert tools.call(sb, "jest_run", {"test_file": "tests/str.test.js"}).status == "failed"
    e = tools.call(sb, "file_edit", {"file": "src/str.js", "old": "toLowerCase", "new": "toUpperCase"})
    assert e.ok and e.data["line"] == 2
    r = tools.call(sb, "jest_run", {"test_file": "tests/str.test.js"})
    assert (r.status, r.data["num_passed"], r.data["num_test_files"]) == ("passed", 1, 1)
    diff = tools.call(sb, "git_diff", {}).data["output"]
    assert "-  return s.toLowerCase() + '!';" in diff and "+  return s.toUpperCase() + '!';" in diff
    assert tools.call(sb, "git_status", {}).data["output"].strip() == "M src/str.js"


ISOLATION = {
    # changes its own expect and global object; a later file (or run) in the same warm host must not see them
    "tests/a.test.js": "expect.extend({ toBeLeaky: () => ({ pass: true, message: () => '' }) });\n"
                       "globalThis.LEAK = 1;\n"
                       "test('a', () => expect(1).toBeLeaky());\n",
    "tests/b.test.js": "test('b', () => {\n  expect(expect(1).toBeLeaky).toBeUndefined();\n"
                       "  expect(globalThis.LEAK).toBeUndefined();\n});\n"
                       "test('inline snapshot', () => expect({ a: 1 }).toMatchInlineSnapshot(`\n{\n  \"a\": 1,\n}\n`));\n"
                       "test.each([[1, 2], [2, 3]])('each %i', (x, y) => expect(x + 1).toBe(y));\n",
    "tests/c.test.js": "test('diff', () => expect({ n: [1, 2] }).toEqual({ n: [1, 3] }));\n",
}


def test_warm_jest_keeps_test_files_isolated(tmp_path, make_project, image):
    """The warm hosts share Jest's own compiled code between test files and runs (jest-warm.js); every
    test file must still get a fresh expect, fresh globals and working snapshot/each/diff machinery."""
    root = make_project(tmp_path / "iso", ISOLATION, jest_config={"randomize": True})
    for kind in sandbox.names():
        with sandbox.start(kind, root, **({"image": image} if kind == "docker" else {})) as s:
            for _ in range(2):  # the second round runs on hosts that already ran every file
                for f, want in (("tests/a.test.js", 1), ("tests/b.test.js", 4)):
                    r = tools.call(s, "jest_run", {"test_file": f})
                    assert (kind, r.status, r.data["num_passed"]) == (kind, "passed", want), r.data
                r = tools.call(s, "jest_run", {})
                assert (kind, r.data["num_passed"], r.data["num_failed"]) == (kind, 5, 1), r.data
                [f] = r.data["failed_tests"]
                assert "toEqual" in f["message"] and f["location"] == {"file": "tests/c.test.js", "line": 1, "column": 42}


def _raw_jest_report(s, timeout=60):
    """The warm hosts' whole report of a full run (jest_run keeps only each failure's first line)."""
    answer = s.request("jest", {"test_files": None, "name_pattern": None, "timeout_ms": timeout * 1000,
                                "output_cap": s.limits.output_cap}, timeout=timeout)
    return answer["report"]


def test_warm_jest_failure_messages_name_only_the_workspace(tmp_path, make_project, image):
    """A workspace file that does not compile (ESM in a CommonJS project) reads as in stock Jest: the
    message and its code frame name the test file, never the runner's own files."""
    root = make_project(tmp_path / "esm", {"tests/esm.test.js": "import x from './x';\ntest('x', () => {});\n"})
    for kind in sandbox.names():
        with sandbox.start(kind, root, **({"image": image} if kind == "docker" else {})) as s:
            for _ in range(2):
                [tr] = _raw_jest_report(s, timeout=20)["testResults"]
                msg = tr["failureMessage"]
                assert "Cannot use import statement outside a module" in msg, msg
                assert "jest-warm" not in msg and "jest-host" not in msg and "runner.js" not in msg, (kind, msg)


STOCK = {
    **ISOLATION,
    "tests/esm.test.js": "import x from './x';\ntest('x', () => {});\n",
    "src/api.js": "exports.get = () => 'real';\n",
    "src/__mocks__/api.js": "exports.get = () => 'mocked';\n",
    "src/parse.js": "exports.parse = (s) => s.trim().split(',').map(Number);\n",
    "tests/mock.test.js": "jest.mock('../src/api');\nconst api = require('../src/api');\n"
                          "test('manual mock', () => expect(api.get()).toBe('mocked'));\n"
                          "test('virtual', () => { jest.doMock('nowhere', () => 7, { virtual: true }); "
                          "expect(require('nowhere')).toBe(7); });\n",
    "tests/parse.test.js": "const { parse } = require('../src/parse');\n"
                           "test('throws', () => expect(parse(null)).toEqual([]));\n"
                           "test('snapshot', () => expect(parse(' 1,2')).toMatchInlineSnapshot(`\n[\n  1,\n  3,\n]\n`));\n",
}


def test_warm_jest_reports_what_stock_jest_reports(tmp_path, make_project, image):
    """Warm hosts (jest-warm.js, --shard) against a one-shot stock `jest --json` in the same container:
    the same tests, statuses and failure messages, byte for byte, on the second warm run too."""
    root = make_project(tmp_path / "stock", STOCK)
    with sandbox.start("docker", root, image=image) as s:
        stock = s.exec(["node", "/opt/etai/node_modules/jest/bin/jest.js", "--ci", "--json", "--silent"], timeout=60)
        report = json.loads(stock.stdout)
        want = {(r["name"].removeprefix("/scratch/ws/"), t["fullName"], t["status"], tuple(t["failureMessages"]))
                for r in report["testResults"] for t in r["assertionResults"]}
        want_files = {r["name"].removeprefix("/scratch/ws/"): r["message"] for r in report["testResults"]}
        assert len(want) == 10 and report["numFailedTests"] == 3 and report["numRuntimeErrorTestSuites"] == 1
        for _ in range(2):
            report = _raw_jest_report(s)
            got = {(r["file"], t["name"], t["status"], tuple(t["failureMessages"]))
                   for r in report["testResults"] for t in r["tests"]}
            assert got == want
            got_files = {r["file"]: r["failureMessage"] or "" for r in report["testResults"]}
            assert got_files == want_files


def test_name_pattern_narrows_the_run(sb):
    r = tools.call(sb, "jest_run", {"name_pattern": "negatives"})
    assert (r.status, r.data["num_passed"]) == ("passed", 1)


def test_close_is_idempotent(project, image):
    for kind in sandbox.names():
        s = sandbox.start(kind, project, **({"image": image} if kind == "docker" else {}))
        s.close()
        s.close()
        assert tools.call(s, "file_read", {"file": "package.json"}).status == "infra_error"


def test_a_run_split_between_warm_hosts_reports_every_test_once(tmp_path, make_project, image):
    files = {f"tests/t{i}.test.js": f"test('t{i} a', () => expect({i}).toBe({i}));\n"
                                    f"test('t{i} b', () => expect({i}).toBe({i if i != 3 else -1}));\n"
             for i in range(5)}
    root = make_project(tmp_path / "five", files)
    for kind in sandbox.names():
        with sandbox.start(kind, root, **({"image": image} if kind == "docker" else {})) as s:
            r = tools.call(s, "jest_run", {})
        assert (r.status, r.data["num_test_files"], r.data["num_total"], r.data["num_failed"]) == ("failed", 5, 10, 1)
        assert sorted(r.data["passed_tests"]) == sorted(
            f"tests/t{i}.test.js::t{i} {x}" for i in range(5) for x in "ab" if (i, x) != (3, "b"))
        assert [f["name"] for f in r.data["failed_tests"]] == ["t3 b"]
