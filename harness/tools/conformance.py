"""The sandbox conformance checks: what every backend must do, run against any registered one.

``etai sandbox check NAME`` runs them and exits 1 if one fails; tests/harness/test_sandbox_conformance.py
runs each against every registered backend. A check gets ``open_sb(files)``, which starts a sandbox of
the backend under test holding those workspace files (closed when the block ends), and raises
``CheckFailed`` naming what differed. Plain ``assert`` is not used: ``python -O`` would drop it.
"""

from __future__ import annotations

import contextlib
import json
import random
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from harness import tools
from harness.sandbox import Limits, Sandbox, Status, ToolFailure, provider

# The small project most checks use: tests/sum.test.js passes (2 tests), tests/str.test.js fails (1).
SUM_JS = "function sum(a, b) {\n  return a + b;\n}\nmodule.exports = { sum };\n"
SUM_TEST = (
    "const { sum } = require('../src/sum');\n"
    "test('adds small numbers', () => { expect(sum(1, 2)).toBe(3); });\n"
    "test('adds negatives', () => { expect(sum(-1, -2)).toBe(-3); });\n"
)
STR_JS = "function shout(s) {\n  return s.toLowerCase() + '!';\n}\nmodule.exports = { shout };\n"
STR_TEST = (
    "const { shout } = require('../src/str');\n"
    "test('shouts', () => { expect(shout('hi')).toBe('HI!'); });\n"
)
PROJECT = {
    "src/sum.js": SUM_JS,
    "tests/sum.test.js": SUM_TEST,
    "src/str.js": STR_JS,
    "tests/str.test.js": STR_TEST,
}

# Test files that change their own expect and global object: a later file (or run) in the same
# warm Jest host must not see them.
ISOLATION = {
    "tests/a.test.js": "expect.extend({ toBeLeaky: () => ({ pass: true, message: () => '' }) });\n"
    "globalThis.LEAK = 1;\n"
    "test('a', () => expect(1).toBeLeaky());\n",
    "tests/b.test.js": "test('b', () => {\n  expect(expect(1).toBeLeaky).toBeUndefined();\n"
    "  expect(globalThis.LEAK).toBeUndefined();\n});\n"
    "test('inline snapshot', () => expect({ a: 1 }).toMatchInlineSnapshot(`\n{\n  \"a\": 1,\n}\n`));\n"
    "test.each([[1, 2], [2, 3]])('each %i', (x, y) => expect(x + 1).toBe(y));\n",
    "tests/c.test.js": "test('diff', () => expect({ n: [1, 2] }).toEqual({ n: [1, 3] }));\n",
}


def write_project(root: Path, files: dict[str, str], jest_config: dict | None = None) -> Path:
    """A Node project at ``root``: package.json (Jest, node environment) plus ``files``."""
    root.mkdir(parents=True, exist_ok=True)
    pkg = {
        "name": root.name.lower(),
        "private": True,
        "jest": {"testEnvironment": "node", **(jest_config or {})},
    }
    (root / "package.json").write_text(json.dumps(pkg))
    for name, text in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


class CheckFailed(Exception):
    """A backend did not do what the check requires."""


def expect(ok: bool, what: str) -> None:
    if not ok:
        raise CheckFailed(what)


OpenSandbox = Callable[..., contextlib.AbstractContextManager[Sandbox]]


# ---------------------------------------------------------------------------------------- checks
def exec_output_and_exit_code(open_sb: OpenSandbox) -> None:
    with open_sb(PROJECT) as sb:
        r = sb.exec(["sh", "-c", "echo out; echo err >&2; exit 3"])
        expect(
            (r.status, r.exit_code, r.stdout, r.stderr) == (Status.FAILED, 3, "out\n", "err\n"),
            f"exec gave {r}",
        )
        ok = sb.exec(["cat"], stdin=b"piped")
        expect((ok.status, ok.stdout) == (Status.PASSED, "piped"), f"stdin: {ok}")


def exec_deadline_kills_the_process_group(open_sb: OpenSandbox) -> None:
    # A duration no other process uses: the local sandbox's /proc shows the whole machine,
    # containers included, where another check's sleep may still be ending.
    sleep = f"sleep {random.randint(30000, 39999) / 1000}"
    with open_sb(PROJECT) as sb:
        r = sb.exec(["sh", "-c", f"{sleep} & {sleep}; echo never"], timeout=0.5)
        expect(r.status == Status.TIMEOUT and "never" not in r.stdout, f"deadline: {r}")
        # Both sleeps are gone (the background one too), rather than "it returned quickly".
        ps = sb.exec(
            [
                "sh",
                "-c",
                "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done",
            ]
        )
        expect(
            ps.status == Status.PASSED and sleep not in ps.stdout,
            "a sleep outlived the deadline",
        )
        expect(
            "/proc/[0-9]*" in ps.stdout, "the process listing saw nothing (not even its own shell)"
        )
        expect(
            sb.exec(["true"]).status == Status.PASSED,
            "the sandbox did not live on after a deadline",
        )


def exec_output_cap(open_sb: OpenSandbox) -> None:
    with open_sb(PROJECT) as sb:
        r = sb.exec(["sh", "-c", "yes flood"], output_cap=10_000, timeout=10)
        expect(
            r.status == Status.OUTPUT_LIMIT and r.truncated,
            f"flood: {r.status}, truncated={r.truncated}",
        )
        expect(
            len(r.stdout) + len(r.stderr) <= 10_000, f"kept {len(r.stdout) + len(r.stderr)} chars"
        )


def files_round_trip_and_workspace_confinement(open_sb: OpenSandbox) -> None:
    with open_sb(PROJECT) as sb:
        expect(
            sorted(sb.test_files) == ["tests/str.test.js", "tests/sum.test.js"],
            f"test files {sb.test_files}",
        )
        sb.write_file("notes/new.txt", b"hello \xff")
        expect(sb.read_file("notes/new.txt") == b"hello \xff", "bytes did not round-trip")
        for bad, why in (
            ("../outside", "leaves the workspace"),
            ("/etc/passwd", "leaves the workspace"),
            ("notes/../../x", "leaves the workspace"),
            ("missing.js", "no such file"),
        ):
            try:
                sb.read_file(bad)
            except ToolFailure as e:
                expect(why in str(e), f"read_file({bad!r}) refused with {e!r}, not {why!r}")
            else:
                raise CheckFailed(f"read_file({bad!r}) was not refused")


def jest_reports_pass_fail_and_location(open_sb: OpenSandbox) -> None:
    with open_sb(PROJECT) as sb:
        r = tools.call(sb, "jest_run", {})
        counts = (
            r.data.get("num_passed"),
            r.data.get("num_failed"),
            r.data.get("num_total"),
            r.data.get("num_test_files"),
        )
        expect(r.status == "failed" and counts == (2, 1, 3, 2), f"jest_run: {r.status} {counts}")
        [f] = r.data["failed_tests"]
        expect(f["name"] == "shouts" and f["file"] == "tests/str.test.js", f"failed test {f}")
        expect(
            f["location"] == {"file": "tests/str.test.js", "line": 2, "column": 44},
            f"location {f['location']}",
        )
        expect("toBe" in f["message"], f"message {f['message']!r}")
        n = tools.call(sb, "jest_run", {"name_pattern": "negatives"})
        expect(
            (n.status, n.data.get("num_passed")) == ("passed", 1),
            f"name pattern: {n.status} {n.data}",
        )


def edit_is_picked_up_by_warm_jest(open_sb: OpenSandbox) -> None:
    with open_sb(PROJECT) as sb:
        expect(
            tools.call(sb, "jest_run", {"test_file": "tests/str.test.js"}).status == "failed",
            "str fails first",
        )
        e = tools.call(
            sb, "file_edit", {"file": "src/str.js", "old": "toLowerCase", "new": "toUpperCase"}
        )
        expect(e.ok and e.data["line"] == 2, f"file_edit: {e}")
        r = tools.call(sb, "jest_run", {"test_file": "tests/str.test.js"})
        expect(
            (r.status, r.data.get("num_passed"), r.data.get("num_test_files")) == ("passed", 1, 1),
            f"after the edit: {r.status} {r.data}",
        )
        diff = tools.call(sb, "git_diff", {}).data["output"]
        expect(
            "-  return s.toLowerCase() + '!';" in diff
            and "+  return s.toUpperCase() + '!';" in diff,
            f"git_diff: {diff!r}",
        )
        status = tools.call(sb, "git_status", {}).data["output"].strip()
        expect(status == "M src/str.js", f"git_status: {status!r}")


def warm_jest_keeps_test_files_isolated(open_sb: OpenSandbox) -> None:
    """Warm hosts share Jest's compiled code between files and runs; every test file still gets a
    fresh expect, fresh globals and working snapshot/each/diff machinery."""
    with open_sb(ISOLATION, jest_config={"randomize": True}) as sb:
        for _ in range(2):  # the second round runs on hosts that already ran every file
            for f, want in (("tests/a.test.js", 1), ("tests/b.test.js", 4)):
                r = tools.call(sb, "jest_run", {"test_file": f})
                expect(
                    (r.status, r.data.get("num_passed")) == ("passed", want),
                    f"{f}: {r.status} {r.data}",
                )
            r = tools.call(sb, "jest_run", {})
            expect(
                (r.data.get("num_passed"), r.data.get("num_failed")) == (5, 1),
                f"full run: {r.data}",
            )
            [f] = r.data["failed_tests"]
            expect(
                "toEqual" in f["message"]
                and f["location"] == {"file": "tests/c.test.js", "line": 1, "column": 42},
                f"diff failure {f}",
            )


def failure_messages_name_only_the_workspace(open_sb: OpenSandbox) -> None:
    """A file that does not compile (ESM in a CommonJS project) reads as in stock Jest: the message
    names the test file, never the runner's own files."""
    with open_sb({"tests/esm.test.js": "import x from './x';\ntest('x', () => {});\n"}) as sb:
        for _ in range(2):
            answer = sb.request(
                "jest",
                {
                    "test_files": None,
                    "name_pattern": None,
                    "timeout_ms": 20_000,
                    "output_cap": sb.limits.output_cap,
                },
                timeout=20,
            )
            [tr] = answer["report"]["testResults"]
            msg = tr["failureMessage"] or ""
            expect("Cannot use import statement outside a module" in msg, f"message {msg!r}")
            expect(
                not any(x in msg for x in ("jest-warm", "jest-host", "runner.js")),
                f"runner files in {msg!r}",
            )


def a_run_split_between_warm_hosts_reports_every_test_once(open_sb: OpenSandbox) -> None:
    files = {
        f"tests/t{i}.test.js": f"test('t{i} a', () => expect({i}).toBe({i}));\n"
        f"test('t{i} b', () => expect({i}).toBe({i if i != 3 else -1}));\n"
        for i in range(5)
    }
    with open_sb(files) as sb:
        r = tools.call(sb, "jest_run", {})
    got = (
        r.status,
        r.data.get("num_test_files"),
        r.data.get("num_total"),
        r.data.get("num_failed"),
    )
    expect(got == ("failed", 5, 10, 1), f"split run: {got}")
    want = sorted(
        f"tests/t{i}.test.js::t{i} {x}" for i in range(5) for x in "ab" if (i, x) != (3, "b")
    )
    expect(sorted(r.data["passed_tests"]) == want, f"passed {r.data['passed_tests']}")
    expect(
        [f["name"] for f in r.data["failed_tests"]] == ["t3 b"], f"failed {r.data['failed_tests']}"
    )


def close_is_idempotent(open_sb: OpenSandbox) -> None:
    with open_sb(PROJECT) as sb:
        sb.close()
        sb.close()
        r = tools.call(sb, "file_read", {"file": "package.json"})
        expect(r.status == "infra_error", f"a closed sandbox answered file_read: {r.status}")


CHECKS: tuple[Callable[[OpenSandbox], None], ...] = (
    exec_output_and_exit_code,
    exec_deadline_kills_the_process_group,
    exec_output_cap,
    files_round_trip_and_workspace_confinement,
    jest_reports_pass_fail_and_location,
    edit_is_picked_up_by_warm_jest,
    warm_jest_keeps_test_files_isolated,
    failure_messages_name_only_the_workspace,
    a_run_split_between_warm_hosts_reports_every_test_once,
    close_is_idempotent,
)


# ---------------------------------------------------------------------------------------- running
@dataclass(frozen=True)
class CheckResult:
    name: str
    ok: bool
    detail: str  # what differed, or the error, when not ok
    seconds: float


def opener(kind: str, root: Path, *, image: str | None = None) -> OpenSandbox:
    """open_sb for backend ``kind``: writes the files under ``root`` and starts a sandbox on them."""
    backend = provider(kind)
    n = iter(range(1_000_000))

    @contextlib.contextmanager
    def open_sb(files: dict[str, str], jest_config: dict | None = None) -> Iterator[Sandbox]:
        ws = write_project(root / f"ws{next(n)}", files, jest_config)
        sb = backend.start(ws, limits=Limits(timeout_s=20), image=image)
        try:
            yield sb
        finally:
            sb.close()

    return open_sb


def run_check(check: Callable[[OpenSandbox], None], open_sb: OpenSandbox) -> CheckResult:
    t0 = time.monotonic()
    try:
        check(open_sb)
    except CheckFailed as e:
        return CheckResult(check.__name__, False, str(e), time.monotonic() - t0)
    except Exception as e:  # a backend that raises is failing the check, not crashing the command
        last = traceback.format_exception_only(type(e), e)[-1].strip()
        return CheckResult(check.__name__, False, f"raised {last}", time.monotonic() - t0)
    return CheckResult(check.__name__, True, "", time.monotonic() - t0)


def run_all(
    kind: str,
    *,
    image: str | None = None,
    on_result: Callable[[CheckResult], None] = lambda r: None,
) -> list[CheckResult]:
    """Every check against backend ``kind`` (InputError if it is not registered)."""
    provider(kind)
    results = []
    with tempfile.TemporaryDirectory(prefix="etai-check-") as tmp:
        open_sb = opener(kind, Path(tmp), image=image)
        for check in CHECKS:
            results.append(run_check(check, open_sb))
            on_result(results[-1])
    return results
